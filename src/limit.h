/*-------------------------------------------------------------------------
 * limit.h
 *	  Limits on what one role's query may cost: the query timeout, the
 *	  privilege check before planning, windows per row, a step's work_mem.
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWM_LIMIT_H
#define STREAMWM_LIMIT_H

#include "tcop/dest.h"
#include "utils/snapshot.h"

/* GUCs */
extern int	sw_query_timeout_ms;
extern int	sw_max_windows_per_row;
extern int	sw_max_groups_per_window;
extern int	sw_step_work_mem_kb;

extern void sw_limits_define_gucs(void);
extern int	sw_step_memory_enter(void);
extern void sw_step_memory_leave(int nestlevel);
extern void sw_query_timeout_enable(void);
extern void sw_query_timeout_disable(void);
extern bool sw_query_timeout_fired(void);
extern bool sw_query_timeout_active(void);
extern const char *sw_query_timeout_string(void);
extern void sw_spi_exec_bounded(const char *what, const char *sql, int nargs,
								Oid *types, Datum *values, const char *nulls,
								int expected, Snapshot snapshot);
extern void sw_spi_exec_bounded_to(const char *what, const char *sql, int nargs,
								   Oid *types, Datum *values, const char *nulls,
								   Snapshot snapshot, DestReceiver *dest);
extern void sw_check_windows_per_row(int64 hop_us, int64 size_us);
extern void sw_check_groups_per_window(const char *query, int64 groups);
extern void sw_check_statement_privileges(const char *sql, int nparams,
										  const Oid *types);

#endif							/* STREAMWM_LIMIT_H */
