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
 * A step recomputes the sessions, gaps-and-islands with window functions,
 * over the accepted rows the query still needs, and upserts those that
 * closed since the query's closed_until: last + gap in (closed_until, W].
 * The rows it needs start at session_from: the first event time of the
 * earliest session still open (at any group), or W when none is.  An
 * accepted event has t >= W, so it can only extend or merge open sessions:
 * a session whose end is <= W is final, and every row of a session still
 * open, or still to come, has t >= session_from.  Rows before session_from
 * belong to closed sessions only; the tail of such a session that is read
 * again (its rows at or after session_from) ends where it ended, at or
 * before closed_until, and is not emitted again.  session_from is what
 * retention keeps rows for (process.c, query_needs_from).
 *
 * The statement, built from the query's analyzed tree (never its text):
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
 * offset, $3 session_from, $4 closed_until, $5 W, $6 session_floor.
 *
 * Exactly once: the results, closed_until and session_from are written in
 * the step's transaction, with the offsets and W; a failed step leaves all
 * of them, and the next one computes the same sessions again; a session
 * written again is the same row, upserted over itself.
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
#include "limit.h"
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
 * The statement of a session query's step (file header), as the current
 * user (the query's owner), from its analyzed tree.
 */
char *
sw_session_statement(const SwQueryDef *def)
{
	Query	   *q = sw_analyze_window_query(def->query);
	Query	   *rows;
	Query	   *fin;
	RangeTblEntry *rte;
	Relation	rel;
	TupleDesc	desc;
	int			rtindex;
	int			natts;
	int			nkeys = 0;
	int			resno = 1;
	Index		maxref = 0;
	List	   *tlist = NIL;
	ListCell   *lc;
	StringInfoData cols;		/* the stream's columns, as sw_tag outputs them */
	StringInfoData keys;		/* sw_session_k1, ... */
	StringInfoData tag;
	char	   *gap = sw_interval_literal(def->size_us);
	char	   *order = "%1$s.sw_event_time, %1$s.sw_partition, %1$s.sw_offset";
	TargetEntry *ts;
	TargetEntry *te;
	SortGroupClause *sgc;
	const char *result;

	rtindex = session_stream_rtindex(q, def->stream);
	rel = table_open(def->stream, AccessShareLock);
	desc = RelationGetDescr(rel);
	natts = desc->natts;

	/*
	 * The rows: the query's FROM and WHERE, the stream replaced by its rows
	 * from session_from on, each with all the stream's columns and the
	 * query's GROUP BY expressions (sw_session_k1, ...).
	 */
	rows = copyObject(q);
	initStringInfo(&cols);
	for (int i = 0; i < natts; i++)
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
		appendStringInfo(&cols, "%s%s", i > 0 ? ", " : "", quote_identifier(name));
	}
	table_close(rel, AccessShareLock);
	initStringInfo(&keys);
	foreach(lc, q->groupClause)
	{
		TargetEntry *tle = get_sortgroupclause_tle(lfirst_node(SortGroupClause, lc),
												   q->targetList);

		nkeys++;
		tlist = lappend(tlist, makeTargetEntry(copyObject(tle->expr), resno++,
											   psprintf("sw_session_k%d", nkeys), false));
	}
	if (sw_replace_stream(rows, def->stream, session_rows_query(def->stream)) != 1)
		elog(ERROR, "streamwm: session query \"%s\" reads its stream more than once", def->name);
	sw_query_rows_only(rows, tlist);

	/*
	 * Sessions: a row starts one when it is the first of its group or
	 * gap or more after the previous (ties in any order: they are less
	 * than gap apart); a running sum numbers them; each row gets its
	 * session's first event time and last + gap.
	 */
#define PARTITION_BY(alias) \
	do { \
		if (nkeys > 0) \
		{ \
			appendStringInfoString(&tag, "PARTITION BY "); \
			for (int k = 1; k <= nkeys; k++) \
				appendStringInfo(&tag, "%s%s.sw_session_k%d", k > 1 ? ", " : "", (alias), k); \
		} \
	} while (0)

	initStringInfo(&tag);
	/*
	 * A session whose last event is at or above W is open whatever its end:
	 * 'infinity', so that an event near the end of the timestamp range
	 * cannot make last + gap overflow at every step.
	 */
	appendStringInfo(&tag, "SELECT %s, sw_b.sw_session_first AS sw_session_start,"
					 " CASE WHEN sw_b.sw_session_last OPERATOR(pg_catalog.>=) $5"
					 " THEN 'infinity'::pg_catalog.timestamptz"
					 " ELSE sw_b.sw_session_last OPERATOR(pg_catalog.+) %s END AS sw_session_end FROM ("
					 "SELECT sw_a.*, pg_catalog.min(sw_a.sw_event_time) OVER sw_w AS sw_session_first,"
					 " pg_catalog.max(sw_a.sw_event_time) OVER sw_w AS sw_session_last FROM ("
					 "SELECT sw_n.*, pg_catalog.sum(sw_n.sw_session_new) OVER (",
					 cols.data, gap);
	PARTITION_BY("sw_n");
	appendStringInfo(&tag, " ORDER BY ");
	appendStringInfo(&tag, order, "sw_n");
	appendStringInfo(&tag, " ROWS UNBOUNDED PRECEDING) AS sw_session_id FROM ("
					 "SELECT sw_d.*, CASE WHEN sw_d.sw_event_time OPERATOR(pg_catalog.-)"
					 " pg_catalog.lag(sw_d.sw_event_time) OVER (");
	PARTITION_BY("sw_d");
	appendStringInfo(&tag, " ORDER BY ");
	appendStringInfo(&tag, order, "sw_d");
	appendStringInfo(&tag, ") OPERATOR(pg_catalog.<) %s THEN 0 ELSE 1 END AS sw_session_new"
					 " FROM (%s) sw_d) sw_n) sw_a WINDOW sw_w AS (",
					 gap, sw_deparse_query(rows));
	PARTITION_BY("sw_a");
	appendStringInfo(&tag, "%ssw_a.sw_session_id)) sw_b", nkeys > 0 ? ", " : "PARTITION BY ");
#undef PARTITION_BY

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
										tag.data, cols.data),
							   sw_deparse_query(fin), NULL, result);
}

/* Run a session query's statement (prepared by the caller). */
static void
run_session_statement(const SwQueryDef *def, SPIPlanPtr plan, Datum offsets,
					  TimestampTz hi, int64 *rows, TimestampTz *open_from)
{
	Datum		values[6];
	bool		isnull;
	Datum		d;

	values[0] = Int64GetDatum(def->start_offset);
	values[1] = offsets;
	values[2] = TimestampTzGetDatum(def->session_from);
	values[3] = TimestampTzGetDatum(def->closed_until);
	values[4] = TimestampTzGetDatum(hi);
	values[5] = TimestampTzGetDatum(def->session_floor);
	if (SPI_execute_plan(plan, values, NULL, false, 0) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "streamwm: session statement of query \"%s\" failed", def->name);
	*rows = DatumGetInt64(sw_spi_getdatum(0, 1, &isnull));
	d = sw_spi_getdatum(0, 2, &isnull);
	*open_from = isnull ? DT_NOEND : DatumGetTimestampTz(d);
	SPI_freetuptable(SPI_tuptable);
}

/*
 * A session query's step, as the current user (its owner): upsert every
 * session that closed since closed_until (end in (closed_until, hi]), and
 * record where the rows it still needs start.  Returns the sessions
 * written (each is a window and a row).
 */
void
sw_session_upsert_windows(SwQueryDef *def, Datum offsets, TimestampTz hi,
						  int64 *windows, int64 *rows)
{
	SwStepEntry *e = sw_step_entry(def);
	TimestampTz open_from;

	if (e->plan == NULL)
	{
		char	   *sql = sw_session_statement(def);

		sw_step_entry_depends(e, sw_query_relids(sw_analyze_window_query(def->query)));
		/* privileges before planning: see sw_check_statement_privileges */
		sw_check_statement_privileges(sql, 6, session_param_types);
		sw_step_entry_set_statement(e, sql, 6, session_param_types, InvalidOid);
	}
	run_session_statement(def, e->plan, offsets, hi, rows, &open_from);
	*windows = *rows;
	/* the rows of sessions still open, and of those to come (t >= W) */
	sw_catalog_record_session_from(def->name, Min(open_from, hi));
}

/*
 * create_session_query's check (streamwm_internal._check_query): plan the step's
 * statement as the query's owner, and run it over no rows, so that what
 * would fail fails now.
 */
void
sw_session_check(const SwQueryDef *def)
{
	Datum		values[6];

	values[0] = Int64GetDatum(0);
	values[1] = PointerGetDatum(construct_empty_array(INT8OID));
	for (int i = 2; i < 6; i++)
		values[i] = TimestampTzGetDatum(DT_NOBEGIN);
	sw_dry_run_statement(def->name, sw_session_statement(def), 6, session_param_types,
						 values, NULL);
}

/*
 * streamwm_internal._register_session(name text, gap interval): makes the query
 * that _create_session_query has just registered in this transaction a
 * session query (sw_catalog_make_session).
 */
Datum
streamwm_register_session(PG_FUNCTION_ARGS)
{
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	int64		gap_us = sw_interval_usec(PG_GETARG_INTERVAL_P(1));

	sw_require_extension_version();

	if (gap_us <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("gap must be positive")));
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	(void) sw_load_managed_query(name);
	sw_catalog_make_session(name, PG_GETARG_DATUM(1), gap_us);
	SPI_finish();
	PG_RETURN_VOID();
}
