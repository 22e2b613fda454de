/*-------------------------------------------------------------------------
 * pane.c
 *	  Owns the pane plan: whether a window query qualifies, the statements
 *	  derived from its analyzed tree, and the query's pane table (its
 *	  layout, stamp, rebuild and pruning).
 *
 * Each row is aggregated once, into its pane [n*hop, (n+1)*hop), when a
 * step first reads it (the fold): for the query
 *
 *	 SELECT k % 10 AS b, sum(v) / count(*) AS r FROM s WHERE v > 0
 *	  GROUP BY k % 10 HAVING max(v) > 5
 *
 * the fold is the user's tree with the stream replaced by the step's new
 * rows (each with its pane), grouped by pane and the GROUP BY expressions,
 * every aggregate call replaced by streamwm_internal.partial() of it (its partial
 * state, src/aggstate.c):
 *
 *	 SELECT s.sw_pane, s.k % 10, streamwm_internal.partial(<sum>, s.v),
 *			streamwm_internal.partial(<count>), streamwm_internal.partial(<max>, s.v)
 *	   FROM (<new rows>) s WHERE s.v > 0 GROUP BY s.sw_pane, s.k % 10
 *
 * A closing window combines its size/hop panes: the user's output
 * expressions and HAVING with each GROUP BY expression replaced by the pane
 * table's key column and each aggregate by streamwm_internal.combine() of its state
 * column (the aggregate's combine and final functions):
 *
 *	 SELECT ws, ws + size, sw_p.sw_k1,
 *			combine(sw_p.sw_a1, <sum>) / combine(sw_p.sw_a2, <count>)
 *	   FROM <panes> sw_p, <the closing windows containing sw_p.sw_pane> ws
 *	  GROUP BY ws, sw_p.sw_k1 HAVING combine(sw_p.sw_a3, <max>) > 5
 *
 * One statement per step: fold the new rows (sw_fresh); merge the states
 * of panes that windows still open need into the pane table (sw_keep);
 * combine every closing window from the pane table's rows and the fresh
 * ones (the statement's snapshot does not see what sw_keep writes, so
 * nothing counts twice); upsert the results, in the result key's order,
 * or INSERT them where that cannot differ (sw_result_plain_insert_ok).
 * Then the panes no open window needs are deleted, and query_def records
 * how far the query has folded, all in the step's transaction (SPEC
 * section 8: exactly once).
 *
 * Pane state is a cache of the retained rows: a pane table that is missing,
 * emptied, restored, of another layout, or built by another server version
 * or for other aggregates (its stamp) is made anew and the fold reads every
 * retained row of the open windows again.
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_aggregate.h"
#include "catalog/pg_am.h"
#include "catalog/pg_class.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "executor/spi.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "optimizer/paths.h"
#include "optimizer/planner.h"
#include "parser/parse_func.h"
#include "parser/parse_oper.h"
#include "parser/parsetree.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/ruleutils.h"
#include "utils/syscache.h"

#include "aggstate.h"
#include "catalog.h"
#include "citus_fold.h"
#include "limit.h"
#include "pane.h"
#include "query.h"
#include "result.h"
#include "step_cache.h"
#include "window.h"
#include "watermark.h"

/* Replacing the user's expressions by expressions over the pane table. */
typedef struct OverPanes
{
	int			nlead;			/* leading grouped columns of the state table */
	List	   *keys;			/* GROUP BY expressions, in key column order */
	List	   *aggs;			/* distinct aggregate calls, in state column order */
	bool		ungrouped;		/* a stream column outside keys and aggregates */
} OverPanes;

/* one of the pane plan's aggregates, in streamwm_internal */
static Oid
streamwm_function(const char *name, int nargs, const Oid *argtypes)
{
	return LookupFuncName(list_make2(makeString("streamwm_internal"), makeString(pstrdup(name))),
						  nargs, argtypes, false);
}

static bool
collect_aggs(Node *node, OverPanes *op)
{
	if (node == NULL)
		return false;
	if (IsA(node, Aggref))
	{
		ListCell   *lc;

		foreach(lc, op->aggs)
			if (equal(lfirst(lc), node))
				return false;
		op->aggs = lappend(op->aggs, node);
		return false;
	}
	return expression_tree_walker(node, collect_aggs, op);
}

/* Column n (1-based) of the pane table, as a Var of range-table entry 1. */
static Var *
pane_column(int n, Oid type, int32 typmod, Oid collation)
{
	return makeVar(1, n, type, typmod, collation, 0);
}

static TargetEntry *
arg(Expr *e, int resno)
{
	return makeTargetEntry(e, resno, NULL, false);
}

static Node *
over_panes_mutator(Node *node, OverPanes *op)
{
	ListCell   *lc;
	int			i = 0;

	if (node == NULL)
		return NULL;
	foreach(lc, op->keys)
	{
		Node	   *key = lfirst(lc);

		i++;
		if (equal(node, key))
			return (Node *) pane_column(op->nlead + i, exprType(key), exprTypmod(key),
										exprCollation(key));
	}
	if (IsA(node, Aggref))
	{
		Aggref	   *orig = (Aggref *) node;
		Aggref	   *a = makeNode(Aggref);
		Oid			types[3] = {BYTEAOID, OIDOID, ANYELEMENTOID};
		Const	   *result;
		int			j = 0;

		foreach(lc, op->aggs)
		{
			j++;
			if (equal(lfirst(lc), node))
				break;
		}
		result = makeNullConst(orig->aggtype, -1,
							   type_is_collatable(orig->aggtype) ? orig->inputcollid : InvalidOid);
		a->aggfnoid = streamwm_function("combine", 3, types);
		a->aggtype = orig->aggtype;
		a->aggcollid = orig->aggcollid;
		a->inputcollid = orig->inputcollid;
		a->aggargtypes = list_make3_oid(BYTEAOID, OIDOID, orig->aggtype);
		a->args = list_make3(arg((Expr *) pane_column(op->nlead + list_length(op->keys) + j,
													  BYTEAOID, -1, InvalidOid), 1),
							 arg((Expr *) makeConst(OIDOID, -1, InvalidOid, sizeof(Oid),
													ObjectIdGetDatum(orig->aggfnoid),
													false, true), 2),
							 arg((Expr *) result, 3));
		a->aggkind = AGGKIND_NORMAL;
		a->aggsplit = AGGSPLIT_SIMPLE;
		a->aggno = a->aggtransno = -1;
		a->location = -1;
		return (Node *) a;
	}
	if (IsA(node, Var) && ((Var *) node)->varlevelsup == 0)
		op->ungrouped = true;
	return expression_tree_mutator(node, over_panes_mutator, op);
}

/* The partial state of an aggregate call: streamwm_internal.partial(<aggregate>, <its arguments>). */
static Aggref *
partial_aggref(Aggref *orig)
{
	Aggref	   *a = makeNode(Aggref);
	Oid			types[2] = {OIDOID, ANYOID};
	ListCell   *lc;

	a->aggfnoid = streamwm_function("partial", orig->args == NIL ? 1 : 2, types);
	a->aggtype = BYTEAOID;
	a->inputcollid = orig->inputcollid;
	a->aggargtypes = list_make1_oid(OIDOID);
	a->args = list_make1(arg((Expr *) makeConst(OIDOID, -1, InvalidOid, sizeof(Oid),
												ObjectIdGetDatum(orig->aggfnoid), false, true),
							 1));
	foreach(lc, orig->args)
	{
		Expr	   *e = lfirst_node(TargetEntry, lc)->expr;

		a->aggargtypes = lappend_oid(a->aggargtypes, exprType((Node *) e));
		a->args = lappend(a->args, arg(copyObject(e), list_length(a->args) + 1));
	}
	a->aggfilter = copyObject(orig->aggfilter);
	a->aggkind = AGGKIND_NORMAL;
	a->aggsplit = AGGSPLIT_SIMPLE;
	a->aggno = a->aggtransno = -1;
	a->location = -1;
	return a;
}

/*
 * What replaces the stream in a fold: the rows a step has read and the
 * query has not folded yet (by offset, per partition, on the stream's
 * primary key), each with pane_sql (over sw_s) as one more column sw_pane
 * unless it is NULL.  In event time (by_event_time) only rows after the
 * floor and not late.  Parameters: $1 the query's start offset, $2 each
 * partition's processed offset, $4 each partition's folded offset (NULL:
 * none), $6 the floor (rows at or before it are in no window that is open
 * or re-fired: lo, or lo - allowed_lateness, sw_refire_floor; for
 * sessions, just before the earliest open session), $7 whether the late
 * log may hold rows of that range (sw_catalog_has_late_in): usually not,
 * and then no row is looked up in it (the lookup cost 1.5 - 2 us a row,
 * bench/results-e2e.md).  The floor is written "(... > $6) IS TRUE" so
 * that it cannot match the stream's BRIN index on sw_event_time: once the
 * stream had statistics, a kept plan replanned after ANALYZE read the rows
 * by event time through it (ranges nobody summarised match every scan),
 * 1.3 s a step over 6,000,000 rows with nothing new to read, instead of by
 * offset on the key.
 */
Query *
sw_fold_rows_query(Oid relid, const char *pane_sql, bool by_event_time)
{
	Oid			types[7] = {INT8OID, INT8ARRAYOID, TIMESTAMPTZOID, INT8ARRAYOID,
	TIMESTAMPTZOID, TIMESTAMPTZOID, BOOLOID};

	return sw_analyze_internal(psprintf("SELECT %s%s%s"
										" FROM pg_catalog.unnest($2::pg_catalog.int8[]) WITH ORDINALITY AS sw_o(done, n)"
										" CROSS JOIN LATERAL (SELECT sw_r.* FROM ONLY %s sw_r"
										" WHERE sw_r.sw_partition = (sw_o.n - 1)::pg_catalog.int4"
										" AND sw_r.sw_offset > GREATEST($1, coalesce(($4::pg_catalog.int8[])[sw_o.n], 0))"
										" AND sw_r.sw_offset <= sw_o.done) sw_s%s OFFSET 0",
										sw_stream_columns_sql(relid, "sw_s"),
										pane_sql ? ", " : "", pane_sql ? psprintf("%s AS sw_pane", pane_sql) : "",
										sw_stream_rows_name(relid),
										by_event_time ? psprintf(" WHERE (sw_s.sw_event_time > $6) IS TRUE AND (NOT $7 OR %s)",
																 sw_not_late_sql(relid)) : ""),
							   types, lengthof(types));
}

/*
 * The pane plan's fold rows: each with its pane [n*hop, (n+1)*hop).
 * Processing time (SPEC section 11): every row a step reads goes to the
 * pane of the step's clock ($5 + size: the step passes its clock minus size
 * as hi), late or not.
 */
static Query *
fold_rows_query(Oid relid, int64 hop_us, TimestampTz origin, int64 processing_size_us)
{
	if (processing_size_us > 0)
		return sw_fold_rows_query(relid,
								  sw_window_start_sql(psprintf("($5 + %s)",
															   sw_interval_literal(processing_size_us)),
													  hop_us, origin),
								  false);
	return sw_fold_rows_query(relid, sw_window_start_sql("sw_s.sw_event_time", hop_us, origin),
							  true);
}

/*
 * Why a query does not qualify for the pane plan (the general plan then
 * computes it), or NULL when it does.
 */
static const char *
refusal(Query *q, Oid relid)
{
	RangeTblEntry *rte;

	if (list_length(q->rtable) != 1)
		return "it reads more than the stream";
	rte = linitial(q->rtable);
	if (rte->rtekind != RTE_RELATION || rte->relid != relid)
		return "it reads the stream through a subquery";
	if (q->hasSubLinks || q->cteList != NIL)
		return "it has a subquery or WITH";
	if (q->groupingSets != NIL || q->hasWindowFuncs || q->hasTargetSRFs ||
		q->distinctClause != NIL || q->sortClause != NIL || q->setOperations != NULL)
		return "it has grouping sets, window functions, set-returning functions, DISTINCT or ORDER BY";
	if (!q->hasAggs && q->groupClause == NIL)
		return "it does not aggregate";
	return NULL;
}

/*
 * The partial-aggregate plan of query q (analyzed) over stream relid, its
 * stream replaced in the fold by rows (the stream's columns, then nlead +
 * ntrail more columns named lead[]), or NULL (and *why) when the query
 * does not qualify.  The fold groups by those columns and the query's
 * GROUP BY expressions, and outputs the nlead lead columns, the keys, the
 * partial states, then the ntrail others (functions of the lead columns
 * and keys, which the state table does not hold).
 */
PanePlan *
sw_partial_plan(Oid relid, Query *q, Query *rows, const char *const *lead, int nlead,
				int ntrail, const char *suffix, const char **why)
{
	Query	   *fq;
	PanePlan   *pp;
	OverPanes	op;
	ListCell   *lc;
	List	   *tlist = NIL;
	List	   *trail = NIL;
	List	   *group = NIL;
	RangeTblEntry *rte;
	Index		maxref = 0;
	int			ncols;
	int			i;

	*why = refusal(q, relid);
	if (*why != NULL)
		return NULL;

	memset(&op, 0, sizeof(op));
	op.nlead = nlead;
	foreach(lc, q->groupClause)
	{
		Node	   *key = get_sortgroupclause_expr(lfirst_node(SortGroupClause, lc),
												   q->targetList);

		if (!OidIsValid(GetDefaultOpClass(exprType(key), BTREE_AM_OID)))
		{
			*why = "a GROUP BY expression's type has no default btree operator class";
			return NULL;
		}
		if (contain_volatile_functions(key))
		{
			*why = "a GROUP BY expression is volatile";
			return NULL;
		}
		op.keys = lappend(op.keys, key);
	}
	(void) collect_aggs((Node *) q->targetList, &op);
	(void) collect_aggs(q->havingQual, &op);
	foreach(lc, op.aggs)
	{
		Aggref	   *a = lfirst_node(Aggref, lc);

		if (a->aggdistinct != NIL || a->aggorder != NIL)
		{
			*why = "an aggregate call has DISTINCT or ORDER BY";
			return NULL;
		}
		if (a->aggvariadic || a->agglevelsup != 0)
		{
			*why = "an aggregate call is VARIADIC";
			return NULL;
		}
		*why = sw_agg_piecewise_refusal(a->aggfnoid);
		if (*why != NULL)
			return NULL;
	}

	pp = palloc0(sizeof(PanePlan));
	pp->nlead = nlead;
	pp->lead = lead;
	pp->suffix = suffix;
	foreach(lc, q->targetList)
	{
		TargetEntry *tle = lfirst_node(TargetEntry, lc);

		if (!tle->resjunk)
			pp->outputs = lappend(pp->outputs,
								  over_panes_mutator(copyObject((Node *) tle->expr), &op));
		maxref = Max(maxref, tle->ressortgroupref);
	}
	pp->having = over_panes_mutator(copyObject(q->havingQual), &op);
	if (op.ungrouped)
	{
		*why = "it outputs a column that is neither grouped nor aggregated";
		return NULL;
	}

	/* the fold: the user's tree over the new rows, grouped by lead and keys */
	fq = copyObject(q);
	if (sw_replace_stream(fq, relid, rows) != 1)
		elog(ERROR, "stream %u not replaced in the fold", relid);
	rte = linitial(fq->rtable);
	ncols = list_length(rte->eref->colnames);
	for (i = 0; i < nlead + ntrail; i++)
		rte->eref->colnames = lappend(rte->eref->colnames, makeString(pstrdup(lead[i])));
	pp->lead_types = palloc(sizeof(Oid) * (nlead + ntrail));
	for (i = 0; i < nlead + ntrail; i++)
	{
		SortGroupClause *sgc = makeNode(SortGroupClause);
		TargetEntry *col = list_nth_node(TargetEntry, rows->targetList, ncols + i);
		TargetEntry *tle;

		pp->lead_types[i] = exprType((Node *) col->expr);
		tle = makeTargetEntry((Expr *) makeVar(1, ncols + i + 1, pp->lead_types[i],
											   -1, InvalidOid, 0),
							  i + 1, pstrdup(lead[i]), false);
		tle->ressortgroupref = maxref + i + 1;
		if (i < nlead)
			tlist = lappend(tlist, tle);
		else
			trail = lappend(trail, tle);
		sgc->tleSortGroupRef = maxref + i + 1;
		get_sort_group_operators(pp->lead_types[i], true, true, false,
								 &sgc->sortop, &sgc->eqop, NULL, &sgc->hashable);
		group = lappend(group, sgc);
	}
	pp->nkeys = list_length(op.keys);
	pp->key_types = palloc(sizeof(Oid) * (pp->nkeys + 1));
	pp->key_typmods = palloc(sizeof(int32) * (pp->nkeys + 1));
	pp->key_collations = palloc(sizeof(Oid) * (pp->nkeys + 1));
	i = 0;
	foreach(lc, q->groupClause)
	{
		SortGroupClause *orig = lfirst_node(SortGroupClause, lc);
		TargetEntry *key = get_sortgroupclause_tle(orig, q->targetList);

		pp->key_types[i] = exprType((Node *) key->expr);
		pp->key_typmods[i] = exprTypmod((Node *) key->expr);
		pp->key_collations[i] = exprCollation((Node *) key->expr);
		i++;
		tlist = lappend(tlist, makeTargetEntry(copyObject(key->expr), list_length(tlist) + 1,
											   psprintf("sw_k%d", i), false));
		llast_node(TargetEntry, tlist)->ressortgroupref = key->ressortgroupref;
		group = lappend(group, copyObject(orig));
	}
	pp->naggs = list_length(op.aggs);
	pp->aggs = palloc(sizeof(Oid) * (pp->naggs + 1));
	i = 0;
	foreach(lc, op.aggs)
	{
		Aggref	   *a = lfirst_node(Aggref, lc);

		pp->aggs[i++] = a->aggfnoid;
		tlist = lappend(tlist, makeTargetEntry((Expr *) partial_aggref(a), list_length(tlist) + 1,
											   psprintf("sw_a%d", i), false));
	}
	foreach(lc, trail)
	{
		TargetEntry *tle = lfirst_node(TargetEntry, lc);

		tle->resno = list_length(tlist) + 1;
		tlist = lappend(tlist, tle);
	}
	fq->targetList = tlist;
	fq->groupClause = group;
	fq->groupDistinct = false;
	fq->havingQual = NULL;
	fq->hasAggs = pp->naggs > 0;
	pp->fold_select = sw_deparse_query(fq);
	return pp;
}

/*
 * The pane plan of a query over stream relid (hopping windows: the state
 * is kept per pane, sw_pane), or NULL (and *why) when it does not qualify.
 */
PanePlan *
sw_pane_plan(Oid relid, const char *query, int64 hop_us, TimestampTz origin,
			 int64 processing_size_us, const char **why)
{
	static const char *const lead[1] = {"sw_pane"};
	Query	   *q = sw_analyze_window_query(query);
	PanePlan   *pp;

	*why = refusal(q, relid);
	if (*why != NULL)
		return NULL;
	pp = sw_partial_plan(relid, q, fold_rows_query(relid, hop_us, origin, processing_size_us),
						 lead, 1, 0, "panes", why);
	if (pp != NULL)
		pp->remote_fold = sw_citus_fold_sql(relid, q, hop_us, origin, processing_size_us);
	return pp;
}

/* A state table's columns: the lead ones, sw_k1, .., sw_a1, .. */
char *
sw_state_columns(const PanePlan *pp, const char *prefix, bool lead_and_keys_only)
{
	StringInfoData s;

	initStringInfo(&s);
	for (int i = 0; i < pp->nlead; i++)
		appendStringInfo(&s, "%s%s%s", i > 0 ? ", " : "", prefix, pp->lead[i]);
	for (int i = 1; i <= pp->nkeys; i++)
		appendStringInfo(&s, ", %ssw_k%d", prefix, i);
	if (!lead_and_keys_only)
		for (int i = 1; i <= pp->naggs; i++)
			appendStringInfo(&s, ", %ssw_a%d", prefix, i);
	return s.data;
}

/*
 * What a pane table's contents depend on: the server version, the table's
 * file (a restore or TRUNCATE makes a new one), the states' format and key
 * (sw_state_stamp) and the aggregates.
 */
char *
sw_pane_stamp(const PanePlan *pp, Oid pane_table)
{
	HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(pane_table));
	StringInfoData s;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for relation %u", pane_table);
	initStringInfo(&s);
	appendStringInfo(&s, "%d:%u:%s:", PG_VERSION_NUM,
					 ((Form_pg_class) GETSTRUCT(tup))->relfilenode, sw_state_stamp());
	ReleaseSysCache(tup);
	for (int i = 0; i < pp->naggs; i++)
		appendStringInfo(&s, "%s%u", i > 0 ? "," : "", pp->aggs[i]);
	return s.data;
}

/* Does the pane table have exactly the plan's columns? */
static bool
pane_layout_matches(const PanePlan *pp, Oid pane_table)
{
	Relation	rel = table_open(pane_table, AccessShareLock);
	TupleDesc	desc = RelationGetDescr(rel);
	int			n = 0;
	bool		ok = true;

	for (int i = 0; i < desc->natts && ok; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		Oid			type;
		int32		typmod = -1;

		if (att->attisdropped)
		{
			ok = false;
			break;
		}
		if (n < pp->nlead)
			type = pp->lead_types[n];
		else if (n < pp->nlead + pp->nkeys)
		{
			type = pp->key_types[n - pp->nlead];
			typmod = pp->key_typmods[n - pp->nlead];
		}
		else
			type = BYTEAOID;
		ok = att->atttypid == type && att->atttypmod == typmod;
		n++;
	}
	table_close(rel, AccessShareLock);
	return ok && n == pp->nlead + pp->nkeys + pp->naggs;
}

/*
 * Make sure the query's pane table is there and valid, as the query's owner
 * (the current user); *rebuild is set when it was made or emptied: the fold
 * then reads every retained row of the open windows again (rows are kept
 * until every window that needs them closed).
 */
void
sw_ensure_pane_table(SwQueryDef *def, const PanePlan *pp, bool *rebuild)
{
	Oid			nsp;
	char	   *name;
	StringInfoData sql;

	*rebuild = false;
	if (OidIsValid(def->pane_table))
	{
		if (!pane_layout_matches(pp, def->pane_table))
		{
			sw_spi_exec(psprintf("DROP TABLE %s", sw_relation_name(def->pane_table)),
						0, NULL, NULL, NULL, SPI_OK_UTILITY);
			def->pane_table = InvalidOid;
		}
		else
		{
			if (def->pane_stamp != NULL &&
				strcmp(sw_pane_stamp(pp, def->pane_table), def->pane_stamp) == 0)
				return;
			sw_spi_exec(psprintf("TRUNCATE %s", sw_relation_name(def->pane_table)),
						0, NULL, NULL, NULL, SPI_OK_UTILITY);
		}
	}
	if (!OidIsValid(def->pane_table))
	{
		sw_require_result_table(def);
		nsp = get_rel_namespace(def->result_table);
		name = ChooseRelationName(get_rel_name(def->result_table), NULL, pp->suffix, nsp, false);
		initStringInfo(&sql);
		appendStringInfo(&sql, "CREATE TABLE %s (",
						 quote_qualified_identifier(get_namespace_name(nsp), name));
		for (int i = 0; i < pp->nlead; i++)
			appendStringInfo(&sql, "%s%s %s", i > 0 ? ", " : "", pp->lead[i],
							 format_type_be_qualified(pp->lead_types[i]));
		for (int i = 0; i < pp->nkeys; i++)
		{
			appendStringInfo(&sql, ", sw_k%d %s", i + 1,
							 format_type_with_typemod(pp->key_types[i], pp->key_typmods[i]));
			if (OidIsValid(pp->key_collations[i]) &&
				pp->key_collations[i] != DEFAULT_COLLATION_OID)
				appendStringInfo(&sql, " COLLATE %s",
								 generate_collation_name(pp->key_collations[i]));
		}
		for (int i = 0; i < pp->naggs; i++)
			appendStringInfo(&sql, ", sw_a%d pg_catalog.bytea", i + 1);
		/* panes are merged on conflict; sessions are written anew each step */
		if (pp->nlead == 1)
			appendStringInfo(&sql, ", UNIQUE NULLS NOT DISTINCT (%s)",
							 sw_state_columns(pp, "", true));
		appendStringInfoChar(&sql, ')');
		sw_spi_exec(sql.data, 0, NULL, NULL, NULL, SPI_OK_UTILITY);
		sw_spi_exec(psprintf("COMMENT ON TABLE %s IS %s",
							 quote_qualified_identifier(get_namespace_name(nsp), name),
							 quote_literal_cstr(psprintf("streamwm: %s state of query %s (a cache; "
														 "rebuilt from the stream when emptied or dropped)",
														 pp->nlead == 1 ? "pane" : "session",
														 def->name))),
					0, NULL, NULL, NULL, SPI_OK_UTILITY);
		CommandCounterIncrement();
		def->pane_table = get_relname_relid(name, nsp);
	}
	CommandCounterIncrement();
	*rebuild = true;
}

/*
 * Record in the catalog the query's pane table, its stamp, and how far the
 * step folded (NULL: not at all).
 */
void
sw_record_panes(SwQueryDef *def, const PanePlan *pp, Datum folded)
{
	char	   *stamp = sw_pane_stamp(pp, def->pane_table);

	sw_catalog_record_panes(def->name, def->pane_table, stamp, folded);
	def->folded_offsets = folded;
	def->pane_stamp = stamp;
}

/*
 * A partial plan's outputs over its state: "o1, o2, ..." (the query's
 * outputs, each GROUP BY expression replaced by its key column, each
 * aggregate by streamwm_internal.combine() of its states, over the state
 * table's columns under the alias sw_p), and, to follow a GROUP BY of the
 * caller's own columns, ", sw_p.sw_k1, ... [HAVING ...]".  Deparsed under
 * the safe search path.  Panes, sessions and count chunks share it.
 */
void
sw_state_outputs(const SwQueryDef *def, const PanePlan *pp, char **outputs, char **group_tail)
{
	List	   *dpcontext = deparse_context_for("sw_p", def->pane_table);
	int			nestlevel = sw_enter_safe_path();
	StringInfoData out;
	StringInfoData tail;
	ListCell   *lc;

	initStringInfo(&out);
	foreach(lc, pp->outputs)
		appendStringInfo(&out, "%s%s", out.len > 0 ? ", " : "",
						 deparse_expression(lfirst(lc), dpcontext, true, false));
	initStringInfo(&tail);
	for (int i = 1; i <= pp->nkeys; i++)
		appendStringInfo(&tail, ", sw_p.sw_k%d", i);
	if (pp->having != NULL)
		appendStringInfo(&tail, " HAVING %s",
						 deparse_expression(pp->having, dpcontext, true, false));
	sw_leave_safe_path(nestlevel);
	*outputs = out.data;
	*group_tail = tail.data;
}

/*
 * "sw_a1 = (merge of alias.sw_a1 and EXCLUDED.sw_a1), ...": the states of a
 * state row that an insert ran into (ON CONFLICT ... DO UPDATE SET), merged
 * by each aggregate's combine function; "" without aggregates.
 */
char *
sw_merge_states_sql(const PanePlan *pp, const char *alias)
{
	StringInfoData s;

	initStringInfo(&s);
	for (int i = 1; i <= pp->naggs; i++)
		appendStringInfo(&s, "%ssw_a%d = (SELECT streamwm_internal.merge(sw_v.sw_y, '%u'::pg_catalog.oid)"
						 " FROM (VALUES (%s.sw_a%d), (EXCLUDED.sw_a%d)) sw_v(sw_y))",
						 i > 1 ? ", " : "", i, pp->aggs[i - 1], alias, i, i);
	return s.data;
}

/*
 * The step's statement for a query of the pane plan (see the head
 * comment).  Parameters: $1 start offset, $2 processed offsets, $3 lo
 * (closed_until - size), $4 folded offsets (NULL: none), $5 hi (W - size),
 * $6 the re-fire floor (sw_refire_floor: lo unless allowed_lateness).
 * It returns the windows closed, the rows, the most rows of a window, and
 * the windows re-fired.
 *
 * With allowed_lateness L, a row accepted with t < W may fall into windows
 * that closed already: the closed windows (start in ($6, $3]) that contain
 * a fresh pane are combined again, from the pane table and the fresh
 * panes, in the same statement as the closing ones (sw_refire).  Panes are
 * kept while a window that may still re-fire needs them (sw_pane > $5 - L).
 */
static char *
pane_statement(const SwQueryDef *def, const PanePlan *pp, bool upsert)
{
	char	   *panes = sw_relation_name(def->pane_table);
	StringInfoData combine;
	char	   *ctes;
	char	   *columns = sw_state_columns(pp, "", false);
	char	   *outputs;
	char	   *group_tail;
	char	   *size = sw_interval_literal(def->size_us);
	char	   *hop = sw_interval_literal(def->hop_us);
	bool		late = def->lateness_us > 0;
	char	   *lateness = sw_interval_literal(def->lateness_us);

	/*
	 * The fresh panes open windows still need (after $5 - L) go into the
	 * pane table: merged into a stored row of the same pane and key where
	 * one may exist (sw_keep), inserted where none can, in a pane after
	 * the newest stored one (sw_add: a plain INSERT; the upsert's arbiter
	 * probe of every row was 7.5% of a step that read 200,000 Nexmark bids
	 * at once).  The panes no open window needs any more (at or before $5
	 * - L) are deleted (sw_prune: as a statement of its own it was planned
	 * at every step and read the whole pane table).  The step before
	 * deleted those up to its own $5 - L, which is this one's $3 - L (lo is
	 * closed_until - size), and nothing reads a pane at or before $3 - L
	 * (the combine reads after $3, the re-fire after sw_refire_floor), so
	 * the delete reads only the panes after it: from the start, it walked
	 * over the index entries of every pane deleted before that vacuum had
	 * not removed yet.  The three touch disjoint panes, and every read of
	 * the statement sees the pane table as it was before it.
	 */
	{
		char	   *bound = late ? psprintf("$5 - %s", lateness) : "$5";
		char	   *top = psprintf("(SELECT pg_catalog.max(sw_pane) FROM %s)", panes);

		char	   *fresh = pp->fold_select;

		/*
		 * Folded on the nodes (citus_fold.c): their partial states, $8, of
		 * a pane and key that several partitions have merged here.
		 */
		if (pp->remote_fold != NULL)
		{
			StringInfoData f;

			initStringInfo(&f);
			appendStringInfo(&f, "SELECT %s", sw_state_columns(pp, "sw_f.", true));
			for (int i = 1; i <= pp->naggs; i++)
				appendStringInfo(&f, ", streamwm_internal.merge(sw_f.sw_a%d, '%u'::pg_catalog.oid)",
								 i, pp->aggs[i - 1]);
			appendStringInfo(&f, " FROM pg_catalog.unnest($8::%s[]) sw_f GROUP BY %s",
							 panes, sw_state_columns(pp, "sw_f.", true));
			fresh = f.data;
		}
		ctes = psprintf("sw_fresh(%s) AS (%s), sw_keep AS (INSERT INTO %s AS sw_t (%s)"
						" SELECT * FROM sw_fresh WHERE sw_fresh.sw_pane > %s AND sw_fresh.sw_pane <= %s"
						" ON CONFLICT (%s) DO %s RETURNING 1),"
						" sw_add AS (INSERT INTO %s (%s) SELECT * FROM sw_fresh"
						" WHERE sw_fresh.sw_pane > %s AND (sw_fresh.sw_pane > %s) IS NOT FALSE RETURNING 1),"
						" sw_prune AS (DELETE FROM %s WHERE sw_pane > %s AND sw_pane <= %s RETURNING 1), ",
						columns, fresh, panes, columns, bound, top,
						sw_state_columns(pp, "", true),
						pp->naggs > 0 ? psprintf("UPDATE SET %s", sw_merge_states_sql(pp, "sw_t")) : "NOTHING",
						panes, columns, bound, top,
						panes, late ? psprintf("$3 - %s", lateness) : "$3", bound);
	}
	/* the closed windows that fresh panes fall into: combined again */
	if (late)
		ctes = psprintf("%ssw_refire AS (SELECT DISTINCT sw_w.sw_ws FROM sw_fresh"
						" CROSS JOIN LATERAL streamwm_internal.pane_windows(sw_fresh.sw_pane, $6, $3, %s, %s)"
						" AS sw_w(sw_ws)), ",
						ctes, hop, size);

	/*
	 * Each pane expands only to the closing windows that contain it (window
	 * starts are aligned: the first after $3, the last at or before $5), so
	 * a step reads each needed pane row once per closing window, never
	 * size/hop times.
	 */
	sw_state_outputs(def, pp, &outputs, &group_tail);
	initStringInfo(&combine);
	appendStringInfo(&combine, "SELECT sw_p.sw_ws, sw_p.sw_ws + %s, %s", size, outputs);
	appendStringInfo(&combine,
					 " FROM (SELECT sw_u.*, streamwm_internal.pane_windows(sw_u.sw_pane, $3, $5, %s, %s) AS sw_ws"
					 " FROM (SELECT %s FROM %s UNION ALL SELECT %s FROM sw_fresh) AS sw_u"
					 " WHERE sw_u.sw_pane > $3 AND sw_u.sw_pane < $5 + %s",
					 hop, size, columns, panes, columns, size);
	if (late)
		appendStringInfo(&combine,
						 " UNION ALL SELECT sw_u.*, sw_r.sw_ws"
						 " FROM (SELECT %s FROM %s UNION ALL SELECT %s FROM sw_fresh) AS sw_u"
						 " JOIN sw_refire sw_r ON sw_u.sw_pane >= sw_r.sw_ws"
						 " AND sw_u.sw_pane < sw_r.sw_ws + %s",
						 columns, panes, columns, size);
	appendStringInfo(&combine, ") AS sw_p GROUP BY sw_p.sw_ws%s%s", group_tail,
					 sw_result_key_order(def));

	return (upsert ? sw_upsert_statement : sw_plain_insert_statement)
		(def, ctes, combine.data, NULL,
		 "SELECT pg_catalog.count(*) FILTER (WHERE sw_c.ws > $3),"
		 " coalesce(pg_catalog.sum(sw_c.n), 0)::pg_catalog.int8,"
		 " coalesce(pg_catalog.max(sw_c.n), 0),"
		 " pg_catalog.count(*) FILTER (WHERE sw_c.ws <= $3)"
		 " FROM (SELECT window_start AS ws, pg_catalog.count(*) AS n"
		 " FROM sw_ins GROUP BY window_start) sw_c");
}

char *
sw_pane_statement(const SwQueryDef *def, const PanePlan *pp)
{
	return pane_statement(def, pp, true);
}

/*
 * The parameter types of the pane plan's statement (types has room for
 * SW_PANE_MAX_NPARAMS); returns their number.  Folded on the nodes, $8 is
 * their partial states, an array of the pane table's row type.
 */
static int
pane_param_types(const SwQueryDef *def, const PanePlan *pp, Oid *types)
{
	static const Oid local[SW_PANE_NPARAMS] = {INT8OID, INT8ARRAYOID, TIMESTAMPTZOID,
	INT8ARRAYOID, TIMESTAMPTZOID, TIMESTAMPTZOID, BOOLOID};
	Oid			rows;

	memcpy(types, local, sizeof(local));
	if (pp->remote_fold == NULL)
		return SW_PANE_NPARAMS;
	rows = get_array_type(get_rel_type_id(def->pane_table));
	if (!OidIsValid(rows))
		elog(ERROR, "pane table of query %s has no array type", def->name);
	types[SW_PANE_NPARAMS] = rows;
	return SW_PANE_NPARAMS + 1;
}

/*
 * The fold hashed.  A fold groups the step's rows by pane and key: far
 * fewer groups than rows (200,000 Nexmark bids: 17,260), which a hash
 * aggregate keeps in memory where a sort orders every row.  The planner
 * cannot see it: the pane is an expression, so it counts one group per row,
 * and with the stream's statistics it sorted (one process() of 200,000
 * bids, size/hop 1: statement 205 ms sorted, 141 ms hashed; a 2,000,000-row
 * backlog sorted on disk).  The combine must stay as the planner likes it:
 * it groups nearly as many rows as it has, and its output is ordered for
 * the result's key anyway (hashing it then sorting cost more).  So while a
 * pane statement is planned, the grouping of its fold, and only that, is
 * planned with enable_sort off: from when the fold's FROM has its paths
 * (set_rel_pathlist_hook) until its grouping paths are made
 * (create_upper_paths_hook).  The fold is the query level whose first
 * output is sw_pane and that has a GROUP BY (pane_statement).  The setting
 * is made at the caller's GUC nest level, which an error or the end of
 * planning undoes.
 */
static set_rel_pathlist_hook_type prev_rel_pathlist_hook = NULL;
static create_upper_paths_hook_type prev_upper_paths_hook = NULL;
static bool fold_planning = false;	/* make_pane_plans is running */
static PlannerInfo *fold_root = NULL;	/* whose grouping is being planned */
static bool fold_saved_enable_sort;

static bool
is_fold(PlannerInfo *root)
{
	Query	   *q = root->parse;
	TargetEntry *first;

	if (q->commandType != CMD_SELECT || q->groupClause == NIL || q->targetList == NIL)
		return false;
	first = linitial_node(TargetEntry, q->targetList);
	return first->resname != NULL && strcmp(first->resname, "sw_pane") == 0;
}

static void
set_enable_sort(bool on)
{
	(void) set_config_option("enable_sort", on ? "on" : "off", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
}

static void
fold_rel_pathlist(PlannerInfo *root, RelOptInfo *rel, Index rti, RangeTblEntry *rte)
{
	if (prev_rel_pathlist_hook)
		prev_rel_pathlist_hook(root, rel, rti, rte);
	if (fold_planning && fold_root == NULL && is_fold(root))
	{
		fold_root = root;
		fold_saved_enable_sort = enable_sort;
		set_enable_sort(false);
	}
}

static void
fold_upper_paths(PlannerInfo *root, UpperRelationKind stage, RelOptInfo *input_rel,
				 RelOptInfo *output_rel, void *extra)
{
	if (prev_upper_paths_hook)
		prev_upper_paths_hook(root, stage, input_rel, output_rel, extra);
	if (fold_planning && stage == UPPERREL_GROUP_AGG && root == fold_root)
	{
		set_enable_sort(fold_saved_enable_sort);
		fold_root = NULL;
	}
}

/* _PG_init: the hooks are installed once, and act only in make_pane_plans */
void
sw_pane_init(void)
{
	prev_rel_pathlist_hook = set_rel_pathlist_hook;
	set_rel_pathlist_hook = fold_rel_pathlist;
	prev_upper_paths_hook = create_upper_paths_hook;
	create_upper_paths_hook = fold_upper_paths;
}

/*
 * Make the plans of a pane statement, its fold hashed (above).  User code
 * run while they are planned may step another stream, whose statement is
 * planned inside this one's: each level keeps its own fold.
 */
static void
make_pane_plans(SwStepEntry *e)
{
	bool		outer_planning = fold_planning;
	PlannerInfo *outer_root = fold_root;
	bool		outer_saved = fold_saved_enable_sort;

	fold_planning = true;
	fold_root = NULL;
	PG_TRY();
	{
		sw_step_entry_make_plans(e);
	}
	PG_FINALLY();
	{
		fold_planning = outer_planning;
		fold_root = outer_root;
		fold_saved_enable_sort = outer_saved;
	}
	PG_END_TRY();
}

/*
 * Run a step of a pane-plan query: fold, keep, combine and upsert the
 * windows starting in (lo, hi], delete the panes no open window needs, and
 * record how far the query folded.  As the query's owner.
 */
void
sw_pane_upsert_windows(SwQueryDef *def, SwStepEntry *e, Datum offsets,
					   TimestampTz lo, TimestampTz hi, int64 *windows, int64 *rows,
					   int64 *refired)
{
	const PanePlan *pp = e->pane_plan;
	Datum		values[SW_PANE_MAX_NPARAMS];
	char		nulls[SW_PANE_MAX_NPARAMS] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};
	Oid			types[SW_PANE_MAX_NPARAMS];
	int			nparams;
	bool		rebuild;
	bool		isnull;
	int			nestlevel;

	sw_ensure_pane_table(def, pp, &rebuild);
	nparams = pane_param_types(def, pp, types);
	if (e->plan == NULL || e->statement_pane_table != def->pane_table)
	{
		char	   *sql = sw_pane_statement(def, pp);

		/* privileges before planning: see sw_check_statement_privileges */
		sw_check_statement_privileges(sql, nparams, types);
		sw_step_entry_set_statement(e, sql, nparams, types, def->pane_table,
									CURSOR_OPT_GENERIC_PLAN);
		if (sw_result_plain_insert_ok(def))
			sw_step_entry_set_insert(e, pane_statement(def, pp, false), nparams, types);
	}
	values[0] = Int64GetDatum(def->start_offset);
	values[1] = offsets;
	values[2] = TimestampTzGetDatum(lo);
	/*
	 * A rebuild folds every retained row of the open windows again, except
	 * in processing time: when a row was read is not in the stream, so the
	 * panes lost are lost (their rows are not counted twice).
	 */
	if ((rebuild && !def->processing) || def->folded_offsets == (Datum) 0)
		nulls[3] = 'n';
	else
		values[3] = def->folded_offsets;
	values[4] = TimestampTzGetDatum(hi);
	/* after a rebuild the fold holds every row: the re-fire too (same results) */
	values[5] = TimestampTzGetDatum(sw_refire_floor(def, lo));
	values[6] = BoolGetDatum(!def->processing &&
							 sw_catalog_has_late_in(def->stream, def->start_offset, offsets,
													nulls[3] == 'n' ? (Datum) 0 : values[3]));
	if (pp->remote_fold != NULL)
		values[7] = sw_citus_fold(def, pp, offsets,
								  nulls[3] == 'n' ? (Datum) 0 : values[3],
								  def->processing ? hi : DatumGetTimestampTz(values[5]),
								  DatumGetBool(values[6]));
	/*
	 * The statement reads the stream by offset, per partition, on its key:
	 * the range a step reads is narrow, but a generic plan cannot know it
	 * (the parameters' selectivity is a default, times the stream's size)
	 * and, once the stream had statistics, chose a sequential scan of the
	 * whole stream with the floor as its filter: 0.5 s a step over
	 * 6,000,000 rows with nothing new to read.  The query's FROM is the
	 * stream alone (refusal()): no join of the user's loses by this, and
	 * the rest the statement reads (pane table, late log, the result's key)
	 * it reads by index.  (The fold's grouping is planned with sorts off
	 * as well: make_pane_plans.)  Materialize is off too: the step's rows are read per partition of the
	 * parameter array, estimated at 10 partitions, and with a work_mem that
	 * holds the estimated rows (streamwm.work_mem's 64MB) the planner read
	 * them once into a Materialize node for the 10 rescans instead of
	 * hashing the array; with one partition it only copied 2,000,000 rows
	 * (bench/nexmark.sh size/hop 5, 6.6 s with work_mem 4MB, 9.7 s with
	 * 64MB).  The settings hold only while the (generic) plans are made: the user's
	 * code the statement runs, and the plans it makes and keeps, see the
	 * session's.  (With plan_cache_mode = force_custom_plan the step plans
	 * its statement again as it runs, under the session's settings.)
	 */
	nestlevel = NewGUCNestLevel();
	(void) set_config_option("enable_seqscan", "off", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	(void) set_config_option("enable_material", "off", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	make_pane_plans(e);
	AtEOXact_GUC(true, nestlevel);
	sw_step_entry_execute(e, def->name, values, nulls);
	*windows = DatumGetInt64(sw_spi_getdatum(0, 1, &isnull));
	*rows = DatumGetInt64(sw_spi_getdatum(0, 2, &isnull));
	sw_check_groups_per_window(def->name, DatumGetInt64(sw_spi_getdatum(0, 3, &isnull)));
	*refired = DatumGetInt64(sw_spi_getdatum(0, 4, &isnull));

	sw_record_panes(def, pp, offsets);
}

/*
 * Plan a pane-plan query's statement as its owner, for create_query and
 * alter_query: the pane table is made now (or emptied, for a new text).
 * Returns the statement, its parameters' number and types (room for
 * SW_PANE_MAX_NPARAMS), and the value of $8 for a run over no rows when it
 * folds on the nodes (whose fold is run once over no rows here).  Only a pane table made
 * or emptied here is recorded as folded from nothing: one whose state is
 * valid keeps how far it was folded (streamwm_internal._check_query can be
 * called on a running query, whose next step would otherwise fold every
 * retained row into its panes a second time).
 */
char *
sw_pane_check(SwQueryDef *def, const PanePlan *pp, Oid *types, int *nparams, Datum *fresh)
{
	bool		rebuild;

	sw_ensure_pane_table(def, pp, &rebuild);
	sw_record_panes(def, pp, rebuild ? (Datum) 0 : def->folded_offsets);
	*nparams = pane_param_types(def, pp, types);
	if (pp->remote_fold != NULL)
	{
		sw_citus_fold_check(def, pp->remote_fold);
		*fresh = PointerGetDatum(construct_empty_array(get_rel_type_id(def->pane_table)));
	}
	return sw_pane_statement(def, pp);
}
