/*-------------------------------------------------------------------------
 * session.c
 *	  Owns session windows (SPEC section 11): create_session_query's
 *	  checks, the statement a step runs for a session query, and its step.
 *
 * Per group (the query's GROUP BY keys; NULL keys are a group), a session
 * is a maximal run of accepted events that pass the query's WHERE whose
 * event times are less than gap apart.  It closes when W >= last + gap;
 * its row has window_start = its first event time, window_end = last +
 * gap, and is keyed (window_start, group keys).
 *
 * A step never reads a row twice when the query's aggregates can be kept
 * as partial states (every one has a combine function, as for the pane
 * plan, src/pane.c): the query keeps each open session in a state table
 * (<result>_sessions: sw_start, sw_last, the group keys, a partial state
 * per aggregate).  A step folds the rows it read that the query has not
 * folded (by offset, as the pane plan's fold) into the sessions of those
 * rows alone, per group (gaps-and-islands with window functions), each
 * with its partial states; merges them with the open sessions of the
 * state table into islands (sorted by first event per group, one starts a
 * new island when its first event is gap or more after every last event
 * before it); upserts the islands that closed (last + gap <= W) with each
 * aggregate's combine and final functions, and replaces the state rows of
 * the islands that closed or took fresh sessions by the open ones, their
 * states merged.  One statement: WITH sw_fresh (the fold), sw_isl (the
 * islands), sw_old (DELETE of the replaced rows, by ctid), sw_keep
 * (INSERT of the touched open islands), sw_ins (the upsert).  A step
 * reads its new rows and the open sessions, and writes only those that
 * changed, however long they have been open.
 *
 * The state is a cache, as panes are: rows of open sessions are retained
 * (session_from: the first event time of the earliest session still open,
 * or W when none is), so a state table that is missing, emptied, restored
 * or built by another server version is made anew from them (the fold
 * then reads every retained row from session_from on; a closed session
 * whose tail it reads again ends at or before closed_until and is not
 * written again).  Why that is exact: an accepted event has t >= W when it
 * is read, so it can only extend or merge open sessions: a session whose
 * end is <= W is final.
 *
 * Queries with an aggregate that has no combine function (array_agg,
 * string_agg on PostgreSQL 15, ordered-set aggregates, DISTINCT or ORDER
 * BY in a call) keep nothing: a step recomputes the sessions over the
 * accepted rows from session_from on and upserts those whose end lies in
 * (closed_until, W], with the statement:
 *
 *	 WITH sw_tag AS MATERIALIZED (
 *			-- the query's FROM and WHERE over the stream's rows with
 *			-- t >= session_from, each with its group keys, then the
 *			-- session of each row: a new one when t - previous t >= gap
 *			-- within its group, numbered by a running sum, and its first
 *			-- and last event times)
 *		  , sw_tagged AS (the rows of sessions closing now: end in ($4, $5])
 *		  , sw_ins AS (INSERT INTO result
 *				the user's query, its stream replaced by sw_tagged, grouped
 *				by the session's start and end as well ... ON CONFLICT ...)
 *	 SELECT count of rows upserted, the earliest start of an open session
 *
 * Parameters: $1 the query's start offset, $2 each partition's processed
 * offset, $3 session_from, $4 closed_until, $5 W, $6 session_floor.  Every
 * row of a session still open, or still to come, has t >= session_from;
 * the tail of a closed session that is read again ends where it ended, at
 * or before closed_until, and is not emitted again.
 *
 * Exactly once: the results, the state table, how far the query folded,
 * closed_until and session_from are written in the step's transaction,
 * with the offsets and W; a failed step leaves all of them, and the next
 * one computes the same sessions again; a session written again is the
 * same row, upserted over itself.
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "nodes/makefuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parse_clause.h"
#include "parser/parse_oper.h"
#include "parser/parsetree.h"
#include "utils/builtins.h"
#include "utils/rel.h"
#include "utils/timestamp.h"

#include "catalog.h"
#include "citus.h"
#include "limit.h"
#include "pane.h"
#include "query.h"
#include "result.h"
#include "session.h"
#include "step_cache.h"
#include "version.h"
#include "window.h"

PG_FUNCTION_INFO_V1(streamwm_register_session);

static const Oid session_param_types[6] = {INT8OID, INT8ARRAYOID, TIMESTAMPTZOID,
	TIMESTAMPTZOID, TIMESTAMPTZOID, TIMESTAMPTZOID};

/*
 * The range-table index of the stream in a session query, checking its
 * shape: the stream read once, alone in the top-level FROM, no CTE, and a
 * WHERE and GROUP BY that give the same answer each time they are
 * evaluated (a step evaluates them again over the rows of open sessions).
 */
static int
session_stream_rtindex(Query *q, Oid relid)
{
	int			rtindex = sw_alone_stream_rtindex(q, relid, "session");
	ListCell   *lc;

	foreach(lc, q->targetList)
	{
		TargetEntry *tle = lfirst_node(TargetEntry, lc);

		if (!tle->resjunk && tle->resname != NULL && strncmp(tle->resname, "sw_session_", 11) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_DUPLICATE_COLUMN),
					 errmsg("output column name \"%s\" is reserved for session windows",
							tle->resname)));
	}
	return rtindex;
}

/*
 * What replaces the stream in the rows query: its rows the query may see
 * (processed, after the query's start, not late) with t >= $3, read by
 * event time through the stream's BRIN index.
 */
static Query *
session_rows_query(Oid relid)
{
	return sw_analyze_internal(psprintf("SELECT %s FROM ONLY %s sw_s"
										" WHERE sw_s.sw_offset OPERATOR(pg_catalog.>) $1"
										" AND sw_s.sw_offset OPERATOR(pg_catalog.<=)"
										" ($2::pg_catalog.int8[])[sw_s.sw_partition OPERATOR(pg_catalog.+) 1]"
										" AND sw_s.sw_event_time OPERATOR(pg_catalog.>=) $3"
										" AND %s OFFSET 0",
										sw_stream_columns_sql(relid, "sw_s"), sw_stream_rows_name(relid),
										sw_not_late_sql(relid)),
							   session_param_types, 3);
}

/*
 * The query's FROM and WHERE, its stream replaced by source (the stream's
 * columns), each row with all the stream's columns (in cols, quoted, as
 * the result outputs them; *natts of them) and the query's GROUP BY
 * expressions (sw_session_k1, ...; *nkeys of them), as SQL.
 */
static char *
rows_with_keys(const SwQueryDef *def, Query *q, int rtindex, Query *source,
			   StringInfo cols, int *natts, int *nkeys)
{
	Query	   *rows = copyObject(q);
	Relation	rel;
	TupleDesc	desc;
	List	   *tlist = NIL;
	ListCell   *lc;
	int			resno = 1;

	rel = table_open(def->stream, AccessShareLock);
	desc = RelationGetDescr(rel);
	*natts = desc->natts;
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		Expr	   *e;
		char	   *name;

		if (att->attisdropped)
		{
			e = (Expr *) makeNullConst(INT4OID, -1, InvalidOid);
			name = psprintf("sw_dropped_%d", i + 1);
		}
		else
		{
			e = (Expr *) makeVar(rtindex, i + 1, att->atttypid, att->atttypmod,
								 att->attcollation, 0);
			name = pstrdup(NameStr(att->attname));
		}
		tlist = lappend(tlist, makeTargetEntry(e, resno++, name, false));
		appendStringInfo(cols, "%s%s", i > 0 ? ", " : "", quote_identifier(name));
	}
	table_close(rel, AccessShareLock);
	*nkeys = 0;
	foreach(lc, q->groupClause)
	{
		TargetEntry *tle = get_sortgroupclause_tle(lfirst_node(SortGroupClause, lc),
												   q->targetList);

		(*nkeys)++;
		tlist = lappend(tlist, makeTargetEntry(copyObject(tle->expr), resno++,
											   psprintf("sw_session_k%d", *nkeys), false));
	}
	if (sw_replace_stream(rows, def->stream, source) != 1)
		elog(ERROR, "streamwm: session query \"%s\" reads its stream more than once", def->name);
	sw_query_rows_only(rows, tlist);
	return sw_deparse_query(rows);
}

/* "PARTITION BY <alias>.<prefix>1, ..." for nkeys keys, or "" */
static char *
partition_by(const char *alias, const char *prefix, int nkeys)
{
	StringInfoData s;

	initStringInfo(&s);
	for (int k = 1; k <= nkeys; k++)
		appendStringInfo(&s, "%s%s.%s%d", k > 1 ? ", " : "PARTITION BY ", alias, prefix, k);
	return s.data;
}

/*
 * Sessions of rows (SQL from rows_with_keys): a row starts one when it is
 * the first of its group or gap or more after the previous (ties in any
 * order: they are less than gap apart); a running sum numbers them; each
 * row gets its session's first and last event times (sw_session_first,
 * sw_session_last).  Returns "(...) sw_b".
 */
static char *
sessions_of_rows(const char *rows, int nkeys, const char *gap)
{
	const char *order = "%1$s.sw_event_time, %1$s.sw_partition, %1$s.sw_offset";
	char	   *by_n = partition_by("sw_n", "sw_session_k", nkeys);
	char	   *by_d = partition_by("sw_d", "sw_session_k", nkeys);
	char	   *by_a = partition_by("sw_a", "sw_session_k", nkeys);

	return psprintf("(SELECT sw_a.*, pg_catalog.min(sw_a.sw_event_time) OVER sw_w AS sw_session_first,"
					" pg_catalog.max(sw_a.sw_event_time) OVER sw_w AS sw_session_last FROM ("
					"SELECT sw_n.*, pg_catalog.sum(sw_n.sw_session_new) OVER (%s ORDER BY %s"
					" ROWS UNBOUNDED PRECEDING) AS sw_session_id FROM ("
					"SELECT sw_d.*, CASE WHEN sw_d.sw_event_time OPERATOR(pg_catalog.-)"
					" pg_catalog.lag(sw_d.sw_event_time) OVER (%s ORDER BY %s)"
					" OPERATOR(pg_catalog.<) %s THEN 0 ELSE 1 END AS sw_session_new"
					" FROM (%s) sw_d) sw_n) sw_a WINDOW sw_w AS (%s%ssw_a.sw_session_id)) sw_b",
					by_n, psprintf(order, "sw_n"), by_d, psprintf(order, "sw_d"), gap, rows,
					by_a, nkeys > 0 ? ", " : "PARTITION BY ");
}

/*
 * The statement of a session query's step that reads its rows again
 * (file header), as the current user (the query's owner), from its
 * analyzed tree: for queries whose aggregates cannot be kept as partial
 * states.
 */
static char *
reread_statement(const SwQueryDef *def)
{
	Query	   *q = sw_analyze_window_query(def->query);
	Query	   *fin;
	RangeTblEntry *rte;
	int			rtindex;
	int			natts;
	int			nkeys;
	Index		maxref = 0;
	ListCell   *lc;
	StringInfoData cols;		/* the stream's columns, as sw_tag outputs them */
	char	   *tag;
	char	   *gap = sw_interval_literal(def->size_us);
	TargetEntry *ts;
	TargetEntry *te;
	SortGroupClause *sgc;
	const char *result;

	rtindex = session_stream_rtindex(q, def->stream);
	initStringInfo(&cols);

	/*
	 * The rows: the query's FROM and WHERE, the stream replaced by its rows
	 * from session_from on, and the session of each.  A session whose last
	 * event is at or above W is open whatever its end: 'infinity', so that
	 * an event near the end of the timestamp range cannot make last + gap
	 * overflow at every step.
	 */
	tag = rows_with_keys(def, q, rtindex, session_rows_query(def->stream), &cols, &natts, &nkeys);
	tag = psprintf("SELECT %s, sw_b.sw_session_first AS sw_session_start,"
				   " CASE WHEN sw_b.sw_session_last OPERATOR(pg_catalog.>=) $5"
				   " THEN 'infinity'::pg_catalog.timestamptz"
				   " ELSE sw_b.sw_session_last OPERATOR(pg_catalog.+) %s END AS sw_session_end FROM %s",
				   cols.data, gap, sessions_of_rows(tag, nkeys, gap));

	/*
	 * The query itself over the rows of the sessions closing now
	 * (sw_tagged, a CTE of the statement around it): its stream becomes a
	 * reference to that CTE, with the session's start and end as two more
	 * columns, grouped by them too and output first (window_start,
	 * window_end).  Its WHERE has been applied to those rows already.
	 */
	fin = copyObject(q);
	rte = rt_fetch(rtindex, fin->rtable);
	sw_rte_unrelation(rte, RTE_CTE);
	rte->ctename = "sw_tagged";
	rte->ctelevelsup = 1;
	rte->self_reference = false;
	rte->eref->colnames = lappend(rte->eref->colnames, makeString("sw_session_start"));
	rte->eref->colnames = lappend(rte->eref->colnames, makeString("sw_session_end"));
	fin->jointree->quals = NULL;
	foreach(lc, fin->targetList)
	{
		TargetEntry *tle = lfirst_node(TargetEntry, lc);

		tle->resno += 2;
		maxref = Max(maxref, tle->ressortgroupref);
	}
	ts = makeTargetEntry((Expr *) makeVar(rtindex, natts + 1, TIMESTAMPTZOID, -1, InvalidOid, 0),
						 1, "window_start", false);
	te = makeTargetEntry((Expr *) makeVar(rtindex, natts + 2, TIMESTAMPTZOID, -1, InvalidOid, 0),
						 2, "window_end", false);
	ts->ressortgroupref = maxref + 1;
	te->ressortgroupref = maxref + 2;
	fin->targetList = list_concat(list_make2(ts, te), fin->targetList);
	for (int i = 1; i <= 2; i++)
	{
		sgc = makeNode(SortGroupClause);
		sgc->tleSortGroupRef = maxref + i;
		get_sort_group_operators(TIMESTAMPTZOID, true, true, false,
								 &sgc->sortop, &sgc->eqop, NULL, &sgc->hashable);
		sgc->nulls_first = false;
		fin->groupClause = lappend(fin->groupClause, sgc);
	}

	result = "SELECT (SELECT pg_catalog.count(*) FROM sw_ins),"
		" (SELECT pg_catalog.min(sw_t.sw_session_start) FROM sw_tag sw_t"
		" WHERE sw_t.sw_session_end OPERATOR(pg_catalog.>) $5)";
	return sw_upsert_statement(def,
							   psprintf("sw_tag AS MATERIALIZED (%s),"
										" sw_tagged AS (SELECT %s, sw_session_start, sw_session_end"
										" FROM sw_tag sw_t"
										" WHERE sw_t.sw_session_end OPERATOR(pg_catalog.>) $4"
										" AND sw_t.sw_session_end OPERATOR(pg_catalog.<=) $5"
										" AND sw_t.sw_session_start OPERATOR(pg_catalog.>=) $6), ",
										tag, cols.data),
							   sw_deparse_query(fin), NULL, result);
}

/*
 * The partial plan of a session query (its state: each open session's
 * first and last event time, keys and partial aggregate states), or NULL
 * (and *why) when its aggregates cannot be kept so.  Its fold is the
 * query over the new rows' sessions (sessions_of_rows over the rows not
 * folded yet, from just after $6 on), grouped by each one's first and last
 * event time and the keys.
 */
static PanePlan *
session_partial_plan(const SwQueryDef *def, const char **why)
{
	static const char *const lead[2] = {"sw_start", "sw_last"};
	Oid			types[7] = {INT8OID, INT8ARRAYOID, TIMESTAMPTZOID, INT8ARRAYOID,
	TIMESTAMPTZOID, TIMESTAMPTZOID, BOOLOID};
	Query	   *q = sw_analyze_window_query(def->query);
	int			rtindex = session_stream_rtindex(q, def->stream);
	StringInfoData cols;
	int			natts;
	int			nkeys;
	char	   *rows;

	if (!sw_pane_engine)
	{
		*why = "streamwm.pane_engine is off";
		return NULL;
	}
	initStringInfo(&cols);
	rows = rows_with_keys(def, q, rtindex, sw_fold_rows_query(def->stream, NULL, true),
						  &cols, &natts, &nkeys);
	rows = psprintf("SELECT %s, sw_b.sw_session_first AS sw_start, sw_b.sw_session_last AS sw_last"
					" FROM %s", cols.data,
					sessions_of_rows(rows, nkeys, sw_interval_literal(def->size_us)));
	return sw_partial_plan(def->stream, q, sw_analyze_internal(rows, types, lengthof(types)),
						   lead, 2, 0, "sessions", why);
}

/*
 * The statement of a session query's step that keeps its open sessions
 * (file header).  Parameters: session_state_param_types.
 */
static char *
session_state_statement(const SwQueryDef *def, const PanePlan *pp)
{
	char	   *state = sw_relation_name(def->pane_table);
	char	   *gap = sw_interval_literal(def->size_us);
	char	   *columns = sw_state_columns(pp, "", false);
	char	   *by_u = partition_by("sw_u", "sw_k", pp->nkeys);
	char	   *by_x = partition_by("sw_x", "sw_k", pp->nkeys);
	char	   *by_y = partition_by("sw_y", "sw_k", pp->nkeys);
	StringInfoData keep;
	StringInfoData combine;
	char	   *outputs;
	char	   *group_tail;
	char	   *ctes;

	/* each island's states merged into one: the open ones are kept */
	initStringInfo(&keep);
	appendStringInfoString(&keep, "SELECT sw_z.sw_is, sw_z.sw_il");
	for (int i = 1; i <= pp->nkeys; i++)
		appendStringInfo(&keep, ", sw_z.sw_k%d", i);
	for (int i = 1; i <= pp->naggs; i++)
		appendStringInfo(&keep, ", streamwm_internal.merge(sw_z.sw_a%d, '%u'::pg_catalog.oid)",
						 i, pp->aggs[i - 1]);
	appendStringInfoString(&keep, " FROM sw_isl sw_z WHERE sw_z.sw_open AND sw_z.sw_touched"
						   " GROUP BY sw_z.sw_is, sw_z.sw_il");
	for (int i = 1; i <= pp->nkeys; i++)
		appendStringInfo(&keep, ", sw_z.sw_k%d", i);

	/*
	 * The fresh sessions of the new rows and the open ones of the state
	 * table merged into islands: sorted by first event per group, one
	 * starts a new island when its first event is gap or more after every
	 * last event before it.  An island is open while last + gap > W
	 * ('infinity' at or above W: no overflow), touched when a fresh
	 * session is in it.  The state rows of closed or touched islands are
	 * deleted (by ctid; the query's steps are the table's only writers,
	 * one at a time), touched open islands are written back merged: an
	 * untouched open island is one state row, left as it is.
	 */
	ctes = psprintf("sw_fresh(%s) AS (%s),"
					" sw_isl AS MATERIALIZED (SELECT sw_y.*,"
					" pg_catalog.min(sw_y.sw_start) OVER sw_i AS sw_is,"
					" pg_catalog.max(sw_y.sw_last) OVER sw_i AS sw_il,"
					" pg_catalog.bool_or(sw_y.sw_tid IS NULL) OVER sw_i AS sw_touched,"
					" CASE WHEN pg_catalog.max(sw_y.sw_last) OVER sw_i OPERATOR(pg_catalog.>=) $5"
					" THEN true ELSE pg_catalog.max(sw_y.sw_last) OVER sw_i OPERATOR(pg_catalog.+) %s"
					" OPERATOR(pg_catalog.>) $5 END AS sw_open FROM ("
					"SELECT sw_x.*, pg_catalog.sum(sw_x.sw_new) OVER (%s ORDER BY sw_x.sw_start"
					" ROWS UNBOUNDED PRECEDING) AS sw_id FROM ("
					"SELECT sw_u.*, CASE WHEN sw_u.sw_start OPERATOR(pg_catalog.-)"
					" pg_catalog.max(sw_u.sw_last) OVER (%s ORDER BY sw_u.sw_start"
					" ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)"
					" OPERATOR(pg_catalog.<) %s THEN 0 ELSE 1 END AS sw_new FROM ("
					"SELECT NULL::pg_catalog.tid AS sw_tid, %s FROM sw_fresh"
					" UNION ALL SELECT sw_d.ctid, %s FROM %s sw_d) sw_u) sw_x) sw_y"
					" WINDOW sw_i AS (%s%ssw_y.sw_id)),"
					" sw_old AS (DELETE FROM %s sw_d USING sw_isl sw_z"
					" WHERE sw_d.ctid OPERATOR(pg_catalog.=) sw_z.sw_tid"
					" AND (sw_z.sw_touched OR NOT sw_z.sw_open) RETURNING 1),"
					" sw_keep AS (INSERT INTO %s (%s) %s RETURNING 1), ",
					columns, pp->fold_select,
					gap, by_x, by_u, gap, columns, sw_state_columns(pp, "sw_d.", false), state,
					by_y, pp->nkeys > 0 ? ", " : "PARTITION BY ",
					state, state, columns, keep.data);

	/*
	 * The sessions closing now (closed, ending after closed_until, not
	 * starting before session_floor): the user's outputs and HAVING with
	 * each key replaced by its column and each aggregate by the combine of
	 * its states.
	 */
	sw_state_outputs(def, pp, &outputs, &group_tail);
	initStringInfo(&combine);
	appendStringInfo(&combine, "SELECT sw_p.sw_start, sw_p.sw_last OPERATOR(pg_catalog.+) %s, %s",
					 gap, outputs);
	appendStringInfoString(&combine, " FROM (SELECT sw_z.sw_is AS sw_start, sw_z.sw_il AS sw_last");
	for (int i = 1; i <= pp->nkeys; i++)
		appendStringInfo(&combine, ", sw_z.sw_k%d", i);
	for (int i = 1; i <= pp->naggs; i++)
		appendStringInfo(&combine, ", sw_z.sw_a%d", i);
	appendStringInfo(&combine, " FROM sw_isl sw_z WHERE CASE WHEN sw_z.sw_open THEN false"
					 " ELSE sw_z.sw_il OPERATOR(pg_catalog.+) %s OPERATOR(pg_catalog.>) $3"
					 " AND sw_z.sw_is OPERATOR(pg_catalog.>=) $8 END) sw_p"
					 " GROUP BY sw_p.sw_start, sw_p.sw_last%s", gap, group_tail);

	return sw_upsert_statement(def, ctes, combine.data, NULL,
							   "SELECT (SELECT pg_catalog.count(*) FROM sw_ins),"
							   " (SELECT pg_catalog.min(sw_z.sw_is) FROM sw_isl sw_z WHERE sw_z.sw_open),"
							   " (SELECT pg_catalog.count(*) FROM sw_keep),"
							   " (SELECT pg_catalog.count(*) FROM sw_old)");
}

/*
 * The parameters of the statement that keeps open sessions: $1 the
 * query's start offset, $2 each partition's processed offset, $3
 * closed_until, $4 each partition's folded offset (NULL: none, or the
 * state was made anew), $5 W, $6 the fold's floor (just before
 * session_from), $7 whether the late log may hold rows of the fold
 * (sw_catalog_has_late_in), $8 session_floor.  The first seven are the
 * fold's (sw_fold_rows_query).
 */
static const Oid state_param_types[8] = {INT8OID, INT8ARRAYOID, TIMESTAMPTZOID,
	INT8ARRAYOID, TIMESTAMPTZOID, TIMESTAMPTZOID, BOOLOID, TIMESTAMPTZOID};

/*
 * The partial plan of the entry's query, decided once per entry: NULL
 * when its aggregates cannot be kept as partial states (the step then
 * reads the rows of open sessions again).
 */
static PanePlan *
session_plan_of(const SwQueryDef *def, SwStepEntry *e)
{
	if (!e->pane_plan_decided)
	{
		MemoryContext old = MemoryContextSwitchTo(e->cxt);
		const char *why;

		e->pane_plan = session_partial_plan(def, &why);
		e->pane_plan_decided = true;
		MemoryContextSwitchTo(old);
	}
	return e->pane_plan;
}

/*
 * The statement a step of a session query runs, as the current user (the
 * query's owner), for streamwm_internal._window_sql().
 */
char *
sw_session_statement(const SwQueryDef *def)
{
	const char *why;
	PanePlan   *pp = session_partial_plan(def, &why);

	if (pp == NULL)
		return reread_statement(def);
	if (!OidIsValid(def->pane_table))
		return "(made at the query's first step)";
	return session_state_statement(def, pp);
}

/*
 * Make the statement that reads the rows of open sessions again the
 * entry's, if it is not.
 */
static void
prepare_reread(const SwQueryDef *def, SwStepEntry *e)
{
	if (e->plan == NULL)
	{
		char	   *sql = reread_statement(def);

		sw_step_entry_depends(e, sw_query_relids(sw_analyze_window_query(def->query)));
		/* privileges before planning: see sw_check_statement_privileges */
		sw_check_statement_privileges(sql, 6, session_param_types);
		sw_step_entry_set_statement(e, sql, 6, session_param_types, InvalidOid, 0);
	}
}

/*
 * Make sure the query's state table is there (made anew when missing,
 * emptied, restored or built for other aggregates: *rebuild) and the
 * statement that keeps it is the entry's.
 */
static void
prepare_state(SwQueryDef *def, SwStepEntry *e, const PanePlan *pp, bool *rebuild)
{
	sw_ensure_pane_table(def, pp, rebuild);
	if (e->plan == NULL || e->statement_pane_table != def->pane_table)
	{
		char	   *sql = session_state_statement(def, pp);

		sw_step_entry_depends(e, sw_query_relids(sw_analyze_window_query(def->query)));
		/* privileges before planning: see sw_check_statement_privileges */
		sw_check_statement_privileges(sql, 8, state_param_types);
		sw_step_entry_set_statement(e, sql, 8, state_param_types, def->pane_table, 0);
	}
}

/*
 * A session query's step, as the current user (its owner): upsert every
 * session that closed since closed_until (end in (closed_until, hi]), and
 * record where the rows it still needs start (the first event of its
 * earliest open session, or W): retention keeps them, so that the state
 * table, a cache, can be made anew from them.  Returns the sessions
 * written (each is a window and a row).
 */
void
sw_session_upsert_windows(SwQueryDef *def, Datum offsets, TimestampTz hi,
						  int64 *windows, int64 *rows)
{
	SwStepEntry *e = sw_step_entry(def);
	PanePlan   *pp = session_plan_of(def, e);
	Datum		values[8];
	char		nulls[8] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};
	bool		isnull;
	bool		rebuild = false;
	Datum		d;
	TimestampTz open_from;
	int			rc;

	values[0] = Int64GetDatum(def->start_offset);
	values[1] = offsets;
	values[4] = TimestampTzGetDatum(hi);
	if (pp == NULL)
	{
		prepare_reread(def, e);
		values[2] = TimestampTzGetDatum(def->session_from);
		values[3] = TimestampTzGetDatum(def->closed_until);
		values[5] = TimestampTzGetDatum(def->session_floor);
	}
	else
	{
		prepare_state(def, e, pp, &rebuild);
		values[2] = TimestampTzGetDatum(def->closed_until);
		if (rebuild || def->folded_offsets == (Datum) 0)
			nulls[3] = 'n';
		else
			values[3] = def->folded_offsets;
		/* rows before session_from are in closed sessions only */
		values[5] = TimestampTzGetDatum(TIMESTAMP_NOT_FINITE(def->session_from) ?
										def->session_from : def->session_from - 1);
		values[6] = BoolGetDatum(sw_catalog_has_late_in(def->stream, def->start_offset, offsets,
														nulls[3] == 'n' ? (Datum) 0 : values[3]));
		values[7] = TimestampTzGetDatum(def->session_floor);
	}
	rc = SPI_execute_plan(e->plan, values, nulls, false, 0);
	if (rc != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "streamwm: session statement of query \"%s\" failed: %s", def->name,
			 SPI_result_code_string(rc));
	*rows = DatumGetInt64(sw_spi_getdatum(0, 1, &isnull));
	d = sw_spi_getdatum(0, 2, &isnull);
	open_from = isnull ? DT_NOEND : DatumGetTimestampTz(d);
	SPI_freetuptable(SPI_tuptable);
	*windows = *rows;
	if (pp != NULL)
		sw_record_panes(def, pp, offsets);
	/* the rows of sessions still open, and of those to come (t >= W) */
	sw_catalog_record_session_from(def->name, Min(open_from, hi));
}

/*
 * create_session_query's check (streamwm_internal._check_query): make the
 * state table, plan the step's statement as the query's owner, and run it
 * over no rows, so that what would fail fails now.
 */
void
sw_session_check(SwQueryDef *def)
{
	const char *why;
	PanePlan   *pp = session_partial_plan(def, &why);
	Datum		values[8];

	values[0] = Int64GetDatum(0);
	values[1] = PointerGetDatum(construct_empty_array(INT8OID));
	for (int i = 2; i < 8; i++)
		values[i] = TimestampTzGetDatum(DT_NOBEGIN);
	if (pp == NULL)
	{
		sw_dry_run_statement(def->name, reread_statement(def), 6, session_param_types,
							 values, NULL);
		return;
	}
	{
		bool		rebuild;

		sw_ensure_pane_table(def, pp, &rebuild);
		/* a valid state keeps how far it was folded (pane.c sw_pane_check) */
		sw_record_panes(def, pp, rebuild ? (Datum) 0 : def->folded_offsets);
		values[6] = BoolGetDatum(true);
		sw_dry_run_statement(def->name, session_state_statement(def, pp), 8, state_param_types,
							 values, "   n    ");
	}
}

/*
 * streamwm_internal._register_session(name text, gap interval): makes the query
 * that _create_session_query has just registered in this transaction a
 * session query (sw_catalog_make_session).  Whoever calls it, the checks
 * hold: the stream has no allowed_lateness, and the query is one just
 * recorded by _register_query for this (hop = size = gap, event time, the
 * epoch origin, into a table, no pane table, never run).
 */
Datum
streamwm_register_session(PG_FUNCTION_ARGS)
{
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	int64		gap_us = sw_interval_usec(PG_GETARG_INTERVAL_P(1));
	SwQueryDef *def;

	sw_require_extension_version();

	if (gap_us <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("gap must be positive")));
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	def = sw_load_managed_query(name);
	/* create_session_query's checks, here so that they hold for any caller */
	if (def->lateness_us > 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("stream %s has allowed_lateness: session queries over it are not supported",
						sw_relation_name(def->stream)),
				 errdetail("An event accepted below W could extend or merge sessions that were already closed and emitted."),
				 errhint("Use a stream without allowed_lateness; only hopping queries re-fire windows.")));
	/* only a hopping query just recorded with hop = size = gap, never run */
	if (def->session || def->count || def->ordered || def->processing || def->result_stream ||
		def->hop_us != gap_us || def->size_us != gap_us || OidIsValid(def->pane_table) ||
		def->closed_until != def->start_closed || def->origin != SW_UNIX_EPOCH)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("query \"%s\" cannot be made a session query", name),
				 errhint("Use streamwm.create_session_query().")));
	sw_citus_refuse_result_kind(def->result_table, "session");
	sw_catalog_make_session(name, PG_GETARG_DATUM(1), gap_us);
	SPI_finish();
	PG_RETURN_VOID();
}
