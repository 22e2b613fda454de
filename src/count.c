/*-------------------------------------------------------------------------
 * count.c
 *	  Owns count windows (SPEC section 11, Renoir's CountWindow): queries
 *	  made by streamwm.create_count_query(name, query, size, slide).
 *
 * Per group (the query's GROUP BY keys; no GROUP BY: one group), the
 * accepted events that pass the query's WHERE are numbered 0, 1, 2, ... in
 * (sw_event_time, sw_partition, sw_offset) order; window n holds the events
 * numbered n*slide .. n*slide + size - 1 and is emitted, keyed (window_seq,
 * group keys), when all of them have event time < W.
 *
 * Why an event's number is final once its event time is below W: every
 * event processed later is accepted only with t >= W (a stream with
 * allowed_lateness is refused), so no event can come before it any more.
 * A step therefore numbers exactly the events with closed_until <= t < W
 * (closed_until is W at the query's last successful step): every accepted
 * event below W has been read by then, and none of them was numbered
 * before, since they all had t >= the previous W.
 *
 * State: per query a state table (<result>_count, owned by the query's
 * owner, recorded in query_def.pane_table; dropped with the query), one row
 * per group that ever had an event:
 *	 sw_k1..		the group's keys
 *	 sw_count		how many of its events are numbered
 *	 sw_next		its first window not emitted yet
 *	 sw_keep_*		(t, partition, offset) of that window's first event, when
 *					it is numbered already (sw_next * slide < sw_count), else
 *					NULL: the window still needs the rows from there on
 * Unlike the pane table this is not a cache: the counts cannot be rebuilt
 * once retention removed rows, so a step fails (and holds every row back)
 * while it is missing.
 *
 * A query whose aggregates all have combine functions also keeps, in the
 * same table, the partial states of the chunks of events its windows not
 * emitted yet are made of (count_lead below): its step reads only the
 * events with closed_until <= t < W, each once, numbers them on from the
 * state, folds them into chunks, combines every window complete now from
 * its chunks, and keeps the chunks still needed (chunk_statement).  The
 * chunks are a cache: when their stamp does not match, the step deletes
 * them and reads the events from each group's keep event again, as the
 * other queries do every step.
 *
 * Without chunks, one statement per step, as the query's owner: it reads
 * the rows with L <= t < W (L = min(closed_until, every group's keep
 * time)), keeps per group those from its keep event on (or, with none,
 * those with t >= closed_until), numbers them on from the state, upserts
 * every window of the group that is now complete and n >= sw_next (the
 * user's query over the window's rows, grouped by window), and upserts the
 * new state (count_statement).  The results, the state and closed_until
 * are written in the step's transaction: exactly once, as for the other
 * plans.  Retention keeps every row from L on (query_def.count_needs,
 * recorded by the step).
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parse_clause.h"
#include "parser/parse_oper.h"
#include "parser/parsetree.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/ruleutils.h"
#include "utils/timestamp.h"

#include "catalog.h"
#include "citus.h"
#include "count.h"
#include "limit.h"
#include "pane.h"
#include "query.h"
#include "result.h"
#include "step_cache.h"
#include "version.h"

PG_FUNCTION_INFO_V1(streamwm_set_count_windows);
PG_FUNCTION_INFO_V1(streamwm_check_count_query);

/*
 * $1 start offset, $2 processed offsets, $3 L, $4 closed_until, $5 W, $6
 * whether the events of each group's first window not emitted are read
 * again from its keep event (always, but for a query that keeps chunks
 * whose chunks are valid)
 */
static const Oid count_param_types[6] = {INT8OID, INT8ARRAYOID, TIMESTAMPTZOID,
TIMESTAMPTZOID, TIMESTAMPTZOID, BOOLOID};

/*
 * A query whose aggregates all have combine functions keeps, besides one
 * row per group (sw_chunk = -1: sw_count, sw_next, sw_keep_*), the partial
 * states of the chunks of events its windows not emitted yet are made of:
 * chunk c of a group holds its events numbered c*g .. c*g + g - 1, g =
 * gcd(size, slide), so that every window is a run of whole chunks.  A
 * chunk row has the chunk's number, its first event (sw_ct, sw_cp,
 * sw_co), its last event time so far (sw_cl), the group keys and a
 * partial state per aggregate.  The fold
 * also carries, per group, its count after the step, its first window not
 * emitted before and after it (the trailing columns).
 */
static const char *const count_lead[8] = {"sw_chunk", "sw_ct", "sw_cp", "sw_co", "sw_cl",
"sw_total", "sw_gnext", "sw_nn"};
#define COUNT_NLEAD 5
#define COUNT_NTRAIL 3

/* A count query as analyzed: the stream's entry and the group keys. */
typedef struct CountShape
{
	Query	   *q;
	int			rtindex;		/* the stream's range-table entry */
	List	   *keys;			/* Expr per GROUP BY item; none: a constant */
} CountShape;

/*
 * Analyze a count query's (bound) text as the current user and check that
 * it has the shape count windows need: the stream alone in its FROM, read
 * once, no CTE, and WHERE and GROUP BY without volatile functions (they
 * are evaluated more than once per step, and must agree).  Aggregating,
 * naming its outputs etc. are checked by sw_query_columns, as for every
 * window query.
 */
static CountShape *
count_shape(Oid relid, const char *query)
{
	CountShape *sh = palloc0(sizeof(CountShape));
	Query	   *q = sw_analyze_window_query(query);
	ListCell   *lc;

	(void) sw_query_columns(relid, query);
	sh->q = q;
	sh->rtindex = sw_alone_stream_rtindex(q, relid, "count");
	foreach(lc, q->groupClause)
		sh->keys = lappend(sh->keys,
						   get_sortgroupclause_tle(lfirst_node(SortGroupClause, lc),
												   q->targetList)->expr);
	if (sh->keys == NIL)
		sh->keys = list_make1(makeBoolConst(true, false));
	return sh;
}

/* "<prefix>sw_k1, <prefix>sw_k2, ..." */
static char *
key_list(const CountShape *sh, const char *prefix)
{
	StringInfoData s;

	initStringInfo(&s);
	for (int i = 0; i < list_length(sh->keys); i++)
		appendStringInfo(&s, "%s%ssw_k%d", i > 0 ? ", " : "", prefix, i + 1);
	return s.data;
}

/*
 * The events that may be numbered this step, with their group keys: the
 * user's tree with its stream replaced by the processed, not late rows
 * after the query's start with $3 <= t < $5, its WHERE kept, its outputs
 * replaced by the keys (sw_k1..) and (sw_t, sw_p, sw_o), and no grouping.
 */
static char *
events_sql(Oid relid, const CountShape *shape)
{
	Query	   *q = copyObject(shape->q);
	Query	   *rows;
	List	   *tlist = NIL;
	ListCell   *lc;
	int			resno = 0;
	const char *cols[3] = {"sw_event_time", "sw_partition", "sw_offset"};
	const char *names[3] = {"sw_t", "sw_p", "sw_o"};
	const Oid	types[3] = {TIMESTAMPTZOID, INT4OID, INT8OID};

	rows = sw_analyze_internal(psprintf("SELECT %s FROM ONLY %s sw_s WHERE sw_s.sw_offset > $1"
										" AND sw_s.sw_offset <= ($2::pg_catalog.int8[])[sw_s.sw_partition + 1]"
										" AND sw_s.sw_event_time >= $3 AND sw_s.sw_event_time < $5"
										" AND %s OFFSET 0",
										sw_stream_columns_sql(relid, "sw_s"), sw_stream_rows_name(relid),
										sw_not_late_sql(relid)),
							   count_param_types, lengthof(count_param_types));
	foreach(lc, shape->keys)
	{
		resno++;
		tlist = lappend(tlist, makeTargetEntry((Expr *) copyObject(lfirst(lc)), resno,
											   psprintf("sw_k%d", resno), false));
	}
	for (int i = 0; i < 3; i++)
	{
		AttrNumber	attno = get_attnum(relid, cols[i]);

		if (attno == InvalidAttrNumber || get_atttype(relid, attno) != types[i])
			elog(ERROR, "stream %s has no %s column of the expected type",
				 sw_relation_name(relid), cols[i]);
		resno++;
		tlist = lappend(tlist, makeTargetEntry((Expr *) makeVar(shape->rtindex, attno, types[i],
																-1, InvalidOid, 0),
											   resno, pstrdup(names[i]), false));
	}
	if (sw_replace_stream(q, relid, rows) != 1)
		elog(ERROR, "count query does not read stream %s once", sw_relation_name(relid));
	sw_query_rows_only(q, tlist);
	return sw_deparse_query(q);
}

/*
 * The numbered events of the groups that had events this step, as SQL
 * over events_sql: per group (sw_k..) the events from its keep event on,
 * or with t >= $4 when it has none, each with its number sw_num, the
 * group's count after the step sw_total, its first window not emitted
 * before the step sw_next and after it sw_nn.
 */
static char *
numbered_sql(const CountShape *sh, const char *events, const char *state,
			 int64 size, int64 slide, bool chunks)
{
	char	   *k = key_list(sh, "");

	return psprintf("SELECT sw_f.*, GREATEST(sw_f.sw_next, CASE WHEN sw_f.sw_total < " INT64_FORMAT
					" THEN 0 ELSE (sw_f.sw_total - " INT64_FORMAT " + " INT64_FORMAT ") / " INT64_FORMAT
					" END) AS sw_nn FROM ("
					"SELECT sw_e.*, sw_e.sw_base + pg_catalog.row_number() OVER (PARTITION BY %s"
					" ORDER BY sw_e.sw_t, sw_e.sw_p, sw_e.sw_o) - 1 AS sw_num,"
					" sw_e.sw_base + pg_catalog.count(*) OVER (PARTITION BY %s) AS sw_total FROM ("
					"SELECT %s, sw_v.sw_t, sw_v.sw_p, sw_v.sw_o,"
					" CASE WHEN sw_v.sw_gkt IS NULL THEN COALESCE(sw_v.sw_gc, 0)"
					" ELSE sw_v.sw_gn * " INT64_FORMAT " END AS sw_base,"
					" COALESCE(sw_v.sw_gn, 0) AS sw_next FROM ("
					"SELECT sw_u.*, pg_catalog.max(sw_u.sw_sc) OVER sw_g AS sw_gc,"
					" pg_catalog.max(sw_u.sw_sn) OVER sw_g AS sw_gn,"
					" pg_catalog.max(sw_u.sw_kt) OVER sw_g AS sw_gkt,"
					" pg_catalog.max(sw_u.sw_kp) OVER sw_g AS sw_gkp,"
					" pg_catalog.max(sw_u.sw_ko) OVER sw_g AS sw_gko FROM ("
					"SELECT sw_n.*, NULL::pg_catalog.int8 AS sw_sc, NULL::pg_catalog.int8 AS sw_sn,"
					" NULL::pg_catalog.timestamptz AS sw_kt, NULL::pg_catalog.int4 AS sw_kp,"
					" NULL::pg_catalog.int8 AS sw_ko FROM (%s) sw_n"
					" UNION ALL SELECT %s, NULL, NULL, NULL, sw_x.sw_count, sw_x.sw_next,"
					" CASE WHEN $6 THEN sw_x.sw_keep_t END, CASE WHEN $6 THEN sw_x.sw_keep_p END,"
					" CASE WHEN $6 THEN sw_x.sw_keep_o END FROM %s sw_x%s"
					") sw_u WINDOW sw_g AS (PARTITION BY %s)"
					") sw_v WHERE sw_v.sw_t IS NOT NULL AND CASE WHEN sw_v.sw_gkt IS NULL"
					" THEN sw_v.sw_t >= $4 ELSE (sw_v.sw_t, sw_v.sw_p, sw_v.sw_o) >="
					" (sw_v.sw_gkt, sw_v.sw_gkp, sw_v.sw_gko) END"
					") sw_e) sw_f",
					size, size, slide, slide,
					k, k,
					key_list(sh, "sw_v."),
					slide,
					events,
					key_list(sh, "sw_x."), state,
					chunks ? " WHERE sw_x.sw_chunk OPERATOR(pg_catalog.=) -1" : "",
					key_list(sh, "sw_u."));
}

/*
 * What replaces the stream in the user's query: the rows of every window
 * complete now (n >= the group's sw_next, all its events numbered), each
 * row once per window it is in, with sw_seq, sw_ws and sw_we (the window's
 * number and first and last event time) after the stream's columns.
 */
static char *
window_rows_sql(Oid relid, const CountShape *sh, const char *numbered,
				int64 size, int64 slide)
{
	return psprintf("SELECT %s, sw_m.sw_seq, sw_m.sw_ws, sw_m.sw_we FROM ("
					"SELECT sw_h.sw_p, sw_h.sw_o, sw_h.sw_seq,"
					" pg_catalog.min(sw_h.sw_t) OVER sw_z AS sw_ws,"
					" pg_catalog.max(sw_h.sw_t) OVER sw_z AS sw_we FROM ("
					"SELECT sw_c.*, sw_w.sw_seq FROM (%s) sw_c"
					" CROSS JOIN LATERAL pg_catalog.generate_series("
					"GREATEST(sw_c.sw_next, CASE WHEN sw_c.sw_num < " INT64_FORMAT " THEN 0"
					" ELSE (sw_c.sw_num - " INT64_FORMAT " + " INT64_FORMAT ") / " INT64_FORMAT " END),"
					" LEAST(sw_c.sw_num / " INT64_FORMAT ", CASE WHEN sw_c.sw_total < " INT64_FORMAT
					" THEN -1 ELSE (sw_c.sw_total - " INT64_FORMAT ") / " INT64_FORMAT " END)"
					") AS sw_w(sw_seq)"
					") sw_h WINDOW sw_z AS (PARTITION BY %s, sw_h.sw_seq)"
					") sw_m JOIN ONLY %s sw_s ON sw_s.sw_partition = sw_m.sw_p"
					" AND sw_s.sw_offset = sw_m.sw_o OFFSET 0",
					sw_stream_columns_sql(relid, "sw_s"),
					numbered,
					size, size, slide, slide,
					slide, size, size, slide,
					key_list(sh, "sw_h."),
					sw_stream_rows_name(relid));
}

/* Add a grouped output column (a Var of the window rows) to q. */
static void
add_group_column(Query *q, int rtindex, AttrNumber attno, Oid type, const char *name)
{
	TargetEntry *tle;
	SortGroupClause *sgc = makeNode(SortGroupClause);
	Index		ref = 1;
	ListCell   *lc;

	foreach(lc, q->targetList)
		ref = Max(ref, lfirst_node(TargetEntry, lc)->ressortgroupref + 1);
	tle = makeTargetEntry((Expr *) makeVar(rtindex, attno, type, -1, InvalidOid, 0),
						  list_length(q->targetList) + 1, pstrdup(name), false);
	tle->ressortgroupref = ref;
	q->targetList = lappend(q->targetList, tle);
	sgc->tleSortGroupRef = ref;
	get_sort_group_operators(type, true, true, false,
							 &sgc->sortop, &sgc->eqop, NULL, &sgc->hashable);
	sgc->nulls_first = false;
	q->groupClause = lappend(q->groupClause, sgc);
}

/*
 * The user's query over the windows complete now: its stream replaced by
 * window_rows_sql, grouped by window as well.  Outputs the query's own
 * columns, then sw_seq, sw_ws, sw_we.
 */
static char *
windows_select(Oid relid, const CountShape *sh, const char *window_rows)
{
	Query	   *q = copyObject(sh->q);
	Query	   *rows = sw_analyze_internal(window_rows, count_param_types,
										   lengthof(count_param_types));
	RangeTblEntry *rte;
	int			natts = list_length(rows->targetList) - 3;

	if (sw_replace_stream(q, relid, rows) != 1)
		elog(ERROR, "count query does not read stream %s once", sw_relation_name(relid));
	rte = rt_fetch(sh->rtindex, q->rtable);
	rte->eref->colnames = lappend(rte->eref->colnames, makeString("sw_seq"));
	rte->eref->colnames = lappend(rte->eref->colnames, makeString("sw_ws"));
	rte->eref->colnames = lappend(rte->eref->colnames, makeString("sw_we"));
	add_group_column(q, sh->rtindex, natts + 1, INT8OID, "sw_seq");
	add_group_column(q, sh->rtindex, natts + 2, TIMESTAMPTZOID, "sw_ws");
	add_group_column(q, sh->rtindex, natts + 3, TIMESTAMPTZOID, "sw_we");
	return sw_deparse_query(q);
}

/*
 * "sw_ins AS (INSERT INTO <result> ... ON CONFLICT ...)": the upsert of the
 * rows of select, which outputs the query's columns, then the window's
 * number, first and last event time.
 */
static char *
results_cte(const SwQueryDef *def, const char *select)
{
	List	   *cols;
	StringInfoData sql;
	StringInfoData names;
	StringInfoData keys;
	StringInfoData sets;
	StringInfoData aliases;
	ListCell   *lc;
	int			i = 0;

	sw_require_result_table(def);
	cols = sw_query_columns(def->stream, def->query);
	initStringInfo(&names);
	initStringInfo(&keys);
	initStringInfo(&sets);
	initStringInfo(&aliases);
	appendStringInfoString(&keys, "window_seq");
	appendStringInfoString(&sets, "window_start = EXCLUDED.window_start, window_end = EXCLUDED.window_end");
	foreach(lc, cols)
	{
		SwOutputColumn *col = lfirst(lc);
		const char *name = quote_identifier(col->name);

		i++;
		appendStringInfo(&names, ", %s", name);
		appendStringInfo(&aliases, "sw_o%d, ", i);
		if (col->is_key)
			appendStringInfo(&keys, ", %s", name);
		else
			appendStringInfo(&sets, ", %s = EXCLUDED.%s", name, name);
	}
	initStringInfo(&sql);
	appendStringInfo(&sql, "sw_ins AS (INSERT INTO %s AS sw_r (window_seq, window_start, window_end%s)"
					 " SELECT sw_q.sw_seq, sw_q.sw_ws, sw_q.sw_we",
					 sw_relation_name(def->result_table), names.data);
	for (int j = 1; j <= i; j++)
		appendStringInfo(&sql, ", sw_q.sw_o%d", j);
	appendStringInfo(&sql, " FROM (%s) sw_q(%ssw_seq, sw_ws, sw_we)"
					 "\nON CONFLICT (%s) DO UPDATE SET %s RETURNING 1)",
					 select, aliases.data, keys.data, sets.data);
	return sql.data;
}

/*
 * The step's statement of a query that reads the events of each group's
 * first window not emitted again (parameters: count_param_types).
 * Returns the result rows written.
 */
static char *
count_statement(const SwQueryDef *def)
{
	CountShape *sh = count_shape(def->stream, def->query);
	char	   *state = sw_relation_name(def->pane_table);
	char	   *numbered = numbered_sql(sh, events_sql(def->stream, sh), state,
										def->count_size, def->count_slide, false);
	char	   *select = windows_select(def->stream, sh,
										window_rows_sql(def->stream, sh, numbered,
														def->count_size, def->count_slide));
	char	   *k = key_list(sh, "");

	return psprintf("WITH sw_st AS (INSERT INTO %s AS sw_x (%s, sw_count, sw_next,"
					" sw_keep_t, sw_keep_p, sw_keep_o)"
					" SELECT %s, pg_catalog.max(sw_c.sw_total), pg_catalog.max(sw_c.sw_nn),"
					" pg_catalog.max(sw_c.sw_t) FILTER (WHERE sw_c.sw_num = sw_c.sw_nn * " INT64_FORMAT "),"
					" pg_catalog.max(sw_c.sw_p) FILTER (WHERE sw_c.sw_num = sw_c.sw_nn * " INT64_FORMAT "),"
					" pg_catalog.max(sw_c.sw_o) FILTER (WHERE sw_c.sw_num = sw_c.sw_nn * " INT64_FORMAT ")"
					" FROM (%s) sw_c GROUP BY %s"
					" ON CONFLICT (%s) DO UPDATE SET sw_count = EXCLUDED.sw_count,"
					" sw_next = EXCLUDED.sw_next, sw_keep_t = EXCLUDED.sw_keep_t,"
					" sw_keep_p = EXCLUDED.sw_keep_p, sw_keep_o = EXCLUDED.sw_keep_o RETURNING 1),\n"
					"%s\nSELECT (SELECT pg_catalog.count(*) FROM sw_ins),"
					" (SELECT pg_catalog.count(*) FROM sw_st)",
					state, k, key_list(sh, "sw_c."),
					def->count_slide, def->count_slide, def->count_slide,
					numbered, key_list(sh, "sw_c."), k,
					results_cte(def, select));
}

/* gcd(size, slide): the events of a chunk */
static int64
chunk_events(const SwQueryDef *def)
{
	int64		a = def->count_size;
	int64		b = def->count_slide;

	while (b != 0)
	{
		int64		t = a % b;

		a = b;
		b = t;
	}
	return a;
}

/*
 * The partial plan of a count query whose events come from rows (the
 * stream's columns, then count_lead's), or NULL (and *why) when its
 * aggregates cannot be kept as partial states.
 */
static PanePlan *
count_plan(const SwQueryDef *def, const CountShape *sh, const char *rows, const char **why)
{
	Query	   *q = copyObject(sh->q);

	/* no GROUP BY: one group, keyed by a constant (count_shape) */
	if (q->groupClause == NIL)
	{
		SortGroupClause *sgc = makeNode(SortGroupClause);
		TargetEntry *tle = makeTargetEntry((Expr *) makeBoolConst(true, false),
										   list_length(q->targetList) + 1, NULL, true);
		ListCell   *lc;

		foreach(lc, q->targetList)
			tle->ressortgroupref = Max(tle->ressortgroupref,
									   lfirst_node(TargetEntry, lc)->ressortgroupref);
		tle->ressortgroupref++;
		q->targetList = lappend(q->targetList, tle);
		sgc->tleSortGroupRef = tle->ressortgroupref;
		get_sort_group_operators(BOOLOID, true, true, false,
								 &sgc->sortop, &sgc->eqop, NULL, &sgc->hashable);
		q->groupClause = list_make1(sgc);
	}
	return sw_partial_plan(def->stream, q,
						   sw_analyze_internal(rows, count_param_types, lengthof(count_param_types)),
						   count_lead, COUNT_NLEAD, COUNT_NTRAIL, "count", why);
}

/*
 * The fold's rows of a query that keeps chunks: the events numbered this
 * step (numbered_sql) joined back to the stream's rows, each with its
 * chunk (count_lead).
 */
static char *
chunk_rows_sql(const SwQueryDef *def, const CountShape *sh, const char *state)
{
	int64		g = chunk_events(def);
	char	   *numbered = numbered_sql(sh, events_sql(def->stream, sh), state,
										def->count_size, def->count_slide, true);

	return psprintf("SELECT %s, sw_m.sw_chunk, sw_m.sw_ct, sw_m.sw_cp, sw_m.sw_co,"
					" sw_m.sw_cl, sw_m.sw_total, sw_m.sw_gnext, sw_m.sw_nn FROM ("
					"SELECT sw_c.sw_p, sw_c.sw_o, sw_c.sw_num / " INT64_FORMAT " AS sw_chunk,"
					" pg_catalog.first_value(sw_c.sw_t) OVER sw_z AS sw_ct,"
					" pg_catalog.first_value(sw_c.sw_p) OVER sw_z AS sw_cp,"
					" pg_catalog.first_value(sw_c.sw_o) OVER sw_z AS sw_co,"
					" pg_catalog.last_value(sw_c.sw_t) OVER sw_z AS sw_cl,"
					" sw_c.sw_total, sw_c.sw_next AS sw_gnext, sw_c.sw_nn FROM (%s) sw_c"
					" WINDOW sw_z AS (PARTITION BY %s, sw_c.sw_num / " INT64_FORMAT
					" ORDER BY sw_c.sw_t, sw_c.sw_p, sw_c.sw_o"
					" ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)"
					") sw_m JOIN ONLY %s sw_s ON sw_s.sw_partition = sw_m.sw_p"
					" AND sw_s.sw_offset = sw_m.sw_o OFFSET 0",
					sw_stream_columns_sql(def->stream, "sw_s"), g, numbered,
					key_list(sh, "sw_c."), g, sw_stream_rows_name(def->stream));
}

/*
 * Whether a query's aggregates can be kept as partial states, judged on
 * its shape alone (a rows query of the right column types), for the
 * layout of its state table; pp gets the plan's layout.
 */
static PanePlan *
count_layout(const SwQueryDef *def, const CountShape *sh)
{
	const char *why;

	if (!sw_pane_engine)
		return NULL;
	return count_plan(def, sh,
					  psprintf("SELECT %s, 0::pg_catalog.int8,"
							   " NULL::pg_catalog.timestamptz, 0::pg_catalog.int4, 0::pg_catalog.int8,"
							   " NULL::pg_catalog.timestamptz, 0::pg_catalog.int8, 0::pg_catalog.int8,"
							   " 0::pg_catalog.int8 FROM ONLY %s sw_s",
							   sw_stream_columns_sql(def->stream, "sw_s"),
							   sw_stream_rows_name(def->stream)),
					  &why);
}

/*
 * The step's statement of a query that keeps chunks (parameters:
 * count_param_types; $3 = $4 and $6 false unless its chunks are made
 * anew).  In one statement: fold the events numbered now into fresh chunk
 * states (sw_fresh); with the chunk rows of the state table, spread each
 * group's counters over its rows (sw_u: only groups with events now have
 * them); upsert the fresh chunks that windows not emitted yet need,
 * merging a chunk begun earlier (sw_kc); delete the chunk rows no such
 * window needs (sw_pr, by ctid); upsert each group's counters and keep
 * event (sw_st); and combine every window complete now from its chunks
 * (sw_ins).
 */
static char *
chunk_statement(const SwQueryDef *def, const CountShape *sh, const PanePlan *pp)
{
	char	   *state = sw_relation_name(def->pane_table);
	int64		g = chunk_events(def);
	int64		size = def->count_size;
	int64		slide = def->count_slide;
	char	   *k = key_list(sh, "");
	char	   *chunk_cols = "sw_chunk, sw_ct, sw_cp, sw_co, sw_cl";
	char	   *kept;
	char	   *bound = psprintf("sw_u.sw_g1 * " INT64_FORMAT " / " INT64_FORMAT, slide, g);
	StringInfoData aggs;
	StringInfoData aggs_d;
	StringInfoData merge;
	StringInfoData keep;
	StringInfoData combine;
	char	   *outputs;
	char	   *group_tail;

	initStringInfo(&aggs);
	initStringInfo(&aggs_d);
	initStringInfo(&merge);
	for (int i = 1; i <= pp->naggs; i++)
	{
		appendStringInfo(&aggs, ", sw_a%d", i);
		appendStringInfo(&aggs_d, ", sw_d.sw_a%d", i);
	}
	if (pp->naggs > 0)
		appendStringInfo(&merge, ", %s", sw_merge_states_sql(pp, "sw_x"));
	/* the first event of the group's first window not emitted, if numbered */
	initStringInfo(&keep);
	for (int i = 0; i < 3; i++)
	{
		const char *c = (const char *[]) {"sw_ct", "sw_cp", "sw_co"}[i];

		appendStringInfo(&keep, ", coalesce(pg_catalog.max(sw_u.%s) FILTER (WHERE sw_u.sw_chunk = %s"
						 " AND sw_u.sw_tid IS NOT NULL), pg_catalog.max(sw_u.%s) FILTER"
						 " (WHERE sw_u.sw_chunk = %s AND sw_u.sw_tid IS NULL))",
						 c, bound, c, bound);
	}
	kept = psprintf("%s, %s%s", chunk_cols, k, aggs.data);

	/* every window complete now, from its chunks */
	sw_state_outputs(def, pp, &outputs, &group_tail);
	initStringInfo(&combine);
	appendStringInfo(&combine, "SELECT %s, sw_p.sw_seq, pg_catalog.min(sw_p.sw_ct), pg_catalog.max(sw_p.sw_cl)"
					 " FROM (SELECT sw_u.*, sw_w.sw_seq FROM sw_u CROSS JOIN LATERAL"
					 " pg_catalog.generate_series(GREATEST(sw_u.sw_g0, CASE WHEN sw_u.sw_chunk * "
					 INT64_FORMAT " + " INT64_FORMAT " <= 0 THEN 0 ELSE (sw_u.sw_chunk * " INT64_FORMAT
					 " + " INT64_FORMAT ") / " INT64_FORMAT " END),"
					 " LEAST(sw_u.sw_g1 - 1, sw_u.sw_chunk * " INT64_FORMAT " / " INT64_FORMAT "))"
					 " AS sw_w(sw_seq) WHERE sw_u.sw_g1 IS NOT NULL) sw_p GROUP BY sw_p.sw_seq%s",
					 outputs, g, g - size, g, g - size + slide - 1, slide,
					 g, slide, group_tail);

	return psprintf("WITH sw_fresh(%s, %s%s, sw_total, sw_gnext, sw_nn) AS (%s),\n"
					"sw_u AS MATERIALIZED (SELECT sw_w.*, pg_catalog.max(sw_w.sw_gnext) OVER sw_g AS sw_g0,"
					" pg_catalog.max(sw_w.sw_nn) OVER sw_g AS sw_g1,"
					" pg_catalog.max(sw_w.sw_total) OVER sw_g AS sw_gt FROM ("
					"SELECT NULL::pg_catalog.tid AS sw_tid, %s, sw_gnext, sw_nn, sw_total FROM sw_fresh"
					" UNION ALL SELECT sw_d.ctid, %s, NULL, NULL, NULL FROM %s sw_d"
					" WHERE sw_d.sw_chunk OPERATOR(pg_catalog.>=) 0) sw_w WINDOW sw_g AS (PARTITION BY %s)),\n"
					"sw_kc AS (INSERT INTO %s AS sw_x (%s) SELECT %s FROM sw_u"
					" WHERE sw_u.sw_tid IS NULL AND sw_u.sw_chunk >= %s"
					" ON CONFLICT (sw_chunk, %s) DO UPDATE SET"
					" sw_cl = GREATEST(sw_x.sw_cl, EXCLUDED.sw_cl)%s RETURNING 1),\n"
					"sw_pr AS (DELETE FROM %s sw_d USING sw_u WHERE sw_d.ctid OPERATOR(pg_catalog.=) sw_u.sw_tid"
					" AND sw_u.sw_g1 IS NOT NULL AND sw_u.sw_chunk < %s RETURNING 1),\n"
					"sw_st AS (INSERT INTO %s AS sw_x (sw_chunk, %s, sw_count, sw_next,"
					" sw_keep_t, sw_keep_p, sw_keep_o)"
					" SELECT -1, %s, pg_catalog.max(sw_u.sw_gt), pg_catalog.max(sw_u.sw_g1)%s"
					" FROM sw_u WHERE sw_u.sw_g1 IS NOT NULL GROUP BY %s"
					" ON CONFLICT (sw_chunk, %s) DO UPDATE SET sw_count = EXCLUDED.sw_count,"
					" sw_next = EXCLUDED.sw_next, sw_keep_t = EXCLUDED.sw_keep_t,"
					" sw_keep_p = EXCLUDED.sw_keep_p, sw_keep_o = EXCLUDED.sw_keep_o RETURNING 1),\n"
					"%s\nSELECT (SELECT pg_catalog.count(*) FROM sw_ins),"
					" (SELECT pg_catalog.count(*) FROM sw_st), (SELECT pg_catalog.count(*) FROM sw_kc),"
					" (SELECT pg_catalog.count(*) FROM sw_pr)",
					chunk_cols, k, aggs.data, pp->fold_select,
					kept, psprintf("sw_d.sw_chunk, sw_d.sw_ct, sw_d.sw_cp, sw_d.sw_co,"
								   " sw_d.sw_cl, %s%s", key_list(sh, "sw_d."), aggs_d.data),
					state, key_list(sh, "sw_w."),
					state, kept, kept, bound, k, merge.data,
					state, bound,
					state, k, key_list(sh, "sw_u."), keep.data, key_list(sh, "sw_u."), k,
					results_cte(def, combine.data));
}

/*
 * Make the query's state table if it has none, as its owner (the current
 * user), and record it.  Only at create_count_query: a step never makes
 * one (the counts it held cannot be rebuilt).  A query whose aggregates
 * can be kept as partial states gets chunk columns in front (count_lead)
 * and a state column per aggregate after the keys; its rows are keyed
 * (sw_chunk, keys), a group's own row having sw_chunk -1.
 */
static void
make_count_table(SwQueryDef *def)
{
	CountShape *sh = count_shape(def->stream, def->query);
	PanePlan   *pp;
	Oid			nsp;
	char	   *name;
	char	   *qname;
	StringInfoData sql;
	ListCell   *lc;
	int			i = 0;

	if (OidIsValid(def->pane_table))
		return;
	sw_require_result_table(def);
	pp = count_layout(def, sh);
	nsp = get_rel_namespace(def->result_table);
	name = ChooseRelationName(get_rel_name(def->result_table), NULL, "count", nsp, false);
	qname = quote_qualified_identifier(get_namespace_name(nsp), name);
	initStringInfo(&sql);
	appendStringInfo(&sql, "CREATE TABLE %s (", qname);
	if (pp != NULL)
		appendStringInfoString(&sql, "sw_chunk pg_catalog.int8 NOT NULL,"
							   " sw_ct pg_catalog.timestamptz, sw_cp pg_catalog.int4,"
							   " sw_co pg_catalog.int8, sw_cl pg_catalog.timestamptz, ");
	foreach(lc, sh->keys)
	{
		Node	   *key = lfirst(lc);
		Oid			coll = exprCollation(key);

		i++;
		appendStringInfo(&sql, "sw_k%d %s", i,
						 format_type_extended(exprType(key), exprTypmod(key),
											  FORMAT_TYPE_TYPEMOD_GIVEN | FORMAT_TYPE_FORCE_QUALIFY));
		if (OidIsValid(coll) && coll != DEFAULT_COLLATION_OID)
			appendStringInfo(&sql, " COLLATE %s", generate_collation_name(coll));
		appendStringInfoString(&sql, ", ");
	}
	for (int j = 1; pp != NULL && j <= pp->naggs; j++)
		appendStringInfo(&sql, "sw_a%d pg_catalog.bytea, ", j);
	appendStringInfo(&sql, "sw_count pg_catalog.int8%s, sw_next pg_catalog.int8%s,"
					 " sw_keep_t pg_catalog.timestamptz, sw_keep_p pg_catalog.int4,"
					 " sw_keep_o pg_catalog.int8, UNIQUE NULLS NOT DISTINCT (%s%s))",
					 pp ? "" : " NOT NULL", pp ? "" : " NOT NULL",
					 pp ? "sw_chunk, " : "", key_list(sh, ""));
	sw_spi_exec(sql.data, 0, NULL, NULL, NULL, SPI_OK_UTILITY);
	sw_spi_exec(psprintf("CREATE INDEX ON %s (sw_keep_t)", qname),
				0, NULL, NULL, NULL, SPI_OK_UTILITY);
	sw_spi_exec(psprintf("COMMENT ON TABLE %s IS %s", qname,
						 quote_literal_cstr(psprintf("streamwm: state of count query %s (how many "
													 "events of each group are numbered%s; not a cache: "
													 "do not change it)", def->name,
													 pp ? ", and the partial aggregates of the "
													 "windows not emitted yet" : ""))),
				0, NULL, NULL, NULL, SPI_OK_UTILITY);
	CommandCounterIncrement();
	def->pane_table = get_relname_relid(name, nsp);
	sw_catalog_record_panes(def->name, def->pane_table, "count", (Datum) 0);
}

/* A count query's state table is gone: its numbering cannot be rebuilt. */
static void
count_state_missing(const SwQueryDef *def)
{
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_TABLE),
			 errmsg("the state table of count query \"%s\" is missing", def->name),
			 errdetail("It held how many events of each group were numbered, which the stream's rows no longer show."),
			 errhint("Drop the query and create it again; its windows are numbered anew.")));
}

/*
 * The state table's own columns have the types the step reads them as
 * (its owner can change them): checked before any Datum of it is read.
 * The key columns are only ever read by SQL, which checks their types.
 */
static void
check_state_columns(const SwQueryDef *def)
{
	static const struct
	{
		const char *name;
		Oid			type;
	}			cols[] =
	{
		{"sw_count", INT8OID},
		{"sw_next", INT8OID},
		{"sw_keep_t", TIMESTAMPTZOID},
		{"sw_keep_p", INT4OID},
		{"sw_keep_o", INT8OID},
	};

	for (int i = 0; i < lengthof(cols); i++)
	{
		AttrNumber	attno = get_attnum(def->pane_table, cols[i].name);

		if (attno == InvalidAttrNumber || get_atttype(def->pane_table, attno) != cols[i].type)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_TABLE_DEFINITION),
					 errmsg("the state table %s of count query \"%s\" has no column %s of type %s",
							sw_relation_name(def->pane_table), def->name, cols[i].name,
							format_type_be(cols[i].type)),
					 errhint("Drop the query and create it again; its windows are numbered anew.")));
	}
}

/* The earliest keep time of the query's groups, DT_NOEND if none. */
static TimestampTz
earliest_keep(const SwQueryDef *def)
{
	bool		isnull;
	Datum		d;

	sw_spi_exec(psprintf("SELECT pg_catalog.min(sw_keep_t) FROM %s",
						 sw_relation_name(def->pane_table)),
				0, NULL, NULL, NULL, SPI_OK_SELECT);
	if (SPI_gettypeid(SPI_tuptable->tupdesc, 1) != TIMESTAMPTZOID)
		elog(ERROR, "sw_keep_t of %s is not of type timestamp with time zone",
			 sw_relation_name(def->pane_table));
	d = sw_spi_getdatum(0, 1, &isnull);
	SPI_freetuptable(SPI_tuptable);
	return isnull ? DT_NOEND : DatumGetTimestampTz(d);
}

/*
 * The chunk plan of a query whose state table keeps chunks (made so by
 * make_count_table), NULL when it keeps none; an error when it keeps them
 * but the query no longer qualifies.
 */
static PanePlan *
chunk_plan(const SwQueryDef *def, const CountShape *sh)
{
	const char *why;
	PanePlan   *pp;

	if (get_attnum(def->pane_table, "sw_chunk") == InvalidAttrNumber)
		return NULL;
	pp = count_plan(def, sh, chunk_rows_sql(def, sh, sw_relation_name(def->pane_table)), &why);
	if (pp == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("count query \"%s\" no longer qualifies for the partial states its state table keeps",
						def->name),
				 errdetail("The query does not qualify because %s.", why),
				 errhint("Drop the query and create it again; its windows are numbered anew.")));
	return pp;
}

/* The statement of a step of the query: with chunks or without. */
static char *
step_statement(const SwQueryDef *def, const CountShape *sh, const PanePlan *pp)
{
	return pp ? chunk_statement(def, sh, pp) : count_statement(def);
}

/*
 * The partial plan of the entry's query, decided once per entry: NULL
 * when its state table has no chunks (its step reads the events of each
 * group's first window not emitted again).
 */
static PanePlan *
count_plan_of(const SwQueryDef *def, SwStepEntry *e)
{
	if (!e->pane_plan_decided)
	{
		MemoryContext old = MemoryContextSwitchTo(e->cxt);

		e->pane_plan = chunk_plan(def, count_shape(def->stream, def->query));
		e->pane_plan_decided = true;
		MemoryContextSwitchTo(old);
	}
	return e->pane_plan;
}

/*
 * A step of a count query, as its owner (the current user): number the
 * events with lo <= t < hi (lo = closed_until, hi = W), upsert the windows
 * complete now and the new state, and record what retention must keep.
 * A query that keeps chunks reads only those events, unless its chunks
 * are to be made anew (their stamp does not match: a state that fails its
 * check, another server version): it then deletes them and reads, as the
 * others do each step, every group's events from the first event of its
 * first window not emitted (retention keeps them).
 */
void
sw_count_upsert_windows(SwQueryDef *def, Datum offsets, TimestampTz lo, TimestampTz hi,
						int64 *windows, int64 *rows)
{
	SwStepEntry *e = sw_step_entry(def);
	PanePlan   *pp;
	Datum		values[6];
	TimestampTz from = lo;
	bool		reread = true;
	char	   *stamp = NULL;
	bool		isnull;

	*windows = 0;
	*rows = 0;
	if (!OidIsValid(def->pane_table))
		count_state_missing(def);
	check_state_columns(def);
	pp = count_plan_of(def, e);
	if (e->plan == NULL || e->statement_pane_table != def->pane_table)
	{
		char	   *sql = step_statement(def, count_shape(def->stream, def->query), pp);

		sw_step_entry_depends(e, sw_query_relids(sw_analyze_window_query(def->query)));
		/* privileges before planning: see sw_check_statement_privileges */
		sw_check_statement_privileges(sql, 6, count_param_types);
		sw_step_entry_set_statement(e, sql, 6, count_param_types, def->pane_table, 0);
	}
	if (pp != NULL)
	{
		stamp = sw_pane_stamp(pp, def->pane_table);
		reread = def->pane_stamp == NULL || strcmp(stamp, def->pane_stamp) != 0;
		if (reread)
			sw_spi_exec(psprintf("DELETE FROM %s WHERE sw_chunk OPERATOR(pg_catalog.>=) 0",
								 sw_relation_name(def->pane_table)),
						0, NULL, NULL, NULL, SPI_OK_DELETE);
	}
	if (reread)
		from = Min(lo, earliest_keep(def));
	values[0] = Int64GetDatum(def->start_offset);
	values[1] = offsets;
	values[2] = TimestampTzGetDatum(from);
	values[3] = TimestampTzGetDatum(lo);
	values[4] = TimestampTzGetDatum(hi);
	values[5] = BoolGetDatum(reread);
	if (SPI_execute_plan(e->plan, values, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "streamwm: window statement of query \"%s\" failed", def->name);
	*rows = DatumGetInt64(sw_spi_getdatum(0, 1, &isnull));
	*windows = *rows;
	SPI_freetuptable(SPI_tuptable);
	/* CommandCounterIncrement by SPI: the state as the statement left it */
	if (stamp != NULL)
		sw_catalog_record_panes(def->name, def->pane_table, stamp, (Datum) 0);
	sw_catalog_record_count_needs(def->name, Min(hi, earliest_keep(def)));
}

/*
 * streamwm_internal._set_count_windows(name text, size int, slide int): make a
 * query that _register_query has just recorded a count query (plan
 * 'count', no hop or size), after checking its shape as the caller.
 */
Datum
streamwm_set_count_windows(PG_FUNCTION_ARGS)
{
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	int32		size = PG_GETARG_INT32(1);
	int32		slide = PG_GETARG_INT32(2);
	SwQueryDef *def;
	int			nestlevel;

	sw_require_extension_version();

	if (size <= 0 || slide <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("size and slide of a count query must be positive")));
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	def = sw_load_managed_query(name);
	/* create_count_query's checks, here so that they hold for any caller */
	if (def->lateness_us > 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("stream %s has allowed_lateness: count windows are not supported on it",
						sw_relation_name(def->stream)),
				 errdetail("An event accepted below the watermark would renumber the events of windows already emitted.")));
	/* only what _create_count_query has just registered, never another query */
	if (def->count || def->hop_us != 1 || def->size_us != 1 || OidIsValid(def->pane_table) ||
		!TIMESTAMP_IS_NOBEGIN(def->count_needs) || def->result_stream || def->processing ||
		def->closed_until != def->start_closed || !OidIsValid(def->result_table) ||
		get_attnum(def->result_table, "window_seq") == InvalidAttrNumber)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("query \"%s\" cannot be made a count query", name),
				 errhint("Use streamwm.create_count_query().")));
	sw_citus_refuse_result_kind(def->result_table, "count");
	nestlevel = sw_enter_safe_path();
	(void) count_shape(def->stream, def->query);
	sw_leave_safe_path(nestlevel);
	sw_catalog_make_count_query(name, size, slide);
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * The statement a step of a count query runs, as the current user (the
 * query's owner), for streamwm_internal._window_sql().
 */
char *
sw_count_statement(const SwQueryDef *def)
{
	CountShape *sh;

	if (!OidIsValid(def->pane_table))
		count_state_missing(def);
	sh = count_shape(def->stream, def->query);
	return step_statement(def, sh, chunk_plan(def, sh));
}

/*
 * A count query's check, as its owner (the current user): make its state
 * table if it has none, and plan and run its statement over no row, so
 * that what a step would fail on fails now (create_count_query,
 * _check_query).
 */
void
sw_count_check(SwQueryDef *def)
{
	Datum		values[6];
	CountShape *sh;

	/*
	 * A state table is made only before the query's first step (which
	 * records count_needs): a new one later would number every group from 0
	 * again and overwrite the windows emitted under those numbers.
	 */
	if (!OidIsValid(def->pane_table) && !TIMESTAMP_IS_NOBEGIN(def->count_needs))
		count_state_missing(def);
	make_count_table(def);
	check_state_columns(def);
	sh = count_shape(def->stream, def->query);
	/* no row: t >= -infinity and t < -infinity */
	values[0] = Int64GetDatum(0);
	values[1] = PointerGetDatum(construct_empty_array(INT8OID));
	values[2] = TimestampTzGetDatum(DT_NOBEGIN);
	values[3] = TimestampTzGetDatum(DT_NOBEGIN);
	values[4] = TimestampTzGetDatum(DT_NOBEGIN);
	values[5] = BoolGetDatum(true);
	sw_dry_run_statement(def->name, step_statement(def, sh, chunk_plan(def, sh)),
						 6, count_param_types, values, NULL);
}

/*
 * streamwm_internal._check_count_query(name text): as the query's owner,
 * sw_count_check.
 */
Datum
streamwm_check_count_query(PG_FUNCTION_ARGS)
{
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	SwQueryDef *def;
	SwRoleContext cx;
	ErrorContextCallback errcb;

	sw_require_extension_version();

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	def = sw_load_managed_query(name);
	if (!def->count)
		elog(ERROR, "query \"%s\" is not a count query", name);
	sw_enter_role(def->owner, def->search_path, &cx);
	errcb.callback = sw_window_query_error_context;
	errcb.arg = name;
	errcb.previous = error_context_stack;
	error_context_stack = &errcb;
	sw_count_check(def);
	error_context_stack = errcb.previous;
	sw_leave_role(&cx);
	SPI_finish();
	PG_RETURN_VOID();
}
