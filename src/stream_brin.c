/*-------------------------------------------------------------------------
 * stream_brin.c
 *	  Owns the index access method of a local stream's own index,
 *	  streamwm_brin: PostgreSQL's BRIN, whose summaries the stream's writers
 *	  bring up to date once per block range when they commit, instead of
 *	  once per row as they insert.
 *
 * Why.  BRIN's aminsert looks up the summary of the row's block range for
 * every row (the index's metapage and a revmap page: two buffer lookups),
 * even when the range has no summary, which is where a stream's new rows
 * almost always go.  That was a fifth of a COPY into a stream (issue 9).
 *
 * How.  The access method is BRIN's own routine but for two callbacks:
 *
 * - aminsert skips a row that the stream's table access method stored in
 *	 this transaction, within the span of blocks the transaction noted for
 *	 the table (commit_order.c, sw_commit_order_stored).  Any other row
 *	 (stored as given under session_replication_role = replica, or written
 *	 after a rewrite in the same transaction) goes through BRIN's aminsert.
 *
 * - Before the transaction commits (commit_order.c, after renumbering,
 *	 when no row of it can be stored any more), sw_stream_brin_commit()
 *	 takes the summary away from every block range of the span
 *	 (brinRevmapDesummarizeRange: a range without a summary matches every
 *	 scan).  A summary made meanwhile by a step or VACUUM may lack rows of
 *	 this transaction stored after it scanned their page; it is gone before
 *	 the rows are visible.  A summary made after that sees the rows on
 *	 their pages (summarisation reads tuples of transactions in progress).
 *	 Steps summarise the ranges again (sw_stream_brin_summarize).
 *
 * - Until it commits, a transaction sees its own rows; amgetbitmap adds the
 *	 pages of its span to what BRIN found, so that its own queries on the
 *	 stream never miss them.
 *
 * Other transactions' uncommitted rows are invisible to every reader, and
 * nothing reads a BRIN index with a dirty snapshot.  So every scan finds
 * what BRIN with per-row inserts would find.  The operator classes are
 * BRIN's minmax ones (the extension's SQL script).
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/amapi.h"
#include "access/brin.h"
#include "access/brin_internal.h"
#include "access/brin_revmap.h"
#include "access/genam.h"
#include "access/relscan.h"
#include "access/table.h"
#include "commands/defrem.h"
#include "miscadmin.h"
#include "nodes/tidbitmap.h"
#include "utils/fmgrprotos.h"
#include "utils/rel.h"

#include "commit_order.h"
#include "stream_brin.h"

PG_FUNCTION_INFO_V1(streamwm_brin_handler);

static bool
stream_brin_insert(Relation index, Datum *values, bool *isnull, ItemPointer heap_tid,
				   Relation heap, IndexUniqueCheck checkUnique, bool indexUnchanged,
				   IndexInfo *indexInfo)
{
	BlockNumber first;
	BlockNumber last;
	BlockNumber blk = ItemPointerGetBlockNumber(heap_tid);

	if (sw_commit_order_own_span(heap, &first, &last) && blk >= first && blk <= last)
		return false;
	return brininsert(index, values, isnull, heap_tid, heap, checkUnique,
					  indexUnchanged, indexInfo);
}

static int64
stream_brin_getbitmap(IndexScanDesc scan, TIDBitmap *tbm)
{
	int64		found = bringetbitmap(scan, tbm);
	Relation	heap = RelationIdGetRelation(scan->indexRelation->rd_index->indrelid);
	BlockNumber first;
	BlockNumber last;

	if (!RelationIsValid(heap))
		return found;
	if (sw_commit_order_own_span(heap, &first, &last))
	{
		for (BlockNumber blk = first; blk <= last; blk++)
		{
			tbm_add_page(tbm, blk);
			found += 10;		/* bringetbitmap's estimate per page */
		}
	}
	RelationClose(heap);
	return found;
}

Datum
streamwm_brin_handler(PG_FUNCTION_ARGS)
{
	IndexAmRoutine *routine = (IndexAmRoutine *) DatumGetPointer(brinhandler(fcinfo));

	routine->aminsert = stream_brin_insert;
	routine->amgetbitmap = stream_brin_getbitmap;
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
 * The transaction is about to commit the rows it stored in blocks
 * first..last of 'heap' (locked by the inserts): take the summaries of
 * those block ranges away in the table's streamwm_brin indexes.
 */
void
sw_stream_brin_commit(Relation heap, BlockNumber first, BlockNumber last)
{
	List	   *indexes = RelationGetIndexList(heap);
	ListCell   *lc;

	foreach(lc, indexes)
	{
		Relation	index = index_open(lfirst_oid(lc), RowExclusiveLock);

		if (is_stream_brin(index))
		{
			BlockNumber per_range = BrinGetPagesPerRange(index);

			for (BlockNumber start = first - first % per_range; start <= last; start += per_range)
			{
				/* false while the range is being summarised: wait for it to end */
				while (!brinRevmapDesummarizeRange(index, start))
					CHECK_FOR_INTERRUPTS();
				if (start > MaxBlockNumber - per_range)
					break;
			}
		}
		index_close(index, RowExclusiveLock);
	}
	list_free(indexes);
}

/*
 * Summarise the block ranges of 'heap' that have no summary, in its
 * streamwm_brin indexes, all but the last range if it is not full (it would
 * be widened by the next rows: it is read whole instead).  The caller holds
 * SHARE UPDATE EXCLUSIVE on the table, which keeps VACUUM and other steps
 * from summarising at the same time.  This is BRIN's own VACUUM cleanup,
 * which summarises (brin_summarize_new_values() serves only the index
 * access method called brin).
 */
void
sw_stream_brin_summarize(Relation heap)
{
	List	   *indexes = RelationGetIndexList(heap);
	ListCell   *lc;

	foreach(lc, indexes)
	{
		Relation	index = index_open(lfirst_oid(lc), ShareUpdateExclusiveLock);

		if (is_stream_brin(index) && index->rd_index->indisvalid)
		{
			IndexVacuumInfo info = {0};

			info.index = index;
			info.analyze_only = false;
			info.report_progress = false;
			info.estimated_count = true;
			info.message_level = DEBUG2;
			info.num_heap_tuples = -1;
			info.strategy = NULL;
			pfree(index_vacuum_cleanup(&info, NULL));
		}
		index_close(index, ShareUpdateExclusiveLock);
	}
	list_free(indexes);
}
