/*-------------------------------------------------------------------------
 * process.c
 *	  Owns one processing step of a stream (SPEC section 6): what
 *	  streamwm.process() runs synchronously and a background worker runs on
 *	  each tick.
 *
 * A step, all in the caller's transaction:
 *
 *	 1. lock the stream's row in streamwm.stream_def (FOR NO KEY UPDATE): steps on
 *		one stream are serialised, and drop_stream/drop_query take the same
 *		lock first, so they cannot deadlock with a step;
 *	 2. through the commit fence (commit_order.c: snapshot, clock and the
 *		open writers holding partitions, read together), summarise the
 *		BRIN ranges written since the last step (summarize_new_ranges),
 *		read the commit log's unread entries and their rows after each partition's
 *		processed offset, in arrival order (within one moment of arrival in
 *		offset order), in batches of streamwm.batch_size;
 *	 3. feed each moment of arrival and each row to the watermark rule
 *		(watermark.c), which says whether a row is late and advances W;
 *		late rows go to streamwm.late_event_log;
 *	 4. when every row visible to the step has been read, advance W
 *		through the moments up to the step's clock 'now' (idle
 *		partitions);
 *	 5. store the offsets, partition maxima, W and counters, and forget the
 *		commit log entries read (all but each partition's newest);
 *	 6. for each query of the stream, in a subtransaction and as the query's
 *		owner, upsert every window that W has closed since the query's
 *		closed_until, and move closed_until to W (query.c builds the
 *		statement); with allowed_lateness, also re-fire the closed windows
 *		that rows accepted below W fell into (query.c, pane.c); an error
 *		is recorded in query_def.last_error and the query retries from the
 *		same closed_until next step;
 *	 7. apply retention: accepted rows by event time once no query needs
 *		them, open or to re-fire (found by offset, up to a
 *		retention_mark), late rows
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
 * event time < b <= W and was late, so it is excluded either way, or was
 * accepted within allowed_lateness and [a, b) is re-fired in this step.
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/async.h"
#include "common/int.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/json.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "api.h"
#include "catalog.h"
#include "citus.h"
#include "commit_order.h"
#include "guard.h"
#include "limit.h"
#include "process.h"
#include "purge.h"
#include "query.h"
#include "session.h"
#include "step_cache.h"
#include "stream_brin.h"
#include "version.h"
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

/* One commit log entry: a transaction's rows lo < sw_offset <= hi in partition. */
typedef struct LogEntry
{
	int32		partition;
	int64		lo;
	int64		hi;
	TimestampTz arrival;
	TimestampTz held_from;		/* the transaction's start */
} LogEntry;

/*
 * What a step knows of the stream's writers: the snapshot it reads with,
 * the partitions open transactions hold (sw_commit_fence), and the commit
 * log entries of the current batch, per partition in offset order with the
 * earliest held_from of each entry and those after it (so that held_from
 * below costs no statement per row).  Entries past the batch (a partition
 * cut at the batch's limit) are asked for once, when first needed.
 */
typedef struct StepReader
{
	Oid			relid;
	Snapshot	snapshot;
	SwStreamClock *clock;
	SwPartitionHold *live;		/* open writing transactions */
	LogEntry   *entries;		/* the batch's entries, in arrival order */
	int		   *order;			/* entry indexes, by partition, then offset */
	TimestampTz *suffix_held;	/* min held_from of order[k..] in its partition */
	int		   *pstart;			/* per partition: its range in order */
	int		   *pend;
	int		   *cursor;			/* its first entry not read to the end */
	bool	   *cut;			/* its entries past the batch may exist */
	int64	   *beyond_hi;		/* ... above this hi */
	TimestampTz *beyond;		/* their min held_from, once known */
	bool	   *beyond_known;
	bool		on_nodes;		/* read from a distributed stream's shards */
} StepReader;

/*
 * SwHeldFrom of a step (see watermark.h): the earliest start of a writing
 * transaction of the partition not yet processed to the end (its commit log
 * entry not read to the end) or still open.
 */
static TimestampTz
held_from(void *arg, int partition)
{
	StepReader *r = arg;
	int64		done = r->clock->parts[partition].processed_offset;
	TimestampTz h = DT_NOEND;

	while (r->cursor[partition] < r->pend[partition] &&
		   r->entries[r->order[r->cursor[partition]]].hi <= done)
		r->cursor[partition]++;
	if (r->cursor[partition] < r->pend[partition])
		h = r->suffix_held[r->cursor[partition]];
	if (r->cut[partition])
	{
		if (!r->beyond_known[partition])
		{
			SwRoleContext cx;
			Oid			types[3] = {OIDOID, INT4OID, INT8OID};
			Datum		values[3] = {ObjectIdGetDatum(r->relid), Int32GetDatum(partition),
			Int64GetDatum(Max(r->beyond_hi[partition], done))};
			bool		isnull;
			Datum		d;

			sw_enter_catalog(&cx);
			sw_spi_exec_snapshot("SELECT pg_catalog.min(held_from) FROM streamwm.commit_log"
								 " WHERE stream = $1 AND partition = $2 AND hi > $3",
								 3, types, values, NULL, SPI_OK_SELECT, r->snapshot);
			d = sw_spi_getdatum(0, 1, &isnull);
			r->beyond[partition] = isnull ? DT_NOEND : DatumGetTimestampTz(d);
			SPI_freetuptable(SPI_tuptable);
			sw_leave_role(&cx);
			r->beyond_known[partition] = true;
		}
		if (r->beyond[partition] < h)
			h = r->beyond[partition];
	}
	if (r->live[partition].pid != 0 && r->live[partition].since < h)
		h = r->live[partition].since;
	return h;
}

/*
 * Make a batch's entries what held_from answers from; 'limit' per
 * partition were asked for, so a partition that got that many may have
 * more past the last one.
 */
static void
reader_set_entries(StepReader *r, LogEntry *entries, int nentries, int64 limit)
{
	int			np = r->clock->npartitions;
	int		   *count = palloc0(np * sizeof(int));

	if (r->order)
	{
		pfree(r->order);
		pfree(r->suffix_held);
	}
	r->entries = entries;
	r->order = palloc(Max(nentries, 1) * sizeof(int));
	r->suffix_held = palloc(Max(nentries, 1) * sizeof(TimestampTz));
	for (int i = 0; i < nentries; i++)
		count[entries[i].partition]++;
	for (int p = 0, at = 0; p < np; p++)
	{
		r->pstart[p] = r->pend[p] = r->cursor[p] = at;
		at += count[p];
	}
	/* stable: within a partition arrival order is offset order */
	for (int i = 0; i < nentries; i++)
		r->order[r->pend[entries[i].partition]++] = i;
	for (int p = 0; p < np; p++)
	{
		TimestampTz m = DT_NOEND;

		for (int k = r->pend[p] - 1; k >= r->pstart[p]; k--)
		{
			if (entries[r->order[k]].held_from < m)
				m = entries[r->order[k]].held_from;
			r->suffix_held[k] = m;
		}
		r->cut[p] = count[p] >= limit;
		r->beyond_hi[p] = count[p] > 0 ? entries[r->order[r->pend[p] - 1]].hi : -1;
		r->beyond_known[p] = false;
	}
	pfree(count);
}

/* A row a batch fetched. */
typedef struct FetchedRow
{
	int32		partition;
	int64		offset;
	TimestampTz event_time;
} FetchedRow;

/*
 * Receives a batch's rows straight into an array of FetchedRow: a SPI
 * tuple table formed and kept a tuple per row (and its memory, fresh pages
 * at every step), a fifth of a worker's time at 100,000 rows a second
 * (perf, bench/e2e.sh).
 */
typedef struct FetchReceiver
{
	DestReceiver pub;
	const char *relname;
	int			npartitions;
	FetchedRow *rows;
	uint64		n;
	uint64		cap;
	bool		sorted;			/* so far in (partition, offset) order */
} FetchReceiver;

static int	fetched_cmp(const void *a, const void *b);

static void
fetch_startup(DestReceiver *self, int operation, TupleDesc typeinfo)
{
	static const Oid row_types[3] = {INT4OID, INT8OID, TIMESTAMPTZOID};
	FetchReceiver *r = (FetchReceiver *) self;

	sw_check_result_types(typeinfo, row_types, 3, r->relname);
}

static bool
fetch_receive(TupleTableSlot *slot, DestReceiver *self)
{
	FetchReceiver *r = (FetchReceiver *) self;
	FetchedRow *f;

	slot_getsomeattrs(slot, 3);
	if (slot->tts_isnull[0] || slot->tts_isnull[1] || slot->tts_isnull[2])
		elog(ERROR, "streamwm: stream %s has a row without partition, offset or event time",
			 r->relname);
	if (r->n == r->cap)
	{
		r->cap = r->cap * 2;
		r->rows = repalloc_huge(r->rows, r->cap * sizeof(FetchedRow));
	}
	f = &r->rows[r->n];
	f->partition = DatumGetInt32(slot->tts_values[0]);
	f->offset = DatumGetInt64(slot->tts_values[1]);
	f->event_time = DatumGetTimestampTz(slot->tts_values[2]);
	if (f->partition < 0 || f->partition >= r->npartitions)
		elog(ERROR, "streamwm: stream %s has a row in partition %d", r->relname, f->partition);
	if (r->n > 0 && fetched_cmp(&r->rows[r->n - 1], f) > 0)
		r->sorted = false;
	r->n++;
	return true;
}

static void
fetch_shutdown(DestReceiver *self)
{
}

static void
fetch_destroy(DestReceiver *self)
{
}

static int
fetched_cmp(const void *a, const void *b)
{
	const FetchedRow *x = a;
	const FetchedRow *y = b;

	if (x->partition != y->partition)
		return x->partition < y->partition ? -1 : 1;
	return x->offset < y->offset ? -1 : x->offset > y->offset ? 1 : 0;
}

/*
 * Read the next batch of committed, unprocessed rows in arrival order and
 * feed them to the watermark rule.  Returns the number of rows read; sets
 * *caught_up when every row visible to the step has been read.
 *
 * The commit log says which rows arrived when (commit_order.c).  Its
 * unread entries are read first, up to 'limit' per partition, in arrival
 * order, and only those that arrived before any entry that may still be
 * unread (a partition whose entries were cut at 'limit') are taken: so the
 * partitions of every moment of arrival taken are all known.  Then the
 * rows of those entries, up to 'limit' per partition in offset order, and
 * the two are merged: moment by moment of arrival, and within a moment in
 * offset order across partitions (the order a transaction wrote its rows;
 * one sequence serves the whole stream).
 */
static uint64
read_batch(StepReader *r, Oid owner, const char *relname, int64 limit,
		   LateRows *late, bool *caught_up)
{
	SwStreamClock *clock = r->clock;
	int			np = clock->npartitions;
	SwRoleContext rcx;
	Oid			etypes[3] = {INT8ARRAYOID, INT8OID, OIDOID};
	Datum		evalues[3];
	Oid			rtypes[4] = {INT4ARRAYOID, INT8ARRAYOID, INT8ARRAYOID, INT4ARRAYOID};
	Datum		rvalues[4];
	int64	   *upto = palloc(np * sizeof(int64));
	int64	   *cut = palloc(np * sizeof(int64));
	Datum	   *fparts = palloc(np * sizeof(Datum));
	Datum	   *fdone = palloc(np * sizeof(Datum));
	Datum	   *fcut = palloc(np * sizeof(Datum));
	int			nfparts = 0;
	char	   *next_sql;
	static const Oid entry_types[5] = {INT4OID, INT8OID, INT8OID, TIMESTAMPTZOID,
	TIMESTAMPTZOID};
	LogEntry   *entries;
	int			nentries;
	int			ntaken;
	int		   *per_part = palloc0(np * sizeof(int));
	TimestampTz *last_arrival = palloc(np * sizeof(TimestampTz));
	TimestampTz horizon = DT_NOEND;
	int		   *first = palloc(np * sizeof(int));
	int		   *nrows = palloc0(np * sizeof(int));
	bool	   *truncated = palloc0(np * sizeof(bool));
	int64	   *bound = palloc(np * sizeof(int64));
	int32	   *groupparts = palloc(np * sizeof(int32));
	TimestampTz *moment_held = palloc(np * sizeof(TimestampTz));
	Datum		done;
	uint64		nfetched;
	FetchedRow *fetched;
	FetchReceiver recv;
	uint64		n = 0;
	bool		stopped = false;
	Relation	rel;
	SwStreamColumns cols;

	/* forced row-level security would run the owner's code in every step */
	if (sw_stream_forces_rls(r->relid))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("stream %s has FORCE ROW LEVEL SECURITY", relname),
				 errhint("ALTER TABLE %s NO FORCE ROW LEVEL SECURITY; streamwm reads a stream as its owner.",
						 relname)));
	/* the system columns must have the types we read them as (guard.c) */
	rel = table_open(r->relid, AccessShareLock);
	sw_check_stream_columns(rel, &cols);
	table_close(rel, NoLock);

	/* the commit log's unread entries, as the catalog's owner */
	done = processed_offsets(clock);
	evalues[0] = done;
	evalues[1] = Int64GetDatum(limit);
	evalues[2] = ObjectIdGetDatum(r->relid);
	sw_enter_catalog(&rcx);
	sw_spi_exec_snapshot("SELECT e.partition, e.lo, e.hi, e.arrival, e.held_from"
						 " FROM pg_catalog.unnest($1) WITH ORDINALITY AS p(done, n)"
						 " CROSS JOIN LATERAL (SELECT e.partition, e.lo, e.hi, e.arrival,"
						 " e.held_from"
						 " FROM streamwm.commit_log e WHERE e.stream = $3"
						 " AND e.partition = (p.n - 1)::pg_catalog.int4 AND e.hi > p.done"
						 " ORDER BY e.hi LIMIT $2) e"
						 " ORDER BY e.arrival, e.partition, e.hi",
						 3, etypes, evalues, NULL, SPI_OK_SELECT, r->snapshot);
	sw_leave_role(&rcx);
	sw_check_result_types(SPI_tuptable->tupdesc, entry_types, 5, "streamwm.commit_log");
	nentries = (int) SPI_processed;
	entries = palloc(Max(nentries, 1) * sizeof(LogEntry));
	for (int i = 0; i < nentries; i++)
	{
		bool		isnull;
		LogEntry   *e = &entries[i];

		e->partition = DatumGetInt32(sw_spi_getdatum(i, 1, &isnull));
		e->lo = DatumGetInt64(sw_spi_getdatum(i, 2, &isnull));
		e->hi = DatumGetInt64(sw_spi_getdatum(i, 3, &isnull));
		e->arrival = DatumGetTimestampTz(sw_spi_getdatum(i, 4, &isnull));
		e->held_from = DatumGetTimestampTz(sw_spi_getdatum(i, 5, &isnull));
		if (e->partition < 0 || e->partition >= np)
			elog(ERROR, "streamwm: commit log of stream %s names partition %d", relname,
				 e->partition);
		per_part[e->partition]++;
		last_arrival[e->partition] = e->arrival;
	}
	SPI_freetuptable(SPI_tuptable);
	reader_set_entries(r, entries, nentries, limit);

	/* take the entries that arrived before anything still unread */
	for (int p = 0; p < np; p++)
		if (per_part[p] == limit && last_arrival[p] < horizon)
			horizon = last_arrival[p];
	ntaken = 0;
	while (ntaken < nentries && entries[ntaken].arrival < horizon)
		ntaken++;
	if (ntaken == 0 && nentries > 0)
	{
		/* every entry shares the horizon's moment: take that moment */
		while (ntaken < nentries && entries[ntaken].arrival == horizon)
			ntaken++;
	}
	*caught_up = (ntaken == nentries && horizon == DT_NOEND);
	if (ntaken == 0)
		return 0;

	/*
	 * Their rows, as the stream's owner: per partition, the offsets after
	 * the processed one up to the highest its entries taken reach, and at
	 * most 'limit' of them (offsets are unique: the range is cut at
	 * processed + limit).  A bounded range and no ORDER BY ... LIMIT, so
	 * that the read is as cheap on the stream's BRIN index (a bitmap of the
	 * block ranges that hold those offsets, then a sort here) as on a key
	 * btree (a stream made before 0.3 has one): with the limit in SQL and
	 * the range open, a bitmap read and sort of the whole backlog at every
	 * batch took a worker catching up on a 2,000,000-row COPY 0.3 - 1.4 s a
	 * batch of 100,000.  Rows past the entries taken are left for the next
	 * batch by the merge, and so are those past a partition's cut.
	 */
	for (int p = 0; p < np; p++)
		upto[p] = PG_INT64_MIN;
	for (int e = 0; e < ntaken; e++)
	{
		int32		p = entries[e].partition;

		if (upto[p] < entries[e].hi)
			upto[p] = entries[e].hi;
	}
	for (int p = 0; p < np; p++)
	{
		int64		from = clock->parts[p].processed_offset;

		cut[p] = upto[p];
		if (upto[p] <= from)
			continue;
		if (upto[p] - from > limit)
			cut[p] = from + limit;
		truncated[p] = cut[p] < upto[p];
		fparts[nfparts] = Int32GetDatum(p);
		fdone[nfparts] = Int64GetDatum(from);
		fcut[nfparts] = Int64GetDatum(cut[p]);
		nfparts++;
	}
	rvalues[0] = PointerGetDatum(construct_array(fparts, nfparts, INT4OID, 4, true, TYPALIGN_INT));
	rvalues[1] = PointerGetDatum(construct_array(fdone, nfparts, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	rvalues[2] = PointerGetDatum(construct_array(fcut, nfparts, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	/* the partitions past the ranges written out (below) */
	rvalues[3] = sw_citus_ranges_tail(fparts, nfparts);
	sw_enter_role(owner, SW_SAFE_SEARCH_PATH, &rcx);

	/*
	 * A stream never analysed looks small (3,505 rows estimated for a
	 * backlog of 2,000,000 just loaded), and the planner would read the
	 * whole stream for each partition: only its indexes may be used.
	 */
	(void) set_config_option("enable_seqscan", "off", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	/* the owner's policies run in it: bounded like a query (limit.c) */
	memset(&recv, 0, sizeof(recv));
	recv.pub.receiveSlot = fetch_receive;
	recv.pub.rStartup = fetch_startup;
	recv.pub.rShutdown = fetch_shutdown;
	recv.pub.rDestroy = fetch_destroy;
	recv.pub.mydest = DestNone;
	recv.relname = relname;
	recv.npartitions = np;
	recv.cap = 1024;
	recv.rows = palloc(recv.cap * sizeof(FetchedRow));
	recv.sorted = true;
	/*
	 * From a distributed stream's shards (r->on_nodes): a join Citus runs
	 * on each shard of those partitions (it cannot push down the LATERAL
	 * read), and the ranges as a condition for each node's planner
	 * (sw_citus_ranges_sql; $4 the partitions past those written out: 2.9
	 * against 28.8 ms for 4,000 new rows of 1,000,000, 11 against 36 ms for
	 * 100,000).  The shards' rows come in no particular order, and are
	 * sorted below.
	 */
	sw_spi_exec_bounded_to(psprintf("reading stream %s", relname),
						   r->on_nodes ?
						   psprintf("SELECT t.sw_partition, t.sw_offset, t.sw_event_time"
									" FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2),"
									" pg_catalog.unnest($3)) AS p(part, done, cut)"
									" JOIN %s t ON t.sw_partition = p.part"
									" AND t.sw_offset > p.done AND t.sw_offset <= p.cut"
									" WHERE t.sw_partition = ANY ($1) AND %s",
									relname, sw_citus_ranges_sql("t", nfparts, 4)) :
						   psprintf("SELECT s.sw_partition, s.sw_offset, s.sw_event_time"
									" FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2),"
									" pg_catalog.unnest($3)) AS p(part, done, cut)"
									" CROSS JOIN LATERAL (SELECT t.sw_partition, t.sw_offset,"
									" t.sw_event_time FROM ONLY %s t"
									" WHERE t.sw_partition = p.part"
									" AND t.sw_offset > p.done AND t.sw_offset <= p.cut) s",
									relname),
						   4, rtypes, rvalues, NULL, r->snapshot, (DestReceiver *) &recv);
	sw_leave_role(&rcx);
	nfetched = recv.n;
	fetched = recv.rows;

	/*
	 * Each partition's rows come in offset order from its index scan, one
	 * partition after the other: sorting them in SQL would cost a sort of
	 * the whole batch for nothing.  Should a plan ever give them otherwise,
	 * they are put in order here.
	 */
	if (!recv.sorted)
		qsort(fetched, nfetched, sizeof(FetchedRow), fetched_cmp);
	for (int p = 0; p < np; p++)
		first[p] = -1;
	for (uint64 i = 0; i < nfetched; i++)
	{
		int32		p = fetched[i].partition;

		if (first[p] < 0)
			first[p] = (int) i;
		nrows[p]++;
	}
	for (int p = 0; p < np; p++)
		bound[p] = -1;

	/*
	 * A partition cut with nothing up to its cut: its next row may be far
	 * off (other partitions' rows took the offsets between; on Citus each
	 * node gives offsets from a range of its own, 2^48 apart).  Moving on
	 * by 'limit' offsets a batch would never get there: the batch moves it
	 * to just before its next row instead (none: past the entries taken).
	 */
	next_sql = NULL;
	for (int p = 0; p < np; p++)
	{
		static const Oid next_type[1] = {INT8OID};
		Oid			ntypes[3] = {INT4OID, INT8OID, INT8OID};
		Datum		nvalues[3];
		bool		isnull;
		Datum		next;

		if (!truncated[p] || nrows[p] > 0)
			continue;
		if (next_sql == NULL)
		{
			next_sql = psprintf("SELECT pg_catalog.min(t.sw_offset) FROM %s%s t"
								" WHERE t.sw_partition = $1 AND t.sw_offset > $2"
								" AND t.sw_offset <= $3", r->on_nodes ? "" : "ONLY ", relname);
			sw_enter_role(owner, SW_SAFE_SEARCH_PATH, &rcx);
		}
		nvalues[0] = Int32GetDatum(p);
		nvalues[1] = Int64GetDatum(cut[p]);
		nvalues[2] = Int64GetDatum(upto[p]);
		sw_spi_exec_bounded(psprintf("reading stream %s", relname), next_sql,
							3, ntypes, nvalues, NULL, SPI_OK_SELECT, r->snapshot);
		sw_check_result_types(SPI_tuptable->tupdesc, next_type, 1, relname);
		next = sw_spi_getdatum(0, 1, &isnull);
		if (isnull)
		{
			cut[p] = upto[p];
			truncated[p] = false;
		}
		else
			cut[p] = DatumGetInt64(next) - 1;
		SPI_freetuptable(SPI_tuptable);
	}
	if (next_sql != NULL)
		sw_leave_role(&rcx);

	/*
	 * Merge: moment by moment of arrival, the rows that arrived then in
	 * offset order, across partitions too (a transaction's rows in the order
	 * it wrote them).
	 */
	for (int i = 0; i < ntaken && !stopped;)
	{
		TimestampTz arrival = entries[i].arrival;
		int			j = i;
		int			k = 0;

		/* the moment's entries: what each partition got then, up to where */
		for (; j < ntaken && entries[j].arrival == arrival; j++)
		{
			int32		p = entries[j].partition;

			if (bound[p] < 0)
			{
				groupparts[k++] = p;
				moment_held[p] = entries[j].held_from;
			}
			if (entries[j].hi > bound[p])
				bound[p] = entries[j].hi;
			if (entries[j].held_from < moment_held[p])
				moment_held[p] = entries[j].held_from;
		}
		sw_observe_arrival(clock, groupparts, k, arrival);
		for (;;)
		{
			int32		p = -1;
			int64		off;
			TimestampTz t;
			TimestampTz w;

			for (int g = 0; g < k; g++)
			{
				int32		q = groupparts[g];

				if (nrows[q] == 0)
				{
					/*
					 * q's fetched rows are all read.  If its fetch was cut
					 * below the moment's end, its rows past the cut are for
					 * the next batch, and so is everything after them: every
					 * row of q up to the cut is read (a range of offsets
					 * other partitions took moves it on all the same).
					 */
					if (truncated[q] && cut[q] < bound[q])
					{
						if (clock->parts[q].processed_offset < cut[q])
							clock->parts[q].processed_offset = cut[q];
						stopped = true;
					}
					continue;
				}
				if (fetched[first[q]].offset > bound[q])
					continue;
				if (p < 0 || fetched[first[q]].offset < fetched[first[p]].offset)
					p = q;
			}
			if (stopped || p < 0)
				break;
			if ((int64) n >= limit)
			{
				stopped = true;
				break;
			}
			off = fetched[first[p]].offset;
			t = fetched[first[p]].event_time;
			first[p]++;
			nrows[p]--;
			n++;
			/* written live: at its transaction's time, not replayed */
			if (sw_observe_event(clock, p, off, t, arrival, t >= moment_held[p], &w))
				late_rows_add(late, p, off, t, w, arrival);
			else
			{
				if (t < late->pending_min)
					late->pending_min = t;
				if (++late->pending_rows >= SW_MARK_ROWS)
					add_mark(late, clock);
			}
		}
		/* the moment's rows are all read (its other offsets are gaps) */
		for (int g = 0; g < k; g++)
		{
			int32		q = groupparts[g];

			if (!stopped && clock->parts[q].processed_offset < bound[q])
				clock->parts[q].processed_offset = bound[q];
			bound[q] = -1;
		}
		i = j;
	}
	if (stopped)
		*caught_up = false;
	/* a process() that catches up reads many batches: none is kept */
	pfree(fetched);
	pfree(per_part);
	pfree(last_arrival);
	pfree(first);
	pfree(nrows);
	pfree(truncated);
	pfree(bound);
	pfree(groupparts);
	pfree(moment_held);
	pfree(upto);
	pfree(cut);
	pfree(fparts);
	pfree(fdone);
	pfree(fcut);
	return n;
}

/*
 * Store what the step read (catalog.c), its retention marks and its late
 * rows.
 */
static void
save_stream(Oid relid, SwStreamClock *clock, int64 events, LateRows *late,
			TimestampTz now)
{
	sw_catalog_store_step(relid, clock, events, late->n, now);

	/*
	 * Retention's map (expire_rows): the marks of this step's accepted rows,
	 * the last one closed with the final W.  Marks that leave the same W
	 * share a row (adjacent ranges: W never decreases).
	 */
	add_mark(late, clock);
	for (int i = 0; i < late->nmarks; i++)
		sw_catalog_add_retention_mark(relid, late->mark_watermark[i],
									  late->mark_offsets[i], late->mark_min[i]);

	if (late->n > 0)
		sw_catalog_log_late_rows(relid, late->n, late->partition, late->offset,
								 late->event_time, late->watermark, late->arrival);
}

/*
 * NOTIFY streamwm (SPEC section 11), in the step's transaction: sent when
 * it commits, so a listener never hears of results it cannot see yet.
 * PostgreSQL has no privileges on channels: the payload says which query
 * wrote how many rows up to when, never any data, and streamwm.notify (a
 * superuser's setting) turns it off where even that must stay private.
 */
static void
notify_results(const SwQueryDef *def, TimestampTz closed_until, int64 rows)
{
	StringInfoData payload;
	char		ts[MAXDATELEN + 1];

	if (!sw_notify)
		return;
	initStringInfo(&payload);
	appendStringInfoString(&payload, "{\"query\": ");
	escape_json(&payload, def->name);
	appendStringInfoString(&payload, ", \"result_table\": ");
	if (OidIsValid(def->result_table))
		escape_json(&payload, sw_relation_name(def->result_table));
	else
		appendStringInfoString(&payload, "null");
	appendStringInfoString(&payload, ", \"closed_until\": ");
	escape_json(&payload, JsonEncodeDateTime(ts, TimestampTzGetDatum(closed_until),
											 TIMESTAMPTZOID, NULL));
	appendStringInfo(&payload, ", \"rows\": " INT64_FORMAT "}", rows);

	/*
	 * A notification must never fail the step: not one too long (a query
	 * name of kilobytes: async.c takes up to BLCKSZ - NAMEDATALEN - 128),
	 * and none while the queue is half full (a listener that never reads
	 * would otherwise make every commit fail).
	 */
	if (payload.len >= BLCKSZ - NAMEDATALEN - 128)
		ereport(WARNING,
				(errmsg("streamwm: no notification for query \"%s\": its payload is too long",
						def->name)));
	else if (DatumGetFloat8(DirectFunctionCall1(pg_notification_queue_usage, (Datum) 0)) > 0.5)
		ereport(WARNING,
				(errmsg("streamwm: no notification for query \"%s\": the notification queue is more than half full",
						def->name),
				 errhint("A session that listens on channel streamwm does not read its notifications.")));
	else
		Async_Notify("streamwm", payload.data);
	pfree(payload.data);
}

/*
 * Upsert the windows of one query that closed since its closed_until.
 * Runs in a subtransaction; an error is recorded in last_error and
 * reported as a WARNING, and the query retries next step.
 */
static bool
close_windows_once(SwQueryDef *def, TimestampTz upto, Datum offsets, bool upsert)
{
	SwStepEntry *outer_running;
	bool		outer_upsert;
	bool		again;
	volatile bool armed_here = false;
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;

	/*
	 * What the query's step builds (its analyzed tree, statement text,
	 * pane plan) lives in a context of its own, gone when the step is.
	 */
	MemoryContext stepcxt = AllocSetContextCreate(cxt, "streamwm query step",
												  ALLOCSET_DEFAULT_SIZES);

	/* a step nested in user code of an outer one leaves the outer's marks */
	sw_step_insert_marks(&outer_running, &outer_upsert);
	sw_step_insert_set_marks(NULL, upsert);
	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(stepcxt);
	PG_TRY();
	{
		SwRoleContext qcx;
		int64		windows;
		int64		rows;
		int64		refired;
		int			memlevel;

		sw_enter_role(def->owner, def->search_path, &qcx);

		/*
		 * streamwm.query_timeout covers building, planning and running it,
		 * unless this step is nested in user code of an outer one (the
		 * query's function, or an index predicate planned in a read, calls
		 * process()): the outer step's timer runs on, and is neither reset
		 * nor disarmed here, or user code could hold a step forever.
		 */
		armed_here = !sw_query_timeout_active();
		if (armed_here)
			sw_query_timeout_enable();
		memlevel = sw_step_memory_enter();
		if (def->session)
		{
			/* session windows (session.c): those ending in (closed_until, W] */
			sw_session_upsert_windows(def, offsets, upto, &windows, &rows);
			refired = 0;
		}
		else
			sw_upsert_windows(def, offsets,
							  TIMESTAMP_IS_NOBEGIN(def->closed_until) ?
							  DT_NOBEGIN : def->closed_until - def->size_us,
							  upto - def->size_us,
							  &windows, &rows, &refired);
		/* result_retention: the rows that ended long enough before go */
		if (def->result_retention_us > 0 && OidIsValid(def->result_table) &&
			!TIMESTAMP_NOT_FINITE(upto))
		{
			Oid			type = TIMESTAMPTZOID;
			TimestampTz before;
			Datum		value;

			if (!pg_sub_s64_overflow(upto, def->result_retention_us, &before))
			{
				value = TimestampTzGetDatum(before);
				sw_spi_exec(psprintf("DELETE FROM %s WHERE %s OPERATOR(pg_catalog.<) $1",
									 sw_relation_name(def->result_table),
									 def->ordered ? "event_time" : "window_end"),
							1, &type, &value, NULL, SPI_OK_DELETE);
			}
		}
		sw_step_memory_leave(memlevel);
		if (armed_here)
			sw_query_timeout_disable();
		/* a timeout that fired just before it was disabled fails here */
		CHECK_FOR_INTERRUPTS();
		sw_leave_role(&qcx);

		sw_catalog_query_succeeded(def->name, upto, windows, rows,
								   def->result_table, refired);
		if (rows > 0)
			notify_results(def, upto, rows);

		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
		MemoryContextDelete(stepcxt);
	}
	PG_CATCH();
	{
		ErrorData  *edata;
		bool		timed_out;

		if (armed_here)
			sw_query_timeout_disable();
		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
		MemoryContextDelete(stepcxt);

		/* the plain INSERT met a key already there: again, with the upsert */
		again = sw_step_plain_insert_failed(edata->sqlerrcode == ERRCODE_UNIQUE_VIOLATION ||
											edata->sqlerrcode == ERRCODE_EXCLUSION_VIOLATION) &&
			!upsert;
		sw_step_insert_set_marks(outer_running, outer_upsert);
		if (again)
		{
			FreeErrorData(edata);
			return true;
		}

		/*
		 * Our own timeout is the query's fault: recorded and backed off like
		 * any error.  An outer step's timeout that fired in here, any other
		 * cancel, or a shutdown is not: pass it on.
		 */
		timed_out = armed_here && edata->sqlerrcode == ERRCODE_QUERY_CANCELED &&
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

		/*
		 * Pane state that does not read back (a state that fails its MAC or
		 * header check) is a cache gone bad: the next step rebuilds it from
		 * the retained rows.
		 */
		sw_catalog_query_failed(def->name, edata->message,
								(def->pane || def->session || def->count) &&
								edata->sqlerrcode == ERRCODE_DATA_CORRUPTED);
		ereport(WARNING,
				(errcode(edata->sqlerrcode),
				 timed_out ? errmsg_internal("%s", edata->message) :
				 errmsg("streamwm query \"%s\" failed: %s", def->name, edata->message),
				 edata->detail ? errdetail_internal("%s", edata->detail) : 0,
				 errhint("The query's windows stay open and are retried on the next step.")));
		FreeErrorData(edata);
	}
	PG_END_TRY();
	sw_step_insert_set_marks(outer_running, outer_upsert);
	return false;
}

/*
 * Upsert the windows of one query that closed since its closed_until (see
 * close_windows_once), a second time, with the upsert, when its
 * statement's plain INSERT met a row already in the result table
 * (step_cache.c, sw_step_entry_execute).  The second time starts from the
 * definition as the first found it: what the first changed in it (a pane
 * table made anew) was rolled back with its subtransaction.
 */
static void
close_windows(SwQueryDef *def, TimestampTz upto, Datum offsets)
{
	SwQueryDef	before = *def;

	if (close_windows_once(def, upto, offsets, false))
	{
		*def = before;
		(void) close_windows_once(def, upto, offsets, true);
	}
}

/*
 * Has the query rows it has not read yet?  With allowed_lateness a step
 * that leaves W where it was may still accept rows into closed windows,
 * which the query must re-fire in that step; the query's folded offsets
 * (pane.c; the general plan records them too, query.c) say how far its
 * last successful step read.  No record: it has not run yet.
 */
static bool
query_has_unread(const SwQueryDef *def, const SwStreamClock *clock)
{
	ArrayType  *a;
	Datum	   *elems;
	bool	   *nulls;
	int			n;

	if (def->folded_offsets == (Datum) 0)
		return true;
	a = DatumGetArrayTypeP(def->folded_offsets);
	deconstruct_array(a, INT8OID, sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE,
					  &elems, &nulls, &n);
	if (n != clock->npartitions)
		return true;
	for (int i = 0; i < n; i++)
		if (nulls[i] || DatumGetInt64(elems[i]) != clock->parts[i].processed_offset)
			return true;
	return false;
}

/*
 * The oldest event time a query still needs (DT_NOBEGIN: all): rows older
 * are in no window that may still change, i.e. none that is open or that a
 * row accepted within allowed_lateness could re-fire (end > closed_until -
 * allowed_lateness).  Also what its panes are pruned by (pane.c).
 */
static TimestampTz
query_needs_from(const SwQueryDef *def)
{
	TimestampTz keep;

	/* a session query: the first event of its earliest open session, or W */
	if (def->session)
		return def->session_from;
	/* a count query: rows from its earliest incomplete window on (count.c) */
	if (def->count)
		return TIMESTAMP_IS_NOBEGIN(def->count_needs) ?
			def->closed_until : Min(def->count_needs, def->closed_until);
	if (TIMESTAMP_IS_NOBEGIN(def->closed_until) ||
		pg_sub_s64_overflow(def->closed_until, def->size_us, &keep) ||
		pg_sub_s64_overflow(keep, def->lateness_us, &keep) ||
		!IS_VALID_TIMESTAMP(keep))
		return DT_NOBEGIN;
	return keep;
}

/*
 * Close windows of every query of the stream, and re-fire the closed
 * windows that rows accepted within allowed_lateness fell into.  Returns
 * the oldest event time any query still needs, DT_NOEND if none.
 */
static TimestampTz
close_all_windows(Oid relid, const SwStreamClock *clock, TimestampTz now,
				  bool from_worker)
{
	List	   *names;
	ListCell   *lc;
	TimestampTz needed = DT_NOEND;
	Datum		offsets = processed_offsets(clock);

	names = sw_catalog_stream_queries(relid);
	foreach(lc, names)
	{
		SwQueryDef *def = sw_catalog_load_query(lfirst(lc));
		TimestampTz keep;

		if (def == NULL)
			continue;
		/* a paused query closes nothing; retention keeps what it needs */
		if (def->paused)
			;
		/* a worker retries a failing query with exponential backoff */
		else if (from_worker && def->errors > 0 &&
			now < def->last_error_time +
			Min(SW_QUERY_MAX_BACKOFF_US, USECS_PER_SEC << Min(def->errors - 1, 16)))
			;
		/*
		 * processing time: every step folds what it read into the pane of
		 * its clock, and closes the windows that clock has passed; a clock
		 * behind closed_until counts as closed_until (whose pane is in no
		 * closed window), so the rows are folded by the step that reads
		 * them whatever its clock
		 */
		else if (def->processing)
		{
			close_windows(def, Max(now, def->closed_until), offsets);
			def = sw_catalog_load_query(lfirst(lc));
			if (def == NULL)
				continue;
		}
		else if (!TIMESTAMP_IS_NOBEGIN(clock->watermark) &&
				 (def->closed_until < clock->watermark ||
				  (def->lateness_us > 0 && query_has_unread(def, clock))))
		{
			close_windows(def, clock->watermark, offsets);
			def = sw_catalog_load_query(lfirst(lc));
			if (def == NULL)
				continue;
		}
		/*
		 * rows older than this are in no window of the query that may
		 * change; a processing-time query needs no row once it folded what
		 * it read (its panes are its state), all of them until it has
		 */
		if (def->processing)
			keep = def->errors > 0 || def->paused ? DT_NOBEGIN : DT_NOEND;
		else
			keep = query_needs_from(def);
		if (keep < needed)
			needed = keep;
	}
	return needed;
}

/*
 * A step reads the stream through its BRIN index: the rows of a batch by
 * offset (read_batch), windows by event time (the general plan, count and
 * session queries, ordered output: query.c, count.c, session.c), if the
 * planner has the statistics to see that it pays (below).  A block range
 * nobody summarised yet matches every scan, and only VACUUM summarises new
 * ranges (autosummarize is off: its requests overflowed autovacuum's queue
 * and logged a line per 32 pages of a bulk load), so before it reads, a
 * step has the ranges written since the last one summarised: then each
 * batch of a long catch-up reads only its own pages, not the whole backlog
 * again.  brin_summarize_new_values() takes SHARE UPDATE EXCLUSIVE on the
 * stream; when someone holds it (VACUUM, ANALYZE, CREATE INDEX
 * CONCURRENTLY) the step does not wait: the ranges stay unsummarised
 * (read, not skipped) until a later step or autovacuum.
 */
static void
summarize_new_ranges(Oid relid, Oid owner, const char *relname)
{
	SwRoleContext rcx;
	Oid			types[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(relid)};
	Relation	rel;

	/*
	 * The stream's own index (stream_brin.c), under the index's lock only:
	 * also while a VACUUM of the stream runs, which holds SHARE UPDATE
	 * EXCLUSIVE on the table for as long as it takes (an autovacuum of a
	 * stream growing by 200,000 rows a second made steps skip summarising
	 * for seconds, and every batch read the unsummarised ranges again: the
	 * worker fell behind, bench/results-e2e.md).
	 */
	rel = table_open(relid, AccessShareLock);
	sw_stream_brin_summarize(rel);
	table_close(rel, NoLock);

	if (!ConditionalLockRelationOid(relid, ShareUpdateExclusiveLock))
		return;
	/* as the stream's owner: the function requires it */
	sw_enter_role(owner, SW_SAFE_SEARCH_PATH, &rcx);

	/*
	 * The planner costs a BRIN scan by the column's correlation: a stream
	 * never analysed (autovacuum has not come yet) gets sequential scans.
	 * ANALYZE it once; autovacuum keeps the statistics after that.
	 */
	if (!sw_stream_has_statistics(relid))
		sw_spi_exec_bounded(psprintf("analyzing stream %s", relname),
							psprintf("ANALYZE %s", relname),
							0, NULL, NULL, NULL, SPI_OK_UTILITY, InvalidSnapshot);
	/* PostgreSQL's BRIN indexes: a user's, a distributed stream's on sw_event_time */
	sw_spi_exec("SELECT pg_catalog.brin_summarize_new_values(i.indexrelid)"
				" FROM pg_catalog.pg_index i"
				" JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) i.indexrelid"
				" JOIN pg_catalog.pg_am a ON a.oid OPERATOR(pg_catalog.=) c.relam"
				" WHERE i.indrelid OPERATOR(pg_catalog.=) $1"
				" AND a.amname OPERATOR(pg_catalog.=) 'brin' AND i.indisvalid",
				1, types, values, NULL, SPI_OK_SELECT);
	sw_leave_role(&rcx);

	/*
	 * The function let its own locks go; ours goes too, or autovacuum,
	 * which skips a table it cannot lock at once, would hardly ever find a
	 * stream its worker steps all the time free, and the space retention
	 * frees would not be reused (test/t/003_soak.pl: the table doubled).
	 */
	UnlockRelationOid(relid, ShareUpdateExclusiveLock);
}

/*
 * Retention of late events (SPEC section 8: late events are evidence): a
 * late row and its streamwm.late_event_log entry are removed once they
 * arrived before now - retention, whatever their event time.  Returns the
 * number of stream rows removed.
 */
/*
 * A distributed stream's retention (citus.c): what it removed from the
 * coordinator's copy of the rows (the DELETE's RETURNING partition and
 * offset) goes from the shards too.  As the stream's owner.
 */
static void
expire_distributed(Oid relid)
{
	if (!sw_stream_distributed(relid, NULL, NULL) || SPI_processed == 0)
		return;
	sw_citus_forget_rows(relid, SPI_tuptable, SPI_processed);
}

/* " RETURNING ..." for retention's DELETE on a distributed stream's copy */
static const char *
returning_if_distributed(Oid relid)
{
	return sw_stream_distributed(relid, NULL, NULL) ?
		" RETURNING t.sw_partition, t.sw_offset" : "";
}

static uint64
expire_late_rows(Oid relid, Oid owner, const char *relname, int64 retention_us,
				 TimestampTz now, bool on_nodes)
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
	/*
	 * Usually there is nothing to expire: do not let the DELETE's plan (a
	 * stream not analysed yet may get a sequential scan) cost every step.
	 */
	if (!sw_catalog_has_late_before(relid, cutoff))
		return 0;
	values[0] = ObjectIdGetDatum(relid);
	values[1] = TimestampTzGetDatum(cutoff);
	sw_enter_role(owner, SW_SAFE_SEARCH_PATH, &rcx);
	if (on_nodes)
	{
		/* no copy: on the shards (citus.c) */
		removed = sw_citus_expire_on_nodes(relid, NULL, DT_NOBEGIN, cutoff);
		sw_leave_role(&rcx);
		sw_catalog_expire_late_log(relid, cutoff);
		return removed;
	}
	sw_retention_delete(relid, relname,
						psprintf("DELETE FROM ONLY %s t USING streamwm.late_event_log l"
								 " WHERE l.stream OPERATOR(pg_catalog.=) $1"
								 " AND l.arrival OPERATOR(pg_catalog.<) $2"
								 " AND t.sw_partition OPERATOR(pg_catalog.=) l.partition"
								 " AND t.sw_offset OPERATOR(pg_catalog.=) l.sw_offset%s",
								 relname, returning_if_distributed(relid)),
						2, types, values);
	removed = SPI_processed;
	expire_distributed(relid);
	sw_leave_role(&rcx);
	sw_catalog_expire_late_log(relid, cutoff);
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
			int64 retention_us, TimestampTz needed, bool on_nodes)
{
	SwRoleContext rcx;
	TimestampTz horizon;
	Oid			types[3] = {OIDOID, TIMESTAMPTZOID, INT8ARRAYOID};
	Datum		values[3];
	uint64		removed;
	TimestampTz mark;

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
	if (!sw_catalog_newest_mark_below(relid, horizon, &values[2], &mark))
		return 0;

	sw_enter_role(owner, SW_SAFE_SEARCH_PATH, &rcx);
	if (on_nodes)
	{
		/* no copy: on the shards (citus.c), up to the mark's offsets */
		Datum	   *marks;
		bool	   *mnulls;
		int			nmarks;
		int64	   *upto = palloc(clock->npartitions * sizeof(int64));

		deconstruct_array(DatumGetArrayTypeP(values[2]), INT8OID, 8, FLOAT8PASSBYVAL,
						  TYPALIGN_DOUBLE, &marks, &mnulls, &nmarks);
		for (int p = 0; p < clock->npartitions; p++)
			upto[p] = p < nmarks && !mnulls[p] ? DatumGetInt64(marks[p]) : PG_INT64_MIN;
		removed = sw_citus_expire_on_nodes(relid, upto, horizon, DT_NOBEGIN);
		sw_leave_role(&rcx);
		sw_catalog_consume_marks(relid, horizon, values[2], mark);
		if (removed > 0)
			sw_catalog_set_retained_from(relid, horizon);
		return removed;
	}
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
								 " AND l.sw_offset OPERATOR(pg_catalog.=) r.sw_offset)))%s",
								 relname, relname, returning_if_distributed(relid)),
						3, types, values);
	removed = SPI_processed;
	expire_distributed(relid);
	sw_leave_role(&rcx);
	sw_catalog_consume_marks(relid, horizon, values[2], mark);
	if (removed > 0)
		sw_catalog_set_retained_from(relid, horizon);
	return removed;
}

/*
 * Retention (SPEC section 8): accepted rows by event time once no query
 * needs them, late rows by arrival; both counted in expired_rows.
 */
static void
apply_retention(Oid relid, Oid owner, const char *relname, const SwStreamClock *clock,
				int64 retention_us, TimestampTz needed, TimestampTz now, bool on_nodes)
{
	uint64		removed;

	removed = expire_late_rows(relid, owner, relname, retention_us, now, on_nodes);
	removed += expire_rows(relid, owner, relname, clock, retention_us, needed, on_nodes);
	if (removed == 0)
		return;
	sw_catalog_count_expired(relid, (int64) removed);
}

/* The newest arrival the step has applied to the watermark rule. */
static TimestampTz
last_arrival(const SwStreamClock *clock)
{
	TimestampTz newest = DT_NOBEGIN;

	for (int i = 0; i < clock->npartitions; i++)
		if (clock->parts[i].last_arrival > newest)
			newest = clock->parts[i].last_arrival;
	return newest;
}

/*
 * The promise of a chain: when the stream is the result of a query, every
 * row that query writes from now on has an event time (its window start)
 * at or after the start of its first window not yet closed, the first
 * aligned start above closed_until - size: every window ending by
 * closed_until has been written, in rows this step's snapshot sees (the
 * same transactions moved closed_until).  Read with the step's snapshot,
 * never a later one.  DT_NOBEGIN when the stream is no query's result, or
 * that query has closed nothing yet.
 */
static TimestampTz
chain_promise(Oid relid, Snapshot snapshot)
{
	SwRoleContext cx;
	Oid			types[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(relid)};
	TimestampTz promise = DT_NOBEGIN;
	bool		isnull;
	Datum		d;

	sw_enter_catalog(&cx);
	sw_spi_exec_snapshot("SELECT CASE WHEN pg_catalog.min(closed_until) > '-infinity'"
						 " THEN pg_catalog.min(streamwm.window_start(closed_until - size, hop, origin) + hop) END"
						 " FROM streamwm.query_def WHERE result_stream AND result_table = $1",
						 1, types, values, NULL, SPI_OK_SELECT, snapshot);
	d = sw_spi_getdatum(0, 1, &isnull);
	if (!isnull)
		promise = DatumGetTimestampTz(d);
	SPI_freetuptable(SPI_tuptable);
	sw_leave_role(&cx);
	return promise;
}

/*
 * The streams whose step this backend is running.  User code a step runs
 * (a query's function, the stream owner's index or policy code) may call
 * process(); of another stream that is a nested step, but a second step of
 * the same stream would read the same rows again (events counted twice)
 * and save its state under the outer one.
 */
static List *steps_running = NIL;

static bool folds_on_nodes(Oid relid);
static int64 process_stream_once(Oid relid, TimestampTz now, bool from_worker,
								 int64 max_rows);

/* Is a step of this stream running in this backend (sw_process_stream)? */
static bool
step_running(Oid relid)
{
	return list_member_oid(steps_running, relid);
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
	int64		events;
	MemoryContext old;

	if (step_running(relid))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("stream %s is already being processed in this session",
						sw_relation_name(relid)),
				 errdetail("streamwm.process() was called from code that a step of the same stream runs (a query's function, or the stream owner's index or policy code).")));
	old = MemoryContextSwitchTo(TopMemoryContext);
	steps_running = lappend_oid(steps_running, relid);
	MemoryContextSwitchTo(old);
	PG_TRY();
	{
		events = process_stream_once(relid, now, from_worker, max_rows);
	}
	PG_FINALLY();
	{
		steps_running = list_delete_last(steps_running);
	}
	PG_END_TRY();
	return events;
}

static int64
process_stream_once(Oid relid, TimestampTz now, bool from_worker, int64 max_rows)
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
	StepReader	reader;
	TimestampTz fence_clock;
	Oid			rowsrel;
	Oid			logrel;
	bool		distributed;
	char	   *rowsname;
	int64	   *before = NULL;

	memset(&clock, 0, sizeof(clock));
	memset(&late, 0, sizeof(late));
	late.cap = 64;
	late.partition = palloc(late.cap * sizeof(int32));
	late.offset = palloc(late.cap * sizeof(int64));
	late.event_time = palloc(late.cap * sizeof(TimestampTz));
	late.watermark = palloc(late.cap * sizeof(TimestampTz));
	late.arrival = palloc(late.cap * sizeof(TimestampTz));
	late.pending_min = DT_NOEND;

	/*
	 * The rows a step reads and the rows its window statements read must be
	 * the same: with a transaction snapshot they would not be.
	 */
	if (IsolationUsesXactSnapshot())
		ereport(ERROR,
				(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
				 errmsg("streamwm.process() must run in a READ COMMITTED transaction"),
				 errdetail("The transaction's isolation level is %s.",
						   IsolationIsSerializable() ? "SERIALIZABLE" : "REPEATABLE READ")));
	/* its rows have not arrived yet, and they would be read as if they had */
	if (sw_commit_order_wrote(relid) || sw_citus_wrote(relid))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot process stream %s in the transaction that wrote into it",
						sw_relation_name(relid)),
				 errdetail("Rows arrive when the transaction that wrote them commits."),
				 errhint("Commit first, then call streamwm.process().")));

	/* a stream Citus took over cannot be read here (citus.c) */
	sw_citus_refuse_stream(relid);

	/* streamwm's own statements run as the catalog's owner, user SQL as its owner */
	sw_enter_catalog(&ccx);
	if (!sw_catalog_lock_stream(relid, from_worker, &clock, &retention_us))
	{
		sw_leave_role(&ccx);
		return -1;
	}
	relname = sw_relation_name(relid);
	owner = sw_relation_owner(relid);
	/* a distributed stream's rows are read into the coordinator's copy (citus.c) */
	distributed = sw_stream_distributed(relid, &rowsrel, &logrel);
	if (!distributed)
		rowsrel = relid;
	rowsname = distributed ? sw_relation_name(rowsrel) : relname;

	/* what has arrived, and who is still writing (commit_order.c) */
	memset(&reader, 0, sizeof(reader));
	reader.relid = relid;
	reader.clock = &clock;
	reader.live = palloc(clock.npartitions * sizeof(SwPartitionHold));
	reader.pstart = palloc0(clock.npartitions * sizeof(int));
	reader.pend = palloc0(clock.npartitions * sizeof(int));
	reader.cursor = palloc0(clock.npartitions * sizeof(int));
	reader.cut = palloc(clock.npartitions * sizeof(bool));
	reader.beyond_hi = palloc(clock.npartitions * sizeof(int64));
	reader.beyond = palloc(clock.npartitions * sizeof(TimestampTz));
	reader.beyond_known = palloc0(clock.npartitions * sizeof(bool));
	for (int i = 0; i < clock.npartitions; i++)
	{
		/* no batch read yet: every unread entry is past it */
		reader.cut[i] = true;
		reader.beyond_hi[i] = -1;
	}
	if (distributed)
	{
		before = palloc(clock.npartitions * sizeof(int64));
		for (int p = 0; p < clock.npartitions; p++)
			before[p] = clock.parts[p].processed_offset;
		/* each node's fence, then what arrived before the earliest of them */
		/* its shards are read as its owner, who must have made them */
		sw_citus_check_owner(relid);
		/* no copy of the rows when every query folds on the nodes */
		reader.on_nodes = folds_on_nodes(relid);
		fence_clock = sw_citus_read_arrivals(relid, rowsrel, logrel, owner, reader.on_nodes,
											 &clock, reader.live);
		CommandCounterIncrement();
		reader.snapshot = RegisterSnapshot(GetLatestSnapshot());
	}
	else
		reader.snapshot = sw_commit_fence(relid, clock.npartitions, reader.live, &fence_clock);
	clock.held_from = held_from;
	clock.held_arg = &reader;
	if (TIMESTAMP_IS_NOBEGIN(now))
		now = fence_clock;
	if (reader.on_nodes)
		rowsname = relname;
	else
		summarize_new_ranges(rowsrel, owner, rowsname);

	for (;;)
	{
		int64		limit = sw_batch_size;
		uint64		n;

		if (max_rows > 0 && max_rows - events < limit)
			limit = Max(max_rows - events, 1);
		n = read_batch(&reader, owner, rowsname, limit, &late, &caught_up);
		events += n;
		if (caught_up)
			break;
		if (max_rows > 0 && events >= max_rows)
			break;
		CHECK_FOR_INTERRUPTS();
	}

	/*
	 * Every row that had arrived by the fence is read: apply the partitions
	 * that went idle since, up to the step's clock (never behind the last
	 * arrival read, which has already been applied).  A partition with a
	 * backlog is never idle: only judge when caught up.
	 */
	if (caught_up)
	{
		clock.promise = chain_promise(relid, reader.snapshot);
		if (now > last_arrival(&clock))
			sw_advance_until(&clock, now);
		else if (!TIMESTAMP_IS_NOBEGIN(clock.promise))
			sw_advance_watermark(&clock, last_arrival(&clock));
	}
	clock.held_from = NULL;
	UnregisterSnapshot(reader.snapshot);

	save_stream(relid, &clock, events, &late, now);
	sw_catalog_prune_commit_log(relid, processed_offsets(&clock));
	needed = close_all_windows(relid, &clock, now, from_worker);
	apply_retention(relid, owner, rowsname, &clock, retention_us, needed, now, reader.on_nodes);
	/* after the queries and retention: see sw_citus_prune_log */
	if (distributed)
		sw_citus_prune_log(logrel, owner, &clock, before);
	sw_leave_role(&ccx);
	return events;
}

/*
 * Does every query of distributed stream relid fold on the nodes
 * (citus_fold.c)?  Then a step makes no copy of the rows (citus.c).
 */
static bool
folds_on_nodes(Oid relid)
{
	ListCell   *lc;

	foreach(lc, sw_catalog_stream_queries(relid))
	{
		SwQueryDef *def = sw_catalog_load_query(lfirst(lc));

		if (def != NULL && !sw_query_folds_on_nodes(def))
			return false;
	}
	return true;
}

/*
 * streamwm.process(stream regclass DEFAULT NULL, now timestamptz DEFAULT NULL)
 *
 * A role may process the streams it manages (it is a member of their
 * owner): all of them when stream is NULL.  Processing someone else's
 * stream would let a role hold its catalog row locked.
 */
static Datum
process_impl(PG_FUNCTION_ARGS)
{
	/* no clock given: the step's own, read when it reads the stream */
	TimestampTz now = PG_ARGISNULL(1) ? DT_NOBEGIN : PG_GETARG_TIMESTAMPTZ(1);
	List	   *streams = NIL;
	ListCell   *lc;

	sw_require_extension_version();

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (!PG_ARGISNULL(0))
	{
		(void) sw_check_stream_manager(PG_GETARG_OID(0), false);
		streams = list_make1_oid(PG_GETARG_OID(0));
	}
	else
		streams = sw_catalog_managed_streams();
	foreach(lc, streams)
	{
		/* all streams: leave out those this transaction wrote into (commit first) */
		if (PG_ARGISNULL(0) && sw_commit_order_wrote(lfirst_oid(lc)))
		{
			ereport(NOTICE,
					(errmsg("stream %s is not processed: this transaction wrote into it",
							sw_relation_name(lfirst_oid(lc)))));
			continue;
		}
		/* ... and those whose step runs the code that called this */
		if (PG_ARGISNULL(0) && step_running(lfirst_oid(lc)))
		{
			ereport(NOTICE,
					(errmsg("stream %s is not processed: its step is running in this session",
							sw_relation_name(lfirst_oid(lc)))));
			continue;
		}
		(void) sw_process_stream(lfirst_oid(lc), now, false, 0);
	}
	SPI_finish();
	PG_RETURN_VOID();
}

/* the entry point: errors without streamwm's internal frames (api.c) */
Datum
streamwm_process(PG_FUNCTION_ARGS)
{
	return sw_api_guard(process_impl, fcinfo);
}
