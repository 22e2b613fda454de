/*-------------------------------------------------------------------------
 * ingest.c
 *	  Owns the way rows enter a stream table (SPEC section 3).
 *
 * Every path in (INSERT, COPY, streamwm.ingest(), streamwm.ingest_lines())
 * fills the system columns of each row (ingest_fill): on a local stream its
 * table access method does, on the executor's own slots
 * (sw_ingest_fill_slot, stream_am.c); on a Citus worker the BEFORE INSERT
 * row trigger streamwm_internal._stream_insert() does, on the shard of a
 * distributed stream (on a local stream that function is a BEFORE UPDATE
 * trigger that only binds the expressions below and refuses an UPDATE):
 *
 *	 sw_partition	the explicit one; else the hash of partition_key; else a
 *					partition picked once per session (sticky);
 *	 sw_offset		from the stream's sequence, without any lock;
 *	 sw_write_time	the explicit one, else the clock;
 *	 sw_event_time	the event_time expression evaluated on the row, else
 *					sw_write_time.
 *
 * Offsets and concurrency.  No writer waits for another: a row takes
 * an offset and tells commit_order.c which partition it went into.  When
 * the transaction commits, commit_order.c makes its offsets in each
 * partition higher than everything committed there before (renumbering
 * them if a transaction that overlapped it committed first) and records
 * when it arrived, so that processing reads each partition in offset
 * order, which is commit order, and never skips or repeats a committed row
 * however long the transaction that wrote it stayed open.
 *
 * The event_time and partition_key expressions are bound once, when the
 * stream is created, under the creator's search_path: create_stream puts
 * them into the WHEN clause of the sw_ingest trigger, in a form that is
 * always true,
 *
 *	 WHEN (true OR (<event_time>) IS NULL OR (<partition_key>) IS NULL)
 *
 * so PostgreSQL stores them as trees (pg_trigger.tgqual), records that the
 * trigger depends on the columns and functions they use (DROP COLUMN or
 * ALTER TYPE of such a column is refused, naming the trigger; a renamed
 * column is followed), pg_dump dumps them as qualified text, and the
 * planner folds the condition to true at its first argument, so the
 * executor never evaluates (or even simplifies) them there.  The trigger takes them out of tgqual and evaluates them on
 * the row itself: nobody's search_path at insert time re-resolves a name.
 * The prepared expressions are cached per backend and per stream, and
 * dropped on relcache invalidation of the stream table.
 *
 * On a Citus worker the trigger fires on the shard of a distributed
 * stream (citus.c): the row comes with its partition (chosen before
 * routing), the offset comes from this node's range of the stream's
 * sequence (sw_shard_offset, commit_order.c), and the commit writes the
 * commit log's co-located shard.
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/dependency.h"
#include "catalog/pg_type.h"
#include "commands/sequence.h"
#include "commands/trigger.h"
#include "common/hashfn.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parse_coerce.h"
#include "parser/parse_collate.h"
#include "parser/parse_expr.h"
#include "parser/parse_relation.h"
#include "parser/parser.h"
#include "rewrite/prs2lock.h"
#include "rewrite/rewriteManip.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "utils/array.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/numeric.h"
#include "utils/rel.h"
#include "utils/ruleutils.h"
#include "utils/timestamp.h"
#include "utils/typcache.h"

#include "api.h"
#include "catalog.h"
#include "citus.h"
#include "commit_order.h"
#include "guard.h"
#include "ingest.h"
#include "version.h"

PG_FUNCTION_INFO_V1(streamwm_stream_insert);
PG_FUNCTION_INFO_V1(streamwm_ingest_when);
PG_FUNCTION_INFO_V1(streamwm_ingest);
PG_FUNCTION_INFO_V1(streamwm_ingest_lines);

/*
 * What the filling needs to know about one stream, cached per backend.  A
 * state lives in its own context and is never changed once built, except
 * for the sticky partition; see ingest_state() for how one is replaced.
 */
struct IngestState
{
	bool		valid;
	bool		foreign_trigger;	/* its sw_ingest is not streamwm's: no stream */
	MemoryContext cxt;
	int			npartitions;
	int			sticky_partition;
	bool		sticky_claimed; /* ... claimed by this session (commit_order.c) */
	LocalTransactionId sticky_checked;	/* the transaction that last checked the claim */
	Oid			seqoid;
	Oid			stream;			/* the stream; for a shard, its distributed table */
	Oid			log;			/* a shard's: its commit log's shard (else InvalidOid) */
	char	   *name;			/* the stream's name, for errors (a shard's: its table's) */
	char	   *offset_mode;	/* a shard's, per partition: how offsets are taken
								 * (commit_order.c, sw_shard_offset) */
	AttrNumber	att_partition;
	AttrNumber	att_offset;
	AttrNumber	att_write_time;
	AttrNumber	att_event_time;
	ExprState  *event_expr;		/* NULL: event time is the write time */
	ExprState  *key_expr;		/* NULL: no partition_key */
	Expr	   *event_tree;		/* ... what they were built from */
	Expr	   *key_tree;
	FmgrInfo	key_hash;
	Oid			key_collation;
	ExprContext *econtext;
	TupleTableSlot *slot;
	int			evaluating;		/* evaluations of key_expr/event_expr running */
	int			tail_first;		/* the system columns are the table's last four,
								 * fixed length and by value, from this
								 * attribute (0-based) on; else -1 */
	Datum	   *batch_values;	/* ... then a batch row's values, of them only */
	bool	   *batch_nulls;
};

typedef struct IngestCacheEntry
{
	Oid			relid;			/* hash key */
	IngestState *state;			/* NULL until built */
	uint64		changes;		/* relcache invalidations of the stream seen */
} IngestCacheEntry;

static HTAB *ingest_cache = NULL;

/*
 * Rows given their system columns in this backend: ingest() inserts rows in
 * batches and uses it to say which row an error belongs to (the first row
 * not filled yet: the user's BEFORE triggers and constraints run before the
 * access method fills a row, and the filling itself may fail).
 */
static uint64 rows_filled = 0;

static int	system_tail(IngestState *st, TupleDesc desc);

static void
ingest_cache_invalidate(Datum arg, Oid relid)
{
	HASH_SEQ_STATUS status;
	IngestCacheEntry *entry;

	if (ingest_cache == NULL)
		return;
	hash_seq_init(&status, ingest_cache);
	while ((entry = hash_seq_search(&status)) != NULL)
	{
		if (relid == InvalidOid || entry->relid == relid)
		{
			entry->changes++;
			if (entry->state != NULL)
				entry->state->valid = false;
		}
	}
}

/* The cache entry of a stream, made if need be; it is never removed. */
static IngestCacheEntry *
ingest_cache_entry(Oid relid)
{
	static Oid	last_relid = InvalidOid;
	static IngestCacheEntry *last = NULL;
	IngestCacheEntry *cached;
	bool		found;

	/* a COPY's rows all ask for the same (entries are never removed) */
	if (last != NULL && relid == last_relid)
		return last;
	if (ingest_cache == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(Oid);
		ctl.entrysize = sizeof(IngestCacheEntry);
		ingest_cache = hash_create("streamwm ingest cache", 16, &ctl,
								   HASH_ELEM | HASH_BLOBS);
		CacheRegisterRelcacheCallback(ingest_cache_invalidate, (Datum) 0);
	}
	cached = hash_search(ingest_cache, &relid, HASH_ENTER, &found);
	if (!found)
	{
		cached->state = NULL;
		cached->changes = 0;
	}
	last_relid = relid;
	last = cached;
	return cached;
}

/*
 * Parse and analyze an SQL expression over the columns of rel, as the
 * user gave it to create_stream.  The text must be one expression and
 * nothing else: it is parsed as "SELECT (<text>\n)" and must come out as a
 * single SelectStmt with one target and no other clause, so it cannot end
 * the expression and smuggle in more SQL.  With want_timestamptz it must
 * return timestamptz (an untyped literal is read as one): an event time of
 * type timestamp would depend on the writer's TimeZone.  Returns the
 * analyzed, unplanned tree (Vars of rel have varno 1).
 */
Expr *
sw_row_expression(Relation rel, const char *exprtext, bool want_timestamptz)
{
	List	   *raw;
	SelectStmt *stmt;
	ResTarget  *rt;
	ParseState *pstate;
	ParseNamespaceItem *nsitem;
	Node	   *expr;
	Oid			type;
	char	   *sql = psprintf("SELECT (%s\n)", exprtext);

	raw = raw_parser(sql, RAW_PARSE_DEFAULT);
	if (list_length(raw) != 1 ||
		!IsA(((RawStmt *) linitial(raw))->stmt, SelectStmt))
		ereport(ERROR,
				(errcode(ERRCODE_SYNTAX_ERROR),
				 errmsg("invalid expression: %s", exprtext),
				 errdetail("Give a single expression over the stream's columns.")));
	stmt = (SelectStmt *) ((RawStmt *) linitial(raw))->stmt;
	if (stmt->op != SETOP_NONE || list_length(stmt->targetList) != 1 ||
		stmt->distinctClause != NIL || stmt->intoClause != NULL ||
		stmt->fromClause != NIL || stmt->whereClause != NULL ||
		stmt->groupClause != NIL || stmt->havingClause != NULL ||
		stmt->windowClause != NIL || stmt->valuesLists != NIL ||
		stmt->sortClause != NIL || stmt->limitOffset != NULL ||
		stmt->limitCount != NULL || stmt->lockingClause != NIL ||
		stmt->withClause != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_SYNTAX_ERROR),
				 errmsg("invalid expression: %s", exprtext),
				 errdetail("Give a single expression over the stream's columns.")));
	rt = linitial_node(ResTarget, stmt->targetList);
	if (rt->name != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_SYNTAX_ERROR),
				 errmsg("invalid expression: %s", exprtext),
				 errdetail("Give a single expression over the stream's columns.")));

	pstate = make_parsestate(NULL);
	nsitem = addRangeTableEntryForRelation(pstate, rel, AccessShareLock,
										   NULL, false, true);
	addNSItemToQuery(pstate, nsitem, true, true, true);
	expr = transformExpr(pstate, rt->val, EXPR_KIND_GENERATED_COLUMN);
	type = exprType(expr);
	if (want_timestamptz && type == UNKNOWNOID)
	{
		expr = coerce_to_target_type(pstate, expr, type, TIMESTAMPTZOID, -1,
									 COERCION_EXPLICIT, COERCE_EXPLICIT_CAST, -1);
		type = TIMESTAMPTZOID;
	}
	if (want_timestamptz && getBaseType(type) != TIMESTAMPTZOID)
	{
		if (getBaseType(type) == TIMESTAMPOID)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("event_time expression must return timestamptz, not %s",
							format_type_be(type)),
					 errdetail("A timestamp without time zone would be read in the TimeZone of whoever writes the row."),
					 errhint("Say which time zone it is in, for example (%s) AT TIME ZONE 'UTC'.",
							 exprtext)));
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("event_time expression must return timestamptz, not %s",
						format_type_be(type)),
				 errhint("Convert it explicitly, for example with to_timestamp().")));
	}
	assign_expr_collations(pstate, expr);
	free_parsestate(pstate);
	return (Expr *) expr;
}

static void
expression_error_context(void *arg)
{
	errcontext("in expression \"%s\"", (const char *) arg);
}

/*
 * Validate one expression given to create_stream and return it as SQL
 * text in which every column is NEW.column and every function and
 * operator is written so that it resolves to the same object under the
 * current search_path (qualified where it would not).
 */
static char *
ingest_when_part(Relation rel, const char *exprtext, bool is_event_time)
{
	ErrorContextCallback errcb;
	Expr	   *expr;
	Oid			type;
	char	   *result;

	errcb.callback = expression_error_context;
	errcb.arg = (void *) exprtext;
	errcb.previous = error_context_stack;
	error_context_stack = &errcb;

	expr = sw_row_expression(rel, exprtext, is_event_time);
	type = exprType((Node *) expr);
	if (!is_event_time)
	{
		TypeCacheEntry *tc = lookup_type_cache(type, TYPECACHE_HASH_EXTENDED_PROC);

		if (!OidIsValid(tc->hash_extended_proc))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_FUNCTION),
					 errmsg("partition_key of type %s cannot be hashed",
							format_type_be(type))));
	}
	result = deparse_expression((Node *) expr,
								deparse_context_for("new", RelationGetRelid(rel)),
								true, true);
	error_context_stack = errcb.previous;
	return result;
}

/*
 * streamwm_internal._ingest_when(rel regclass, event_time text, partition_key text)
 * RETURNS text: validates the stream's event_time and partition_key
 * expressions (NULL or '' for none) and returns the WHEN condition of its
 * sw_ingest trigger that binds them (see the file header).  Each
 * expression stands on lines of its own.
 */
Datum
streamwm_ingest_when(PG_FUNCTION_ARGS)
{
	Relation	rel;
	char	   *event_time = NULL;
	char	   *partition_key = NULL;
	StringInfoData buf;

	sw_require_extension_version();

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("stream must not be NULL")));
	if (!PG_ARGISNULL(1))
		event_time = text_to_cstring(PG_GETARG_TEXT_PP(1));
	if (!PG_ARGISNULL(2))
		partition_key = text_to_cstring(PG_GETARG_TEXT_PP(2));
	rel = try_table_open(PG_GETARG_OID(0), AccessShareLock);
	if (rel == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", PG_GETARG_OID(0))));

	initStringInfo(&buf);
	appendStringInfoString(&buf, "true OR (\n");
	if (event_time != NULL && event_time[0] != '\0')
		appendStringInfo(&buf, "%s\n", ingest_when_part(rel, event_time, true));
	else
		appendStringInfoString(&buf, "NULL::pg_catalog.timestamptz\n");
	appendStringInfoString(&buf, ") IS NULL OR (\n");
	if (partition_key != NULL && partition_key[0] != '\0')
		appendStringInfo(&buf, "%s\n", ingest_when_part(rel, partition_key, false));
	else
		appendStringInfoString(&buf, "NULL::pg_catalog.int4\n");
	appendStringInfoString(&buf, ") IS NULL");

	table_close(rel, AccessShareLock);
	PG_RETURN_TEXT_P(cstring_to_text(buf.data));
}

/* The sw_ingest trigger's WHEN clause, checked to be of the form above. */
static BoolExpr *
ingest_when_clause(Relation rel, const Trigger *trigger)
{
	BoolExpr   *qual = (BoolExpr *) stringToNode(trigger->tgqual);

	if (!IsA(qual, BoolExpr) || qual->boolop != OR_EXPR ||
		list_length(qual->args) != 3 || !IsA(linitial(qual->args), Const))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("trigger sw_ingest of stream \"%s\" has an unexpected WHEN clause",
						RelationGetRelationName(rel))));
	return qual;
}

/*
 * One expression of the sw_ingest trigger's WHEN clause, unplanned, over
 * Vars of varno 1 (the row); NULL when the stream has none.
 */
static Expr *
ingest_when_expression(Relation rel, Node *arm)
{
	Node	   *expr;

	if (arm == NULL || !IsA(arm, NullTest) ||
		((NullTest *) arm)->nulltesttype != IS_NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("trigger sw_ingest of stream \"%s\" has an unexpected WHEN clause",
						RelationGetRelationName(rel))));
	expr = (Node *) ((NullTest *) arm)->arg;
	if (IsA(expr, Const) && ((Const *) expr)->constisnull)
		return NULL;
	expr = copyObject(expr);
	ChangeVarNodes(expr, PRS2_NEW_VARNO, 1, 0);
	return (Expr *) expr;
}

/*
 * One expression of the sw_ingest trigger's WHEN clause, ready to run on
 * the row in the scan slot; NULL when the stream has none.
 */
static Expr *
ingest_bound_expression(Relation rel, Node *arm)
{
	Expr	   *expr = ingest_when_expression(rel, arm);

	return expr != NULL ? expression_planner(expr) : NULL;
}

/*
 * The partition_key of the stream table rel as its sw_ingest trigger
 * holds it, unplanned, over Vars of varno 1 (the row); NULL when the
 * stream has none.  (A distributed stream's, which Citus keeps on every
 * node with the table: citus_route.c.)
 */
Expr *
sw_ingest_partition_key(Relation rel, const Trigger *trigger)
{
	if (trigger->tgqual == NULL)
		return NULL;
	return ingest_when_expression(rel, lthird(ingest_when_clause(rel, trigger)->args));
}

/*
 * The partition of a (non-NULL) partition_key value: its type's extended
 * hash, seed 0, under the key's collation, modulo the partition count
 * (also for a distributed stream: citus_route.c).
 */
int32
sw_key_partition(FmgrInfo *hash, Oid collation, Datum key, int npartitions)
{
	return (int32) (DatumGetUInt64(FunctionCall2Coll(hash, collation, key, UInt64GetDatum(0))) %
					(uint64) npartitions);
}

/* Fill a new ingest state of a stream table: its partitions, sequence, columns, expressions. */
static void
ingest_state_build(IngestState *entry, Relation rel, Trigger *trigger)
{
	Oid			relid = RelationGetRelid(rel);
	MemoryContext old;
	List	   *seqs;
	SwStreamColumns cols;
	bool		is_stream;

	if (trigger->tgnargs != 1 && trigger->tgnargs != 2)
		elog(ERROR, "streamwm_internal._stream_insert() needs 1 or 2 trigger arguments");
	entry->npartitions = pg_strtoint32(trigger->tgargs[0]);
	if (entry->npartitions < 1)
		elog(ERROR, "invalid partition count in trigger on %s",
			 RelationGetRelationName(rel));
	/* picked at the first row that needs it (sw_pick_free_partition) */
	entry->sticky_partition = -1;
	entry->sticky_claimed = false;
	entry->sticky_checked = InvalidLocalTransactionId;
	/* only a stream's own trigger may write its commit log */
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	is_stream = sw_lookup_stream(relid, false, NULL, NULL);
	SPI_finish();
	entry->stream = relid;
	entry->log = InvalidOid;
	/*
	 * A shard of a distributed stream (citus.c): the second argument names
	 * the stream's commit log, whose co-located shard on this node the
	 * commit writes; offsets come from this node's range of the stream's
	 * sequence, ordered at commit.
	 */
	if (!is_stream && trigger->tgnargs == 2 &&
		OidIsValid(entry->stream = sw_citus_shard_owner(relid)))
	{
		entry->log = sw_citus_log_shard(relid, trigger->tgargs[1]);
		is_stream = true;
	}
	else if (!is_stream && OidIsValid(sw_citus_shard_owner(relid)))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("\"%s\" is a shard of Citus table %s: streamwm cannot ingest into a distributed stream",
						RelationGetRelationName(rel), sw_relation_name(sw_citus_shard_owner(relid))),
				 errdetail("A stream's partition and offset are assigned on the node that holds the stream; "
						   "Citus routed this row to a shard first."),
				 errhint("Drop the stream with streamwm.drop_stream() on the coordinator and create it again with streamwm.create_stream(..., distributed => true).")));
	if (!is_stream)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a stream", RelationGetRelationName(rel)),
				 errdetail("streamwm_internal._stream_insert() runs only on the stream tables streamwm.create_stream() makes.")));

	entry->name = MemoryContextStrdup(entry->cxt, get_rel_name(entry->stream));
	entry->offset_mode = OidIsValid(entry->log) ?
		MemoryContextAllocZero(entry->cxt, entry->npartitions) : NULL;
	seqs = getOwnedSequences(entry->stream);
	if (list_length(seqs) != 1)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("stream table %s has no offset sequence",
						RelationGetRelationName(rel))));
	entry->seqoid = linitial_oid(seqs);

	/* every Datum of a system column we read or write has its type */
	sw_check_stream_columns(rel, &cols);
	entry->att_partition = cols.partition;
	entry->att_offset = cols.offset;
	entry->att_write_time = cols.write_time;
	entry->att_event_time = cols.event_time;
	entry->tail_first = system_tail(entry, RelationGetDescr(rel));
	if (entry->tail_first >= 0)
	{
		entry->batch_values = MemoryContextAllocZero(entry->cxt,
													 RelationGetDescr(rel)->natts * sizeof(Datum));
		entry->batch_nulls = MemoryContextAllocZero(entry->cxt,
													RelationGetDescr(rel)->natts * sizeof(bool));
	}

	old = MemoryContextSwitchTo(entry->cxt);
	entry->event_expr = NULL;
	entry->key_expr = NULL;
	if (trigger->tgqual != NULL)
	{
		BoolExpr   *qual = ingest_when_clause(rel, trigger);
		Expr	   *event;
		Expr	   *key;

		event = ingest_bound_expression(rel, lsecond(qual->args));
		key = ingest_bound_expression(rel, lthird(qual->args));
		if (event != NULL)
		{
			if (getBaseType(exprType((Node *) event)) != TIMESTAMPTZOID)
				ereport(ERROR,
						(errcode(ERRCODE_DATATYPE_MISMATCH),
						 errmsg("event_time expression of stream \"%s\" returns %s, not timestamptz",
								RelationGetRelationName(rel),
								format_type_be(exprType((Node *) event)))));
			entry->event_expr = ExecInitExpr(event, NULL);
			entry->event_tree = event;
		}
		if (key != NULL)
		{
			TypeCacheEntry *tc = lookup_type_cache(exprType((Node *) key),
												   TYPECACHE_HASH_EXTENDED_PROC_FINFO);

			if (!OidIsValid(tc->hash_extended_proc))
				ereport(ERROR,
						(errcode(ERRCODE_UNDEFINED_FUNCTION),
						 errmsg("partition_key of type %s cannot be hashed",
								format_type_be(exprType((Node *) key)))));
			fmgr_info_cxt(tc->hash_extended_proc, &entry->key_hash, entry->cxt);
			entry->key_collation = exprCollation((Node *) key);
			entry->key_expr = ExecInitExpr(key, NULL);
			entry->key_tree = key;
		}
	}
	entry->econtext = CreateStandaloneExprContext();
	entry->slot = MakeSingleTupleTableSlot(CreateTupleDescCopy(RelationGetDescr(rel)),
										   &TTSOpsVirtual);
	MemoryContextSwitchTo(old);
}

/* A copy of a trigger's description, in the current memory context. */
Trigger *
sw_copy_trigger(const Trigger *trigger)
{
	Trigger    *copy = palloc(sizeof(Trigger));

	memcpy(copy, trigger, sizeof(Trigger));
	copy->tgname = pstrdup(trigger->tgname);
	if (trigger->tgnargs > 0)
	{
		copy->tgargs = palloc(trigger->tgnargs * sizeof(char *));
		for (int i = 0; i < trigger->tgnargs; i++)
			copy->tgargs[i] = pstrdup(trigger->tgargs[i]);
	}
	copy->tgattr = NULL;
	copy->tgnattr = 0;
	copy->tgqual = trigger->tgqual ? pstrdup(trigger->tgqual) : NULL;
	copy->tgoldtable = NULL;
	copy->tgnewtable = NULL;
	return copy;
}

/*
 * Build (or find) the cached ingest state of a stream table.
 *
 * A state may be invalidated while a fill uses it: the partition_key or
 * event_time expression may run a function that changes the stream (a GRANT
 * is enough) and inserts into it, which builds a new state under the outer
 * fill.  So a state is built whole in a context of its own and swapped in at
 * the end, and the state it replaces is not freed but handed to the
 * transaction, whose end frees it: no fill outlives its transaction.
 */
static IngestState *
ingest_state(Relation rel, Trigger *trigger)
{
	Oid			relid = RelationGetRelid(rel);
	IngestCacheEntry *cached;
	IngestState *entry;
	MemoryContext cxt;
	bool		found;

	cached = ingest_cache_entry(relid);
	if (cached->state != NULL && cached->state->valid)
		return cached->state;

	/*
	 * The trigger may be the relcache's (sw_ingest_fill_slot), which the
	 * first catalog access below may free: a relcache entry rebuilt on an
	 * invalidation (autovacuum's statistics are enough) gets a new trigger
	 * description.  Nothing above reads the catalogs.
	 */
	trigger = sw_copy_trigger(trigger);

	/* under the caller's context until complete: an error frees it */
	cxt = AllocSetContextCreate(CurrentMemoryContext, "streamwm ingest",
								ALLOCSET_SMALL_SIZES);
	entry = MemoryContextAllocZero(cxt, sizeof(IngestState));
	entry->cxt = cxt;

	/*
	 * A trigger of that name on a table of the access method that is no
	 * stream: the table is the heap (sw_ingest_fill_slot).
	 */
	entry->foreign_trigger = !sw_is_ingest_function(trigger->tgfoid);
	if (!entry->foreign_trigger)
		ingest_state_build(entry, rel, trigger);
	entry->valid = true;

	/* the entry may have been rebuilt meanwhile, by a nested fill */
	cached = hash_search(ingest_cache, &relid, HASH_FIND, &found);
	Assert(found);
	if (cached->state != NULL)
		MemoryContextSetParent(cached->state->cxt, TopTransactionContext);
	MemoryContextSetParent(cxt, CacheMemoryContext);
	cached->state = entry;
	return entry;
}

/*
 * Evaluate a cached expression on a row; the result lives until the next row.
 *
 * The expression may call a function that inserts into the same stream,
 * whose fill evaluates it again while this evaluation runs.  An ExprState
 * is not reentrant (its steps keep intermediate values, and the functions
 * it calls their per-call caches, in it): a nested evaluation builds the
 * expression again, with an expression context and slot of its own, in the
 * memory of the statement that runs it, and leaves the outer one's alone.
 */
static Datum
eval_on_row(IngestState *st, ExprState *expr, Expr *tree, Datum *values,
			bool *nulls, bool *isnull)
{
	ExprContext *econtext = st->econtext;
	TupleTableSlot *slot = st->slot;
	int			natts = slot->tts_tupleDescriptor->natts;
	Datum		result;

	if (st->evaluating > 0)
	{
		expr = ExecInitExpr(copyObject(tree), NULL);
		econtext = CreateStandaloneExprContext();
		slot = MakeSingleTupleTableSlot(st->slot->tts_tupleDescriptor,
										&TTSOpsVirtual);
	}
	else
		ResetExprContext(econtext);
	ExecClearTuple(slot);
	memcpy(slot->tts_values, values, natts * sizeof(Datum));
	memcpy(slot->tts_isnull, nulls, natts * sizeof(bool));
	ExecStoreVirtualTuple(slot);
	econtext->ecxt_scantuple = slot;
	st->evaluating++;
	PG_TRY();
	{
		result = ExecEvalExprSwitchContext(expr, econtext, isnull);
	}
	PG_FINALLY();
	{
		st->evaluating--;
	}
	PG_END_TRY();
	return result;
}

/*
 * Fill the system columns of one row of a stream table (values and nulls
 * hold every attribute), as SPEC section 3 says, or fail with the error of
 * bad input:
 *
 *	 sw_partition	the explicit one; else the hash of partition_key; else the
 *					session's sticky partition;
 *	 sw_offset		from the stream's sequence, a chunk at a time (commit_order.c;
 *					a user never gives one);
 *	 sw_write_time	the explicit one, else the clock;
 *	 sw_event_time	the event_time expression on the row, else sw_write_time
 *					(a user never gives one).
 *
 * The offset is noted for the commit (commit_order.c).
 */
static void
ingest_fill(IngestState *st, Relation rel, Datum *values, bool *nulls)
{
	int			partition;
	bool		assigned;
	bool		isnull;
	Datum		d;
	int64		offset;
	AttrNumber	ap = st->att_partition - 1;
	AttrNumber	ao = st->att_offset - 1;
	AttrNumber	aw = st->att_write_time - 1;
	AttrNumber	ae = st->att_event_time - 1;

	/* A user never sets sw_offset. */
	if (!nulls[ao])
		ereport(ERROR,
				(errcode(ERRCODE_GENERATED_ALWAYS),
				 errmsg("cannot insert a value into column \"sw_offset\" of stream %s",
						st->name),
				 errdetail("Offsets are assigned by streamwm.")));

	/* ... nor sw_event_time (set sw_write_time or define event_time) */
	if (!nulls[ae])
		ereport(ERROR,
				(errcode(ERRCODE_GENERATED_ALWAYS),
				 errmsg("cannot insert a value into column \"sw_event_time\" of stream %s",
						st->name),
				 errdetail("The event time is the stream's event_time expression evaluated on the row, or else sw_write_time."),
				 errhint("Set sw_write_time, or define event_time when creating the stream.")));

	/*
	 * The server's write time is read once the transaction holds the
	 * partition (below); a partition_key, which may hash sw_write_time,
	 * sees an earlier reading.
	 */
	assigned = nulls[aw];
	if (!assigned && TIMESTAMP_NOT_FINITE(DatumGetTimestampTz(values[aw])))
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("sw_write_time must be finite")));
	if (assigned && st->key_expr != NULL)
	{
		values[aw] = TimestampTzGetDatum(GetCurrentTimestamp());
		nulls[aw] = false;
	}

	if (!nulls[ap])
	{
		partition = DatumGetInt32(values[ap]);
		if (partition < 0 || partition >= st->npartitions)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("partition %d is out of range for stream %s",
							partition, st->name),
					 errdetail_plural("The stream has %d partition, numbered 0 to %d.",
									  "The stream has %d partitions, numbered 0 to %d.",
									  st->npartitions,
									  st->npartitions, st->npartitions - 1)));
	}
	else if (st->key_expr != NULL)
	{
		d = eval_on_row(st, st->key_expr, st->key_tree, values, nulls, &isnull);
		if (isnull)
			partition = 0;
		else
			partition = sw_key_partition(&st->key_hash, st->key_collation, d, st->npartitions);
	}
	else
	{
		/* once a transaction: is the claim still ours (DISCARD ALL)? */
		if (st->sticky_partition >= 0 && st->sticky_claimed &&
			st->sticky_checked != MyProc->lxid)
		{
			if (!sw_partition_claimed(RelationGetRelid(rel), st->sticky_partition))
				st->sticky_partition = -1;
			st->sticky_checked = MyProc->lxid;
		}
		if (st->sticky_partition < 0)
		{
			st->sticky_partition =
				sw_pick_free_partition(RelationGetRelid(rel), st->npartitions,
									   (int) (hash_combine(murmurhash32((uint32) MyProcPid),
														   murmurhash32(RelationGetRelid(rel))) %
											  (uint32) st->npartitions),
									   &st->sticky_claimed);
			st->sticky_checked = MyProc->lxid;
		}
		partition = st->sticky_partition;
	}
	values[ap] = Int32GetDatum(partition);
	nulls[ap] = false;

	if (OidIsValid(st->log))
		offset = sw_shard_offset(st->seqoid, st->log, partition, &st->offset_mode[partition]);
	else
		offset = sw_take_offset(st->seqoid);
	sw_commit_order_note(st->stream, RelationGetRelid(rel), st->log, st->seqoid, partition, offset);
	values[ao] = Int64GetDatum(offset);
	nulls[ao] = false;

	/*
	 * The server's write time, now that the transaction holds the
	 * partition: a step that did not see the hold read its clock before
	 * this, so its heartbeat (SPEC section 10) cannot pass this row.  (A
	 * partition_key over sw_write_time hashed an earlier reading.)
	 */
	if (assigned)
	{
		values[aw] = TimestampTzGetDatum(GetCurrentTimestamp());
		nulls[aw] = false;
	}

	if (st->event_expr != NULL)
	{
		d = eval_on_row(st, st->event_expr, st->event_tree, values, nulls, &isnull);
		if (isnull)
			ereport(ERROR,
					(errcode(ERRCODE_NOT_NULL_VIOLATION),
					 errmsg("event time of a row of stream %s is NULL",
							st->name),
					 errdetail("The event_time expression returned NULL.")));
		if (TIMESTAMP_NOT_FINITE(DatumGetTimestampTz(d)))
			ereport(ERROR,
					(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
					 errmsg("event time of a row of stream %s is not finite",
							st->name)));
		values[ae] = d;
	}
	else
		values[ae] = values[aw];
	nulls[ae] = false;
}

/*
 * The sw_ingest row trigger.  On a Citus shard of a distributed stream it
 * is a BEFORE INSERT trigger and fills the row.  On a local stream it is a
 * BEFORE UPDATE trigger that only binds the expressions: the table access
 * method fills the rows (sw_ingest_fill_slot), and an UPDATE is refused by
 * the sw_no_update statement trigger before any row trigger fires (and here,
 * should that one be disabled).  commit_order.c's renumbering is no UPDATE
 * statement: heap updates, which fire no trigger.
 */
Datum
streamwm_stream_insert(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	Relation	rel;
	HeapTuple	tuple;
	IngestState *st;
	TupleDesc	tupdesc;
	int			natts;
	Datum	   *values;
	bool	   *nulls;
	bool	   *replace;

	sw_require_extension_version();

	if (!CALLED_AS_TRIGGER(fcinfo) ||
		!TRIGGER_FIRED_BEFORE(trigdata->tg_event) ||
		!TRIGGER_FIRED_FOR_ROW(trigdata->tg_event) ||
		!(TRIGGER_FIRED_BY_INSERT(trigdata->tg_event) ||
		  TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event)))
		elog(ERROR, "streamwm_internal._stream_insert() must be a BEFORE INSERT or UPDATE row trigger");

	rel = trigdata->tg_relation;
	if (TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event))
	{
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot update stream \"%s\"", RelationGetRelationName(rel)),
				 errdetail("A stream is an append-only log.")));
	}
	tuple = trigdata->tg_trigtuple;
	tupdesc = RelationGetDescr(rel);
	st = ingest_state(rel, trigdata->tg_trigger);

	natts = tupdesc->natts;
	values = palloc(natts * sizeof(Datum));
	nulls = palloc(natts * sizeof(bool));
	replace = palloc0(natts * sizeof(bool));
	heap_deform_tuple(tuple, tupdesc, values, nulls);
	ingest_fill(st, rel, values, nulls);
	rows_filled++;
	replace[st->att_partition - 1] = true;
	replace[st->att_offset - 1] = true;
	replace[st->att_write_time - 1] = true;
	replace[st->att_event_time - 1] = true;
	return PointerGetDatum(heap_modify_tuple(tuple, tupdesc, values, nulls, replace));
}

/*
 * Is this the name of a stream's sw_ingest trigger?  Also on a Citus shard
 * of a local stream that Citus was made to distribute behind streamwm's back
 * (citus.c, "the refusals"): the shard <table>_<shardid> has the stream's
 * access method and Citus names its copy of the trigger sw_ingest_<shardid>.
 * That shard's rows must reach ingest_state(), which refuses them, rather
 * than be stored as given, unfilled.
 */
static bool
is_ingest_trigger_name(Relation rel, const char *tgname)
{
	const char *relname;
	const char *suffix;
	size_t		rlen;
	size_t		slen;

	if (strcmp(tgname, "sw_ingest") == 0)
		return true;
	if (strncmp(tgname, "sw_ingest_", 10) != 0)
		return false;
	suffix = tgname + 9;		/* "_<shardid>" */
	slen = strlen(suffix);
	if (slen < 2 || strspn(suffix + 1, "0123456789") != slen - 1)
		return false;
	relname = RelationGetRelationName(rel);
	rlen = strlen(relname);
	return rlen > slen && strcmp(relname + rlen - slen, suffix) == 0;
}

/*
 * The stream's sw_ingest trigger in the relcache's description of it, or
 * NULL.  Looked up for every row: the place found last is tried first (a
 * COPY's rows all find it there), by its name as every other place is.
 */
static Trigger *
find_ingest_trigger(Relation rel)
{
	static Oid	last_relid = InvalidOid;
	static int	last_index = -1;
	TriggerDesc *td = rel->trigdesc;

	if (td == NULL)
		return NULL;
	if (last_relid == RelationGetRelid(rel) && last_index < td->numtriggers &&
		is_ingest_trigger_name(rel, td->triggers[last_index].tgname))
		return &td->triggers[last_index];
	for (int i = 0; i < td->numtriggers; i++)
		if (is_ingest_trigger_name(rel, td->triggers[i].tgname))
		{
			last_relid = RelationGetRelid(rel);
			last_index = i;
			return &td->triggers[i];
		}
	return NULL;
}

/* The attribute numbers of a stream's four system columns. */
static void
system_atts(IngestState *st, AttrNumber atts[4])
{
	atts[0] = st->att_partition;
	atts[1] = st->att_offset;
	atts[2] = st->att_write_time;
	atts[3] = st->att_event_time;
}

/*
 * Does the slot hold its row as arrays of values that may be changed in
 * place (a virtual slot, or a heap slot not holding a formed tuple)?
 */
static bool
slot_holds_values(TupleTableSlot *slot)
{
	return TTS_IS_VIRTUAL(slot) ||
		((TTS_IS_HEAPTUPLE(slot) || TTS_IS_BUFFERTUPLE(slot)) &&
		 ((HeapTupleTableSlot *) slot)->tuple == NULL);
}

typedef struct SlotValues
{
	Datum	   *values;
	bool	   *nulls;
} SlotValues;

/* A changeable copy of the values of a slot that holds a formed tuple. */
static SlotValues
slot_values_copy(TupleTableSlot *slot)
{
	int			natts = slot->tts_tupleDescriptor->natts;
	SlotValues	v;

	v.values = palloc(natts * sizeof(Datum));
	v.nulls = palloc(natts * sizeof(bool));
	memcpy(v.values, slot->tts_values, natts * sizeof(Datum));
	memcpy(v.nulls, slot->tts_isnull, natts * sizeof(bool));
	return v;
}

/*
 * Where the bytes of the attributes before 'first_tail' end in the data of
 * a formed tuple, and whether any of them is null.
 */
static Size
head_end(TupleDesc desc, HeapTupleHeader hdr, int first_tail, bool *head_null)
{
	char	   *data = (char *) hdr + hdr->t_hoff;
	bool		hasnulls = (hdr->t_infomask & HEAP_HASNULL) != 0;
	Size		end = 0;

	*head_null = false;
	for (int i = 0; i < first_tail; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (hasnulls && att_isnull(i, hdr->t_bits))
		{
			*head_null = true;
			continue;
		}
		if (att->attlen == -1)
			end = att_align_pointer(end, att->attalign, -1, data + end);
		else
			end = att_align_nominal(end, att->attalign);
		end = att_addlength_pointer(end, att->attlen, data + end);
	}
	return end;
}

/*
 * Store a tuple formed in the slot's memory into it.  ExecForceStoreHeapTuple()
 * copies a tuple into a buffer slot (COPY's) once more, and nothing else can
 * store one there: what it does for such a slot, but the copy.
 */
static void
store_formed(TupleTableSlot *slot, HeapTuple tuple)
{
	Oid			tableoid = slot->tts_tableOid;

	if (TTS_IS_BUFFERTUPLE(slot))
	{
		ExecClearTuple(slot);
		slot->tts_flags &= ~TTS_FLAG_EMPTY;
		((BufferHeapTupleTableSlot *) slot)->base.tuple = tuple;
		slot->tts_flags |= TTS_FLAG_SHOULDFREE;
	}
	else
		ExecForceStoreHeapTuple(tuple, slot, true);
	slot->tts_tableOid = tableoid;
}

/*
 * Give the formed tuple the slot holds the values of its last attributes
 * from 'first_tail' on (values[], indexed by attribute: not null, fixed
 * length and passed by value), its other attributes' bytes (up to
 * head_end(), 'head_null' if one of them is null) left as they are, not
 * formed again from their values.  A stream's system columns come last in
 * the table as create_stream makes it, and a COPY hands the access method
 * formed tuples (it materializes each row to batch it): forming each row a
 * second time after filling it was a tenth of the COPY, and copying its
 * bytes into a new tuple 2% (issue 9).  A tuple the slot owns is grown
 * where it is (repalloc(): the allocation of a COPY row with its system
 * columns NULL mostly has room for them); another is copied first.
 */
static void
fill_tail(TupleTableSlot *slot, int first_tail, const Datum *values,
		  Size user_end, bool head_null)
{
	TupleDesc	desc = slot->tts_tupleDescriptor;
	HeapTuple	tuple = ((HeapTupleTableSlot *) slot)->tuple;
	HeapTupleHeader td;
	uint8		oldhoff;
	Size		data_len = user_end;
	Size		hoff;
#ifdef USE_ASSERT_CHECKING
	/* what forming the row from its values makes (before the bytes move) */
	Datum	   *all = palloc(desc->natts * sizeof(Datum));
	bool	   *allnulls = palloc(desc->natts * sizeof(bool));
	HeapTuple	formed;

	heap_deform_tuple(tuple, desc, all, allnulls);
	for (int i = first_tail; i < desc->natts; i++)
	{
		all[i] = values[i];
		allnulls[i] = false;
	}
	formed = heap_form_tuple(desc, all, allnulls);
	pfree(all);
	pfree(allnulls);
#endif

	if (TTS_SHOULDFREE(slot) &&
		tuple->t_data == (HeapTupleHeader) ((char *) tuple + HEAPTUPLESIZE))
		slot->tts_flags &= ~TTS_FLAG_SHOULDFREE;	/* taken: not freed below */
	else
	{
		MemoryContext old = MemoryContextSwitchTo(slot->tts_mcxt);

		tuple = heap_copytuple(tuple);
		MemoryContextSwitchTo(old);
	}
	ExecClearTuple(slot);

	for (int i = first_tail; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		data_len = att_align_nominal(data_len, att->attalign) + att->attlen;
	}
	hoff = offsetof(HeapTupleHeaderData, t_bits);
	if (head_null)
		hoff += BITMAPLEN(desc->natts);
	hoff = MAXALIGN(hoff);

	/*
	 * A null among the head's attributes was one in the tuple too, so its
	 * header is at least as long: the head's bytes stay or move down.
	 */
	oldhoff = tuple->t_data->t_hoff;
	Assert(hoff <= oldhoff);
	tuple = repalloc(tuple, HEAPTUPLESIZE + Max(hoff + data_len, oldhoff + user_end));
	tuple->t_data = td = (HeapTupleHeader) ((char *) tuple + HEAPTUPLESIZE);
	if (hoff != oldhoff)
		memmove((char *) td + hoff, (char *) td + oldhoff, user_end);
	td->t_hoff = hoff;
	/* what the attributes' bytes say of themselves: the tail adds nothing */
	td->t_infomask = (td->t_infomask & (HEAP_HASVARWIDTH | HEAP_HASEXTERNAL)) |
		(head_null ? HEAP_HASNULL : 0);
	if (head_null)
	{
		for (int i = first_tail; i < desc->natts; i++)
			td->t_bits[i >> 3] |= (1 << (i & 0x07));
	}
	else
		memset((char *) td + offsetof(HeapTupleHeaderData, t_bits), 0,
			   hoff - offsetof(HeapTupleHeaderData, t_bits));
	data_len = user_end;
	for (int i = first_tail; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		Size		aligned = att_align_nominal(data_len, att->attalign);

		memset((char *) td + hoff + data_len, 0, aligned - data_len);
		store_att_byval((char *) td + hoff + aligned, values[i], att->attlen);
		data_len = aligned + att->attlen;
	}
	tuple->t_len = hoff + data_len;
	HeapTupleHeaderSetDatumLength(td, tuple->t_len);
#ifdef USE_ASSERT_CHECKING
	Assert(formed->t_len == tuple->t_len &&
		   memcmp((char *) formed->t_data + offsetof(HeapTupleHeaderData, t_infomask2),
				  (char *) td + offsetof(HeapTupleHeaderData, t_infomask2),
				  tuple->t_len - offsetof(HeapTupleHeaderData, t_infomask2)) == 0);
	heap_freetuple(formed);
#endif
	store_formed(slot, tuple);
}

/*
 * The first of the table's attributes from which on all are a stream's
 * system columns, fixed length and passed by value (the layout
 * create_stream makes: they are the last four), or -1.
 */
static int
system_tail(IngestState *st, TupleDesc desc)
{
	AttrNumber	atts[4];
	int			first = desc->natts;

	system_atts(st, atts);
	for (int i = 0; i < 4; i++)
		if (atts[i] - 1 < first)
			first = atts[i] - 1;
	if (first != desc->natts - 4)
		return -1;
	for (int i = first; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (!att->attbyval || att->attlen <= 0)
			return -1;
	}
	return first;
}

/*
 * The formed tuple a heap slot holds, if it has every attribute of the
 * slot's descriptor and the stream's system columns are its tail; else NULL.
 */
static HeapTuple
tail_tuple(IngestState *st, TupleTableSlot *slot)
{
	HeapTuple	tuple;

	if (st->tail_first < 0 || slot->tts_tupleDescriptor->natts != st->tail_first + 4 ||
		(!TTS_IS_BUFFERTUPLE(slot) && !TTS_IS_HEAPTUPLE(slot)))
		return NULL;
	tuple = ((HeapTupleTableSlot *) slot)->tuple;
	if (tuple == NULL ||
		HeapTupleHeaderGetNatts(tuple->t_data) != slot->tts_tupleDescriptor->natts)
		return NULL;
	return tuple;
}

/*
 * ... stored back into the slot as a new tuple, the copy freed.  With a
 * stream state, the tuple's values were changed only by filling its
 * system columns.
 */
static void
slot_values_store(TupleTableSlot *slot, SlotValues v, IngestState *st)
{
	if (st != NULL && tail_tuple(st, slot) != NULL)
	{
		bool		head_null;
		Size		user_end = head_end(slot->tts_tupleDescriptor,
										((HeapTupleTableSlot *) slot)->tuple->t_data,
										st->tail_first, &head_null);

		fill_tail(slot, st->tail_first, v.values, user_end, head_null);
	}
	else
		store_formed(slot, heap_form_tuple(slot->tts_tupleDescriptor, v.values, v.nulls));
	pfree(v.values);
	pfree(v.nulls);
}

/*
 * The stream state that fills the rows of 'rel', or NULL when they are not
 * filled (no stream, or its trigger disabled; *as_given: stored as given
 * under session_replication_role, each row checked by the caller).
 */
static IngestState *
fill_state(Relation rel, bool *as_given)
{
	IngestState *st;
	Trigger    *trigger;
	char		tgenabled;

	*as_given = false;

	/*
	 * Only a stream's rows are filled: a table rewrite (ALTER TABLE ... TYPE)
	 * copies rows that have their values into a new table of the same access
	 * method, which has no trigger.
	 */
	trigger = find_ingest_trigger(rel);
	if (trigger == NULL)
		return NULL;
	tgenabled = trigger->tgenabled;

	/*
	 * ... and only when the trigger would fire on INSERT: as the insert
	 * trigger of 0.1 did, rows are stored as given under
	 * session_replication_role = replica (a logical replication apply worker,
	 * pg_restore --disable-triggers).
	 */
	if (tgenabled == TRIGGER_DISABLED)
		return NULL;

	/*
	 * The relcache's trigger description is gone once anything read the
	 * catalogs and accepted an invalidation of the relation (autovacuum's
	 * statistics are enough): found again after the version check reads
	 * them (not once its answer is known), and ingest_state() copies it
	 * before it reads the catalogs.
	 */
	if (unlikely(!sw_version_ok))
	{
		sw_require_extension_version();
		trigger = find_ingest_trigger(rel);
		if (trigger == NULL)
			return NULL;
	}
	st = ingest_state(rel, trigger);
	if (st->foreign_trigger)
		return NULL;
	*as_given = SessionReplicationRole == SESSION_REPLICATION_ROLE_REPLICA ?
		tgenabled == TRIGGER_FIRES_ON_ORIGIN :
		tgenabled == TRIGGER_FIRES_ON_REPLICA;
	return st;
}

/*
 * Are the rows of 'rel' a stream's, filled or stored as given (as
 * sw_ingest_fill_slot() would take them)?
 */
bool
sw_ingest_stream_rows(Relation rel)
{
	bool		as_given;

	return fill_state(rel, &as_given) != NULL;
}

/* Fill the row in 'slot' with state 'st' (fill_state()'s, not as given). */
static void
fill_with(IngestState *st, Relation rel, TupleTableSlot *slot)
{
	if (slot_holds_values(slot))
		ingest_fill(st, rel, slot->tts_values, slot->tts_isnull);
	else
	{
		SlotValues	v = slot_values_copy(slot);

		ingest_fill(st, rel, v.values, v.nulls);
		slot_values_store(slot, v, st);
	}
	/* counted once filled: the user's BEFORE triggers and constraints ran first */
	rows_filled++;
}

/* The system columns that are NULL in nulls[] (indexed by attribute): those filling fills. */
static void
null_system_atts(IngestState *st, const bool *nulls, SwFilled *filled)
{
	AttrNumber	atts[4];

	system_atts(st, atts);
	filled->natts = 0;
	for (int i = 0; i < 4; i++)
		if (nulls[atts[i] - 1])
			filled->atts[filled->natts++] = atts[i];
}

/*
 * Fill a row whose system columns are the tail of the formed tuple 'old'
 * that the slot holds (tail_tuple()), with a state whose filling runs no
 * expression: filling then reads and sets only the system columns, so the
 * others are not deformed, nor their values copied, and the tuple keeps
 * their bytes (fill_tail(); deforming and copying them was 3% of a COPY,
 * issue 9).  'filled', if not NULL, gets the system columns that were NULL.
 */
static void
fill_from_tail(IngestState *st, Relation rel, TupleTableSlot *slot, HeapTuple old,
			   SwFilled *filled)
{
	TupleDesc	desc = slot->tts_tupleDescriptor;
	HeapTupleHeader hdr = old->t_data;
	char	   *data = (char *) hdr + hdr->t_hoff;
	bool		head_null;
	Size		user_end = head_end(desc, hdr, st->tail_first, &head_null);
	Size		off = user_end;

	Assert(st->event_expr == NULL && st->key_expr == NULL);
	for (int i = st->tail_first; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		st->batch_values[i] = (Datum) 0;
		st->batch_nulls[i] = HeapTupleHasNulls(old) && att_isnull(i, hdr->t_bits);
		if (st->batch_nulls[i])
			continue;
		off = att_align_nominal(off, att->attalign);
		st->batch_values[i] = fetch_att(data + off, true, att->attlen);
		off += att->attlen;
	}
	if (filled != NULL)
		null_system_atts(st, st->batch_nulls, filled);
	ingest_fill(st, rel, st->batch_values, st->batch_nulls);
	fill_tail(slot, st->tail_first, st->batch_values, user_end, head_null);
	/* counted once filled, as fill_with() counts */
	rows_filled++;
}

/*
 * Fill the system columns of a row about to be inserted into a local stream
 * (its table access method, stream_am.c, calls this for every row, after
 * the executor checked the constraints and before the heap gets the row).
 * A slot that holds its values as an array (COPY's, a projection's) is
 * filled in place; one that holds a formed tuple gets its system columns
 * appended (fill_from_tail(), where no expression runs) or is formed
 * again.  SW_FILL_NONE (and nothing done) for a table of that access method
 * that is no stream, SW_FILL_AS_GIVEN for a stream's row stored as given
 * (checked), SW_FILL_FILLED for a row filled.
 */
SwFill
sw_ingest_fill_slot(Relation rel, TupleTableSlot *slot, SwFilled *filled)
{
	bool		as_given;
	IngestState *st = fill_state(rel, &as_given);
	HeapTuple	old;

	if (st == NULL)
		return SW_FILL_NONE;
	if (!as_given && st->event_expr == NULL && st->key_expr == NULL &&
		(old = tail_tuple(st, slot)) != NULL)
	{
		fill_from_tail(st, rel, slot, old, filled);
		return SW_FILL_FILLED;
	}
	slot_getallattrs(slot);
	if (as_given)
	{
		/* stored as given, but never without what a step reads it by */
		AttrNumber	atts[4];

		system_atts(st, atts);
		for (int i = 0; i < 4; i++)
			if (slot->tts_isnull[atts[i] - 1])
				ereport(ERROR,
						(errcode(ERRCODE_NOT_NULL_VIOLATION),
						 errmsg("null value in column \"%s\" of stream %s stored as given",
								NameStr(TupleDescAttr(slot->tts_tupleDescriptor, atts[i] - 1)->attname),
								st->name),
						 errdetail("Under session_replication_role = replica a stream's rows are stored "
								   "with the partition, offset and times they have.")));
		return SW_FILL_AS_GIVEN;
	}
	if (filled != NULL)
		null_system_atts(st, slot->tts_isnull, filled);
	fill_with(st, rel, slot);
	return SW_FILL_FILLED;
}

/*
 * The state that fills every row of a batch of 'rel' (COPY's) alike, or
 * NULL: rows are then filled one by one (sw_ingest_fill_slot).  Only when
 * filling runs no user code (no event_time or partition_key expression)
 * and rows are filled, not stored as given: nothing can then change
 * between the rows, and what is looked up for each of them (the trigger,
 * the state) is looked up once (2% of a COPY).
 */
IngestState *
sw_ingest_batch_state(Relation rel)
{
	bool		as_given;
	IngestState *st = fill_state(rel, &as_given);

	if (st == NULL || as_given || st->event_expr != NULL || st->key_expr != NULL)
		return NULL;
	return st;
}

/* Fill one row of such a batch. */
void
sw_ingest_fill_batch_row(IngestState *st, Relation rel, TupleTableSlot *slot)
{
	HeapTuple	old = tail_tuple(st, slot);

	if (old != NULL)
		fill_from_tail(st, rel, slot, old, NULL);
	else
	{
		slot_getallattrs(slot);
		fill_with(st, rel, slot);
	}
}

/*
 * Empty again the system columns that sw_ingest_fill_slot() filled in a
 * slot: a speculative insertion (INSERT ... ON CONFLICT) that met a
 * conflicting row being inserted meanwhile inserts the same slot again,
 * once that row is gone, and then it is filled anew.  The offset taken is
 * left unused, as an aborted insert leaves it.
 */
void
sw_ingest_unfill_slot(TupleTableSlot *slot, const SwFilled *filled)
{
	SlotValues	v;

	slot_getallattrs(slot);
	if (slot_holds_values(slot))
	{
		for (int i = 0; i < filled->natts; i++)
			slot->tts_isnull[filled->atts[i] - 1] = true;
		return;
	}
	v = slot_values_copy(slot);
	for (int i = 0; i < filled->natts; i++)
		v.nulls[filled->atts[i] - 1] = true;
	slot_values_store(slot, v, NULL);
}

/* ---------------------------------------------------------------------
 * streamwm.ingest() and streamwm.ingest_lines()
 * ---------------------------------------------------------------------
 */

/* rows inserted by one statement of ingest() / ingest_lines() */
#define SW_INGEST_BATCH 1000

/*
 * One INSERT statement shape: the set of columns a JSON object gives.
 * Consecutive rows of one shape are inserted together, as arrays unnested
 * into one INSERT ... SELECT, unless a column's type has no array type or is
 * composite (unnest would expand it); then row by row.
 */
typedef struct InsertShape
{
	Bitmapset  *columns;		/* attnums given, plus the system ones */
	SPIPlanPtr	plan;
	int		   *attnums;		/* parameter i is column attnums[i] */
	int			nparams;
	bool		batched;
	/* the pending batch, when batched */
	int			nrows;
	int		   *rownos;			/* row (or line) number of each */
	Datum	  **values;			/* [param][row] */
	bool	  **nulls;
	int16	   *elmlen;
	bool	   *elmbyval;
	char	   *elmalign;
	Oid		   *elmtype;
} InsertShape;

typedef struct IngestCall
{
	Relation	rel;
	IngestCacheEntry *cache;	/* the stream's: counts its changes */
	uint64		changes_seen;	/* cache->changes when the shapes were made */
	MemoryContext cxt;			/* of the call: keys, functions */
	MemoryContext shapecxt;		/* the shapes */
	MemoryContext rowcxt;		/* rows not inserted yet: JSON and values */
	int			natts;
	int			rows_in_cxt;
	bool		lines;			/* ingest_lines(): rowno is a line number */
	int			rowno;			/* 1-based; 0 while no row is at hand */
	const char *column;			/* column being converted, or NULL */
	AttrNumber	att_partition;	/* sw_partition and sw_write_time */
	AttrNumber	att_write_time;
	bool		have_partition;
	int32		partition;
	bool		have_write_time;
	TimestampTz write_time;
	List	   *shapes;
	InsertShape *pending;		/* shape with rows waiting, or NULL */
	Datum	   *values;			/* by attnum - 1 */
	bool	   *isnull;
	int64		stored;
	/* by attnum - 1: each column's input function, looked up once a call */
	FmgrInfo   *infunc;
	Oid		   *inparam;
	bool	   *inready;
	/* the keys of the previous object, in order, and their columns */
	int			nkeys;
	int			maxkeys;
	char	  **keys;
	int		   *keylens;
	AttrNumber *keyatts;
	struct InsertShape *last_shape; /* of the previous object, if it had keys */
	/* while a batch is being inserted: */
	InsertShape *flushing;
	uint64		calls_before;
	uint64		filled_at_begin;	/* rows_filled when the call began */
	int			guc_nestlevel;	/* of the safe search_path */
} IngestCall;

static void
ingest_error_context(void *arg)
{
	IngestCall *call = (IngestCall *) arg;
	int			rowno = call->rowno;

	if (call->flushing != NULL)
	{
		/* the first row not filled is the one that failed */
		int64		i = (int64) (rows_filled - call->calls_before);

		i = Max(0, Min(i, call->flushing->nrows - 1));
		rowno = call->flushing->rownos[i];
	}
	if (rowno <= 0)
		return;
	/* the location, as COPY gives it: "COPY t, line 3, column x" */
	if (call->column != NULL && call->flushing == NULL)
	{
		if (call->lines)
			errcontext("streamwm.ingest_lines into %s, line %d, column %s",
					   RelationGetRelationName(call->rel), rowno, call->column);
		else
			errcontext("streamwm.ingest into %s, row %d, column %s",
					   RelationGetRelationName(call->rel), rowno, call->column);
	}
	else if (call->lines)
		errcontext("streamwm.ingest_lines into %s, line %d",
				   RelationGetRelationName(call->rel), rowno);
	else
		errcontext("streamwm.ingest into %s, row %d",
				   RelationGetRelationName(call->rel), rowno);
}

/* A JSON array as the text of a PostgreSQL array literal. */
static void
json_array_literal(StringInfo buf, JsonbContainer *container)
{
	JsonbIterator *it = JsonbIteratorInit(container);
	JsonbValue	v;
	JsonbIteratorToken tok;
	bool		first = true;

	appendStringInfoChar(buf, '{');
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (tok != WJB_ELEM)
			continue;
		if (!first)
			appendStringInfoChar(buf, ',');
		first = false;
		switch (v.type)
		{
			case jbvNull:
				appendStringInfoString(buf, "NULL");
				break;
			case jbvString:
				appendStringInfoChar(buf, '"');
				for (int i = 0; i < v.val.string.len; i++)
				{
					char		c = v.val.string.val[i];

					if (c == '"' || c == '\\')
						appendStringInfoChar(buf, '\\');
					appendStringInfoChar(buf, c);
				}
				appendStringInfoChar(buf, '"');
				break;
			case jbvNumeric:
				appendStringInfoString(buf,
									   DatumGetCString(DirectFunctionCall1(numeric_out,
																		   NumericGetDatum(v.val.numeric))));
				break;
			case jbvBool:
				appendStringInfoString(buf, v.val.boolean ? "true" : "false");
				break;
			case jbvBinary:
				if (JsonContainerIsArray(v.val.binary.data))
				{
					json_array_literal(buf, v.val.binary.data);
					break;
				}
				/* FALLTHROUGH */
			default:
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
						 errmsg("a JSON object cannot be an array element here")));
		}
	}
	appendStringInfoChar(buf, '}');
}

/* Convert one JSON value to a Datum of the column's type. */
static Datum
json_to_datum(IngestCall *call, JsonbValue *v, Form_pg_attribute att, bool *isnull)
{
	int			i = att->attnum - 1;
	char	   *str;

	*isnull = false;
	if (v->type == jbvNull)
	{
		*isnull = true;
		return (Datum) 0;
	}
	if (att->atttypid == JSONBOID)
		return JsonbPGetDatum(JsonbValueToJsonb(v));
	if (att->atttypid == JSONOID)
		str = JsonbToCString(NULL, &JsonbValueToJsonb(v)->root, -1);
	else
	{
		switch (v->type)
		{
			case jbvString:
				str = pnstrdup(v->val.string.val, v->val.string.len);
				break;
			case jbvNumeric:
				/* numeric_in(numeric_out(x)) with a typmod is numeric(x, typmod) */
				if (att->atttypid == NUMERICOID)
					return DirectFunctionCall2(numeric, NumericGetDatum(v->val.numeric),
											   Int32GetDatum(att->atttypmod));
				str = DatumGetCString(DirectFunctionCall1(numeric_out,
														   NumericGetDatum(v->val.numeric)));
				break;
			case jbvBool:
				str = v->val.boolean ? "true" : "false";
				break;
			case jbvBinary:
				if (JsonContainerIsArray(v->val.binary.data) &&
					OidIsValid(get_element_type(att->atttypid)))
				{
					StringInfoData buf;

					initStringInfo(&buf);
					json_array_literal(&buf, v->val.binary.data);
					str = buf.data;
					break;
				}
				ereport(ERROR,
						(errcode(ERRCODE_DATATYPE_MISMATCH),
						 errmsg("a JSON %s cannot be stored in a column of type %s",
								JsonContainerIsArray(v->val.binary.data) ? "array" : "object",
								format_type_be(att->atttypid))));
				break;
			default:
				elog(ERROR, "unexpected JSON value type %d", (int) v->type);
		}
	}
	if (!call->inready[i])
	{
		Oid			typinput;

		getTypeInputInfo(att->atttypid, &typinput, &call->inparam[i]);
		fmgr_info_cxt(typinput, &call->infunc[i], call->cxt);
		call->inready[i] = true;
	}
	return InputFunctionCall(&call->infunc[i], str, call->inparam[i], att->atttypmod);
}

/*
 * Convert with errors naming the row and the column: the error context
 * callback (ingest_error_context) names both, as COPY does.
 */
static Datum
json_to_datum_reported(IngestCall *call, JsonbValue *v, Form_pg_attribute att,
					   bool *isnull)
{
	Datum		result;

	call->column = NameStr(att->attname);
	result = json_to_datum(call, v, att, isnull);
	call->column = NULL;
	return result;
}

static InsertShape *
insert_shape(IngestCall *call, Bitmapset *columns)
{
	ListCell   *lc;
	InsertShape *shape;
	StringInfoData sql;
	Oid		   *types;
	int			attno = -1;
	int			i = 0;
	TupleDesc	tupdesc = RelationGetDescr(call->rel);
	MemoryContext old;

	foreach(lc, call->shapes)
	{
		shape = lfirst(lc);
		if (bms_equal(shape->columns, columns))
			return shape;
	}

	old = MemoryContextSwitchTo(call->shapecxt);

	shape = palloc0(sizeof(InsertShape));
	shape->columns = bms_copy(columns);
	shape->nparams = bms_num_members(columns);
	shape->attnums = palloc(shape->nparams * sizeof(int));
	types = palloc(shape->nparams * sizeof(Oid));
	initStringInfo(&sql);
	appendStringInfo(&sql, "INSERT INTO %s (",
					 quote_qualified_identifier(get_namespace_name(RelationGetNamespace(call->rel)),
												RelationGetRelationName(call->rel)));
	while ((attno = bms_next_member(columns, attno)) >= 0)
	{
		Form_pg_attribute att = TupleDescAttr(tupdesc, attno - 1);

		appendStringInfo(&sql, "%s%s", i > 0 ? ", " : "",
						 quote_identifier(NameStr(att->attname)));
		shape->attnums[i] = attno;
		types[i] = att->atttypid;
		i++;
	}
	/* batched if every column has an array type and is not composite */
	shape->batched = true;
	for (i = 0; i < shape->nparams; i++)
	{
		Oid			atype = get_array_type(types[i]);

		if (!OidIsValid(atype) || type_is_rowtype(types[i]))
			shape->batched = false;
	}
	if (shape->batched)
	{
		shape->rownos = palloc(SW_INGEST_BATCH * sizeof(int));
		shape->values = palloc(shape->nparams * sizeof(Datum *));
		shape->nulls = palloc(shape->nparams * sizeof(bool *));
		shape->elmlen = palloc(shape->nparams * sizeof(int16));
		shape->elmbyval = palloc(shape->nparams * sizeof(bool));
		shape->elmalign = palloc(shape->nparams * sizeof(char));
		shape->elmtype = palloc(shape->nparams * sizeof(Oid));
		appendStringInfoString(&sql, ") SELECT ");
		for (i = 0; i < shape->nparams; i++)
		{
			shape->values[i] = palloc(SW_INGEST_BATCH * sizeof(Datum));
			shape->nulls[i] = palloc(SW_INGEST_BATCH * sizeof(bool));
			shape->elmtype[i] = types[i];
			get_typlenbyvalalign(types[i], &shape->elmlen[i], &shape->elmbyval[i],
								 &shape->elmalign[i]);
			appendStringInfo(&sql, "%spg_catalog.unnest($%d)", i > 0 ? ", " : "", i + 1);
			types[i] = get_array_type(types[i]);
		}
	}
	else
	{
		appendStringInfoString(&sql, ") VALUES (");
		for (i = 0; i < shape->nparams; i++)
			appendStringInfo(&sql, "%s$%d", i > 0 ? ", " : "", i + 1);
		appendStringInfoChar(&sql, ')');
	}

	shape->plan = SPI_prepare(sql.data, shape->nparams, types);
	if (shape->plan == NULL)
		elog(ERROR, "SPI_prepare failed for \"%s\": %s", sql.data,
			 SPI_result_code_string(SPI_result));
	call->shapes = lappend(call->shapes, shape);
	MemoryContextSwitchTo(old);
	return shape;
}

/* Insert the rows waiting in the pending batch, if any. */
static void
flush_batch(IngestCall *call)
{
	InsertShape *shape = call->pending;
	Datum	   *params;
	int			dims[1];
	int			lbs[1] = {1};
	int			rc;

	call->pending = NULL;
	if (shape == NULL || shape->nrows == 0)
		return;
	params = palloc(shape->nparams * sizeof(Datum));
	dims[0] = shape->nrows;
	for (int i = 0; i < shape->nparams; i++)
		params[i] = PointerGetDatum(construct_md_array(shape->values[i], shape->nulls[i],
													   1, dims, lbs, shape->elmtype[i],
													   shape->elmlen[i], shape->elmbyval[i],
													   shape->elmalign[i]));
	call->flushing = shape;
	call->calls_before = rows_filled;
	rc = SPI_execute_plan(shape->plan, params, NULL, false, 0);
	if (rc != SPI_OK_INSERT)
		elog(ERROR, "streamwm ingest: INSERT failed: %s", SPI_result_code_string(rc));
	call->flushing = NULL;
	call->stored += SPI_processed;
	shape->nrows = 0;
	for (int i = 0; i < shape->nparams; i++)
		pfree(DatumGetPointer(params[i]));
	pfree(params);
}

/*
 * The stream changed since the shapes were made (a trigger renamed its
 * columns, say): the columns are looked up again by name, for the row at
 * hand too (ingest_object reads it again).  The rows waiting, read before,
 * go in by the columns their INSERT was planned with, as the rows of one
 * INSERT or COPY statement do when a trigger renames columns in the middle
 * of it (one batch is one statement).  Any invalidation of the stream's
 * relcache entry counts, ANALYZE's included: it costs no more than new
 * plans.
 */
static void
forget_shapes(IngestCall *call)
{
	ListCell   *lc;

	flush_batch(call);
	foreach(lc, call->shapes)
		SPI_freeplan(((InsertShape *) lfirst(lc))->plan);
	call->shapes = NIL;
	MemoryContextReset(call->shapecxt);
	call->last_shape = NULL;
	call->nkeys = 0;
	memset(call->inready, 0, call->natts * sizeof(bool));
	call->changes_seen = call->cache->changes;
}

/* Insert the pending batch; did that change the stream (a trigger)? */
static bool
flush_changed_stream(IngestCall *call)
{
	uint64		before = call->cache->changes;

	flush_batch(call);
	return call->cache->changes != before;
}

/*
 * Before a row is read.  A row's JSON and its values are kept until its
 * batch is inserted (a numeric value may point into the JSON); when no row
 * waits, their memory is freed, and it never holds more than two batches.
 */
static void
start_row(IngestCall *call)
{
	if (call->pending != NULL && call->rows_in_cxt >= 2 * SW_INGEST_BATCH)
		flush_batch(call);
	if (call->pending == NULL)
	{
		MemoryContextReset(call->rowcxt);
		call->rows_in_cxt = 0;
	}
	call->rows_in_cxt++;
}

/* The n-th key of the object at hand is key, of column attno. */
static void
remember_key(IngestCall *call, int n, char *key, AttrNumber attno)
{
	if (n >= call->maxkeys)
	{
		int			max = Max(8, n * 2);

		if (call->maxkeys == 0)
		{
			call->keys = MemoryContextAllocZero(call->cxt, max * sizeof(char *));
			call->keylens = MemoryContextAlloc(call->cxt, max * sizeof(int));
			call->keyatts = MemoryContextAlloc(call->cxt, max * sizeof(AttrNumber));
		}
		else
		{
			call->keys = repalloc(call->keys, max * sizeof(char *));
			memset(call->keys + call->maxkeys, 0,
				   (max - call->maxkeys) * sizeof(char *));
			call->keylens = repalloc(call->keylens, max * sizeof(int));
			call->keyatts = repalloc(call->keyatts, max * sizeof(AttrNumber));
		}
		call->maxkeys = max;
	}
	if (call->keys[n] != NULL)
		pfree(call->keys[n]);
	call->keys[n] = MemoryContextStrdup(call->cxt, key);
	call->keylens[n] = strlen(key);
	call->keyatts[n] = attno;
	call->nkeys = n + 1;
}

/* Store one JSON object as one row of the stream. */
static void
ingest_object(IngestCall *call, JsonbContainer *obj)
{
	TupleDesc	tupdesc = RelationGetDescr(call->rel);
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	Bitmapset  *columns = NULL;
	InsertShape *shape;
	Datum	   *params;
	char	   *nulls;
	AttrNumber	att_partition = call->att_partition;
	AttrNumber	att_write_time = call->att_write_time;
	int			rc;
	int			nkey;
	bool		same = true;	/* every key as in the previous object */
	MemoryContext old;

	if (!JsonContainerIsObject(obj))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 call->lines ? errmsg("line is not a JSON object") :
				 errmsg("row is not a JSON object")));

	old = MemoryContextSwitchTo(call->rowcxt);

	/*
	 * Read again from here when inserting the rows before this one changed
	 * the stream (a trigger renamed a column): this row's keys name the
	 * columns as they are now.  Only a change that inserting made counts
	 * (reading a row may change the stream too, a domain's CHECK that runs
	 * a GRANT: the row is not read forever), and only once: that insert has
	 * emptied the batch.
	 */
restart:
	if (call->cache->changes != call->changes_seen)
	{
		forget_shapes(call);
		tupdesc = RelationGetDescr(call->rel);
	}
	same = true;
	columns = NULL;
	it = JsonbIteratorInit(obj);
	nkey = 0;
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		char	   *key;
		AttrNumber	attno;
		Form_pg_attribute att;

		if (tok != WJB_KEY)
			continue;

		/*
		 * jsonb keeps an object's keys in one order, so the objects of an
		 * array of one shape give the same key at the same place: the
		 * previous object's column, checked below when it was looked up.
		 */
		if (nkey < call->nkeys && call->keylens[nkey] == v.val.string.len &&
			memcmp(call->keys[nkey], v.val.string.val, v.val.string.len) == 0)
		{
			attno = call->keyatts[nkey++];
			att = TupleDescAttr(tupdesc, attno - 1);
			tok = JsonbIteratorNext(&it, &v, true);
			Assert(tok == WJB_VALUE);
			call->values[attno - 1] = json_to_datum_reported(call, &v, att,
															 &call->isnull[attno - 1]);
			continue;
		}
		same = false;
		key = pnstrdup(v.val.string.val, v.val.string.len);
		attno = attnameAttNum(call->rel, key, false);
		if (attno > call->natts)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("stream %s was altered while streamwm.ingest stored into it",
							RelationGetRelationName(call->rel))));
		if (attno <= 0)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("column \"%s\" of stream %s does not exist",
							key, RelationGetRelationName(call->rel))));
		att = TupleDescAttr(tupdesc, attno - 1);
		if (strcmp(key, "sw_offset") == 0 || strcmp(key, "sw_event_time") == 0 ||
			att->attgenerated)
			ereport(ERROR,
					(errcode(ERRCODE_GENERATED_ALWAYS),
					 errmsg("column \"%s\" of stream %s is assigned by streamwm",
							key, RelationGetRelationName(call->rel))));
		if ((attno == att_partition && call->have_partition) ||
			(attno == att_write_time && call->have_write_time))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("\"%s\" is given both as an argument and in the row",
							key)));
		remember_key(call, nkey++, key, attno);

		tok = JsonbIteratorNext(&it, &v, true);
		Assert(tok == WJB_VALUE);
		call->values[attno - 1] = json_to_datum_reported(call, &v, att,
														 &call->isnull[attno - 1]);
	}
	/* call->keyatts[0 .. nkey) are this object's columns */
	same = same && nkey > 0 && nkey == call->nkeys && call->last_shape != NULL;
	call->nkeys = nkey;
	for (int i = 0; i < nkey && !same; i++)
		columns = bms_add_member(columns, call->keyatts[i]);
	if (call->have_partition)
	{
		if (!same)
			columns = bms_add_member(columns, att_partition);
		call->values[att_partition - 1] = Int32GetDatum(call->partition);
		call->isnull[att_partition - 1] = false;
	}
	if (call->have_write_time)
	{
		if (!same)
			columns = bms_add_member(columns, att_write_time);
		call->values[att_write_time - 1] = TimestampTzGetDatum(call->write_time);
		call->isnull[att_write_time - 1] = false;
	}

	if (same)
		shape = call->last_shape;	/* the previous object's keys */
	else
	{
		if (columns == NULL)
		{
			/* {} stores a row of defaults */
			columns = bms_add_member(columns, att_partition);
			call->values[att_partition - 1] = (Datum) 0;
			call->isnull[att_partition - 1] = true;
		}
		shape = insert_shape(call, columns);
		call->last_shape = nkey > 0 ? shape : NULL;
	}
	if (shape->batched)
	{
		if (call->pending != shape && flush_changed_stream(call))
			goto restart;
		call->pending = shape;
		for (int i = 0; i < shape->nparams; i++)
		{
			shape->values[i][shape->nrows] = call->values[shape->attnums[i] - 1];
			shape->nulls[i][shape->nrows] = call->isnull[shape->attnums[i] - 1];
		}
		shape->rownos[shape->nrows++] = call->rowno;
		if (shape->nrows == SW_INGEST_BATCH)
			flush_batch(call);
		MemoryContextSwitchTo(old);
		return;
	}
	if (flush_changed_stream(call))
		goto restart;
	params = palloc(shape->nparams * sizeof(Datum));
	nulls = palloc(shape->nparams * sizeof(char));
	for (int i = 0; i < shape->nparams; i++)
	{
		params[i] = call->values[shape->attnums[i] - 1];
		nulls[i] = call->isnull[shape->attnums[i] - 1] ? 'n' : ' ';
	}
	rc = SPI_execute_plan(shape->plan, params, nulls, false, 0);
	if (rc != SPI_OK_INSERT)
		elog(ERROR, "streamwm ingest: INSERT failed: %s", SPI_result_code_string(rc));
	call->stored += SPI_processed;
	MemoryContextSwitchTo(old);
}

/* Common start of ingest() and ingest_lines(): argument checks. */
static void
ingest_begin(IngestCall *call, FunctionCallInfo fcinfo, bool lines)
{
	Oid			relid;
	int			npartitions;
	SwStreamColumns cols;

	memset(call, 0, sizeof(IngestCall));
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("stream must not be NULL")));
	relid = PG_GETARG_OID(0);
	/* before any lock on it: a role that may not write the table waits for nothing */
	sw_check_may_insert(relid);
	/*
	 * Errors for a non-stream.  On a Citus worker a distributed stream is
	 * known from its table alone: the INSERTs below go through Citus,
	 * which routes each row to its partition's shard, wherever that is.
	 */
	npartitions = sw_citus_stream_partitions(relid);
	call->rel = table_open(relid, RowExclusiveLock);
	call->lines = lines;
	sw_check_stream_columns(call->rel, &cols);
	call->att_partition = cols.partition;
	call->att_write_time = cols.write_time;
	if (!PG_ARGISNULL(2))
	{
		call->have_partition = true;
		call->partition = PG_GETARG_INT32(2);
		if (call->partition < 0 || call->partition >= npartitions)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("partition %d is out of range for stream %s",
							call->partition, RelationGetRelationName(call->rel)),
					 errdetail_plural("The stream has %d partition, numbered 0 to %d.",
									  "The stream has %d partitions, numbered 0 to %d.",
									  npartitions,
									  npartitions, npartitions - 1)));
	}
	if (!PG_ARGISNULL(3))
	{
		call->have_write_time = true;
		call->write_time = PG_GETARG_TIMESTAMPTZ(3);
	}
	call->natts = RelationGetDescr(call->rel)->natts;
	call->values = palloc0(call->natts * sizeof(Datum));
	call->isnull = palloc0(call->natts * sizeof(bool));
	call->infunc = palloc0(call->natts * sizeof(FmgrInfo));
	call->inparam = palloc0(call->natts * sizeof(Oid));
	call->inready = palloc0(call->natts * sizeof(bool));
	call->filled_at_begin = rows_filled;
	call->cache = ingest_cache_entry(relid);
	call->changes_seen = call->cache->changes;
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	call->cxt = CurrentMemoryContext;	/* SPI's, until SPI_finish */
	call->shapecxt = AllocSetContextCreate(call->cxt, "streamwm ingest shapes",
										   ALLOCSET_SMALL_SIZES);
	call->rowcxt = AllocSetContextCreate(call->cxt, "streamwm ingest rows",
										 ALLOCSET_DEFAULT_SIZES);
	/* our INSERT statements resolve no name outside pg_catalog */
	call->guc_nestlevel = sw_enter_safe_path();
}

static int64
ingest_end(IngestCall *call)
{
	flush_batch(call);
	/*
	 * A call made by a trigger while another call's batch is inserted: its
	 * rows must not move the other's count (which names the failing row).
	 */
	rows_filled = call->filled_at_begin;
	sw_leave_safe_path(call->guc_nestlevel);
	SPI_finish();
	table_close(call->rel, NoLock);
	return call->stored;
}

/*
 * streamwm.ingest(stream regclass, rows jsonb, partition int, write_time
 * timestamptz) RETURNS bigint: rows is one object or an array of objects.
 */
static Datum
ingest_impl(PG_FUNCTION_ARGS)
{
	IngestCall	call;
	ErrorContextCallback errcb;
	Jsonb	   *rows;

	sw_require_extension_version();

	ingest_begin(&call, fcinfo, false);
	if (PG_ARGISNULL(1))
		PG_RETURN_INT64(ingest_end(&call));
	rows = PG_GETARG_JSONB_P(1);

	errcb.callback = ingest_error_context;
	errcb.arg = &call;
	errcb.previous = error_context_stack;
	error_context_stack = &errcb;

	if (JB_ROOT_IS_OBJECT(rows))
	{
		call.rowno = 1;
		ingest_object(&call, &rows->root);
	}
	else if (JB_ROOT_IS_ARRAY(rows) && !JB_ROOT_IS_SCALAR(rows))
	{
		int			n = JB_ROOT_COUNT(rows);

		for (int i = 0; i < n; i++)
		{
			JsonbValue *elem;
			MemoryContext old;

			start_row(&call);
			old = MemoryContextSwitchTo(call.rowcxt);
			elem = getIthJsonbValueFromContainer(&rows->root, i);
			MemoryContextSwitchTo(old);
			call.rowno = i + 1;
			if (elem->type != jbvBinary)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("row is not a JSON object")));
			ingest_object(&call, elem->val.binary.data);
		}
	}
	else
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("rows must be a JSON object or an array of objects")));

	flush_batch(&call);			/* still under the error context */
	error_context_stack = errcb.previous;
	PG_RETURN_INT64(ingest_end(&call));
}

/* the entry point: errors without streamwm's internal frames (api.c) */
Datum
streamwm_ingest(PG_FUNCTION_ARGS)
{
	return sw_api_guard(ingest_impl, fcinfo);
}

/*
 * streamwm.ingest_lines(stream regclass, lines text, partition int,
 * write_time timestamptz) RETURNS bigint: one JSON object per line
 * (json_each_row); blank lines are skipped.
 */
static Datum
ingest_lines_impl(PG_FUNCTION_ARGS)
{
	IngestCall	call;
	ErrorContextCallback errcb;
	char	   *input;
	char	   *line;
	int			lineno = 0;

	sw_require_extension_version();

	ingest_begin(&call, fcinfo, true);
	if (PG_ARGISNULL(1))
		PG_RETURN_INT64(ingest_end(&call));
	input = text_to_cstring(PG_GETARG_TEXT_PP(1));

	errcb.callback = ingest_error_context;
	errcb.arg = &call;
	errcb.previous = error_context_stack;
	error_context_stack = &errcb;

	line = input;
	while (line != NULL)
	{
		char	   *next = strchr(line, '\n');
		char	   *p;
		Jsonb	   *jb;
		MemoryContext old;

		if (next != NULL)
			*next++ = '\0';
		lineno++;
		if (next != NULL && next > line + 1 && next[-2] == '\r')
			next[-2] = '\0';
		for (p = line; *p == ' ' || *p == '\t' || *p == '\r'; p++)
			;
		if (*p == '\0')
		{
			line = next;
			continue;
		}
		call.rowno = lineno;	/* the error context names the line */
		start_row(&call);
		old = MemoryContextSwitchTo(call.rowcxt);
		jb = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(line)));
		MemoryContextSwitchTo(old);
		if (!JB_ROOT_IS_OBJECT(jb))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("line is not a JSON object")));
		ingest_object(&call, &jb->root);
		line = next;
	}

	flush_batch(&call);			/* still under the error context */
	error_context_stack = errcb.previous;
	PG_RETURN_INT64(ingest_end(&call));
}

/* the entry point: errors without streamwm's internal frames (api.c) */
Datum
streamwm_ingest_lines(PG_FUNCTION_ARGS)
{
	return sw_api_guard(ingest_lines_impl, fcinfo);
}
