/*-------------------------------------------------------------------------
 * query.c
 *	  Owns window queries (SPEC section 5): checking the user's SELECT,
 *	  describing its output (the result table's columns and key), and
 *	  rewriting it into the statement that computes and upserts the windows
 *	  that close in a step.
 *
 * Only the user's SQL text is kept in the catalog (never a node tree: that
 * breaks dump/restore); it is re-parsed each step, under the search_path it
 * was created with.  The rewrite works on the text with the positions the
 * raw parser reports, so everything the user wrote (aggregates with ORDER BY,
 * FILTER, ordered-set aggregates, user-defined aggregates, HAVING, joins with
 * other tables) is executed by PostgreSQL itself.  For a query
 *
 *	 SELECT k, count(*) AS n FROM clicks WHERE ... GROUP BY k HAVING ...
 *
 * the step statement is
 *
 *	 SELECT clicks.sw_window_start, clicks.sw_window_start + <size>,
 *			k, count(*) AS n
 *	   FROM (<the stream's processed, non-late rows of the closing windows,
 *			  each paired with the start of every window it falls in>) AS clicks
 *	  WHERE ... GROUP BY clicks.sw_window_start, k HAVING ...
 *
 * wrapped in INSERT INTO <result> ... ON CONFLICT (window_start, k) DO UPDATE.
 * One set-based statement closes every window that a step closes.
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

#include "catalog.h"
#include "limit.h"
#include "query.h"
#include "window.h"

PG_FUNCTION_INFO_V1(streamwm_query_stream);
PG_FUNCTION_INFO_V1(streamwm_bind_query);
PG_FUNCTION_INFO_V1(streamwm_query_columns);
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

static List *
raw_parse_query(const char *query)
{
	MemoryContext cxt = CurrentMemoryContext;
	List	   *raw = NIL;

	PG_TRY();
	{
		raw = raw_parser(query, RAW_PARSE_DEFAULT);
	}
	PG_CATCH();
	{
		sw_reraise(cxt, NULL, NULL, query);
	}
	PG_END_TRY();
	return raw;
}

static Query *
analyze_query(RawStmt *rs, const char *query)
{
	MemoryContext cxt = CurrentMemoryContext;
	Query	   *q = NULL;

	PG_TRY();
	{
		q = parse_analyze_fixedparams(rs, query, NULL, 0, NULL);
	}
	PG_CATCH();
	{
		sw_reraise(cxt, NULL, NULL, query);
	}
	PG_END_TRY();
	return q;
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

/* Collect the RangeVars of a FROM list that name the stream. */
static void
find_stream_refs(List *from, Oid relid, List **found)
{
	ListCell   *lc;

	foreach(lc, from)
	{
		Node	   *n = lfirst(lc);

		if (IsA(n, RangeVar))
		{
			if (RangeVarGetRelid((RangeVar *) n, NoLock, true) == relid)
				*found = lappend(*found, n);
		}
		else if (IsA(n, JoinExpr))
		{
			JoinExpr   *j = (JoinExpr *) n;

			find_stream_refs(list_make2(j->larg, j->rarg), relid, found);
		}
	}
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
 * streamwm._query_stream(query text) RETURNS regclass: the one stream a
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
	PG_RETURN_OID(stream);
}

/*
 * streamwm._bind_query(query text) RETURNS text: the query analyzed under
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
 * Describe the output of a window query: its columns in order, with their
 * types and whether they are GROUP BY keys.  Checks the SPEC's rules.
 */
List *
sw_query_columns(Oid relid, const char *query)
{
	ParsedQuery pq;
	Query	   *q;
	List	   *result = NIL;
	ListCell   *lc;
	int			pos = 0;

	parse_select(query, &pq);
	q = analyze_query(copyObject(pq.raw), query);
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

	if (!q->hasAggs && q->groupClause == NIL)
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
		if (strcmp(tle->resname, "window_start") == 0 ||
			strcmp(tle->resname, "window_end") == 0)
			ereport(ERROR,
					(errcode(ERRCODE_DUPLICATE_COLUMN),
					 errmsg("output column name \"%s\" is reserved for the window bounds",
							tle->resname)));
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
		if (tle->ressortgroupref != 0)
		{
			ListCell   *lc3;

			foreach(lc3, q->groupClause)
			{
				if (lfirst_node(SortGroupClause, lc3)->tleSortGroupRef == tle->ressortgroupref)
					col->is_key = true;
			}
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

/*
 * streamwm._query_columns(stream regclass, query text)
 *	 RETURNS SETOF (colname text, coltype text, is_key boolean)
 */
Datum
streamwm_query_columns(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	List	   *cols;
	ListCell   *lc;

	cols = sw_query_columns(PG_GETARG_OID(0), text_to_cstring(PG_GETARG_TEXT_PP(1)));
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

/* Offset just past the (possibly qualified, possibly quoted) name at pos. */
static int
name_end(const char *s, int pos)
{
	for (;;)
	{
		int			after;

		if (s[pos] == '"')
		{
			pos++;
			while (s[pos] != '\0' && !(s[pos] == '"' && s[pos + 1] != '"'))
				pos += (s[pos] == '"') ? 2 : 1;
			if (s[pos] == '"')
				pos++;
		}
		else
		{
			while (s[pos] != '\0' &&
				   (isalnum((unsigned char) s[pos]) || s[pos] == '_' ||
					s[pos] == '$' || IS_HIGHBIT_SET(s[pos])))
				pos++;
		}
		after = pos;
		while (isspace((unsigned char) s[after]))
			after++;
		if (s[after] != '.')
			return pos;
		pos = after + 1;
		while (isspace((unsigned char) s[pos]))
			pos++;
	}
}

/*
 * Offset of the first of the keywords 'words' (or a ';') at parenthesis
 * depth zero in text[from, end); 'end' if there is none.  With close_paren,
 * instead the offset just past the parenthesis that closes the first one
 * opened at or after 'from'.
 */
static int
scan_top_level(const char *text, int from, int end, const char *const *words,
			   int nwords, bool close_paren)
{
	int		   *tokens = palloc(Max(nwords, 1) * sizeof(int));
	core_yy_extra_type yyextra;
	core_yyscan_t scanner;
	int			depth = 0;
	int			result = end;

	for (int i = 0; i < nwords; i++)
		tokens[i] = ScanKeywordTokens[ScanKeywordLookup(words[i], &ScanKeywords)];

	scanner = scanner_init(text, &yyextra, &ScanKeywords, ScanKeywordTokens);
	for (;;)
	{
		core_YYSTYPE yylval;
		YYLTYPE		yylloc;
		int			tok = core_yylex(&yylval, &yylloc, scanner);

		if (tok == 0 || yylloc >= end)
			break;
		if (yylloc < from)
		{
			if (tok == '(' || tok == '[')
				depth++;
			else if (tok == ')' || tok == ']')
				depth--;
			continue;
		}
		if (close_paren)
		{
			if (tok == '(')
				depth++;
			else if (tok == ')' && --depth == 0)
			{
				result = yylloc + 1;
				break;
			}
			continue;
		}
		if (tok == '(' || tok == '[')
			depth++;
		else if (tok == ')' || tok == ']')
			depth--;
		else if (depth == 0)
		{
			bool		stop = (tok == ';');

			for (int i = 0; i < nwords; i++)
				stop |= (tok == tokens[i]);
			if (stop)
			{
				result = yylloc;
				break;
			}
		}
	}
	scanner_finish(scanner);
	pfree(tokens);
	return result;
}

/* the clauses that may follow WHERE at the top level of a SELECT */
static const char *const after_where[] = {
	"group", "having", "window", "order", "limit", "offset", "fetch", "for"
};

static char *
interval_literal(int64 usec)
{
	return psprintf("'" INT64_FORMAT " microseconds'::pg_catalog.interval", usec);
}

/*
 * The pane plan.  For a query whose outputs are its GROUP BY columns and
 * calls of the built-in count, sum, min, max and avg of integers or numeric
 * (the decomposable aggregates), each row is aggregated once, into its pane
 * [n*hop, (n+1)*hop), by the user's own aggregate calls, when a step first
 * reads it ("fold"); the partial results live in the query's pane table,
 * one row per (pane, group), committed with everything else.  A window
 * that closes combines its size/hop panes from that table (a sum of counts
 * and sums, a min of mins, a max of maxes, a sum of sums over a sum of
 * counts), and panes no open window needs are deleted.  So each row costs
 * one pane update, and a step's cost does not grow with size/hop.
 *
 * The fold's SELECT: parameters $1 the query's start offset, $2 each
 * partition's processed offset, $3 closed_until - size (rows before it are
 * in no open window), $4 each partition's folded offset (NULL: none);
 * output sw_pane, the keys sw_k1.., the partials sw_a1...  The combine's
 * SELECT (with %s for the pane table): $3/$4 the range of window starts;
 * output window_start, window_end, the query's columns.  Returns NULL when
 * the query does not qualify; the general plan then computes it.
 */
typedef struct PanePlan
{
	char	   *fold_select;
	char	   *columns;		/* sw_pane, sw_k1, .., sw_a1, .. */
	char	   *conflict;		/* sw_pane, sw_k1, .. */
	char	   *merge;			/* sw_a1 = <sw_t.sw_a1 merged with EXCLUDED.sw_a1>, .. */
	char	   *combine_select; /* with %s for the pane table */
} PanePlan;

/* How a partial of each kind merges with another (ON CONFLICT of the fold). */
static void
append_merge(StringInfo merge, const char *kind, int n)
{
	if (merge->len > 0)
		appendStringInfoString(merge, ", ");
	if (strcmp(kind, "count") == 0)
		appendStringInfo(merge, "sw_a%d = sw_t.sw_a%d + EXCLUDED.sw_a%d", n, n, n);
	else if (strcmp(kind, "sum") == 0)
		appendStringInfo(merge, "sw_a%d = (SELECT pg_catalog.sum(sw_x) FROM (VALUES (sw_t.sw_a%d),"
						 " (EXCLUDED.sw_a%d)) sw_v(sw_x))", n, n, n);
	else if (strcmp(kind, "min") == 0)
		appendStringInfo(merge, "sw_a%d = LEAST(sw_t.sw_a%d, EXCLUDED.sw_a%d)", n, n, n);
	else
		appendStringInfo(merge, "sw_a%d = GREATEST(sw_t.sw_a%d, EXCLUDED.sw_a%d)", n, n, n);
}

static PanePlan *
pane_window_select(ParsedQuery *pq, RangeVar *rv, int rv_end, Oid relid,
				   int64 hop_us, int64 size_us)
{
	PanePlan   *plan;
	StringInfoData merge;
	StringInfoData conflict;
	SelectStmt *s = pq->select;
	Query	   *q;
	ListCell   *lc;
	ListCell   *lc2;
	StringInfoData inner;
	StringInfoData outer;
	StringInfoData keys;
	StringInfoData cols;
	const char *alias;
	int			nkeys = 0;
	int			naggs = 0;
	int			where;
	static const char *const where_word[] = {"where"};

	if (s->distinctClause != NIL || s->havingClause != NULL ||
		s->windowClause != NIL || s->sortClause != NIL ||
		list_length(s->fromClause) != 1 || linitial(s->fromClause) != (Node *) rv)
		return NULL;
	foreach(lc, s->groupClause)
	{
		if (!IsA(lfirst(lc), ColumnRef))
			return NULL;
	}

	q = analyze_query(copyObject(pq->raw), pq->text);
	/* a subquery may read the stream again: only the general plan confines it */
	if (q->hasSubLinks || q->cteList != NIL ||
		q->groupingSets != NIL || q->hasWindowFuncs || q->hasTargetSRFs ||
		list_length(q->targetList) != list_length(s->targetList))
		return NULL;

	alias = quote_identifier(rv->alias ? rv->alias->aliasname : rv->relname);
	initStringInfo(&inner);
	initStringInfo(&outer);
	initStringInfo(&keys);
	initStringInfo(&cols);
	initStringInfo(&merge);
	initStringInfo(&conflict);
	appendStringInfoString(&conflict, "sw_pane");
	appendStringInfo(&inner, "SELECT %s.sw_pane", alias);
	appendStringInfo(&outer, "SELECT sw_w.ws, sw_w.ws + %s", interval_literal(size_us));

	forboth(lc, s->targetList, lc2, q->targetList)
	{
		ResTarget  *rt = lfirst_node(ResTarget, lc);
		TargetEntry *tle = lfirst_node(TargetEntry, lc2);
		int			from = rt->location;

		if (tle->resjunk || from < 0)
			return NULL;
		if (IsA(rt->val, ColumnRef) && tle->ressortgroupref != 0 &&
			!IsA(llast(((ColumnRef *) rt->val)->fields), A_Star))
		{
			nkeys++;
			appendStringInfo(&inner, ", %.*s", name_end(pq->text, from) - from,
							 pq->text + from);
			appendStringInfo(&cols, ", sw_k%d", nkeys);
			appendStringInfo(&conflict, ", sw_k%d", nkeys);
			appendStringInfo(&keys, ", sw_p.sw_k%d", nkeys);
			appendStringInfo(&outer, ", sw_p.sw_k%d", nkeys);
		}
		else if (IsA(rt->val, FuncCall) && IsA(tle->expr, Aggref))
		{
			FuncCall   *fc = (FuncCall *) rt->val;
			Aggref	   *agg = (Aggref *) tle->expr;
			char	   *name = get_func_name(agg->aggfnoid);
			const char *combine;

			if (fc->agg_distinct || fc->agg_order != NIL || fc->agg_filter != NULL ||
				fc->agg_within_group || fc->over != NULL || fc->func_variadic ||
				agg->aggkind != AGGKIND_NORMAL ||
				get_func_namespace(agg->aggfnoid) != PG_CATALOG_NAMESPACE || name == NULL)
				return NULL;
			if (strcmp(name, "avg") == 0)
			{
				/*
				 * avg of an integer or numeric is numeric_div(sum, count)
				 * exactly, so it combines as sum of sums over sum of counts.
				 * (avg of floats would sum in another order: not here.)
				 */
				int			call_end = scan_top_level(pq->text, from, pq->end, NULL, 0, true);
				const char *lparen = strchr(pq->text + from, '(');
				Oid			argtype = linitial_oid(agg->aggargtypes);

				if (argtype != INT2OID && argtype != INT4OID && argtype != INT8OID &&
					argtype != NUMERICOID)
					return NULL;
				if (lparen == NULL || lparen - pq->text >= call_end)
					return NULL;
				naggs += 2;
				appendStringInfo(&inner, ", pg_catalog.sum(%.*s), pg_catalog.count(%.*s)",
								 (int) (call_end - 1 - (lparen + 1 - pq->text)), lparen + 1,
								 (int) (call_end - 1 - (lparen + 1 - pq->text)), lparen + 1);
				appendStringInfo(&cols, ", sw_a%d, sw_a%d", naggs - 1, naggs);
				append_merge(&merge, "sum", naggs - 1);
				append_merge(&merge, "count", naggs);
				appendStringInfo(&outer,
								 ", pg_catalog.sum(sw_p.sw_a%d)::pg_catalog.numeric"
								 " / NULLIF(pg_catalog.sum(sw_p.sw_a%d), 0)::pg_catalog.numeric",
								 naggs - 1, naggs);
				continue;
			}
			if (strcmp(name, "count") == 0)
				combine = "pg_catalog.sum(sw_p.sw_a%d)::pg_catalog.int8";
			else if (strcmp(name, "sum") == 0)
				combine = "pg_catalog.sum(sw_p.sw_a%d)";
			else if (strcmp(name, "min") == 0)
				combine = "pg_catalog.min(sw_p.sw_a%d)";
			else if (strcmp(name, "max") == 0)
				combine = "pg_catalog.max(sw_p.sw_a%d)";
			else
				return NULL;
			naggs++;
			append_merge(&merge, name, naggs);
			appendStringInfo(&inner, ", %.*s",
							 scan_top_level(pq->text, from, pq->end, NULL, 0, true) - from,
							 pq->text + from);
			appendStringInfo(&cols, ", sw_a%d", naggs);
			appendStringInfoString(&outer, ", ");
			appendStringInfo(&outer, combine, naggs);
		}
		else
			return NULL;
	}

	/*
	 * FROM: the rows a step has read and the query has not folded yet (by
	 * offset, per partition, on the stream's primary key), not late, in a
	 * window still open, each with its pane
	 */
	appendStringInfo(&inner,
					 " FROM (SELECT sw_s.*, streamwm.window_start(sw_s.sw_event_time, %s) AS sw_pane"
					 " FROM pg_catalog.unnest($2::pg_catalog.int8[]) WITH ORDINALITY AS sw_o(done, n)"
					 " CROSS JOIN LATERAL (SELECT sw_r.* FROM ONLY %s sw_r"
					 " WHERE sw_r.sw_partition = (sw_o.n - 1)::pg_catalog.int4"
					 " AND sw_r.sw_offset > GREATEST($1, coalesce(($4::pg_catalog.int8[])[sw_o.n], 0))"
					 " AND sw_r.sw_offset <= sw_o.done) sw_s"
					 " WHERE sw_s.sw_event_time > $3"
					 " AND NOT EXISTS (SELECT 1 FROM streamwm.late_event_log sw_l"
					 " WHERE sw_l.stream = '%u'::pg_catalog.oid"
					 " AND sw_l.partition = sw_s.sw_partition"
					 " AND sw_l.sw_offset = sw_s.sw_offset)) AS %s",
					 interval_literal(hop_us), sw_relation_name(relid), relid, alias);
	/* the user's WHERE, as written */
	where = scan_top_level(pq->text, rv_end, pq->end, where_word, 1, false);
	if (where < pq->end && pq->text[where] != ';')
	{
		int			start = where + strlen("where");
		int			stop = scan_top_level(pq->text, start, pq->end, after_where,
										  lengthof(after_where), false);

		appendStringInfo(&inner, "\nWHERE %.*s\n", stop - start, pq->text + start);
	}
	appendStringInfoString(&inner, " GROUP BY 1");
	for (int i = 0; i < nkeys; i++)
		appendStringInfo(&inner, ", %d", i + 2);

	/*
	 * Each pane of the range expands only to the closing windows that
	 * contain it (window starts are aligned: the first after $3, the last
	 * at or before $4), so a step reads each needed pane row once per
	 * closing window, never size/hop times.
	 */
	appendStringInfo(&outer,
					 " FROM %%s AS sw_p"
					 " CROSS JOIN LATERAL pg_catalog.generate_series("
					 "GREATEST(sw_p.sw_pane - %s, streamwm.window_start($3, %s) + %s),"
					 " LEAST(sw_p.sw_pane, streamwm.window_start($5, %s)), %s) AS sw_w(ws)"
					 " WHERE sw_p.sw_pane > $3 AND sw_p.sw_pane < $5 + %s"
					 " GROUP BY sw_w.ws%s",
					 interval_literal(size_us - hop_us), interval_literal(hop_us),
					 interval_literal(hop_us), interval_literal(hop_us),
					 interval_literal(hop_us), interval_literal(size_us), keys.data);
	plan = palloc(sizeof(PanePlan));
	plan->fold_select = inner.data;
	plan->columns = psprintf("sw_pane%s", cols.data);
	plan->conflict = conflict.data;
	plan->merge = merge.data;
	plan->combine_select = outer.data;
	return plan;
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
 *		AND sw_event_time >= $3 AND sw_event_time < $3 + <size>
 *
 * Parameters: $1 the query's start offset, $2 each partition's processed
 * offset, $3 the window's start.  Every reference to the stream thus reads
 * only that window's rows (SPEC section 5).  A query that aggregates
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
	Relation	rel = table_open(relid, AccessShareLock);
	TupleDesc	desc = RelationGetDescr(rel);
	StringInfoData sql;
	Oid			types[3] = {INT8OID, INT8ARRAYOID, TIMESTAMPTZOID};
	List	   *raw;
	Query	   *q;

	initStringInfo(&sql);
	appendStringInfoString(&sql, "SELECT ");
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (i > 0)
			appendStringInfoString(&sql, ", ");
		if (att->attisdropped)
			appendStringInfo(&sql, "NULL::pg_catalog.int4 AS sw_dropped_%d", i + 1);
		else
			appendStringInfo(&sql, "sw_s.%s", quote_identifier(NameStr(att->attname)));
	}
	appendStringInfo(&sql, " FROM ONLY %s sw_s WHERE sw_s.sw_offset > $1"
					 " AND sw_s.sw_offset <= ($2::pg_catalog.int8[])[sw_s.sw_partition + 1]"
					 " AND sw_s.sw_event_time >= $3 AND sw_s.sw_event_time < $3 + %s"
					 " AND NOT EXISTS (SELECT 1 FROM streamwm.late_event_log sw_l"
					 " WHERE sw_l.stream = '%u'::pg_catalog.oid"
					 " AND sw_l.partition = sw_s.sw_partition"
					 " AND sw_l.sw_offset = sw_s.sw_offset)",
					 sw_relation_name(relid), interval_literal(size_us), relid);
	table_close(rel, AccessShareLock);
	raw = raw_parser(sql.data, RAW_PARSE_DEFAULT);
	q = parse_analyze_fixedparams(linitial_node(RawStmt, raw), sql.data, types, 3, NULL);
	return q;
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
		ListCell   *lc;
		int			i = 0;

		if (rte->rtekind != RTE_RELATION || rte->relid != ctx->relid)
			return false;
		rte->rtekind = RTE_SUBQUERY;
		rte->subquery = copyObject(ctx->rows);
		rte->security_barrier = false;
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
		/* dropped columns have no name in eref: give them the subquery's */
		foreach(lc, rte->eref->colnames)
		{
			i++;
			if (strVal(lfirst(lc))[0] == '\0')
				lfirst(lc) = makeString(psprintf("sw_dropped_%d", i));
		}
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
 * The SELECT of the general plan (parameters above), as text.  Its output
 * is the query's own columns.
 */
static char *
general_window_select(Oid relid, const char *query, int64 size_us)
{
	ParsedQuery pq;
	Query	   *q;
	ReplaceStream ctx;
	char	   *sql;
	int			nestlevel;
	ListCell   *lc;

	parse_select(query, &pq);
	q = analyze_query(copyObject(pq.raw), query);
	memset(&ctx, 0, sizeof(ctx));
	ctx.relid = relid;
	ctx.rows = window_rows_query(relid, size_us);
	(void) replace_stream_walker((Node *) q, &ctx);
	if (ctx.replaced == 0)
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

	nestlevel = sw_enter_safe_path();
	sql = pg_get_querydef(q, false);
	sw_leave_safe_path(nestlevel);
	return sql;
}

/* Does the query qualify for the pane plan?  Then its statements, else NULL. */
static PanePlan *
pane_select(Oid relid, const char *query, int64 hop_us, int64 size_us)
{
	ParsedQuery pq;
	List	   *refs = NIL;
	RangeVar   *rv;

	parse_select(query, &pq);
	if (pq.select->withClause != NULL)
		return NULL;
	find_stream_refs(pq.select->fromClause, relid, &refs);
	if (list_length(refs) != 1)
		return NULL;
	rv = linitial(refs);
	if (rv->location < 0 || !rv->inh || (rv->alias && rv->alias->colnames != NIL))
		return NULL;
	return pane_window_select(&pq, rv, name_end(pq.text, rv->location), relid,
							  hop_us, size_us);
}

/*
 * Which plan a query gets, decided once at create_query and recorded:
 * "pane" when it qualifies and streamwm.pane_engine is on, else "general".
 */
const char *
sw_choose_plan(Oid relid, const char *query, int64 hop_us, int64 size_us)
{
	if (sw_pane_engine && pane_select(relid, query, hop_us, size_us) != NULL)
		return "pane";
	return "general";
}

/* The upsert of a query's rows: "INSERT ... <select> ON CONFLICT ...". */
static char *
upsert_statement(const SwQueryDef *def, const char *ctes, const char *select,
				 const char *window_start, const char *result)
{
	List	   *cols;
	StringInfoData sql;
	StringInfoData keys;
	StringInfoData sets;
	ListCell   *lc;

	if (!OidIsValid(def->result_table))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("result table %s of query \"%s\" does not exist",
						def->result_name, def->name),
				 errhint("Create it again with the same columns and key, or drop the query.")));
	cols = sw_query_columns(def->stream, def->query);
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
						 window_start, window_start, interval_literal(def->size_us), select);
	else
		appendStringInfoString(&sql, select);
	appendStringInfo(&sql, "\nON CONFLICT (%s) DO UPDATE SET %s"
					 " RETURNING sw_r.window_start) %s",
					 keys.data, sets.data, result);
	return sql.data;
}

/* The parameter types of the pane plan's statement and of the general plan's. */
static const Oid pane_param_types[5] = {INT8OID, INT8ARRAYOID, TIMESTAMPTZOID, INT8ARRAYOID,
TIMESTAMPTZOID};
static const Oid general_param_types[3] = {INT8OID, INT8ARRAYOID, TIMESTAMPTZOID};

/* The pane plan of a query recorded with it; an error if it no longer qualifies. */
static PanePlan *
pane_plan_of(const SwQueryDef *def)
{
	PanePlan   *pp = pane_select(def->stream, def->query, def->hop_us, def->size_us);

	if (pp == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("query \"%s\" no longer qualifies for the pane plan it was created with",
						def->name),
				 errhint("Drop and create the query again.")));
	return pp;
}

/* What a pane table's contents depend on: the server version and its file. */
static char *
pane_stamp(Oid pane_table)
{
	HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(pane_table));
	Oid			filenode;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for relation %u", pane_table);
	filenode = ((Form_pg_class) GETSTRUCT(tup))->relfilenode;
	ReleaseSysCache(tup);
	return psprintf("%d:%u", PG_VERSION_NUM, filenode);
}

/*
 * Make sure the query's pane table is there and valid, as the query's owner
 * (the current user).  Pane state is a cache of the retained rows: when the
 * table is missing (dropped, never made), or its stamp does not match (it
 * was truncated, restored, or the server upgraded), it is made or emptied
 * and *rebuild is set: the fold then reads every retained row of the open
 * windows again (rows are kept until every window that needs them closed).
 */
static void
ensure_pane_table(SwQueryDef *def, PanePlan *pp, bool *rebuild)
{
	*rebuild = false;
	if (OidIsValid(def->pane_table))
	{
		char	   *stamp = pane_stamp(def->pane_table);

		if (def->pane_stamp != NULL && strcmp(stamp, def->pane_stamp) == 0)
			return;
		sw_spi_exec(psprintf("TRUNCATE %s", sw_relation_name(def->pane_table)),
					0, NULL, NULL, NULL, SPI_OK_UTILITY);
	}
	else
	{
		Oid			types[4] = {INT8OID, INT8ARRAYOID, TIMESTAMPTZOID, INT8ARRAYOID};
		Datum		values[4] = {Int64GetDatum(0), PointerGetDatum(construct_empty_array(INT8OID)),
		TimestampTzGetDatum(DT_NOEND), (Datum) 0};
		TupleDesc	desc;
		StringInfoData sql;
		Oid			nsp = get_rel_namespace(def->result_table);
		char	   *name;

		if (!OidIsValid(def->result_table))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_TABLE),
					 errmsg("result table %s of query \"%s\" does not exist",
							def->result_name, def->name)));
		/* the partials' types, as PostgreSQL derives them */
		sw_spi_exec(psprintf("SELECT * FROM (%s) sw_f LIMIT 0", pp->fold_select),
					4, types, values, "   n", SPI_OK_SELECT);
		desc = SPI_tuptable->tupdesc;
		name = ChooseRelationName(get_rel_name(def->result_table), NULL, "panes", nsp, false);
		initStringInfo(&sql);
		appendStringInfo(&sql, "CREATE TABLE %s (",
						 quote_qualified_identifier(get_namespace_name(nsp), name));
		{
			/* the fold's output columns, in order, are named in pp->columns */
			List	   *names = NIL;

			if (!SplitIdentifierString(pstrdup(pp->columns), ',', &names) ||
				list_length(names) != desc->natts)
				elog(ERROR, "pane columns \"%s\" do not match the fold", pp->columns);
			for (int i = 0; i < desc->natts; i++)
			{
				Form_pg_attribute att = TupleDescAttr(desc, i);

				appendStringInfo(&sql, "%s%s %s", i > 0 ? ", " : "",
								 quote_identifier((char *) list_nth(names, i)),
								 format_type_with_typemod(att->atttypid, att->atttypmod));
			}
		}
		appendStringInfo(&sql, ", UNIQUE NULLS NOT DISTINCT (%s))", pp->conflict);
		sw_spi_exec(sql.data, 0, NULL, NULL, NULL, SPI_OK_UTILITY);
		sw_spi_exec(psprintf("COMMENT ON TABLE %s IS %s",
							 quote_qualified_identifier(get_namespace_name(nsp), name),
							 quote_literal_cstr(psprintf("streamwm: pane state of query %s (a cache; "
														 "rebuilt from the stream when emptied or dropped)",
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
static void
record_panes(SwQueryDef *def, Datum folded)
{
	SwRoleContext cx;
	Oid			ctypes[4] = {TEXTOID, OIDOID, TEXTOID, INT8ARRAYOID};
	Datum		cvalues[4];
	char		cnulls[4] = {' ', ' ', ' ', ' '};

	cvalues[0] = CStringGetTextDatum(def->name);
	cvalues[1] = ObjectIdGetDatum(def->pane_table);
	cvalues[2] = CStringGetTextDatum(pane_stamp(def->pane_table));
	cvalues[3] = folded;
	if (folded == (Datum) 0)
		cnulls[3] = 'n';
	sw_enter_catalog(&cx);
	sw_spi_exec("UPDATE streamwm.query_def SET pane_table = $2, pane_stamp = $3,"
				" folded_offsets = $4 WHERE name = $1",
				4, ctypes, cvalues, cnulls, SPI_OK_UPDATE);
	sw_leave_role(&cx);
	def->folded_offsets = folded;
	def->pane_stamp = TextDatumGetCString(cvalues[2]);
}

/* The statement a step runs for a query, and its parameters. */
static char *
window_statement(const SwQueryDef *def, int *nparams, const Oid **types)
{
	if (def->pane)
	{
		/*
		 * One statement: fold the step's new rows (sw_fresh); keep the
		 * partials of panes that windows still open after this step need
		 * (sw_pane > $5), merged into the pane table; combine every closing
		 * window from the pane table's rows and the fresh ones (the
		 * statement's snapshot does not see what sw_keep writes, so nothing
		 * counts twice); upsert the results.  Parameters: $1 start offset,
		 * $2 processed offsets, $3 lo (closed_until - size), $4 folded
		 * offsets (NULL: none), $5 hi (W - size).
		 */
		PanePlan   *pp = pane_plan_of(def);
		char	   *panes;
		char	   *ctes;

		*nparams = 5;
		*types = pane_param_types;
		if (!OidIsValid(def->pane_table))
			elog(ERROR, "query \"%s\" has no pane table", def->name);
		panes = sw_relation_name(def->pane_table);
		ctes = psprintf("sw_fresh(%s) AS (%s), sw_keep AS (INSERT INTO %s AS sw_t (%s)"
						" SELECT * FROM sw_fresh WHERE sw_fresh.sw_pane > $5"
						" ON CONFLICT (%s) DO %s%s RETURNING 1), ",
						pp->columns, pp->fold_select, panes, pp->columns, pp->conflict,
						pp->merge[0] ? "UPDATE SET " : "NOTHING", pp->merge);
		return upsert_statement(def, ctes,
								psprintf(pp->combine_select,
										 psprintf("(SELECT %s FROM %s UNION ALL SELECT %s FROM sw_fresh)",
												  pp->columns, panes, pp->columns)),
								NULL,
								"SELECT pg_catalog.count(*), coalesce(pg_catalog.sum(sw_c.n), 0)::pg_catalog.int8,"
								" coalesce(pg_catalog.max(sw_c.n), 0)"
								" FROM (SELECT pg_catalog.count(*) AS n FROM sw_ins GROUP BY window_start) sw_c");
	}
	*nparams = 3;
	*types = general_param_types;
	return upsert_statement(def, NULL, general_window_select(def->stream, def->query, def->size_us),
							"$3", "SELECT pg_catalog.count(*) FROM sw_ins");
}

/* Prepared statements of the general plan, kept across steps. */
typedef struct KeptPlan
{
	char	   *sql;
	SPIPlanPtr	plan;
} KeptPlan;

static List *kept_plans = NIL;

#define SW_MAX_KEPT_PLANS 64

static SPIPlanPtr
kept_plan(const char *sql, int nparams, const Oid *types)
{
	ListCell   *lc;
	KeptPlan   *kp;
	SPIPlanPtr	plan;
	MemoryContext old;

	foreach(lc, kept_plans)
	{
		kp = lfirst(lc);
		if (strcmp(kp->sql, sql) == 0)
			return kp->plan;
	}
	plan = SPI_prepare(sql, nparams, (Oid *) types);
	if (plan == NULL)
		elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
	if (SPI_keepplan(plan) != 0)
		elog(ERROR, "SPI_keepplan failed");
	old = MemoryContextSwitchTo(TopMemoryContext);
	kp = palloc(sizeof(KeptPlan));
	kp->sql = pstrdup(sql);
	kp->plan = plan;
	if (list_length(kept_plans) >= SW_MAX_KEPT_PLANS)
	{
		KeptPlan   *oldest = linitial(kept_plans);

		SPI_freeplan(oldest->plan);
		pfree(oldest->sql);
		pfree(oldest);
		kept_plans = list_delete_first(kept_plans);
	}
	kept_plans = lappend(kept_plans, kp);
	MemoryContextSwitchTo(old);
	return plan;
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
	List	   *result = NIL;
	int64		k = def->size_us / def->hop_us;
	TimestampTz last = DT_NOBEGIN;

	values[0] = Int64GetDatum(def->start_offset);
	values[1] = offsets;
	values[2] = TimestampTzGetDatum(lo);
	values[3] = TimestampTzGetDatum(hi);
	sw_spi_exec(psprintf("SELECT DISTINCT streamwm.window_start(sw_s.sw_event_time, %s) AS p"
						 " FROM ONLY %s sw_s WHERE sw_s.sw_offset > $1"
						 " AND sw_s.sw_offset <= ($2::pg_catalog.int8[])[sw_s.sw_partition + 1]"
						 " AND sw_s.sw_event_time > $3 AND sw_s.sw_event_time < $4 + %s"
						 " ORDER BY p",
						 interval_literal(def->hop_us), sw_relation_name(def->stream),
						 interval_literal(def->size_us)),
				4, types, values, NULL, SPI_OK_SELECT);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;
		TimestampTz pane = DatumGetTimestampTz(sw_spi_getdatum(i, 1, &isnull));

		/* the windows containing this pane start at pane - (k-1)*hop .. pane */
		for (int64 j = k - 1; j >= 0; j--)
		{
			TimestampTz ws = pane - j * def->hop_us;

			if (ws <= lo || ws > hi || ws <= last)
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
 * Compute and upsert every window of a query whose start is in (lo, hi]
 * (those that closed since the last step), as the current user (the
 * query's owner).  Returns the windows that produced rows and the rows.
 */
void
sw_upsert_windows(SwQueryDef *def, Datum offsets, TimestampTz lo, TimestampTz hi,
				  int64 *windows, int64 *rows)
{
	int			nparams;
	const Oid  *types;
	char	   *sql;
	bool		isnull;

	bool		rebuild = false;

	if (def->pane)
		ensure_pane_table(def, pane_plan_of(def), &rebuild);
	sql = window_statement(def, &nparams, &types);

	/* privileges before planning: see sw_check_statement_privileges */
	sw_check_statement_privileges(sql, nparams, types);
	*windows = 0;
	*rows = 0;
	if (def->pane)
	{
		Datum		values[5];
		char		nulls[5] = {' ', ' ', ' ', ' ', ' '};

		values[0] = Int64GetDatum(def->start_offset);
		values[1] = offsets;
		values[2] = TimestampTzGetDatum(lo);
		if (rebuild || def->folded_offsets == (Datum) 0)
			nulls[3] = 'n';
		else
			values[3] = def->folded_offsets;
		values[4] = TimestampTzGetDatum(hi);
		if (SPI_execute_plan(kept_plan(sql, nparams, types), values, nulls, false, 0) != SPI_OK_SELECT)
			elog(ERROR, "streamwm: window statement of query \"%s\" failed", def->name);
		*windows = DatumGetInt64(sw_spi_getdatum(0, 1, &isnull));
		*rows = DatumGetInt64(sw_spi_getdatum(0, 2, &isnull));
		sw_check_groups_per_window(def->name, DatumGetInt64(sw_spi_getdatum(0, 3, &isnull)));
		/* panes no open window needs: every window containing them closed */
		{
			Oid			tz = TIMESTAMPTZOID;

			sw_spi_exec(psprintf("DELETE FROM %s WHERE sw_pane <= $1",
								 sw_relation_name(def->pane_table)),
						1, &tz, &values[4], NULL, SPI_OK_DELETE);
		}
		record_panes(def, offsets);
	}
	else
	{
		SPIPlanPtr	plan = kept_plan(sql, nparams, types);
		List	   *starts = windows_with_rows(def, offsets, lo, hi);
		ListCell   *lc;

		foreach(lc, starts)
		{
			Datum		values[3];
			int64		n;

			values[0] = Int64GetDatum(def->start_offset);
			values[1] = offsets;
			values[2] = TimestampTzGetDatum(*(TimestampTz *) lfirst(lc));
			if (SPI_execute_plan(plan, values, NULL, false, 0) != SPI_OK_SELECT)
				elog(ERROR, "streamwm: window statement of query \"%s\" failed", def->name);
			n = DatumGetInt64(sw_spi_getdatum(0, 1, &isnull));
			sw_check_groups_per_window(def->name, n);
			if (n > 0)
				(*windows)++;
			*rows += n;
			SPI_freetuptable(SPI_tuptable);
			CHECK_FOR_INTERRUPTS();
		}
	}
}

/*
 * Load a query the current user manages (is a member of its owner), read
 * as the catalog's owner; a clear error if there is none or it may not.
 * The caller is connected to SPI.
 */
static SwQueryDef *
load_managed_query(const char *name)
{
	SwRoleContext cx;
	SwQueryDef *def;

	sw_enter_catalog(&cx);
	def = sw_load_query(name);
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
 * streamwm._window_sql(query name) RETURNS text, for inspection: the
 * statement a step runs for the query.
 */
Datum
streamwm_window_sql(PG_FUNCTION_ARGS)
{
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	SwQueryDef *def;
	SwRoleContext cx;
	int			nparams;
	const Oid  *types;
	char	   *sql;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	def = load_managed_query(name);
	sw_enter_role(def->owner, def->search_path, &cx);
	sql = window_statement(def, &nparams, &types);
	sw_leave_role(&cx);
	SPI_finish();
	PG_RETURN_TEXT_P(cstring_to_text(sql));
}

/* Load one query's definition; NULL when there is none. */
SwQueryDef *
sw_load_query(const char *name)
{
	Oid			types[1] = {TEXTOID};
	Datum		values[1];
	SwQueryDef *def;
	bool		isnull;
	Datum		d;

	values[0] = CStringGetTextDatum(name);
	sw_spi_exec("SELECT stream, query, hop, size,"
				" coalesce((SELECT c.oid FROM pg_catalog.pg_class c WHERE c.oid = result_table),"
				" (SELECT c.oid FROM pg_catalog.pg_class c"
				"   WHERE c.oid = pg_catalog.to_regclass(result_name) AND c.relowner = owner),"
				" 0::pg_catalog.oid),"
				" start_offset, search_path, owner, closed_until, errors,"
				" coalesce(last_error_time, '-infinity'), result_name, plan,"
				" coalesce((SELECT c.oid FROM pg_catalog.pg_class c WHERE c.oid = pane_table),"
				" 0::pg_catalog.oid), pane_stamp, folded_offsets"
				" FROM streamwm.query_def WHERE name = $1",
				1, types, values, NULL, SPI_OK_SELECT);
	if (SPI_processed != 1)
		return NULL;
	def = palloc0(sizeof(SwQueryDef));
	def->name = pstrdup(name);
	def->stream = DatumGetObjectId(sw_spi_getdatum(0, 1, &isnull));
	def->query = TextDatumGetCString(sw_spi_getdatum(0, 2, &isnull));
	def->hop_us = sw_interval_usec(DatumGetIntervalP(sw_spi_getdatum(0, 3, &isnull)));
	def->size_us = sw_interval_usec(DatumGetIntervalP(sw_spi_getdatum(0, 4, &isnull)));
	def->result_table = DatumGetObjectId(sw_spi_getdatum(0, 5, &isnull));
	def->start_offset = DatumGetInt64(sw_spi_getdatum(0, 6, &isnull));
	def->search_path = TextDatumGetCString(sw_spi_getdatum(0, 7, &isnull));
	def->owner = DatumGetObjectId(sw_spi_getdatum(0, 8, &isnull));
	def->closed_until = DatumGetTimestampTz(sw_spi_getdatum(0, 9, &isnull));
	def->errors = DatumGetInt64(sw_spi_getdatum(0, 10, &isnull));
	def->last_error_time = DatumGetTimestampTz(sw_spi_getdatum(0, 11, &isnull));
	def->result_name = TextDatumGetCString(sw_spi_getdatum(0, 12, &isnull));
	def->pane = strcmp(TextDatumGetCString(sw_spi_getdatum(0, 13, &isnull)), "pane") == 0;
	def->pane_table = DatumGetObjectId(sw_spi_getdatum(0, 14, &isnull));
	d = sw_spi_getdatum(0, 15, &isnull);
	def->pane_stamp = isnull ? NULL : TextDatumGetCString(d);
	d = sw_spi_getdatum(0, 16, &isnull);
	def->folded_offsets = isnull ? (Datum) 0 : SPI_datumTransfer(d, false, -1);
	return def;
}

/*
 * streamwm._check_query(name text) RETURNS void: plans the step statement
 * of a query as its owner, so that create_query reports what would fail.
 */
Datum
streamwm_check_query(PG_FUNCTION_ARGS)
{
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	SwQueryDef *def;
	SwRoleContext cx;
	SPIPlanPtr	plan;
	char	   *sql;
	Datum		values[5];
	MemoryContext cxt = CurrentMemoryContext;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	def = load_managed_query(name);
	sw_check_windows_per_row(def->hop_us, def->size_us);
	sw_enter_role(def->owner, def->search_path, &cx);
	PG_TRY();
	{
		int			nparams;
		const Oid  *types;

		/* the pane plan's state table is made now, as the query's owner */
		if (def->pane)
		{
			bool		rebuild;

			ensure_pane_table(def, pane_plan_of(def), &rebuild);
			record_panes(def, (Datum) 0);
		}
		sql = window_statement(def, &nparams, &types);
		/* before planning, which may run the query's IMMUTABLE functions */
		sw_check_statement_privileges(sql, nparams, types);
		plan = SPI_prepare(sql, nparams, (Oid *) types);
		if (plan == NULL)
			elog(ERROR, "could not plan window query \"%s\": %s", name,
				 SPI_result_code_string(SPI_result));

		/*
		 * Run it over no window at all: planning does not check privileges,
		 * starting the executor does, for every table the query reads.
		 */
		values[0] = Int64GetDatum(0);
		values[1] = PointerGetDatum(construct_empty_array(INT8OID));
		values[2] = TimestampTzGetDatum(DT_NOBEGIN);
		values[3] = def->pane ? (Datum) 0 : TimestampTzGetDatum(DT_NOBEGIN);
		values[4] = TimestampTzGetDatum(DT_NOBEGIN);
		if (SPI_execute_plan(plan, values, def->pane ? "   n " : NULL, false, 0) != SPI_OK_SELECT)
			elog(ERROR, "could not run window query \"%s\"", name);
	}
	PG_CATCH();
	{
		/* the user's error, without our generated statement as context */
		sw_reraise(cxt, NULL, psprintf("window query \"%s\"", name), NULL);
	}
	PG_END_TRY();
	sw_leave_role(&cx);
	SPI_finish();
	PG_RETURN_VOID();
}
