/*-------------------------------------------------------------------------
 * citus_fold.c
 *	  Owns the pane plan's fold pushed down to the nodes of a distributed
 *	  stream (DESIGN.md, "Citus: the fold on the nodes"; issue 13): which
 *	  queries qualify, the fold statement Citus runs on the shards, and its
 *	  partial states brought back as one parameter of the pane statement.
 *
 * On one node the pane statement folds the step's new rows into partial
 * states per (pane, keys) (pane.c, sw_fresh).  For a distributed stream
 * that fold reads the coordinator's copy of the rows; here it reads the
 * shards instead, where the rows live, grouped by (pane, keys,
 * sw_partition): the distribution column is among the groups, so Citus
 * runs the whole fold on each shard and returns only its partial states
 * (Citus's own partial aggregation, with the pane engine's states).  The
 * coordinator merges the states of a pane and key that several partitions
 * have (streamwm_internal.merge) in the pane statement, which is otherwise
 * unchanged: the same windows, re-fires, pane table and results.
 *
 * The rows folded are exactly the local fold's (sw_fold_rows_query): per
 * partition the offsets after max(start offset, folded offset) up to the
 * processed one, in event time those after the floor and not in the late
 * log.  The late rows of that range come from the coordinator's late log
 * and go to the nodes as a parameter (usually none, and then the test is
 * not made).  The statement is planned by Citus at every step (a generic
 * plan of it cannot be distributed), its parameters bound.
 *
 * A query qualifies when what the nodes run is the same there: every
 * function, operator and aggregate in it is built in (OID below
 * FirstNormalObjectId: the same on every node of one PostgreSQL version;
 * an extension's or a user's may differ or be missing on a node), and so
 * are the aggregates' input collations.  An internal state carries a MAC
 * under the key of the data directory that wrote it (aggstate.c), which
 * the coordinator cannot check for a node's: it checks that each state is
 * of its aggregate and signs it with its own key (sw_state_vouch), as the
 * bytes come from our aggregate on a node of the cluster, never from a
 * table anyone can write.  The stream must not have row-level security.  Any other query on a
 * distributed stream folds the coordinator's copy, as before.  The fold
 * runs as the query's owner, as the local fold does, who must be the
 * stream's owner and creator (below).  Citus deparses what it sends with
 * every operator and function qualified (OPERATOR(pg_catalog.=)), though
 * not the type names of casts.  When every query of a stream folds here, steps make no copy
 * of its rows (process.c, citus.c).
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/transam.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
#include "utils/typcache.h"

#include "aggstate.h"
#include "catalog.h"
#include "citus.h"
#include "citus_fold.h"
#include "limit.h"
#include "query.h"
#include "window.h"

/* the fold statement's parameters (sw_citus_fold_sql) */
#define FOLD_NPARAMS 7
static const Oid fold_types[FOLD_NPARAMS] = {INT4ARRAYOID, INT8ARRAYOID, INT8ARRAYOID,
TIMESTAMPTZOID, BOOLOID, NUMERICARRAYOID, INT4ARRAYOID};

/* a function, operator, aggregate or collation the nodes may not share */
static bool
not_built_in(Oid oid, void *context)
{
	return oid >= FirstNormalObjectId;
}

static bool
node_walker(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (check_functions_in_node(node, not_built_in, NULL))
		return true;
	if (IsA(node, Aggref) && not_built_in(((Aggref *) node)->inputcollid, NULL))
		return true;
	/* a domain's checks may run anyone's code */
	if (IsA(node, CoerceToDomain))
		return true;
	if (IsA(node, Query))
		return query_tree_walker((Query *) node, node_walker, context, 0);
	return expression_tree_walker(node, node_walker, context);
}

static bool
row_security(Oid relid)
{
	HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	bool		rls;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for relation %u", relid);
	rls = ((Form_pg_class) GETSTRUCT(tup))->relrowsecurity;
	ReleaseSysCache(tup);
	return rls;
}

/*
 * The offset ranges as a condition too, for each node's planner
 * (sw_citus_ranges_sql; $7 the step's partitions past those written out),
 * or nothing for a stream whose partition count is unknown here.
 */
static const char *
range_filter(Oid relid)
{
	int			np = sw_citus_stream_partitions(relid);

	if (np <= 0)
		return "";
	return psprintf(" AND %s", sw_citus_ranges_sql("sw_s", np, 7));
}

/*
 * The fold of query q (analyzed, qualified for the pane plan) over the
 * shards of distributed stream relid, or NULL when it does not qualify
 * (above).  Its parameters: $1 the partitions to read (int4[]), $2 and $3
 * the offset range (lo, hi] of each (int8[]), $4 the floor in event time or
 * the step's clock minus size in processing time (timestamptz), $5 whether
 * any of those rows is late (bool), $6 the late rows, partition * 2^64 +
 * offset (numeric[]), $7 the partitions past the ranges range_filter()
 * writes out (int4[]).  Its outputs: sw_pane, sw_k1.., sw_a1.., sw_part.
 */
char *
sw_citus_fold_sql(Oid relid, Query *q, int64 hop_us, TimestampTz origin,
				  int64 processing_size_us)
{
	static const char *const lead[2] = {"sw_pane", "sw_part"};
	const char *pane;
	const char *filter = "";
	Query	   *rows;
	PanePlan   *pp;
	const char *why;
	ListCell   *lc;

	/*
	 * Only for the stream's owner: the nodes' shards are the owner's
	 * tables, which it can change there (a view in a shard's place, a
	 * policy) and the coordinator does not see, so a read of them runs the
	 * owner's code.  A query of another role (a member of the owner's, or
	 * a superuser) folds the coordinator's copy.  Plans are made as the
	 * query's owner (query.c, pane.c), and made again when the stream
	 * changes owner (step_cache.c).
	 */
	if (!sw_stream_distributed(relid, NULL, NULL) || GetUserId() != sw_relation_owner(relid) ||
		!sw_citus_owned_by_creator(relid) || row_security(relid) ||
		node_walker((Node *) q, NULL))
		return NULL;
	/*
	 * the GROUP BY's equality, which the nodes' grouping runs, and the
	 * keys' types, whose input and output functions (a domain's checks)
	 * bring the states back
	 */
	foreach(lc, q->groupClause)
	{
		SortGroupClause *sgc = lfirst_node(SortGroupClause, lc);

		if (not_built_in(sgc->eqop, NULL) ||
			not_built_in(exprType(get_sortgroupclause_expr(sgc, q->targetList)), NULL))
			return NULL;
	}
	if (processing_size_us > 0)
		pane = sw_window_start_sql(psprintf("($4 + %s)", sw_interval_literal(processing_size_us)),
								   hop_us, origin);
	else
	{
		pane = sw_window_start_sql("sw_s.sw_event_time", hop_us, origin);
		filter = " AND (sw_s.sw_event_time > $4) IS TRUE"
			" AND (NOT $5 OR (sw_s.sw_partition::pg_catalog.numeric"
			" OPERATOR(pg_catalog.*) '18446744073709551616'::pg_catalog.numeric"
			" OPERATOR(pg_catalog.+) sw_s.sw_offset::pg_catalog.numeric) <> ALL ($6))";
	}
	rows = sw_analyze_internal(psprintf("SELECT %s, %s AS sw_pane, sw_s.sw_partition AS sw_part"
										" FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2),"
										" pg_catalog.unnest($3)) AS sw_o(part, lo, hi)"
										" JOIN %s sw_s ON sw_s.sw_partition = sw_o.part"
										" AND sw_s.sw_offset > sw_o.lo AND sw_s.sw_offset <= sw_o.hi"
										" WHERE sw_s.sw_partition = ANY ($1)%s%s",
										sw_stream_columns_sql(relid, "sw_s"), pane,
										sw_relation_name(relid), range_filter(relid), filter),
							   fold_types, FOLD_NPARAMS);
	pp = sw_partial_plan(relid, q, rows, lead, 1, 1, "panes", &why);
	return pp ? pp->fold_select : NULL;
}

/*
 * Run the fold as the current user, the query's owner, as the local fold
 * runs: even built-in functions can run SQL (query_to_xml) or need
 * privileges (pg_read_file).  It only reads on the nodes, and a step writes
 * there only after its queries (sw_citus_prune_log).
 */
static void
run_fold(const SwQueryDef *def, const char *fold_sql, Datum *values, const char *nulls)
{
	/* privileges before planning: see sw_check_statement_privileges */
	sw_check_statement_privileges(fold_sql, FOLD_NPARAMS, fold_types);
	sw_spi_exec_bounded(psprintf("folding query %s on the nodes", def->name), fold_sql,
						FOLD_NPARAMS, (Oid *) fold_types, values, nulls, SPI_OK_SELECT, NULL);
}

/*
 * Run the fold on the nodes for a step of query def (as its owner) and
 * return its partial states as an array of the pane table's row type, the
 * pane statement's $8 (pane.c).  processed: each partition's processed
 * offset; folded: how far the query folded (0: nothing); at: $4 above;
 * has_late: whether the late log may hold rows of that range.
 */
Datum
sw_citus_fold(const SwQueryDef *def, const PanePlan *pp, Datum processed, Datum folded,
			  TimestampTz at, bool has_late)
{
	const char *fold_sql = pp->remote_fold;
	Oid			rowtype = get_rel_type_id(def->pane_table);
	Datum	   *done;
	bool	   *dnulls;
	int			ndone;
	Datum	   *fold = NULL;
	bool	   *fnulls = NULL;
	int			nfold = 0;
	Datum	   *parts;
	Datum	   *los;
	Datum	   *his;
	int			n = 0;
	Datum		values[FOLD_NPARAMS];
	char		nulls[FOLD_NPARAMS] = {' ', ' ', ' ', ' ', ' ', 'n', ' '};
	TupleDesc	desc;
	Datum	   *states;
	int16		typlen;
	bool		typbyval;
	char		typalign;

	deconstruct_array(DatumGetArrayTypeP(processed), INT8OID, 8, FLOAT8PASSBYVAL,
					  TYPALIGN_DOUBLE, &done, &dnulls, &ndone);
	if (folded != (Datum) 0)
		deconstruct_array(DatumGetArrayTypeP(folded), INT8OID, 8, FLOAT8PASSBYVAL,
						  TYPALIGN_DOUBLE, &fold, &fnulls, &nfold);
	parts = palloc(sizeof(Datum) * Max(ndone, 1));
	los = palloc(sizeof(Datum) * Max(ndone, 1));
	his = palloc(sizeof(Datum) * Max(ndone, 1));
	for (int p = 0; p < ndone; p++)
	{
		int64		lo = 0;

		if (dnulls[p])
			continue;
		if (p < nfold && !fnulls[p])
			lo = DatumGetInt64(fold[p]);
		lo = Max(lo, def->start_offset);
		if (DatumGetInt64(done[p]) <= lo)
			continue;
		parts[n] = Int32GetDatum(p);
		los[n] = Int64GetDatum(lo);
		his[n] = done[p];
		n++;
	}
	get_typlenbyvalalign(rowtype, &typlen, &typbyval, &typalign);
	if (n == 0)
		return PointerGetDatum(construct_empty_array(rowtype));
	values[0] = PointerGetDatum(construct_array(parts, n, INT4OID, 4, true, TYPALIGN_INT));
	values[1] = PointerGetDatum(construct_array(los, n, INT8OID, 8, FLOAT8PASSBYVAL,
												TYPALIGN_DOUBLE));
	values[2] = PointerGetDatum(construct_array(his, n, INT8OID, 8, FLOAT8PASSBYVAL,
												TYPALIGN_DOUBLE));
	values[3] = TimestampTzGetDatum(at);
	values[4] = BoolGetDatum(has_late);
	/* the partitions past those range_filter() writes out */
	values[6] = sw_citus_ranges_tail(parts, n);
	if (has_late)
	{
		SwRoleContext cx;
		Oid			ltypes[4] = {OIDOID, INT4ARRAYOID, INT8ARRAYOID, INT8ARRAYOID};
		Datum		lvalues[4] = {ObjectIdGetDatum(def->stream), values[0], values[1], values[2]};
		bool		isnull;
		Datum		late;

		/* the late rows of those ranges, as the catalog's owner */
		sw_enter_catalog(&cx);
		sw_spi_exec("SELECT pg_catalog.array_agg(l.partition::pg_catalog.numeric"
					" * '18446744073709551616'::pg_catalog.numeric + l.sw_offset::pg_catalog.numeric)"
					" FROM ROWS FROM (pg_catalog.unnest($2), pg_catalog.unnest($3),"
					" pg_catalog.unnest($4)) AS r(p, lo, hi)"
					" JOIN streamwm.late_event_log l ON l.stream = $1 AND l.partition = r.p"
					" AND l.sw_offset > r.lo AND l.sw_offset <= r.hi",
					4, ltypes, lvalues, NULL, SPI_OK_SELECT);
		sw_leave_role(&cx);
		late = sw_spi_getdatum(0, 1, &isnull);
		if (!isnull)
		{
			values[5] = PointerGetDatum(DatumGetArrayTypePCopy(late));
			nulls[5] = ' ';
		}
		SPI_freetuptable(SPI_tuptable);
	}
	run_fold(def, fold_sql, values, nulls);

	/* each row's first columns are a row of the pane table */
	desc = lookup_rowtype_tupdesc_copy(rowtype, -1);
	if (SPI_tuptable->tupdesc->natts < desc->natts)
		elog(ERROR, "streamwm: the fold of query %s returned %d columns, its pane table has %d",
			 def->name, SPI_tuptable->tupdesc->natts, desc->natts);
	for (int i = 0; i < desc->natts; i++)
		if (TupleDescAttr(SPI_tuptable->tupdesc, i)->atttypid != TupleDescAttr(desc, i)->atttypid)
			elog(ERROR, "streamwm: column %d of the fold of query %s is not of its pane table's type",
				 i + 1, def->name);
	states = palloc(sizeof(Datum) * Max(SPI_processed, 1));
	{
		Datum	   *cols = palloc(sizeof(Datum) * desc->natts);
		bool	   *cnulls = palloc(sizeof(bool) * desc->natts);

		for (uint64 r = 0; r < SPI_processed; r++)
		{
			HeapTuple	tup;

			for (int i = 0; i < desc->natts; i++)
				cols[i] = SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, i + 1,
										&cnulls[i]);
			/* internal states signed by the node's key: vouched for here */
			for (int i = 0; i < pp->naggs; i++)
			{
				int			c = pp->nlead + pp->nkeys + i;

				if (!cnulls[c])
					cols[c] = PointerGetDatum(sw_state_vouch(DatumGetByteaPP(cols[c]),
															 pp->aggs[i]));
			}
			tup = heap_form_tuple(desc, cols, cnulls);
			states[r] = heap_copy_tuple_as_datum(tup, desc);
			heap_freetuple(tup);
		}
	}
	n = (int) SPI_processed;
	SPI_freetuptable(SPI_tuptable);
	return PointerGetDatum(construct_array(states, n, rowtype, typlen, typbyval, typalign));
}

/*
 * Run the fold on the nodes over no rows, as create_query and alter_query
 * run the pane statement (query.c): Citus plans and sends it, so what it
 * cannot do fails there, not at a step.
 */
void
sw_citus_fold_check(const SwQueryDef *def, const char *fold_sql)
{
	Datum		values[FOLD_NPARAMS];
	char		nulls[FOLD_NPARAMS] = {' ', ' ', ' ', ' ', ' ', 'n', ' '};

	values[0] = PointerGetDatum(construct_empty_array(INT4OID));
	values[1] = PointerGetDatum(construct_empty_array(INT8OID));
	values[2] = PointerGetDatum(construct_empty_array(INT8OID));
	values[3] = TimestampTzGetDatum(DT_NOBEGIN);
	values[4] = BoolGetDatum(false);
	values[6] = sw_citus_ranges_tail(NULL, 0);
	run_fold(def, fold_sql, values, nulls);
	SPI_freetuptable(SPI_tuptable);
}
