/*-------------------------------------------------------------------------
 * stream_brin.c
 *	  Owns the index access method of a local stream's own index,
 *	  streamwm_brin: PostgreSQL's BRIN, into which the stream's writers
 *	  enter their rows when they commit, and only where a block range has a
 *	  summary, instead of looking each row's range up as they insert.
 *
 * Why.  BRIN's aminsert looks up the summary of the row's block range for
 * every row (the index's metapage and a revmap page: two buffer lookups),
 * even when the range has no summary, which is where a stream's new rows
 * almost always go.  That was a fifth of a COPY into a stream (issue 9).
 *
 * How.  The access method is BRIN's own routine but for two callbacks:
 *
 * - aminsert skips a row that the stream's table access method stored in
 *	 this transaction, within the runs of blocks the transaction noted for
 *	 the table's present storage (commit_order.c, sw_commit_order_stored),
 *	 when the index's keys are plain columns and it has no predicate.  Any
 *	 other row (stored as given under session_replication_role = replica,
 *	 or into other storage) goes through BRIN's aminsert.
 *
 * - As the transaction commits (commit_order.c, when no row of it can be
 *	 stored any more: before the commit locks, and again after renumbering,
 *	 which stores new versions), sw_stream_brin_flush() looks up each block
 *	 range of those runs once, and enters the transaction's
 *	 rows in the ranges that have a summary, or a summarisation's
 *	 placeholder, with BRIN's own aminsert: what BRIN would have done for
 *	 them at insert time, late (for the minmax operator classes, as the
 *	 least and greatest values of each range's rows: enter_own_rows).  A range without a summary needs nothing: a
 *	 summary made later reads the rows on their pages (summarisation reads
 *	 rows of transactions in progress); one being made now has its
 *	 placeholder widened, which the summarisation takes into its result, as
 *	 with any insert.  Other transactions see the rows only after the
 *	 commit, so every scan of theirs finds them.
 *
 * - Until it commits, a transaction sees its own rows; amgetbitmap adds the
 *	 pages of its runs to what BRIN found, so that its own queries on the
 *	 stream never miss them.  A parallel worker does not know the runs of
 *	 the transaction's leader: before a parallel query, the leader flushes
 *	 as at commit (ExecutorStart), every stream table it wrote.
 *
 * The operator classes are BRIN's minmax ones (the extension's script).
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/amapi.h"
#include "access/brin.h"
#include "access/brin_internal.h"
#include "access/brin_revmap.h"
#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/parallel.h"
#include "access/relscan.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "catalog/pg_index.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/execnodes.h"
#include "nodes/tidbitmap.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "utils/datum.h"
#include "utils/fmgrprotos.h"
#include "utils/rel.h"

#include "commit_order.h"
#include "stream_am.h"
#include "stream_brin.h"

PG_FUNCTION_INFO_V1(streamwm_brin_handler);

static ExecutorStart_hook_type prev_executor_start = NULL;

/* Are the index's keys plain columns, without a predicate? */
static bool
plain_keys(IndexInfo *info)
{
	return info->ii_Expressions == NIL && info->ii_Predicate == NIL;
}

static bool
stream_brin_insert(Relation index, Datum *values, bool *isnull, ItemPointer heap_tid,
				   Relation heap, IndexUniqueCheck checkUnique, bool indexUnchanged,
				   IndexInfo *indexInfo)
{
	/* asked of every row entered, answered once (stream_am.c) */
	bool		inserted = sw_stream_am_inserted_row(heap, heap_tid);

	if (plain_keys(indexInfo) &&
		sw_commit_order_owns_block(heap, ItemPointerGetBlockNumber(heap_tid)))
	{
		/*
		 * The first row of a COPY's batch, or a row an INSERT just stored,
		 * all of whose statement's rows are noted for the commit: the
		 * executor need not form index values for the statement's other
		 * rows only for this to skip them (a twentieth of a COPY, of an
		 * INSERT ... SELECT): the index is marked as taking no rows, in
		 * the statement's own index state, for the rest of it.
		 */
		if (inserted || sw_stream_am_copy_row(heap, heap_tid))
			indexInfo->ii_ReadyForInserts = false;
		sw_commit_order_left_for_flush();
		return false;
	}
	return brininsert(index, values, isnull, heap_tid, heap, checkUnique,
					  indexUnchanged, indexInfo);
}

static int64
stream_brin_getbitmap(IndexScanDesc scan, TIDBitmap *tbm)
{
	int64		found = bringetbitmap(scan, tbm);
	BlockNumber (*runs)[2];
	int			nruns;

	if (!sw_commit_order_stored_any())
		return found;
	nruns = sw_commit_order_own_runs(scan->indexRelation->rd_index->indrelid, &runs);
	for (int i = 0; i < nruns; i++)
		for (BlockNumber blk = runs[i][0]; blk <= runs[i][1]; blk++)
		{
			tbm_add_page(tbm, blk);
			found += 10;		/* bringetbitmap's estimate per page */
			if (blk == MaxBlockNumber)
				break;
		}
	if (runs != NULL)
		pfree(runs);
	return found;
}

/*
 * Remove the placeholders that summarisations of 'index' left when they
 * failed (cancelled, as autovacuum is by a conflicting lock; an error; a
 * crash).  BRIN's summarisation takes a range with a placeholder for
 * summarised and every scan reads it whole, forever; the function that
 * would remove them, brin_desummarize_range(), refuses an index of another
 * access method.  The caller holds SHARE UPDATE EXCLUSIVE on the index,
 * which every summariser of a streamwm_brin index takes (below): no
 * summarisation is under way, so every placeholder is such a leftover
 * (brinRevmapDesummarizeRange says as much).  One look-up per block range,
 * as BRIN's summarisation makes anyway.
 */
static void
remove_orphan_placeholders(Relation heap, Relation index)
{
	BlockNumber pages_per_range;
	BrinRevmap *revmap = brinRevmapInitialize(index, &pages_per_range, NULL);
	BlockNumber nblocks = RelationGetNumberOfBlocks(heap);
	Buffer		buf = InvalidBuffer;

	for (BlockNumber start = 0; start < nblocks; start += pages_per_range)
	{
		OffsetNumber off;
		Size		size;
		BrinTuple  *tup;
		bool		orphan;

		CHECK_FOR_INTERRUPTS();
		tup = brinGetTupleForHeapBlock(revmap, start, &buf, &off, &size,
									   BUFFER_LOCK_SHARE, NULL);
		if (tup == NULL)
			continue;
		orphan = BrinTupleIsPlaceholder(tup);
		LockBuffer(buf, BUFFER_LOCK_UNLOCK);
		if (orphan)
		{
			/* false: the index page moved under it; look again */
			while (!brinRevmapDesummarizeRange(index, start))
				CHECK_FOR_INTERRUPTS();
		}
		if (start > MaxBlockNumber - pages_per_range)
			break;
	}
	if (BufferIsValid(buf))
		ReleaseBuffer(buf);
	brinRevmapTerminate(revmap);
}

/*
 * Summarise the index, as BRIN's cleanup does, if no one else is (a step,
 * or another VACUUM): summarisers must not run at the same time on one
 * index, and they take the index's own SHARE UPDATE EXCLUSIVE lock, not
 * the table's (which a VACUUM holds for its whole run: steps, which
 * summarise every stream they read, sw_stream_brin_summarize, would be kept
 * from it that long).  BRIN's other summarisers, brin_summarize_range() and
 * brin_desummarize_range(), refuse an index of another access method, and
 * an index build takes stronger locks.  A stream no step reads is
 * summarised by VACUUM (autovacuum), as a BRIN index is.  Under that lock
 * no summarisation is under way: the placeholders failed ones left are
 * removed first.  False, and nothing done, when another holds it.
 */
static bool
summarize_unless_busy(Relation heap, IndexVacuumInfo *info, IndexBulkDeleteResult **stats)
{
	Oid			indexoid = RelationGetRelid(info->index);

	if (!ConditionalLockRelationOid(indexoid, ShareUpdateExclusiveLock))
		return false;
	remove_orphan_placeholders(heap, info->index);
	*stats = brinvacuumcleanup(info, *stats);
	UnlockRelationOid(indexoid, ShareUpdateExclusiveLock);
	return true;
}

/* VACUUM's cleanup of the index: summarise it (above), as BRIN's does. */
static IndexBulkDeleteResult *
stream_brin_vacuumcleanup(IndexVacuumInfo *info, IndexBulkDeleteResult *stats)
{
	if (!info->analyze_only)
	{
		Relation	heap = table_open(IndexGetRelation(RelationGetRelid(info->index), false),
									  AccessShareLock);

		(void) summarize_unless_busy(heap, info, &stats);
		table_close(heap, AccessShareLock);
	}
	/* BRIN's counts are of summaries made: VACUUM must not store them */
	if (stats != NULL)
	{
		stats->num_pages = RelationGetNumberOfBlocks(info->index);
		stats->estimated_count = true;
	}
	return stats;
}

Datum
streamwm_brin_handler(PG_FUNCTION_ARGS)
{
	IndexAmRoutine *routine = (IndexAmRoutine *) DatumGetPointer(brinhandler(fcinfo));

	routine->aminsert = stream_brin_insert;
	routine->amgetbitmap = stream_brin_getbitmap;
	routine->amvacuumcleanup = stream_brin_vacuumcleanup;
	PG_RETURN_POINTER(routine);
}

/* Is this index one of streamwm_brin? */
static bool
is_stream_brin(Relation index)
{
	Oid			am = get_index_am_oid("streamwm_brin", true);

	return OidIsValid(am) && index->rd_rel->relam == am;
}

/*
 * Does 'index' get a transaction's own rows only at its commit
 * (sw_stream_brin_flush), so that they may change until then?  One of
 * streamwm_brin with plain keys; its aminsert skips them.
 */
bool
sw_stream_brin_defers(Relation index)
{
	return is_stream_brin(index) &&
		heap_attisnull(index->rd_indextuple, Anum_pg_index_indexprs, NULL) &&
		heap_attisnull(index->rd_indextuple, Anum_pg_index_indpred, NULL);
}

/* Has the block range starting at 'start' a summary (or a placeholder)? */
static bool
range_summarized(BrinRevmap *revmap, BlockNumber start)
{
	Buffer		buf = InvalidBuffer;
	OffsetNumber off;
	Size		size;
	BrinTuple  *tup;

	tup = brinGetTupleForHeapBlock(revmap, start, &buf, &off, &size,
								   BUFFER_LOCK_SHARE, NULL);
	if (tup != NULL)
		LockBuffer(buf, BUFFER_LOCK_UNLOCK);
	if (BufferIsValid(buf))
		ReleaseBuffer(buf);
	return tup != NULL;
}

/*
 * Can the rows of one block range be entered into 'index' as their
 * smallest and largest key values?  When every key column is one of the
 * types of the extension's minmax operator classes (int4, int8,
 * timestamptz: integers in a Datum, ordered as such) with its minmax
 * operator family: BRIN's minmax summary of a range is then the least and
 * the greatest value of each column, and whether it has NULLs, whatever
 * rows brought them.
 */
static bool
enter_as_bounds(Relation heap, Relation index, IndexInfo *info)
{
	Oid			ints = get_opfamily_oid(index->rd_rel->relam,
										list_make2(makeString("streamwm_internal"),
												   makeString("integer_minmax_ops")), true);
	Oid			times = get_opfamily_oid(index->rd_rel->relam,
										 list_make2(makeString("streamwm_internal"),
													makeString("datetime_minmax_ops")), true);

	for (int k = 0; k < info->ii_NumIndexAttrs; k++)
	{
		Oid			type = TupleDescAttr(RelationGetDescr(heap), info->ii_IndexAttrNumbers[k] - 1)->atttypid;

		if (!((type == INT4OID || type == INT8OID) && index->rd_opfamily[k] == ints) &&
			!(type == TIMESTAMPTZOID && index->rd_opfamily[k] == times))
			return false;
	}
	return true;
}

/* A key value of enter_as_bounds()'s types, as an integer. */
static inline int64
bound_value(Datum d, Oid type)
{
	return type == INT4OID ? (int64) DatumGetInt32(d) : DatumGetInt64(d);
}

/*
 * Enter this transaction's rows in blocks first..last of 'heap' (one block
 * range) into 'index' with BRIN's aminsert: each row, or, when 'bounds'
 * (enter_as_bounds()), a row of each column's least values, one of the
 * greatest, and one of NULLs where a column had any: the same summary, for
 * three look-ups of the range instead of one a row (a step that summarised
 * the range while a long COPY filled it made each of its rows pay one at
 * commit: a fifth of the COPY).  The rows are read from the page first,
 * then entered, the page let go meanwhile.
 */
static void
enter_own_rows(Relation heap, Relation index, IndexInfo *info, bool bounds,
			   BlockNumber first, BlockNumber last)
{
	int			nkeys = info->ii_NumIndexAttrs;
	Datum	   *values = palloc(MaxHeapTuplesPerPage * nkeys * sizeof(Datum));
	bool	   *isnull = palloc(MaxHeapTuplesPerPage * nkeys * sizeof(bool));
	ItemPointerData *tids = palloc(MaxHeapTuplesPerPage * sizeof(ItemPointerData));
	TupleDesc	desc = RelationGetDescr(heap);
	BlockNumber nblocks = RelationGetNumberOfBlocks(heap);
	/* bounds: [0] least, [1] greatest, [2] NULLs; any: a row was seen */
	Datum	   *bound = palloc0(3 * nkeys * sizeof(Datum));
	bool	   *bound_null = palloc(3 * nkeys * sizeof(bool));
	bool		any = false;
	ItemPointerData bound_tid;

	for (int k = 0; k < 3 * nkeys; k++)
		bound_null[k] = true;
	for (BlockNumber blk = first; blk <= last && blk < nblocks; blk++)
	{
		Buffer		buf = ReadBuffer(heap, blk);
		Page		page;
		int			n = 0;

		LockBuffer(buf, BUFFER_LOCK_SHARE);
		page = BufferGetPage(buf);
		for (OffsetNumber off = FirstOffsetNumber; off <= PageGetMaxOffsetNumber(page); off++)
		{
			ItemId		lp = PageGetItemId(page, off);
			HeapTupleData tup;

			if (!ItemIdIsNormal(lp))
				continue;
			tup.t_data = (HeapTupleHeader) PageGetItem(page, lp);
			tup.t_len = ItemIdGetLength(lp);
			tup.t_tableOid = RelationGetRelid(heap);
			ItemPointerSet(&tup.t_self, blk, off);
			if (HeapTupleHeaderXminInvalid(tup.t_data) ||
				!TransactionIdIsCurrentTransactionId(HeapTupleHeaderGetRawXmin(tup.t_data)))
				continue;
			if (bounds)
			{
				if (!any)
					bound_tid = tup.t_self;
				for (int k = 0; k < nkeys; k++)
				{
					AttrNumber	att = info->ii_IndexAttrNumbers[k];
					Oid			type = TupleDescAttr(desc, att - 1)->atttypid;
					bool		null;
					Datum		d = heap_getattr(&tup, att, desc, &null);

					if (null)
						bound_null[2 * nkeys + k] = false;	/* a NULL to enter */
					else if (bound_null[k])
					{
						bound[k] = bound[nkeys + k] = d;
						bound_null[k] = bound_null[nkeys + k] = false;
					}
					else if (bound_value(d, type) < bound_value(bound[k], type))
						bound[k] = d;
					else if (bound_value(d, type) > bound_value(bound[nkeys + k], type))
						bound[nkeys + k] = d;
				}
				any = true;
				continue;
			}
			for (int k = 0; k < nkeys; k++)
			{
				Datum		d = heap_getattr(&tup, info->ii_IndexAttrNumbers[k], desc,
											 &isnull[n * nkeys + k]);

				/* the index's keys are fixed-length by-value columns or copied */
				values[n * nkeys + k] = isnull[n * nkeys + k] ? (Datum) 0 :
					datumCopy(d, TupleDescAttr(desc, info->ii_IndexAttrNumbers[k] - 1)->attbyval,
							  TupleDescAttr(desc, info->ii_IndexAttrNumbers[k] - 1)->attlen);
			}
			tids[n++] = tup.t_self;
		}
		UnlockReleaseBuffer(buf);
		for (int i = 0; i < n; i++)
			brininsert(index, &values[i * nkeys], &isnull[i * nkeys], &tids[i], heap,
					   UNIQUE_CHECK_NO, false, info);
		CHECK_FOR_INTERRUPTS();
	}
	if (any)
	{
		bool		nulls = false;

		/* the row of NULLs: NULL where a column had one, else its least value */
		for (int k = 0; k < nkeys; k++)
		{
			if (bound_null[2 * nkeys + k])
			{
				bound[2 * nkeys + k] = bound[k];
				bound_null[2 * nkeys + k] = bound_null[k];
			}
			else
			{
				bound_null[2 * nkeys + k] = true;
				nulls = true;
			}
		}
		for (int b = 0; b < (nulls ? 3 : 2); b++)
			brininsert(index, &bound[b * nkeys], &bound_null[b * nkeys], &bound_tid, heap,
					   UNIQUE_CHECK_NO, false, info);
	}
	pfree(bound);
	pfree(bound_null);
	pfree(values);
	pfree(isnull);
	pfree(tids);
}

/*
 * Bring the table's streamwm_brin indexes up to date with the rows this
 * transaction stored in runs[0..nruns-1] of 'heap' (locked by the inserts),
 * which their aminsert skipped: see the file header.
 */
void
sw_stream_brin_flush(Relation heap, BlockNumber runs[][2], int nruns)
{
	List	   *indexes = RelationGetIndexList(heap);
	ListCell   *lc;

	foreach(lc, indexes)
	{
		Relation	index = index_open(lfirst_oid(lc), RowExclusiveLock);
		IndexInfo  *info;
		BrinRevmap *revmap;
		BlockNumber per_range;
		int			bounds = -1;	/* enter_as_bounds(), once a range needs it */

		if (!sw_stream_brin_defers(index) || !index->rd_index->indisready)
		{
			index_close(index, RowExclusiveLock);
			continue;
		}
		info = BuildIndexInfo(index);
		revmap = brinRevmapInitialize(index, &per_range, NULL);
		for (int i = 0; i < nruns; i++)
			for (BlockNumber start = runs[i][0] - runs[i][0] % per_range;
				 start <= runs[i][1]; start += per_range)
			{
				if (range_summarized(revmap, start))
				{
					if (bounds < 0)
						bounds = enter_as_bounds(heap, index, info);
					enter_own_rows(heap, index, info, bounds,
								   Max(start, runs[i][0]),
								   Min(start + (per_range - 1), runs[i][1]));
				}
				if (start > MaxBlockNumber - per_range)
					break;
			}
		brinRevmapTerminate(revmap);
		index_close(index, RowExclusiveLock);
	}
	list_free(indexes);
}

/*
 * Before a parallel query, the rows this transaction stored go into the
 * indexes: the workers' scans cannot add this backend's runs.
 */
static void
stream_brin_executor_start(QueryDesc *queryDesc, int eflags)
{
	/*
	 * Every stream table the transaction wrote, not only those the query
	 * names: a parallel-safe function the workers run may read another.
	 */
	if (queryDesc->plannedstmt->parallelModeNeeded && !IsParallelWorker() &&
		sw_commit_order_stored_any() && IsTransactionState())
		sw_commit_order_flush_indexes();
	if (prev_executor_start)
		prev_executor_start(queryDesc, eflags);
	else
		standard_ExecutorStart(queryDesc, eflags);
}

/* Called from _PG_init. */
void
sw_stream_brin_init(void)
{
	prev_executor_start = ExecutorStart_hook;
	ExecutorStart_hook = stream_brin_executor_start;
}

/*
 * Summarise the block ranges of 'heap' that have no summary, in its
 * streamwm_brin indexes, all but the last range if it is not full (it would
 * be widened by the next rows: it is read whole instead).  This is BRIN's
 * VACUUM cleanup (which also tidies the index's pages), called here and not
 * by VACUUM (stream_brin_vacuumcleanup), under SHARE UPDATE EXCLUSIVE on
 * the index, which keeps another step from summarising at the same time
 * (when one does, this one leaves it to it), after removing the
 * placeholders failed summarisations left.  The caller holds a lock on the
 * table.
 */
void
sw_stream_brin_summarize(Relation heap)
{
	List	   *indexes = RelationGetIndexList(heap);
	ListCell   *lc;

	foreach(lc, indexes)
	{
		Relation	index = index_open(lfirst_oid(lc), AccessShareLock);

		/*
		 * Only plain-key indexes: a step may run as a superuser, and an
		 * expression or predicate is the owner's code (VACUUM summarises
		 * the others, as the owner).
		 */
		if (sw_stream_brin_defers(index) && index->rd_index->indisvalid)
		{
			IndexVacuumInfo info = {0};
			IndexBulkDeleteResult *stats = NULL;

			info.index = index;
			info.analyze_only = false;
			info.report_progress = false;
			info.estimated_count = true;
			info.message_level = DEBUG2;
			info.num_heap_tuples = -1;
			info.strategy = NULL;
			if (summarize_unless_busy(heap, &info, &stats))
				pfree(stats);
		}
		index_close(index, AccessShareLock);
	}
	list_free(indexes);
}
