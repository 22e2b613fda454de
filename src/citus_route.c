/*-------------------------------------------------------------------------
 * citus_route.c
 *	  Owns the partition of a row written into a distributed stream when
 *	  the statement does not give one: chosen from the stream's
 *	  partition_key before Citus routes the row (DESIGN.md, "Citus:
 *	  distributed streams").
 *
 * Citus routes a row to a shard by its sw_partition, on the node where the
 * statement runs, before any trigger sees the row; on a local stream the
 * key is hashed when the row is stored (ingest.c), which is too late.  So
 * an INSERT into such a stream that does not give sw_partition gets it
 * here, at parse analysis, on whichever node parses it: a call of
 * streamwm_internal._key_partition('<stream>', ROW(...)) on what the
 * INSERT stores in the key's columns (the value it gives, else the
 * column's default, else NULL; sw_write_time the clock when not given, as
 * on a local stream), which evaluates the stream's own key on them (the
 * third arm of the sw_ingest trigger's WHEN clause, which Citus keeps
 * with the table on every node) and hashes it as ingest.c does:
 *
 *	 INSERT INTO s (k, v) VALUES (1, 'a')      (partition_key => 'k')
 *	   -> ... (k, v, sw_partition) VALUES (1, 'a', _key_partition('s', ROW(1)))
 *	 INSERT INTO s (k, v) VALUES (1, 'a'), (2, 'b')
 *	   -> a column added to the VALUES list, computed from each row's values
 *	 INSERT INTO s (k, v) SELECT x, y FROM ...
 *	   -> SELECT q.*, _key_partition('s', ROW(q.x)) FROM (<SELECT>) q
 *
 * INSERTs in a WITH are rewritten too.  A partition given but possibly
 * NULL (ingest() passes one for every row) becomes COALESCE(<given>,
 * <computed>), computed being sw_partition's DEFAULT on a stream without
 * a key: NULL means "not given", as on a local stream.  Citus evaluates the
 * call where the statement runs and routes by its result, as it does for
 * sw_partition's DEFAULT (which refuses a keyed stream: only a statement
 * analyzed without this hook, a BEGIN ATOMIC function body, reaches it).
 * A value that the key
 * uses and that is not the same twice (a volatile expression in VALUES)
 * would be computed once for the key and once for the row: refused.
 * ingest() inserts with such statements, so it is covered.  Citus routes
 * the rows of a COPY as they come, with no statement to rewrite: a COPY
 * that does not give sw_partition goes into a temporary table first, and
 * an INSERT ... SELECT moves its rows on (sw_citus_route_copy).
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "access/htup_details.h"
#include "executor/executor.h"
#include "fmgr.h"
#include "catalog/namespace.h"
#include "commands/dbcommands.h"
#include "catalog/pg_attribute.h"
#include "catalog/pg_class.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_type.h"
#include "commands/copy.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parse_coerce.h"
#include "parser/parse_func.h"
#include "parser/parse_node.h"
#include "parser/parsetree.h"
#include "parser/parse_relation.h"
#include "rewrite/rewriteHandler.h"
#include "rewrite/rewriteManip.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "utils/typcache.h"

#include "catalog.h"
#include "citus.h"
#include "guard.h"
#include "ingest.h"

PG_FUNCTION_INFO_V1(streamwm_key_partition);

/* What an INSERT into one distributed stream needs to give its rows a partition. */
typedef struct Route
{
	Relation	rel;
	Expr	   *key;			/* the partition_key, or NULL */
	AttrNumber	partition;		/* sw_partition's attnum */
	AttrNumber	write_time;		/* sw_write_time's */
	Node	  **given;			/* by attnum - 1: what the row gives, or NULL */
} Route;

/*
 * The partition_key of distributed stream rel, from its sw_ingest trigger
 * (two arguments: partitions, commit log); NULL if it has none.
 * *is_stream: rel is a distributed stream at all; *npartitions (if not
 * NULL): its partition count.
 */
static Expr *
dist_partition_key(Relation rel, int *npartitions, bool *is_stream)
{
	Trigger    *t = sw_citus_stream_trigger(rel);
	int			n;

	*is_stream = (t != NULL);
	if (t == NULL)
		return NULL;
	n = pg_strtoint32(t->tgargs[0]);
	if (n < 1)
		elog(ERROR, "invalid partition count in trigger on %s",
			 RelationGetRelationName(rel));
	if (npartitions != NULL)
		*npartitions = n;
	return t->tgqual != NULL ? sw_ingest_partition_key(rel, t) : NULL;
}

/*
 * create_stream(..., distributed => true) (citus.c, before distributing):
 * a partition_key that routing cannot compute is refused now, not at
 * every INSERT: one over the whole row, or over sw_partition itself.
 */
void
sw_citus_check_partition_key(Oid relid)
{
	Relation	rel = table_open(relid, AccessShareLock);
	bool		is_stream;
	Expr	   *key = dist_partition_key(rel, NULL, &is_stream);
	Bitmapset  *used = NULL;
	SwStreamColumns cols;

	if (key != NULL)
	{
		sw_check_stream_columns(rel, &cols);
		pull_varattnos((Node *) key, 1, &used);
		if (bms_is_member(InvalidAttrNumber - FirstLowInvalidHeapAttributeNumber, used) ||
			bms_is_member(cols.partition - FirstLowInvalidHeapAttributeNumber, used))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("the partition_key of a distributed stream cannot use %s",
							bms_is_member(InvalidAttrNumber - FirstLowInvalidHeapAttributeNumber, used) ?
							"the whole row" : "sw_partition"),
					 errdetail("The partition is computed from the key's columns before Citus routes the row.")));
	}
	table_close(rel, AccessShareLock);
}

/* Does distributed stream relid have a partition_key? (_pick_partition) */
bool
sw_citus_has_partition_key(Oid relid)
{
	Relation	rel = table_open(relid, AccessShareLock);
	bool		is_stream;
	bool		has = dist_partition_key(rel, NULL, &is_stream) != NULL;

	table_close(rel, AccessShareLock);
	return has;
}

/*
 * The value row r stores in column attno (1-based) for the key: what the
 * INSERT gives, else the column's default, else NULL; sw_write_time not
 * given: the clock, as on a local stream.  A value the key uses is
 * computed twice (for the key and for the row): refused if volatile.
 */
static Expr *
key_column_value(Route *r, AttrNumber attno)
{
	Form_pg_attribute att = TupleDescAttr(RelationGetDescr(r->rel), attno - 1);
	Node	   *e = r->given[attno - 1];

	if (e != NULL && !IsA(e, SetToDefault))
	{
		if (contain_volatile_functions(e))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("the value of column \"%s\" of distributed stream %s is volatile, and its partition_key uses it",
							NameStr(att->attname), RelationGetRelationName(r->rel)),
					 errdetail("The partition is computed from the key before Citus routes the row, "
							   "so the value would be computed twice."),
					 errhint("Compute the value in a subquery (INSERT ... SELECT), or give sw_partition.")));
		return (Expr *) copyObject(e);
	}
	if (attno == r->write_time)
		return (Expr *) makeFuncExpr(F_CLOCK_TIMESTAMP, TIMESTAMPTZOID, NIL,
									 InvalidOid, InvalidOid, COERCE_EXPLICIT_CALL);
	e = build_column_default(r->rel, attno);
	if (e != NULL)
	{
		if (contain_volatile_functions(e))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("the default of column \"%s\" of distributed stream %s is volatile, and its partition_key uses it",
							NameStr(att->attname), RelationGetRelationName(r->rel)),
					 errhint("Give the column's value, or sw_partition, in the INSERT.")));
		return (Expr *) e;
	}
	return (Expr *) makeNullConst(att->atttypid, att->atttypmod, att->attcollation);
}

/*
 * The partition of the row in r->given: the one it gives; where it gives
 * none or NULL (as ingest() does for an object without one),
 *
 *	 streamwm_internal._key_partition('<stream>'::regclass, ROW(<the key's columns>))
 *
 * which evaluates the stream's own bound key on that row, as ingest.c
 * does on a local stream: Citus may deparse the call and run it on a
 * worker, and no collation has to survive the text (a function's input
 * collation would be derived there again, and Citus drops a COLLATE
 * "default" or a nested one); or without a key sw_partition's DEFAULT
 * (the session's partition).
 */
static Expr *
partition_of_row(Route *r)
{
	Node	   *given = r->given[r->partition - 1];
	Expr	   *computed;
	CoalesceExpr *c;

	if (given != NULL && IsA(given, Const) && !((Const *) given)->constisnull)
		return (Expr *) copyObject(given);
	if (r->key != NULL)
	{
		Bitmapset  *used = NULL;
		RowExpr    *row = makeNode(RowExpr);
		Oid			argtypes[2] = {REGCLASSOID, RECORDOID};
		Oid			fn = LookupFuncName(list_make2(makeString("streamwm_internal"),
												   makeString("_key_partition")),
										2, argtypes, false);
		int			a = -1;

		pull_varattnos((Node *) r->key, 1, &used);
		while ((a = bms_next_member(used, a)) >= 0)
		{
			AttrNumber	attno = a + FirstLowInvalidHeapAttributeNumber;

			if (attno <= 0)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("the partition_key of distributed stream %s uses the whole row",
								RelationGetRelationName(r->rel)),
						 errhint("Give sw_partition in the INSERT.")));
			row->args = lappend(row->args, key_column_value(r, attno));
			row->colnames = lappend(row->colnames,
									makeString(pstrdup(NameStr(TupleDescAttr(RelationGetDescr(r->rel),
																			 attno - 1)->attname))));
		}
		row->row_typeid = RECORDOID;
		row->row_format = COERCE_IMPLICIT_CAST;
		row->location = -1;
		computed = (Expr *) makeFuncExpr(fn, INT4OID,
										 list_make2(makeConst(REGCLASSOID, -1, InvalidOid, sizeof(Oid),
															  ObjectIdGetDatum(RelationGetRelid(r->rel)),
															  false, true),
													row),
										 InvalidOid, InvalidOid, COERCE_EXPLICIT_CALL);
	}
	else
		computed = (Expr *) build_column_default(r->rel, r->partition);
	if (given == NULL || IsA(given, SetToDefault) || computed == NULL)
		return computed != NULL ? computed : (Expr *) copyObject(given);
	c = makeNode(CoalesceExpr);
	c->coalescetype = INT4OID;
	c->coalescecollid = InvalidOid;
	c->args = list_make2(copyObject(given), computed);
	c->location = -1;
	return (Expr *) c;
}

/* What streamwm_internal._key_partition() needs of one stream's key. */
typedef struct KeyEval
{
	MemoryContext cxt;			/* holds all of it */
	Oid			relid;
	int			npartitions;
	int			nused;
	AttrNumber *used;			/* the key's columns, in attnum order */
	Oid		   *types;			/* ... and their types */
	ExprState  *key;
	FmgrInfo	hash;
	Oid			collation;
	ExprContext *econtext;
	TupleTableSlot *slot;
} KeyEval;

/*
 * The KeyEvals of this backend, by stream: Citus evaluates the call of a
 * multi-row VALUES list once per row with a new expression state, so a
 * cache per call site was built again for every row.  An entry is marked
 * invalid by a relcache invalidation of its stream and built again at its
 * next use.  A call made while the entry's state is being evaluated (a
 * key's function may insert into its own stream) builds a state of its own
 * and frees it.
 */
typedef struct KeyCacheEntry
{
	Oid			relid;			/* hash key */
	bool		valid;
	int			evaluating;		/* calls evaluating ke */
	KeyEval    *ke;
} KeyCacheEntry;

static HTAB *key_cache = NULL;

static void
key_cache_invalidate(Datum arg, Oid relid)
{
	HASH_SEQ_STATUS status;
	KeyCacheEntry *entry;

	hash_seq_init(&status, key_cache);
	while ((entry = hash_seq_search(&status)) != NULL)
		if (relid == InvalidOid || entry->relid == relid)
			entry->valid = false;
}

static void
key_eval_free(KeyEval *ke)
{
	FreeExprContext(ke->econtext, true);
	ExecDropSingleTupleTableSlot(ke->slot);
	MemoryContextDelete(ke->cxt);
}

/* The evaluation state of the partition_key of distributed stream relid. */
static KeyEval *
key_eval_build(Oid relid)
{
	MemoryContext old;
	MemoryContext cxt;
	Relation	rel;
	Expr	   *key;
	bool		is_stream = false;
	int			npartitions = 0;
	Bitmapset  *used = NULL;
	TypeCacheEntry *tc;
	KeyEval    *ke;
	int			a = -1;

	rel = table_open(relid, AccessShareLock);
	key = dist_partition_key(rel, &npartitions, &is_stream);
	if (key == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a distributed stream with a partition_key",
						RelationGetRelationName(rel))));
	cxt = AllocSetContextCreate(CacheMemoryContext, "streamwm _key_partition",
								ALLOCSET_SMALL_SIZES);
	old = MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		ke = palloc0(sizeof(KeyEval));
		ke->cxt = cxt;
		ke->relid = relid;
		ke->npartitions = npartitions;
		pull_varattnos((Node *) key, 1, &used);
		ke->used = palloc(Max(bms_num_members(used), 1) * sizeof(AttrNumber));
		ke->types = palloc(Max(bms_num_members(used), 1) * sizeof(Oid));
		while ((a = bms_next_member(used, a)) >= 0)
		{
			AttrNumber	attno = a + FirstLowInvalidHeapAttributeNumber;

			if (attno <= 0)
				elog(ERROR, "the partition_key of %s uses the whole row",
					 RelationGetRelationName(rel));
			ke->used[ke->nused] = attno;
			ke->types[ke->nused++] = TupleDescAttr(RelationGetDescr(rel), attno - 1)->atttypid;
		}
		key = expression_planner(copyObject(key));
		ke->key = ExecInitExpr(key, NULL);
		ke->collation = exprCollation((Node *) key);
		tc = lookup_type_cache(exprType((Node *) key), TYPECACHE_HASH_EXTENDED_PROC_FINFO);
		if (!OidIsValid(tc->hash_extended_proc))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_FUNCTION),
					 errmsg("partition_key of type %s cannot be hashed",
							format_type_be(exprType((Node *) key)))));
		fmgr_info_cxt(tc->hash_extended_proc, &ke->hash, cxt);
		ke->econtext = CreateStandaloneExprContext();
		ke->slot = MakeSingleTupleTableSlot(CreateTupleDescCopy(RelationGetDescr(rel)),
											&TTSOpsVirtual);
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(old);
		MemoryContextDelete(cxt);
		PG_RE_THROW();
	}
	PG_END_TRY();
	MemoryContextSwitchTo(old);
	table_close(rel, AccessShareLock);
	return ke;
}

/*
 * streamwm_internal._key_partition(stream regclass, key_columns record)
 * RETURNS int: the partition the partition_key of distributed stream
 * 'stream' picks for a row whose key columns (in attnum order, each of
 * its column's type) hold key_columns, on any node (the key from the
 * stream table's trigger there): the key's tree, bound at create_stream
 * under the creator's names and collations, evaluated on that row, and
 * hashed as ingest.c hashes it (NULL: partition 0).  Only for a role that
 * may insert into the stream, checked at every call: the key may run its
 * owner's functions, as an INSERT does.
 */
Datum
streamwm_key_partition(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	HeapTupleHeader tuple = PG_GETARG_HEAPTUPLEHEADER(1);
	KeyCacheEntry *entry;
	KeyEval    *ke;
	bool		found;
	bool		own = false;
	TupleDesc	rowdesc;
	HeapTupleData tmp;
	Datum	   *values;
	bool	   *nulls;
	Datum		value;
	bool		isnull;

	sw_check_may_insert(relid);

	if (key_cache == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(Oid);
		ctl.entrysize = sizeof(KeyCacheEntry);
		key_cache = hash_create("streamwm partition keys", 16, &ctl, HASH_ELEM | HASH_BLOBS);
		CacheRegisterRelcacheCallback(key_cache_invalidate, (Datum) 0);
	}
	entry = hash_search(key_cache, &relid, HASH_ENTER, &found);
	if (!found)
	{
		entry->valid = false;
		entry->evaluating = 0;
		entry->ke = NULL;
	}
	if (entry->evaluating > 0)
	{
		/* a call from within the key's evaluation: the entry's state is in use */
		ke = key_eval_build(relid);
		own = true;
	}
	else if (entry->valid && entry->ke != NULL)
		ke = entry->ke;
	else
	{
		if (entry->ke != NULL)
			key_eval_free(entry->ke);
		entry->ke = NULL;
		/* valid from now: an invalidation while building marks it again */
		entry->valid = true;
		entry->ke = ke = key_eval_build(relid);
	}

	/* the row must be the key's columns, each of its column's type exactly */
	rowdesc = lookup_rowtype_tupdesc(HeapTupleHeaderGetTypeId(tuple),
									 HeapTupleHeaderGetTypMod(tuple));
	if (rowdesc->natts != ke->nused)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("_key_partition() needs the %d columns of the partition_key of %s, not %d",
						ke->nused, get_rel_name(relid), rowdesc->natts)));
	for (int i = 0; i < ke->nused; i++)
		if (TupleDescAttr(rowdesc, i)->atttypid != ke->types[i])
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("_key_partition(): column %d of the row is of type %s, not %s",
							i + 1, format_type_be(TupleDescAttr(rowdesc, i)->atttypid),
							format_type_be(ke->types[i]))));
	values = palloc(Max(ke->nused, 1) * sizeof(Datum));
	nulls = palloc(Max(ke->nused, 1) * sizeof(bool));
	tmp.t_len = HeapTupleHeaderGetDatumLength(tuple);
	ItemPointerSetInvalid(&tmp.t_self);
	tmp.t_tableOid = InvalidOid;
	tmp.t_data = tuple;
	heap_deform_tuple(&tmp, rowdesc, values, nulls);
	ReleaseTupleDesc(rowdesc);

	/* entry stays valid as a pointer: entries are never removed */
	if (!own)
		entry->evaluating++;
	PG_TRY();
	{
		ExecClearTuple(ke->slot);
		for (int i = 0; i < ke->slot->tts_tupleDescriptor->natts; i++)
			ke->slot->tts_isnull[i] = true;
		for (int i = 0; i < ke->nused; i++)
		{
			ke->slot->tts_values[ke->used[i] - 1] = values[i];
			ke->slot->tts_isnull[ke->used[i] - 1] = nulls[i];
		}
		ExecStoreVirtualTuple(ke->slot);
		ResetExprContext(ke->econtext);
		ke->econtext->ecxt_scantuple = ke->slot;
		value = ExecEvalExprSwitchContext(ke->key, ke->econtext, &isnull);
		/* a by-reference result lives in the econtext: hash it before anything resets that */
		value = Int32GetDatum(isnull ? 0 : sw_key_partition(&ke->hash, ke->collation, value,
															   ke->npartitions));
	}
	PG_FINALLY();
	{
		if (own)
			key_eval_free(ke);
		else
			entry->evaluating--;
	}
	PG_END_TRY();
	PG_RETURN_DATUM(value);
}

/* The INSERT's target entry of attribute attno, or NULL. */
static TargetEntry *
target_of(Query *query, AttrNumber attno)
{
	ListCell   *lc;

	foreach(lc, query->targetList)
	{
		TargetEntry *tle = lfirst(lc);

		if (!tle->resjunk && tle->resno == attno)
			return tle;
	}
	return NULL;
}

/*
 * What an INSERT reads its rows from: a multi-row VALUES list or a SELECT
 * (and its range table index), or NULL for one row of expressions.
 */
static RangeTblEntry *
source_of(Query *query, int *rti)
{
	RangeTblRef *ref;
	RangeTblEntry *rte;

	if (query->jointree == NULL || list_length(query->jointree->fromlist) != 1 ||
		!IsA(linitial(query->jointree->fromlist), RangeTblRef))
		return NULL;
	ref = linitial(query->jointree->fromlist);
	rte = rt_fetch(ref->rtindex, query->rtable);
	if (rte->rtekind != RTE_VALUES && rte->rtekind != RTE_SUBQUERY)
		return NULL;
	*rti = ref->rtindex;
	return rte;
}

/* r->given: the INSERT's target expressions, by attnum */
static void
given_by_targets(Query *query, Route *r)
{
	int			natts = RelationGetDescr(r->rel)->natts;
	ListCell   *lc;

	foreach(lc, query->targetList)
	{
		TargetEntry *tle = lfirst(lc);

		if (!tle->resjunk && tle->resno >= 1 && tle->resno <= natts)
			r->given[tle->resno - 1] = (Node *) tle->expr;
	}
}

/*
 * INSERT ... SELECT: the SELECT becomes
 *	 SELECT s.*, <partition over s's columns> FROM (<SELECT>) s
 * and sw_partition its last column: Citus inserts a SELECT's columns into
 * the target columns they stand for, so the partition must be one of them.
 * Returns that column's number.
 */
static int
partition_from_select(Query *query, RangeTblEntry *sub, int sub_rti, Route *r)
{
	Query	   *wrap = makeNode(Query);
	RangeTblEntry *inner = copyObject(sub);
	RangeTblRef *ref = makeNode(RangeTblRef);
	int			natts = RelationGetDescr(r->rel)->natts;
	int			ncols = 0;
	ListCell   *lc;

	/* the INSERT's expressions over the SELECT's columns, now as Vars of s */
	given_by_targets(query, r);
	for (int a = 0; a < natts; a++)
		if (r->given[a] != NULL)
		{
			r->given[a] = copyObject(r->given[a]);
			ChangeVarNodes(r->given[a], sub_rti, 1, 0);
		}
	/* one level deeper: its references to the INSERT's WITH, too */
	IncrementVarSublevelsUp((Node *) inner->subquery, 1, 1);
	inner->alias = makeAlias("sw_select", NIL);
	inner->inFromCl = true;		/* deparsed (Citus) with its FROM */
	wrap->commandType = CMD_SELECT;
	wrap->querySource = QSRC_ORIGINAL;
	wrap->canSetTag = true;
	wrap->rtable = list_make1(inner);
	ref->rtindex = 1;
	wrap->jointree = makeFromExpr(list_make1(ref), NULL);
	foreach(lc, inner->subquery->targetList)
	{
		TargetEntry *tle = lfirst(lc);

		if (tle->resjunk)
			continue;
		/*
		 * A literal of unknown type, which the INSERT copied up rather than
		 * read from the SELECT (see transformInsertStmt), becomes text, as
		 * a top-level SELECT's would: Citus cannot pass on a column of
		 * unknown type from a subquery it plans on its own.
		 */
		if (exprType((Node *) tle->expr) == UNKNOWNOID)
			tle->expr = (Expr *) coerce_type(NULL, (Node *) tle->expr, UNKNOWNOID, TEXTOID, -1,
											 COERCION_IMPLICIT, COERCE_IMPLICIT_CAST, -1);
		ncols++;
		wrap->targetList = lappend(wrap->targetList,
								   makeTargetEntry((Expr *) makeVarFromTargetEntry(1, tle),
												   ncols, tle->resname ? pstrdup(tle->resname) : NULL,
												   false));
	}
	ncols++;
	wrap->targetList = lappend(wrap->targetList,
							   makeTargetEntry(partition_of_row(r), ncols,
											   pstrdup("sw_partition"), false));
	sub->subquery = wrap;
	sub->eref->colnames = lappend(sub->eref->colnames, makeString(pstrdup("sw_partition")));
	return ncols;
}

/*
 * A multi-row VALUES list: each target is one of its columns; the
 * partition is computed in each row from that row's values, in the
 * column sw_partition's target names, or in a column added for it.
 * Returns that column's number.
 */
static int
partition_in_values(Query *query, RangeTblEntry *values, int values_rti, Route *r)
{
	int			natts = RelationGetDescr(r->rel)->natts;
	int		   *column = palloc0(natts * sizeof(int));
	int			pcol;
	List	   *lists = NIL;
	ListCell   *lc;

	foreach(lc, query->targetList)
	{
		TargetEntry *tle = lfirst(lc);
		Var		   *var = (Var *) tle->expr;

		if (tle->resjunk || tle->resno < 1 || tle->resno > natts)
			continue;
		if (!IsA(var, Var) || var->varno != values_rti || var->varlevelsup != 0)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot compute the partition of distributed stream %s for this INSERT",
							RelationGetRelationName(r->rel)),
					 errhint("Give sw_partition in the INSERT.")));
		column[tle->resno - 1] = var->varattno;
	}
	pcol = column[r->partition - 1];
	foreach(lc, values->values_lists)
	{
		List	   *vals = list_copy(lfirst(lc));

		for (int a = 0; a < natts; a++)
			r->given[a] = column[a] > 0 ? list_nth(vals, column[a] - 1) : NULL;
		if (pcol > 0)
			lfirst(list_nth_cell(vals, pcol - 1)) = partition_of_row(r);
		else
			vals = lappend(vals, partition_of_row(r));
		lists = lappend(lists, vals);
	}
	values->values_lists = lists;
	if (pcol > 0)
		return pcol;
	values->coltypes = lappend_oid(values->coltypes, INT4OID);
	values->coltypmods = lappend_int(values->coltypmods, -1);
	values->colcollations = lappend_oid(values->colcollations, InvalidOid);
	values->eref->colnames = lappend(values->eref->colnames, makeString(pstrdup("sw_partition")));
	return list_length(values->coltypes);
}

/*
 * Is given, an INSERT's target over its SELECT (source_rti), a column that
 * is never NULL: a NOT NULL column of a plain table without children (a
 * foreign table's is not enforced) that the SELECT reads directly (no outer
 * join, grouping set or set operation can make it NULL), such as another
 * stream's sw_partition?
 */
static bool
never_null(Query *select, Node *given, int source_rti)
{
	Var		   *var = (Var *) given;
	TargetEntry *tle;
	Var		   *col;
	RangeTblEntry *rte;
	ListCell   *lc;
	bool		direct = false;
	HeapTuple	tp;
	bool		notnull;

	if (given == NULL || !IsA(var, Var) || var->varno != source_rti || var->varlevelsup != 0 ||
		select->setOperations != NULL || select->groupingSets != NIL ||
		(tle = get_tle_by_resno(select->targetList, var->varattno)) == NULL)
		return false;
	col = (Var *) tle->expr;
	if (!IsA(col, Var) || col->varlevelsup != 0 || col->varattno <= 0)
		return false;
	foreach(lc, select->jointree->fromlist)
		if (IsA(lfirst(lc), RangeTblRef) && ((RangeTblRef *) lfirst(lc))->rtindex == col->varno)
			direct = true;
	rte = rt_fetch(col->varno, select->rtable);
	/* NOT NULL holds for a table's rows, not a foreign table's or child's */
	if (!direct || rte->rtekind != RTE_RELATION || rte->relkind != RELKIND_RELATION ||
		(rte->inh && has_subclass(rte->relid)))
		return false;
	tp = SearchSysCache2(ATTNUM, ObjectIdGetDatum(rte->relid), Int16GetDatum(col->varattno));
	if (!HeapTupleIsValid(tp))
		return false;
	notnull = ((Form_pg_attribute) GETSTRUCT(tp))->attnotnull;
	ReleaseSysCache(tp);
	return notnull;
}

/*
 * An INSERT into relid, a Citus distributed table: if it is a distributed
 * stream whose rows need their partition computed here (a key, and no
 * partition given; or a partition given that may be NULL), compute it as
 * the header says.
 */
static void
route_insert(Query *query, Oid relid)
{
	Relation	rel = table_open(relid, AccessShareLock);
	SwStreamColumns cols;
	Route		r;
	bool		is_stream;
	RangeTblEntry *source;
	int			source_rti = 0;
	TargetEntry *tle;
	Node	   *given;

	memset(&r, 0, sizeof(r));
	r.rel = rel;
	r.key = dist_partition_key(rel, NULL, &is_stream);
	if (!is_stream)
	{
		table_close(rel, AccessShareLock);
		return;
	}
	sw_check_stream_columns(rel, &cols);
	r.partition = cols.partition;
	r.write_time = cols.write_time;
	tle = target_of(query, cols.partition);
	given = tle != NULL ? (Node *) tle->expr : NULL;
	/* nothing to do: Citus routes by the partition given, or the DEFAULT's */
	if ((given != NULL && IsA(given, Const) && !((Const *) given)->constisnull) ||
		(given == NULL && r.key == NULL))
	{
		table_close(rel, AccessShareLock);
		return;
	}
	r.given = palloc0(RelationGetDescr(rel)->natts * sizeof(Node *));

	source = source_of(query, &source_rti);
	if (source != NULL && source->rtekind == RTE_SUBQUERY &&
		never_null(source->subquery, given, source_rti))
	{
		/* as given: Citus may still push a co-located INSERT ... SELECT down */
		table_close(rel, AccessShareLock);
		return;
	}
	if (source == NULL)
	{
		/* one row of expressions (or none: DEFAULT VALUES) */
		given_by_targets(query, &r);
		if (tle != NULL)
			tle->expr = partition_of_row(&r);
		else
			query->targetList = lappend(query->targetList,
										makeTargetEntry(partition_of_row(&r), cols.partition,
														pstrdup("sw_partition"), false));
	}
	else
	{
		int			col = source->rtekind == RTE_SUBQUERY ?
			partition_from_select(query, source, source_rti, &r) :
			partition_in_values(query, source, source_rti, &r);
		Var		   *var = makeVar(source_rti, col, INT4OID, -1, InvalidOid, 0);

		if (tle != NULL)
			tle->expr = (Expr *) var;
		else
			query->targetList = lappend(query->targetList,
										makeTargetEntry((Expr *) var, cols.partition,
														pstrdup("sw_partition"), false));
	}
	/* an INSERT's target list has no resjunk entries; the rewriter orders it */
	table_close(rel, AccessShareLock);
}

/*
 * post_parse_analyze (citus.c), with Citus installed: every INSERT of the
 * statement into a Citus distributed table, at its top or in a WITH (where
 * data-modifying statements may be), is given to route_insert.
 */
void
sw_citus_route_statement(Query *query)
{
	ListCell   *lc;

	if (query->commandType == CMD_INSERT && query->resultRelation > 0)
	{
		Oid			relid = rt_fetch(query->resultRelation, query->rtable)->relid;
		const char *kind = sw_citus_table_kind(relid);

		if (kind != NULL && strcmp(kind, "distributed table") == 0)
			route_insert(query, relid);
	}
	foreach(lc, query->cteList)
	{
		CommonTableExpr *cte = lfirst(lc);

		if (IsA(cte->ctequery, Query) && ((Query *) cte->ctequery)->commandType != CMD_SELECT)
			sw_citus_route_statement((Query *) cte->ctequery);
	}
}

/* The names a COPY's WHERE may qualify the stream's columns with. */
typedef struct StreamNames
{
	const char *db;
	const char *schema;
	const char *rel;
} StreamNames;

/*
 * ColumnRefs of a COPY's WHERE (raw) that name the stream (rel.col,
 * schema.rel.col, db.schema.rel.col), by their column name alone, since
 * the temporary table is in pg_temp and may have another name; others
 * (col.field of a composite column) are left as they are.
 */
static bool
unqualify_columns(Node *node, StreamNames *names)
{
	if (node == NULL)
		return false;
	if (IsA(node, ColumnRef))
	{
		ColumnRef  *ref = (ColumnRef *) node;
		int			n = list_length(ref->fields);
		const char *want[3] = {names->db, names->schema, names->rel};
		bool		names_rel = n >= 2 && n <= 4;

		/* the qualifiers, last to first, against rel, schema, db */
		for (int i = 0; names_rel && i < n - 1; i++)
		{
			Node	   *f = list_nth(ref->fields, n - 2 - i);

			names_rel = IsA(f, String) && strcmp(strVal(f), want[2 - i]) == 0;
		}
		if (names_rel && IsA(llast(ref->fields), String))
			ref->fields = list_make1(llast(ref->fields));
		return false;
	}
	return raw_expression_tree_walker(node, unqualify_columns, (void *) names);
}

/*
 * ProcessUtility (citus.c), before a COPY FROM into relid, a Citus
 * distributed table: a distributed stream with a partition_key, copied
 * into without sw_partition, cannot be handed to Citus (it routes COPY
 * rows as they come, with no statement to add the partition to).  So the
 * COPY goes into a temporary table of the stream's name and the copied
 * columns, whose rows an INSERT ... SELECT then moves into the stream (the
 * INSERT gets its partitions from the key: route_insert), and the
 * temporary table is dropped.  True if the COPY ran here.  The rows are
 * written twice on this node, which is the price of the key.
 */
bool
sw_citus_route_copy(PlannedStmt *pstmt, const char *queryString, Oid relid,
					QueryCompletion *qc)
{
	CopyStmt   *stmt = (CopyStmt *) pstmt->utilityStmt;
	Relation	rel;
	TupleDesc	desc;
	bool		is_stream;
	SwStreamColumns cols;
	StringInfoData create;
	StringInfoData names;
	CopyStmt   *into;
	ParseState *pstate;
	uint64		processed = 0;
	const char *temp;
	char	   *tempname;
	StreamNames names_of_stream;
	char	   *target;
	ListCell   *lc;
	int			nestlevel;

	rel = table_open(relid, AccessShareLock);
	if (dist_partition_key(rel, NULL, &is_stream) == NULL)
	{
		table_close(rel, AccessShareLock);
		return false;
	}
	sw_check_stream_columns(rel, &cols);
	desc = RelationGetDescr(rel);
	/* all columns, or sw_partition among them: Citus routes by the given one */
	if (stmt->attlist == NIL)
	{
		table_close(rel, AccessShareLock);
		return false;
	}
	foreach(lc, stmt->attlist)
		if (strcmp(strVal(lfirst(lc)), NameStr(TupleDescAttr(desc, cols.partition - 1)->attname)) == 0)
		{
			table_close(rel, AccessShareLock);
			return false;
		}

	/*
	 * The temporary table has the stream's name, so that an error in the
	 * COPY names it as the user wrote it; unless the session has a
	 * temporary relation of that name already.
	 */
	tempname = pstrdup(RelationGetRelationName(rel));
	if (OidIsValid(RangeVarGetRelid(makeRangeVar("pg_temp", tempname, -1), NoLock, true)))
		tempname = psprintf("sw_copy_%u", relid);
	temp = quote_identifier(tempname);
	target = sw_relation_name(relid);
	initStringInfo(&create);
	initStringInfo(&names);
	appendStringInfo(&create, "CREATE TEMPORARY TABLE pg_temp.%s (", temp);
	foreach(lc, stmt->attlist)
	{
		char	   *name = strVal(lfirst(lc));
		AttrNumber	attno = InvalidAttrNumber;
		Form_pg_attribute att;

		for (int i = 0; i < desc->natts; i++)
			if (!TupleDescAttr(desc, i)->attisdropped &&
				strcmp(NameStr(TupleDescAttr(desc, i)->attname), name) == 0)
				attno = i + 1;
		if (attno == InvalidAttrNumber)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("column \"%s\" of relation \"%s\" does not exist",
							name, RelationGetRelationName(rel))));
		att = TupleDescAttr(desc, attno - 1);
		appendStringInfo(&create, "%s%s %s", lc == list_head(stmt->attlist) ? "" : ", ",
						 quote_identifier(name),
						 format_type_extended(att->atttypid, att->atttypmod,
											  FORMAT_TYPE_TYPEMOD_GIVEN | FORMAT_TYPE_FORCE_QUALIFY));
		if (OidIsValid(att->attcollation) && att->attcollation != get_typcollation(att->atttypid))
		{
			HeapTuple	tp = SearchSysCache1(COLLOID, ObjectIdGetDatum(att->attcollation));
			Form_pg_collation coll;

			if (!HeapTupleIsValid(tp))
				elog(ERROR, "cache lookup failed for collation %u", att->attcollation);
			coll = (Form_pg_collation) GETSTRUCT(tp);
			/* qualified: the statement runs under pg_catalog, pg_temp */
			appendStringInfo(&create, " COLLATE %s",
							 quote_qualified_identifier(get_namespace_name(coll->collnamespace),
														NameStr(coll->collname)));
			ReleaseSysCache(tp);
		}
		appendStringInfo(&names, "%s%s", lc == list_head(stmt->attlist) ? "" : ", ",
						 quote_identifier(name));
	}
	appendStringInfoString(&create, ")");
	names_of_stream.db = get_database_name(MyDatabaseId);
	names_of_stream.schema = get_namespace_name(RelationGetNamespace(rel));
	names_of_stream.rel = pstrdup(RelationGetRelationName(rel));
	table_close(rel, AccessShareLock);

	/* the temporary table, made and dropped as the user: it is theirs */
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	nestlevel = sw_enter_safe_path();
	if (SPI_execute(create.data, false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "streamwm: creating the temporary table of a COPY into %s failed", target);
	sw_leave_safe_path(nestlevel);
	SPI_finish();

	/* the COPY, with its options, source and WHERE, into that table */
	into = copyObject(stmt);
	into->relation = makeRangeVar("pg_temp", tempname, -1);
	/* a WHERE can name only the stream's columns: as the temporary table's */
	(void) unqualify_columns(into->whereClause, &names_of_stream);
	pstate = make_parsestate(NULL);
	pstate->p_sourcetext = queryString;
	DoCopy(pstate, into, pstmt->stmt_location, pstmt->stmt_len, &processed);
	free_parsestate(pstate);

	/* its rows into the stream, as the user (the INSERT's own checks) */
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	nestlevel = sw_enter_safe_path();
	if (SPI_execute(psprintf("INSERT INTO %s (%s) SELECT %s FROM pg_temp.%s",
							 target, names.data, names.data, temp), false, 0) != SPI_OK_INSERT)
		elog(ERROR, "streamwm: moving the rows of a COPY into %s failed", target);
	if (SPI_execute(psprintf("DROP TABLE pg_temp.%s", temp), false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "streamwm: dropping the temporary table of a COPY into %s failed", target);
	sw_leave_safe_path(nestlevel);
	SPI_finish();

	if (qc)
		SetQueryCompletion(qc, CMDTAG_COPY, processed);
	return true;
}
