/*-------------------------------------------------------------------------
 * catalog.h
 *	  Access to streamwm's catalog tables and small SPI helpers.
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWM_CATALOG_H
#define STREAMWM_CATALOG_H

#include "executor/spi.h"

/* GUCs (streamwm.c) */
extern int	sw_batch_size;
extern bool sw_pane_engine;

/* Saved identity while running SQL as a stream's or query's owner. */
typedef struct SwRoleContext
{
	Oid			save_userid;
	int			save_sec_context;
	int			save_nestlevel;
} SwRoleContext;

/* what every statement of streamwm's own runs under */
#define SW_SAFE_SEARCH_PATH "pg_catalog, pg_temp"

extern Oid	sw_catalog_owner(void);
extern void sw_enter_catalog(SwRoleContext *cx);
extern int	sw_enter_safe_path(void);
extern void sw_leave_safe_path(int nestlevel);
extern bool sw_may_manage(Oid owner);
extern bool sw_may_see_stream(Oid relid, Oid owner);
extern bool sw_lookup_stream(Oid relid, bool lock, Oid *owner, int *npartitions);
extern void sw_not_a_stream(Oid relid) pg_attribute_noreturn();
extern Oid	sw_check_stream_manager(Oid relid, bool lock);
extern bool sw_stream_forces_rls(Oid relid);
extern void sw_enter_role(Oid role, const char *search_path, SwRoleContext *cx);
extern void sw_leave_role(SwRoleContext *cx);
extern Oid	sw_relation_owner(Oid relid);
extern int	sw_stream_partitions(Oid relid);
extern char *sw_relation_name(Oid relid);
extern void sw_spi_exec(const char *sql, int nargs, Oid *types, Datum *values,
						const char *nulls, int expected);
extern Datum sw_spi_getdatum(int row, int col, bool *isnull);
extern Datum sw_int8_array(const int64 *values, int n);
extern Datum sw_int4_array(const int32 *values, int n);
extern Datum sw_timestamptz_array(const TimestampTz *values, int n);
extern void sw_reraise(MemoryContext cxt, const char *prefix, const char *context,
					   const char *source) pg_attribute_noreturn();

#endif							/* STREAMWM_CATALOG_H */
