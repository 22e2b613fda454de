/*-------------------------------------------------------------------------
 * citus_route.c
 *	  Owns the partition of a row written into a distributed stream that
 *	  has a partition_key: chosen from the key before Citus routes the row
 *	  (DESIGN.md, "Citus: distributed streams").
 *
 * Citus routes a row to a shard by its sw_partition, on the node where the
 * statement runs, before any trigger sees the row; on a local stream the
 * key is hashed when the row is stored (ingest.c), which is too late.  So
 * an INSERT into such a stream that does not give sw_partition gets it
 * here, at parse analysis, on whichever node parses it: the key expression
 * (the third arm of the sw_ingest trigger's WHEN clause, which Citus keeps
 * with the table on every node) with each column replaced by what the
 * INSERT stores there (the value it gives, else the column's default, else
 * NULL; sw_write_time the clock when not given, as on a local stream), and
 * hashed as a local stream hashes it, by
 * streamwm_internal._hash_partition(key, partitions):
 *
 *	 INSERT INTO s (k, v) VALUES (1, 'a')
 *	   -> ... (k, v, sw_partition) VALUES (1, 'a', _hash_partition(1, n))
 *	 INSERT INTO s (k, v) VALUES (1, 'a'), (2, 'b')
 *	   -> a column added to the VALUES list, computed from each row's values
 *	 INSERT INTO s (k, v) SELECT x, y FROM ...
 *	   -> sw_partition = _hash_partition(<key over the SELECT's columns>, n)
 *
 * Citus evaluates the call where the statement runs and routes by its
 * result, as it does for sw_partition's DEFAULT.  A value that the key
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
#include "catalog/pg_type.h"
#include "commands/copy.h"
#include "executor/spi.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parse_func.h"
#include "parser/parse_node.h"
#include "parser/parsetree.h"
#include "rewrite/rewriteHandler.h"
#include "rewrite/rewriteManip.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/ruleutils.h"

#include "catalog.h"
#include "citus.h"
#include "guard.h"
#include "ingest.h"

/* A row's columns for the key: what the INSERT stores in each. */
typedef struct KeyRow
{
	Relation	rel;
	AttrNumber	write_time;		/* sw_write_time's attnum */
	Node	  **given;			/* by attnum - 1: the INSERT's expression, or NULL */
} KeyRow;

/*
 * The partition_key of distributed stream rel and its partition count, from
 * its sw_ingest trigger (two arguments: partitions, commit log); NULL if it
 * has none, or rel is no distributed stream.
 */
static Expr *
dist_partition_key(Relation rel, int *npartitions)
{
	TriggerDesc *td = rel->trigdesc;

	if (td == NULL)
		return NULL;
	for (int i = 0; i < td->numtriggers; i++)
	{
		Trigger    *t = &td->triggers[i];

		if (strcmp(t->tgname, "sw_ingest") == 0 && t->tgnargs == 2 &&
			t->tgqual != NULL && sw_is_ingest_function(t->tgfoid))
		{
			*npartitions = pg_strtoint32(t->tgargs[0]);
			if (*npartitions < 1)
				elog(ERROR, "invalid partition count in trigger on %s",
					 RelationGetRelationName(rel));
			return sw_ingest_partition_key(rel, t);
		}
	}
	return NULL;
}

/* The key's column Vars replaced by what the row stores there. */
static Node *
key_row_mutator(Node *node, KeyRow *row)
{
	if (node == NULL)
		return NULL;
	if (IsA(node, Var) && ((Var *) node)->varno == 1 &&
		((Var *) node)->varlevelsup == 0)
	{
		Var		   *var = (Var *) node;
		Node	   *e;

		if (var->varattno <= 0 || var->varattno > RelationGetDescr(row->rel)->natts)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("the partition_key of distributed stream %s uses the whole row",
							RelationGetRelationName(row->rel)),
					 errhint("Give sw_partition in the INSERT.")));
		e = row->given[var->varattno - 1];
		if (e != NULL && !IsA(e, SetToDefault))
		{
			if (contain_volatile_functions(e))
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("the value of column \"%s\" of distributed stream %s is volatile, and its partition_key uses it",
								NameStr(TupleDescAttr(RelationGetDescr(row->rel), var->varattno - 1)->attname),
								RelationGetRelationName(row->rel)),
						 errdetail("The partition is computed from the key before Citus routes the row, "
								   "so the value would be computed twice."),
						 errhint("Compute the value in a subquery (INSERT ... SELECT), or give sw_partition.")));
			return copyObject(e);
		}
		if (var->varattno == row->write_time)
			return (Node *) makeFuncExpr(F_CLOCK_TIMESTAMP, TIMESTAMPTZOID, NIL,
										 InvalidOid, InvalidOid, COERCE_EXPLICIT_CALL);
		e = build_column_default(row->rel, var->varattno);
		if (e != NULL)
		{
			if (contain_volatile_functions(e))
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("the default of column \"%s\" of distributed stream %s is volatile, and its partition_key uses it",
								NameStr(TupleDescAttr(RelationGetDescr(row->rel), var->varattno - 1)->attname),
								RelationGetRelationName(row->rel)),
						 errhint("Give the column's value, or sw_partition, in the INSERT.")));
			return e;
		}
		return (Node *) makeNullConst(var->vartype, var->vartypmod, var->varcollid);
	}
	return expression_tree_mutator(node, key_row_mutator, (void *) row);
}

/* streamwm_internal._hash_partition(<key over the row>, npartitions) */
static Expr *
partition_of_row(Expr *key, KeyRow *row, int npartitions)
{
	Oid			argtypes[2] = {ANYELEMENTOID, INT4OID};
	Oid			fn = LookupFuncName(list_make2(makeString("streamwm_internal"),
											   makeString("_hash_partition")),
									2, argtypes, false);
	Node	   *value = key_row_mutator((Node *) key, row);

	return (Expr *) makeFuncExpr(fn, INT4OID,
								 list_make2(value,
											makeConst(INT4OID, -1, InvalidOid, sizeof(int32),
													  Int32GetDatum(npartitions), false, true)),
								 InvalidOid, exprCollation(value), COERCE_EXPLICIT_CALL);
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

/*
 * INSERT ... SELECT: the SELECT becomes
 *	 SELECT s.*, _hash_partition(<key over s's columns>, n) FROM (<SELECT>) s
 * and sw_partition its last column: Citus inserts a SELECT's columns into
 * the target columns they stand for, so the partition must be one of them.
 */
static TargetEntry *
partition_from_select(Query *query, RangeTblEntry *sub, int sub_rti, Expr *key,
					  KeyRow *row, int npartitions, AttrNumber att_partition)
{
	Query	   *wrap = makeNode(Query);
	RangeTblEntry *inner = copyObject(sub);
	RangeTblRef *ref = makeNode(RangeTblRef);
	int			natts = RelationGetDescr(row->rel)->natts;
	int			ncols = 0;
	ListCell   *lc;

	/* the INSERT's expressions over the SELECT's columns, now as Vars of s */
	foreach(lc, query->targetList)
	{
		TargetEntry *tle = lfirst(lc);

		if (!tle->resjunk && tle->resno >= 1 && tle->resno <= natts)
		{
			Node	   *e = copyObject((Node *) tle->expr);

			ChangeVarNodes(e, sub_rti, 1, 0);
			row->given[tle->resno - 1] = e;
		}
	}
	/* one level deeper: its references to the INSERT's WITH, too */
	IncrementVarSublevelsUp((Node *) inner->subquery, 1, 1);
	inner->alias = makeAlias("sw_select", NIL);
	wrap->commandType = CMD_SELECT;
	wrap->querySource = QSRC_ORIGINAL;
	wrap->canSetTag = true;
	wrap->rtable = list_make1(inner);
	ref->rtindex = 1;
	wrap->jointree = makeFromExpr(list_make1(ref), NULL);
	foreach(lc, sub->subquery->targetList)
	{
		TargetEntry *tle = lfirst(lc);

		if (tle->resjunk)
			continue;
		ncols++;
		wrap->targetList = lappend(wrap->targetList,
								   makeTargetEntry((Expr *) makeVarFromTargetEntry(1, tle),
												   ncols, tle->resname ? pstrdup(tle->resname) : NULL,
												   false));
	}
	ncols++;
	wrap->targetList = lappend(wrap->targetList,
							   makeTargetEntry(partition_of_row(key, row, npartitions), ncols,
											   pstrdup("sw_partition"), false));
	sub->subquery = wrap;
	sub->eref->colnames = lappend(sub->eref->colnames, makeString(pstrdup("sw_partition")));
	return makeTargetEntry((Expr *) makeVar(sub_rti, ncols, INT4OID, -1, InvalidOid, 0),
						   att_partition, pstrdup("sw_partition"), false);
}

/*
 * post_parse_analyze (citus.c): an INSERT into relid, a Citus distributed
 * table.  If it is a distributed stream with a partition_key and the
 * INSERT does not give sw_partition, add sw_partition computed from the
 * key, as the header says.
 */
void
sw_citus_route_insert(Query *query, Oid relid)
{
	Relation	rel = table_open(relid, AccessShareLock);
	SwStreamColumns cols;
	Expr	   *key;
	int			npartitions = 0;
	int			natts = RelationGetDescr(rel)->natts;
	KeyRow		row;
	RangeTblEntry *source;
	int			source_rti = 0;
	TargetEntry *tle;
	ListCell   *lc;

	key = dist_partition_key(rel, &npartitions);
	if (key == NULL)
	{
		table_close(rel, AccessShareLock);
		return;
	}
	sw_check_stream_columns(rel, &cols);
	if (target_of(query, cols.partition) != NULL)
	{
		table_close(rel, AccessShareLock);
		return;
	}
	row.rel = rel;
	row.write_time = cols.write_time;
	row.given = palloc0(natts * sizeof(Node *));

	source = source_of(query, &source_rti);
	if (source != NULL && source->rtekind == RTE_SUBQUERY)
		tle = partition_from_select(query, source, source_rti, key, &row, npartitions,
									cols.partition);
	else if (source == NULL)
	{
		/* one row of expressions (or none: DEFAULT VALUES) */
		foreach(lc, query->targetList)
		{
			tle = lfirst(lc);
			if (!tle->resjunk && tle->resno >= 1 && tle->resno <= natts)
				row.given[tle->resno - 1] = (Node *) tle->expr;
		}
		tle = makeTargetEntry(partition_of_row(key, &row, npartitions), cols.partition,
							  pstrdup("sw_partition"), false);
	}
	else
	{
		/*
		 * Each target is a column of the VALUES list: the partition is a
		 * column more, computed in each row from that row's values.
		 */
		int		   *column = palloc0(natts * sizeof(int));
		List	   *lists = NIL;
		ListCell   *lr;
		int			newcol = list_length(source->coltypes) + 1;

		foreach(lc, query->targetList)
		{
			Var		   *var = (Var *) ((TargetEntry *) lfirst(lc))->expr;

			tle = lfirst(lc);
			if (tle->resjunk || tle->resno < 1 || tle->resno > natts)
				continue;
			if (!IsA(var, Var) || var->varno != source_rti || var->varlevelsup != 0)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot compute the partition_key of distributed stream %s for this INSERT",
								RelationGetRelationName(rel)),
						 errhint("Give sw_partition in the INSERT.")));
			column[tle->resno - 1] = var->varattno;
		}
		foreach(lr, source->values_lists)
		{
			List	   *vals = lfirst(lr);

			for (int a = 0; a < natts; a++)
				row.given[a] = column[a] > 0 ? list_nth(vals, column[a] - 1) : NULL;
			lists = lappend(lists, lappend(list_copy(vals),
										   partition_of_row(key, &row, npartitions)));
		}
		source->values_lists = lists;
		source->coltypes = lappend_oid(source->coltypes, INT4OID);
		source->coltypmods = lappend_int(source->coltypmods, -1);
		source->colcollations = lappend_oid(source->colcollations, InvalidOid);
		source->eref->colnames = lappend(source->eref->colnames, makeString(pstrdup("sw_partition")));
		tle = makeTargetEntry((Expr *) makeVar(source_rti, newcol, INT4OID, -1, InvalidOid, 0),
							  cols.partition, pstrdup("sw_partition"), false);
	}
	/* an INSERT's target list has no resjunk entries; the rewriter orders it */
	query->targetList = lappend(query->targetList, tle);
	table_close(rel, AccessShareLock);
}

/*
 * ProcessUtility (citus.c), before a COPY FROM into relid, a Citus
 * distributed table: a distributed stream with a partition_key, copied
 * into without sw_partition, cannot be handed to Citus (it routes COPY
 * rows as they come, with no statement to add the partition to).  So the
 * COPY goes into a temporary table of the stream's name and the copied
 * columns, whose rows an INSERT ... SELECT then moves into the stream (the
 * INSERT gets its partitions from the key: sw_citus_route_insert), and the
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
	int			npartitions;
	SwStreamColumns cols;
	StringInfoData create;
	StringInfoData names;
	CopyStmt   *into;
	ParseState *pstate;
	uint64		processed = 0;
	const char *temp;
	char	   *target;
	ListCell   *lc;
	int			nestlevel;

	rel = table_open(relid, AccessShareLock);
	if (dist_partition_key(rel, &npartitions) == NULL)
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

	temp = quote_identifier(RelationGetRelationName(rel));
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
			appendStringInfo(&create, " COLLATE %s", generate_collation_name(att->attcollation));
		appendStringInfo(&names, "%s%s", lc == list_head(stmt->attlist) ? "" : ", ",
						 quote_identifier(name));
	}
	appendStringInfoString(&create, ")");
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
	into->relation = makeRangeVar("pg_temp", RelationGetRelationName(rel), -1);
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
