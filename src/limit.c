/*-------------------------------------------------------------------------
 * limit.c
 *	  Owns the limits that keep one role's query from stalling every stream
 *	  of a database, or from running code before its privileges are checked
 *	  (issue 7):
 *
 *	 streamwm.query_timeout		 a statement timeout of our own around each
 *								 query's upsert in a step (planning included);
 *								 a query that exceeds it fails like any other
 *								 failing query (last_error, backoff), while a
 *								 real cancel or shutdown still ends the step;
 *	 privileges before planning	 the range table of the analyzed and rewritten
 *								 statement is checked with ExecCheckRTPerms
 *								 before it is planned, so that an IMMUTABLE
 *								 function folded at plan time never runs for a
 *								 role that may not read the tables;
 *								 the same timeout bounds the statements of a
 *								 step that run a stream owner's code (reading
 *								 the stream, retention's DELETE): they fail
 *								 the step, which the worker retries with
 *								 backoff (sw_spi_exec_bounded);
 *	 streamwm.max_windows_per_row  create_query refuses size/hop above it;
 *	 streamwm.work_mem			 the work_mem a query's statements in a step
 *								 run with, as autovacuum_work_mem is for
 *								 VACUUM (sw_step_memory_enter/leave);
 *	 'earliest' after retention	 where a new 'earliest' query starts so that
 *								 it never overwrites a complete window with a
 *								 partial one (SPEC section 8).
 *
 * The timeout is a USER_TIMEOUT registered once per backend.  Its handler
 * only sets flags (it runs in a signal handler): ours, QueryCancelPending
 * and InterruptPending, and the latch.  The next CHECK_FOR_INTERRUPTS()
 * then raises the ordinary "canceling statement" error, which close_windows()
 * recognises by our flag.  It is disabled on every path out.
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "parser/analyze.h"
#include "parser/parser.h"
#include "rewrite/rewriteHandler.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/timeout.h"
#include "utils/timestamp.h"

#include "catalog.h"
#include "limit.h"
#include "query.h"
#include "version.h"
#include "window.h"

PG_FUNCTION_INFO_V1(streamwm_earliest_closed_until);

/* GUCs */
int			sw_query_timeout_ms = 30000;
int			sw_max_windows_per_row = 10000;
int			sw_max_groups_per_window = 1000000;
int			sw_step_work_mem_kb = 65536;

/* our timeout, MAX_TIMEOUTS until registered in this backend */
static TimeoutId query_timeout_id = MAX_TIMEOUTS;
static volatile sig_atomic_t query_timeout_fired = false;

/* Define the GUCs of this file; called from _PG_init. */
void
sw_limits_define_gucs(void)
{
	DefineCustomIntVariable("streamwm.query_timeout",
							"Longest a window query may run in one processing step.",
							"A query that runs longer is canceled, recorded in "
							"streamwm.queries.last_error and retried with backoff, "
							"so that it cannot hold up the other streams of its "
							"database. 0 turns the limit off.",
							&sw_query_timeout_ms,
							30000, 0, INT_MAX,
							PGC_SUSET, GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("streamwm.max_windows_per_row",
							"Most windows a row may belong to (size / hop) in a new query.",
							"create_query refuses a query whose size / hop is larger.",
							&sw_max_windows_per_row,
							10000, 1, INT_MAX,
							PGC_SUSET, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("streamwm.max_groups_per_window",
							"Most groups (result rows) one window of a query may have.",
							"A step whose window has more fails for that query, which is "
							"recorded in streamwm.queries.last_error and retried with "
							"backoff; other queries go on. 0 turns the limit off.",
							&sw_max_groups_per_window,
							1000000, 0, INT_MAX,
							PGC_SUSET, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("streamwm.work_mem",
							"work_mem of a query's statements in a processing step.",
							"A step's fold and combine hash and sort as many groups as "
							"its windows have; with the default work_mem they spill to "
							"disk past a few tens of thousands. -1 uses work_mem.",
							&sw_step_work_mem_kb,
							65536, -1, MAX_KILOBYTES,
							PGC_SUSET, GUC_UNIT_KB,
							NULL, NULL, NULL);
}

/*
 * Run what follows, until sw_step_memory_leave(), with work_mem =
 * streamwm.work_mem (unless it is -1; below 64kB counts as 64kB, work_mem's
 * least).  An error in between undoes it with the caller's subtransaction.
 * Returns the GUC nest level to leave.
 */
int
sw_step_memory_enter(void)
{
	int			nestlevel = NewGUCNestLevel();

	if (sw_step_work_mem_kb >= 0)
	{
		char		buf[32];

		snprintf(buf, sizeof(buf), "%d", Max(sw_step_work_mem_kb, 64));
		(void) set_config_option("work_mem", buf, PGC_USERSET, PGC_S_SESSION,
								 GUC_ACTION_SAVE, true, 0, false);
	}
	return nestlevel;
}

void
sw_step_memory_leave(int nestlevel)
{
	AtEOXact_GUC(true, nestlevel);
}

/*
 * Refuse a window of a query that has more groups than
 * streamwm.max_groups_per_window: its rows are not written (the query's
 * subtransaction rolls back) and the query is backed off, so one query that
 * groups by something unbounded cannot grow its result table and the step
 * without limit.
 */
void
sw_check_groups_per_window(const char *query, int64 groups)
{
	if (sw_max_groups_per_window > 0 && groups > sw_max_groups_per_window)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("a window of query \"%s\" has " INT64_FORMAT " groups, more than streamwm.max_groups_per_window (%d)",
						query, groups, sw_max_groups_per_window),
				 errhint("Group by fewer or coarser keys, or raise streamwm.max_groups_per_window.")));
}

/*
 * The timeout handler: runs in a signal handler, so it only sets flags.
 * The query is then canceled at its next CHECK_FOR_INTERRUPTS().
 */
static void
query_timeout_handler(void)
{
	query_timeout_fired = true;
	QueryCancelPending = true;
	InterruptPending = true;
	SetLatch(MyLatch);
}

/*
 * The second timeout: user code can catch the cancel (PL/pgSQL's WHEN
 * query_canceled) and go on, so a statement still running
 * SW_TIMEOUT_GRACE_MS after its cancel ends the process (FATAL, which no
 * user code can catch).  A worker is then restarted by the postmaster and
 * backs off the stream (worker.c); a user's process() session ends.
 */
#define SW_TIMEOUT_GRACE_MS 5000

static TimeoutId query_kill_id = MAX_TIMEOUTS;

static void
query_kill_handler(void)
{
	query_timeout_fired = true;
	ProcDiePending = true;
	InterruptPending = true;
	SetLatch(MyLatch);
}

/* Arm streamwm.query_timeout for the statement about to run (and be planned). */
void
sw_query_timeout_enable(void)
{
	if (query_timeout_id == MAX_TIMEOUTS)
		query_timeout_id = RegisterTimeout(USER_TIMEOUT, query_timeout_handler);
	if (query_kill_id == MAX_TIMEOUTS)
		query_kill_id = RegisterTimeout(USER_TIMEOUT, query_kill_handler);
	query_timeout_fired = false;
	if (sw_query_timeout_ms > 0)
	{
		EnableTimeoutParams timeouts[2];

		timeouts[0].id = query_timeout_id;
		timeouts[0].type = TMPARAM_AFTER;
		timeouts[0].delay_ms = sw_query_timeout_ms;
		timeouts[1].id = query_kill_id;
		timeouts[1].type = TMPARAM_AFTER;
		timeouts[1].delay_ms = sw_query_timeout_ms > INT_MAX - SW_TIMEOUT_GRACE_MS ?
			INT_MAX : sw_query_timeout_ms + SW_TIMEOUT_GRACE_MS;
		enable_timeouts(timeouts, 2);
	}
}

/* Disarm both; harmless when they are not armed or already fired. */
void
sw_query_timeout_disable(void)
{
	if (query_timeout_id != MAX_TIMEOUTS)
		disable_timeout(query_timeout_id, false);
	if (query_kill_id != MAX_TIMEOUTS)
		disable_timeout(query_kill_id, false);
}

/* Did streamwm.query_timeout fire since the last sw_query_timeout_enable()? */
bool
sw_query_timeout_fired(void)
{
	return query_timeout_fired;
}

/* streamwm.query_timeout as SHOW prints it ("30s"), for messages. */
const char *
sw_query_timeout_string(void)
{
	return GetConfigOptionByName("streamwm.query_timeout", NULL, false);
}

/*
 * Run one of streamwm's own statements that can run a stream owner's code
 * (reading the stream, retention's DELETE: the owner's triggers, row-level
 * security policies, index expressions), or that waits on another node
 * (a distributed stream's fence, commit log reads), under
 * streamwm.query_timeout, so that neither a stream's owner nor a lock held
 * on a worker node can stall the worker for every other stream.
 * The timeout fails the step with an error saying so ('what': "reading
 * stream x"); the worker logs it and retries the stream with backoff.  If
 * the timeout is already armed (the statement runs inside another bounded
 * one), that one's limit applies.
 */
/*
 * With the given snapshot, or a new one for InvalidSnapshot; the rows to
 * SPI_tuptable, or to 'dest' (sw_spi_exec_snapshot_to: a snapshot is
 * then required).
 */
static void
exec_with(const char *sql, int nargs, Oid *types, Datum *values, const char *nulls,
		  int expected, Snapshot snapshot, DestReceiver *dest)
{
	if (dest != NULL)
		sw_spi_exec_snapshot_to(sql, nargs, types, values, nulls, snapshot, dest);
	else if (snapshot == InvalidSnapshot)
		sw_spi_exec(sql, nargs, types, values, nulls, expected);
	else
		sw_spi_exec_snapshot(sql, nargs, types, values, nulls, expected, snapshot);
}

/*
 * Is streamwm.query_timeout armed (a step or a bounded statement is
 * running, and this code runs inside it)?
 */
bool
sw_query_timeout_active(void)
{
	return query_timeout_id != MAX_TIMEOUTS && get_timeout_active(query_timeout_id);
}

static void
exec_bounded(const char *what, const char *sql, int nargs, Oid *types, Datum *values,
			 const char *nulls, int expected, Snapshot snapshot, DestReceiver *dest)
{
	MemoryContext cxt = CurrentMemoryContext;

	if (sw_query_timeout_active())
	{
		exec_with(sql, nargs, types, values, nulls, expected, snapshot, dest);
		return;
	}
	PG_TRY();
	{
		sw_query_timeout_enable();
		exec_with(sql, nargs, types, values, nulls, expected, snapshot, dest);
		sw_query_timeout_disable();
		/* a timeout that fired just before it was disabled fails here */
		CHECK_FOR_INTERRUPTS();
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		sw_query_timeout_disable();
		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		if (edata->sqlerrcode != ERRCODE_QUERY_CANCELED || !sw_query_timeout_fired())
			PG_RE_THROW();
		FlushErrorState();
		ereport(ERROR,
				(errcode(ERRCODE_QUERY_CANCELED),
				 errmsg("%s exceeded streamwm.query_timeout (%s)",
						what, sw_query_timeout_string()),
				 errdetail("The stream owner's code (triggers, row-level security policies, index expressions) runs in it, and it waits for locks on the stream's tables (on their nodes, for a distributed stream)."),
				 errhint("The step is rolled back and retried.")));
	}
	PG_END_TRY();
}

void
sw_spi_exec_bounded(const char *what, const char *sql, int nargs, Oid *types,
					Datum *values, const char *nulls, int expected, Snapshot snapshot)
{
	exec_bounded(what, sql, nargs, types, values, nulls, expected, snapshot, NULL);
}

/* The same for a read-only SELECT, its rows sent to 'dest'. */
void
sw_spi_exec_bounded_to(const char *what, const char *sql, int nargs, Oid *types,
					   Datum *values, const char *nulls, Snapshot snapshot,
					   DestReceiver *dest)
{
	exec_bounded(what, sql, nargs, types, values, nulls, SPI_OK_SELECT, snapshot, dest);
}

/*
 * Check the privileges a statement needs on every table it reads or writes,
 * as the current user, before it is planned: the planner folds IMMUTABLE
 * functions, so a query that may not read its tables must not get that far.
 * The statement is parsed, analyzed and rewritten (views expanded, their
 * tables checked as the view's owner) exactly as SPI will do it, and the
 * range tables of the result go to ExecCheckRTPerms, as the executor does.
 */
void
sw_check_statement_privileges(const char *sql, int nparams, const Oid *types)
{
	List	   *raw = raw_parser(sql, RAW_PARSE_DEFAULT);
	ListCell   *lc;

	foreach(lc, raw)
	{
		RawStmt    *rs = lfirst_node(RawStmt, lc);
		Query	   *query = parse_analyze_fixedparams(rs, sql, types, nparams, NULL);
		List	   *rewritten = QueryRewrite(query);
		ListCell   *lc2;

		foreach(lc2, rewritten)
			(void) ExecCheckRTPerms(sw_relation_rtes(lfirst_node(Query, lc2)), true);
	}
}

/*
 * Refuse a query whose rows would each belong to more than
 * streamwm.max_windows_per_row windows (size / hop).  Every window of a row
 * costs an aggregate transition (general plan) or a pane read (pane plan),
 * so the bound keeps one query from costing 10^10 times its input
 * (hop => '1 microsecond', size => '1 day').  create_query checks it
 * through streamwm_internal._check_query().
 */
void
sw_check_windows_per_row(int64 hop_us, int64 size_us)
{
	if (hop_us <= 0 || size_us <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("hop and size must be positive")));
	if (size_us / hop_us > sw_max_windows_per_row)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("size over hop puts each row in " INT64_FORMAT " windows, more than streamwm.max_windows_per_row (%d)",
						size_us / hop_us, sw_max_windows_per_row),
				 errhint("Use a larger hop, or ask a superuser to raise streamwm.max_windows_per_row.")));
}

/*
 * streamwm_internal._earliest_closed_until(stream regclass, hop interval,
 * size interval, origin timestamptz) RETURNS timestamptz: the closed_until
 * of a new 'earliest' query.
 *
 * Retention may have removed rows with event time before the stream's
 * retained_from, so a window starting before it may be partial.  The
 * first window a step computes for a query is the first one with
 * start > closed_until - size; returning (first hop-aligned start >=
 * retained_from) - hop + size makes that the first complete window.  The
 * stream's catalog row is locked FOR SHARE, so a step that is removing
 * rows commits first and none runs until the query exists.
 */
Datum
streamwm_earliest_closed_until(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	int64		hop_us = sw_interval_usec(PG_GETARG_INTERVAL_P(1));
	int64		size_us = sw_interval_usec(PG_GETARG_INTERVAL_P(2));
	TimestampTz origin = PG_GETARG_TIMESTAMPTZ(3);
	TimestampTz retained_from;
	TimestampTz first;

	sw_require_extension_version();

	if (hop_us <= 0 || size_us <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("hop and size must be positive")));
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	/* only a role that manages the stream may lock its catalog row */
	(void) sw_check_stream_manager(relid, false);
	retained_from = sw_catalog_retained_from(relid);
	SPI_finish();
	if (TIMESTAMP_NOT_FINITE(retained_from))
		PG_RETURN_TIMESTAMPTZ(DT_NOBEGIN);
	first = sw_pane_start(retained_from, hop_us, origin);
	if (first < retained_from)
		first += hop_us;
	PG_RETURN_TIMESTAMPTZ(first - hop_us + size_us);
}
