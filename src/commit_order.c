/*-------------------------------------------------------------------------
 * commit_order.c
 *	  Owns the order in which the rows of a stream reach processing
 *	  (SPEC sections 3 and 4): a row arrives when the transaction that wrote
 *	  it commits, and no writer ever waits for another writer's open
 *	  transaction.
 *
 * Writing.  The insert trigger (ingest.c) gives each row an offset from the
 * stream's sequence at once, without any lock, and notes here, per
 * transaction, the partitions written and the lowest and highest offset
 * taken in each (sw_commit_order_note).  The first row a transaction writes
 * into a partition also takes a transaction-scoped ShareLock on the
 * partition's *hold* tag: writers share it, so none waits; processing looks
 * at who holds it to know that rows are on their way (a partition held by
 * an open writing transaction is not idle, SPEC section 4).
 *
 * Committing.  Just before the transaction commits (XACT_EVENT_PRE_COMMIT)
 * it takes an ExclusiveLock on the *commit* tag of every partition it
 * wrote, in a fixed order, and holds it until the commit is visible.  Under
 * that lock it reads the partition's newest entry in streamwm.commit_log
 * (hi: the highest offset committed there so far).  If its own offsets are
 * all above it, nothing moves; otherwise some transaction that took offsets
 * after ours committed first, and our rows are renumbered with fresh
 * offsets from the sequence, above everything committed (written into our
 * own uncommitted rows in place, or as heap updates where something else
 * holds the offset; only a transaction that overlapped another committed
 * one pays for it).  Then it adds one entry per partition:
 *
 *	 (stream, partition, lo, hi, arrival, held_from)
 *
 * meaning: the rows this transaction committed into the partition are
 * exactly those with lo < sw_offset <= hi (lo is the previous entry's hi,
 * or the stream's start floor when that is higher: see start_floor();
 * offsets in that range taken by other transactions either roll back or
 * are renumbered when they commit), they arrived at 'arrival' (the clock
 * under the lock, never before the previous entry's arrival), and the
 * partition was held from 'held_from' (the transaction's start) until then.
 * So, in each partition, offsets and arrivals increase in commit order,
 * and "offset > processed_offset" still finds every committed row exactly
 * once.  The commit locks are held only from this moment to the end of the
 * commit: a writer may wait for another's commit record, never for its
 * open transaction.
 *
 * Reading.  A step takes the commit locks of all the stream's partitions in
 * ShareLock mode (sw_commit_fence), notes which partitions are held by open
 * writers and since when, reads the clock and takes its snapshot, and lets
 * the locks go.  A transaction that stamped its arrival before that moment
 * is visible in the snapshot, one that stamps it later is not and arrives
 * after the step's clock: processing in arrival order never meets a row
 * that arrived before something it has already processed.
 *
 * A transaction that wrote into a (local) stream cannot be prepared
 * (PREPARE TRANSACTION): it would keep the commit locks until COMMIT
 * PREPARED.
 *
 * On a Citus worker (distributed streams, citus.c) the same happens in the
 * transaction Citus opened there: the locks are this node's, the entry goes
 * to the commit log's shard on this node, and Citus's two-phase commit
 * orders the rows at PREPARE (holding the locks until COMMIT PREPARED; a
 * PREPARE waits only briefly for them).  Offsets come from this node's
 * range of the sequence; after a shard move they may lie below the
 * partition's committed ones, see sw_shard_offset() and renumber().
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/generic_xlog.h"
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/transam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/catalog.h"
#include "catalog/indexing.h"
#include "catalog/namespace.h"
#include "catalog/pg_am.h"
#include "catalog/pg_class.h"
#include "catalog/pg_constraint.h"
#include "catalog/pg_index.h"
#include "catalog/pg_opfamily.h"
#include "catalog/pg_sequence.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "commands/sequence.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "storage/proc.h"
#include "storage/sinvaladt.h"
#include "utils/backend_status.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/relcache.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "catalog.h"
#include "commit_order.h"
#include "stream_brin.h"

/* field4 of streamwm's advisory lock tags; field3 is the partition */
#define SW_HOLD_LOCK_CLASS 0x7377
#define SW_COMMIT_LOCK_CLASS 0x7379
#define SW_CLAIM_LOCK_CLASS 0x737A

/* field3 of the tags that stand for the whole stream */
#define SW_WHOLE_STREAM ((uint32) 0xFFFFFFFF)
/* ... and, keyed by a sequence, for moving it on a Citus node (renumber) */
#define SW_SEQUENCE_MOVE ((uint32) 0xFFFFFFFE)

/*
 * A transaction holds at most this many partitions of a stream one by one;
 * beyond that it holds the whole stream (one lock), and commits take one
 * lock per stripe of partitions, not per partition: a stream may have 4096
 * partitions, the lock table is sized by max_locks_per_transaction.
 */
#define SW_MAX_HOLD_LOCKS 32

/*
 * No offset taken yet.  Offsets are positive, but a Citus node may hand out
 * provisional ones below zero (sw_shard_offset), never this low.
 */
#define SW_NO_OFFSET PG_INT64_MIN
#define SW_COMMIT_STRIPES 32

/* What this transaction wrote into one partition of one stream. */
typedef struct SwPartitionWrite
{
	Oid			relid;			/* the stream (on a Citus node: the shard's table) */
	Oid			table;			/* the table its rows are in: the stream, or its shard */
	Oid			log;			/* the shard of a distributed stream's commit log, or
								 * InvalidOid: streamwm.commit_log */
	Oid			seqoid;
	int32		partition;
	int64		lo;				/* lowest offset taken (SW_NO_OFFSET: none) */
	int64		hi;				/* highest offset taken */
	int			nruns;			/* the offsets taken, as runs [from, to] */
	int			capruns;
	int64	   *runs;			/* 2 * nruns */
	int		   *runwriter;		/* per run: who wrote its rows (writers[]) */
	int64		hwm;			/* at commit: the partition's newest entry's hi */
	TimestampTz prev_arrival;	/* and its arrival */
} SwPartitionWrite;

/* in TopTransactionContext; forgotten at the end of the transaction */
static SwPartitionWrite *writes = NULL;
static int	nwrites = 0;
static int	capwrites = 0;
static int	last_write = -1;
static bool ordering = false;	/* order_commit() is running */

/*
 * Who wrote rows, as the rows' INSERT ran: its role and search_path (a
 * SECURITY DEFINER function, or a step writing a result stream as the
 * query's owner, writes as another role than the session's).  Renumbering
 * makes a moved row's index entries as its writer did (update_offsets()).
 */
typedef struct SwWriter
{
	Oid			userid;
	char	   *search_path;
} SwWriter;

/*
 * Where this transaction stored its rows in each local stream table: the
 * runs of heap blocks, in the table's storage as it was then (relfilenode: a rewrite in the
 * transaction moves every row).  The access method notes each row it
 * stores (stream_am.c), renumbering each version it makes;
 * collect_own_rows() then reads only those blocks, not the stream's key index
 * (a stream need not have one), and the stream's own index gets the rows
 * of the runs' summarised block ranges at commit (stream_brin.c).  A
 * transaction that wrote a row an hour ago and one now, with others'
 * rows in between, has two short runs.  The runs are kept exact, sorted
 * and apart (two writers extending the table at the same time take blocks
 * in turn: each has a run per block or few, and renumbering read both
 * writers' blocks while runs were merged into sixteen): past
 * SW_SPAN_MAX_RUNS, neighbours are merged in pairs (a run may then cover
 * blocks it did not write: that costs, it is never wrong).  A run inserted
 * before others moves them (blocks noted in falling order, free space a
 * DELETE left): the bound keeps that to a few hundred megabytes of
 * memmove() at worst.
 */
#define SW_SPAN_MAX_RUNS 8192

typedef struct SwStoredSpan
{
	Oid			table;
	Oid			relfilenode;
	int			nruns;
	int			capruns;
	int			cur;			/* the run noted last */
	BlockNumber (*runs)[2];		/* sorted, neither overlapping nor touching */
} SwStoredSpan;

static SwStoredSpan *spans = NULL;
static int	nspans = 0;
static int	capspans = 0;
static bool stored_since_flush = false; /* rows noted since the indexes got them */

static SwWriter *writers = NULL;
static int	nwriters = 0;
static int	capwriters = 0;
static int	last_writer = -1;
static int	batch_writer = -1;	/* sw_commit_order_batch() */

static void
set_tag(LOCKTAG *tag, Oid relid, uint32 field3, uint16 class)
{
	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, relid, field3, class);
}

/* order_commit() runs at PREPARE (Citus's two-phase commit), not at COMMIT */
static bool preparing = false;

/* order_commit() runs on a Citus node (a distributed stream's shards) */
static bool on_citus_node = false;

/* this transaction wrote a start floor (_latest_offset) */
static bool wrote_floor = false;

/*
 * How long a distributed step's fence waits for committers on a node (ms):
 * the first SW_FENCE_TRY_MS without queueing, the rest queued.
 */
#define SW_FENCE_WAIT_MS 2000
#define SW_FENCE_TRY_MS 100
#define SW_FENCE_QUEUED_MS 1900		/* the rest, spelt out for the lock_timeout GUC */
StaticAssertDecl(SW_FENCE_QUEUED_MS == SW_FENCE_WAIT_MS - SW_FENCE_TRY_MS,
				 "the fence's queued wait is the rest of its wait");

/* how long a commit on a Citus node waits for a commit lock before giving up (ms) */
#define SW_PREPARE_LOCK_WAIT_MS 500

/* Take a lock that lasts until the top-level transaction ends. */
static void
lock_for_transaction(Oid relid, uint32 field3, uint16 class, LOCKMODE mode)
{
	LOCKTAG		tag;
	ResourceOwner save = CurrentResourceOwner;

	set_tag(&tag, relid, field3, class);
	CurrentResourceOwner = TopTransactionResourceOwner;
	PG_TRY();
	{
		/*
		 * On a Citus node a prepared transaction keeps its commit locks
		 * until COMMIT PREPARED, which its coordinator sends once every
		 * node is prepared.  Two transactions that each prepared on one
		 * node and wait for the other's lock on the other node would wait
		 * for each other across nodes, until Citus's distributed deadlock
		 * detection cancels one; and one left unfinished would hold every
		 * committer into its partitions.  So a commit there waits only a
		 * little for a commit lock another transaction holds (a commit
		 * record takes far less), then fails with a serialization failure
		 * the client can retry.
		 */
		if (on_citus_node && mode == ExclusiveLock)
		{
			TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
															   SW_PREPARE_LOCK_WAIT_MS);

			while (LockAcquire(&tag, mode, false, true) == LOCKACQUIRE_NOT_AVAIL)
			{
				if (GetCurrentTimestamp() >= deadline)
					ereport(ERROR,
							(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
							 errmsg("could not %s the rows written into stream %s",
									preparing ? "prepare" : "commit", sw_relation_name(relid)),
							 errdetail("Another transaction has held the commit lock of one of its "
									   "partitions on this node for more than %d ms: one being "
									   "committed in two phases, or a prepared transaction not "
									   "finished (pg_prepared_xacts).", SW_PREPARE_LOCK_WAIT_MS),
							 errhint("Retry the transaction. A transaction that writes the "
									 "partitions of one node only commits without two-phase commit.")));
				CHECK_FOR_INTERRUPTS();
				pg_usleep(1000L);
			}
		}
		else
			(void) LockAcquire(&tag, mode, false, false);
	}
	PG_FINALLY();
	{
		CurrentResourceOwner = save;
	}
	PG_END_TRY();
}

/* Let go of a lock taken by lock_for_transaction(). */
static void
unlock(Oid relid, uint32 field3, uint16 class, LOCKMODE mode)
{
	LOCKTAG		tag;
	ResourceOwner save = CurrentResourceOwner;

	set_tag(&tag, relid, field3, class);
	CurrentResourceOwner = TopTransactionResourceOwner;
	(void) LockRelease(&tag, mode, false);
	CurrentResourceOwner = save;
}

/*
 * w's transaction took 'offset' (at insert, or when renumbering): keep its
 * lowest and highest offset (SW_NO_OFFSET: none yet) and the exact offsets as runs,
 * so that renumbering moves its rows and only them.  Offsets are taken in
 * increasing order.
 */
static void
took(SwPartitionWrite *w, int64 offset, int writer)
{
	if (w->lo == SW_NO_OFFSET || offset < w->lo)
		w->lo = offset;
	if (offset > w->hi)
		w->hi = offset;
	if (w->nruns > 0 && w->runs[2 * w->nruns - 1] == offset - 1 &&
		w->runwriter[w->nruns - 1] == writer)
		w->runs[2 * w->nruns - 1] = offset;
	else
	{
		if (w->nruns == w->capruns)
		{
			w->capruns = w->capruns == 0 ? 4 : w->capruns * 2;
			w->runs = w->runs == NULL ?
				MemoryContextAlloc(TopTransactionContext, 2 * w->capruns * sizeof(int64)) :
				repalloc_huge(w->runs, 2 * w->capruns * sizeof(int64));
			w->runwriter = w->runwriter == NULL ?
				MemoryContextAlloc(TopTransactionContext, w->capruns * sizeof(int)) :
				repalloc_huge(w->runwriter, w->capruns * sizeof(int));
		}
		w->runs[2 * w->nruns] = offset;
		w->runs[2 * w->nruns + 1] = offset;
		w->runwriter[w->nruns] = writer;
		w->nruns++;
	}
}

/* The writer of the row being written now: an index into writers[]. */
static int
current_writer(void)
{
	Oid			userid = GetUserId();
	const char *path = namespace_search_path != NULL ? namespace_search_path : "";

	if (batch_writer >= 0)
	{
		/* nothing in a batch changes them (sw_commit_order_batch) */
		Assert(writers[batch_writer].userid == userid &&
			   strcmp(writers[batch_writer].search_path, path) == 0);
		return batch_writer;
	}
	if (last_writer >= 0 && writers[last_writer].userid == userid &&
		strcmp(writers[last_writer].search_path, path) == 0)
		return last_writer;
	for (int i = 0; i < nwriters; i++)
		if (writers[i].userid == userid && strcmp(writers[i].search_path, path) == 0)
			return last_writer = i;
	if (nwriters == capwriters)
	{
		capwriters = capwriters == 0 ? 2 : capwriters * 2;
		writers = writers == NULL ?
			MemoryContextAlloc(TopTransactionContext, capwriters * sizeof(SwWriter)) :
			repalloc(writers, capwriters * sizeof(SwWriter));
	}
	writers[nwriters].userid = userid;
	writers[nwriters].search_path = MemoryContextStrdup(TopTransactionContext, path);
	return last_writer = nwriters++;
}

/*
 * The rows of a COPY batch that is filled with no code of anyone's running
 * between its rows (ingest.c, sw_ingest_batch_state) have one writer:
 * looked up once, when the batch begins, and used for each row until it
 * ends (the search_path's comparison was 1% of a COPY).  The caller ends
 * the batch also when filling it fails.
 */
void
sw_commit_order_batch(bool begin)
{
	Assert(!begin || batch_writer < 0);	/* batches do not nest */
	batch_writer = -1;
	if (begin)
		batch_writer = current_writer();
}

/*
 * The insert trigger took 'offset' for a row of partition 'partition' of
 * stream 'relid' (whose sequence is 'seqoid').
 */
void
sw_commit_order_note(Oid relid, Oid table, Oid log, Oid seqoid, int32 partition, int64 offset)
{
	SwPartitionWrite *w = NULL;

	if (ordering)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot write into a stream while the transaction commits")));
	if (last_write >= 0 && last_write < nwrites &&
		writes[last_write].relid == relid && writes[last_write].partition == partition)
		w = &writes[last_write];
	else
	{
		int			in_stream = 0;

		for (int i = 0; i < nwrites; i++)
		{
			if (writes[i].relid != relid)
				continue;
			in_stream++;
			if (writes[i].partition == partition)
			{
				w = &writes[i];
				last_write = i;
				break;
			}
		}
		if (w == NULL)
		{
			if (nwrites == capwrites)
			{
				capwrites = capwrites == 0 ? 4 : capwrites * 2;
				writes = writes == NULL ?
					MemoryContextAlloc(TopTransactionContext,
									   capwrites * sizeof(SwPartitionWrite)) :
					repalloc(writes, capwrites * sizeof(SwPartitionWrite));
			}
			/* rows are on their way into this partition: it is held */
			if (in_stream < SW_MAX_HOLD_LOCKS)
				lock_for_transaction(relid, (uint32) partition, SW_HOLD_LOCK_CLASS, ShareLock);
			else if (in_stream == SW_MAX_HOLD_LOCKS)
				lock_for_transaction(relid, SW_WHOLE_STREAM, SW_HOLD_LOCK_CLASS, ShareLock);
			w = &writes[nwrites];
			memset(w, 0, sizeof(SwPartitionWrite));
			w->relid = relid;
			w->table = table;
			w->log = log;
			w->seqoid = seqoid;
			w->partition = partition;
			w->lo = w->hi = SW_NO_OFFSET;
			last_write = nwrites++;
		}
	}
	took(w, offset, current_writer());
}

static void note_run(SwStoredSpan *sp, BlockNumber blk);

/* This transaction's span in 'table' as stored in 'relfilenode', or NULL. */
static SwStoredSpan *
span_of(Oid table, Oid relfilenode)
{
	for (int i = 0; i < nspans; i++)
		if (spans[i].table == table && spans[i].relfilenode == relfilenode)
			return &spans[i];
	return NULL;
}

/*
 * The stream's access method stored a row of this transaction at 'tid' of
 * 'rel' (or renumbering stored a row's new version there).  Each storage of
 * the table (relfilenode) has its own span: a rewrite moves the rows
 * stored before into new storage, and a rewrite inside a savepoint rolled
 * back brings the old storage back, with its span.
 */
void
sw_commit_order_stored(Relation rel, ItemPointer tid)
{
	Oid			table = RelationGetRelid(rel);
	BlockNumber blk = ItemPointerGetBlockNumber(tid);
	SwStoredSpan *sp = span_of(table, rel->rd_node.relNode);

	stored_since_flush = true;

	if (sp == NULL)
	{
		if (nspans == capspans)
		{
			capspans = capspans == 0 ? 4 : capspans * 2;
			spans = spans == NULL ?
				MemoryContextAlloc(TopTransactionContext, capspans * sizeof(SwStoredSpan)) :
				repalloc(spans, capspans * sizeof(SwStoredSpan));
		}
		sp = &spans[nspans++];
		sp->table = table;
		sp->relfilenode = rel->rd_node.relNode;
		sp->capruns = 16;
		sp->runs = MemoryContextAlloc(TopTransactionContext, sp->capruns * sizeof(sp->runs[0]));
		sp->nruns = 1;
		sp->cur = 0;
		sp->runs[0][0] = sp->runs[0][1] = blk;
		return;
	}
	note_run(sp, blk);
}

/* Merge run i of *sp with the next one if they now touch. */
static void
join_next_run(SwStoredSpan *sp, int i)
{
	BlockNumber (*r)[2] = sp->runs;

	if (i + 1 < sp->nruns && (uint64) r[i][1] + 1 >= r[i + 1][0])
	{
		r[i][1] = Max(r[i][1], r[i + 1][1]);
		memmove(&r[i + 1], &r[i + 2], (sp->nruns - i - 2) * sizeof(r[0]));
		sp->nruns--;
	}
}

/* The first run of *sp that starts after 'blk' (sp->nruns if none). */
static int
run_after(SwStoredSpan *sp, BlockNumber blk)
{
	int			lo = 0;
	int			hi = sp->nruns;

	while (lo < hi)
	{
		int			mid = lo + (hi - lo) / 2;

		if (sp->runs[mid][0] > blk)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

/* Note block 'blk' in the runs of *sp. */
static void
note_run(SwStoredSpan *sp, BlockNumber blk)
{
	BlockNumber (*r)[2] = sp->runs;
	int			pos;

	/* almost always: in or just after the run noted last */
	if (blk >= r[sp->cur][0] && blk <= (uint64) r[sp->cur][1] + 1)
	{
		if (blk > r[sp->cur][1])
		{
			r[sp->cur][1] = blk;
			join_next_run(sp, sp->cur);
		}
		return;
	}
	pos = run_after(sp, blk);
	if (pos > 0 && blk <= (uint64) r[pos - 1][1] + 1)
	{
		/* in or just after the run before */
		r[pos - 1][1] = Max(r[pos - 1][1], blk);
		sp->cur = pos - 1;
		join_next_run(sp, pos - 1);
		return;
	}
	if (pos < sp->nruns && (uint64) blk + 1 == r[pos][0])
	{
		/* just before the run after (and apart from the one before) */
		r[pos][0] = blk;
		sp->cur = pos;
		return;
	}
	if (sp->nruns == sp->capruns)
	{
		if (sp->capruns >= SW_SPAN_MAX_RUNS)
		{
			/* neighbours merged in pairs: half as many runs, wider */
			int			n = 0;

			for (int i = 0; i < sp->nruns; i += 2)
			{
				r[n][0] = r[i][0];
				r[n][1] = r[Min(i + 1, sp->nruns - 1)][1];
				n++;
			}
			sp->nruns = n;
			sp->cur = 0;
			note_run(sp, blk);
			return;
		}
		sp->capruns *= 2;
		sp->runs = r = repalloc(r, sp->capruns * sizeof(r[0]));
	}
	memmove(&r[pos + 1], &r[pos], (sp->nruns - pos) * sizeof(r[0]));
	r[pos][0] = r[pos][1] = blk;
	sp->nruns++;
	sp->cur = pos;
}

/*
 * The blocks of its present storage this transaction stored rows of 'rel'
 * in, if that is all of them: not if it stored rows in storage the table
 * had before (a rewrite since moved them).
 */
static SwStoredSpan *
stored_span(Relation rel)
{
	SwStoredSpan *sp = nspans == 0 ? NULL : span_of(RelationGetRelid(rel), rel->rd_node.relNode);

	if (sp == NULL)
		return NULL;
	for (SwStoredSpan *earlier = spans; earlier < sp; earlier++)
		if (earlier->table == sp->table)
			return NULL;
	return sp;
}

/*
 * The runs of blocks this transaction stored rows of table 'table' in
 * through the stream's access method, in any storage the table had: a
 * palloc'd array, and how many (stream_brin.c).  The runs of earlier
 * storage count too: ALTER TABLE ... SET TABLESPACE copies the table block
 * by block into new storage and keeps its indexes, so the rows are where
 * they were; after a rewrite that moved them (and rebuilt the indexes),
 * the blocks are merely looked at for nothing.
 */
int
sw_commit_order_own_runs(Oid table, BlockNumber (**runs)[2])
{
	int			n = 0;

	*runs = NULL;
	for (int i = 0; i < nspans; i++)
		if (spans[i].table == table)
			n += spans[i].nruns;
	if (n == 0)
		return 0;
	*runs = palloc(n * sizeof(spans[0].runs[0]));
	n = 0;
	for (int i = 0; i < nspans; i++)
		if (spans[i].table == table)
		{
			memcpy(&(*runs)[n], spans[i].runs, spans[i].nruns * sizeof(spans[i].runs[0]));
			n += spans[i].nruns;
		}
	return n;
}

/* Did this transaction store rows in a stream table through the access method? */
bool
sw_commit_order_stored_any(void)
{
	return nspans > 0;
}

/* Did this transaction store a row of 'rel' in block 'blk' (as far as known)? */
bool
sw_commit_order_owns_block(Relation rel, BlockNumber blk)
{
	SwStoredSpan *sp = nspans == 0 ? NULL : span_of(RelationGetRelid(rel), rel->rd_node.relNode);
	int			pos;

	if (sp == NULL)
		return false;
	if (blk >= sp->runs[sp->cur][0] && blk <= sp->runs[sp->cur][1])
		return true;
	pos = run_after(sp, blk);
	return pos > 0 && blk <= sp->runs[pos - 1][1];
}

/*
 * The stream's index left a row of this transaction, in a block the
 * transaction stored rows in, for the flush (stream_brin.c): the flush
 * must come, also when the row itself was not noted (an UPDATE or INSERT
 * of a table of the method that is no stream, whose row went into a block
 * a COPY filled) and the transaction's rows went into the index already
 * (before a parallel query).  A review found such rows missing from the
 * index.
 */
void
sw_commit_order_left_for_flush(void)
{
	stored_since_flush = true;
}

/*
 * Offsets a chunk at a time.  A local stream's sequence steps by 64
 * (create_stream), and a backend hands out the values of each step itself:
 * one nextval() for 64 rows, not one a row (nextval locks and changes the
 * sequence's page, and logs it every 32 values: a tenth of a COPY into a
 * stream).  A chunk lives as long as the backend and serves the stream's
 * rows across statements and transactions while no other session takes
 * values after it (sw_take_offset), so one session writing alone gives
 * offsets without gaps; values left in it when the session ends are
 * never used, as a rolled-back insert's.  They are unique all the same, and
 * a transaction whose offsets lie below what another committed in its
 * partition meanwhile is renumbered at commit, as always: renumbering
 * takes a fresh chunk (above every value handed out before) and the
 * backend's own chunk of that sequence is dropped with it, its values
 * being below the new ones.  A sequence stepping by 1 (a stream made
 * before 0.3, a distributed stream's) gives one value a chunk.
 */
typedef struct SwOffsetChunk
{
	Oid			seqoid;
	int64		first;			/* the nextval() it came from */
	int64		next;
	int64		last;
	LocalTransactionId checked; /* the transaction that found it the newest */
} SwOffsetChunk;

#define SW_OFFSET_CHUNKS 8
static SwOffsetChunk offset_chunks[SW_OFFSET_CHUNKS];
static int	offset_chunk_victim = 0;

/* A fresh chunk of 'seqoid' into *c. */
static void
take_chunk(Oid seqoid, SwOffsetChunk *c)
{
	int64		v = nextval_internal(seqoid, false);
	int64		step = 1;
	int64		max = PG_INT64_MAX;
	HeapTuple	tup = SearchSysCache1(SEQRELID, ObjectIdGetDatum(seqoid));

	if (HeapTupleIsValid(tup))
	{
		Form_pg_sequence seq = (Form_pg_sequence) GETSTRUCT(tup);

		if (seq->seqincrement > 1)
			step = seq->seqincrement;
		max = seq->seqmax;
		ReleaseSysCache(tup);
	}
	c->seqoid = seqoid;
	c->first = c->next = v;
	c->last = (max - v < step - 1) ? max : v + step - 1;
	c->checked = MyProc->lxid;
}

/* The next offset of chunk *c of 'seqoid', which takes a fresh one when it is empty or another's. */
static int64
chunk_next(Oid seqoid, SwOffsetChunk *c)
{
	if (c->seqoid != seqoid || c->next > c->last)
		take_chunk(seqoid, c);
	return c->next++;
}

/*
 * The value the sequence 'seqoid' handed out last, read from its page as
 * pg_sequence_last_value() does (without its privilege check: the insert
 * takes the stream's offsets whoever its writer is).
 */
static int64
sequence_last_value(Oid seqoid)
{
	Relation	rel = relation_open(seqoid, AccessShareLock);
	Buffer		buf = ReadBuffer(rel, 0);
	Page		page;
	ItemId		lp;
	HeapTupleHeader tup;
	int64		last;

	LockBuffer(buf, BUFFER_LOCK_SHARE);
	page = BufferGetPage(buf);
	lp = PageGetItemId(page, FirstOffsetNumber);
	if (PageGetMaxOffsetNumber(page) < FirstOffsetNumber || !ItemIdIsNormal(lp))
		elog(ERROR, "streamwm: sequence %u has no tuple", seqoid);
	tup = (HeapTupleHeader) PageGetItem(page, lp);
	last = ((Form_pg_sequence_data) ((char *) tup + tup->t_hoff))->last_value;
	UnlockReleaseBuffer(buf);
	relation_close(rel, AccessShareLock);
	return last;
}

/* The next offset of this backend's chunk of 'seqoid'. */
int64
sw_take_offset(Oid seqoid)
{
	SwOffsetChunk *c = NULL;

	for (int i = 0; i < SW_OFFSET_CHUNKS && c == NULL; i++)
		if (offset_chunks[i].seqoid == seqoid)
			c = &offset_chunks[i];
	if (c == NULL)
	{
		c = &offset_chunks[offset_chunk_victim];
		offset_chunk_victim = (offset_chunk_victim + 1) % SW_OFFSET_CHUNKS;
	}

	/*
	 * A chunk kept from an earlier transaction of this backend is used only
	 * while no other backend took values after it: their transactions may
	 * commit before this one, and this one's rows, below theirs, would be
	 * renumbered at its commit.  Two sessions taking turns at writing would
	 * then renumber every transaction, each being below the other's chunk.
	 * So the first row of a transaction looks at the sequence, and takes a
	 * fresh chunk if another was taken since.
	 */
	else if (c->next <= c->last && c->checked != MyProc->lxid)
	{
		if (sequence_last_value(seqoid) != c->first)
			c->seqoid = InvalidOid;
		c->checked = MyProc->lxid;
	}
	return chunk_next(seqoid, c);
}

/* Drop this backend's chunk of 'seqoid': its values are below a renumbering's. */
static void
drop_chunk(Oid seqoid)
{
	for (int i = 0; i < SW_OFFSET_CHUNKS; i++)
		if (offset_chunks[i].seqoid == seqoid)
			offset_chunks[i].seqoid = InvalidOid;
}

/*
 * The offset of a new row in 'partition' of a distributed stream, on the
 * node that holds it (ingest.c; 'log' is the shard of the stream's commit
 * log here).  Each Citus node has its own range of the stream's sequence,
 * with its own MAXVALUE, so a partition whose shard moved here may have
 * committed offsets above this node's next value, and some of them may be
 * values this sequence would give later: a new row would collide with a
 * committed one.  So the first row this backend writes into a partition of
 * this shard (*mode 0) compares with the partition's newest committed
 * offset: the sequence is behind, it is moved past it if its range allows
 * (*mode 1, as when it is not behind); otherwise (*mode 2) rows get
 * provisional offsets below zero, which no committed row has, and their
 * commit gives them the offsets right after the partition's newest
 * (renumber(): its sequence can give nothing higher).  A shard that moves
 * here is a new relation, with a new *mode.
 */
int64
sw_shard_offset(Oid seqoid, Oid log, int32 partition, char *mode)
{
	int64		o;

	if (*mode == 0)
	{
		Oid			types[1] = {INT4OID};
		Datum		values[1] = {Int32GetDatum(partition)};
		int64		hi = 0;
		SwRoleContext cx;

		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "SPI_connect failed");
		sw_enter_catalog(&cx);
		sw_spi_exec_latest(psprintf("SELECT hi FROM ONLY %s WHERE partition = $1"
									" ORDER BY hi DESC LIMIT 1", sw_relation_name(log)),
						   1, types, values, NULL, SPI_OK_SELECT);
		if (SPI_processed == 1)
		{
			bool		isnull;

			hi = DatumGetInt64(sw_spi_getdatum(0, 1, &isnull));
		}
		sw_leave_role(&cx);
		SPI_finish();
		*mode = 1;
		/* the look and the move as one step: see renumber() */
		lock_for_transaction(seqoid, SW_SEQUENCE_MOVE, SW_COMMIT_LOCK_CLASS, ExclusiveLock);
		o = nextval_internal(seqoid, false);
		if (o <= hi)
		{
			HeapTuple	tup = SearchSysCache1(SEQRELID, ObjectIdGetDatum(seqoid));
			int64		max = PG_INT64_MAX;

			if (HeapTupleIsValid(tup))
			{
				max = ((Form_pg_sequence) GETSTRUCT(tup))->seqmax;
				ReleaseSysCache(tup);
			}
			if (hi < max - (INT64CONST(1) << 24))
			{
				(void) DirectFunctionCall2(setval_oid, ObjectIdGetDatum(seqoid), Int64GetDatum(hi));
				o = nextval_internal(seqoid, false);
			}
			else
				*mode = 2;
		}
		unlock(seqoid, SW_SEQUENCE_MOVE, SW_COMMIT_LOCK_CLASS, ExclusiveLock);
	}
	else
		o = nextval_internal(seqoid, false);
	/* below zero, increasing: the sequence's values are below 2^62 */
	if (*mode == 2)
		o -= INT64CONST(1) << 62;
	return o;
}

/* The run of w's offsets that holds 'offset', or -1 if it is not one. */
static int
offset_run(const SwPartitionWrite *w, int64 offset)
{
	int			lo = 0;
	int			hi = w->nruns - 1;

	/* runs are in increasing order: one sequence, taken in order */
	while (lo <= hi)
	{
		int			mid = (lo + hi) / 2;

		if (offset < w->runs[2 * mid])
			hi = mid - 1;
		else if (offset > w->runs[2 * mid + 1])
			lo = mid + 1;
		else
			return mid;
	}
	return -1;
}

/* Has this transaction written into the stream? */
bool
sw_commit_order_wrote(Oid relid)
{
	for (int i = 0; i < nwrites; i++)
		if (writes[i].relid == relid)
			return true;
	return false;
}

static int
write_cmp(const void *a, const void *b)
{
	const SwPartitionWrite *x = a;
	const SwPartitionWrite *y = b;

	if (x->relid != y->relid)
		return x->relid < y->relid ? -1 : 1;
	if (x->partition != y->partition)
		return x->partition < y->partition ? -1 : 1;
	return 0;
}

/* One of our own rows, found to be renumbered. */
typedef struct OwnRow
{
	int64		offset;
	ItemPointerData tid;
	int			write;			/* index into writes[] */
	int			writer;			/* index into writers[] */
	int64		new_offset;
} OwnRow;

static int
own_row_cmp(const void *a, const void *b)
{
	int64		x = ((const OwnRow *) a)->offset;
	int64		y = ((const OwnRow *) b)->offset;

	return x < y ? -1 : x > y ? 1 : 0;
}

/* By writer, then by offset. */
static int
writer_cmp(const void *a, const void *b)
{
	const OwnRow *x = a;
	const OwnRow *y = b;

	if (x->writer != y->writer)
		return x->writer < y->writer ? -1 : 1;
	return own_row_cmp(a, b);
}

/*
 * Note a row found by collect_own_rows() if it is ours: written by this
 * transaction (a table rewrite rewrites others' rows too) at an offset it
 * took in writes[w]'s partition.
 */
static void
note_own_row(TupleTableSlot *slot, int w, AttrNumber ap, AttrNumber ao,
			 OwnRow **rows, int64 *n, int64 *cap)
{
	bool		isnull;
	int32		partition;
	int64		offset;
	TransactionId xmin;
	int			run;

	/* first what needs no deforming: other writers' rows are most of a scan */
	xmin = DatumGetTransactionId(slot_getsysattr(slot, MinTransactionIdAttributeNumber, &isnull));
	if (!TransactionIdIsCurrentTransactionId(xmin))
		return;
	partition = DatumGetInt32(slot_getattr(slot, ap, &isnull));
	if (isnull || partition != writes[w].partition)
		return;
	offset = DatumGetInt64(slot_getattr(slot, ao, &isnull));
	if (isnull || offset < writes[w].lo || offset > writes[w].hi)
		return;
	run = offset_run(&writes[w], offset);
	if (run < 0)
		return;
	if (*n == *cap)
	{
		*cap = *cap == 0 ? 64 : *cap * 2;
		*rows = *rows == NULL ? palloc(*cap * sizeof(OwnRow)) :
			repalloc_huge(*rows, *cap * sizeof(OwnRow));
	}
	(*rows)[*n].tid = slot->tts_tid;
	(*rows)[*n].offset = offset;
	(*rows)[*n].write = w;
	(*rows)[*n].writer = writes[w].runwriter[run];
	(*n)++;
}

/*
 * The stream's key index: a valid btree whose first keys are sw_partition
 * and sw_offset with the integer operators, without a predicate; opened,
 * or NULL.
 */
static Relation
key_index(Relation rel, AttrNumber ap, AttrNumber ao)
{
	List	   *indexes = RelationGetIndexList(rel);
	ListCell   *lc;

	foreach(lc, indexes)
	{
		Relation	idx = index_open(lfirst_oid(lc), AccessShareLock);
		Form_pg_index form = idx->rd_index;

		if (idx->rd_rel->relam == BTREE_AM_OID && form->indisvalid && form->indisready &&
			form->indnkeyatts >= 2 &&
			form->indkey.values[0] == ap && form->indkey.values[1] == ao &&
			idx->rd_opfamily[0] == INTEGER_BTREE_FAM_OID &&
			idx->rd_opfamily[1] == INTEGER_BTREE_FAM_OID &&
			heap_attisnull(idx->rd_indextuple, Anum_pg_index_indpred, NULL))
			return idx;
		index_close(idx, AccessShareLock);
	}
	return NULL;
}

/*
 * Collect this transaction's rows of writes[w] in its table (the stream,
 * or on a Citus node its shard): by the key index; else in the blocks it
 * stored them in, which a local stream's access method notes; else by a
 * scan of the whole table.  No query: nothing is planned (planning loads
 * the indexes' expressions, the owner's, under whatever search_path is in
 * force) and no role is needed.
 */
static void
collect_own_rows(int w, OwnRow **rows, int64 *n, int64 *cap)
{
	Oid			table = writes[w].table;
	Relation	rel = table_open(table, AccessShareLock);
	AttrNumber	ap = get_attnum(table, "sw_partition");
	AttrNumber	ao = get_attnum(table, "sw_offset");
	Relation	idx;
	TupleTableSlot *slot;
	SwStoredSpan *sp;

	if (ap == InvalidAttrNumber || ao == InvalidAttrNumber ||
		get_atttype(table, ap) != INT4OID || get_atttype(table, ao) != INT8OID)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot commit rows into stream %s: its column sw_partition or sw_offset was changed",
						sw_relation_name(writes[w].relid))));
	slot = table_slot_create(rel, NULL);
	idx = key_index(rel, ap, ao);
	if (idx != NULL)
	{
		ScanKeyData keys[3];
		IndexScanDesc scan;

		ScanKeyInit(&keys[0], 1, BTEqualStrategyNumber, F_INT4EQ,
					Int32GetDatum(writes[w].partition));
		ScanKeyInit(&keys[1], 2, BTGreaterEqualStrategyNumber, F_INT8GE,
					Int64GetDatum(writes[w].lo));
		ScanKeyInit(&keys[2], 2, BTLessEqualStrategyNumber, F_INT8LE,
					Int64GetDatum(writes[w].hi));
		scan = index_beginscan(rel, idx, SnapshotSelf, 3, 0);
		index_rescan(scan, keys, 3, NULL, 0);
		while (index_getnext_slot(scan, ForwardScanDirection, slot))
		{
			CHECK_FOR_INTERRUPTS();
			note_own_row(slot, w, ap, ao, rows, n, cap);
		}
		index_endscan(scan);
		index_close(idx, AccessShareLock);
	}
	else if ((sp = stored_span(rel)) != NULL)
	{
		/* the blocks the access method stored them in, run by run */
		TableScanDesc scan = NULL;

		for (int i = 0; i < sp->nruns; i++)
		{
			ItemPointerData lo;
			ItemPointerData hi;

			ItemPointerSet(&lo, sp->runs[i][0], FirstOffsetNumber);
			ItemPointerSet(&hi, sp->runs[i][1], MaxOffsetNumber);
			if (scan == NULL)
				scan = table_beginscan_tidrange(rel, SnapshotSelf, &lo, &hi);
			else
				table_rescan_tidrange(scan, &lo, &hi);
			while (table_scan_getnextslot_tidrange(scan, ForwardScanDirection, slot))
			{
				CHECK_FOR_INTERRUPTS();
				note_own_row(slot, w, ap, ao, rows, n, cap);
			}
		}
		if (scan != NULL)
			table_endscan(scan);
	}
	else
	{
		TableScanDesc scan = table_beginscan(rel, SnapshotSelf, 0, NULL);

		while (table_scan_getnextslot(scan, ForwardScanDirection, slot))
		{
			CHECK_FOR_INTERRUPTS();
			note_own_row(slot, w, ap, ao, rows, n, cap);
		}
		table_endscan(scan);
	}
	ExecDropSingleTupleTableSlot(slot);
	table_close(rel, AccessShareLock);
}

/*
 * Move this transaction's rows in 'rel' (the stream, or on a Citus node
 * its shard; opened by the caller, 'att' its sw_offset) among rows[0..n)
 * to their new offsets: for each, a heap update and the new version's
 * index entries, made as the row's writer made them
 * (its role and search_path), in a security-restricted operation.  Not an
 * UPDATE statement: no trigger fires (the owner's would run on every
 * writer's rows; it once ran under session_replication_role = replica to
 * keep them quiet, which let the owner's CHECK constraints bypass every
 * table's triggers), and no CHECK constraint or generated column is
 * evaluated again (the row is unchanged but for sw_offset, which neither
 * may read).  Only what the indexes need runs, as for the INSERT: as the
 * owner, a writer with INSERT only could run the owner's index code with a
 * pg_temp of its own; as the committing user, a superuser committing rows
 * an owner's SECURITY DEFINER function wrote would run the owner's code.
 * A publication of the table's updates needs a replica identity, as for an
 * UPDATE.
 */
static void
update_offsets(Relation rel, AttrNumber att, OwnRow *rows, int64 n)
{
	Oid			table = RelationGetRelid(rel);
	EState	   *estate = NULL;
	ResultRelInfo *rri = NULL;
	TupleTableSlot *old = table_slot_create(rel, NULL);
	TupleTableSlot *new = MakeSingleTupleTableSlot(RelationGetDescr(rel), &TTSOpsVirtual);
	int			natts = RelationGetDescr(rel)->natts;
	int			writer = -1;
	SwRoleContext rcx;

	CheckCmdReplicaIdentity(rel, CMD_UPDATE);
	/* the rows written by the transaction's last statement, too */
	CommandCounterIncrement();
	for (int64 i = 0; i < n; i++)
	{
		ItemPointer tid = &rows[i].tid;
		bool		update_indexes;

		if (writes[rows[i].write].table != table)
			continue;
		CHECK_FOR_INTERRUPTS();
		/*
		 * Each writer's index entries with index expressions of its own: a
		 * SQL function keeps what its body's names resolved to for as long
		 * as its expression state lives, so one writer's search_path must
		 * not choose the functions another writer's role then runs.
		 */
		if (rows[i].writer != writer)
		{
			if (writer >= 0)
			{
				ExecCloseIndices(rri);
				FreeExecutorState(estate);
				sw_leave_role(&rcx);
			}
			writer = rows[i].writer;
			sw_enter_role(writers[writer].userid, writers[writer].search_path, &rcx);
			estate = CreateExecutorState();
			estate->es_output_cid = GetCurrentCommandId(true);
			rri = makeNode(ResultRelInfo);
			InitResultRelInfo(rri, rel, 1, NULL, 0);
			rri->ri_TrigDesc = NULL;
			ExecOpenIndices(rri, false);
		}
		if (!table_tuple_fetch_row_version(rel, tid, SnapshotSelf, old))
			elog(ERROR, "streamwm: a row of this transaction in %s is gone before its renumbering",
				 RelationGetRelationName(rel));
		slot_getallattrs(old);
		ExecClearTuple(new);
		memcpy(new->tts_values, old->tts_values, natts * sizeof(Datum));
		memcpy(new->tts_isnull, old->tts_isnull, natts * sizeof(bool));
		new->tts_values[att - 1] = Int64GetDatum(rows[i].new_offset);
		new->tts_isnull[att - 1] = false;
		ExecStoreVirtualTuple(new);
		simple_table_tuple_update(rel, tid, new, GetLatestSnapshot(), &update_indexes);
		sw_commit_order_stored(rel, &new->tts_tid);
		/* (not as an update: its hint to the index reads the range table) */
		if (update_indexes && rri->ri_NumIndices > 0)
			list_free(ExecInsertIndexTuples(rri, new, estate, false, false, NULL, NIL));
		ResetPerTupleExprContext(estate);
	}
	if (writer >= 0)
	{
		ExecCloseIndices(rri);
		FreeExecutorState(estate);
		sw_leave_role(&rcx);
	}
	ExecDropSingleTupleTableSlot(old);
	ExecDropSingleTupleTableSlot(new);
}

/* By table storage position. */
static int
tid_cmp(const void *a, const void *b)
{
	return ItemPointerCompare(&((OwnRow *) unconstify(void *, a))->tid,
							  &((OwnRow *) unconstify(void *, b))->tid);
}

/*
 * Where attribute 'att' of a heap tuple starts, NULL if the tuple does not
 * store it (a NULL, or a column added after the tuple was formed): the walk
 * over the attributes before it that heap_deform_tuple() makes.
 */
static char *
attribute_data(HeapTupleHeader tup, TupleDesc desc, AttrNumber att)
{
	char	   *tp = (char *) tup + tup->t_hoff;
	bool		hasnulls = (tup->t_infomask & HEAP_HASNULL) != 0;
	uint32		off = 0;

	if (att > HeapTupleHeaderGetNatts(tup))
		return NULL;
	for (int i = 0; i < att; i++)
	{
		Form_pg_attribute a = TupleDescAttr(desc, i);

		if (hasnulls && att_isnull(i, tup->t_bits))
		{
			if (i == att - 1)
				return NULL;
			continue;
		}
		if (a->attlen == -1)
			off = att_align_pointer(off, a->attalign, -1, tp + off);
		else
			off = att_align_nominal(off, a->attalign);
		if (i == att - 1)
			return tp + off;
		off = att_addlength_pointer(off, a->attlen, tp + off);
	}
	return NULL;
}

/*
 * May this transaction's rows of 'rel' among rows[0..n) take their new
 * offsets in place, on their pages, instead of as new versions?  They are
 * this transaction's own and uncommitted, so no snapshot but its own sees
 * them, and no scan of its own is open at commit.  Only what holds a row's
 * offset apart from the row matters:
 * - an index: only the stream's own streamwm_brin indexes may have
 *   sw_offset, and the rows must lie in blocks this transaction stored rows
 *   in, in the table's present storage: those indexes get such rows only
 *   at commit, after renumbering (sw_commit_order_flush_indexes: a summary
 *   made meanwhile by a step has the old offset besides, which only widens
 *   it).  Any other index that could read sw_offset (a key, an expression,
 *   a predicate) has the old one already;
 * - logical decoding, which would send the row as inserted (the change is
 *   written as a generic WAL record, which it does not decode);
 * - wal_consistency_checking of generic records: the page image such a
 *   record carries has the hint bits set on other rows of the page since it
 *   was last logged (collect_own_rows() sets some), which replay does not
 *   set and the generic mask does not ignore, so recovery would stop at it
 *   ("inconsistent page found");
 * - a table that is not stored as the heap is.
 */
static bool
offsets_in_place(Relation rel, AttrNumber att, OwnRow *rows, int64 n)
{
	Oid			table = RelationGetRelid(rel);
	List	   *indexes;
	ListCell   *lc;
	bool		ok = true;

	if (rel->rd_rel->relkind != RELKIND_RELATION || RelationIsLogicallyLogged(rel) ||
		wal_consistency_checking[RM_GENERIC_ID] ||
		(rel->rd_rel->relam != HEAP_TABLE_AM_OID &&
		 rel->rd_rel->relam != get_table_am_oid("streamwm_stream", true)))
		return false;
	indexes = RelationGetIndexList(rel);
	foreach(lc, indexes)
	{
		Relation	idx = index_open(lfirst_oid(lc), AccessShareLock);
		Form_pg_index form = idx->rd_index;

		if (!sw_stream_brin_defers(idx))
		{
			if (!heap_attisnull(idx->rd_indextuple, Anum_pg_index_indexprs, NULL) ||
				!heap_attisnull(idx->rd_indextuple, Anum_pg_index_indpred, NULL))
				ok = false;
			for (int k = 0; k < form->indnatts; k++)
				if (form->indkey.values[k] == att)
					ok = false;
		}
		index_close(idx, AccessShareLock);
	}
	list_free(indexes);
	for (int64 i = 0; i < n && ok; i++)
		if (writes[rows[i].write].table == table &&
			!sw_commit_order_owns_block(rel, ItemPointerGetBlockNumber(&rows[i].tid)))
			ok = false;
	return ok;
}

/*
 * Give this transaction's rows in 'table' among rows[0..n) (sorted by
 * position) their new offsets in place (offsets_in_place() says when):
 * each page once, under its exclusive lock, its change written to the WAL
 * as a generic record (a few bytes a row; a heap update writes the whole
 * row again and leaves a dead version behind).
 */
static void
rewrite_offsets(Relation rel, AttrNumber att, OwnRow *rows, int64 n)
{
	Oid			table = RelationGetRelid(rel);
	TupleDesc	desc = RelationGetDescr(rel);
	Buffer		buf = InvalidBuffer;
	GenericXLogState *state = NULL;
	Page		page = NULL;

	for (int64 i = 0; i < n; i++)
	{
		BlockNumber blk = ItemPointerGetBlockNumber(&rows[i].tid);
		OffsetNumber off = ItemPointerGetOffsetNumber(&rows[i].tid);
		ItemId		lp;
		HeapTupleHeader tup;
		char	   *data;
		int64		old;

		if (writes[rows[i].write].table != table)
			continue;
		if (state == NULL || blk != BufferGetBlockNumber(buf))
		{
			if (state != NULL)
			{
				GenericXLogFinish(state);
				UnlockReleaseBuffer(buf);
			}
			CHECK_FOR_INTERRUPTS();
			buf = ReadBuffer(rel, blk);
			LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
			state = GenericXLogStart(rel);
			page = GenericXLogRegisterBuffer(state, buf, 0);
		}
		lp = off <= PageGetMaxOffsetNumber(page) ? PageGetItemId(page, off) : NULL;
		tup = lp != NULL && ItemIdIsNormal(lp) ? (HeapTupleHeader) PageGetItem(page, lp) : NULL;
		data = tup != NULL && TransactionIdIsCurrentTransactionId(HeapTupleHeaderGetRawXmin(tup)) ?
			attribute_data(tup, desc, att) : NULL;
		if (data != NULL)
			memcpy(&old, data, sizeof(old));
		if (data == NULL || old != rows[i].offset)
			elog(ERROR, "streamwm: a row of this transaction in %s is not where it was before its renumbering",
				 RelationGetRelationName(rel));
		memcpy(data, &rows[i].new_offset, sizeof(int64));
	}
	if (state != NULL)
	{
		GenericXLogFinish(state);
		UnlockReleaseBuffer(buf);
	}
	/* the stream's own indexes get the new offsets at the flush that follows */
	stored_since_flush = true;
}

/*
 * Foreign keys and renumbering.  A foreign key was checked with the offsets
 * the rows had before renumbering changes them, and renumbering runs no
 * trigger (update_offsets, rewrite_offsets).  A row of another table that
 * this transaction made to refer to one of its stream rows by sw_offset (a
 * user's unique index on (sw_partition, sw_offset), or on sw_offset, allows
 * such a key) would be left referring to an offset that no longer exists,
 * and a stream whose own foreign key uses sw_offset would come to refer to
 * other rows (an attacker's review showed both).  So renumbering fails, and
 * the transaction with it, when a row this transaction wrote refers to one
 * of the old offsets, or when the stream's own foreign key uses sw_offset.
 * Other transactions cannot refer to these rows before the commit: their
 * check waits for it and then finds the row moved; and their rows are not
 * looked at (a role allowed to reference the stream could otherwise fail
 * every renumbering commit with rows of its own: the second review).
 *
 * The foreign keys are found by their triggers on the stream
 * (RI_FKey_trigger_type), copied first: the queries below read catalogs,
 * and the relation's trigger description may be rebuilt meanwhile.  Each
 * referring table is read as its owner, as PostgreSQL's own checks read
 * it, with nothing of that owner's code: its column must be an integer
 * (a type of the owner's with an implicit cast to int8 is also accepted by
 * a foreign key; its cast would run here, and did, in the review: then the
 * commit fails instead).
 */
static void
check_foreign_keys(Relation rel, AttrNumber att, OwnRow *rows, int64 n)
{
	Oid			relid = RelationGetRelid(rel);
	List	   *constraints = NIL;
	ListCell   *lc;
	ArrayType  *old = NULL;
	ArrayType  *xids = NULL;

	if (rel->trigdesc == NULL)
		return;
	for (int i = 0; i < rel->trigdesc->numtriggers; i++)
	{
		Trigger    *t = &rel->trigdesc->triggers[i];

		if (RI_FKey_trigger_type(t->tgfoid) != RI_TRIGGER_NONE && OidIsValid(t->tgconstraint))
			constraints = list_append_unique_oid(constraints, t->tgconstraint);
	}
	foreach(lc, constraints)
	{
		HeapTuple	tup = SearchSysCache1(CONSTROID, ObjectIdGetDatum(lfirst_oid(lc)));
		Form_pg_constraint con;
		int			nkeys;
		AttrNumber	conkey[INDEX_MAX_KEYS];
		AttrNumber	confkey[INDEX_MAX_KEYS];
		AttrNumber	referring = InvalidAttrNumber;
		StringInfoData others;
		bool		own = false;
		Oid			child;
		char	   *name;

		if (!HeapTupleIsValid(tup))
			continue;
		con = (Form_pg_constraint) GETSTRUCT(tup);
		if (con->contype != CONSTRAINT_FOREIGN)
		{
			ReleaseSysCache(tup);
			continue;
		}
		DeconstructFkConstraintRow(tup, &nkeys, conkey, confkey, NULL, NULL, NULL, NULL, NULL);
		child = con->conrelid;
		name = pstrdup(NameStr(con->conname));
		/* a stream that refers to itself is both */
		for (int k = 0; k < nkeys; k++)
		{
			if (con->conrelid == relid && conkey[k] == att)
				own = true;
			if (con->confrelid == relid && confkey[k] == att)
				referring = conkey[k];
		}
		ReleaseSysCache(tup);
		if (own)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("cannot renumber rows of stream %s: its foreign key \"%s\" uses sw_offset",
							RelationGetRelationName(rel), name),
					 errdetail("A row's sw_offset changes when its transaction is overtaken by another "
							   "writer of its partition, which committed first."),
					 errhint("Drop the foreign key, or give the stream a partition per writer.")));
		if (referring == InvalidAttrNumber)
			continue;
		{
			Oid			type = getBaseType(get_atttype(child, referring));

			if (type != INT2OID && type != INT4OID && type != INT8OID)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot renumber rows of stream %s: foreign key \"%s\" of table %s refers to sw_offset by a column of type %s",
								RelationGetRelationName(rel), name, sw_relation_name(child),
								format_type_be(get_atttype(child, referring))),
						 errhint("Refer to sw_offset by an integer column.")));
		}
		/* MATCH SIMPLE: a row with a NULL in its key refers to nothing */
		initStringInfo(&others);
		for (int k = 0; k < nkeys; k++)
			if (conkey[k] != referring)
				appendStringInfo(&others, " AND x.%s IS NOT NULL",
								 quote_identifier(get_attname(child, conkey[k], false)));
		if (old == NULL)
		{
			Datum	   *d = palloc(n * sizeof(Datum));
			TransactionId *children;
			int			nchildren = xactGetCommittedChildren(&children);
			Datum	   *x = palloc((nchildren + 1) * sizeof(Datum));

			for (int64 r = 0; r < n; r++)
				d[r] = Int64GetDatum(rows[r].offset);
			old = construct_array(d, (int) n, INT8OID, sizeof(int64), FLOAT8PASSBYVAL,
								  TYPALIGN_DOUBLE);
			/* the rows this transaction wrote: its own and its subtransactions' */
			x[0] = TransactionIdGetDatum(GetTopTransactionId());
			for (int c = 0; c < nchildren; c++)
				x[c + 1] = TransactionIdGetDatum(children[c]);
			xids = construct_array(x, nchildren + 1, XIDOID, sizeof(TransactionId), true,
								   TYPALIGN_INT);
		}
		{
			Oid			types[2] = {INT8ARRAYOID, XIDARRAYOID};
			Datum		values[2] = {PointerGetDatum(old), PointerGetDatum(xids)};
			SwRoleContext rcx;
			Oid			userid;
			int			sec;
			bool		refers;

			if (SPI_connect() != SPI_OK_CONNECT)
				elog(ERROR, "SPI_connect failed");
			sw_enter_role(sw_relation_owner(child), SW_SAFE_SEARCH_PATH, &rcx);
			/* as PostgreSQL's checks see rows: the owner's FORCE ROW LEVEL SECURITY aside */
			GetUserIdAndSecContext(&userid, &sec);
			SetUserIdAndSecContext(userid, sec | SECURITY_NOFORCE_RLS);
			/* a partitioned table with its partitions, as PostgreSQL's checks read it */
			sw_spi_exec(psprintf("SELECT 1 FROM %s%s x WHERE x.%s OPERATOR(pg_catalog.=) ANY ($1)"
								 " AND x.xmin OPERATOR(pg_catalog.=) ANY ($2)%s LIMIT 1",
								 get_rel_relkind(child) == RELKIND_PARTITIONED_TABLE ? "" : "ONLY ",
								 sw_relation_name(child),
								 quote_identifier(get_attname(child, referring, false)),
								 others.data),
						2, types, values, NULL, SPI_OK_SELECT);
			refers = SPI_processed > 0;
			SetUserIdAndSecContext(userid, sec);
			sw_leave_role(&rcx);
			SPI_finish();
			if (refers)
				ereport(ERROR,
						(errcode(ERRCODE_FOREIGN_KEY_VIOLATION),
						 errmsg("cannot renumber rows of stream %s: table %s refers to them by sw_offset",
								RelationGetRelationName(rel), sw_relation_name(child)),
						 errdetail("Foreign key \"%s\" refers to rows this transaction wrote, whose "
								   "sw_offset changes as it commits: another writer of their partition "
								   "committed first.", name),
						 errhint("Refer to a stream's rows only once they are committed, or give the "
								 "stream a partition per writer.")));
		}
	}
	list_free(constraints);
}

/*
 * Give this transaction's rows in writes[from..to) (one stream) new
 * offsets above everything taken so far, keeping the order in which they
 * were written, across partitions too: collect_own_rows() finds them,
 * update_offsets() moves them.
 */
static void
renumber(int from, int to)
{
	Oid			relid = writes[from].relid;
	Oid			seqoid = writes[from].seqoid;
	SwRoleContext rcx;
	int64		hwm = 0;
	bool		above_range = false;
	OwnRow	   *rows = NULL;
	int64		n = 0;
	int64		cap = 0;
	SwOffsetChunk fresh = {InvalidOid, 1, 0};	/* the renumbering's own */

	for (int w = from; w < to; w++)
	{
		if (writes[w].hwm > hwm)
			hwm = writes[w].hwm;
		collect_own_rows(w, &rows, &n, &cap);
		/* a partition left with nothing of ours (rolled-back subtransactions) */
		writes[w].lo = writes[w].hi = SW_NO_OFFSET;
		writes[w].nruns = 0;
	}

	qsort(rows, n, sizeof(OwnRow), own_row_cmp);

	/*
	 * The new offsets must be above everything committed in the partitions.
	 * The sequence's are: one sequence serves a stream, and offsets are
	 * taken before they are committed.  But on a Citus node the sequence
	 * has a range of its own (Citus gives each node one, with its own
	 * MAXVALUE), and a partition whose shard moved from a node with a
	 * higher range has committed offsets above it.  Then the sequence is
	 * moved past them if its range allows, else each partition's rows take
	 * the offsets right after its newest committed one: no offset this
	 * node's sequence ever gave is that high, so no other transaction's row
	 * has them, and the commit locks (held: order_commit) keep the next
	 * committer from taking them too.
	 */
	if (OidIsValid(writes[from].log))
	{
		int64		o;

		/*
		 * The sequence's look and move are one step for every committer on
		 * this node (a short lock, let go right after): two committers into
		 * different partitions that both saw it behind and moved it to their
		 * own partition's newest offset could move it back below the higher
		 * one, whose partition would get offsets it has (the second review;
		 * locks per partition let such committers run at once).
		 */
		lock_for_transaction(seqoid, SW_SEQUENCE_MOVE, SW_COMMIT_LOCK_CLASS, ExclusiveLock);
		o = nextval_internal(seqoid, false);
		if (o <= hwm)
		{
			HeapTuple	tup = SearchSysCache1(SEQRELID, ObjectIdGetDatum(seqoid));
			int64		max = PG_INT64_MAX;

			if (HeapTupleIsValid(tup))
			{
				max = ((Form_pg_sequence) GETSTRUCT(tup))->seqmax;
				ReleaseSysCache(tup);
			}
			if (max - n - 1 > hwm)
			{
				/* (setval checks the privilege: the owner's) */
				sw_enter_role(sw_relation_owner(relid), SW_SAFE_SEARCH_PATH, &rcx);
				(void) DirectFunctionCall2(setval_oid, ObjectIdGetDatum(seqoid), Int64GetDatum(hwm));
				sw_leave_role(&rcx);
			}
			else
				above_range = true;
		}
		unlock(seqoid, SW_SEQUENCE_MOVE, SW_COMMIT_LOCK_CLASS, ExclusiveLock);
	}
	drop_chunk(seqoid);
	for (int64 i = 0; i < n; i++)
	{
		SwPartitionWrite *w = &writes[rows[i].write];
		int64		o;

		if (above_range)
			o = (w->hi != SW_NO_OFFSET ? w->hi : w->hwm) + 1;
		else
			o = chunk_next(seqoid, &fresh);
		rows[i].new_offset = o;
		took(w, o, rows[i].writer);
	}
	for (int w = from; w < to; w++)
		if (writes[w].lo == SW_NO_OFFSET)
			took(&writes[w], above_range ? writes[w].hwm + 1 : chunk_next(seqoid, &fresh), -1);

	/* per table the rows are in (one, but for a Citus node's shards) */
	for (int w = from; w < to && n > 0; w++)
	{
		bool		done = false;
		Relation	rel;
		AttrNumber	att;

		for (int v = from; v < w; v++)
			if (writes[v].table == writes[w].table)
				done = true;
		if (done)
			continue;
		rel = table_open(writes[w].table, RowExclusiveLock);
		att = get_attnum(writes[w].table, "sw_offset");
		check_foreign_keys(rel, att, rows, n);
		if (offsets_in_place(rel, att, rows, n))
		{
			qsort(rows, n, sizeof(OwnRow), tid_cmp);
			rewrite_offsets(rel, att, rows, n);
		}
		else
		{
			/* each writer's rows together: update_offsets() sets up once per writer */
			qsort(rows, n, sizeof(OwnRow), writer_cmp);
			update_offsets(rel, att, rows, n);
		}
		table_close(rel, NoLock);
	}
}

/*
 * A stream's start floors are entries of negative partitions, one per
 * backend (-1 - its PGPROC number), so that two backends never write the
 * same key: see _latest_offset().
 */
#define FLOOR_PARTITION(procno) (-1 - (int32) (procno))

/*
 * streamwm.commit_log, opened with its primary key (stream, partition, hi)
 * for the commit path and _latest_offset(): each commit reads and writes it
 * directly, not through SPI (the two kept plans' execution was a quarter of
 * a one-row INSERT's backend time).
 */
typedef struct CommitLog
{
	Relation	rel;
	LOCKMODE	mode;			/* rel's lock */
	Relation	pk;
	AttrNumber	stream;
	AttrNumber	partition;
	AttrNumber	lo;
	AttrNumber	hi;
	AttrNumber	arrival;
	AttrNumber	held_from;
	TupleTableSlot *slot;
} CommitLog;

static Oid	commit_log_oid = InvalidOid;	/* cached; checked at each open */

static AttrNumber
log_attnum(Relation rel, const char *name, Oid type)
{
	TupleDesc	desc = RelationGetDescr(rel);

	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (!att->attisdropped && strcmp(NameStr(att->attname), name) == 0)
		{
			if (att->atttypid != type)
				elog(ERROR, "streamwm: streamwm.commit_log.%s has type %s, not %s",
					 name, format_type_be(att->atttypid), format_type_be(type));
			return att->attnum;
		}
	}
	elog(ERROR, "streamwm: streamwm.commit_log has no column %s", name);
	return InvalidAttrNumber;	/* keep the compiler quiet */
}

static void
open_commit_log(CommitLog *log, LOCKMODE mode)
{
	Relation	rel = OidIsValid(commit_log_oid) ?
		try_table_open(commit_log_oid, mode) : NULL;
	Oid			pk;

	if (rel == NULL ||
		strcmp(RelationGetRelationName(rel), "commit_log") != 0 ||
		get_namespace_oid("streamwm", false) != RelationGetNamespace(rel))
	{
		if (rel != NULL)
			table_close(rel, mode);
		commit_log_oid = get_relname_relid("commit_log", get_namespace_oid("streamwm", false));
		if (!OidIsValid(commit_log_oid))
			elog(ERROR, "streamwm: streamwm.commit_log is missing");
		rel = table_open(commit_log_oid, mode);
	}
	/*
	 * Entries go in as into a catalog (CatalogTupleInsert), which knows
	 * neither expression nor partial indexes, CHECK constraints or
	 * defaults: the table must be as the extension made it.
	 */
	pk = RelationGetPrimaryKeyIndex(rel);
	if (!OidIsValid(pk) || list_length(RelationGetIndexList(rel)) != 1 ||
		rel->rd_rel->relchecks > 0)
		elog(ERROR, "streamwm: streamwm.commit_log must have its primary key as its only index, and no CHECK constraint");
	log->rel = rel;
	log->mode = mode;
	log->pk = index_open(pk, AccessShareLock);
	if (RelationGetIndexExpressions(log->pk) != NIL || RelationGetIndexPredicate(log->pk) != NIL)
		elog(ERROR, "streamwm: streamwm.commit_log's primary key is not its own");
	log->stream = log_attnum(rel, "stream", REGCLASSOID);
	log->partition = log_attnum(rel, "partition", INT4OID);
	log->lo = log_attnum(rel, "lo", INT8OID);
	log->hi = log_attnum(rel, "hi", INT8OID);
	log->arrival = log_attnum(rel, "arrival", TIMESTAMPTZOID);
	log->held_from = log_attnum(rel, "held_from", TIMESTAMPTZOID);
	for (int i = 0; i < RelationGetDescr(rel)->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(RelationGetDescr(rel), i);

		if (!att->attisdropped && att->attnum != log->stream && att->attnum != log->partition &&
			att->attnum != log->lo && att->attnum != log->hi && att->attnum != log->arrival &&
			att->attnum != log->held_from)
			elog(ERROR, "streamwm: streamwm.commit_log has a column of its own: %s",
				 NameStr(att->attname));
	}
	log->slot = table_slot_create(rel, NULL);
}

static void
close_commit_log(CommitLog *log)
{
	ExecDropSingleTupleTableSlot(log->slot);
	/* the locks last until the transaction ends, as for any statement */
	index_close(log->pk, NoLock);
	table_close(log->rel, NoLock);
}

/*
 * Add an entry to streamwm.commit_log (opened with RowExclusiveLock): the
 * heap and its indexes, as for a catalog (CatalogTupleInsert; the table is
 * the catalog owner's own, with neither triggers nor policies that apply
 * to its owner, and every column is given).
 */
static void
log_insert(CommitLog *log, Oid relid, int32 partition, int64 lo, int64 hi,
		   TimestampTz arrival, TimestampTz held_from)
{
	TupleDesc	desc = RelationGetDescr(log->rel);
	Datum	   *values = palloc0(desc->natts * sizeof(Datum));
	bool	   *nulls = palloc(desc->natts * sizeof(bool));
	HeapTuple	tup;

	memset(nulls, true, desc->natts * sizeof(bool));
	values[log->stream - 1] = ObjectIdGetDatum(relid);
	values[log->partition - 1] = Int32GetDatum(partition);
	values[log->lo - 1] = Int64GetDatum(lo);
	values[log->hi - 1] = Int64GetDatum(hi);
	values[log->arrival - 1] = TimestampTzGetDatum(arrival);
	values[log->held_from - 1] = TimestampTzGetDatum(held_from);
	nulls[log->stream - 1] = nulls[log->partition - 1] = nulls[log->lo - 1] = false;
	nulls[log->hi - 1] = nulls[log->arrival - 1] = nulls[log->held_from - 1] = false;
	tup = heap_form_tuple(desc, values, nulls);
	CatalogTupleInsert(log->rel, tup);
	heap_freetuple(tup);
	pfree(values);
	pfree(nulls);
}

/*
 * The entry of highest hi among a stream's entries of partitions
 * 'partition' (strategy BTEqualStrategyNumber) or below it
 * (BTLessStrategyNumber) in streamwm.commit_log, as the snapshot sees them:
 * its hi (0: none) and, if arrival is not NULL, its arrival (DT_NOBEGIN:
 * none).  An ordered scan of the primary key (stream, partition, hi),
 * backwards: for one partition the first entry found is its newest.
 */
static int64
log_highest(CommitLog *log, Oid relid, StrategyNumber strategy, int32 partition,
			Snapshot snapshot, TimestampTz *arrival)
{
	ScanKeyData keys[2];
	IndexScanDesc scan;
	int64		hi = 0;

	if (arrival != NULL)
		*arrival = DT_NOBEGIN;
	/* index columns 1 and 2 */
	ScanKeyInit(&keys[0], 1, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(relid));
	ScanKeyInit(&keys[1], 2, strategy,
				strategy == BTEqualStrategyNumber ? F_INT4EQ : F_INT4LT,
				Int32GetDatum(partition));
	scan = index_beginscan(log->rel, log->pk, snapshot, 2, 0);
	index_rescan(scan, keys, 2, NULL, 0);
	while (index_getnext_slot(scan, BackwardScanDirection, log->slot))
	{
		bool		isnull;
		Datum		d = slot_getattr(log->slot, log->hi, &isnull);

		if (!isnull && DatumGetInt64(d) > hi)
		{
			hi = DatumGetInt64(d);
			if (arrival != NULL)
			{
				d = slot_getattr(log->slot, log->arrival, &isnull);
				*arrival = isnull ? DT_NOBEGIN : DatumGetTimestampTz(d);
			}
		}
		if (strategy == BTEqualStrategyNumber)
			break;
	}
	index_endscan(scan);
	return hi;
}

/* The newest entry of a partition: see log_highest(). */
static int64
log_newest(CommitLog *log, Oid relid, int32 partition, Snapshot snapshot,
		   TimestampTz *arrival)
{
	return log_highest(log, relid, BTEqualStrategyNumber, partition, snapshot, arrival);
}

/*
 * A local stream's start floor: the highest offset committed into it when a
 * query was created on it with start_from => 'latest' (entries of negative
 * partitions in streamwm.commit_log, written by _latest_offset() below), or
 * 0.  A commit compares its offsets with it as with its partitions' newest
 * entries, so that a transaction open when the query was created and
 * committing after it is renumbered above the query's start, in whatever
 * partition it wrote (with one start offset per query and one newest entry
 * per partition, a transaction whose offsets lay between its partition's
 * newest entry and the stream's highest one was never seen).
 *
 * Read with a dirty snapshot: the floor counts from the moment it is
 * written, before the creating transaction commits, so that creating the
 * query holds the committers up no longer than a step's fence does.  A
 * floor whose transaction then rolls back has made some commits renumber
 * their rows for nothing, which is all it costs.  Steps delete the floors
 * every partition's newest entry has reached, or that no running
 * transaction predates (sw_catalog_prune_commit_log).
 */
static int64
start_floor(CommitLog *log, Oid relid)
{
	SnapshotData dirty;

	InitDirtySnapshot(dirty);
	return log_highest(log, relid, BTLessStrategyNumber, 0, &dirty, NULL);
}

/*
 * streamwm_internal._latest_offset(stream regclass) RETURNS bigint: where a
 * query created now with start_from => 'latest' starts (SPEC section 5:
 * rows that arrive from now on): the highest offset committed into the
 * stream, read while no commit into it is under way (its commit gate, as a
 * step's fence takes it), and left as a start floor (start_floor() above)
 * before the gate is let go, so that every commit from then on sees it.
 *
 * Nothing under the gate may wait for another transaction, or every commit
 * into the stream would wait with it: the floor goes into this backend's
 * own partition of floors, which no other live backend writes, and only
 * when that partition has no floor as high already (a dirty read, which
 * also sees a floor a step is deleting: steps delete only floors that no
 * longer matter).  So its insert never meets a key another transaction is
 * writing or deleting.  The commit log is opened after the gate, in the
 * committers' order.  Only a role that may add queries to the stream may
 * call it (as create_query checks).
 */
PG_FUNCTION_INFO_V1(streamwm_latest_offset);

Datum
streamwm_latest_offset(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	int32		slot = FLOOR_PARTITION(MyProc->pgprocno);
	LOCKTAG		tag;
	SwRoleContext cx;
	CommitLog	log = {0};
	SnapshotData dirty;
	Snapshot	latest;
	Oid			owner;
	int			npartitions;
	int64		start = 0;

	/* a stream dropped meanwhile would leave its floor behind */
	LockRelationOid(relid, AccessShareLock);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (!sw_lookup_stream(relid, false, &owner, &npartitions))
		sw_not_a_stream(relid);
	if (!sw_may_manage(owner))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("must be owner of stream %s", sw_relation_name(relid))));
	/* a distributed stream's commits are ordered on its nodes, without a floor */
	if (sw_stream_rows(relid) != relid)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("stream %s is distributed: it has no start floor",
						sw_relation_name(relid))));
	SPI_finish();

	sw_enter_catalog(&cx);
	/* the committers' lock order: the gate, then the commit log */
	set_tag(&tag, relid, SW_WHOLE_STREAM, SW_COMMIT_LOCK_CLASS);
	(void) LockAcquire(&tag, ShareLock, false, false);
	open_commit_log(&log, RowExclusiveLock);
	latest = RegisterSnapshot(GetLatestSnapshot());
	for (int p = 0; p < npartitions; p++)
	{
		int64		hi = log_newest(&log, relid, p, latest, NULL);

		if (hi > start)
			start = hi;
	}
	UnregisterSnapshot(latest);
	InitDirtySnapshot(dirty);
	if (start > 0 && log_newest(&log, relid, slot, &dirty, NULL) < start)
	{
		TimestampTz now = GetCurrentTimestamp();

		/*
		 * lo: the next transaction id.  Every transaction that held an
		 * offset at or below start then has a lower one: once none of
		 * those is running, the floor no longer matters
		 * (sw_catalog_prune_commit_log).
		 */
		log_insert(&log, relid, slot,
				   (int64) U64FromFullTransactionId(ReadNextFullTransactionId()),
				   start, now, now);
		CommandCounterIncrement();
		wrote_floor = true;
	}
	(void) LockRelease(&tag, ShareLock, false);
	close_commit_log(&log);
	sw_leave_role(&cx);
	PG_RETURN_INT64(start);
}

/*
 * Read each written partition's newest commit log entry, with the latest
 * snapshot, as the catalog's owner (the caller is); a write into a stream
 * dropped in this transaction gets hwm -1.  The first write into a local
 * stream opens streamwm.commit_log into *log (RowExclusiveLock: the caller
 * adds its entries through it, and closes it).
 * Returns true if some stream must be renumbered (some write has an offset
 * at or below its partition's hwm).
 */
static bool
probe_newest(CommitLog *log)
{
	Oid			ptypes[1] = {INT4OID};
	bool		overtaken = false;
	int64		floor = 0;
	Snapshot	latest = NULL;

	for (int i = 0; i < nwrites; i++)
	{
		/* a stream dropped in this very transaction took its rows along */
		writes[i].hwm = -1;
		writes[i].prev_arrival = DT_NOBEGIN;
		if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(writes[i].relid)))
			continue;
		if (OidIsValid(writes[i].log))
		{
			/* a distributed stream's: the shard of its commit log on this node */
			Datum		pvalue = Int32GetDatum(writes[i].partition);
			bool		isnull;
			SPIPlanPtr	plan = SPI_prepare(psprintf("SELECT hi, arrival FROM ONLY %s"
													" WHERE partition = $1 ORDER BY hi DESC LIMIT 1",
													sw_relation_name(writes[i].log)),
										   1, ptypes);

			if (plan == NULL)
				elog(ERROR, "streamwm: reading the commit log failed: %s",
					 SPI_result_code_string(SPI_result));
			if (SPI_execute_snapshot(plan, &pvalue, NULL, GetLatestSnapshot(),
									 InvalidSnapshot, true, false, 1) != SPI_OK_SELECT)
				elog(ERROR, "streamwm: reading the commit log failed");
			SPI_freeplan(plan);
			writes[i].hwm = 0;
			if (SPI_processed == 1)
			{
				writes[i].hwm = DatumGetInt64(sw_spi_getdatum(0, 1, &isnull));
				writes[i].prev_arrival = DatumGetTimestampTz(sw_spi_getdatum(0, 2, &isnull));
			}
			SPI_freetuptable(SPI_tuptable);
		}
		else
		{
			if (log->rel == NULL)
				open_commit_log(log, RowExclusiveLock);
			if (latest == NULL)
				latest = RegisterSnapshot(GetLatestSnapshot());
			writes[i].hwm = log_newest(log, writes[i].relid, writes[i].partition, latest,
									   &writes[i].prev_arrival);
			/* the stream's start floor counts as every partition's newest entry */
			if (i == 0 || writes[i - 1].relid != writes[i].relid)
				floor = start_floor(log, writes[i].relid);
			if (floor > writes[i].hwm)
				writes[i].hwm = floor;
		}
		if (writes[i].lo <= writes[i].hwm)
			overtaken = true;
	}
	if (latest != NULL)
		UnregisterSnapshot(latest);
	return overtaken;
}

/* Renumber every stream some of whose partitions were overtaken. */
static void
renumber_overtaken(void)
{
	for (int i = 0; i < nwrites;)
	{
		int			j = i;
		bool		overtaken = false;

		for (; j < nwrites && writes[j].relid == writes[i].relid; j++)
			if (writes[j].hwm >= 0 && writes[j].lo <= writes[j].hwm)
				overtaken = true;
		if (overtaken)
			renumber(i, j);
		i = j;
	}
}

/*
 * The commit locks of every stream written, in (stream, stripe) order: per
 * stream, the gate (RowExclusiveLock: committers share it, a step's fence
 * takes it in ShareLock), then the stripes of the partitions written
 * (ExclusiveLock: committers into one partition take turns).
 */
static void
commit_locks(bool take)
{
	for (int i = 0; i < nwrites;)
	{
		Oid			relid = writes[i].relid;
		bool		stripes[SW_COMMIT_STRIPES] = {false};
		int			j = i;

		for (; j < nwrites && writes[j].relid == relid; j++)
			stripes[writes[j].partition % SW_COMMIT_STRIPES] = true;

		/*
		 * On a Citus node, one lock per partition, not per stripe: Citus
		 * writes the shards of one statement through several connections
		 * to a node, each a transaction of its own prepared before any
		 * commits, and two of them with partitions in one stripe (1 and 33
		 * of 100) waited for each other's prepared lock until the 500 ms
		 * bound failed the INSERT.  Always per partition, however many a
		 * connection wrote (a connection that took the whole stream on the
		 * node instead past 256 partitions made the other connections of
		 * its own transaction wait for its prepared lock without end: the
		 * second review): a connection writes the partitions of its shards,
		 * one lock each, which the lock table (max_locks_per_transaction)
		 * must hold.  Tags never mix: a distributed stream's partitions on
		 * a node are written only through its shards.
		 */
		if (OidIsValid(writes[i].log))
		{
			if (take)
				lock_for_transaction(relid, SW_WHOLE_STREAM, SW_COMMIT_LOCK_CLASS,
									 RowExclusiveLock);
			else
				unlock(relid, SW_WHOLE_STREAM, SW_COMMIT_LOCK_CLASS, RowExclusiveLock);
			for (int k = i; k < j; k++)
			{
				if (take)
					lock_for_transaction(relid, (uint32) writes[k].partition,
										 SW_COMMIT_LOCK_CLASS, ExclusiveLock);
				else
					unlock(relid, (uint32) writes[k].partition, SW_COMMIT_LOCK_CLASS,
						   ExclusiveLock);
			}
			i = j;
			continue;
		}
		if (take)
			lock_for_transaction(relid, SW_WHOLE_STREAM, SW_COMMIT_LOCK_CLASS, RowExclusiveLock);
		else
			unlock(relid, SW_WHOLE_STREAM, SW_COMMIT_LOCK_CLASS, RowExclusiveLock);
		for (int k = 0; k < SW_COMMIT_STRIPES; k++)
			if (stripes[k])
			{
				if (take)
					lock_for_transaction(relid, (uint32) k, SW_COMMIT_LOCK_CLASS, ExclusiveLock);
				else
					unlock(relid, (uint32) k, SW_COMMIT_LOCK_CLASS, ExclusiveLock);
			}
		i = j;
	}
}

/*
 * The stream tables this transaction stored rows in through the access
 * method: the stream's own BRIN indexes, which skipped those rows, are
 * brought up to date (stream_brin.c).  At commit, when no row of it is
 * stored any more, and before a parallel query (its workers do not know
 * this backend's runs).  Also the commit of a transaction that filled no
 * row, which has nothing to order: rows stored as given, an UPDATE's new
 * versions under session_replication_role = replica, COPY's rows of a
 * table of the method that is no stream (a review found them all missing
 * from the index when only transactions with filled rows were flushed).
 * Rows once entered stay covered (a summary only widens, and one made
 * later reads them on their pages), so nothing is done again until a row
 * is stored.  A table this transaction no longer holds a lock on stored
 * rows only in subtransactions that rolled back (their locks went with
 * them): its rows are dead.
 */
void
sw_commit_order_flush_indexes(void)
{
	if (!stored_since_flush)
		return;
	for (int i = 0; i < nspans; i++)
	{
		Oid			table = spans[i].table;
		Relation	rel;
		BlockNumber (*runs)[2];
		int			nruns;
		bool		done = false;

		/* each table once */
		for (int j = 0; j < i && !done; j++)
			done = spans[j].table == table;
		if (done)
			continue;
		/* a table dropped in this very transaction took its rows along */
		if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(table)))
			continue;
		rel = RelationIdGetRelation(table);
		if (!RelationIsValid(rel))
			continue;
		if (CheckRelationLockedByMe(rel, RowExclusiveLock, true))
		{
			nruns = sw_commit_order_own_runs(table, &runs);
			if (nruns > 0)
			{
				sw_stream_brin_flush(rel, runs, nruns);
				pfree(runs);
			}
		}
		RelationClose(rel);
	}
	stored_since_flush = false;
}

/* attempts at renumbering outside the commit locks before doing it under them */
#define SW_RENUMBER_ATTEMPTS 3

/*
 * XACT_EVENT_PRE_COMMIT of a transaction that wrote into streams: order it
 * (see the file header).  Renumbering, when needed, runs with the commit
 * locks let go, so that no other committer waits for it; then the locks
 * are taken and the newest entries read again, and only after a few rounds
 * of being overtaken again is it done under the locks.
 */
static void
order_commit(void)
{
	SwRoleContext cx;
	TimestampTz arrival;
	bool		distributed = false;
	bool		renumbered = false;
	CommitLog	log = {0};		/* opened by the first probe, if a local stream was written */

	ordering = true;
	qsort(writes, nwrites, sizeof(SwPartitionWrite), write_cmp);
	last_write = -1;
	for (int i = 0; i < nwrites; i++)
		if (OidIsValid(writes[i].log))
			distributed = true;
	on_citus_node = distributed;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	PushActiveSnapshot(GetTransactionSnapshot());
	/* the commit log is the catalog's; renumbering acts as each row's writer */
	sw_enter_catalog(&cx);

	/*
	 * The stream's own indexes get the rows they skipped (stream_brin.c)
	 * before the commit locks are taken, so that no other committer waits
	 * for it; again after renumbering, for the rows' new versions.
	 */
	sw_commit_order_flush_indexes();
	for (int attempt = 1;; attempt++)
	{
		commit_locks(true);
		if (!probe_newest(&log))
			break;
		renumbered = true;
		/* a Citus node renumbers under the locks: it may not use its sequence */
		if (attempt >= SW_RENUMBER_ATTEMPTS || distributed)
		{
			renumber_overtaken();
			break;
		}
		/* overtaken: renumber without holding anyone up, then look again */
		commit_locks(false);
		renumber_overtaken();
	}
	if (renumbered)
		sw_commit_order_flush_indexes();

	arrival = GetCurrentTimestamp();
	for (int i = 0; i < nwrites; i++)
	{
		/* arrivals never go back in a partition, whatever the clock does */
		if (writes[i].hwm >= 0 && writes[i].prev_arrival > arrival)
			arrival = writes[i].prev_arrival;
	}
	/* a local stream's entries: streamwm.commit_log */
	{
		TimestampTz start = GetCurrentTransactionStartTimestamp();

		for (int i = 0; i < nwrites; i++)
		{
			SwPartitionWrite *w = &writes[i];

			if (w->hwm < 0 || OidIsValid(w->log))
				continue;
			if (log.rel == NULL)
				open_commit_log(&log, RowExclusiveLock);
			log_insert(&log, w->relid, w->partition, w->hwm, w->hi, arrival,
					   start < arrival ? start : arrival);
		}
		if (log.rel != NULL)
		{
			close_commit_log(&log);
			CommandCounterIncrement();
		}
	}
	/* a distributed stream's entries go to its commit log's shard on this node */
	for (int i = 0; i < nwrites; i++)
	{
		SwPartitionWrite *w = &writes[i];
		Oid			types[5] = {INT4OID, INT8OID, INT8OID, TIMESTAMPTZOID, TIMESTAMPTZOID};
		Datum		values[5];
		TimestampTz start = GetCurrentTransactionStartTimestamp();

		if (w->hwm < 0 || !OidIsValid(w->log))
			continue;
		values[0] = Int32GetDatum(w->partition);
		values[1] = Int64GetDatum(w->hwm);
		values[2] = Int64GetDatum(w->hi);
		values[3] = TimestampTzGetDatum(arrival);
		values[4] = TimestampTzGetDatum(start < arrival ? start : arrival);
		if (SPI_execute_with_args(psprintf("INSERT INTO %s (partition, lo, hi, arrival, held_from)"
										   " VALUES ($1, $2, $3, $4, $5)",
										   sw_relation_name(w->log)),
								  5, types, values, NULL, false, 0) != SPI_OK_INSERT)
			elog(ERROR, "streamwm: writing the commit log failed");
	}
	sw_leave_role(&cx);
	PopActiveSnapshot();
	SPI_finish();
	ordering = false;
	on_citus_node = false;
}

static void
commit_order_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
			if (nwrites > 0)
				order_commit();
			else
				sw_commit_order_flush_indexes();
			break;
		case XACT_EVENT_PRE_PREPARE:
			/*
			 * A prepared transaction keeps its floor under this backend's
			 * floor partition while the backend goes on: its next floors
			 * would be skipped as already there, and lost if it rolls back.
			 */
			if (wrote_floor)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot PREPARE a transaction that has created a query with start_from => 'latest'")));
			if (nwrites > 0)
			{
				/*
				 * Citus commits a transaction that wrote on several nodes with
				 * two-phase commit: the shards of a distributed stream order
				 * its rows at PREPARE, and keep the commit locks (and the
				 * partitions held) until COMMIT PREPARED (DESIGN.md, "Citus").
				 * A local stream's rows are not prepared.
				 */
				for (int i = 0; i < nwrites; i++)
					if (!OidIsValid(writes[i].log))
						ereport(ERROR,
								(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
								 errmsg("cannot PREPARE a transaction that has written into a stream"),
								 errdetail("A stream orders its rows when the transaction that wrote them commits.")));
				preparing = true;
				order_commit();
				preparing = false;
			}
			else
				sw_commit_order_flush_indexes();
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PREPARE:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_PARALLEL_ABORT:
			writes = NULL;
			nwrites = capwrites = 0;
			last_write = -1;
			writers = NULL;
			nwriters = capwriters = 0;
			last_writer = -1;
			batch_writer = -1;
			spans = NULL;
			nspans = capspans = 0;
			stored_since_flush = false;
			ordering = false;
			preparing = false;
			on_citus_node = false;
			wrote_floor = false;
			break;
		default:
			break;
	}
}

/* Called from _PG_init. */
void
sw_commit_order_init(void)
{
	RegisterXactCallback(commit_order_xact_callback, NULL);
}

/*
 * When did 'pid' start its transaction?  DT_NOBEGIN if it cannot be told
 * (track_activities off, or the backend is gone): held since ever.
 */
static TimestampTz
xact_start_of(int pid)
{
	int			nb = pgstat_fetch_stat_numbackends();

	for (int i = 1; i <= nb; i++)
	{
		LocalPgBackendStatus *ls = pgstat_fetch_stat_local_beentry(i);

		if (ls != NULL && ls->backendStatus.st_procpid == pid &&
			ls->backendStatus.st_xact_start_timestamp != 0)
			return ls->backendStatus.st_xact_start_timestamp;
	}
	return DT_NOBEGIN;
}

/*
 * Which partitions of a stream are held by open writing transactions, and
 * since when (the oldest one): holds[p].pid is 0 when none.  A transaction
 * that wrote into many partitions holds the whole stream.
 */
void
sw_partition_holders(Oid relid, int npartitions, SwPartitionHold *holds)
{
	bool		fresh = false;
	SwPartitionHold whole = {0, DT_NOEND};

	for (int p = -1; p < npartitions; p++)
	{
		LOCKTAG		tag;
		VirtualTransactionId *vxids;
		int			count;
		SwPartitionHold *h = p < 0 ? &whole : &holds[p];

		if (p >= 0)
			*h = whole;
		set_tag(&tag, relid, p < 0 ? SW_WHOLE_STREAM : (uint32) p, SW_HOLD_LOCK_CLASS);
		vxids = GetLockConflicts(&tag, ExclusiveLock, &count);
		for (int i = 0; VirtualTransactionIdIsValid(vxids[i]); i++)
		{
			PGPROC	   *proc = BackendIdGetProc(vxids[i].backendId);
			int			pid = proc != NULL ? proc->pid : 0;
			TimestampTz since;

			if (pid == 0)
				continue;
			if (!fresh)
			{
				/* what other backends report, read now, not earlier in this transaction */
				pgstat_clear_backend_activity_snapshot();
				fresh = true;
			}
			since = xact_start_of(pid);
			if (h->pid == 0 || since < h->since)
			{
				h->pid = pid;
				h->since = since;
			}
		}
	}
}

/*
 * A partition for a session that gives none, starting at 'start', kept by
 * the session (ingest.c): concurrent sessions should write into different
 * partitions, because in one partition rows are judged in commit order, so
 * a transaction that commits after another one that began later has its
 * rows judged against the other's event times (SPEC section 4): with event
 * time = write time and a small watermark_delay, late.  Two sessions that
 * looked for a free partition at the same moment used to pick the same one
 * (both saw it free before either wrote), and then overlapped in it for as
 * long as they lived (bench/results-e2e.md: 266,698 late rows under load).
 * So a session claims its partition: a session-level advisory lock on a
 * claim tag, taken without waiting, gone when the session ends.  The first
 * partition no other session claimed is ours; if every one is claimed
 * (more writing sessions than partitions), the first that no transaction
 * holds, as before.
 */
int
sw_pick_free_partition(Oid relid, int npartitions, int start, bool *claimed)
{
	LOCKTAG		claim;

	*claimed = true;

	/* one this session claimed already (its cached choice was forgotten) */
	for (int p = 0; p < npartitions; p++)
	{
		set_tag(&claim, relid, (uint32) p, SW_CLAIM_LOCK_CLASS);
		if (LockHeldByMe(&claim, ExclusiveLock))
			return p;
	}
	for (int k = 0; k < npartitions; k++)
	{
		int			p = (start + k) % npartitions;

		set_tag(&claim, relid, (uint32) p, SW_CLAIM_LOCK_CLASS);
		if (LockAcquire(&claim, ExclusiveLock, true, true) != LOCKACQUIRE_NOT_AVAIL)
			return p;
	}
	*claimed = false;
	for (int k = 0; k < npartitions; k++)
	{
		int			p = (start + k) % npartitions;
		LOCKTAG		tag;
		int			count;

		set_tag(&tag, relid, (uint32) p, SW_HOLD_LOCK_CLASS);
		(void) GetLockConflicts(&tag, ExclusiveLock, &count);
		if (count == 0)
			return p;
	}
	return start;
}

/*
 * Does this session still hold its claim on the partition?  DISCARD ALL
 * and pg_advisory_unlock_all() release it (it is an advisory lock), and a
 * pooler runs DISCARD ALL between its clients: the session then picks
 * again (ingest.c).
 */
bool
sw_partition_claimed(Oid relid, int partition)
{
	LOCKTAG		claim;

	set_tag(&claim, relid, (uint32) partition, SW_CLAIM_LOCK_CLASS);
	return LockHeldByMe(&claim, ExclusiveLock);
}

/*
 * The moment a step reads a stream: see the file header.  Fills holds[]
 * (npartitions entries) and *clock, and returns a registered snapshot the
 * step reads the stream and its commit log with (the caller unregisters it).
 */
Snapshot
sw_commit_fence(Oid relid, int npartitions, SwPartitionHold *holds, TimestampTz *clock)
{
	LOCKTAG		tag;
	Snapshot	snap;

	set_tag(&tag, relid, SW_WHOLE_STREAM, SW_COMMIT_LOCK_CLASS);
	(void) LockAcquire(&tag, ShareLock, false, false);
	/* the clock before the holders: a writer not seen holds from later */
	*clock = GetCurrentTimestamp();
	sw_partition_holders(relid, npartitions, holds);
	snap = RegisterSnapshot(GetLatestSnapshot());
	(void) LockRelease(&tag, ShareLock, false);
	return snap;
}

/*
 * The rest of a distributed fence's wait for the commit gate (tag), queued,
 * up to SW_FENCE_WAIT_MS in all (a shorter lock_timeout of the session's
 * applies).  Fails with the reason when it runs out.
 */
static void
fence_wait_queued(LOCKTAG *tag, Oid relid)
{
	MemoryContext cxt = CurrentMemoryContext;
	int			nestlevel = NewGUCNestLevel();

	if (LockTimeout == 0 || LockTimeout > SW_FENCE_QUEUED_MS)
		(void) set_config_option("lock_timeout", CppAsString2(SW_FENCE_QUEUED_MS),
								 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	PG_TRY();
	{
		(void) LockAcquire(tag, ShareLock, false, false);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		if (edata->sqlerrcode != ERRCODE_LOCK_NOT_AVAILABLE)
			PG_RE_THROW();
		FlushErrorState();
		ereport(ERROR,
				(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
				 errmsg("stream %s is being committed into on this node for more than %d ms",
						sw_relation_name(relid), SW_FENCE_WAIT_MS),
				 errdetail("A prepared transaction that wrote into it holds its commit lock until "
						   "COMMIT PREPARED."),
				 errhint("See pg_prepared_xacts on this node: Citus's recovery "
						 "(citus.recover_2pc_interval) resolves its own; COMMIT PREPARED or "
						 "ROLLBACK PREPARED any other.")));
	}
	PG_END_TRY();
	AtEOXact_GUC(true, nestlevel);
}

/*
 * The fence of a step of a distributed stream, on one node that holds some
 * of its partitions (citus.c, streamwm_internal._dist_fence()): as
 * sw_commit_fence(), the clock read while no commit into the stream is
 * under way on this node, so every commit that stamped its arrival before
 * it is visible to the step's next statements here, and the open writers
 * of partitions 0 .. npartitions - 1 on this node (holds), read after the
 * clock.
 */
TimestampTz
sw_commit_fence_node(Oid relid, int npartitions, SwPartitionHold *holds)
{
	LOCKTAG		tag;
	TimestampTz clock;
	TimestampTz try_until = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
														SW_FENCE_TRY_MS);

	set_tag(&tag, relid, SW_WHOLE_STREAM, SW_COMMIT_LOCK_CLASS);

	/*
	 * A committer holds the gate for the time of its commit record; a
	 * prepared transaction holds it until COMMIT PREPARED, and one left
	 * behind (a coordinator that died between the phases, a PREPARE
	 * TRANSACTION nobody finishes) until Citus's recovery or someone
	 * resolves it.  The step does not hang meanwhile: it fails, and the
	 * worker retries it (W cannot pass those rows anyway).
	 *
	 * First without queueing, so that committers are not made to wait
	 * behind the fence for a prepared transaction left behind; then, past
	 * SW_FENCE_TRY_MS, queued for the rest of the wait: committers that
	 * come later wait behind the request, so a steady flow of overlapping
	 * committers, which always leaves the gate held by someone, cannot
	 * starve the step.
	 */
	while (LockAcquire(&tag, ShareLock, false, true) == LOCKACQUIRE_NOT_AVAIL)
	{
		if (GetCurrentTimestamp() >= try_until)
		{
			fence_wait_queued(&tag, relid);
			break;
		}
		CHECK_FOR_INTERRUPTS();
		pg_usleep(1000L);
	}
	clock = GetCurrentTimestamp();
	sw_partition_holders(relid, npartitions, holds);
	(void) LockRelease(&tag, ShareLock, false);
	return clock;
}
