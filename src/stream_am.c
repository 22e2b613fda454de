/*-------------------------------------------------------------------------
 * stream_am.c
 *	  Owns the table access method of local stream tables, streamwm_stream:
 *	  PostgreSQL's heap, but every row inserted gets its system columns
 *	  (partition, offset, write and event time) first (ingest.c,
 *	  sw_ingest_fill_slot).
 *
 * Why an access method and not a BEFORE INSERT row trigger: a row trigger
 * makes COPY insert row by row instead of a thousand rows at a time, and
 * each row pays for the trigger call and a copy of the tuple; the access
 * method is called with the executor's own slots, whose values it fills in
 * place, and COPY keeps its multi-row inserts (issue 9: the trigger was 35%
 * of a COPY into a stream).
 *
 * Everything but the three insert callbacks is the heap's: scans, updates
 * (commit_order.c renumbers rows with an UPDATE, which keeps its values),
 * deletes, VACUUM, ANALYZE, CLUSTER, index builds, TOAST.  The executor
 * checks NOT NULL and CHECK constraints before it calls the access method,
 * so the system columns of a local stream are nullable (the method never
 * stores a NULL in them) and its key is a unique constraint rather than a
 * primary key.  Distributed streams (Citus, citus.c) keep the heap and the
 * insert trigger: their rows are filled on the shard.
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/tableam.h"
#include "commands/copy.h"
#include "fmgr.h"
#include "storage/proc.h"
#include "utils/rel.h"

#include "ingest.h"

PG_FUNCTION_INFO_V1(streamwm_stream_am_handler);

static TableAmRoutine stream_am;
static bool stream_am_ready = false;

static void
stream_tuple_insert(Relation rel, TupleTableSlot *slot, CommandId cid,
					int options, BulkInsertState bistate)
{
	(void) sw_ingest_fill_slot(rel, slot, NULL);
	GetHeapamTableAmRoutine()->tuple_insert(rel, slot, cid, options, bistate);
}

/*
 * INSERT ... ON CONFLICT inserts a row speculatively; when a conflicting
 * row was being inserted meanwhile, it is told the insertion failed, waits
 * for that row and, if it went away, inserts the same slot again: the
 * columns filled for the first try are emptied again for the second.
 */
static struct
{
	TupleTableSlot *slot;
	bool		was_filled;
	SwFilled	filled;
}			speculative;

static void
stream_tuple_insert_speculative(Relation rel, TupleTableSlot *slot, CommandId cid,
								int options, BulkInsertState bistate, uint32 specToken)
{
	speculative.slot = NULL;
	speculative.was_filled = sw_ingest_fill_slot(rel, slot, &speculative.filled);
	speculative.slot = slot;
	GetHeapamTableAmRoutine()->tuple_insert_speculative(rel, slot, cid, options,
														bistate, specToken);
}

static void
stream_tuple_complete_speculative(Relation rel, TupleTableSlot *slot,
								  uint32 specToken, bool succeeded)
{
	GetHeapamTableAmRoutine()->tuple_complete_speculative(rel, slot, specToken,
														  succeeded);
	if (!succeeded && speculative.slot == slot && speculative.was_filled)
		sw_ingest_unfill_slot(slot, &speculative.filled);
	speculative.slot = NULL;
}

/*
 * COPY hands rows to multi_insert a thousand at a time, after it read them:
 * its error context then names the last line it read, not the row that
 * failed.  Rows are counted per COPY statement (its state, command and
 * transaction), and an error in filling one names that row of the data
 * instead.
 */
static struct
{
	void	   *copy;			/* COPY's error context argument */
	CommandId	cid;
	LocalTransactionId lxid;
	uint64		rows;			/* rows of that COPY filled before this batch */
}			copy_rows;

typedef struct CopyRowContext
{
	Relation	rel;
	uint64		row;			/* 1-based row of the COPY's data */
} CopyRowContext;

static void
copy_row_context(void *arg)
{
	CopyRowContext *cx = (CopyRowContext *) arg;

	errcontext("COPY %s, row %llu of its data",
			   RelationGetRelationName(cx->rel), (unsigned long long) cx->row);
}

static void
stream_multi_insert(Relation rel, TupleTableSlot **slots, int nslots,
					CommandId cid, int options, BulkInsertState bistate)
{
	ErrorContextCallback *copy = error_context_stack;
	ErrorContextCallback *saved = error_context_stack;
	ErrorContextCallback errcb;
	CopyRowContext cx;

	while (copy != NULL && copy->callback != CopyFromErrorCallback)
		copy = copy->previous;
	if (copy == NULL)
	{
		/* not COPY's: each row names itself, if anything does */
		for (int i = 0; i < nslots; i++)
			(void) sw_ingest_fill_slot(rel, slots[i], NULL);
	}
	else
	{
		if (copy_rows.copy != copy->arg || copy_rows.cid != cid ||
			copy_rows.lxid != MyProc->lxid)
		{
			copy_rows.copy = copy->arg;
			copy_rows.cid = cid;
			copy_rows.lxid = MyProc->lxid;
			copy_rows.rows = 0;
		}
		/* in place of COPY's line, the row being filled */
		cx.rel = rel;
		errcb.callback = copy_row_context;
		errcb.arg = &cx;
		errcb.previous = copy->previous;
		error_context_stack = &errcb;
		for (int i = 0; i < nslots; i++)
		{
			cx.row = copy_rows.rows + i + 1;
			(void) sw_ingest_fill_slot(rel, slots[i], NULL);
		}
		error_context_stack = saved;
		copy_rows.rows += nslots;
	}
	GetHeapamTableAmRoutine()->multi_insert(rel, slots, nslots, cid, options, bistate);
}

/*
 * heap_getnext() refuses a relation whose access method is not the heap's
 * own routine, and the heap's index build and validation scans call it: while
 * they run, the relation shows the heap's routine (it is the heap's scan
 * they run; nothing inserts into the table meanwhile).
 */
static double
stream_index_build_range_scan(Relation table_rel, Relation index_rel,
							  struct IndexInfo *index_info, bool allow_sync,
							  bool anyvisible, bool progress,
							  BlockNumber start_blockno, BlockNumber numblocks,
							  IndexBuildCallback callback, void *callback_state,
							  TableScanDesc scan)
{
	const TableAmRoutine *own = table_rel->rd_tableam;
	double		result;

	table_rel->rd_tableam = GetHeapamTableAmRoutine();
	PG_TRY();
	{
		result = table_rel->rd_tableam->index_build_range_scan(table_rel, index_rel, index_info,
															   allow_sync, anyvisible, progress,
															   start_blockno, numblocks,
															   callback, callback_state, scan);
	}
	PG_FINALLY();
	{
		table_rel->rd_tableam = own;
	}
	PG_END_TRY();
	return result;
}

static void
stream_index_validate_scan(Relation table_rel, Relation index_rel,
						   struct IndexInfo *index_info, Snapshot snapshot,
						   struct ValidateIndexState *state)
{
	const TableAmRoutine *own = table_rel->rd_tableam;

	table_rel->rd_tableam = GetHeapamTableAmRoutine();
	PG_TRY();
	{
		table_rel->rd_tableam->index_validate_scan(table_rel, index_rel, index_info,
												   snapshot, state);
	}
	PG_FINALLY();
	{
		table_rel->rd_tableam = own;
	}
	PG_END_TRY();
}

Datum
streamwm_stream_am_handler(PG_FUNCTION_ARGS)
{
	if (!stream_am_ready)
	{
		stream_am = *GetHeapamTableAmRoutine();
		stream_am.tuple_insert = stream_tuple_insert;
		stream_am.tuple_insert_speculative = stream_tuple_insert_speculative;
		stream_am.tuple_complete_speculative = stream_tuple_complete_speculative;
		stream_am.multi_insert = stream_multi_insert;
		stream_am.index_build_range_scan = stream_index_build_range_scan;
		stream_am.index_validate_scan = stream_index_validate_scan;
		stream_am_ready = true;
	}
	PG_RETURN_POINTER(&stream_am);
}
