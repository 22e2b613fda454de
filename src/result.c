/*-------------------------------------------------------------------------
 * result.c
 *	  Owns result tables (SPEC section 5): the columns and key a query's
 *	  result table has (its GROUP BY outputs are the key; a key that can be
 *	  NULL makes it UNIQUE NULLS NOT DISTINCT), and the UPSERT that writes a
 *	  step's windows into it.
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/relation.h"
#include "catalog/pg_attribute.h"
#include "catalog/pg_class.h"
#include "catalog/pg_index.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "nodes/nodeFuncs.h"
#include "nodes/parsenodes.h"
#include "optimizer/optimizer.h"
#include "parser/parse_clause.h"
#include "parser/parsetree.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/relcache.h"
#include "utils/syscache.h"

#include "catalog.h"
#include "query.h"
#include "result.h"
#include "version.h"

PG_FUNCTION_INFO_V1(streamwm_query_columns);
PG_FUNCTION_INFO_V1(streamwm_routing_column);

/* Does the query have an outer join anywhere in its FROM? */
static bool
has_outer_join(Node *node)
{
	if (node == NULL)
		return false;
	if (IsA(node, JoinExpr))
	{
		JoinExpr   *j = (JoinExpr *) node;

		return j->jointype != JOIN_INNER || has_outer_join(j->larg) ||
			has_outer_join(j->rarg);
	}
	if (IsA(node, FromExpr))
	{
		ListCell   *lc;

		foreach(lc, ((FromExpr *) node)->fromlist)
		{
			if (has_outer_join(lfirst(lc)))
				return true;
		}
	}
	return false;
}

/*
 * Can a GROUP BY output be NULL?  Only a plain column of a table, NOT NULL
 * there and not on the nullable side of an outer join, is known not to be;
 * everything else may be (SPEC section 5: a NULL key is a group like any
 * other, so the result table's key is then UNIQUE NULLS NOT DISTINCT).
 */
static bool
key_can_be_null(Query *q, TargetEntry *tle)
{
	Var		   *var = (Var *) tle->expr;
	RangeTblEntry *rte;
	HeapTuple	tup;
	bool		notnull;

	if (!IsA(var, Var) || var->varlevelsup != 0 || var->varattno <= 0 ||
		has_outer_join((Node *) q->jointree))
		return true;
	rte = rt_fetch(var->varno, q->rtable);
	if (rte->rtekind != RTE_RELATION)
		return true;
	tup = SearchSysCache2(ATTNUM, ObjectIdGetDatum(rte->relid),
						  Int16GetDatum(var->varattno));
	if (!HeapTupleIsValid(tup))
		return true;
	notnull = ((Form_pg_attribute) GETSTRUCT(tup))->attnotnull;
	ReleaseSysCache(tup);
	return !notnull;
}

/*
 * Is a GROUP BY output the stream's own sw_partition column, read directly
 * from the stream (not through a join's alias or an expression)?  Then each
 * result row belongs to one partition of the stream: a distributed stream's
 * result table can live with that partition (sw_routing_column).
 */
static bool
key_is_partition(Query *q, TargetEntry *tle, Oid relid)
{
	Var		   *var = (Var *) tle->expr;
	RangeTblEntry *rte;

	if (!IsA(var, Var) || var->varlevelsup != 0 || var->varattno <= 0)
		return false;
	rte = rt_fetch(var->varno, q->rtable);
	return rte->rtekind == RTE_RELATION && rte->relid == relid &&
		var->varattno == get_attnum(relid, "sw_partition");
}

/*
 * Which top-level range-table entry of q is the stream, for an ordered
 * query: 0 unless the stream is read exactly once in the whole query, and
 * that once in its own FROM.
 */
int
sw_ordered_stream_rte(Query *q, Oid relid)
{
	ListCell   *lc;
	int			rti = 0;

	if (sw_replace_stream(copyObject(q), relid, NULL) != 1)
		return 0;
	foreach(lc, q->rtable)
	{
		RangeTblEntry *rte = lfirst_node(RangeTblEntry, lc);

		if (rte->rtekind == RTE_RELATION && rte->relid == relid)
			rti = foreach_current_index(lc) + 1;
	}
	return rti;
}

/*
 * Describe the output of a window query (ordered: of an ordered query, SPEC
 * section 11, which emits each accepted row once instead of aggregating):
 * its columns in order, with their types and whether they are GROUP BY
 * keys.  Checks the SPEC's rules.
 */
static List *
output_columns(Query *q, Oid relid, bool ordered)
{
	List	   *result = NIL;
	ListCell   *lc;
	int			pos = 0;
	const char *reserved1 = ordered ? "seq" : "window_start";
	const char *reserved2 = ordered ? "event_time" : "window_end";

	{
		List	   *relids = sw_query_relids(q);

		if (!list_member_oid(relids, relid))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("query does not read stream %s", sw_relation_name(relid))));
	}

	if (q->groupingSets != NIL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("GROUPING SETS, ROLLUP and CUBE are not supported in a window query")));
	if (q->hasTargetSRFs)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("set-returning functions are not supported in a window query's output")));
	if (q->hasWindowFuncs)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("window functions are not supported in a window query")));

	if (ordered)
	{
		if (q->hasAggs || q->groupClause != NIL || q->havingQual != NULL ||
			q->distinctClause != NIL || q->sortClause != NIL ||
			q->limitCount != NULL || q->limitOffset != NULL || q->setOperations != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("a query with hop and size NULL must not aggregate, group, sort, limit or be DISTINCT"),
					 errdetail("It emits each accepted row of the stream once, in event-time order.")));
		if (sw_ordered_stream_rte(q, relid) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("a query with hop and size NULL must read stream %s exactly once, in its own FROM",
							sw_relation_name(relid)),
					 errdetail("Each output row is ordered by the event time of the stream row it comes from.")));
	}
	else if (!q->hasAggs && q->groupClause == NIL)
		ereport(ERROR,
				(errcode(ERRCODE_GROUPING_ERROR),
				 errmsg("a window query must aggregate"),
				 errdetail("Its result is one row per window and group."),
				 errhint("Use aggregate functions, GROUP BY, or both.")));

	foreach(lc, q->groupClause)
	{
		SortGroupClause *sgc = lfirst_node(SortGroupClause, lc);
		TargetEntry *tle = get_sortgroupclause_tle(sgc, q->targetList);

		if (tle->resjunk)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_COLUMN_REFERENCE),
					 errmsg("every GROUP BY expression must also be an output column"),
					 errdetail("GROUP BY item %d is not in the SELECT list.",
							   foreach_current_index(lc) + 1),
					 errhint("The GROUP BY columns are the key of the result table.")));
	}

	foreach(lc, q->targetList)
	{
		TargetEntry *tle = lfirst_node(TargetEntry, lc);
		SwOutputColumn *col;
		ListCell   *lc2;

		if (tle->resjunk)
			continue;
		pos++;
		if (tle->resname == NULL || strcmp(tle->resname, "?column?") == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_COLUMN_DEFINITION),
					 errmsg("output column %d of the query has no name", pos),
					 errhint("Name it with AS.")));
		if (strcmp(tle->resname, reserved1) == 0 || strcmp(tle->resname, reserved2) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_DUPLICATE_COLUMN),
					 errmsg("output column name \"%s\" is reserved for the %s",
							tle->resname, ordered ? "sequence number and event time" : "window bounds")));
		foreach(lc2, result)
		{
			if (strcmp(((SwOutputColumn *) lfirst(lc2))->name, tle->resname) == 0)
				ereport(ERROR,
						(errcode(ERRCODE_DUPLICATE_COLUMN),
						 errmsg("output column name \"%s\" appears more than once",
								tle->resname)));
		}
		col = palloc(sizeof(SwOutputColumn));
		col->name = pstrdup(tle->resname);
		col->type = format_type_with_typemod(exprType((Node *) tle->expr),
											 exprTypmod((Node *) tle->expr));
		col->is_key = false;
		col->nullable = key_can_be_null(q, tle);
		col->routes = false;
		if (tle->ressortgroupref != 0)
		{
			ListCell   *lc3;

			foreach(lc3, q->groupClause)
			{
				if (lfirst_node(SortGroupClause, lc3)->tleSortGroupRef == tle->ressortgroupref)
					col->is_key = true;
			}
			col->routes = col->is_key && !col->nullable &&
				key_is_partition(q, tle, relid);
		}
		if (exprType((Node *) tle->expr) == UNKNOWNOID ||
			exprType((Node *) tle->expr) == RECORDOID)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("output column \"%s\" has no storable type (%s)",
							tle->resname, col->type),
					 errhint("Cast it.")));
		result = lappend(result, col);
	}
	return result;
}

/* The output columns of a window query, after checking its shape. */
List *
sw_query_columns(Oid relid, const char *query)
{
	return output_columns(sw_analyze_window_query(query), relid, false);
}

/* The output columns of an ordered query (hop and size NULL). */
List *
sw_ordered_columns(Oid relid, const char *query)
{
	return output_columns(sw_analyze_window_query(query), relid, true);
}

/*
 * The output column of a window query that is a GROUP BY on the stream's
 * sw_partition (the first such, never NULL), or NULL: a distributed
 * stream's result table is distributed by it, co-located with the stream
 * (citus.c, sw_citus_refuse_result_table; streamwm_internal._result_table).
 */
char *
sw_routing_column(Oid relid, const char *query)
{
	ListCell   *lc;

	foreach(lc, sw_query_columns(relid, query))
	{
		SwOutputColumn *col = lfirst(lc);

		if (col->routes)
			return col->name;
	}
	return NULL;
}

/* streamwm_internal._routing_column(stream regclass, query text) RETURNS text */
Datum
streamwm_routing_column(PG_FUNCTION_ARGS)
{
	char	   *name;

	sw_require_extension_version();
	name = sw_routing_column(PG_GETARG_OID(0), text_to_cstring(PG_GETARG_TEXT_PP(1)));
	if (name == NULL)
		PG_RETURN_NULL();
	PG_RETURN_TEXT_P(cstring_to_text(name));
}

/*
 * streamwm_internal._query_columns(stream regclass, query text)
 *	 RETURNS SETOF (colname text, coltype text, is_key boolean)
 */
Datum
streamwm_query_columns(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	List	   *cols;
	ListCell   *lc;

	sw_require_extension_version();

	cols = PG_NARGS() > 2 && PG_GETARG_BOOL(2) ?
		sw_ordered_columns(PG_GETARG_OID(0), text_to_cstring(PG_GETARG_TEXT_PP(1))) :
		sw_query_columns(PG_GETARG_OID(0), text_to_cstring(PG_GETARG_TEXT_PP(1)));
	InitMaterializedSRF(fcinfo, 0);
	foreach(lc, cols)
	{
		SwOutputColumn *col = lfirst(lc);
		Datum		values[4];
		bool		nulls[4] = {false, false, false, false};

		values[0] = CStringGetTextDatum(col->name);
		values[1] = CStringGetTextDatum(col->type);
		values[2] = BoolGetDatum(col->is_key);
		values[3] = BoolGetDatum(col->is_key && col->nullable);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/*
 * A chain (SPEC section 10): the windows' rows go into another stream, each
 * with its window_start as sw_write_time (the event time there), in window
 * order, so that none is late downstream however small its delay.  The
 * stream's window_start and window_end columns, if it has them, are filled
 * too.  Its insert trigger gives them partitions and offsets, and they
 * arrive when the step commits.  Exactly once: a window closes once.
 */
static char *
chain_statement(const SwQueryDef *def, List *cols, const char *ctes, const char *select,
				const char *window_start, const char *result)
{
	StringInfoData sql;
	StringInfoData names;
	StringInfoData values;
	ListCell   *lc;
	Oid			stream = def->result_table;

	initStringInfo(&sql);
	initStringInfo(&names);
	initStringInfo(&values);
	appendStringInfoString(&names, "sw_write_time");
	appendStringInfoString(&values, "sw_o.sw_ws");
	if (get_attnum(stream, "window_start") != InvalidAttrNumber)
	{
		appendStringInfoString(&names, ", window_start");
		appendStringInfoString(&values, ", sw_o.sw_ws");
	}
	if (get_attnum(stream, "window_end") != InvalidAttrNumber)
	{
		appendStringInfoString(&names, ", window_end");
		appendStringInfoString(&values, ", sw_o.sw_we");
	}
	foreach(lc, cols)
	{
		SwOutputColumn *col = lfirst(lc);
		const char *name = quote_identifier(col->name);

		appendStringInfo(&names, ", %s", name);
		appendStringInfo(&values, ", sw_o.%s", name);
	}
	appendStringInfo(&sql, "WITH %ssw_ins AS (INSERT INTO %s AS sw_r (%s) SELECT %s FROM (",
					 ctes ? ctes : "", sw_relation_name(stream), names.data, values.data);
	if (window_start)
		appendStringInfo(&sql, "SELECT %s, %s + %s, sw_q.* FROM (%s) sw_q",
						 window_start, window_start, sw_interval_literal(def->size_us), select);
	else
		appendStringInfoString(&sql, select);
	appendStringInfoString(&sql, ") sw_o(sw_ws, sw_we");
	foreach(lc, cols)
		appendStringInfo(&sql, ", %s", quote_identifier(((SwOutputColumn *) lfirst(lc))->name));
	appendStringInfo(&sql, ") ORDER BY sw_o.sw_ws RETURNING sw_r.sw_write_time AS window_start) %s",
					 result);
	return sql.data;
}

/* A clear error when a query's result table is gone (dropped by its owner). */
void
sw_require_result_table(const SwQueryDef *def)
{
	if (!OidIsValid(def->result_table))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("result table %s of query \"%s\" does not exist",
						def->result_name, def->name),
				 errhint("Create it again with the same columns and key, or drop the query.")));
}

/* The output column of that name, or NULL. */
SwOutputColumn *
sw_output_column(List *cols, const char *name)
{
	ListCell   *lc;

	foreach(lc, cols)
	{
		if (strcmp(((SwOutputColumn *) lfirst(lc))->name, name) == 0)
			return lfirst(lc);
	}
	return NULL;
}

/*
 * " ORDER BY 1, <key positions>": the order of the result table's key
 * (window_start, then the GROUP BY outputs in output order), for a select
 * whose columns are window_start, window_end and the query's outputs.  A
 * step that closes many windows inserts their rows in key order, so each
 * insertion lands at the right edge of the key index instead of at a
 * random leaf (with 7,000,000 result rows in one step, half the time of
 * the upsert went to descents of the key index and their buffer lookups).
 */
char *
sw_result_key_order(const SwQueryDef *def)
{
	StringInfoData order;
	ListCell   *lc;
	int			pos = 3;

	initStringInfo(&order);
	appendStringInfoString(&order, " ORDER BY 1");
	foreach(lc, sw_query_columns(def->stream, def->query))
	{
		if (((SwOutputColumn *) lfirst(lc))->is_key)
			appendStringInfo(&order, ", %d", pos);
		pos++;
	}
	return order.data;
}

/*
 * The statement that writes a query's rows: "INSERT ... <select> ON
 * CONFLICT ... DO UPDATE ..." (upsert), or the same INSERT without the ON
 * CONFLICT clause (see sw_result_plain_insert_ok).
 */
static char *
insert_statement(const SwQueryDef *def, const char *ctes, const char *select,
				 const char *window_start, const char *result, bool upsert)
{
	List	   *cols;
	StringInfoData sql;
	StringInfoData keys;
	StringInfoData sets;
	ListCell   *lc;

	sw_require_result_table(def);
	cols = sw_query_columns(def->stream, def->query);
	if (def->result_stream)
		return chain_statement(def, cols, ctes, select, window_start, result);
	initStringInfo(&sql);
	initStringInfo(&keys);
	initStringInfo(&sets);
	appendStringInfoString(&keys, "window_start");
	appendStringInfoString(&sets, "window_end = EXCLUDED.window_end");
	appendStringInfo(&sql, "WITH %ssw_ins AS (INSERT INTO %s AS sw_r (window_start, window_end",
					 ctes ? ctes : "", sw_relation_name(def->result_table));
	foreach(lc, cols)
	{
		SwOutputColumn *col = lfirst(lc);
		const char *name = quote_identifier(col->name);

		appendStringInfo(&sql, ", %s", name);
		if (col->is_key)
			appendStringInfo(&keys, ", %s", name);
		else
			appendStringInfo(&sets, ", %s = EXCLUDED.%s", name, name);
	}
	appendStringInfoString(&sql, ") ");
	if (window_start)
		appendStringInfo(&sql, "SELECT %s, %s + %s, sw_q.* FROM (%s) sw_q",
						 window_start, window_start, sw_interval_literal(def->size_us), select);
	else
		appendStringInfoString(&sql, select);
	if (upsert)
		appendStringInfo(&sql, "\nON CONFLICT (%s) DO UPDATE SET %s", keys.data, sets.data);
	appendStringInfo(&sql, " RETURNING sw_r.window_start) %s", result);
	return sql.data;
}

/* The upsert of a query's rows: "INSERT ... <select> ON CONFLICT ...". */
char *
sw_upsert_statement(const SwQueryDef *def, const char *ctes, const char *select,
					const char *window_start, const char *result)
{
	return insert_statement(def, ctes, select, window_start, result, true);
}

/* The same statement as a plain INSERT, for sw_result_plain_insert_ok. */
char *
sw_plain_insert_statement(const SwQueryDef *def, const char *ctes, const char *select,
						  const char *window_start, const char *result)
{
	return insert_statement(def, ctes, select, window_start, result, false);
}

/*
 * May a step write the query's windows with a plain INSERT, and the upsert
 * only when that meets an existing key (see sw_step_entry_execute)?  The
 * upsert's arbiter probe is a second descent of the key index for every
 * row; windows that close for the first time have no row yet, except when
 * someone wrote one (the table's owner, recompute(), a query made again
 * over a kept table).  Only where nothing could tell the two apart:
 *
 * - no re-firing (allowed_lateness 0: every window a step writes closes now
 *	 for the first time), and not a chain (its result stream numbers rows);
 * - a plain table without triggers, rules or row-level security (an upsert
 *	 fires UPDATE statement triggers and checks UPDATE policies even when
 *	 nothing conflicts, and a BEFORE INSERT trigger would run twice for rows
 *	 written before a conflict that is then retried);
 * - the key index the upsert arbitrates on is there (without it the upsert
 *	 fails, and an INSERT would store a second row for a key);
 * - a publication of the table's updates could take them (the upsert fails
 *	 on a table without a replica identity whether or not a row conflicts).
 *
 * A trigger, policy, publication or index made later invalidates the
 * relation's cache entry and with it the step's plans.
 */
bool
sw_result_plain_insert_ok(const SwQueryDef *def)
{
	Relation	rel;
	PublicationDesc pubdesc;
	bool		ok;

	if (def->lateness_us > 0 || def->result_stream || !OidIsValid(def->result_table))
		return false;
	rel = try_relation_open(def->result_table, AccessShareLock);
	if (rel == NULL)
		return false;
	ok = rel->rd_rel->relkind == RELKIND_RELATION && !rel->rd_rel->relhastriggers &&
		!rel->rd_rel->relhasrules && !rel->rd_rel->relrowsecurity &&
		sw_result_has_key_index(rel, sw_query_columns(def->stream, def->query));
	if (ok)
	{
		RelationBuildPublicationDesc(rel, &pubdesc);
		if (pubdesc.pubactions.pubupdate &&
			(!pubdesc.rf_valid_for_update || !pubdesc.cols_valid_for_update ||
			 (rel->rd_rel->relreplident != REPLICA_IDENTITY_FULL &&
			  !OidIsValid(RelationGetReplicaIndex(rel)))))
			ok = false;
	}
	relation_close(rel, AccessShareLock);
	return ok;
}

/*
 * Does the result table have a unique index the upsert can use: on exactly
 * window_start and the key columns, without predicate or expressions, NULLS
 * NOT DISTINCT when a key can be NULL (as create_query requires), not
 * deferrable (ON CONFLICT cannot arbitrate on a deferrable one)?
 */
bool
sw_result_has_key_index(Relation rel, List *cols)
{
	List	   *indexes = RelationGetIndexList(rel);
	int			nkeys = 1;
	bool		nullable = false;
	ListCell   *lc;

	foreach(lc, cols)
	{
		SwOutputColumn *c = lfirst(lc);

		if (c->is_key)
		{
			nkeys++;
			nullable |= c->nullable;
		}
	}
	foreach(lc, indexes)
	{
		HeapTuple	tup = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(lfirst_oid(lc)));
		Form_pg_index ix;
		bool		ok;

		if (!HeapTupleIsValid(tup))
			continue;
		ix = (Form_pg_index) GETSTRUCT(tup);
		ok = ix->indisunique && ix->indisvalid && ix->indimmediate && ix->indnkeyatts == nkeys &&
			(ix->indnullsnotdistinct || !nullable) &&
			heap_attisnull(tup, Anum_pg_index_indpred, NULL) &&
			heap_attisnull(tup, Anum_pg_index_indexprs, NULL);
		for (int i = 0; ok && i < ix->indnkeyatts; i++)
		{
			char	   *att = get_attname(RelationGetRelid(rel), ix->indkey.values[i], true);
			SwOutputColumn *c;

			if (att == NULL)
				ok = false;
			else if (strcmp(att, "window_start") != 0)
			{
				c = sw_output_column(cols, att);
				ok = c != NULL && c->is_key;
			}
		}
		ReleaseSysCache(tup);
		if (ok)
			return true;
	}
	return false;
}
