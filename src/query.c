/*-------------------------------------------------------------------------
 * query.c
 *	  Owns window queries (SPEC section 5) as PostgreSQL understands them:
 *	  parsing and analyzing the user's SELECT (the one stream it reads, the
 *	  relations it reads, its bound text), choosing its plan once at
 *	  create_query, the general plan (every reference to the stream replaced
 *	  by one window's rows), and running a query's step with the statement
 *	  and plan kept for it (step_cache.c).  The pane plan is pane.c's, the
 *	  result table and the UPSERT result.c's.
 *
 * Only the query's text is kept in the catalog (never a node tree: that
 * breaks dump/restore), bound at create_query: analyzed under its
 * creator's search_path and deparsed with every name qualified.
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_aggregate.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_class.h"
#include "commands/defrem.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_type.h"
#include "common/int.h"
#include "common/keywords.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/analyze.h"
#include "parser/parse_oper.h"
#include "parser/parser.h"
#include "parser/parsetree.h"
#include "parser/scanner.h"
#include "rewrite/rewriteManip.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/varlena.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
#include "access/htup_details.h"
#include "catalog/pg_attribute.h"
#include "utils/rel.h"
#include "utils/ruleutils.h"
#include "utils/timestamp.h"

#include "api.h"
#include "catalog.h"
#include "citus.h"
#include "count.h"
#include "limit.h"
#include "pane.h"
#include "query.h"
#include "result.h"
#include "session.h"
#include "step_cache.h"
#include "version.h"
#include "window.h"

PG_FUNCTION_INFO_V1(streamwm_query_stream);
PG_FUNCTION_INFO_V1(streamwm_bind_query);
PG_FUNCTION_INFO_V1(streamwm_window_sql);
PG_FUNCTION_INFO_V1(streamwm_check_query);

/* The one SELECT of a query text, with where it ends. */
typedef struct ParsedQuery
{
	const char *text;
	int			end;			/* offset just past the statement */
	SelectStmt *select;
	RawStmt    *raw;
} ParsedQuery;

/* Parse with error positions in the query's text (sw_source_error_context). */
static List *
raw_parse_query(const char *query)
{
	ErrorContextCallback errcb;
	List	   *raw;

	errcb.callback = sw_source_error_context;
	errcb.arg = unconstify(char *, query);
	errcb.previous = error_context_stack;
	error_context_stack = &errcb;
	raw = raw_parser(query, RAW_PARSE_DEFAULT);
	error_context_stack = errcb.previous;
	return raw;
}

static Query *
analyze_query(RawStmt *rs, const char *query)
{
	ErrorContextCallback errcb;
	Query	   *q;

	errcb.callback = sw_source_error_context;
	errcb.arg = unconstify(char *, query);
	errcb.previous = error_context_stack;
	error_context_stack = &errcb;
	q = parse_analyze_fixedparams(rs, query, NULL, 0, NULL);
	error_context_stack = errcb.previous;
	return q;
}

/*
 * Context of an error while a query's step statement is tried: the query's
 * name, and no position into that generated statement.
 */
void
sw_window_query_error_context(void *arg)
{
	if (getinternalerrposition() > 0)
	{
		internalerrposition(0);
		internalerrquery(NULL);
	}
	errcontext("window query \"%s\"", (const char *) arg);
}

static void
parse_select(const char *query, ParsedQuery *pq)
{
	List	   *raw = raw_parse_query(query);
	RawStmt    *rs;
	SelectStmt *s;

	if (list_length(raw) != 1)
		ereport(ERROR,
				(errcode(ERRCODE_SYNTAX_ERROR),
				 errmsg("a query must be exactly one SELECT statement")));
	rs = linitial_node(RawStmt, raw);
	if (!IsA(rs->stmt, SelectStmt))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("a query must be a SELECT statement")));
	s = (SelectStmt *) rs->stmt;
	if (s->op != SETOP_NONE || s->valuesLists != NIL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("UNION, INTERSECT, EXCEPT and VALUES are not supported in a window query")));
	if (s->intoClause != NULL || s->lockingClause != NIL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("SELECT INTO and FOR UPDATE/SHARE are not supported in a window query")));
	if (s->limitCount != NULL || s->limitOffset != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("LIMIT and OFFSET are not supported in a window query"),
				 errdetail("A window's result is every group of the window.")));
	pq->text = query;
	pq->raw = rs;
	pq->select = s;
	pq->end = rs->stmt_len > 0 ? rs->stmt_location + rs->stmt_len : (int) strlen(query);
}

/* Collect the relation range-table entries of a query tree, at any depth. */
static bool
collect_relation_rtes(Node *node, List **rtes)
{
	if (node == NULL)
		return false;
	if (IsA(node, RangeTblEntry))
	{
		RangeTblEntry *rte = (RangeTblEntry *) node;

		if (rte->rtekind == RTE_RELATION)
			*rtes = lappend(*rtes, rte);
		return false;
	}
	if (IsA(node, Query))
		return query_tree_walker((Query *) node, collect_relation_rtes, rtes,
								 QTW_EXAMINE_RTES_BEFORE);
	return expression_tree_walker(node, collect_relation_rtes, rtes);
}

/*
 * Every RTE_RELATION range-table entry of an analyzed (or rewritten) query:
 * its own range table, subqueries in FROM, CTEs and sublinks.
 */
List *
sw_relation_rtes(Query *q)
{
	List	   *rtes = NIL;

	(void) collect_relation_rtes((Node *) q, &rtes);
	return rtes;
}

/*
 * streamwm_internal._query_stream(query text) RETURNS regclass: the one stream a
 * query reads, found in its analyzed tree (under the caller's search_path)
 * by OID, however it is spelled.
 */
Datum
streamwm_query_stream(PG_FUNCTION_ARGS)
{
	char	   *query = text_to_cstring(PG_GETARG_TEXT_PP(0));
	ParsedQuery pq;
	Query	   *q;
	List	   *relids;
	Oid			stream = InvalidOid;
	ListCell   *lc;

	sw_require_extension_version();

	parse_select(query, &pq);
	q = analyze_query(copyObject(pq.raw), query);
	relids = sw_query_relids(q);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	foreach(lc, relids)
	{
		Oid			owner;

		if (!sw_lookup_stream(lfirst_oid(lc), false, &owner, NULL))
			continue;
		/* a query holds its stream's rows back and runs in its steps */
		if (!sw_may_manage(owner))
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("must be owner of stream %s", sw_relation_name(lfirst_oid(lc))),
					 errdetail("Only members of a stream's owner may add queries to it.")));
		if (OidIsValid(stream))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("query reads more than one stream")));
		stream = lfirst_oid(lc);
	}
	SPI_finish();
	if (!OidIsValid(stream))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("query does not read a stream"),
				 errhint("The FROM clause must name a table created with streamwm.create_stream().")));
	/* on Citus: a local stream, and no distributed table (citus.c) */
	foreach(lc, relids)
		sw_citus_refuse_query_relation(lfirst_oid(lc), stream);
	PG_RETURN_OID(stream);
}

/*
 * streamwm_internal._bind_query(query text) RETURNS text: the query analyzed under
 * the caller's search_path and deparsed under search_path = pg_catalog,
 * pg_temp, so that every function, operator, type and table in it is
 * schema-qualified where it would not be found in pg_catalog.  This text is
 * what steps run: it means what it meant to its creator, whoever's
 * search_path is in force later and whatever another role plants in a
 * schema on the creator's search_path.
 */
Datum
streamwm_bind_query(PG_FUNCTION_ARGS)
{
	char	   *query = text_to_cstring(PG_GETARG_TEXT_PP(0));
	ParsedQuery pq;
	Query	   *q;

	sw_require_extension_version();

	parse_select(query, &pq);
	q = analyze_query(copyObject(pq.raw), query);
	PG_RETURN_TEXT_P(cstring_to_text(sw_deparse_query(q)));
}

/*
 * Analyze a stored, bound query text (query_def.query) as the current user,
 * resolving names only in pg_catalog and pg_temp, as a step reads it.
 */
Query *
sw_analyze_bound_query(const char *query)
{
	ParsedQuery pq;
	Query	   *q;
	int			nestlevel;

	nestlevel = sw_enter_safe_path();
	parse_select(query, &pq);
	q = analyze_query(copyObject(pq.raw), query);
	sw_leave_safe_path(nestlevel);
	return q;
}

/*
 * The text a step runs for an analyzed query: deparsed under search_path =
 * pg_catalog, pg_temp, so that every name not in pg_catalog is qualified.
 * Relations and columns are printed by OID and attribute number under
 * their current names.
 */
char *
sw_deparse_query(Query *q)
{
	char	   *bound;
	int			nestlevel;

	nestlevel = sw_enter_safe_path();
	bound = pg_get_querydef(q, false);
	sw_leave_safe_path(nestlevel);
	return bound;
}

/* The OIDs of the relations an analyzed query reads, at any depth. */
List *
sw_query_relids(Query *q)
{
	List	   *relids = NIL;
	ListCell   *lc;

	foreach(lc, sw_relation_rtes(q))
		relids = list_append_unique_oid(relids, lfirst_node(RangeTblEntry, lc)->relid);
	return relids;
}

/*
 * The relations an analyzed query reads, at any depth, as a regclass[]
 * Datum (query_def.reads).
 */
Datum
sw_query_reads(Query *q)
{
	List	   *relids = sw_query_relids(q);
	Datum	   *d;
	int			n = 0;
	ListCell   *lc;

	d = palloc(sizeof(Datum) * Max(list_length(relids), 1));
	foreach(lc, relids)
		d[n++] = ObjectIdGetDatum(lfirst_oid(lc));
	return PointerGetDatum(construct_array(d, n, REGCLASSOID, sizeof(Oid), true,
										   TYPALIGN_INT));
}

char *
sw_interval_literal(int64 usec)
{
	return psprintf("'" INT64_FORMAT " microseconds'::pg_catalog.interval", usec);
}

/*
 * A stream's columns in attribute order as a select list over alias, a
 * dropped column as a NULL placeholder (so attribute numbers still match).
 */
char *
sw_stream_columns_sql(Oid relid, const char *alias)
{
	Relation	rel = table_open(relid, AccessShareLock);
	TupleDesc	desc = RelationGetDescr(rel);
	StringInfoData sql;

	initStringInfo(&sql);
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (i > 0)
			appendStringInfoString(&sql, ", ");
		if (att->attisdropped)
			appendStringInfo(&sql, "NULL::pg_catalog.int4 AS sw_dropped_%d", i + 1);
		else
			appendStringInfo(&sql, "%s.%s", alias, quote_identifier(NameStr(att->attname)));
	}
	table_close(rel, AccessShareLock);
	return sql.data;
}

/* Analyze a statement of ours, with parameters of the given types. */
Query *
sw_analyze_internal(const char *sql, const Oid *types, int ntypes)
{
	List	   *raw = raw_parser(sql, RAW_PARSE_DEFAULT);

	return parse_analyze_fixedparams(linitial_node(RawStmt, raw), sql, types, ntypes, NULL);
}

/* A window query's text, parsed, checked and analyzed as the current user. */
Query *
sw_analyze_window_query(const char *query)
{
	ParsedQuery pq;

	parse_select(query, &pq);
	return analyze_query(copyObject(pq.raw), query);
}

/*
 * The general plan: any query PostgreSQL accepts over the stream.
 *
 * The query's analyzed tree is changed so that every range-table entry of
 * the stream, however it was spelled and at whatever depth (FROM, a join,
 * a FROM subquery, a CTE, a scalar subquery in WHERE), becomes a subquery
 * over the rows of one window:
 *
 *	 SELECT <the stream's columns, in attribute order> FROM ONLY <stream> sw_s
 *	  WHERE <processed, seen by the query, not late>
 *		AND sw_event_time >= $3 AND sw_event_time < $3 + <size> OFFSET 0
 *
 * Parameters: $1 the query's start offset, $2 each partition's processed
 * offset, $3 the window's start.  Every reference to the stream thus reads
 * only that window's rows (SPEC section 5); OFFSET 0 keeps the planner from
 * pushing the user's conditions below the window's, so they are never
 * evaluated on another window's rows (a division by zero there is not the
 * user's error).  A query that aggregates
 * without GROUP BY is grouped by a constant, so that a window whose rows
 * all fail the WHERE yields no row (one row per group, no group without an
 * event).  The tree is deparsed under search_path = pg_catalog (every name
 * outside pg_catalog qualified) and wrapped in the upsert; a step runs it
 * once per window that has rows, from a plan kept across steps.
 */

/*
 * What replaces the stream: the rows of the window starting at $3.  They
 * are found by event time through the stream's BRIN index (the block
 * ranges the window's rows were written to, when disorder is bounded), the
 * offsets and the late log filtering them.  There is no btree on
 * sw_event_time: it cost every insert, and only this fallback needs it.
 */
static Query *
window_rows_query(Oid relid, int64 size_us)
{
	Oid			types[3] = {INT8OID, INT8ARRAYOID, TIMESTAMPTZOID};

	return sw_analyze_internal(psprintf("SELECT %s FROM ONLY %s sw_s WHERE sw_s.sw_offset > $1"
										" AND sw_s.sw_offset <= ($2::pg_catalog.int8[])[sw_s.sw_partition + 1]"
										" AND sw_s.sw_event_time >= $3 AND sw_s.sw_event_time < $3 + %s"
										" AND %s OFFSET 0",
										sw_stream_columns_sql(relid, "sw_s"), sw_stream_rows_name(relid),
										sw_interval_literal(size_us), sw_not_late_sql(relid)),
							   types, lengthof(types));
}

/*
 * Make q a source of rows: its FROM and WHERE, with 'tlist' as its outputs,
 * and no grouping, aggregation, HAVING, window, ordering or DISTINCT (the
 * per-event row sources of session and count queries).
 */
void
sw_query_rows_only(Query *q, List *tlist)
{
	q->targetList = tlist;
	q->groupClause = NIL;
	q->groupingSets = NIL;
	q->groupDistinct = false;
	q->hasAggs = false;
	q->havingQual = NULL;
	q->hasWindowFuncs = false;
	q->windowClause = NIL;
	q->sortClause = NIL;
	q->distinctClause = NIL;
	q->hasDistinctOn = false;
}

/* The condition that the stream row sw_s is not late (not in the late log). */
char *
sw_not_late_sql(Oid relid)
{
	return psprintf("NOT EXISTS (SELECT 1 FROM streamwm.late_event_log sw_l"
					" WHERE sw_l.stream = '%u'::pg_catalog.oid"
					" AND sw_l.partition = sw_s.sw_partition"
					" AND sw_l.sw_offset = sw_s.sw_offset)", relid);
}

/*
 * Refuse in the WHERE or GROUP BY (clause) of a session or count query
 * (kind) what could answer differently when a later step evaluates it
 * again over the same rows: a function that is not IMMUTABLE (a volatile
 * one, and a STABLE one too: a cast of timestamptz to date or to_char
 * depends on TimeZone, DateStyle or lc_time, which the session running the
 * step chooses; a STABLE SQL function may read tables) and a subquery (the
 * tables it reads change between steps).  Pinning the settings would not
 * make a STABLE function that reads a table or a subquery repeatable, so
 * both are refused when the query is created.
 */
static void
check_repeatable(Node *expr, const char *clause, const char *kind)
{
	if (expr == NULL)
		return;
	if (checkExprHasSubLink(expr))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("the %s of a %s query must not contain a subquery", clause, kind),
				 errdetail("Each step evaluates it again over the rows of the windows still open, and the tables a subquery reads can change between steps: rows would be lost or counted twice."),
				 errhint("Use a subquery in the outputs, or join the query's result table.")));
	if (contain_volatile_functions(expr))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("the %s of a %s query must call only immutable functions", clause, kind),
				 errdetail("Each step evaluates it again over the rows of the windows still open, and a volatile function can answer differently there: rows would be lost or counted twice.")));
	if (contain_mutable_functions(expr))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("the %s of a %s query must call only immutable functions", clause, kind),
				 errdetail("Each step evaluates it again over the rows of the windows still open, and a stable function can answer differently there: it depends on settings of the session running the step (TimeZone for a cast of timestamptz to date or text, DateStyle, lc_time) or on tables. Rows would be lost or counted twice."),
				 errhint("Name the time zone: (sw_event_time AT TIME ZONE 'UTC')::date is immutable.")));
}

/*
 * For a query whose windows are runs of the stream's own events per group
 * (kind: "session", "count"), evaluated again over the same rows at later
 * steps: the stream must be read once, alone in the query's FROM, without
 * WITH, and its WHERE and GROUP BY must give the same answer at every step
 * (check_repeatable).  Returns the stream's range-table index.
 */
int
sw_alone_stream_rtindex(Query *q, Oid relid, const char *kind)
{
	Node	   *from;
	RangeTblEntry *rte;
	ListCell   *lc;
	int			reads = 0;

	foreach(lc, sw_relation_rtes(q))
	{
		if (lfirst_node(RangeTblEntry, lc)->relid == relid)
			reads++;
	}
	from = list_length(q->jointree->fromlist) == 1 ? linitial(q->jointree->fromlist) : NULL;
	rte = from != NULL && IsA(from, RangeTblRef) ?
		rt_fetch(((RangeTblRef *) from)->rtindex, q->rtable) : NULL;
	if (reads != 1 || rte == NULL || rte->rtekind != RTE_RELATION || rte->relid != relid ||
		q->cteList != NIL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("a %s query must read stream %s once, alone in its FROM",
						kind, sw_relation_name(relid)),
				 errdetail("Its windows are runs of the stream's own events per group: no join, WITH, FROM subquery or second reference to the stream."),
				 errhint("Read other tables in a subquery of the outputs, or join the query's result table.")));
	check_repeatable(q->jointree->quals, "WHERE", kind);
	foreach(lc, q->groupClause)
	{
		TargetEntry *tle = get_sortgroupclause_tle(lfirst_node(SortGroupClause, lc),
												   q->targetList);

		check_repeatable((Node *) tle->expr, "GROUP BY", kind);
	}
	return ((RangeTblRef *) from)->rtindex;
}

/*
 * Make a relation's range-table entry one of another kind (a subquery, a
 * CTE reference) reading the same columns: no relation, lock or
 * permission of its own.  Dropped columns, which have no name in eref, get
 * the names the replacement gives them (sw_stream_columns_sql).
 */
void
sw_rte_unrelation(RangeTblEntry *rte, RTEKind kind)
{
	ListCell   *lc;
	int			i = 0;

	rte->rtekind = kind;
	rte->relid = InvalidOid;
	rte->relkind = 0;
	rte->rellockmode = 0;
	rte->tablesample = NULL;
	rte->inh = false;
	rte->requiredPerms = 0;
	rte->checkAsUser = InvalidOid;
	rte->selectedCols = NULL;
	rte->insertedCols = NULL;
	rte->updatedCols = NULL;
	rte->extraUpdatedCols = NULL;
	foreach(lc, rte->eref->colnames)
	{
		i++;
		if (strVal(lfirst(lc))[0] == '\0')
			lfirst(lc) = makeString(psprintf("sw_dropped_%d", i));
	}
}

typedef struct ReplaceStream
{
	Oid			relid;
	Query	   *rows;
	List	   *inserted;		/* the subqueries we put in: not walked */
	int			replaced;
} ReplaceStream;

static bool
replace_stream_walker(Node *node, ReplaceStream *ctx)
{
	if (node == NULL)
		return false;
	if (IsA(node, RangeTblEntry))
	{
		RangeTblEntry *rte = (RangeTblEntry *) node;

		if (rte->rtekind != RTE_RELATION || rte->relid != ctx->relid)
			return false;
		sw_rte_unrelation(rte, RTE_SUBQUERY);
		rte->subquery = copyObject(ctx->rows);
		rte->security_barrier = false;
		ctx->inserted = lappend(ctx->inserted, rte->subquery);
		ctx->replaced++;
		return false;
	}
	if (IsA(node, Query))
	{
		if (list_member_ptr(ctx->inserted, node))
			return false;
		return query_tree_walker((Query *) node, replace_stream_walker, ctx,
								 QTW_EXAMINE_RTES_BEFORE);
	}
	return expression_tree_walker(node, replace_stream_walker, ctx);
}

/*
 * Replace every range-table entry of the stream in q, at any depth, by the
 * subquery rows (which must output the stream's columns in attribute
 * order, then possibly more).  Returns how many there were.
 */
int
sw_replace_stream(Query *q, Oid relid, Query *rows)
{
	ReplaceStream ctx;

	memset(&ctx, 0, sizeof(ctx));
	ctx.relid = relid;
	ctx.rows = rows;
	(void) replace_stream_walker((Node *) q, &ctx);
	return ctx.replaced;
}

/*
 * The SELECT of the general plan (parameters above), as text.  Its output
 * is the query's own columns.
 */
static char *
general_window_select(Oid relid, const char *query, int64 size_us)
{
	Query	   *q = sw_analyze_window_query(query);
	ListCell   *lc;

	if (sw_replace_stream(q, relid, window_rows_query(relid, size_us)) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("query does not read stream %s", sw_relation_name(relid))));

	/* an aggregate without GROUP BY: one group per window that has one */
	if (q->groupClause == NIL && q->groupingSets == NIL)
	{
		TargetEntry *tle;
		SortGroupClause *sgc = makeNode(SortGroupClause);

		tle = makeTargetEntry((Expr *) makeBoolConst(true, false),
							  list_length(q->targetList) + 1, NULL, true);
		tle->ressortgroupref = 1;
		foreach(lc, q->targetList)
			tle->ressortgroupref = Max(tle->ressortgroupref,
									   lfirst_node(TargetEntry, lc)->ressortgroupref + 1);
		q->targetList = lappend(q->targetList, tle);
		sgc->tleSortGroupRef = tle->ressortgroupref;
		get_sort_group_operators(BOOLOID, true, true, false,
								 &sgc->sortop, &sgc->eqop, NULL, &sgc->hashable);
		sgc->nulls_first = false;
		q->groupClause = list_make1(sgc);
	}

	return sw_deparse_query(q);
}

/*
 * Which plan a query gets, decided once at create_query and recorded:
 * "pane" when it qualifies and streamwm.pane_engine is on, else "general".
 */
const char *
sw_choose_plan(Oid relid, const char *query, int64 hop_us, int64 size_us)
{
	const char *why;

	/* an ordered query (hop and size NULL, stored as 0) has its own statement */
	if (size_us == 0)
		return "general";
	if (sw_pane_engine && sw_pane_plan(relid, query, hop_us, SW_UNIX_EPOCH, 0, &why) != NULL)
		return "pane";
	return "general";
}

static const Oid general_param_types[3] = {INT8OID, INT8ARRAYOID, TIMESTAMPTZOID};

/*
 * An ordered query (SPEC section 11: hop and size NULL): each accepted row
 * once, when W passes its event time, in (sw_event_time, sw_partition,
 * sw_offset) order, numbered without gaps.  The stream, read once in the
 * query's own FROM, becomes the rows with closed_until <= event time < W
 * (processed, after the start offset, not late), and the query outputs
 * that row's event time, partition and offset after its own columns:
 *
 *	 WITH sw_ins AS (INSERT INTO <result> (seq, event_time, <outputs>)
 *	   SELECT $5 + row_number() OVER (ORDER BY et, p, o), et, <outputs>
 *		 FROM (<the query>) sw_x ORDER BY 1 RETURNING seq)
 *	 SELECT count(*) FROM sw_ins
 *
 * $1 start offset, $2 processed offsets, $3 closed_until, $4 W, $5 the rows
 * emitted so far (query_def.rows_upserted, committed with them).  A row
 * with event time below closed_until that arrives later is late (W had
 * passed it), so every accepted row is emitted exactly once, and the
 * numbering is final.
 */
static const Oid ordered_param_types[5] = {INT8OID, INT8ARRAYOID, TIMESTAMPTZOID,
TIMESTAMPTZOID, INT8OID};

static char *
ordered_statement(const SwQueryDef *def)
{
	Query	   *q = sw_analyze_window_query(def->query);
	List	   *cols = sw_ordered_columns(def->stream, def->query);
	int			rti = sw_ordered_stream_rte(q, def->stream);
	static const char *const sys[3] = {"sw_event_time", "sw_partition", "sw_offset"};
	static const char *const alias[3] = {"sw_et", "sw_p", "sw_o"};
	static const Oid sys_types[3] = {TIMESTAMPTZOID, INT4OID, INT8OID};
	Oid			types[4] = {INT8OID, INT8ARRAYOID, TIMESTAMPTZOID, TIMESTAMPTZOID};
	StringInfoData sql;
	StringInfoData names;
	ListCell   *lc;

	for (int i = 0; i < 3; i++)
	{
		AttrNumber	attno = get_attnum(def->stream, sys[i]);

		if (attno == InvalidAttrNumber || get_atttype(def->stream, attno) != sys_types[i])
			elog(ERROR, "streamwm: stream %s has no column %s of the expected type",
				 sw_relation_name(def->stream), sys[i]);
		q->targetList = lappend(q->targetList,
								makeTargetEntry((Expr *) makeVar(rti, attno, sys_types[i], -1,
																 InvalidOid, 0),
												list_length(q->targetList) + 1,
												pstrdup(alias[i]), false));
	}
	(void) sw_replace_stream(q, def->stream,
							 sw_analyze_internal(psprintf("SELECT %s FROM ONLY %s sw_s"
														  " WHERE sw_s.sw_offset > $1"
														  " AND sw_s.sw_offset <= ($2::pg_catalog.int8[])[sw_s.sw_partition + 1]"
														  " AND sw_s.sw_event_time >= $3 AND sw_s.sw_event_time < $4"
														  " AND %s OFFSET 0",
														  sw_stream_columns_sql(def->stream, "sw_s"),
														  sw_stream_rows_name(def->stream),
														  sw_not_late_sql(def->stream)),
												 types, lengthof(types)));
	initStringInfo(&names);
	foreach(lc, cols)
		appendStringInfo(&names, ", %s", quote_identifier(((SwOutputColumn *) lfirst(lc))->name));
	initStringInfo(&sql);
	appendStringInfo(&sql, "WITH sw_ins AS (INSERT INTO %s AS sw_r (seq, event_time%s)"
					 " SELECT $5 + pg_catalog.row_number() OVER (ORDER BY sw_x.sw_et, sw_x.sw_p, sw_x.sw_o),"
					 " sw_x.sw_et",
					 sw_relation_name(def->result_table), names.data);
	foreach(lc, cols)
		appendStringInfo(&sql, ", sw_x.%s", quote_identifier(((SwOutputColumn *) lfirst(lc))->name));
	appendStringInfo(&sql, " FROM (%s) sw_x(%s, sw_et, sw_p, sw_o) ORDER BY 1 RETURNING sw_r.seq)"
					 " SELECT pg_catalog.count(*) FROM sw_ins",
					 sw_deparse_query(q), names.data + 2);
	return sql.data;
}

/* Emit an ordered query's rows with closed_until <= event time < W. */
static void
ordered_upsert(SwQueryDef *def, SwStepEntry *e, Datum offsets, TimestampTz lo,
			   TimestampTz hi, int64 *windows, int64 *rows)
{
	Datum		values[5];
	bool		isnull;

	sw_require_result_table(def);
	if (e->plan == NULL)
	{
		char	   *sql = ordered_statement(def);

		sw_step_entry_depends(e, sw_query_relids(sw_analyze_window_query(def->query)));
		sw_check_statement_privileges(sql, 5, ordered_param_types);
		sw_step_entry_set_statement(e, sql, 5, ordered_param_types, InvalidOid, 0);
	}
	values[0] = Int64GetDatum(def->start_offset);
	values[1] = offsets;
	values[2] = TimestampTzGetDatum(lo);
	values[3] = TimestampTzGetDatum(hi);
	values[4] = Int64GetDatum(def->rows_upserted);
	if (SPI_execute_plan(e->plan, values, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "streamwm: statement of ordered query \"%s\" failed", def->name);
	*rows = DatumGetInt64(sw_spi_getdatum(0, 1, &isnull));
	*windows = *rows;
	SPI_freetuptable(SPI_tuptable);
}

/* The pane plan of a query recorded with it; an error if it no longer qualifies. */
static PanePlan *
pane_plan_of(const SwQueryDef *def)
{
	const char *why;
	PanePlan   *pp = sw_pane_plan(def->stream, def->query, def->hop_us, def->origin,
									def->processing ? def->size_us : 0, &why);

	if (pp == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("query \"%s\" no longer qualifies for the pane plan it was created with",
						def->name),
				 errdetail("The query does not qualify because %s.", why),
				 errhint("Give the query its text again with streamwm.alter_query(), which decides its plan anew.")));
	return pp;
}

/* The general plan's statement: one window's rows upserted ($3 its start). */
static char *
general_statement(const SwQueryDef *def)
{
	return sw_upsert_statement(def, NULL, general_window_select(def->stream, def->query, def->size_us),
							   "$3", "SELECT pg_catalog.count(*) FROM sw_ins");
}

/*
 * The starts in (lo, hi] of the windows that contain the panes the last
 * SPI statement returned (ascending, in its first column), each once, in
 * ascending order; frees that result.
 */
static List *
panes_to_windows(const SwQueryDef *def, TimestampTz lo, TimestampTz hi)
{
	List	   *result = NIL;
	TimestampTz last = DT_NOBEGIN;

	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;
		TimestampTz pane = DatumGetTimestampTz(sw_spi_getdatum(i, 1, &isnull));
		TimestampTz first;
		int64		count;

		sw_pane_windows(pane, lo, hi, def->hop_us, def->size_us, &first, &count);
		for (int64 j = 0; j < count; j++)
		{
			TimestampTz ws = first + j * def->hop_us;

			if (ws <= last)
				continue;
			result = lappend(result, palloc(sizeof(TimestampTz)));
			*(TimestampTz *) llast(result) = ws;
			last = ws;
		}
	}
	SPI_freetuptable(SPI_tuptable);
	return result;
}

/*
 * Starts of the windows in (lo, hi] that hold a row the query may see: the
 * panes that hold such rows, each expanded to the size/hop windows that
 * contain it.  Ascending.  Read by event time through the BRIN index: a
 * window closing now may hold only rows earlier steps read (W can move
 * without new rows), so the step's new offsets alone would not find it.
 */
static List *
windows_with_rows(const SwQueryDef *def, Datum offsets, TimestampTz lo, TimestampTz hi)
{
	Oid			types[4] = {INT8OID, INT8ARRAYOID, TIMESTAMPTZOID, TIMESTAMPTZOID};
	Datum		values[4];

	values[0] = Int64GetDatum(def->start_offset);
	values[1] = offsets;
	values[2] = TimestampTzGetDatum(lo);
	values[3] = TimestampTzGetDatum(hi);
	sw_spi_exec(psprintf("SELECT DISTINCT %s AS p"
						 " FROM ONLY %s sw_s WHERE sw_s.sw_offset > $1"
						 " AND sw_s.sw_offset <= ($2::pg_catalog.int8[])[sw_s.sw_partition + 1]"
						 " AND sw_s.sw_event_time > $3 AND sw_s.sw_event_time < $4 + %s"
						 " ORDER BY p",
						 sw_window_start_sql("sw_s.sw_event_time", def->hop_us, def->origin),
						 sw_stream_rows_name(def->stream), sw_interval_literal(def->size_us)),
				4, types, values, NULL, SPI_OK_SELECT);
	return panes_to_windows(def, lo, hi);
}

/*
 * allowed_lateness (SPEC section 10): the closed windows a step re-fires
 * start in (floor, lo], lo = closed_until - size.  A row the query has
 * not read yet that was accepted with t < closed_until has
 * t >= closed_until - allowed_lateness, so every closed window it falls
 * into starts after lo - allowed_lateness.  Never a window that had ended
 * when the query was created (start <= its first closed_until - size):
 * that is not the query's, whatever rows arrive for it, and however they
 * are batched.
 */
TimestampTz
sw_refire_floor(const SwQueryDef *def, TimestampTz lo)
{
	TimestampTz floor;
	TimestampTz first;

	if (def->lateness_us == 0 || TIMESTAMP_NOT_FINITE(lo))
		return lo;
	if (pg_sub_s64_overflow(lo, def->lateness_us, &floor) || !IS_VALID_TIMESTAMP(floor))
		floor = DT_NOBEGIN;
	if (!TIMESTAMP_NOT_FINITE(def->start_closed) &&
		!pg_sub_s64_overflow(def->start_closed, def->size_us, &first) &&
		first > floor)
		floor = Min(first, lo);
	return floor;
}

/*
 * The general plan's re-fire (allowed_lateness): starts in (floor, lo] of
 * the closed windows that hold a row the query has not read yet (offsets
 * after its folded offsets, up to the processed ones, read on the primary
 * key) and that is not late.  Ascending.
 */
static List *
windows_to_refire(const SwQueryDef *def, Datum offsets, TimestampTz floor, TimestampTz lo)
{
	Oid			types[5] = {INT8OID, INT8ARRAYOID, INT8ARRAYOID, TIMESTAMPTZOID,
	TIMESTAMPTZOID};
	Datum		values[5];
	char		nulls[5] = {' ', ' ', ' ', ' ', ' '};

	if (floor >= lo)
		return NIL;
	values[0] = Int64GetDatum(def->start_offset);
	values[1] = offsets;
	values[2] = def->folded_offsets;
	if (def->folded_offsets == (Datum) 0)
		nulls[2] = 'n';
	values[3] = TimestampTzGetDatum(floor);
	values[4] = TimestampTzGetDatum(lo);
	sw_spi_exec(psprintf("SELECT DISTINCT %s AS p"
						 " FROM pg_catalog.unnest($2::pg_catalog.int8[]) WITH ORDINALITY AS sw_o(done, n)"
						 " CROSS JOIN LATERAL (SELECT sw_r.sw_partition, sw_r.sw_offset, sw_r.sw_event_time"
						 " FROM ONLY %s sw_r"
						 " WHERE sw_r.sw_partition = (sw_o.n - 1)::pg_catalog.int4"
						 " AND sw_r.sw_offset > GREATEST($1, coalesce(($3::pg_catalog.int8[])[sw_o.n], 0))"
						 " AND sw_r.sw_offset <= sw_o.done) sw_s"
						 " WHERE sw_s.sw_event_time > $4 AND sw_s.sw_event_time < $5 + %s AND %s"
						 " ORDER BY p",
						 sw_window_start_sql("sw_s.sw_event_time", def->hop_us, def->origin),
						 sw_stream_rows_name(def->stream),
						 sw_interval_literal(def->size_us), sw_not_late_sql(def->stream)),
				5, types, values, nulls, SPI_OK_SELECT);
	return panes_to_windows(def, floor, lo);
}

/*
 * Run the general plan's statement (plan) for each window of starts,
 * adding the windows that produced rows and the rows to *windows, *rows;
 * with refired, a window starting at or before lo (closed before) counts
 * there instead of in *windows.
 */
static void
run_general_windows(const SwQueryDef *def, SPIPlanPtr plan, Datum offsets, List *starts,
					TimestampTz lo, int64 *windows, int64 *rows, int64 *refired)
{
	bool		isnull;
	ListCell   *lc;

	foreach(lc, starts)
	{
		Datum		values[3];
		int64		n;
		TimestampTz ws = *(TimestampTz *) lfirst(lc);

		values[0] = Int64GetDatum(def->start_offset);
		values[1] = offsets;
		values[2] = TimestampTzGetDatum(ws);
		if (SPI_execute_plan(plan, values, NULL, false, 0) != SPI_OK_SELECT)
			elog(ERROR, "streamwm: window statement of query \"%s\" failed", def->name);
		n = DatumGetInt64(sw_spi_getdatum(0, 1, &isnull));
		sw_check_groups_per_window(def->name, n);
		if (n > 0 && refired != NULL && ws <= lo)
			(*refired)++;
		else if (n > 0)
			(*windows)++;
		*rows += n;
		SPI_freetuptable(SPI_tuptable);
		CHECK_FOR_INTERRUPTS();
	}
}

/*
 * Compute and upsert every window of a query whose start is in (lo, hi]
 * (those that closed since the last step), and re-fire the closed windows
 * that rows accepted within allowed_lateness fell into (start in
 * (sw_refire_floor, lo]), each once, as the current user (the query's
 * owner).  Returns the windows that closed and produced rows, the rows
 * written (re-fired windows' too), and the windows re-fired.
 */
void
sw_upsert_windows(SwQueryDef *def, Datum offsets, TimestampTz lo, TimestampTz hi,
				  int64 *windows, int64 *rows, int64 *refired)
{
	SwStepEntry *e = sw_step_entry(def);
	MemoryContext old;
	List	   *starts;

	*windows = 0;
	*rows = 0;
	*refired = 0;
	if (def->count)
	{
		sw_count_upsert_windows(def, offsets, lo, hi, windows, rows);
		return;
	}
	if (def->ordered)
	{
		ordered_upsert(def, e, offsets, lo, hi, windows, rows);
		return;
	}
	if (def->pane)
	{
		if (e->pane_plan == NULL)
		{
			old = MemoryContextSwitchTo(e->cxt);
			e->pane_plan = pane_plan_of(def);
			MemoryContextSwitchTo(old);
		}
		sw_pane_upsert_windows(def, e, offsets, lo, hi, windows, rows, refired);
		return;
	}
	if (e->plan == NULL)
	{
		char	   *sql = general_statement(def);

		sw_step_entry_depends(e, sw_query_relids(sw_analyze_window_query(def->query)));
		/* privileges before planning: see sw_check_statement_privileges */
		sw_check_statement_privileges(sql, 3, general_param_types);
		sw_step_entry_set_statement(e, sql, 3, general_param_types, InvalidOid, 0);
	}
	/* closed windows first (they start at or before lo), then the closing */
	starts = windows_to_refire(def, offsets, sw_refire_floor(def, lo), lo);
	if (lo < hi)
		starts = list_concat(starts, windows_with_rows(def, offsets, lo, hi));
	run_general_windows(def, e->plan, offsets, starts, lo, windows, rows, refired);
	/* where the next step's re-fire starts reading */
	if (def->lateness_us > 0)
		sw_catalog_record_read(def->name, offsets);
}

/* sw_try_as_role()'s call: the pane plan of a stored query (or NULL) */
static void *
pane_plan_try(void *arg)
{
	const SwQueryDef *def = arg;
	const char *why;

	return sw_pane_plan(def->stream, def->query, def->hop_us, def->origin,
						def->processing ? def->size_us : 0, &why);
}

/*
 * Does query def fold on the nodes of its distributed stream (pane plan,
 * citus_fold.c)?  Its pane plan is made now, as its owner, if its step
 * entry has none yet (the entry keeps it for the query's step); a query
 * whose plan cannot be made does not (its step reports why).  For the
 * step's choice whether to copy the rows (process.c).
 */
bool
sw_query_folds_on_nodes(const SwQueryDef *def)
{
	SwStepEntry *e;
	ErrorData  *error;

	if (!def->pane || def->session || def->count || def->ordered)
		return false;
	e = sw_step_entry(def);
	if (e->pane_plan == NULL)
	{
		e->pane_plan = sw_try_as_role(def->owner, pane_plan_try, (void *) def, e->cxt, &error);
		if (error != NULL)
			FreeErrorData(error);
	}
	return e->pane_plan != NULL && ((PanePlan *) e->pane_plan)->remote_fold != NULL;
}

/*
 * Compute again and upsert every window of a query whose start is in
 * (lo, hi] and that holds rows, from the stream's rows, whatever the
 * query's plan: the general plan's statement reads each window's rows as
 * a step does (processed, after the query's start offset, not late).
 * For streamwm.recompute() (alter.c), as the current user (the query's
 * owner), which has deleted the result rows of those windows.  Returns
 * the windows that produced rows and the rows.
 */
void
sw_recompute_windows(SwQueryDef *def, Datum offsets, TimestampTz lo, TimestampTz hi,
					 int64 *windows, int64 *rows)
{
	char	   *sql = general_statement(def);
	SPIPlanPtr	plan;

	*windows = 0;
	*rows = 0;
	/* privileges before planning: see sw_check_statement_privileges */
	sw_check_statement_privileges(sql, 3, general_param_types);
	plan = SPI_prepare(sql, 3, (Oid *) general_param_types);
	if (plan == NULL)
		elog(ERROR, "could not plan window query \"%s\": %s", def->name,
			 SPI_result_code_string(SPI_result));
	run_general_windows(def, plan, offsets, windows_with_rows(def, offsets, lo, hi),
						lo, windows, rows, NULL);
	SPI_freeplan(plan);
}

/*
 * Load a query the current user manages (is a member of its owner), read
 * as the catalog's owner; a clear error if there is none or it may not.
 * The caller is connected to SPI.
 */
SwQueryDef *
sw_load_managed_query(const char *name)
{
	SwRoleContext cx;
	SwQueryDef *def;

	sw_enter_catalog(&cx);
	def = sw_catalog_load_query(name);
	sw_leave_role(&cx);
	if (def == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("query \"%s\" does not exist", name)));
	if (!sw_may_manage(def->owner))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("must be owner of query \"%s\"", name)));
	return def;
}

/*
 * streamwm_internal._window_sql(query name) RETURNS text, for inspection: the
 * statement a step runs for the query.
 */
Datum
streamwm_window_sql(PG_FUNCTION_ARGS)
{
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	MemoryContext caller = CurrentMemoryContext;
	SwQueryDef *def;
	SwRoleContext cx;
	char	   *sql;

	sw_require_extension_version();

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	def = sw_load_managed_query(name);
	sw_enter_role(def->owner, def->search_path, &cx);
	if (def->session)
		sql = sw_session_statement(def);
	else if (def->count)
		sql = sw_count_statement(def);
	else if (def->pane && OidIsValid(def->pane_table))
		sql = sw_pane_statement(def, pane_plan_of(def));
	else if (def->pane)
		sql = "(made at the query's first step)";
	else
		sql = general_statement(def);
	sw_leave_role(&cx);
	/* in the caller's memory: SPI_finish frees what was made since SPI_connect */
	sql = MemoryContextStrdup(caller, sql);
	SPI_finish();
	PG_RETURN_TEXT_P(cstring_to_text(sql));
}

/*
 * Plan a query's statement and run it once with parameters that select no
 * row, as the current user (the query's owner): what a step would fail on
 * (a privilege: planning does not check them, starting the executor does,
 * for every table the query reads) fails now.  Privileges are checked
 * before planning, which may run the query's IMMUTABLE functions.
 */
void
sw_dry_run_statement(const char *name, const char *sql, int nparams, const Oid *types,
					 Datum *values, const char *nulls)
{
	SPIPlanPtr	plan;

	sw_check_statement_privileges(sql, nparams, types);
	plan = SPI_prepare(sql, nparams, (Oid *) types);
	if (plan == NULL)
		elog(ERROR, "could not plan window query \"%s\": %s", name,
			 SPI_result_code_string(SPI_result));
	if (SPI_execute_plan(plan, values, nulls, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not run window query \"%s\"", name);
	SPI_freeplan(plan);
}

/*
 * streamwm_internal._check_query(name text) RETURNS void: plans the step statement
 * of a query as its owner, so that create_query reports what would fail.
 */
Datum
streamwm_check_query(PG_FUNCTION_ARGS)
{
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	SwQueryDef *def;
	SwRoleContext cx;
	char	   *sql;
	Datum		values[SW_PANE_MAX_NPARAMS];
	ErrorContextCallback errcb;

	sw_require_extension_version();

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	def = sw_load_managed_query(name);
	/* a distributed stream given to another role is not read: say so now */
	if (sw_stream_distributed(def->stream, NULL, NULL))
		sw_citus_check_owner(def->stream);
	if (!def->ordered && !def->session && !def->count)
		sw_check_windows_per_row(def->hop_us, def->size_us);
	sw_enter_role(def->owner, def->search_path, &cx);
	errcb.callback = sw_window_query_error_context;
	errcb.arg = name;
	errcb.previous = error_context_stack;
	error_context_stack = &errcb;
	{
		if (def->session)
		{
			/* session.c: its own statement, planned and run over no rows */
			sw_session_check(def);
		}
		else if (def->count)
			sw_count_check(def);	/* count.c: the same */
		else
		{
			int			nparams = def->ordered ? 5 : 3;
			Oid			pane_types[SW_PANE_MAX_NPARAMS];
			const Oid  *types = general_param_types;

			/* the pane plan's state table is made now, as the query's owner */
			if (def->pane)
			{
				sql = sw_pane_check(def, pane_plan_of(def), pane_types, &nparams, &values[7]);
				types = pane_types;
			}
			else if (def->ordered)
			{
				sql = ordered_statement(def);
				types = ordered_param_types;
			}
			else
				sql = general_statement(def);
			/* over no window at all */
			values[0] = Int64GetDatum(0);
			values[1] = PointerGetDatum(construct_empty_array(INT8OID));
			values[2] = TimestampTzGetDatum(DT_NOBEGIN);
			values[3] = def->pane ? (Datum) 0 : TimestampTzGetDatum(DT_NOBEGIN);
			values[4] = def->ordered ? Int64GetDatum(0) : TimestampTzGetDatum(DT_NOBEGIN);
			values[5] = TimestampTzGetDatum(DT_NOBEGIN);
			values[6] = BoolGetDatum(true);
			sw_dry_run_statement(name, sql, nparams, types, values, def->pane ? "   n    " : NULL);
		}
	}
	error_context_stack = errcb.previous;
	sw_leave_role(&cx);
	SPI_finish();
	PG_RETURN_VOID();
}
