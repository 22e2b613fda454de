/*-------------------------------------------------------------------------
 * citus.c
 *	  Owns streamwm's awareness of Citus (DESIGN.md, "Citus"): which tables
 *	  Citus manages, and the refusal, with a clear error where the user
 *	  acts, of everything streamwm does not support on them.
 *
 * A stream is a local table: its partition and offset are assigned by the
 * sw_ingest trigger, and a step reads each partition in offset order, joined
 * with local catalog tables (the late log, the commit log).  On a Citus
 * table the coordinator routes a row to a shard before any trigger runs,
 * the shard's trigger is not a stream's, and a step's statements cannot be
 * pushed down.  So, on a Citus coordinator (or worker):
 *
 *	 - create_distributed_table(), create_distributed_table_concurrently(),
 *	   create_reference_table() and citus_add_local_table_to_metadata() of a
 *	   stream or of a query's result table are refused when the call names
 *	   the table by a constant (the post-parse-analyze hook below: Citus runs
 *	   them as functions, not as utility commands, so no DDL hook sees them);
 *	 - create_query (and the other create functions, alter_query) refuse a
 *	   stream or a result table that Citus manages, and a query that reads a
 *	   distributed table (streamwm_query_stream, register_query);
 *	 - should a stream have become a Citus table anyway (a call with a
 *	   computed argument), INSERT and COPY into it on the coordinator, its
 *	   steps, and the sw_ingest trigger on its shards all refuse with the
 *	   same cause named.
 *
 * Local streams on a Citus coordinator work exactly as without Citus.  All
 * lookups go to Citus's metadata tables by name in pg_catalog
 * (pg_dist_partition, pg_dist_shard), so this file needs neither Citus's
 * headers nor Citus installed: without them every test answers "not a
 * Citus table" after one syscache lookup.
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "nodes/nodeFuncs.h"
#include "parser/analyze.h"
#include "parser/parsetree.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "catalog.h"
#include "citus.h"

static post_parse_analyze_hook_type prev_post_parse_analyze_hook = NULL;

/* Citus's functions that turn a local table into a Citus table */
static const char *const distributing_functions[] = {
	"create_distributed_table",
	"create_distributed_table_concurrently",
	"create_reference_table",
	"citus_add_local_table_to_metadata",
	NULL
};

#define SW_CITUS_HINT \
	"Keep streams and result tables local on the coordinator: streamwm works there as without Citus, " \
	"and a query may join them with reference tables. Distributed streams are not supported yet."

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
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("stream %s is a Citus %s", sw_relation_name(stream), kind),
			 errdetail("streamwm assigns a row's partition and offset in a trigger and reads each "
					   "partition in offset order on this node; Citus routes a row to a shard "
					   "before any trigger runs, and a step's statements cannot run on shards."),
			 errhint("Drop it with streamwm.drop_stream() and create it again as a local stream (undistribute_table() would make a new table, no longer a stream). " SW_CITUS_HINT)));
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

/* The refusal of a result table Citus manages (create_query). */
void
sw_citus_refuse_result_table(Oid result)
{
	const char *kind = sw_citus_table_kind(result);

	if (kind == NULL)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("result table %s is a Citus %s", sw_relation_name(result), kind),
			 errdetail("A step upserts a query's results in the transaction that records its "
					   "position, with statements that read the result table together with "
					   "local tables."),
			 errhint("Give create_query a local result table. " SW_CITUS_HINT)));
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

		if (fname != NULL && f->args != NIL &&
			get_func_namespace(f->funcid) == PG_CATALOG_NAMESPACE)
		{
			for (int i = 0; distributing_functions[i] != NULL; i++)
			{
				bool		is_stream;
				char	   *query;
				Oid			relid;

				if (strcmp(fname, distributing_functions[i]) != 0)
					continue;
				arg = (Node *) linitial(f->args);
				while (IsA(arg, RelabelType))
					arg = (Node *) ((RelabelType *) arg)->arg;
				if (!IsA(arg, Const) || ((Const *) arg)->constisnull ||
					((Const *) arg)->consttype != REGCLASSOID)
					break;
				relid = DatumGetObjectId(((Const *) arg)->constvalue);
				if (!streamwm_table_role(relid, &is_stream, &query))
					break;
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
			sw_citus_refuse_stream(relid);
	}
}

/* Before a utility statement (streamwm.c): COPY FROM into a stream that Citus manages. */
void
sw_citus_utility(PlannedStmt *pstmt)
{
	Node	   *parsetree = pstmt->utilityStmt;

	if (IsA(parsetree, CopyStmt) && ((CopyStmt *) parsetree)->is_from &&
		((CopyStmt *) parsetree)->relation != NULL &&
		OidIsValid(citus_catalog("pg_dist_partition")))
	{
		Oid			relid = RangeVarGetRelid(((CopyStmt *) parsetree)->relation, NoLock, true);
		bool		is_stream;
		char	   *qname;

		if (sw_citus_table_kind(relid) != NULL &&
			streamwm_table_role(relid, &is_stream, &qname) && is_stream)
			sw_citus_refuse_stream(relid);
	}
}

/* Called from _PG_init. */
void
sw_citus_init(void)
{
	prev_post_parse_analyze_hook = post_parse_analyze_hook;
	post_parse_analyze_hook = citus_post_parse_analyze;
}
