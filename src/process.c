/*-------------------------------------------------------------------------
 * process.c
 *	  Owns one processing step of a stream (SPEC section 6): what
 *	  streamwm.process() runs synchronously and a background worker runs on
 *	  each tick.
 *
 * A step, all in the caller's transaction:
 *
 *	 1. lock the stream's row in streamwm.stream_def (FOR UPDATE): steps on
 *		one stream are serialised, and drop_stream/drop_query take the same
 *		lock first, so they cannot deadlock with a step;
 *	 2. read the committed rows after each partition's processed offset, in
 *		offset order (= arrival order across partitions, see ingest.c), in
 *		batches of streamwm.batch_size;
 *	 3. feed each row to the watermark rule (watermark.c), which says
 *		whether it is late and advances W; late rows go to
 *		streamwm.late_event_log;
 *	 4. when every committed row has been read, advance W once more with
 *		the step's clock 'now' (idle partitions);
 *	 5. store the offsets, partition maxima, W and counters;
 *	 6. (a stream with a general-plan query: summarise the BRIN ranges
 *		written since the last step, see summarize_new_ranges)
 *		for each query of the stream, in a subtransaction and as the query's
 *		owner, upsert every window that W has closed since the query's
 *		closed_until, and move closed_until to W (query.c builds the
 *		statement); an error is recorded in query_def.last_error and the
 *		query retries from the same closed_until next step;
 *	 7. apply retention: accepted rows by event time once no query needs
 *		them (found by offset, up to a retention_mark), late rows
 *		(evidence) only once they arrived retention ago.
 *
 * Reading the stream and retention's DELETE run as the stream's owner and
 * may run the owner's code (policies, triggers): they are bounded by
 * streamwm.query_timeout, and a timeout fails the whole step.
 *
 * Why this is exactly once: the results, the offsets, W, the late log and
 * closed_until change in one transaction, so after a crash either all of a
 * step is there or none of it, and the next step starts from the same
 * offsets and closed_until.  A window is computed from the stream table
 * itself (processed, non-late rows with offsets after the query's start),
 * so recomputing it gives the same rows and the UPSERT overwrites them.
 * Computing the closing windows after the batch rather than at the event
 * that closed them is exact: any row read after a window [a, b) closed has
 * event time < b <= W and was late, so it is excluded either way.
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "common/int.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/timestamp.h"

#include "catalog.h"
#include "guard.h"
#include "limit.h"
#include "process.h"
#include "purge.h"
#include "query.h"
#include "watermark.h"
#include "window.h"

PG_FUNCTION_INFO_V1(streamwm_process);

/* longest a worker waits before retrying a failing query */
#define SW_QUERY_MAX_BACKOFF_US (60 * USECS_PER_SEC)

/* Late rows found in a step, written to streamwm.late_event_log. */
typedef struct LateRows
{
	int			n;
	int			cap;
	int32	   *partition;
	int64	   *offset;
	TimestampTz *event_time;
	TimestampTz *watermark;
	TimestampTz *arrival;
	/* retention marks (expire_rows), one per SW_MARK_ROWS accepted rows */
	int			nmarks;
	int			markcap;
	TimestampTz *mark_watermark;
	TimestampTz *mark_min;
	Datum	   *mark_offsets;
	int64		pending_rows;	/* accepted rows since the last mark */
	TimestampTz pending_min;	/* and their earliest event time */
} LateRows;

/*
 * How many accepted rows one retention mark covers at most: retention reads
 * the rows of the marks below its horizon, so a catch-up step that read a
 * million rows must not leave one mark for all of them.
 */
#define SW_MARK_ROWS 4096

static void
late_rows_add(LateRows *late, int32 partition, int64 offset,
			  TimestampTz event_time, TimestampTz watermark, TimestampTz arrival)
{
	if (late->n == late->cap)
	{
		late->cap = Max(64, late->cap * 2);
		late->partition = repalloc_huge(late->partition, late->cap * sizeof(int32));
		late->offset = repalloc_huge(late->offset, late->cap * sizeof(int64));
		late->event_time = repalloc_huge(late->event_time, late->cap * sizeof(TimestampTz));
		late->watermark = repalloc_huge(late->watermark, late->cap * sizeof(TimestampTz));
		late->arrival = repalloc_huge(late->arrival, late->cap * sizeof(TimestampTz));
	}
	late->partition[late->n] = partition;
	late->offset[late->n] = offset;
	late->event_time[late->n] = event_time;
	late->watermark[late->n] = watermark;
	late->arrival[late->n] = arrival;
	late->n++;
}

/* max_future_skew of a stream (SQL NULL: no limit) into its clock. */
static void
load_future_skew(SwStreamClock *clock, Datum skew, bool isnull)
{
	clock->limit_future = !isnull;
	clock->max_future_skew_us = isnull ? 0 : sw_interval_usec(DatumGetIntervalP(skew));
	clock->future_events = 0;
}

/*
 * Lock a stream and load its watermark state.  Returns false when
 * skip_locked and another step holds the stream.
 */
static bool
load_stream(Oid relid, bool skip_locked, SwStreamClock *clock, int64 *retention_us)
{
	Oid			types[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(relid)};
	bool		isnull;
	Datum		skew;

	sw_spi_exec(skip_locked ?
				"SELECT partitions, watermark_delay, idle_timeout, retention, created,"
				" watermark, max_future_skew FROM streamwm.stream_def WHERE stream = $1"
				" FOR NO KEY UPDATE SKIP LOCKED" :
				"SELECT partitions, watermark_delay, idle_timeout, retention, created,"
				" watermark, max_future_skew FROM streamwm.stream_def WHERE stream = $1"
				" FOR NO KEY UPDATE",
				1, types, values, NULL, SPI_OK_SELECT);
	if (SPI_processed != 1)
		return false;
	clock->npartitions = DatumGetInt32(sw_spi_getdatum(0, 1, &isnull));
	clock->delay_us = sw_interval_usec(DatumGetIntervalP(sw_spi_getdatum(0, 2, &isnull)));
	clock->idle_timeout_us = sw_interval_usec(DatumGetIntervalP(sw_spi_getdatum(0, 3, &isnull)));
	*retention_us = sw_interval_usec(DatumGetIntervalP(sw_spi_getdatum(0, 4, &isnull)));
	clock->created = DatumGetTimestampTz(sw_spi_getdatum(0, 5, &isnull));
	clock->watermark = DatumGetTimestampTz(sw_spi_getdatum(0, 6, &isnull));
	skew = sw_spi_getdatum(0, 7, &isnull);
	load_future_skew(clock, skew, isnull);
	clock->parts = palloc0(clock->npartitions * sizeof(SwPartitionClock));

	sw_spi_exec("SELECT partition, processed_offset, max_event_time,"
				" coalesce(last_arrival, '-infinity')"
				" FROM streamwm.partition_state WHERE stream = $1",
				1, types, values, NULL, SPI_OK_SELECT);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		int			p = DatumGetInt32(sw_spi_getdatum(i, 1, &isnull));

		if (p < 0 || p >= clock->npartitions)
			elog(ERROR, "streamwm: partition %d of stream %u out of range", p, relid);
		clock->parts[p].processed_offset = DatumGetInt64(sw_spi_getdatum(i, 2, &isnull));
		clock->parts[p].max_event_time = DatumGetTimestampTz(sw_spi_getdatum(i, 3, &isnull));
		clock->parts[p].last_arrival = DatumGetTimestampTz(sw_spi_getdatum(i, 4, &isnull));
	}
	return true;
}

static Datum
processed_offsets(const SwStreamClock *clock)
{
	int64	   *offsets = palloc(clock->npartitions * sizeof(int64));

	for (int i = 0; i < clock->npartitions; i++)
		offsets[i] = clock->parts[i].processed_offset;
	return sw_int8_array(offsets, clock->npartitions);
}

/*
 * Close a retention mark: the accepted rows read since the previous one lie
 * up to the current processed offsets, with event times >= pending_min.
 */
static void
add_mark(LateRows *late, const SwStreamClock *clock)
{
	if (late->pending_rows == 0)
		return;
	if (late->nmarks == late->markcap)
	{
		late->markcap = Max(8, late->markcap * 2);
		late->mark_watermark = late->nmarks == 0 ?
			palloc(late->markcap * sizeof(TimestampTz)) :
			repalloc(late->mark_watermark, late->markcap * sizeof(TimestampTz));
		late->mark_min = late->nmarks == 0 ?
			palloc(late->markcap * sizeof(TimestampTz)) :
			repalloc(late->mark_min, late->markcap * sizeof(TimestampTz));
		late->mark_offsets = late->nmarks == 0 ?
			palloc(late->markcap * sizeof(Datum)) :
			repalloc(late->mark_offsets, late->markcap * sizeof(Datum));
	}
	late->mark_watermark[late->nmarks] = clock->watermark;
	late->mark_min[late->nmarks] = late->pending_min;
	late->mark_offsets[late->nmarks] = processed_offsets(clock);
	late->nmarks++;
	late->pending_rows = 0;
	late->pending_min = DT_NOEND;
}

/*
 * Read the next batch of committed, unprocessed rows in offset order and
 * feed them to the watermark rule.  Returns the number of rows read.
 */
static uint64
read_batch(Oid relid, Oid owner, const char *relname, SwStreamClock *clock,
		   int64 limit, LateRows *late)
{
	SwRoleContext rcx;
	Oid			types[2] = {INT8ARRAYOID, INT8OID};
	Datum		values[2];
	static const Oid result_types[4] = {INT4OID, INT8OID, TIMESTAMPTZOID, TIMESTAMPTZOID};
	char	   *sql;
	uint64		n;
	Relation	rel;
	SwStreamColumns cols;

	/* forced row-level security would run the owner's code in every step */
	if (sw_stream_forces_rls(relid))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("stream %s has FORCE ROW LEVEL SECURITY", relname),
				 errhint("ALTER TABLE %s NO FORCE ROW LEVEL SECURITY; streamwm reads a stream as its owner.",
						 relname)));
	/* the system columns must have the types we read them as (guard.c) */
	rel = table_open(relid, AccessShareLock);
	sw_check_stream_columns(rel, &cols);
	table_close(rel, NoLock);

	sql = psprintf("SELECT s.sw_partition, s.sw_offset, s.sw_event_time, s.sw_arrival"
				   " FROM pg_catalog.unnest($1) WITH ORDINALITY AS p(done, n)"
				   " CROSS JOIN LATERAL (SELECT t.sw_partition, t.sw_offset,"
				   " t.sw_event_time, t.sw_arrival FROM ONLY %s t"
				   " WHERE t.sw_partition = (p.n - 1)::pg_catalog.int4"
				   " AND t.sw_offset > p.done ORDER BY t.sw_offset LIMIT $2) s"
				   " ORDER BY s.sw_offset LIMIT $2", relname);
	values[0] = processed_offsets(clock);
	values[1] = Int64GetDatum(limit);
	sw_enter_role(owner, SW_SAFE_SEARCH_PATH, &rcx);
	/* the owner's policies run in it: bounded like a query (limit.c) */
	sw_spi_exec_bounded(psprintf("reading stream %s", relname),
						sql, 2, types, values, NULL, SPI_OK_SELECT);
	sw_leave_role(&rcx);
	n = SPI_processed;
	sw_check_result_types(SPI_tuptable->tupdesc, result_types, 4, relname);
	for (uint64 i = 0; i < n; i++)
	{
		bool		isnull;
		int32		p = DatumGetInt32(sw_spi_getdatum(i, 1, &isnull));
		int64		off = DatumGetInt64(sw_spi_getdatum(i, 2, &isnull));
		TimestampTz t = DatumGetTimestampTz(sw_spi_getdatum(i, 3, &isnull));
		TimestampTz a = DatumGetTimestampTz(sw_spi_getdatum(i, 4, &isnull));
		TimestampTz w;

		if (sw_observe_event(clock, p, off, t, a, &w))
			late_rows_add(late, p, off, t, w, a);
		else
		{
			if (t < late->pending_min)
				late->pending_min = t;
			if (++late->pending_rows >= SW_MARK_ROWS)
				add_mark(late, clock);
		}
	}
	SPI_freetuptable(SPI_tuptable);
	return n;
}

static void
save_stream(Oid relid, SwStreamClock *clock, int64 events, LateRows *late,
			TimestampTz now)
{
	int			np = clock->npartitions;
	int32	   *parts = palloc(np * sizeof(int32));
	int64	   *offsets = palloc(np * sizeof(int64));
	TimestampTz *maxes = palloc(np * sizeof(TimestampTz));
	TimestampTz *arrivals = palloc(np * sizeof(TimestampTz));
	Oid			ptypes[5] = {OIDOID, INT4ARRAYOID, INT8ARRAYOID,
	TIMESTAMPTZARRAYOID, TIMESTAMPTZARRAYOID};
	Datum		pvalues[5];
	Oid			stypes[6] = {OIDOID, TIMESTAMPTZOID, INT8OID, INT8OID, TIMESTAMPTZOID,
	INT8OID};
	Datum		svalues[6];

	for (int i = 0; i < np; i++)
	{
		parts[i] = i;
		offsets[i] = clock->parts[i].processed_offset;
		maxes[i] = clock->parts[i].max_event_time;
		arrivals[i] = clock->parts[i].last_arrival;
	}
	pvalues[0] = ObjectIdGetDatum(relid);
	pvalues[1] = sw_int4_array(parts, np);
	pvalues[2] = sw_int8_array(offsets, np);
	pvalues[3] = sw_timestamptz_array(maxes, np);
	pvalues[4] = sw_timestamptz_array(arrivals, np);
	sw_spi_exec("UPDATE streamwm.partition_state s SET processed_offset = x.o,"
				" max_event_time = x.m,"
				" last_arrival = NULLIF(x.a, '-infinity'::timestamptz)"
				" FROM ROWS FROM (pg_catalog.unnest($2), pg_catalog.unnest($3), pg_catalog.unnest($4), pg_catalog.unnest($5)) AS x(p, o, m, a)"
				" WHERE s.stream = $1 AND s.partition = x.p"
				" AND (s.processed_offset, s.max_event_time, s.last_arrival)"
				" IS DISTINCT FROM (x.o, x.m, NULLIF(x.a, '-infinity'::timestamptz))",
				5, ptypes, pvalues, NULL, SPI_OK_UPDATE);

	svalues[0] = ObjectIdGetDatum(relid);
	svalues[1] = TimestampTzGetDatum(clock->watermark);
	svalues[2] = Int64GetDatum(events);
	svalues[3] = Int64GetDatum(late->n);
	svalues[4] = TimestampTzGetDatum(now);
	svalues[5] = Int64GetDatum(clock->future_events);
	sw_spi_exec("UPDATE streamwm.stream_def SET step_started = NULL, step_crashes = 0, watermark = $2,"
				" events = events + $3, late_events = late_events + $4,"
				" last_processed = $5, future_events = future_events + $6"
				" WHERE stream = $1",
				6, stypes, svalues, NULL, SPI_OK_UPDATE);

	/*
	 * Retention's map (expire_rows): the marks of this step's accepted rows,
	 * the last one closed with the final W.  Marks that leave the same W
	 * share a row (adjacent ranges: W never decreases).
	 */
	add_mark(late, clock);
	for (int i = 0; i < late->nmarks; i++)
	{
		Oid			mtypes[4] = {OIDOID, TIMESTAMPTZOID, INT8ARRAYOID, TIMESTAMPTZOID};
		Datum		mvalues[4];

		mvalues[0] = ObjectIdGetDatum(relid);
		mvalues[1] = TimestampTzGetDatum(late->mark_watermark[i]);
		mvalues[2] = late->mark_offsets[i];
		mvalues[3] = TimestampTzGetDatum(late->mark_min[i]);
		sw_spi_exec("INSERT INTO streamwm.retention_mark AS m"
					" (stream, watermark, offsets, min_event_time) VALUES ($1, $2, $3, $4)"
					" ON CONFLICT (stream, watermark) DO UPDATE SET offsets = EXCLUDED.offsets,"
					" min_event_time = LEAST(m.min_event_time, EXCLUDED.min_event_time)",
					4, mtypes, mvalues, NULL, SPI_OK_INSERT);
	}

	if (late->n > 0)
	{
		Oid			ltypes[6] = {OIDOID, INT4ARRAYOID, INT8ARRAYOID,
		TIMESTAMPTZARRAYOID, TIMESTAMPTZARRAYOID, TIMESTAMPTZARRAYOID};
		Datum		lvalues[6];

		lvalues[0] = ObjectIdGetDatum(relid);
		lvalues[1] = sw_int4_array(late->partition, late->n);
		lvalues[2] = sw_int8_array(late->offset, late->n);
		lvalues[3] = sw_timestamptz_array(late->event_time, late->n);
		lvalues[4] = sw_timestamptz_array(late->watermark, late->n);
		lvalues[5] = sw_timestamptz_array(late->arrival, late->n);
		sw_spi_exec("INSERT INTO streamwm.late_event_log"
					" (stream, partition, sw_offset, sw_event_time, watermark, arrival)"
					" SELECT $1, x.p, x.o, x.t, x.w, x.a"
					" FROM ROWS FROM (pg_catalog.unnest($2), pg_catalog.unnest($3), pg_catalog.unnest($4), pg_catalog.unnest($5), pg_catalog.unnest($6)) AS x(p, o, t, w, a)",
					6, ltypes, lvalues, NULL, SPI_OK_INSERT);
	}
}

/*
 * Upsert the windows of one query that closed since its closed_until.
 * Runs in a subtransaction; an error is recorded in last_error and
 * reported as a WARNING, and the query retries next step.
 */
static void
close_windows(SwQueryDef *def, const SwStreamClock *clock, Datum offsets)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	Oid			etypes[2] = {TEXTOID, TEXTOID};
	Datum		evalues[2];

	/*
	 * What the query's step builds (its analyzed tree, statement text,
	 * pane plan) lives in a context of its own, gone when the step is.
	 */
	MemoryContext stepcxt = AllocSetContextCreate(cxt, "streamwm query step",
												  ALLOCSET_DEFAULT_SIZES);

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(stepcxt);
	PG_TRY();
	{
		SwRoleContext qcx;
		Oid			utypes[5] = {TEXTOID, TIMESTAMPTZOID, INT8OID, INT8OID, OIDOID};
		Datum		uvalues[5];
		int64		windows;
		int64		rows;

		sw_enter_role(def->owner, def->search_path, &qcx);
		/* streamwm.query_timeout covers building, planning and running it */
		sw_query_timeout_enable();
		sw_upsert_windows(def, offsets,
						  TIMESTAMP_IS_NOBEGIN(def->closed_until) ?
						  DT_NOBEGIN : def->closed_until - def->size_us,
						  clock->watermark - def->size_us,
						  &windows, &rows);
		sw_query_timeout_disable();
		/* a timeout that fired just before it was disabled fails here */
		CHECK_FOR_INTERRUPTS();
		sw_leave_role(&qcx);

		uvalues[0] = CStringGetTextDatum(def->name);
		uvalues[1] = TimestampTzGetDatum(clock->watermark);
		uvalues[2] = Int64GetDatum(windows);
		uvalues[3] = Int64GetDatum(rows);
		uvalues[4] = ObjectIdGetDatum(def->result_table);
		sw_spi_exec("UPDATE streamwm.query_def SET closed_until = $2,"
					" windows_emitted = windows_emitted + $3,"
					" rows_upserted = rows_upserted + $4, result_table = $5,"
					" last_error = NULL, last_error_time = NULL, errors = 0"
					" WHERE name = $1",
					5, utypes, uvalues, NULL, SPI_OK_UPDATE);

		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
		MemoryContextDelete(stepcxt);
	}
	PG_CATCH();
	{
		ErrorData  *edata;
		bool		timed_out;

		sw_query_timeout_disable();
		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
		MemoryContextDelete(stepcxt);

		/*
		 * Our own timeout is the query's fault: recorded and backed off like
		 * any error.  Any other cancel, or a shutdown, is not: pass it on.
		 */
		timed_out = edata->sqlerrcode == ERRCODE_QUERY_CANCELED &&
			sw_query_timeout_fired();
		if (timed_out)
		{
			edata->message = psprintf("query \"%s\" exceeded streamwm.query_timeout (%s)",
									  def->name, sw_query_timeout_string());
			edata->detail = NULL;
		}
		else if (edata->sqlerrcode == ERRCODE_QUERY_CANCELED ||
				 edata->sqlerrcode == ERRCODE_ADMIN_SHUTDOWN)
			ReThrowError(edata);

		evalues[0] = CStringGetTextDatum(def->name);
		evalues[1] = CStringGetTextDatum(edata->message);
		sw_spi_exec("UPDATE streamwm.query_def SET last_error = $2,"
					" last_error_time = pg_catalog.clock_timestamp(),"
					" errors = errors + 1 WHERE name = $1",
					2, etypes, evalues, NULL, SPI_OK_UPDATE);
		ereport(WARNING,
				(errcode(edata->sqlerrcode),
				 timed_out ? errmsg_internal("%s", edata->message) :
				 errmsg("streamwm query \"%s\" failed: %s", def->name, edata->message),
				 edata->detail ? errdetail_internal("%s", edata->detail) : 0,
				 errhint("The query's windows stay open and are retried on the next step.")));
		FreeErrorData(edata);
	}
	PG_END_TRY();
}

/*
 * Close windows of every query of the stream.  Returns the oldest event
 * time any query still needs (windows not yet closed), DT_NOEND if none.
 */
static TimestampTz
close_all_windows(Oid relid, const SwStreamClock *clock, TimestampTz now,
				  bool from_worker)
{
	Oid			types[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(relid)};
	List	   *names = NIL;
	ListCell   *lc;
	TimestampTz needed = DT_NOEND;
	Datum		offsets = processed_offsets(clock);

	sw_spi_exec("SELECT name FROM streamwm.query_def WHERE stream = $1 ORDER BY name",
				1, types, values, NULL, SPI_OK_SELECT);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;

		names = lappend(names, TextDatumGetCString(sw_spi_getdatum(i, 1, &isnull)));
	}
	foreach(lc, names)
	{
		SwQueryDef *def = sw_load_query(lfirst(lc));
		TimestampTz keep;

		if (def == NULL)
			continue;
		/* a worker retries a failing query with exponential backoff */
		if (from_worker && def->errors > 0 &&
			now < def->last_error_time +
			Min(SW_QUERY_MAX_BACKOFF_US, USECS_PER_SEC << Min(def->errors - 1, 16)))
			;
		else if (!TIMESTAMP_IS_NOBEGIN(clock->watermark) &&
				 def->closed_until < clock->watermark)
		{
			close_windows(def, clock, offsets);
			def = sw_load_query(lfirst(lc));
			if (def == NULL)
				continue;
		}
		/* rows older than this are in no window of the query still open */
		keep = TIMESTAMP_IS_NOBEGIN(def->closed_until) ? DT_NOBEGIN :
			def->closed_until - def->size_us;
		if (keep < needed)
			needed = keep;
	}
	return needed;
}

/*
 * The general plan reads a window's rows through the stream's BRIN index
 * on sw_event_time (query.c), if the planner has the statistics to see
 * that it pays (below).  A block range nobody summarised yet matches
 * every scan, and autovacuum summarises new ranges only now and then
 * (autosummarize), so a stream with a general-plan query has the ranges
 * written since the last step summarised before its windows are read: it
 * reads only those new pages.  brin_summarize_new_values() takes SHARE
 * UPDATE EXCLUSIVE on the stream; when someone holds it (VACUUM, ANALYZE,
 * CREATE INDEX CONCURRENTLY) the step does not wait: the ranges stay
 * unsummarised (read, not skipped) until a later step or autovacuum.  The
 * lock is then held to the end of the step, which autovacuum skips.
 */
static void
summarize_new_ranges(Oid relid, Oid owner, const char *relname)
{
	SwRoleContext rcx;
	Oid			types[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(relid)};
	bool		general;

	sw_spi_exec("SELECT 1 FROM streamwm.query_def"
				" WHERE stream OPERATOR(pg_catalog.=) $1"
				" AND plan OPERATOR(pg_catalog.=) 'general' LIMIT 1",
				1, types, values, NULL, SPI_OK_SELECT);
	general = SPI_processed > 0;
	SPI_freetuptable(SPI_tuptable);
	if (!general || !ConditionalLockRelationOid(relid, ShareUpdateExclusiveLock))
		return;
	/* as the stream's owner: the function requires it */
	sw_enter_role(owner, SW_SAFE_SEARCH_PATH, &rcx);

	/*
	 * The planner costs a BRIN scan by the column's correlation: a stream
	 * never analysed (autovacuum has not come yet) gets sequential scans.
	 * ANALYZE it once; autovacuum keeps the statistics after that.
	 */
	if (!SearchSysCacheExists3(STATRELATTINH, ObjectIdGetDatum(relid),
							   Int16GetDatum(get_attnum(relid, "sw_event_time")),
							   BoolGetDatum(false)))
		sw_spi_exec_bounded(psprintf("analyzing stream %s", relname),
							psprintf("ANALYZE %s", relname),
							0, NULL, NULL, NULL, SPI_OK_UTILITY);
	sw_spi_exec("SELECT pg_catalog.brin_summarize_new_values(i.indexrelid)"
				" FROM pg_catalog.pg_index i"
				" JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) i.indexrelid"
				" JOIN pg_catalog.pg_am a ON a.oid OPERATOR(pg_catalog.=) c.relam"
				" WHERE i.indrelid OPERATOR(pg_catalog.=) $1"
				" AND a.amname OPERATOR(pg_catalog.=) 'brin' AND i.indisvalid",
				1, types, values, NULL, SPI_OK_SELECT);
	sw_leave_role(&rcx);
}

/*
 * Retention of late events (SPEC section 8: late events are evidence): a
 * late row and its streamwm.late_event_log entry are removed once they
 * arrived before now - retention, whatever their event time.  Returns the
 * number of stream rows removed.
 */
static uint64
expire_late_rows(Oid relid, Oid owner, const char *relname, int64 retention_us,
				 TimestampTz now)
{
	SwRoleContext rcx;
	Oid			types[2] = {OIDOID, TIMESTAMPTZOID};
	Datum		values[2];
	TimestampTz cutoff;
	uint64		removed;

	if (TIMESTAMP_NOT_FINITE(now) ||
		pg_sub_s64_overflow(now, retention_us, &cutoff) ||
		!IS_VALID_TIMESTAMP(cutoff))
		return 0;
	values[0] = ObjectIdGetDatum(relid);
	values[1] = TimestampTzGetDatum(cutoff);
	sw_enter_role(owner, SW_SAFE_SEARCH_PATH, &rcx);
	sw_retention_delete(relid, relname,
						psprintf("DELETE FROM ONLY %s t USING streamwm.late_event_log l"
								 " WHERE l.stream OPERATOR(pg_catalog.=) $1"
								 " AND l.arrival OPERATOR(pg_catalog.<) $2"
								 " AND t.sw_partition OPERATOR(pg_catalog.=) l.partition"
								 " AND t.sw_offset OPERATOR(pg_catalog.=) l.sw_offset",
								 relname),
						2, types, values);
	sw_leave_role(&rcx);
	removed = SPI_processed;
	sw_spi_exec("DELETE FROM streamwm.late_event_log"
				" WHERE stream OPERATOR(pg_catalog.=) $1"
				" AND arrival OPERATOR(pg_catalog.<) $2",
				2, types, values, NULL, SPI_OK_DELETE);
	return removed;
}

/*
 * Retention of accepted rows: remove processed rows older than
 * W - retention that every query has finished with.  Late rows are left to
 * expire_late_rows().  Records in stream_def.retained_from how far rows
 * were removed, so that a new 'earliest' query starts at the first window
 * that is still complete.  Returns the number of rows removed.
 *
 * The rows are found by offset, on the primary key, not by event time.
 * Each step that read accepted rows left a retention_mark: the offsets it
 * read up to and the earliest event time among them.  A row old enough to
 * remove lies at or below the offsets of the newest mark whose
 * min_event_time is below the horizon, so each partition is read from its
 * oldest row up to there: the rows removed now, plus those of the same
 * steps, and older ones, whose event time is still ahead (bounded by the
 * disorder).  Afterwards every accepted row up to that mark has event time
 * >= the horizon: the older marks go and that one keeps the horizon as its
 * minimum.  No such mark: nothing to remove, nothing read.
 */
static uint64
expire_rows(Oid relid, Oid owner, const char *relname, const SwStreamClock *clock,
			int64 retention_us, TimestampTz needed)
{
	SwRoleContext rcx;
	TimestampTz horizon;
	Oid			types[4] = {OIDOID, TIMESTAMPTZOID, INT8ARRAYOID, TIMESTAMPTZOID};
	Datum		values[4];
	uint64		removed;
	bool		isnull;

	if (TIMESTAMP_NOT_FINITE(clock->watermark))
		return 0;
	horizon = clock->watermark - retention_us;
	if (needed < horizon)
		horizon = needed;
	if (TIMESTAMP_IS_NOBEGIN(horizon))
		return 0;

	values[0] = ObjectIdGetDatum(relid);
	values[1] = TimestampTzGetDatum(horizon);
	/* the marks below the horizon, on (stream, min_event_time); the newest */
	sw_spi_exec("SELECT s.offsets, s.watermark FROM (SELECT m.offsets, m.watermark"
				" FROM streamwm.retention_mark m"
				" WHERE m.stream OPERATOR(pg_catalog.=) $1"
				" AND m.min_event_time OPERATOR(pg_catalog.<) $2 OFFSET 0) s"
				" ORDER BY s.watermark DESC LIMIT 1",
				2, types, values, NULL, SPI_OK_SELECT);
	if (SPI_processed == 0)
	{
		SPI_freetuptable(SPI_tuptable);
		return 0;
	}
	values[2] = datumCopy(sw_spi_getdatum(0, 1, &isnull), false, -1);
	values[3] = sw_spi_getdatum(0, 2, &isnull);
	SPI_freetuptable(SPI_tuptable);

	sw_enter_role(owner, SW_SAFE_SEARCH_PATH, &rcx);
	/*
	 * The rows are collected on the primary key, partition by partition in
	 * offset order, and deleted by ctid.  The event time test is kept from
	 * matching the BRIN index: space that retention freed is reused by new
	 * rows, so ranges keep the minimum of rows long gone and a scan for
	 * "event time < horizon" would match most of the table.
	 */
	sw_retention_delete(relid, relname,
						psprintf("DELETE FROM ONLY %s t WHERE t.ctid OPERATOR(pg_catalog.=) ANY (ARRAY("
								 "SELECT r.ctid"
								 " FROM pg_catalog.unnest($3::pg_catalog.int8[]) WITH ORDINALITY AS p(upto, n)"
								 " CROSS JOIN LATERAL (SELECT x.ctid, x.sw_partition, x.sw_offset FROM ONLY %s x"
								 " WHERE x.sw_partition OPERATOR(pg_catalog.=) (p.n OPERATOR(pg_catalog.-) 1)::pg_catalog.int4"
								 " AND x.sw_offset OPERATOR(pg_catalog.<=) p.upto"
								 " AND (x.sw_event_time OPERATOR(pg_catalog.<) $2) IS TRUE"
								 " ORDER BY x.sw_offset) r"
								 " WHERE NOT EXISTS (SELECT 1 FROM streamwm.late_event_log l"
								 " WHERE l.stream OPERATOR(pg_catalog.=) $1"
								 " AND l.partition OPERATOR(pg_catalog.=) r.sw_partition"
								 " AND l.sw_offset OPERATOR(pg_catalog.=) r.sw_offset)))",
								 relname, relname),
						3, types, values);
	sw_leave_role(&rcx);
	removed = SPI_processed;
	sw_spi_exec("DELETE FROM streamwm.retention_mark"
				" WHERE stream OPERATOR(pg_catalog.=) $1"
				" AND watermark OPERATOR(pg_catalog.<) $4",
				4, types, values, NULL, SPI_OK_DELETE);
	sw_spi_exec("UPDATE streamwm.retention_mark SET min_event_time = $2"
				" WHERE stream OPERATOR(pg_catalog.=) $1"
				" AND watermark OPERATOR(pg_catalog.=) $4"
				" AND min_event_time OPERATOR(pg_catalog.<) $2",
				4, types, values, NULL, SPI_OK_UPDATE);
	if (removed > 0)
		sw_spi_exec("UPDATE streamwm.stream_def"
					" SET retained_from = GREATEST(retained_from, $2)"
					" WHERE stream OPERATOR(pg_catalog.=) $1",
					2, types, values, NULL, SPI_OK_UPDATE);
	return removed;
}

/*
 * Retention (SPEC section 8): accepted rows by event time once no query
 * needs them, late rows by arrival; both counted in expired_rows.
 */
static void
apply_retention(Oid relid, Oid owner, const char *relname, const SwStreamClock *clock,
				int64 retention_us, TimestampTz needed, TimestampTz now)
{
	uint64		removed;
	Oid			types[2] = {OIDOID, INT8OID};
	Datum		values[2];

	removed = expire_late_rows(relid, owner, relname, retention_us, now);
	removed += expire_rows(relid, owner, relname, clock, retention_us, needed);
	if (removed == 0)
		return;
	values[0] = ObjectIdGetDatum(relid);
	values[1] = Int64GetDatum((int64) removed);
	sw_spi_exec("UPDATE streamwm.stream_def"
				" SET expired_rows = expired_rows OPERATOR(pg_catalog.+) $2"
				" WHERE stream OPERATOR(pg_catalog.=) $1",
				2, types, values, NULL, SPI_OK_UPDATE);
}

/*
 * One step on one stream; see the file header.  The caller is connected to
 * SPI.  With max_rows > 0 at most about that many rows are read (a worker
 * tick); otherwise every committed row is.  A worker (from_worker) skips a
 * stream that another step holds and backs off failing queries.  Returns
 * the rows read, or -1 when the stream was skipped.
 */
int64
sw_process_stream(Oid relid, TimestampTz now, bool from_worker, int64 max_rows)
{
	SwStreamClock clock;
	int64		retention_us;
	LateRows	late;
	int64		events = 0;
	bool		caught_up = false;
	char	   *relname;
	Oid			owner;
	TimestampTz needed;
	SwRoleContext ccx;

	memset(&clock, 0, sizeof(clock));
	memset(&late, 0, sizeof(late));
	late.cap = 64;
	late.partition = palloc(late.cap * sizeof(int32));
	late.offset = palloc(late.cap * sizeof(int64));
	late.event_time = palloc(late.cap * sizeof(TimestampTz));
	late.watermark = palloc(late.cap * sizeof(TimestampTz));
	late.arrival = palloc(late.cap * sizeof(TimestampTz));
	late.pending_min = DT_NOEND;

	/* streamwm's own statements run as the catalog's owner, user SQL as its owner */
	sw_enter_catalog(&ccx);
	if (!load_stream(relid, from_worker, &clock, &retention_us))
	{
		sw_leave_role(&ccx);
		return -1;
	}
	relname = sw_relation_name(relid);
	owner = sw_relation_owner(relid);

	for (;;)
	{
		int64		limit = sw_batch_size;
		uint64		n;

		if (max_rows > 0 && max_rows - events < limit)
			limit = Max(max_rows - events, 1);
		n = read_batch(relid, owner, relname, &clock, limit, &late);
		events += n;
		if ((int64) n < limit)
		{
			caught_up = true;
			break;
		}
		if (max_rows > 0 && events >= max_rows)
			break;
		CHECK_FOR_INTERRUPTS();
	}

	/* A partition with a backlog is never idle: only judge when caught up. */
	if (caught_up)
		sw_advance_watermark(&clock, now);

	save_stream(relid, &clock, events, &late, now);
	summarize_new_ranges(relid, owner, relname);
	needed = close_all_windows(relid, &clock, now, from_worker);
	apply_retention(relid, owner, relname, &clock, retention_us, needed, now);
	sw_leave_role(&ccx);
	return events;
}

/*
 * streamwm.process(stream regclass DEFAULT NULL, now timestamptz DEFAULT NULL)
 *
 * A role may process the streams it manages (it is a member of their
 * owner): all of them when stream is NULL.  Processing someone else's
 * stream would let a role hold its catalog row locked.
 */
Datum
streamwm_process(PG_FUNCTION_ARGS)
{
	TimestampTz now = PG_ARGISNULL(1) ? GetCurrentTimestamp() : PG_GETARG_TIMESTAMPTZ(1);
	List	   *streams = NIL;
	ListCell   *lc;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (!PG_ARGISNULL(0))
	{
		(void) sw_check_stream_manager(PG_GETARG_OID(0), false);
		streams = list_make1_oid(PG_GETARG_OID(0));
	}
	else
	{
		SwRoleContext cx;

		sw_enter_catalog(&cx);
		sw_spi_exec("SELECT stream, owner FROM streamwm.stream_def ORDER BY stream::pg_catalog.oid",
					0, NULL, NULL, NULL, SPI_OK_SELECT);
		sw_leave_role(&cx);
		for (uint64 i = 0; i < SPI_processed; i++)
		{
			bool		isnull;

			if (sw_may_manage(DatumGetObjectId(sw_spi_getdatum(i, 2, &isnull))))
				streams = lappend_oid(streams,
									  DatumGetObjectId(sw_spi_getdatum(i, 1, &isnull)));
		}
	}
	foreach(lc, streams)
		(void) sw_process_stream(lfirst_oid(lc), now, false, 0);
	SPI_finish();
	PG_RETURN_VOID();
}
