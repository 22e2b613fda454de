/*-------------------------------------------------------------------------
 * citus.c
 *	  Owns streamwm on Citus (DESIGN.md, "Citus"): distributed streams, which
 *	  tables Citus manages, and the refusal, with a clear error where the
 *	  user acts, of everything streamwm does not support on them.
 *
 * Distributed streams (create_stream(..., distributed => true), on the
 * coordinator):
 *
 *	 - _distribute: the stream is distributed by sw_partition, with a shard
 *	   count that spreads the partitions evenly over the workers
 *	   (spread_shard_count), and its commit log <stream>_sw_log co-located
 *	   with it; <stream>_sw_rows, local to the coordinator, is the copy of
 *	   the rows steps read;
 *	 - _pick_partition: sw_partition's DEFAULT, evaluated where the row is
 *	   written, before Citus routes it: the session's claimed partition;
 *	 - on the node that holds a partition, the shard's sw_ingest trigger
 *	   (ingest.c) and the commit (commit_order.c) order the rows there and
 *	   write the commit log's co-located shard (sw_citus_log_shard);
 *	 - a step (process.c) fences each node and copies what arrived before
 *	   the earliest node clock into the local commit log and rows table
 *	   (sw_citus_read_arrivals, _dist_fence, _dist_newest), prunes the
 *	   distributed log after it (sw_citus_prune_log), and retention deletes
 *	   on the shards what it deleted from the copy (sw_citus_forget_rows).
 *
 * Everything else that would make a stream or a result table a Citus table
 * is refused:
 *
 *	 - create_distributed_table(), create_distributed_table_concurrently(),
 *	   create_reference_table() and citus_add_local_table_to_metadata() of a
 *	   stream or of a query's result table are refused when the call names
 *	   the table by a constant (the post-parse-analyze hook below: Citus runs
 *	   them as functions, not as utility commands, so no DDL hook sees them);
 *	 - create_query (and the other create functions, alter_query) refuse a
 *	   stream Citus manages that create_stream did not distribute, a result
 *	   table that Citus manages, and a query that reads a distributed table
 *	   (streamwm_query_stream, register_query);
 *	 - should a stream have become a Citus table anyway (a call with a
 *	   computed argument), INSERT and COPY into it on the coordinator, its
 *	   steps, and the sw_ingest trigger on its shards all refuse with the
 *	   same cause named.
 *
 * Local streams on a Citus coordinator work exactly as without Citus.  All
 * lookups go to Citus's metadata tables by name in pg_catalog
 * (pg_dist_partition, pg_dist_shard, pg_dist_placement, pg_dist_node) and
 * Citus's functions are called by name, so this file needs neither Citus's
 * headers nor Citus installed: without them every test answers "not a
 * Citus table" after one syscache lookup, and distributed => true fails.
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/xact.h"
#include "common/hashfn.h"
#include "funcapi.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/proc.h"
#include "storage/lock.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/guc.h"
#include "utils/rel.h"
#include "utils/reltrigger.h"
#include "utils/timestamp.h"
#include "catalog/namespace.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "nodes/nodeFuncs.h"
#include "nodes/readfuncs.h"
#include "parser/analyze.h"
#include "parser/parsetree.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/regproc.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "catalog.h"
#include "citus.h"
#include "purge.h"
#include "result.h"
#include "commit_order.h"
#include "ingest.h"
#include "limit.h"
#include "watermark.h"

PG_FUNCTION_INFO_V1(streamwm_check_distributed);
PG_FUNCTION_INFO_V1(streamwm_distribute);
PG_FUNCTION_INFO_V1(streamwm_pick_partition);
PG_FUNCTION_INFO_V1(streamwm_dist_fence);
PG_FUNCTION_INFO_V1(streamwm_dist_newest);

static post_parse_analyze_hook_type prev_post_parse_analyze_hook = NULL;
static ExecutorStart_hook_type prev_executor_start_hook = NULL;

static Oid	citus_catalog(const char *name);

/*
 * The distributed streams this transaction wrote into through this node
 * (an INSERT executed, a COPY FROM run here): a step of one of them in the
 * same transaction is refused here (process.c), whichever connections
 * Citus used for the rows.  The shards' own check (commit_order.c) sees
 * only the connection that wrote: with several connections to a worker
 * (citus.force_max_query_parallelization) a step read a row the
 * transaction's commit then renumbered, and counted it twice (review).
 * More streams than fit: every distributed stream counts as written.
 */
#define SW_DIST_WRITTEN 16
static LocalTransactionId dist_written_lxid = InvalidLocalTransactionId;
static int	ndist_written = 0;
static Oid	dist_written[SW_DIST_WRITTEN];

static void
note_dist_write(Oid relid)
{
	if (dist_written_lxid != MyProc->lxid)
	{
		dist_written_lxid = MyProc->lxid;
		ndist_written = 0;
	}
	for (int i = 0; i < Min(ndist_written, SW_DIST_WRITTEN); i++)
		if (dist_written[i] == relid)
			return;
	if (ndist_written < SW_DIST_WRITTEN)
		dist_written[ndist_written] = relid;
	ndist_written++;
}

/* Did this transaction write into distributed stream relid through this node? */
bool
sw_citus_wrote(Oid relid)
{
	if (dist_written_lxid != MyProc->lxid || MyProc->lxid == InvalidLocalTransactionId)
		return false;
	if (ndist_written > SW_DIST_WRITTEN)
		return sw_stream_distributed(relid, NULL, NULL);
	for (int i = 0; i < ndist_written; i++)
		if (dist_written[i] == relid)
			return true;
	return false;
}

/* A distributed stream written into by an INSERT or COPY run here: noted. */
static void
note_if_distributed_stream(Oid relid)
{
	if (OidIsValid(relid) && sw_citus_table_kind(relid) != NULL &&
		sw_stream_distributed(relid, NULL, NULL))
		note_dist_write(relid);
}

/* ExecutorStart_hook: an INSERT into a distributed stream (note_dist_write). */
static void
citus_executor_start(QueryDesc *queryDesc, int eflags)
{
	/*
	 * Citus's plan of an INSERT into a distributed table names no result
	 * relation (its custom scan does the writing): the table is the range
	 * table's relation that the statement needs INSERT on.
	 */
	if (queryDesc->operation == CMD_INSERT && !(eflags & EXEC_FLAG_EXPLAIN_ONLY) &&
		IsTransactionState() && OidIsValid(citus_catalog("pg_dist_partition")))
	{
		ListCell   *lc;

		foreach(lc, queryDesc->plannedstmt->rtable)
		{
			RangeTblEntry *rte = lfirst_node(RangeTblEntry, lc);

			if (rte->rtekind == RTE_RELATION && (rte->requiredPerms & ACL_INSERT))
				note_if_distributed_stream(rte->relid);
		}
	}
	if (prev_executor_start_hook)
		prev_executor_start_hook(queryDesc, eflags);
	else
		standard_ExecutorStart(queryDesc, eflags);
}

/* Citus's functions that turn a local table into a Citus table */
static const char *const distributing_functions[] = {
	"create_distributed_table",
	"create_distributed_table_concurrently",
	"create_reference_table",
	"citus_add_local_table_to_metadata",
	NULL
};

/* and those that change how a Citus table is distributed */
static const char *const redistributing_functions[] = {
	"alter_distributed_table",
	"update_distributed_table_colocation",
	"undistribute_table",
	NULL
};

/* Which of the two lists fname is in: 1, 2, or 0. */
static int
distributing_function(const char *fname)
{
	for (int i = 0; distributing_functions[i] != NULL; i++)
		if (strcmp(fname, distributing_functions[i]) == 0)
			return 1;
	for (int i = 0; redistributing_functions[i] != NULL; i++)
		if (strcmp(fname, redistributing_functions[i]) == 0)
			return 2;
	return 0;
}

#define SW_CITUS_HINT \
	"A stream is distributed by streamwm.create_stream(..., distributed => true); a query's " \
	"result table is local on the coordinator, or co-located with the stream when the query " \
	"groups by its sw_partition; a query may join reference tables."

/* A Citus metadata table in pg_catalog, or InvalidOid (Citus not installed). */
static Oid
citus_catalog(const char *name)
{
	return get_relname_relid(name, PG_CATALOG_NAMESPACE);
}

/*
 * Looks up the row of a Citus metadata table whose column keycol equals
 * key (an oid or an int8, by keyfn), through index when it exists, with
 * the latest snapshot; copies out the values of the columns cols.  False
 * when there is no such row.
 */
static bool
citus_catalog_row(Oid catalog, const char *index, const char *keycol,
				  RegProcedure keyfn, Datum key,
				  int ncols, const char *const *cols, Datum *values, bool *nulls)
{
	Relation	rel;
	ScanKeyData skey;
	SysScanDesc scan;
	HeapTuple	tuple;
	Oid			indexoid = citus_catalog(index);
	AttrNumber	keyatt = get_attnum(catalog, keycol);
	Snapshot	snapshot;
	bool		found = false;

	if (keyatt == InvalidAttrNumber)
		return false;
	rel = table_open(catalog, AccessShareLock);
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	ScanKeyInit(&skey, keyatt, BTEqualStrategyNumber, keyfn, key);
	scan = systable_beginscan(rel, indexoid, OidIsValid(indexoid), snapshot, 1, &skey);
	tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple))
	{
		found = true;
		for (int i = 0; i < ncols; i++)
		{
			AttrNumber	att = get_attnum(catalog, cols[i]);

			nulls[i] = true;
			values[i] = (Datum) 0;
			if (att != InvalidAttrNumber)
				values[i] = heap_getattr(tuple, att, RelationGetDescr(rel), &nulls[i]);
			if (!nulls[i])
			{
				Form_pg_attribute attr = TupleDescAttr(RelationGetDescr(rel), att - 1);

				values[i] = datumCopy(values[i], attr->attbyval, attr->attlen);
			}
		}
	}
	systable_endscan(scan);
	UnregisterSnapshot(snapshot);
	table_close(rel, AccessShareLock);
	return found;
}

/*
 * What Citus makes of a table: "distributed table", "reference table",
 * "Citus local table", or NULL when it is not in Citus's metadata (or
 * Citus is not installed in this database).
 */
const char *
sw_citus_table_kind(Oid relid)
{
	static const char *const cols[] = {"partmethod", "repmodel"};
	Oid			catalog = citus_catalog("pg_dist_partition");
	Datum		values[2];
	bool		nulls[2];
	char		method;

	if (!OidIsValid(catalog) || !OidIsValid(relid))
		return NULL;
	if (!citus_catalog_row(catalog, "pg_dist_partition_logical_relid_index", "logicalrelid",
						   F_OIDEQ, ObjectIdGetDatum(relid), 2, cols, values, nulls))
		return NULL;
	method = nulls[0] ? 'n' : DatumGetChar(values[0]);
	if (method != 'n')
		return "distributed table";
	if (!nulls[1] && DatumGetChar(values[1]) == 't')
		return "reference table";
	return "Citus local table";
}

/*
 * The Citus table a relation is a shard of (on a node that holds shards,
 * with Citus's metadata), or InvalidOid.  A shard is named
 * <table>_<shardid>, in the table's schema.
 */
Oid
sw_citus_shard_owner(Oid relid)
{
	static const char *const cols[] = {"logicalrelid"};
	Oid			catalog = citus_catalog("pg_dist_shard");
	char	   *relname;
	char	   *underscore;
	char	   *end;
	int64		shardid;
	Datum		values[1];
	bool		nulls[1];
	Oid			logical;
	char	   *logical_name;

	if (!OidIsValid(catalog) || !OidIsValid(relid))
		return InvalidOid;
	relname = get_rel_name(relid);
	if (relname == NULL || (underscore = strrchr(relname, '_')) == NULL ||
		underscore[1] == '\0')
		return InvalidOid;
	errno = 0;
	shardid = strtoll(underscore + 1, &end, 10);
	if (*end != '\0' || errno != 0 || shardid <= 0)
		return InvalidOid;
	if (!citus_catalog_row(catalog, "pg_dist_shard_shardid_index", "shardid",
						   F_INT8EQ, Int64GetDatum(shardid), 1, cols, values, nulls) ||
		nulls[0])
		return InvalidOid;
	logical = DatumGetObjectId(values[0]);
	logical_name = get_rel_name(logical);
	if (logical_name == NULL ||
		get_rel_namespace(logical) != get_rel_namespace(relid) ||
		strlen(logical_name) != (size_t) (underscore - relname) ||
		strncmp(logical_name, relname, underscore - relname) != 0)
		return InvalidOid;
	return logical;
}

/* The refusal of a stream Citus manages (a step, INSERT, COPY, create_query). */
void
sw_citus_refuse_stream(Oid stream)
{
	const char *kind = sw_citus_table_kind(stream);

	if (kind == NULL)
		return;
	/* made by create_stream(..., distributed => true): supported */
	if (strcmp(kind, "distributed table") == 0 && sw_stream_distributed(stream, NULL, NULL))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("stream %s is a Citus %s", sw_relation_name(stream), kind),
			 errdetail("streamwm assigns a row's partition and offset in a trigger and reads each "
					   "partition in offset order on this node; Citus routes a row to a shard "
					   "before any trigger runs, and a step's statements cannot run on shards."),
			 errhint("Drop it with streamwm.drop_stream() and create it again, as a local stream or with "
					 "streamwm.create_stream(..., distributed => true) (undistribute_table() would make a new "
					 "table, no longer a stream).")));
}

/*
 * The refusal of a relation a window query reads (create_query,
 * alter_query): the stream must be local, and the query may not read a
 * distributed or Citus local table (a step joins the stream with local
 * tables in statements Citus cannot plan).  Reference tables have a
 * placement on a coordinator in Citus's metadata, where Citus joins them
 * with local tables: they are allowed.
 */
void
sw_citus_refuse_query_relation(Oid relid, Oid stream)
{
	const char *kind;

	if (relid == stream)
	{
		sw_citus_refuse_stream(stream);
		return;
	}
	kind = sw_citus_table_kind(relid);
	if (kind == NULL || strcmp(kind, "reference table") == 0)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("a window query cannot read Citus %s %s", kind, sw_relation_name(relid)),
			 errdetail("A step runs the query over the window's rows of the local stream, joined "
					   "with streamwm's local catalog; Citus does not join a %s with local tables "
					   "there.", kind),
			 errhint("Join with a reference table (create_reference_table()) or a local table instead.")));
}

/*
 * A table Citus distributes by hash: its distribution column and its
 * co-location group (pg_dist_partition).  False for any other table.
 */
static bool
citus_hash_distribution(Oid relid, AttrNumber *attnum, uint32 *colocation)
{
	static const char *const cols[] = {"partmethod", "partkey", "colocationid"};
	Oid			catalog = citus_catalog("pg_dist_partition");
	Datum		values[3];
	bool		nulls[3];
	Node	   *key;

	if (!OidIsValid(catalog) ||
		!citus_catalog_row(catalog, "pg_dist_partition_logical_relid_index", "logicalrelid",
						   F_OIDEQ, ObjectIdGetDatum(relid), 3, cols, values, nulls) ||
		nulls[0] || nulls[1] || nulls[2] || DatumGetChar(values[0]) != 'h')
		return false;
	key = stringToNode(TextDatumGetCString(values[1]));
	if (key == NULL || !IsA(key, Var))
		return false;
	*attnum = ((Var *) key)->varattno;
	*colocation = DatumGetUInt32(values[2]);
	return true;
}

/*
 * The refusal of a result table Citus manages (create_query): allowed only
 * for a query that groups by the sw_partition of a distributed stream, in a
 * table distributed by that output column and co-located with the stream
 * (as streamwm_internal._result_table makes it; query: the bound text of
 * the window query, NULL for an ordered query).  Each result row then
 * lives on the node of its partition; a step writes it there, from the
 * coordinator, with a plan made for the step's values (step_cache.c).
 */
void
sw_citus_refuse_result_table(Oid result, Oid stream, const char *query)
{
	const char *kind = sw_citus_table_kind(result);
	AttrNumber	attnum;
	AttrNumber	stream_attnum;
	uint32		colocation;
	uint32		stream_colocation;
	char	   *routing;

	if (kind == NULL)
		return;
	if (strcmp(kind, "distributed table") == 0 && result != stream &&
		sw_stream_distributed(stream, NULL, NULL) &&
		!sw_lookup_stream(result, false, NULL, NULL) &&
		citus_hash_distribution(result, &attnum, &colocation) &&
		citus_hash_distribution(stream, &stream_attnum, &stream_colocation) &&
		colocation == stream_colocation && query != NULL &&
		(routing = sw_routing_column(stream, query)) != NULL &&
		attnum == get_attnum(result, routing))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("result table %s is a Citus %s", sw_relation_name(result), kind),
			 errdetail("A step upserts a query's results from the coordinator; a result table "
					   "can be a Citus table only when the query groups by the sw_partition of "
					   "a distributed stream, distributed by that column and co-located with "
					   "the stream."),
			 errhint("Give create_query a local result table, or none. " SW_CITUS_HINT)));
}

/*
 * A session or count query's result table must be local: its step updates
 * the query's state rows by their ctid in the statement that writes the
 * results, which Citus does not plan next to a distributed table.
 */
void
sw_citus_refuse_result_kind(Oid result, const char *kind)
{
	const char *citus = sw_citus_table_kind(result);

	if (citus == NULL)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("the result table of a %s query cannot be a Citus %s", kind, citus),
			 errdetail("Its step updates the query's state by row identity in the statement "
					   "that writes the results, which Citus does not plan with a Citus table."),
			 errhint("Give it a local result table, or none.")));
}

/*
 * At a step, when it first meets a query's result table (a step cache
 * entry is built for every new result table OID, and again after any
 * change to the table): a result table that became a Citus table after
 * create_query (replaced by name, redistributed with a computed argument)
 * is checked as create_query checks it, and the step fails, with the
 * cause, rather than write where Citus cannot plan or against the
 * co-location.  True for a Citus result table that passes.
 */
bool
sw_citus_check_result(const struct SwQueryDef *def)
{
	int			nestlevel;

	if (!OidIsValid(def->result_table) || def->result_stream ||
		sw_citus_table_kind(def->result_table) == NULL)
		return false;
	if (def->session)
		sw_citus_refuse_result_kind(def->result_table, "session");
	if (def->count)
		sw_citus_refuse_result_kind(def->result_table, "count");
	nestlevel = sw_enter_safe_path();
	sw_citus_refuse_result_table(def->result_table, def->stream,
								 def->ordered ? NULL : def->query);
	sw_leave_safe_path(nestlevel);
	return true;
}

/*
 * A read of a distributed stream's shards by partition and offset range
 * (the arrays $1 partitions, $2 lo, $3 hi, in the statement's join with
 * ROWS FROM their unnest) also gets the ranges as a condition on alias:
 * with the join alone a node's planner does not see them, and read every
 * shard whole at every step however few rows were new (a step of 2,000
 * new rows over 1,000,000 retained: 86 ms, most of the step).  Citus sends
 * the statement with the parameters' values; a node folds ($1[i], $2[i],
 * $3[i]) to constants, drops those past the arrays' end (NULL), and plans
 * an index range scan of a narrow range, a sequential scan of most of a
 * shard.  The first nranges ranges (at most SW_CITUS_MAX_RANGES: Citus
 * sends the whole statement to every shard it reads, and each plans every
 * range; 1,200 partitions with every range written out read 3 times
 * slower) and the partitions past them in $tail_param
 * (sw_citus_ranges_tail; empty: false).  The join keeps the rows exact.
 */
char *
sw_citus_ranges_sql(const char *alias, int nranges, int tail_param)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '(');
	for (int i = 1; i <= Min(nranges, SW_CITUS_MAX_RANGES); i++)
		appendStringInfo(&buf, "(%s.sw_partition = $1[%d] AND %s.sw_offset > $2[%d]"
						 " AND %s.sw_offset <= $3[%d]) OR ", alias, i, alias, i, alias, i);
	appendStringInfo(&buf, "%s.sw_partition = ANY ($%d))", alias, tail_param);
	return buf.data;
}

/* The tail parameter of sw_citus_ranges_sql: parts (n of them) past the first ranges. */
Datum
sw_citus_ranges_tail(const Datum *parts, int n)
{
	if (n <= SW_CITUS_MAX_RANGES)
		return PointerGetDatum(construct_empty_array(INT4OID));
	return PointerGetDatum(construct_array((Datum *) parts + SW_CITUS_MAX_RANGES,
										   n - SW_CITUS_MAX_RANGES, INT4OID, 4, true,
										   TYPALIGN_INT));
}

/*
 * Whether relid is a stream, or the result table of a query (then *query
 * is its name): read from the catalog as its owner.  Only called for
 * tables that Citus manages or is asked to, in a database with streamwm.
 */
static bool
streamwm_table_role(Oid relid, bool *is_stream, char **query)
{
	Oid			types[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(relid)};
	SwRoleContext cx;
	int			rc;

	*is_stream = false;
	*query = NULL;
	if (!OidIsValid(get_extension_oid("streamwm", true)) ||
		creating_extension)
		return false;
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	sw_enter_catalog(&cx);
	rc = SPI_execute_with_args("SELECT true, NULL::text FROM streamwm.stream_def d"
							   " WHERE d.stream OPERATOR(pg_catalog.=) $1"
							   " UNION ALL "
							   "SELECT false, q.name FROM streamwm.query_def q"
							   " WHERE q.result_table OPERATOR(pg_catalog.=) $1"
							   " LIMIT 1",
							   1, types, values, NULL, true, 1);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "streamwm: reading the catalog failed: %s", SPI_result_code_string(rc));
	if (SPI_processed > 0)
	{
		bool		isnull;

		*is_stream = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0],
												SPI_tuptable->tupdesc, 1, &isnull));
		if (!*is_stream)
		{
			char	   *name = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2);

			*query = MemoryContextStrdup(TopTransactionContext, name);
		}
	}
	sw_leave_role(&cx);
	SPI_finish();
	return *is_stream || *query != NULL;
}

/*
 * Refuses Citus's distributing functions called on a stream or a result
 * table, by a constant argument: SELECT create_distributed_table('s', ...).
 */
static bool
refuse_distributing_call(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, FuncExpr))
	{
		FuncExpr   *f = (FuncExpr *) node;
		char	   *fname = get_func_name(f->funcid);
		Node	   *arg;
		int			which = fname == NULL ? 0 : distributing_function(fname);

		if (which != 0 && f->args != NIL &&
			get_func_namespace(f->funcid) == PG_CATALOG_NAMESPACE)
		{
			bool		is_stream;
			char	   *query;
			Oid			relid = InvalidOid;

			arg = (Node *) linitial(f->args);
			while (IsA(arg, RelabelType))
				arg = (Node *) ((RelabelType *) arg)->arg;
			if (IsA(arg, Const) && !((Const *) arg)->constisnull &&
				((Const *) arg)->consttype == REGCLASSOID)
				relid = DatumGetObjectId(((Const *) arg)->constvalue);
			/*
			 * (a stream's co-location may change: two streams co-located
			 * take INSERT ... SELECT between them on the workers)
			 */
			if (OidIsValid(relid) && streamwm_table_role(relid, &is_stream, &query) &&
				!(which == 2 && is_stream))
			{
				if (which == 2)
					ereport(ERROR,
							(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
							 errmsg("cannot change how Citus distributes result table %s of query \"%s\" with %s()",
									sw_relation_name(relid), query, fname),
							 errdetail("A result table is local, or co-located with its stream by "
									   "the query's sw_partition, as create_query made it."),
							 errhint(SW_CITUS_HINT)));
				if (is_stream)
					ereport(ERROR,
							(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
							 errmsg("cannot make stream %s a Citus table with %s()",
									sw_relation_name(relid), fname),
							 errdetail("streamwm assigns a row's partition and offset in a trigger "
									   "and reads each partition in offset order on this node; "
									   "Citus would route rows to shards before that trigger runs, "
									   "and a step's statements cannot run on shards."),
							 errhint(SW_CITUS_HINT)));
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot make result table %s of query \"%s\" a Citus table with %s()",
								sw_relation_name(relid), query, fname),
						 errdetail("A step upserts a query's results in the transaction that records "
								   "its position, with statements that read the result table "
								   "together with local tables."),
						 errhint(SW_CITUS_HINT)));
			}
		}
	}
	/* SELECT (SELECT create_distributed_table(...)) too */
	if (IsA(node, Query))
		return query_tree_walker((Query *) node, refuse_distributing_call, context, 0);
	return expression_tree_walker(node, refuse_distributing_call, context);
}

/*
 * post_parse_analyze_hook: SELECT create_distributed_table(<a stream>, ...)
 * and INSERT into a stream that Citus manages.  Costs one syscache lookup
 * per SELECT without FROM or INSERT when Citus is not installed.
 */
static void
citus_post_parse_analyze(ParseState *pstate, Query *query, JumbleState *jstate)
{
	if (prev_post_parse_analyze_hook)
		prev_post_parse_analyze_hook(pstate, query, jstate);

	if (query->commandType == CMD_SELECT && query->rtable == NIL)
	{
		if (!IsTransactionState() || !OidIsValid(citus_catalog("pg_dist_partition")))
			return;
		(void) expression_tree_walker((Node *) query->targetList,
									  refuse_distributing_call, NULL);
	}
	else if (query->commandType == CMD_INSERT && query->resultRelation > 0)
	{
		Oid			relid = rt_fetch(query->resultRelation, query->rtable)->relid;
		bool		is_stream;
		char	   *qname;

		if (!IsTransactionState() || sw_citus_table_kind(relid) == NULL)
			return;
		if (streamwm_table_role(relid, &is_stream, &qname) && is_stream)
		{
			sw_citus_refuse_stream(relid);
			note_if_distributed_stream(relid);
		}
	}
	/*
	 * The partitions of rows inserted into distributed streams, at the top
	 * or in a WITH; on every node (a worker's catalog does not know the
	 * stream)
	 */
	if ((query->commandType == CMD_INSERT || query->hasModifyingCTE) &&
		IsTransactionState() && OidIsValid(citus_catalog("pg_dist_partition")))
		sw_citus_route_statement(query);
}

/*
 * Before a utility statement (streamwm.c): COPY FROM into a stream that
 * Citus manages.  True if it ran the statement itself (a COPY into a
 * distributed stream whose partitions come from its key: citus_route.c).
 */
bool
sw_citus_utility(PlannedStmt *pstmt, const char *queryString, QueryCompletion *qc)
{
	Node	   *parsetree = pstmt->utilityStmt;

	if (IsA(parsetree, CopyStmt) && ((CopyStmt *) parsetree)->is_from &&
		((CopyStmt *) parsetree)->relation != NULL &&
		OidIsValid(citus_catalog("pg_dist_partition")))
	{
		Oid			relid = RangeVarGetRelid(((CopyStmt *) parsetree)->relation, NoLock, true);
		bool		is_stream;
		char	   *qname;

		const char *kind = sw_citus_table_kind(relid);

		if (kind != NULL &&
			streamwm_table_role(relid, &is_stream, &qname) && is_stream)
		{
			sw_citus_refuse_stream(relid);
			note_if_distributed_stream(relid);
		}
		if (kind != NULL && strcmp(kind, "distributed table") == 0)
			return sw_citus_route_copy(pstmt, queryString, relid, qc);
	}
	return false;
}

/* ---------------------------------------------------------------------
 * Distributed streams (DESIGN.md, "Citus: distributed streams")
 * ---------------------------------------------------------------------
 */

/* Is Citus installed in this database, and is this node its coordinator? */
static bool
citus_coordinator(void)
{
	bool		coordinator = false;
	int			save_nestlevel;

	if (!OidIsValid(get_extension_oid("citus", true)) ||
		!OidIsValid(citus_catalog("pg_dist_local_group")))
		return false;
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	save_nestlevel = sw_enter_safe_path();
	if (SPI_execute("SELECT groupid FROM pg_catalog.pg_dist_local_group", true, 1) == SPI_OK_SELECT &&
		SPI_processed == 1)
	{
		bool		isnull;
		Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);

		coordinator = !isnull && DatumGetInt32(d) == 0;
	}
	sw_leave_safe_path(save_nestlevel);
	SPI_finish();
	return coordinator;
}

/*
 * streamwm_internal._check_distributed(partition_key text): what
 * create_stream(..., distributed => true) needs before it makes anything.
 * (Any partition_key will do: citus_route.c computes it before routing.)
 */
Datum
streamwm_check_distributed(PG_FUNCTION_ARGS)
{
	if (!OidIsValid(get_extension_oid("citus", true)))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("a distributed stream needs Citus"),
				 errdetail("The Citus extension is not installed in this database."),
				 errhint("Install Citus on every node, CREATE EXTENSION citus and streamwm there, "
						 "and create the stream on the coordinator; or create it with distributed => false.")));
	if (!citus_coordinator())
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("a distributed stream must be created on the Citus coordinator"),
				 errhint("Connect to the coordinator (the node with group id 0).")));
	PG_RETURN_VOID();
}

/*
 * How many shards a stream of np partitions gets.  Citus hashes
 * sw_partition (hashint4) into shard_count equal ranges of the 32-bit hash
 * space and places shard i on worker i mod (number of workers), in node
 * order: with shard_count = np, partitions can share a shard and pile up on
 * one node (4 partitions over 2 workers came out 3 and 1).  So the smallest
 * shard count from np up to 8 np (at most np + 512) is taken with which the
 * workers get partition counts that differ by at most one, every partition
 * in a shard of its own if one such count does that too (up to 64
 * partitions); else np.  (The placement
 * rule is Citus's at the time of writing; test/citus checks the spread.)
 */
static int
spread_shard_count(int np)
{
	int			workers = 0;
	int			balanced = 0;
	int			nestlevel;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	nestlevel = sw_enter_safe_path();
	if (SPI_execute("SELECT count(DISTINCT groupid)::int4 FROM pg_catalog.pg_dist_node"
					" WHERE shouldhaveshards AND isactive AND noderole = 'primary'",
					true, 1) == SPI_OK_SELECT && SPI_processed == 1)
	{
		bool		isnull;

		workers = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
											  1, &isnull));
	}
	sw_leave_safe_path(nestlevel);
	SPI_finish();
	if (workers < 2)
		return np;
	for (int count = np; count <= Min(8 * np, np + 512); count++)
	{
		int64		increment = INT64CONST(4294967296) / count;
		int		   *per_node = palloc0(workers * sizeof(int));
		bool	   *used = palloc0(count * sizeof(bool));
		bool		distinct = true;
		int			lo = INT_MAX;
		int			hi = 0;

		for (int p = 0; p < np; p++)
		{
			int32		h = DatumGetInt32(DirectFunctionCall1(hashint4, Int32GetDatum(p)));
			int64		shard = ((int64) h - PG_INT32_MIN) / increment;

			if (shard >= count)
				shard = count - 1;
			if (used[shard])
				distinct = false;
			used[shard] = true;
			per_node[shard % workers]++;
		}
		for (int w = 0; w < workers; w++)
		{
			lo = Min(lo, per_node[w]);
			hi = Max(hi, per_node[w]);
		}
		pfree(per_node);
		pfree(used);
		if (hi - lo <= 1)
		{
			/* a shard of its own each: worth a few empty shards, not thousands */
			if (distinct || np > 64)
				return count;
			if (balanced == 0)
				balanced = count;
		}
	}
	return balanced > 0 ? balanced : np;
}

/*
 * The sw_ingest trigger of rel as a distributed stream's table has it (two
 * arguments: partitions, commit log), copied before the catalog read that
 * checks its function (a relcache rebuild frees the description); NULL if
 * it has no such trigger of streamwm's.
 */
Trigger *
sw_citus_stream_trigger(Relation rel)
{
	TriggerDesc *td = rel->trigdesc;
	Trigger    *copy = NULL;

	for (int i = 0; td != NULL && i < td->numtriggers; i++)
		if (strcmp(td->triggers[i].tgname, "sw_ingest") == 0 && td->triggers[i].tgnargs == 2)
			copy = sw_copy_trigger(&td->triggers[i]);
	if (copy == NULL || !sw_is_ingest_function(copy->tgfoid))
		return NULL;
	return copy;
}

/*
 * Argument argno of the stream table relid's sw_ingest trigger as a
 * distributed stream has it; NULL if it has no such trigger of streamwm's.
 * *nsp: the table's schema.
 */
static char *
dist_ingest_trigger_arg(Oid relid, int argno, Oid *nsp)
{
	Relation	rel = table_open(relid, AccessShareLock);
	Trigger    *t = sw_citus_stream_trigger(rel);

	if (nsp != NULL)
		*nsp = RelationGetNamespace(rel);
	table_close(rel, AccessShareLock);
	return t != NULL ? t->tgargs[argno] : NULL;
}

/*
 * The commit log a new distributed stream's sw_ingest trigger names (its
 * second argument, as create_stream wrote it: the stream's schema, a name
 * no relation has yet), quoted for a statement.  It is made here, owned by
 * the catalog, so it names nothing its caller made.
 */
static char *
new_log_name(Oid stream)
{
	Oid			nsp;
	char	   *arg = dist_ingest_trigger_arg(stream, 1, &nsp);
	List	   *names;
	RangeVar   *rv;

	if (arg == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("stream %s was not made to be distributed", sw_relation_name(stream)),
				 errhint("Create it with streamwm.create_stream(..., distributed => true).")));
	names = stringToQualifiedNameList(arg);
	rv = makeRangeVarFromNameList(names);
	if (rv->schemaname == NULL || rv->catalogname != NULL ||
		get_namespace_oid(rv->schemaname, true) != nsp ||
		OidIsValid(get_relname_relid(rv->relname, nsp)))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the commit log of stream %s must be a new table in its schema",
						sw_relation_name(stream))));
	return quote_qualified_identifier(rv->schemaname, rv->relname);
}

/*
 * streamwm_internal._distribute(stream, rows_table): the last step of
 * create_stream(..., distributed => true).  Makes the stream's commit log,
 * owned by streamwm's catalog (commits and steps write it with the
 * catalog's rights: nothing of its caller's may be attached to it),
 * distributes the stream on sw_partition (Citus hashes the partition to a
 * shard: a partition is never split; spread_shard_count() picks how many
 * shards) and the log co-located with it, so that each partition's log
 * entries live, and move, with its rows; records both in stream_def.
 * Citus refuses tables with triggers unless citus.enable_unsafe_triggers:
 * the sw_ingest trigger must run on the shards, so it is on for these
 * calls.
 */
Datum
streamwm_distribute(PG_FUNCTION_ARGS)
{
	Oid			stream = PG_GETARG_OID(0);
	Oid			rows = PG_GETARG_OID(1);
	Oid			types[3] = {REGCLASSOID, INT4OID, TEXTOID};
	Datum		values[3];
	int			nestlevel;
	SwRoleContext cx;
	int			np;
	char	   *logname;
	Oid			log;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	(void) sw_check_stream_manager(stream, true);
	if (sw_relation_owner(rows) != sw_relation_owner(stream))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("the copy of a distributed stream's rows must have the stream's owner")));
	if (!sw_lookup_stream(stream, false, NULL, &np))
		sw_not_a_stream(stream);
	if (sw_stream_distributed(stream, NULL, NULL))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("stream %s is distributed already", sw_relation_name(stream))));
	/*
	 * Citus names a shard <table>_<shard id> and shortens a name that would
	 * pass NAMEDATALEN with a hash, which the shards' code cannot rebuild:
	 * the commit log's shards (<stream>_sw_log_<id>, ids of up to 8 digits)
	 * must keep their plain names.
	 */
	if (strlen(get_rel_name(stream)) > NAMEDATALEN - 1 - strlen("_sw_log") - 1 - 8)
		ereport(ERROR,
				(errcode(ERRCODE_NAME_TOO_LONG),
				 errmsg("the name of a distributed stream may have at most %d bytes",
						(int) (NAMEDATALEN - 1 - strlen("_sw_log") - 1 - 8)),
				 errdetail("Citus shortens the names of shards that would be longer, and the commit log's shards must keep theirs.")));
	sw_citus_check_partition_key(stream);
	logname = new_log_name(stream);

	nestlevel = NewGUCNestLevel();
	(void) set_config_option("search_path", SW_SAFE_SEARCH_PATH, PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	(void) set_config_option("citus.enable_unsafe_triggers", "on", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	/*
	 * One connection per node: in parallel, Citus would open one per shard
	 * (up to its pool size) and prepare each at commit, which can exceed a
	 * node's max_prepared_transactions for a stream of many partitions.
	 */
	(void) set_config_option("citus.multi_shard_modify_mode", "sequential", PGC_USERSET,
							 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	/*
	 * All as the catalog's owner: Citus refuses, in one transaction, to
	 * touch shard placements another user modified, and the log's are
	 * co-located with the stream's.  (The stream has no rows yet, so
	 * distributing it runs nothing of its owner's; its shards keep its
	 * owner.)  By the same rule, the owner's own statements on the stream
	 * can fail in the transaction that created it: commit first.
	 */
	values[1] = Int32GetDatum(spread_shard_count(np));
	sw_enter_catalog(&cx);
	values[0] = ObjectIdGetDatum(stream);
	sw_spi_exec("SELECT pg_catalog.create_distributed_table($1, 'sw_partition',"
				" shard_count => $2, colocate_with => 'none')",
				2, types, values, NULL, SPI_OK_SELECT);

	/* the log, made and distributed as the catalog's owner, who owns it */
	sw_spi_exec(psprintf("CREATE TABLE %s (partition int NOT NULL, lo bigint NOT NULL,"
						 " hi bigint NOT NULL, arrival timestamptz NOT NULL,"
						 " held_from timestamptz NOT NULL, PRIMARY KEY (partition, hi))",
						 logname),
				0, NULL, NULL, NULL, SPI_OK_UTILITY);
	CommandCounterIncrement();
	log = RangeVarGetRelid(makeRangeVarFromNameList(stringToQualifiedNameList(logname)),
						   NoLock, false);
	values[0] = ObjectIdGetDatum(log);
	values[1] = CStringGetTextDatum(sw_relation_name(stream));
	types[1] = TEXTOID;
	sw_spi_exec("SELECT pg_catalog.create_distributed_table($1, 'partition', colocate_with => $2)",
				2, types, values, NULL, SPI_OK_SELECT);
	/*
	 * The stream's owner prunes the log after a step (sw_citus_prune_log):
	 * a step's writes on the nodes must all be one user's.  Deleting its
	 * stream's log entries only loses that stream's arrivals, which its
	 * owner can do to its rows anyway.
	 */
	sw_spi_exec(psprintf("GRANT SELECT, DELETE ON %s TO %s", logname,
						 quote_identifier(GetUserNameFromId(sw_relation_owner(stream), false))),
				0, NULL, NULL, NULL, SPI_OK_UTILITY);

	types[1] = REGCLASSOID;
	types[2] = REGCLASSOID;
	values[0] = ObjectIdGetDatum(stream);
	values[1] = ObjectIdGetDatum(rows);
	values[2] = ObjectIdGetDatum(log);
	sw_spi_exec("UPDATE streamwm.stream_def SET rows_table = $2, log_table = $3 WHERE stream = $1",
				3, types, values, NULL, SPI_OK_UPDATE);
	sw_stream_distributed_changed();
	sw_leave_role(&cx);
	AtEOXact_GUC(true, nestlevel);
	SPI_finish();
	PG_RETURN_VOID();
}

/* A session's partition of a distributed stream, for rows that give none. */
typedef struct PickedPartition
{
	Oid			relid;			/* hash key */
	int			npartitions;
	int			partition;
	bool		claimed;
	bool		keyed;			/* the stream has a partition_key */
} PickedPartition;

static HTAB *picked = NULL;

/*
 * How many partitions the stream relid has: its catalog row (a local stream,
 * or a distributed one on the coordinator); on a worker, where streamwm's
 * catalog does not know it (a row written, or ingest() called, through
 * it), the first argument of the distributed stream table's sw_ingest
 * trigger, which Citus created there with the table.  A clear error for
 * anything else.
 */
int
sw_citus_stream_partitions(Oid relid)
{
	const char *kind;
	char	   *arg = NULL;
	int			n = 0;
	bool		found;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	found = sw_lookup_stream(relid, false, NULL, &n);
	SPI_finish();
	if (found)
		return n;
	kind = sw_citus_table_kind(relid);
	if (kind != NULL && strcmp(kind, "distributed table") == 0)
		arg = dist_ingest_trigger_arg(relid, 0, NULL);
	if (arg != NULL)
		n = pg_strtoint32(arg);
	if (n < 1 || n > 4096)
		sw_not_a_stream(relid);
	return n;
}

/*
 * streamwm_internal._pick_partition(stream text): sw_partition's
 * DEFAULT on a distributed stream, evaluated on the coordinator before
 * Citus routes the row: the per-session choice of ingest.c (a partition
 * no other session claimed, kept while the claim holds).
 */
Datum
streamwm_pick_partition(PG_FUNCTION_ARGS)
{
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	Oid			relid = RangeVarGetRelid(makeRangeVarFromNameList(stringToQualifiedNameList(name)),
										 NoLock, false);
	PickedPartition *p;
	bool		found;

	/*
	 * Anyone can call it: only for a role that may write into the table
	 * (sw_citus_stream_partitions then opens it, and refuses what is not a
	 * stream), not a way to lock or claim others' tables (review).
	 */
	if (pg_class_aclcheck(relid, GetUserId(), ACL_INSERT) != ACLCHECK_OK)
		aclcheck_error(ACLCHECK_NO_PRIV, OBJECT_TABLE, name);

	if (picked == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(Oid);
		ctl.entrysize = sizeof(PickedPartition);
		picked = hash_create("streamwm picked partitions", 16, &ctl, HASH_ELEM | HASH_BLOBS);
	}
	p = hash_search(picked, &relid, HASH_ENTER, &found);
	if (!found)
	{
		p->npartitions = sw_citus_stream_partitions(relid);
		p->partition = -1;
		p->keyed = sw_citus_has_partition_key(relid);
	}
	/*
	 * With a partition_key the partition is computed when the INSERT is
	 * parsed (citus_route.c), so this DEFAULT runs only for a statement
	 * that was not (a SQL function's BEGIN ATOMIC body is stored analyzed,
	 * without the hook): never a partition the key did not choose.
	 */
	if (p->keyed)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot compute the partition_key of distributed stream %s for this statement",
						name),
				 errdetail("The partition of a row of a distributed stream with a partition_key is "
						   "computed when its INSERT is parsed; this INSERT was analyzed without streamwm "
						   "(the body of a SQL function written with BEGIN ATOMIC is)."),
				 errhint("Give sw_partition, or write the function with a string body (AS $$ ... $$).")));
	if (p->partition >= 0 && p->claimed && !sw_partition_claimed(relid, p->partition))
		p->partition = -1;
	if (p->partition < 0)
		p->partition = sw_pick_free_partition(relid, p->npartitions,
											  (int) (hash_combine(murmurhash32((uint32) MyProcPid),
																  murmurhash32(relid)) %
													 (uint32) p->npartitions),
											  &p->claimed);
	PG_RETURN_INT32(p->partition);
}

/*
 * streamwm_internal._dist_fence(stream text, partitions int[]) RETURNS
 * timestamptz[]: run on a node that holds partitions of a distributed
 * stream, in a step's transaction (sw_citus_read_arrivals): {this node's
 * clock at the fence, then for each of 'partitions' the start of the
 * oldest open transaction writing it here, or NULL}.
 */
Datum
streamwm_dist_fence(PG_FUNCTION_ARGS)
{
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	ArrayType  *arr = PG_GETARG_ARRAYTYPE_P(1);
	Datum	   *parts;
	bool	   *partnulls;
	int			nparts;
	int			max = -1;
	Oid			relid;
	SwPartitionHold *holds;
	Datum	   *elems;
	bool	   *nulls;
	int			dims[1];
	int			lbs[1] = {1};

	relid = RangeVarGetRelid(makeRangeVarFromNameList(stringToQualifiedNameList(name)),
							 NoLock, false);
	/*
	 * Citus sends the step's statements over the connection that wrote into
	 * the stream in this transaction, if one did: its rows have not
	 * arrived, and the step would see them (process.c refuses the same on
	 * one node).
	 */
	if (sw_commit_order_wrote(relid))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot process stream %s in the transaction that wrote into it", name),
				 errdetail("Rows arrive when the transaction that wrote them commits."),
				 errhint("Commit first, then call streamwm.process().")));
	deconstruct_array(arr, INT4OID, 4, true, TYPALIGN_INT, &parts, &partnulls, &nparts);
	for (int i = 0; i < nparts; i++)
	{
		if (partnulls[i] || DatumGetInt32(parts[i]) < 0 || DatumGetInt32(parts[i]) >= 4096)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("partitions must be between 0 and 4095")));
		max = Max(max, DatumGetInt32(parts[i]));
	}
	holds = palloc((max + 2) * sizeof(SwPartitionHold));
	elems = palloc((nparts + 1) * sizeof(Datum));
	nulls = palloc0((nparts + 1) * sizeof(bool));
	elems[0] = TimestampTzGetDatum(sw_commit_fence_node(relid, max + 1, holds));
	for (int i = 0; i < nparts; i++)
	{
		SwPartitionHold *h = &holds[DatumGetInt32(parts[i])];

		elems[i + 1] = TimestampTzGetDatum(h->since);
		nulls[i + 1] = h->pid == 0;
	}
	dims[0] = nparts + 1;
	PG_RETURN_ARRAYTYPE_P(construct_md_array(elems, nulls, 1, dims, lbs, TIMESTAMPTZOID,
											 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
}

/*
 * streamwm_internal._dist_newest(log text, partitions int[]) RETURNS
 * bigint[]: run on a node that holds partitions of a distributed stream,
 * after its fence in a step's transaction (sw_citus_read_arrivals): for
 * each of 'partitions', the newest hi its commit log's shard on this node
 * has (NULL: none here), so that the step asks for entries and rows only
 * where something may have arrived.
 */
Datum
streamwm_dist_newest(PG_FUNCTION_ARGS)
{
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	ArrayType  *arr = PG_GETARG_ARRAYTYPE_P(1);
	Datum	   *parts;
	bool	   *partnulls;
	int			nparts;
	Oid			log;
	Datum	   *elems;
	bool	   *nulls;
	int			dims[1];
	int			lbs[1] = {1};
	int			nestlevel;
	Oid			types[2] = {REGCLASSOID, INT4ARRAYOID};
	Datum		values[2];

	log = RangeVarGetRelid(makeRangeVarFromNameList(stringToQualifiedNameList(name)),
						   NoLock, false);
	deconstruct_array(arr, INT4OID, 4, true, TYPALIGN_INT, &parts, &partnulls, &nparts);
	elems = palloc0(Max(nparts, 1) * sizeof(Datum));
	nulls = palloc(Max(nparts, 1) * sizeof(bool));
	for (int i = 0; i < nparts; i++)
		nulls[i] = true;
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	nestlevel = sw_enter_safe_path();
	values[0] = ObjectIdGetDatum(log);
	values[1] = PointerGetDatum(arr);
	sw_spi_exec("SELECT p.n, pg_catalog.get_shard_id_for_distribution_column($1, p.p)"
				" FROM pg_catalog.unnest($2) WITH ORDINALITY AS p(p, n)",
				2, types, values, NULL, SPI_OK_SELECT);
	{
		int			n = (int) SPI_processed;
		int64	   *shardids = palloc(Max(n, 1) * sizeof(int64));
		int		   *index = palloc(Max(n, 1) * sizeof(int));

		for (int i = 0; i < n; i++)
		{
			bool		isnull;

			index[i] = (int) DatumGetInt64(sw_spi_getdatum(i, 1, &isnull)) - 1;
			shardids[i] = DatumGetInt64(sw_spi_getdatum(i, 2, &isnull));
		}
		SPI_freetuptable(SPI_tuptable);
		for (int i = 0; i < n; i++)
		{
			Oid			shard = get_relname_relid(psprintf("%s_" INT64_FORMAT, get_rel_name(log),
														  shardids[i]),
												 get_rel_namespace(log));
			Oid			ptypes[1] = {INT4OID};
			Datum		pvalues[1];
			bool		isnull;
			Datum		d;

			if (!OidIsValid(shard) || index[i] < 0 || index[i] >= nparts)
				continue;		/* that partition is on another node */
			pvalues[0] = parts[index[i]];
			sw_spi_exec(psprintf("SELECT pg_catalog.max(hi) FROM ONLY %s WHERE partition = $1",
								 sw_relation_name(shard)),
						1, ptypes, pvalues, NULL, SPI_OK_SELECT);
			d = sw_spi_getdatum(0, 1, &isnull);
			if (!isnull)
			{
				elems[index[i]] = d;
				nulls[index[i]] = false;
			}
			SPI_freetuptable(SPI_tuptable);
		}
	}
	sw_leave_safe_path(nestlevel);
	SPI_finish();
	dims[0] = nparts;
	PG_RETURN_ARRAYTYPE_P(construct_md_array(elems, nulls, 1, dims, lbs, INT8OID,
											 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
}

/*
 * The shard of a distributed stream's commit log (named by 'logname', the
 * sw_ingest trigger's second argument) that is co-located with 'shard', a
 * shard of the stream on this node.  The commit writes the log shard with
 * the catalog's rights: the log must belong to the catalog (or to a
 * superuser), never to a role whose code attached to it would then run
 * with them, and be the stream's own (co-located with it).
 */
Oid
sw_citus_log_shard(Oid shard, const char *logname)
{
	Oid			stream = sw_citus_shard_owner(shard);
	Oid			log;
	char	   *relname = get_rel_name(shard);
	char	   *underscore = strrchr(relname, '_');
	Oid			types[2] = {INT8OID, OIDOID};
	Datum		values[2];
	Oid			logshard = InvalidOid;
	int			nestlevel;

	log = RangeVarGetRelid(makeRangeVarFromNameList(stringToQualifiedNameList(logname)),
						   NoLock, true);
	if (!OidIsValid(stream) || !OidIsValid(log) ||
		(sw_relation_owner(log) != sw_catalog_owner() && !superuser_arg(sw_relation_owner(log))))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("commit log %s of distributed stream %s is missing or not streamwm's",
						logname, OidIsValid(stream) ? sw_relation_name(stream) : relname)));
	values[0] = Int64GetDatum(strtoll(underscore + 1, NULL, 10));
	values[1] = ObjectIdGetDatum(log);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	nestlevel = sw_enter_safe_path();
	/* co-located: the log's shard with the same hash range */
	sw_spi_exec("SELECT l.shardid FROM pg_catalog.pg_dist_shard s, pg_catalog.pg_dist_shard l,"
				" pg_catalog.pg_dist_partition sp, pg_catalog.pg_dist_partition lp"
				" WHERE s.shardid = $1 AND l.logicalrelid = $2::pg_catalog.regclass"
				" AND sp.logicalrelid = s.logicalrelid AND lp.logicalrelid = l.logicalrelid"
				" AND sp.colocationid = lp.colocationid"
				" AND l.shardminvalue = s.shardminvalue AND l.shardmaxvalue = s.shardmaxvalue",
				2, types, values, NULL, SPI_OK_SELECT);
	if (SPI_processed == 1)
	{
		bool		isnull;
		int64		shardid = DatumGetInt64(sw_spi_getdatum(0, 1, &isnull));

		logshard = get_relname_relid(psprintf("%s_" INT64_FORMAT, get_rel_name(log), shardid),
									 get_rel_namespace(log));
	}
	sw_leave_safe_path(nestlevel);
	SPI_finish();
	if (!OidIsValid(logshard))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the shard of commit log %s beside %s is not on this node",
						sw_relation_name(log), relname),
				 errhint("The commit log must stay co-located with its stream.")));
	return logshard;
}

/* The stream's columns, quoted, "a, b, ...", with 'alias.' before each if given. */
static char *
column_list(Oid relid, const char *alias)
{
	Relation	rel = table_open(relid, AccessShareLock);
	TupleDesc	desc = RelationGetDescr(rel);
	StringInfoData buf;
	bool		first = true;

	initStringInfo(&buf);
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (att->attisdropped)
			continue;
		appendStringInfo(&buf, "%s%s%s%s", first ? "" : ", ", alias ? alias : "",
						 alias ? "." : "", quote_identifier(NameStr(att->attname)));
		first = false;
	}
	table_close(rel, AccessShareLock);
	return buf.data;
}

/*
 * What a step of a distributed stream has to read (process.c), brought to
 * the coordinator.  The caller acts as the catalog's owner.
 *
 *	1. On each node that holds partitions, the fence (_dist_fence, in a
 *	   query routed to the shard of the commit log of one of them, with the
 *	   node's partitions as argument): that node's clock, taken while no
 *	   commit into the stream is under way there, and the open writer of
 *	   each of its partitions (live[p]).  The step's clock is the earliest
 *	   of these: every commit stamped before it, on any node, is visible to
 *	   the step's next statements (READ COMMITTED: each takes a new
 *	   snapshot on each node).
 *	   The same query returns, per partition, the newest offset the node's
 *	   commit log has (_dist_newest): the partitions where something may
 *	   have arrived.
 *	2. Their commit log entries after the processed offset that arrived
 *	   before that clock, copied into streamwm.commit_log (the local copy
 *	   the step reads in arrival order, as for a local stream): one
 *	   statement over their shards of the log (short: the step prunes it).
 *	3. Per partition that got entries, their rows, copied into the stream's
 *	   rows table on the coordinator, which the step and the window
 *	   statements read as they read a local stream: a router query on the
 *	   primary key of the partition's shard.
 *
 * A step with nothing new makes one round trip per node.  Returns the
 * clock.
 */
TimestampTz
sw_citus_read_arrivals(Oid relid, Oid rowsrel, Oid logrel, Oid owner, bool on_nodes,
					   SwStreamClock *clock, SwPartitionHold *live)
{
	int			np = clock->npartitions;
	char	   *name = sw_relation_name(relid);
	char	   *logname = sw_relation_name(logrel);
	char	   *fence_sql;
	char	   *rows_sql;
	char	   *copied_sql;
	TimestampTz safe = DT_NOEND;
	int64	   *upto = palloc(np * sizeof(int64));
	int64	   *done = palloc(np * sizeof(int64));
	int32	   *node = palloc(np * sizeof(int32));
	bool	   *fenced = palloc0(np * sizeof(bool));
	int32	   *active = palloc(np * sizeof(int32));
	int			nactive = 0;
	SwRoleContext rcx;
	char	   *cols;

	for (int p = 0; p < np; p++)
	{
		live[p].pid = 0;
		live[p].since = DT_NOEND;
		done[p] = clock->parts[p].processed_offset;
		upto[p] = -1;
		node[p] = -1;
	}

	/* where each partition lives: Citus's metadata on the coordinator */
	{
		Oid			types[2] = {REGCLASSOID, INT4OID};
		Datum		values[2] = {ObjectIdGetDatum(relid), Int32GetDatum(np)};

		sw_spi_exec("SELECT p, pl.groupid FROM pg_catalog.generate_series(0, $2 - 1) p,"
					" pg_catalog.pg_dist_placement pl"
					" WHERE pl.shardid = pg_catalog.get_shard_id_for_distribution_column($1, p)",
					2, types, values, NULL, SPI_OK_SELECT);
		for (uint64 i = 0; i < SPI_processed; i++)
		{
			bool		isnull;
			int32		p = DatumGetInt32(sw_spi_getdatum(i, 1, &isnull));

			if (p >= 0 && p < np)
				node[p] = DatumGetInt32(sw_spi_getdatum(i, 2, &isnull));
		}
		SPI_freetuptable(SPI_tuptable);
	}

	/* 1. one fence per node, routed by the first of its partitions */
	fence_sql = psprintf("SELECT streamwm_internal._dist_fence($2, $3),"
						 " streamwm_internal._dist_newest($4, $3), pg_catalog.count(*)"
						 " FROM %s WHERE partition = $1", logname);
	for (int first = 0; first < np; first++)
	{
		Oid			types[4] = {INT4OID, TEXTOID, INT4ARRAYOID, TEXTOID};
		Datum		values[4];
		int32	   *members = palloc(np * sizeof(int32));
		int			nmembers = 0;
		Datum	   *elems;
		bool	   *nulls;
		int			n;
		bool		isnull;

		if (fenced[first])
			continue;
		for (int p = first; p < np; p++)
			if (!fenced[p] && node[p] == node[first])
			{
				members[nmembers++] = p;
				fenced[p] = true;
			}
		values[0] = Int32GetDatum(first);
		values[1] = CStringGetTextDatum(name);
		values[2] = sw_int4_array(members, nmembers);
		values[3] = CStringGetTextDatum(logname);
		/*
		 * Bounded: the statement waits on the node for the log shard's lock
		 * before the fence runs, where no timeout of this session reaches;
		 * the coordinator's cancels it there (Citus sends the cancel).
		 */
		sw_spi_exec_bounded(psprintf("fencing stream %s on the node of its partition %d",
									 name, first),
							fence_sql, 4, types, values, NULL, SPI_OK_SELECT, InvalidSnapshot);
		if (SPI_processed != 1 || SPI_tuptable->tupdesc->natts != 3 ||
			SPI_gettypeid(SPI_tuptable->tupdesc, 1) != TIMESTAMPTZARRAYOID ||
			SPI_gettypeid(SPI_tuptable->tupdesc, 2) != INT8ARRAYOID)
			elog(ERROR, "streamwm: the fence of partition %d of stream %s returned no clock",
				 first, name);
		deconstruct_array(DatumGetArrayTypeP(sw_spi_getdatum(0, 1, &isnull)), TIMESTAMPTZOID,
						  8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE, &elems, &nulls, &n);
		if (n != nmembers + 1 || nulls[0])
			elog(ERROR, "streamwm: the fence of partition %d of stream %s returned no clock",
				 first, name);
		if (DatumGetTimestampTz(elems[0]) < safe)
			safe = DatumGetTimestampTz(elems[0]);
		for (int i = 0; i < nmembers; i++)
			if (!nulls[i + 1])
			{
				live[members[i]].pid = -1;	/* a backend on another node */
				live[members[i]].since = DatumGetTimestampTz(elems[i + 1]);
			}
		/* where something may have arrived: the newest entry is past the processed offset */
		deconstruct_array(DatumGetArrayTypeP(sw_spi_getdatum(0, 2, &isnull)), INT8OID,
						  8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE, &elems, &nulls, &n);
		if (n != nmembers)
			elog(ERROR, "streamwm: the fence of partition %d of stream %s returned no offsets",
				 first, name);
		for (int i = 0; i < nmembers; i++)
			if (!nulls[i] && DatumGetInt64(elems[i]) > done[members[i]])
				active[nactive++] = members[i];
		SPI_freetuptable(SPI_tuptable);
		pfree(members);
	}

	/*
	 * 2. the entries that arrived before the clock, of the partitions where
	 * something did, in one statement (Citus reads only their shards)
	 */
	if (nactive > 0)
	{
		Oid			types[4] = {INT8ARRAYOID, OIDOID, TIMESTAMPTZOID, INT4ARRAYOID};
		Datum		values[4] = {sw_int8_array(done, np), ObjectIdGetDatum(relid),
			TimestampTzGetDatum(safe), sw_int4_array(active, nactive)};

		sw_spi_exec_bounded(psprintf("reading the commit log of stream %s", name),
							psprintf("INSERT INTO streamwm.commit_log"
									 " (stream, partition, lo, hi, arrival, held_from)"
									 " SELECT $2::pg_catalog.regclass, l.partition, l.lo, l.hi,"
									 " l.arrival, l.held_from FROM %s l"
									 " WHERE l.partition = ANY ($4)"
									 " AND l.hi > ($1::pg_catalog.int8[])[l.partition + 1]"
									 " AND l.arrival < $3 ON CONFLICT DO NOTHING", logname),
							4, types, values, NULL, SPI_OK_INSERT, InvalidSnapshot);
	}
	CommandCounterIncrement();
	{
		Oid			types[1] = {OIDOID};
		Datum		values[1] = {ObjectIdGetDatum(relid)};

		sw_spi_exec("SELECT partition, pg_catalog.max(hi) FROM streamwm.commit_log"
					" WHERE stream = $1 GROUP BY partition",
					1, types, values, NULL, SPI_OK_SELECT);
		for (uint64 i = 0; i < SPI_processed; i++)
		{
			bool		isnull;
			int32		p = DatumGetInt32(sw_spi_getdatum(i, 1, &isnull));

			if (p >= 0 && p < np)
				upto[p] = DatumGetInt64(sw_spi_getdatum(i, 2, &isnull));
		}
		SPI_freetuptable(SPI_tuptable);
	}

	/*
	 * 3. the rows, as the stream's owner (its policies run in the read:
	 * bounded), after those the copy holds already: a step copies every row
	 * up to its entries' end but may read fewer (its batch limit), and the
	 * next copies on from there.  The copy of a partition is complete up to
	 * its newest row (a later commit there gets higher offsets; retention
	 * removes rows from the copy and the shards alike), so no row copied
	 * can be there already: a plain INSERT (ON CONFLICT DO NOTHING took a
	 * third longer: 922 against 613 ms for 250,000 Nexmark bids).  A
	 * partition of which the copy holds nothing is copied from its first
	 * row: after steps that folded on the nodes (below) that is every row
	 * retention kept; otherwise there is none up to the processed offset
	 * (retention removed them from both).
	 *
	 * When every query of the stream folds on the nodes (on_nodes), no
	 * copy is made: the step reads the rows' event times from the shards,
	 * and a copy left from earlier steps is emptied, so that a later step
	 * that copies again copies every retained row.
	 */
	if (on_nodes)
	{
		Relation	rows = table_open(rowsrel, AccessShareLock);
		bool		empty = RelationGetNumberOfBlocks(rows) == 0;

		table_close(rows, NoLock);
		sw_enter_role(owner, SW_SAFE_SEARCH_PATH, &rcx);
		if (!empty)
			sw_spi_exec(psprintf("TRUNCATE %s", sw_relation_name(rowsrel)), 0, NULL, NULL,
						NULL, SPI_OK_UTILITY);
	}
	else
	{
		cols = column_list(relid, NULL);
		rows_sql = psprintf("INSERT INTO %s (%s) SELECT %s FROM %s t"
							" WHERE t.sw_partition = $1 AND t.sw_offset > $2 AND t.sw_offset <= $3",
							sw_relation_name(rowsrel), cols, column_list(relid, "t"), name);
		copied_sql = psprintf("SELECT pg_catalog.max(r.sw_offset) FROM ONLY %s r"
							  " WHERE r.sw_partition = $1", sw_relation_name(rowsrel));
		sw_enter_role(owner, SW_SAFE_SEARCH_PATH, &rcx);
		for (int p = 0; p < np; p++)
		{
			Oid			types[3] = {INT4OID, INT8OID, INT8OID};
			Datum		values[3] = {Int32GetDatum(p), Int64GetDatum(done[p]),
			Int64GetDatum(upto[p])};
			bool		isnull;
			Datum		copied;

			if (upto[p] <= done[p])
				continue;
			sw_spi_exec(copied_sql, 1, types, values, NULL, SPI_OK_SELECT);
			copied = sw_spi_getdatum(0, 1, &isnull);
			if (isnull)
				values[1] = Int64GetDatum(PG_INT64_MIN);
			else if (DatumGetInt64(copied) > done[p])
				values[1] = copied;
			SPI_freetuptable(SPI_tuptable);
			if (DatumGetInt64(values[1]) >= upto[p])
				continue;
			sw_spi_exec_bounded(psprintf("reading stream %s", name), rows_sql, 3, types, values,
								NULL, SPI_OK_INSERT, InvalidSnapshot);
		}
	}
	sw_leave_role(&rcx);
	pfree(upto);
	pfree(done);
	pfree(node);
	pfree(fenced);
	pfree(active);
	return safe;
}

/*
 * After a step of a distributed stream (process.c): its commit log loses
 * the entries read, all but each partition's newest (the next commit there
 * compares with it), in one statement on the nodes whose partitions the
 * step read.  'before' holds the processed offsets the step started from.
 *
 * As the stream's owner, granted DELETE on the log when the stream was
 * distributed, after retention (which deletes on the shards as that role):
 * Citus refuses, in one transaction, a second user on placements co-located
 * with ones a first user modified, so every write a step makes on the nodes
 * is the stream owner's, and comes after the queries' folds on the nodes,
 * which read as each query's owner (citus_fold.c).  Pruning as the
 * catalog's owner, before the queries, failed every step of a stream of an
 * ordinary role once retention removed rows.  (A log made before that grant
 * is pruned as the catalog's owner.)
 */
void
sw_citus_prune_log(Oid logrel, Oid owner, const SwStreamClock *clock, const int64 *before)
{
	SwRoleContext rcx;
	bool		as_owner = pg_class_aclcheck(logrel, owner, ACL_DELETE) == ACLCHECK_OK;

	int			np = clock->npartitions;
	int32	   *moved = palloc(np * sizeof(int32));
	int64	   *upto = palloc(np * sizeof(int64));
	int			n = 0;
	Oid			types[2] = {INT4ARRAYOID, INT8ARRAYOID};
	Datum		values[2];

	for (int p = 0; p < np; p++)
	{
		upto[p] = clock->parts[p].processed_offset;
		if (upto[p] > before[p])
			moved[n++] = p;
	}
	if (n == 0)
		return;
	values[0] = sw_int4_array(moved, n);
	values[1] = sw_int8_array(upto, np);
	if (as_owner)
		sw_enter_role(owner, SW_SAFE_SEARCH_PATH, &rcx);
	sw_spi_exec_bounded(psprintf("pruning commit log %s", sw_relation_name(logrel)),
						psprintf("DELETE FROM %s WHERE partition = ANY ($1)"
								 " AND hi < ($2::pg_catalog.int8[])[partition + 1]",
								 sw_relation_name(logrel)),
						2, types, values, NULL, SPI_OK_DELETE, InvalidSnapshot);
	if (as_owner)
		sw_leave_role(&rcx);
}

/*
 * Retention of a distributed stream (process.c): the rows it removed from
 * the coordinator's copy (tuples of (sw_partition, sw_offset)) are deleted
 * from the shards, partition by partition (each a router DELETE), as the
 * current role (the stream's owner).
 */
void
sw_citus_forget_rows(Oid relid, SPITupleTable *tuptable, uint64 n)
{
	int			np = sw_stream_partitions(relid);
	int		   *count = palloc0(np * sizeof(int));
	int64	  **offsets = palloc0(np * sizeof(int64 *));
	char	   *name = sw_relation_name(relid);
	char	   *sql = psprintf("DELETE FROM %s t WHERE t.sw_partition = $1"
							   " AND t.sw_offset = ANY ($2)", name);

	for (uint64 i = 0; i < n; i++)
	{
		bool		isnull;
		int32		p = DatumGetInt32(SPI_getbinval(tuptable->vals[i], tuptable->tupdesc, 1, &isnull));

		if (p < 0 || p >= np)
			elog(ERROR, "streamwm: a row of stream %s in partition %d", name, p);
		if (offsets[p] == NULL)
			offsets[p] = palloc_extended(n * sizeof(int64), MCXT_ALLOC_HUGE);
		offsets[p][count[p]++] =
			DatumGetInt64(SPI_getbinval(tuptable->vals[i], tuptable->tupdesc, 2, &isnull));
	}
	for (int p = 0; p < np; p++)
	{
		Oid			types[2] = {INT4OID, INT8ARRAYOID};
		Datum		values[2];

		if (count[p] == 0)
			continue;
		values[0] = Int32GetDatum(p);
		values[1] = sw_int8_array(offsets[p], count[p]);
		sw_spi_exec_bounded(psprintf("retention of stream %s", name), sql, 2, types, values,
							NULL, SPI_OK_DELETE, InvalidSnapshot);
	}
}

/* Called from _PG_init. */
void
sw_citus_init(void)
{
	prev_post_parse_analyze_hook = post_parse_analyze_hook;
	post_parse_analyze_hook = citus_post_parse_analyze;
	prev_executor_start_hook = ExecutorStart_hook;
	ExecutorStart_hook = citus_executor_start;
}

/*
 * Retention of a distributed stream whose queries fold on the nodes
 * (process.c), on the shards themselves, as the current role (the stream's
 * owner): per partition (a router DELETE each), its accepted rows up to
 * upto[p] with an event time before horizon (expire_rows), or (horizon
 * DT_NOBEGIN) the late rows that arrived before cutoff (expire_late_rows).
 * The late rows are the coordinator's late log's.  Returns the rows
 * removed.
 */
uint64
sw_citus_expire_on_nodes(Oid relid, const int64 *upto, TimestampTz horizon, TimestampTz cutoff)
{
	int			np = sw_stream_partitions(relid);
	char	   *name = sw_relation_name(relid);
	bool		late_only = TIMESTAMP_IS_NOBEGIN(horizon);
	uint64		removed = 0;
	char	   *sql;

	if (late_only)
		sql = psprintf("DELETE FROM %s t WHERE t.sw_partition = $1"
					   " AND t.sw_offset = ANY ($4)", name);
	else
		sql = psprintf("DELETE FROM %s t WHERE t.sw_partition = $1 AND t.sw_offset <= $2"
					   " AND (t.sw_event_time < $3) IS TRUE AND t.sw_offset <> ALL ($4)", name);
	for (int p = 0; p < np; p++)
	{
		Oid			ltypes[5] = {OIDOID, INT4OID, INT8OID, BOOLOID, TIMESTAMPTZOID};
		Datum		lvalues[5];
		Oid			types[4] = {INT4OID, INT8OID, TIMESTAMPTZOID, INT8ARRAYOID};
		Datum		values[4];
		SwRoleContext cx;
		bool		isnull;
		Datum		late;

		if (!late_only && upto[p] == PG_INT64_MIN)
			continue;
		/* this partition's late rows: kept, or (late_only) removed */
		lvalues[0] = ObjectIdGetDatum(relid);
		lvalues[1] = Int32GetDatum(p);
		lvalues[2] = Int64GetDatum(late_only ? PG_INT64_MAX : upto[p]);
		lvalues[3] = BoolGetDatum(late_only);
		lvalues[4] = TimestampTzGetDatum(cutoff);
		sw_enter_catalog(&cx);
		sw_spi_exec("SELECT coalesce(pg_catalog.array_agg(l.sw_offset), '{}')"
					" FROM streamwm.late_event_log l WHERE l.stream = $1 AND l.partition = $2"
					" AND l.sw_offset <= $3 AND (NOT $4 OR l.arrival < $5)",
					5, ltypes, lvalues, NULL, SPI_OK_SELECT);
		late = PointerGetDatum(DatumGetArrayTypePCopy(sw_spi_getdatum(0, 1, &isnull)));
		SPI_freetuptable(SPI_tuptable);
		sw_leave_role(&cx);
		if (late_only && ArrayGetNItems(ARR_NDIM(DatumGetArrayTypeP(late)),
										ARR_DIMS(DatumGetArrayTypeP(late))) == 0)
			continue;
		values[0] = Int32GetDatum(p);
		values[1] = Int64GetDatum(late_only ? PG_INT64_MAX : upto[p]);
		values[2] = TimestampTzGetDatum(horizon);
		values[3] = late;
		sw_retention_delete(relid, name, sql, 4, types, values);
		removed += SPI_processed;
	}
	return removed;
}

/*
 * Make the coordinator's copy of a distributed stream hold every row up to
 * the processed offsets, for streamwm.recompute() (alter.c), which reads
 * the copy: after steps that read the shards (every query folded on the
 * nodes) it is empty, and the next such step empties it again.  A
 * partition of which the copy holds rows is complete up to them (above).
 * As the stream's owner.
 */
void
sw_citus_fill_copy(Oid relid, const int64 *processed, int np)
{
	Oid			rowsrel;
	Oid			owner = sw_relation_owner(relid);
	char	   *name = sw_relation_name(relid);
	char	   *copied_sql;
	char	   *rows_sql;
	SwRoleContext rcx;

	if (!sw_stream_distributed(relid, &rowsrel, NULL))
		return;
	sw_citus_check_owner(relid);
	copied_sql = psprintf("SELECT 1 FROM ONLY %s r WHERE r.sw_partition = $1 LIMIT 1",
						  sw_relation_name(rowsrel));
	rows_sql = psprintf("INSERT INTO %s (%s) SELECT %s FROM %s t"
						" WHERE t.sw_partition = $1 AND t.sw_offset <= $2",
						sw_relation_name(rowsrel), column_list(relid, NULL),
						column_list(relid, "t"), name);
	sw_enter_role(owner, SW_SAFE_SEARCH_PATH, &rcx);
	for (int p = 0; p < np; p++)
	{
		Oid			types[2] = {INT4OID, INT8OID};
		Datum		values[2] = {Int32GetDatum(p), Int64GetDatum(processed[p])};

		sw_spi_exec(copied_sql, 1, types, values, NULL, SPI_OK_SELECT);
		if (SPI_processed > 0)
			continue;
		sw_spi_exec_bounded(psprintf("reading stream %s", name), rows_sql, 2, types, values,
							NULL, SPI_OK_INSERT, InvalidSnapshot);
	}
	sw_leave_role(&rcx);
}

/*
 * Is a distributed stream still owned by the role that created it?  Its
 * shards on the worker nodes are that role's tables, which it can change
 * there unseen by the coordinator (a view in a shard's place, found by an
 * attacker's review); after ALTER TABLE ... OWNER TO or REASSIGN OWNED, a
 * read of them as the new owner (a superuser, say) would run the previous
 * owner's code with the new owner's rights.  So streamwm reads the shards
 * as the stream's owner only while it is the creator.
 */
bool
sw_citus_owned_by_creator(Oid relid)
{
	return sw_relation_owner(relid) == sw_stream_creator(relid);
}

/* The same, as an error: before a step, or a recompute, reads the shards. */
void
sw_citus_check_owner(Oid relid)
{
	Oid			creator = sw_stream_creator(relid);

	if (sw_citus_owned_by_creator(relid))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("distributed stream %s is owned by %s, not by %s, who created it",
					sw_relation_name(relid),
					GetUserNameFromId(sw_relation_owner(relid), true),
					OidIsValid(creator) ? GetUserNameFromId(creator, true) : "?"),
			 errdetail("Its shards on the worker nodes are tables of the role that created it, "
					   "which that role can change there; streamwm does not read them as another role."),
			 errhint("Give the stream back to its creator (ALTER TABLE ... OWNER TO), or move its rows "
					 "into a new stream.")));
}
