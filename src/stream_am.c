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
 * (commit_order.c renumbers rows in place or with heap updates),
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
#include "commands/copyfrom_internal.h"
#include "commands/trigger.h"
#include "fmgr.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "commit_order.h"
#include "ingest.h"
#include "stream_am.h"

PG_FUNCTION_INFO_V1(streamwm_stream_am_handler);
PG_FUNCTION_INFO_V1(streamwm_stream_check_method);

static TableAmRoutine stream_am;
static bool stream_am_ready = false;

/* the streams whose index builds run with the heap's routine (see below) */
#define MAX_HEAP_ROUTINE_RELS 8
static Relation heap_routine_rels[MAX_HEAP_ROUTINE_RELS];
static int	n_heap_routine_rels = 0;

/*
 * A row stored, remembered for the index insertions that follow it: in
 * which transaction, table and storage, and where.
 */
typedef struct StoredRow
{
	LocalTransactionId lxid;	/* InvalidLocalTransactionId: none */
	Oid			relid;
	RelFileNode node;
	ItemPointerData tid;
} StoredRow;

static void
remember_row(StoredRow *row, Relation rel, ItemPointer tid)
{
	row->lxid = MyProc->lxid;
	row->relid = RelationGetRelid(rel);
	row->node = rel->rd_node;
	row->tid = *tid;
}

/* Is the row at 'tid' of 'rel' (in its present storage) the one remembered? */
static bool
is_row(StoredRow *row, Relation rel, ItemPointer tid)
{
	return row->lxid == MyProc->lxid && row->relid == RelationGetRelid(rel) &&
		RelFileNodeEquals(row->node, rel->rd_node) && ItemPointerEquals(&row->tid, tid);
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
	Oid			relid;			/* ... into this stream */
	StoredRow	first;			/* the first row of its last batch */
}			copy_rows;

/*
 * The row stream_tuple_insert() filled and stored last, until the index
 * insertions that follow it ask for it (sw_stream_am_inserted_row).
 */
static StoredRow inserted_row;

/*
 * A stream's row, filled or stored as given, is noted for the commit
 * (commit_order.c: renumbering, and the stream's own index, which gets it
 * then, stream_brin.c): every one, as COPY's, so that once the statement's
 * index state takes no more rows one by one (sw_stream_am_inserted_row), a
 * row stored as given later in it (a superuser's function switching
 * session_replication_role in the middle of an INSERT ... SELECT) is not
 * left out of the index.
 */
static void
stream_tuple_insert(Relation rel, TupleTableSlot *slot, CommandId cid,
					int options, BulkInsertState bistate)
{
	SwFill		fill = sw_ingest_fill_slot(rel, slot, NULL);

	/* a COPY's last batch is done with (a COPY inserting row by row stores here) */
	copy_rows.first.lxid = InvalidLocalTransactionId;
	GetHeapamTableAmRoutine()->tuple_insert(rel, slot, cid, options, bistate);
	if (fill == SW_FILL_NONE)
		return;
	sw_commit_order_stored(rel, &slot->tts_tid);
	if (fill == SW_FILL_FILLED)
		remember_row(&inserted_row, rel, &slot->tts_tid);
}

/*
 * Is the row at 'tid' of 'rel' the one stream_tuple_insert() just filled
 * and stored?  The executor enters a row into the indexes right after
 * storing it, with the index state of the statement that stored it
 * (ExecInsert), which then needs to take no more rows one by one
 * (stream_brin.c).  Whatever statement's state is marked so, it misses no
 * row: every row version stored into a stream through this method is
 * noted for the commit, where the index gets it (inserted one by one,
 * speculatively or by COPY, filled or as given, or an UPDATE's new
 * version, stream_tuple_update: MERGE's INSERT and UPDATE actions share an
 * index state).  Asked by every insertion into the stream's own index, and
 * answered once, so that little is left to match a row stored later at
 * the same place (after a TRUNCATE, which may keep the storage).
 */
bool
sw_stream_am_inserted_row(Relation rel, ItemPointer tid)
{
	bool		match = is_row(&inserted_row, rel, tid);

	inserted_row.lxid = InvalidLocalTransactionId;
	return match;
}

/*
 * A new version of a row stored by an UPDATE: its statement trigger
 * refuses one on a stream, but not under session_replication_role =
 * replica (a subscriber applying renumbering's updates; a superuser's MERGE
 * whose actions switch the role), and renumbering makes them
 * (commit_order.c).  A stream's is noted for the commit as an inserted row
 * is, so that it reaches the stream's index even when its statement's
 * index state takes no rows one by one (a review found a MERGE's INSERT
 * action marking it and its UPDATE action's new versions missing from the
 * index).  A table of the method that is no stream is the heap: its rows
 * are not noted, and its indexes take them one by one.
 */
static TM_Result
stream_tuple_update(Relation rel, ItemPointer otid, TupleTableSlot *slot, CommandId cid,
					Snapshot snapshot, Snapshot crosscheck, bool wait,
					TM_FailureData *tmfd, LockTupleMode *lockmode, bool *update_indexes)
{
	TM_Result	result = GetHeapamTableAmRoutine()->tuple_update(rel, otid, slot, cid,
																 snapshot, crosscheck,
																 wait, tmfd, lockmode,
																 update_indexes);

	if (result == TM_Ok && sw_ingest_stream_rows(rel))
		sw_commit_order_stored(rel, &slot->tts_tid);
	return result;
}

/*
 * INSERT ... ON CONFLICT inserts a row speculatively; when a conflicting
 * row was being inserted meanwhile, it is told the insertion failed, waits
 * for that row and, if it went away, inserts the same slot again: the
 * columns filled for the first try are emptied again for the second.
 *
 * What was filled is kept per slot: a partition_key, or an index expression
 * evaluated between the two calls, may run an INSERT ... ON CONFLICT of its
 * own into a stream.  An entry is replaced by the next speculative insertion
 * of its slot, so one left by an error is never read; when more are nested
 * than the table holds, the oldest is forgotten and its retry fails with
 * "cannot insert a value into column sw_offset" (an error, nothing stored).
 */
#define SPECULATIVE_SLOTS 8

typedef struct Speculative
{
	TupleTableSlot *slot;		/* NULL: free */
	bool		was_filled;
	SwFilled	filled;
} Speculative;

static Speculative speculative[SPECULATIVE_SLOTS];
static int	speculative_next;	/* where the next new entry goes */

static Speculative *
speculative_entry(TupleTableSlot *slot)
{
	for (int i = 0; i < SPECULATIVE_SLOTS; i++)
		if (speculative[i].slot == slot)
			return &speculative[i];
	return NULL;
}

static void
stream_tuple_insert_speculative(Relation rel, TupleTableSlot *slot, CommandId cid,
								int options, BulkInsertState bistate, uint32 specToken)
{
	Speculative this;
	Speculative *entry;
	SwFill		fill = sw_ingest_fill_slot(rel, slot, &this.filled);

	this.was_filled = fill == SW_FILL_FILLED;
	this.slot = slot;
	entry = speculative_entry(slot);
	if (entry == NULL)
		entry = speculative_entry(NULL);
	if (entry == NULL)
	{
		entry = &speculative[speculative_next];
		speculative_next = (speculative_next + 1) % SPECULATIVE_SLOTS;
	}
	*entry = this;
	GetHeapamTableAmRoutine()->tuple_insert_speculative(rel, slot, cid, options,
														bistate, specToken);
	/* noted as stream_tuple_insert() notes a row */
	if (fill != SW_FILL_NONE)
		sw_commit_order_stored(rel, &slot->tts_tid);
}

static void
stream_tuple_complete_speculative(Relation rel, TupleTableSlot *slot,
								  uint32 specToken, bool succeeded)
{
	Speculative *entry = speculative_entry(slot);

	GetHeapamTableAmRoutine()->tuple_complete_speculative(rel, slot, specToken,
														  succeeded);
	if (entry != NULL)
	{
		if (!succeeded && entry->was_filled)
			sw_ingest_unfill_slot(slot, &entry->filled);
		entry->slot = NULL;
	}
}

typedef struct CopyRowContext
{
	Relation	rel;
	uint64		row;			/* 1-based row of the COPY's data */
	bool		filtered;		/* ... of those its WHERE clause kept */
} CopyRowContext;

static void
copy_row_context(void *arg)
{
	CopyRowContext *cx = (CopyRowContext *) arg;

	if (cx->filtered)
		errcontext("COPY %s, row %llu of those its WHERE clause kept",
				   RelationGetRelationName(cx->rel), (unsigned long long) cx->row);
	else
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
	bool		noted = false;	/* the rows are noted for the commit */
	IngestState *st;

	while (copy != NULL && copy->callback != CopyFromErrorCallback)
		copy = copy->previous;
	if (copy == NULL)
	{
		/* not COPY's: each row names itself, if anything does; a stream's are noted */
		for (int i = 0; i < nslots; i++)
			noted |= sw_ingest_fill_slot(rel, slots[i], NULL) != SW_FILL_NONE;
	}
	else
	{
		if (copy_rows.copy != copy->arg || copy_rows.cid != cid ||
			copy_rows.lxid != MyProc->lxid || copy_rows.relid != RelationGetRelid(rel))
		{
			copy_rows.copy = copy->arg;
			copy_rows.cid = cid;
			copy_rows.lxid = MyProc->lxid;
			copy_rows.rows = 0;
			copy_rows.relid = RelationGetRelid(rel);
		}
		copy_rows.first.lxid = InvalidLocalTransactionId;
		/* in place of COPY's line, the row being filled */
		cx.rel = rel;
		cx.filtered = ((CopyFromState) copy->arg)->whereClause != NULL;
		errcb.callback = copy_row_context;
		errcb.arg = &cx;
		errcb.previous = copy->previous;
		error_context_stack = &errcb;
		cx.row = copy_rows.rows + 1;
		st = sw_ingest_batch_state(rel);
		if (st != NULL)
		{
			sw_commit_order_batch(true);
			PG_TRY();
			{
				for (int i = 0; i < nslots; i++)
				{
					cx.row = copy_rows.rows + i + 1;
					sw_ingest_fill_batch_row(st, rel, slots[i]);
				}
			}
			PG_FINALLY();
			{
				sw_commit_order_batch(false);
			}
			PG_END_TRY();
		}
		else
			for (int i = 0; i < nslots; i++)
			{
				cx.row = copy_rows.rows + i + 1;
				(void) sw_ingest_fill_slot(rel, slots[i], NULL);
			}
		error_context_stack = saved;
		copy_rows.rows += nslots;
		/* every row a COPY stores is noted (below), filled or as given */
		noted = true;
	}
	GetHeapamTableAmRoutine()->multi_insert(rel, slots, nslots, cid, options, bistate);

	/*
	 * Where they are, for renumbering at commit (commit_order.c) and for the
	 * stream's own index, which gets them at commit (stream_brin.c).  A
	 * COPY's rows all, also those stored as given (a role changed in the
	 * middle of it): its index state may take no more rows one by one
	 * (sw_stream_am_copy_row), and the commit enters them.
	 */
	if (noted)
		for (int i = 0; i < nslots; i++)
			sw_commit_order_stored(rel, &slots[i]->tts_tid);
	if (copy != NULL && nslots > 0)
		remember_row(&copy_rows.first, rel, &slots[0]->tts_tid);
}

/*
 * Is the row at 'tid' of 'rel' the first row of the batch that the COPY
 * running here just stored?  COPY enters a batch's rows into the indexes
 * right after storing them, the first row first, with its own index state
 * (stream_brin.c, which then takes no more rows of that COPY one by one:
 * every row a COPY stores is noted, and all go into the index at commit).
 * Only while that COPY's error context is on the stack: an INSERT later in
 * the transaction, after a TRUNCATE, may store its first row at the same
 * place.  (A COPY nested in another, run by a column default, sees its own
 * batches: the outer COPY's are found again at its next batch.)
 */
bool
sw_stream_am_copy_row(Relation rel, ItemPointer tid)
{
	ErrorContextCallback *copy = error_context_stack;

	if (!is_row(&copy_rows.first, rel, tid))
		return false;
	while (copy != NULL && copy->callback != CopyFromErrorCallback)
		copy = copy->previous;
	return copy != NULL && copy->arg == copy_rows.copy;
}

/*
 * heap_getnext() refuses a relation whose access method is not the heap's
 * own routine, and the heap's index build and validation scans call it: while
 * they run, the relation shows the heap's routine (it is the heap's scan
 * they run).  A relcache invalidation of the relation meanwhile (a GRANT
 * committed by another session, seen at the next lock the index code
 * takes) rebuilds the entry in place with this method's routine:
 * heap_routine_changed() shows the heap's again.  Nothing may insert into
 * the table meanwhile: an index expression could (the owner's code), and
 * its rows would reach the heap unfilled; the stream's statement trigger
 * refuses them (below).
 */
static void
heap_routine_changed(Datum arg, Oid relid)
{
	for (int i = 0; i < n_heap_routine_rels; i++)
		if (relid == InvalidOid || relid == RelationGetRelid(heap_routine_rels[i]))
			heap_routine_rels[i]->rd_tableam = GetHeapamTableAmRoutine();
}

/* Is an index of this relation being built with the heap's routine? */
static bool
in_heap_routine(Relation rel)
{
	for (int i = 0; i < n_heap_routine_rels; i++)
		if (RelationGetRelid(heap_routine_rels[i]) == RelationGetRelid(rel))
			return true;
	return false;
}

/* Show the heap's routine on the relation until pop_heap_routine(). */
static void
push_heap_routine(Relation rel)
{
	if (n_heap_routine_rels == MAX_HEAP_ROUTINE_RELS)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("index builds on streams nested too deep")));
	rel->rd_tableam = GetHeapamTableAmRoutine();
	heap_routine_rels[n_heap_routine_rels++] = rel;
}

static void
pop_heap_routine(Relation rel)
{
	n_heap_routine_rels--;
	/* an index build of the same relation may be running outside this one */
	if (!in_heap_routine(rel))
		rel->rd_tableam = &stream_am;
}

static double
stream_index_build_range_scan(Relation table_rel, Relation index_rel,
							  struct IndexInfo *index_info, bool allow_sync,
							  bool anyvisible, bool progress,
							  BlockNumber start_blockno, BlockNumber numblocks,
							  IndexBuildCallback callback, void *callback_state,
							  TableScanDesc scan)
{
	double		result;

	push_heap_routine(table_rel);
	PG_TRY();
	{
		result = table_rel->rd_tableam->index_build_range_scan(table_rel, index_rel, index_info,
															   allow_sync, anyvisible, progress,
															   start_blockno, numblocks,
															   callback, callback_state, scan);
	}
	PG_FINALLY();
	{
		pop_heap_routine(table_rel);
	}
	PG_END_TRY();
	return result;
}

static void
stream_index_validate_scan(Relation table_rel, Relation index_rel,
						   struct IndexInfo *index_info, Snapshot snapshot,
						   struct ValidateIndexState *state)
{
	push_heap_routine(table_rel);
	PG_TRY();
	{
		table_rel->rd_tableam->index_validate_scan(table_rel, index_rel, index_info,
												   snapshot, state);
	}
	PG_FINALLY();
	{
		pop_heap_routine(table_rel);
	}
	PG_END_TRY();
}

/*
 * The BEFORE INSERT statement trigger of a local stream (sw_access_method):
 * only the access method fills rows, so a statement that would insert into
 * the table without it is refused before its first row.  That is a stream
 * restored as a plain heap (pg_restore --no-table-access-method), or one
 * whose index is being built with the heap's routine (above).  A
 * replication apply worker, which stores rows as given, does not fire it.
 */
Datum
streamwm_stream_check_method(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	Relation	rel;

	if (!CALLED_AS_TRIGGER(fcinfo) ||
		!TRIGGER_FIRED_BEFORE(trigdata->tg_event) ||
		!TRIGGER_FIRED_FOR_STATEMENT(trigdata->tg_event) ||
		!TRIGGER_FIRED_BY_INSERT(trigdata->tg_event))
		elog(ERROR, "streamwm_internal._stream_check_method() must be a BEFORE INSERT statement trigger");
	rel = trigdata->tg_relation;
	if (in_heap_routine(rel))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("cannot insert into stream \"%s\" while an index of it is built",
						RelationGetRelationName(rel))));
	if (rel->rd_tableam != &stream_am)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("stream \"%s\" is not stored with the access method streamwm_stream",
						RelationGetRelationName(rel)),
				 errdetail("Only that access method gives a row its partition, offset and times; "
						   "a restore with --no-table-access-method makes a stream a plain heap table."),
				 errhint("ALTER TABLE %s SET ACCESS METHOD streamwm_stream",
						 quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
													RelationGetRelationName(rel)))));
	return PointerGetDatum(NULL);
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
		stream_am.tuple_update = stream_tuple_update;
		stream_am.multi_insert = stream_multi_insert;
		stream_am.index_build_range_scan = stream_index_build_range_scan;
		stream_am.index_validate_scan = stream_index_validate_scan;
		CacheRegisterRelcacheCallback(heap_routine_changed, (Datum) 0);
		stream_am_ready = true;
	}
	PG_RETURN_POINTER(&stream_am);
}
