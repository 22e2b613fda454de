/*-------------------------------------------------------------------------
 * catalog.h
 *	  Access to streamwm's catalog tables and small SPI helpers.  Every
 *	  statement on the catalog is a function here, named for what it does.
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWM_CATALOG_H
#define STREAMWM_CATALOG_H

#include "executor/spi.h"
#include "nodes/pg_list.h"
#include "utils/snapshot.h"

struct SwStreamClock;			/* watermark.h */
struct SwQueryDef;				/* query.h */

/* GUCs (streamwm.c) */
extern int	sw_batch_size;
extern bool sw_pane_engine;
extern bool sw_notify;

/* Saved identity while running SQL as a stream's or query's owner. */
typedef struct SwRoleContext
{
	Oid			save_userid;
	int			save_sec_context;
	int			save_nestlevel;
} SwRoleContext;

/* One row of streamwm.query_def, as much as DDL on what it reads needs. */
typedef struct SwStoredQuery
{
	char	   *name;
	Oid			owner;
	Oid			stream;
	char	   *query;			/* bound text */
} SwStoredQuery;

/* A stream in the worker's schedule (streamwm.stream_def). */
typedef struct SwScheduledStream
{
	Oid			stream;
	bool		granularity_null;
	int64		granularity_us;
	int64		delay_us;		/* watermark_delay */
	bool		step_started;	/* a step was marked as started */
	int32		step_crashes;
} SwScheduledStream;

/* what every statement of streamwm's own runs under */
#define SW_SAFE_SEARCH_PATH "pg_catalog, pg_temp"

extern Oid	sw_catalog_owner(void);
extern void sw_enter_catalog(SwRoleContext *cx);
extern int	sw_enter_safe_path(void);
extern void sw_leave_safe_path(int nestlevel);
extern bool sw_may_manage(Oid owner);
extern void sw_check_may_insert(Oid relid);
extern bool sw_may_see_stream(Oid relid, Oid owner);
extern bool sw_lookup_stream(Oid relid, bool lock, Oid *owner, int *npartitions);
extern bool sw_is_ingest_function(Oid funcoid);
extern Oid	sw_distributed_stream_in_schema(Oid nspid);
extern void sw_not_a_stream(Oid relid) pg_attribute_noreturn();
extern Oid	sw_check_stream_manager(Oid relid, bool lock);
extern bool sw_stream_forces_rls(Oid relid);
extern bool sw_stream_has_statistics(Oid relid);
extern void sw_enter_role(Oid role, const char *search_path, SwRoleContext *cx);
extern void sw_leave_role(SwRoleContext *cx);
extern void *sw_try_as_role(Oid role, void *(*fn) (void *arg), void *arg,
							MemoryContext cxt, ErrorData **error);
extern Oid	sw_relation_owner(Oid relid);
extern int	sw_stream_partitions(Oid relid);
extern char *sw_relation_name(Oid relid);
extern bool sw_stream_distributed(Oid relid, Oid *rows, Oid *log);
extern Oid	sw_stream_creator(Oid relid);
extern void sw_stream_distributed_changed(void);
extern Oid	sw_stream_rows(Oid relid);
extern char *sw_stream_rows_name(Oid relid);
extern void sw_spi_exec(const char *sql, int nargs, Oid *types, Datum *values,
						const char *nulls, int expected);
extern Datum sw_spi_getdatum(int row, int col, bool *isnull);
extern Datum sw_int8_array(const int64 *values, int n);
extern Datum sw_int4_array(const int32 *values, int n);
extern Datum sw_timestamptz_array(const TimestampTz *values, int n);
extern void sw_spi_exec_snapshot(const char *sql, int nargs, Oid *types, Datum *values,
								 const char *nulls, int expected, Snapshot snapshot);
extern void sw_spi_exec_snapshot_to(const char *sql, int nargs, Oid *types, Datum *values,
									const char *nulls, Snapshot snapshot,
									DestReceiver *dest);
extern void sw_spi_exec_latest(const char *sql, int nargs, Oid *types, Datum *values,
							   const char *nulls, int expected);

/* streams (the caller acts as the catalog's owner unless said otherwise) */
extern bool sw_catalog_is_stream(Oid relid);
extern List *sw_catalog_managed_streams(void);
extern bool sw_catalog_lock_stream(Oid relid, bool skip_locked,
								   struct SwStreamClock *clock, int64 *retention_us);
extern void sw_catalog_prune_commit_log(Oid relid, Datum offsets);
extern void sw_catalog_store_step(Oid relid, const struct SwStreamClock *clock,
								  int64 events, int64 late_events, TimestampTz now);
extern void sw_catalog_add_retention_mark(Oid relid, TimestampTz watermark,
										  Datum offsets, TimestampTz min_event_time);
extern void sw_catalog_log_late_rows(Oid relid, int n, const int32 *partition,
									 const int64 *offset, const TimestampTz *event_time,
									 const TimestampTz *watermark,
									 const TimestampTz *arrival);
extern bool sw_catalog_has_late_in(Oid relid, int64 start, Datum processed, Datum folded);
extern bool sw_catalog_has_late_before(Oid relid, TimestampTz cutoff);
extern void sw_catalog_expire_late_log(Oid relid, TimestampTz cutoff);
extern bool sw_catalog_newest_mark_below(Oid relid, TimestampTz horizon,
										 Datum *offsets, TimestampTz *watermark);
extern void sw_catalog_consume_marks(Oid relid, TimestampTz horizon,
									 Datum offsets, TimestampTz watermark);
extern void sw_catalog_set_retained_from(Oid relid, TimestampTz horizon);
extern void sw_catalog_count_expired(Oid relid, int64 removed);
extern TimestampTz sw_catalog_retained_from(Oid relid);
extern TimestampTz sw_catalog_retention_horizon(Oid relid);
extern void sw_catalog_processed_offsets(Oid relid, int np, int64 *processed);
extern bool sw_catalog_lock_stream_row(Oid relid);
extern void sw_catalog_record_purge(Oid relid, int64 unread, TimestampTz newest,
									bool isnull);
extern bool sw_catalog_purge_positions(Oid relid, Datum *offsets, Datum *watermark);

/* the worker's schedule */
extern List *sw_catalog_schedule(void);
extern void sw_catalog_steps_crashed(List *relids);
extern void sw_catalog_mark_step_started(Oid relid);
extern int	sw_catalog_stream_holder_pid(Oid relid);

/* queries */
extern List *sw_catalog_stream_queries(Oid relid);
extern struct SwQueryDef *sw_catalog_load_query(const char *name);
extern void sw_catalog_query_succeeded(const char *name, TimestampTz closed_until,
									   int64 windows, int64 rows, Oid result_table,
									   int64 refired);
extern void sw_catalog_record_read(const char *name, Datum offsets);
extern void sw_catalog_record_session_from(const char *name, TimestampTz session_from);
extern void sw_catalog_make_session(const char *name, Datum gap, int64 gap_us);
extern void sw_catalog_query_failed(const char *name, const char *message,
									bool drop_pane_state);
extern void sw_catalog_record_panes(const char *name, Oid pane_table,
									const char *stamp, Datum folded);
extern void sw_catalog_make_count_query(const char *name, int32 size, int32 slide);
extern void sw_catalog_record_count_needs(const char *name, TimestampTz needs);
extern List *sw_catalog_queries_reading(List *relids, Oid nspid);
extern void sw_catalog_rebind_query(const char *name, const char *query, Datum reads);
extern void sw_catalog_alter_query(const char *name, const char *query,
								   const char *query_text, const char *plan,
								   Datum reads, bool keep_panes);

#endif							/* STREAMWM_CATALOG_H */
