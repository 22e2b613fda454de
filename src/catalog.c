/*-------------------------------------------------------------------------
 * catalog.c
 *	  Owns access to streamwm's catalog tables (streamwm.stream_def,
 *	  partition_state, query_def, late_event_log, retention_mark; defined in
 *	  sql/streamwm--0.3.sql) and the SPI helpers the other files share.
 *
 *	  Every statement that reads or writes only the catalog is here, in a
 *	  function named for what it does (sw_catalog_*, and the API's
 *	  _register/_unregister functions); the other files call them.  A
 *	  function that switches to the catalog's owner (sw_enter_catalog) says
 *	  so; the others run as their caller set up (a step, the worker).
 *	  Statements that read a stream table, a result or a transition table
 *	  and consult the catalog in passing (the window statements' late-row
 *	  filter, retention's and purge's counting of stream rows) are part of
 *	  the data path and stay with it (query.c, pane.c, process.c, purge.c).
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "access/xact.h"
#include "common/int.h"
#include "catalog/dependency.h"
#include "catalog/namespace.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "nodes/params.h"
#include "nodes/parsenodes.h"
#include "parser/parse_relation.h"
#include "parser/parser.h"
#include "storage/proc.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/reltrigger.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "api.h"
#include "catalog.h"
#include "citus.h"
#include "query.h"
#include "result.h"
#include "version.h"
#include "watermark.h"
#include "window.h"

PG_FUNCTION_INFO_V1(streamwm_register_stream);
PG_FUNCTION_INFO_V1(streamwm_unregister_stream);
PG_FUNCTION_INFO_V1(streamwm_set_allowed_lateness);
PG_FUNCTION_INFO_V1(streamwm_register_query);
PG_FUNCTION_INFO_V1(streamwm_unregister_query);
PG_FUNCTION_INFO_V1(streamwm_pause_query);
PG_FUNCTION_INFO_V1(streamwm_set_result_retention);
PG_FUNCTION_INFO_V1(streamwm_resume_query);
PG_FUNCTION_INFO_V1(streamwm_check_create_table);

/*
 * Run one SPI statement and check its result code; errors are internal
 * (the statements are ours), user errors come from PostgreSQL itself.
 */
void
sw_spi_exec(const char *sql, int nargs, Oid *types, Datum *values,
			const char *nulls, int expected)
{
	int			rc = SPI_execute_with_args(sql, nargs, types, values, nulls,
										   false, 0);

	if (rc != expected)
		elog(ERROR, "streamwm: \"%s\" failed: %s", sql, SPI_result_code_string(rc));
}

/* A column of the last SPI result (1-based column, 0-based row). */
Datum
sw_spi_getdatum(int row, int col, bool *isnull)
{
	return SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col, isnull);
}

/*
 * The number of partitions of a stream; a clear error if relid is not one.
 * Connects to SPI on its own, so it can be called from anywhere.  Reads the
 * catalog as its owner: whoever may insert into a stream may learn this.
 */
int
sw_stream_partitions(Oid relid)
{
	int			n = 0;
	bool		found;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	found = sw_lookup_stream(relid, false, NULL, &n);
	SPI_finish();
	if (!found)
		sw_not_a_stream(relid);
	return n;
}

/*
 * A distributed stream's relations (Citus, src/citus.c): the coordinator's
 * copy of the rows steps read (*rows) and its commit log (*log).  False,
 * with both InvalidOid, for a local stream or a relation that is no
 * stream.  Read as the catalog's owner, in an SPI connection of its own.
 */
static struct
{
	LocalTransactionId lxid;	/* valid in this transaction only */
	Oid			relid;
	Oid			rows;
	Oid			log;
	Oid			creator;		/* stream_def.owner */
}			distributed_cache;

/* Forget what sw_stream_distributed() read (a stream was just distributed). */
void
sw_stream_distributed_changed(void)
{
	distributed_cache.lxid = InvalidLocalTransactionId;
}

bool
sw_stream_distributed(Oid relid, Oid *rows, Oid *log)
{
	SwRoleContext cx;
	Oid			types[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(relid)};
	bool		isnull1 = true;
	bool		isnull2 = true;
	Oid			r = InvalidOid;
	Oid			l = InvalidOid;
	Oid			c = InvalidOid;

	/* the SQL builders and a step ask often: once per transaction and stream */
	if (distributed_cache.lxid == MyProc->lxid && distributed_cache.relid == relid &&
		MyProc->lxid != InvalidLocalTransactionId)
	{
		if (rows)
			*rows = distributed_cache.rows;
		if (log)
			*log = distributed_cache.log;
		return OidIsValid(distributed_cache.rows);
	}
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	sw_enter_catalog(&cx);
	sw_spi_exec("SELECT rows_table, log_table, owner FROM streamwm.stream_def WHERE stream = $1",
				1, types, values, NULL, SPI_OK_SELECT);
	if (SPI_processed == 1)
	{
		bool		isnull3;

		r = DatumGetObjectId(sw_spi_getdatum(0, 1, &isnull1));
		l = DatumGetObjectId(sw_spi_getdatum(0, 2, &isnull2));
		c = DatumGetObjectId(sw_spi_getdatum(0, 3, &isnull3));
	}
	sw_leave_role(&cx);
	SPI_finish();
	if (isnull1 || isnull2)
		r = l = InvalidOid;
	distributed_cache.lxid = MyProc->lxid;
	distributed_cache.relid = relid;
	distributed_cache.rows = r;
	distributed_cache.log = l;
	distributed_cache.creator = c;
	if (rows)
		*rows = r;
	if (log)
		*log = l;
	return OidIsValid(r);
}

/*
 * The role that created a distributed stream (stream_def.owner, never
 * changed), or InvalidOid for a stream that is not distributed.
 */
Oid
sw_stream_creator(Oid relid)
{
	if (!sw_stream_distributed(relid, NULL, NULL))
		return InvalidOid;
	return distributed_cache.creator;
}

/*
 * A distributed stream in schema nspid (the one of lowest OID), or
 * InvalidOid: the guard refuses to rename its schema (src/guard.c).
 */
Oid
sw_distributed_stream_in_schema(Oid nspid)
{
	SwRoleContext cx;
	Oid			types[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(nspid)};
	Oid			stream = InvalidOid;
	bool		isnull;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	sw_enter_catalog(&cx);
	sw_spi_exec("SELECT d.stream FROM streamwm.stream_def d"
				" JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) d.stream"
				" WHERE d.rows_table IS NOT NULL AND c.relnamespace OPERATOR(pg_catalog.=) $1"
				" ORDER BY d.stream LIMIT 1",
				1, types, values, NULL, SPI_OK_SELECT);
	if (SPI_processed == 1)
		stream = DatumGetObjectId(sw_spi_getdatum(0, 1, &isnull));
	sw_leave_role(&cx);
	SPI_finish();
	return stream;
}

/*
 * The relation a stream's rows are read from by the window statements,
 * retention and the views: the stream itself, or for a distributed stream
 * the coordinator's copy of the rows steps read (src/citus.c).
 */
Oid
sw_stream_rows(Oid relid)
{
	Oid			rows;

	if (sw_stream_distributed(relid, &rows, NULL))
		return rows;
	return relid;
}

/* sw_stream_rows() by name: schema-qualified and quoted. */
char *
sw_stream_rows_name(Oid relid)
{
	return sw_relation_name(sw_stream_rows(relid));
}

/* The schema-qualified, quoted name of a relation. */
char *
sw_relation_name(Oid relid)
{
	char	   *rel = get_rel_name(relid);

	if (rel == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid)));
	return quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)), rel);
}

Datum
sw_int8_array(const int64 *values, int n)
{
	Datum	   *d = palloc(sizeof(Datum) * Max(n, 1));

	for (int i = 0; i < n; i++)
		d[i] = Int64GetDatum(values[i]);
	return PointerGetDatum(construct_array(d, n, INT8OID, 8, FLOAT8PASSBYVAL,
										   TYPALIGN_DOUBLE));
}

Datum
sw_int4_array(const int32 *values, int n)
{
	Datum	   *d = palloc(sizeof(Datum) * Max(n, 1));

	for (int i = 0; i < n; i++)
		d[i] = Int32GetDatum(values[i]);
	return PointerGetDatum(construct_array(d, n, INT4OID, 4, true, TYPALIGN_INT));
}

Datum
sw_timestamptz_array(const TimestampTz *values, int n)
{
	Datum	   *d = palloc(sizeof(Datum) * Max(n, 1));

	for (int i = 0; i < n; i++)
		d[i] = TimestampTzGetDatum(values[i]);
	return PointerGetDatum(construct_array(d, n, TIMESTAMPTZOID, 8,
										   FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
}

/*
 * Run what follows as 'role', with SECURITY_RESTRICTED_OPERATION and the
 * given search_path, as matview.c does for REFRESH: the user's SQL (a
 * query, triggers and policies on a stream or result table) never runs with
 * the rights of whoever runs the step, a superuser worker included.  Undone
 * by sw_leave_role(), or by the abort of the (sub)transaction.
 *
 * Without JIT: the statements run so are planned once and run at every
 * step, and PostgreSQL compiles a plan's JIT code anew at every execution
 * (nothing caches it); a count step whose estimated cost passed
 * jit_above_cost spent 84 ms of its 110 ms compiling (bench/kinds.sh).
 */
void
sw_enter_role(Oid role, const char *search_path, SwRoleContext *cx)
{
	GetUserIdAndSecContext(&cx->save_userid, &cx->save_sec_context);
	SetUserIdAndSecContext(role, cx->save_sec_context | SECURITY_RESTRICTED_OPERATION);
	cx->save_nestlevel = NewGUCNestLevel();
	(void) set_config_option("search_path", search_path,
							 PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	(void) set_config_option("jit", "off",
							 PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
}

void
sw_leave_role(SwRoleContext *cx)
{
	AtEOXact_GUC(false, cx->save_nestlevel);
	SetUserIdAndSecContext(cx->save_userid, cx->save_sec_context);
}

/*
 * Call fn(arg) as 'role', with search_path = pg_catalog, pg_temp, in a
 * subtransaction, allocating in cxt, and return its result.  An error other
 * than a cancel or a shutdown (those go on) is rolled back and returned in
 * *error, with NULL: used to analyze a stored query again, which may no
 * longer analyze (an object it used is gone).
 */
void *
sw_try_as_role(Oid role, void *(*fn) (void *arg), void *arg, MemoryContext cxt,
			   ErrorData **error)
{
	MemoryContext old = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;
	void	   *volatile result = NULL;

	*error = NULL;
	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		SwRoleContext cx;

		sw_enter_role(role, SW_SAFE_SEARCH_PATH, &cx);
		result = fn(arg);
		sw_leave_role(&cx);
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(old);
		CurrentResourceOwner = oldowner;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(old);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(old);
		CurrentResourceOwner = oldowner;
		if (edata->sqlerrcode == ERRCODE_QUERY_CANCELED ||
			edata->sqlerrcode == ERRCODE_ADMIN_SHUTDOWN)
			ReThrowError(edata);
		*error = edata;
		result = NULL;
	}
	PG_END_TRY();
	return result;
}

/* The owner of a relation. */
Oid
sw_relation_owner(Oid relid)
{
	HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	Oid			owner;

	if (!HeapTupleIsValid(tup))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid)));
	owner = ((Form_pg_class) GETSTRUCT(tup))->relowner;
	ReleaseSysCache(tup);
	return owner;
}

/*
 * The role that owns streamwm's catalog tables: the one that ran CREATE
 * EXTENSION.  Only it may write them; the API and the processing step act
 * as it (sw_enter_catalog) once they have checked the caller's rights.
 */
Oid
sw_catalog_owner(void)
{
	Oid			nsp = get_namespace_oid("streamwm", false);
	Oid			relid = get_relname_relid("stream_def", nsp);

	if (!OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("streamwm's catalog is missing"),
				 errhint("Run CREATE EXTENSION streamwm.")));
	return sw_relation_owner(relid);
}

/*
 * Act as the catalog's owner, with search_path = pg_catalog, pg_temp, until
 * sw_leave_role().  Only streamwm's own, fully written statements run in
 * between; user SQL inside is run after another sw_enter_role() as its
 * owner.
 */
void
sw_enter_catalog(SwRoleContext *cx)
{
	sw_enter_role(sw_catalog_owner(), SW_SAFE_SEARCH_PATH, cx);
}

/*
 * Keep the caller's identity but resolve names only in pg_catalog (and
 * pg_temp for relations), until sw_leave_safe_path().
 */
int
sw_enter_safe_path(void)
{
	int			nestlevel = NewGUCNestLevel();

	(void) set_config_option("search_path", SW_SAFE_SEARCH_PATH,
							 PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	return nestlevel;
}

void
sw_leave_safe_path(int nestlevel)
{
	AtEOXact_GUC(true, nestlevel);
}

/*
 * May the current user manage (process, drop, attach queries to) what
 * 'owner' owns?  Members of the owner (with its privileges) may, and
 * superusers.
 */
bool
sw_may_manage(Oid owner)
{
	return has_privs_of_role(GetUserId(), owner);
}

/*
 * The error of a current user who may not insert into relid at all (on
 * the table or on any of its columns): what ingest() and the partition of
 * a distributed stream's row check before they open the table, since both
 * may run the stream's code as the caller.
 */
void
sw_check_may_insert(Oid relid)
{
	if (pg_class_aclcheck(relid, GetUserId(), ACL_INSERT) != ACLCHECK_OK &&
		pg_attribute_aclcheck_all(relid, GetUserId(), ACL_INSERT, ACLMASK_ANY) != ACLCHECK_OK)
		aclcheck_error(ACLCHECK_NO_PRIV, OBJECT_TABLE, get_rel_name(relid));
}

/*
 * May the current user see a stream in the monitoring views?  Members of
 * its owner, roles that may SELECT from it, and pg_read_all_stats.
 */
bool
sw_may_see_stream(Oid relid, Oid owner)
{
	Oid			user = GetUserId();

	return has_privs_of_role(user, owner) ||
		has_privs_of_role(user, ROLE_PG_READ_ALL_STATS) ||
		pg_class_aclcheck(relid, user, ACL_SELECT) == ACLCHECK_OK;
}

/*
 * The catalog row of a stream, read as the catalog's owner: its owner and
 * partition count.  Returns false if relid is not a stream.  With lock, the
 * row is locked FOR UPDATE (the lock order of a step: the catalog row first,
 * then the stream table).  The caller is connected to SPI.
 */
bool
sw_lookup_stream(Oid relid, bool lock, Oid *owner, int *npartitions)
{
	SwRoleContext cx;
	Oid			types[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(relid)};
	bool		found;
	bool		isnull;

	sw_enter_catalog(&cx);
	sw_spi_exec(lock ?
				"SELECT owner, partitions FROM streamwm.stream_def WHERE stream = $1 FOR UPDATE" :
				"SELECT owner, partitions FROM streamwm.stream_def WHERE stream = $1",
				1, types, values, NULL, SPI_OK_SELECT);
	found = SPI_processed == 1;
	if (found)
	{
		if (owner)
			*owner = DatumGetObjectId(sw_spi_getdatum(0, 1, &isnull));
		if (npartitions)
			*npartitions = DatumGetInt32(sw_spi_getdatum(0, 2, &isnull));
	}
	sw_leave_role(&cx);
	return found;
}

/* The error for a relation that is not a stream. */
void
sw_not_a_stream(Oid relid)
{
	char	   *name = get_rel_name(relid);

	if (name == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid)));
	ereport(ERROR,
			(errcode(ERRCODE_WRONG_OBJECT_TYPE),
			 errmsg("\"%s\" is not a stream", name),
			 errhint("Create it with streamwm.create_stream().")));
}

/* The error for a stream the current user may not manage. */
static void
not_stream_owner(Oid relid)
{
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("must be owner of stream %s", sw_relation_name(relid))));
}

/*
 * Check that a stream the current user manages exists; returns its owner.
 * Locks its catalog row with lock.  The caller is connected to SPI.
 */
Oid
sw_check_stream_manager(Oid relid, bool lock)
{
	Oid			owner;

	if (!sw_lookup_stream(relid, lock, &owner, NULL))
		sw_not_a_stream(relid);
	if (!sw_may_manage(owner))
		not_stream_owner(relid);
	return owner;
}

/* The streamwm system columns and their types. */
static const struct
{
	const char *name;
	Oid			type;
}			system_columns[] =
{
	{"sw_partition", INT4OID},
	{"sw_offset", INT8OID},
	{"sw_write_time", TIMESTAMPTZOID},
	{"sw_event_time", TIMESTAMPTZOID},
};


/* Is this function streamwm's sw_ingest trigger function? */
bool
sw_is_ingest_function(Oid funcoid)
{
	char	   *name = get_func_name(funcoid);

	return name != NULL && strcmp(name, "_stream_insert") == 0 &&
		get_func_namespace(funcoid) == get_namespace_oid("streamwm_internal", false);
}

/* Does the table have streamwm's sw_ingest trigger? */
static bool
has_ingest_trigger(Relation rel)
{
	TriggerDesc *td = rel->trigdesc;
	Oid			tgfoid = InvalidOid;

	/* read before the catalogs are: a relcache rebuild frees the description */
	for (int i = 0; td != NULL && i < td->numtriggers; i++)
		if (strcmp(td->triggers[i].tgname, "sw_ingest") == 0)
			tgfoid = td->triggers[i].tgfoid;
	return OidIsValid(tgfoid) && sw_is_ingest_function(tgfoid);
}

/*
 * streamwm_internal._register_stream(stream, partitions, watermark_delay, event_time,
 * partition_key, granularity, idle_timeout, retention): records a table
 * that create_stream has just built as a stream owned by the current user.
 * Only a plain, permanent table the caller owns, with streamwm's system
 * columns of the right types, can become a stream.
 */
Datum
streamwm_register_stream(PG_FUNCTION_ARGS)
{
	Oid			relid;
	Relation	rel;
	SwRoleContext cx;
	Oid			types[10] = {OIDOID, INT4OID, INTERVALOID, TEXTOID, TEXTOID,
	INTERVALOID, INTERVALOID, INTERVALOID, INTERVALOID, OIDOID};
	Datum		values[10];
	char		nulls[10];

	sw_require_extension_version();

	for (int i = 0; i < 9; i++)
	{
		bool		may_be_null = (i == 3 || i == 4 || i == 8);

		if (PG_ARGISNULL(i) && !may_be_null)
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("argument %d of streamwm_internal._register_stream() must not be NULL",
							i + 1)));
		values[i] = PG_ARGISNULL(i) ? (Datum) 0 : PG_GETARG_DATUM(i);
		nulls[i] = PG_ARGISNULL(i) ? 'n' : ' ';
	}
	relid = PG_GETARG_OID(0);
	rel = table_open(relid, AccessExclusiveLock);
	if (rel->rd_rel->relkind != RELKIND_RELATION ||
		rel->rd_rel->relpersistence != RELPERSISTENCE_PERMANENT)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" cannot be a stream", RelationGetRelationName(rel)),
				 errdetail("A stream is a permanent, ordinary table.")));
	if (!pg_class_ownercheck(relid, GetUserId()))
		aclcheck_error(ACLCHECK_NOT_OWNER, OBJECT_TABLE, RelationGetRelationName(rel));
	for (int i = 0; i < lengthof(system_columns); i++)
	{
		AttrNumber	attno = attnameAttNum(rel, system_columns[i].name, false);

		if (attno <= 0 ||
			TupleDescAttr(RelationGetDescr(rel), attno - 1)->atttypid != system_columns[i].type)
			ereport(ERROR,
					(errcode(ERRCODE_WRONG_OBJECT_TYPE),
					 errmsg("\"%s\" cannot be a stream", RelationGetRelationName(rel)),
					 errdetail("Its column \"%s\" is missing or not of type %s.",
							   system_columns[i].name,
							   format_type_be(system_columns[i].type))));
	}
	/* only a table create_stream built: its insert trigger and offset sequence */
	if (list_length(getOwnedSequences(relid)) != 1 || !has_ingest_trigger(rel))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" cannot be a stream", RelationGetRelationName(rel)),
				 errdetail("It lacks the insert trigger or the offset sequence that create_stream gives a stream."),
				 errhint("Create streams with streamwm.create_stream().")));
	table_close(rel, NoLock);

	values[9] = ObjectIdGetDatum(GetUserId());
	nulls[9] = ' ';
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (sw_lookup_stream(relid, false, NULL, NULL))
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("%s is already a stream", sw_relation_name(relid))));
	sw_enter_catalog(&cx);
	sw_spi_exec("INSERT INTO streamwm.stream_def (stream, partitions, watermark_delay,"
				" event_time, partition_key, granularity, idle_timeout, retention,"
				" max_future_skew, owner)"
				" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
				10, types, values, nulls, SPI_OK_INSERT);
	sw_spi_exec("INSERT INTO streamwm.partition_state (stream, partition)"
				" SELECT $1, p FROM pg_catalog.generate_series(0, $2 - 1) p",
				2, types, values, NULL, SPI_OK_INSERT);
	sw_leave_role(&cx);
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * streamwm_internal._set_allowed_lateness(stream regclass, allowed_lateness interval)
 * RETURNS regclass: create_stream's allowed_lateness (SPEC section 10),
 * zero or positive, without months (a fixed number of microseconds, as
 * every interval of streamwm).  Only for a stream the caller manages that
 * no step has processed and no query reads: a later change would make
 * steps re-fire windows whose panes and rows are gone.
 */
Datum
streamwm_set_allowed_lateness(PG_FUNCTION_ARGS)
{
	Oid			relid;
	Interval   *lateness;
	Interval   *stored;
	int64		usec;
	SwRoleContext cx;
	Oid			types[2] = {OIDOID, INTERVALOID};
	Datum		values[2];

	sw_require_extension_version();

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("stream must not be NULL")));
	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("allowed_lateness must not be NULL"),
				 errhint("Give '0' for no lateness.")));
	relid = PG_GETARG_OID(0);
	lateness = PG_GETARG_INTERVAL_P(1);
	if (lateness->month != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("allowed_lateness must not contain months or years: %s",
						DatumGetCString(DirectFunctionCall1(interval_out,
															IntervalPGetDatum(lateness)))),
				 errhint("Use days, hours, minutes or seconds.")));
	usec = sw_interval_usec(lateness);
	if (usec < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("allowed_lateness must be zero or positive: %s",
						DatumGetCString(DirectFunctionCall1(interval_out,
															IntervalPGetDatum(lateness))))));
	stored = palloc0(sizeof(Interval));
	stored->time = usec;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	(void) sw_check_stream_manager(relid, true);
	values[0] = ObjectIdGetDatum(relid);
	values[1] = IntervalPGetDatum(stored);
	sw_enter_catalog(&cx);
	sw_spi_exec("UPDATE streamwm.stream_def d SET allowed_lateness = $2"
				" WHERE d.stream = $1 AND d.events = 0 AND d.last_processed IS NULL"
				" AND NOT EXISTS (SELECT 1 FROM streamwm.query_def q WHERE q.stream = $1)",
				2, types, values, NULL, SPI_OK_UPDATE);
	if (SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("allowed_lateness of stream %s can only be set when it is created",
						sw_relation_name(relid))));
	sw_leave_role(&cx);
	SPI_finish();
	PG_RETURN_OID(relid);
}

/*
 * Drop the pane tables (pane plan state, query.c) of the queries a WHERE
 * clause of query_def selects ($1 of type argtype), as the current user:
 * a pane table is a query's internal state and goes with the query.  Only
 * tables still owned by the query's owner are dropped.
 */
static void
drop_pane_tables(const char *where, Oid argtype, Datum arg)
{
	SwRoleContext cx;
	List	   *tables = NIL;
	ListCell   *lc;

	sw_enter_catalog(&cx);
	sw_spi_exec(psprintf("SELECT c.oid FROM streamwm.query_def q"
						 " JOIN pg_catalog.pg_class c ON c.oid = q.pane_table"
						 " AND c.relowner = q.owner WHERE %s", where),
				1, &argtype, &arg, NULL, SPI_OK_SELECT);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;

		tables = lappend_oid(tables, DatumGetObjectId(sw_spi_getdatum(i, 1, &isnull)));
	}
	sw_leave_role(&cx);
	foreach(lc, tables)
		sw_spi_exec(psprintf("DROP TABLE IF EXISTS %s", sw_relation_name(lfirst_oid(lc))),
					0, NULL, NULL, NULL, SPI_OK_UTILITY);
}

/*
 * streamwm_internal._unregister_stream(stream, cascade): removes a stream the caller
 * manages from the catalog (its queries too with cascade; without, an error
 * names them); drops a distributed stream and its commit log, which
 * belongs to the catalog.  drop_stream then drops a local stream's table as
 * the caller.
 */
Datum
streamwm_unregister_stream(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	bool		cascade = PG_GETARG_BOOL(1);
	Oid			types[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(relid)};
	SwRoleContext cx;
	List	   *queries;
	Oid			log = InvalidOid;

	sw_require_extension_version();

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	(void) sw_check_stream_manager(relid, true);
	(void) sw_stream_distributed(relid, NULL, &log);
	sw_enter_catalog(&cx);
	queries = sw_catalog_stream_queries(relid);
	if (queries != NIL && !cascade)
	{
		StringInfoData names;
		ListCell   *lc;

		initStringInfo(&names);
		foreach(lc, queries)
			appendStringInfo(&names, "%squery %s",
							 foreach_current_index(lc) > 0 ? ", " : "",
							 (char *) lfirst(lc));
		ereport(ERROR,
				(errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
				 errmsg("cannot drop stream %s because queries read it",
						sw_relation_name(relid)),
				 errdetail_plural("%s reads it.", "%s read it.",
								  (unsigned long) list_length(queries), names.data),
				 errhint("Use drop_stream(..., cascade => true) to drop the queries too (their result tables are kept).")));
	}
	/* a chain into it would fail for good and hold its own stream's rows */
	sw_spi_exec("SELECT name FROM streamwm.query_def WHERE result_stream AND result_table = $1",
				1, types, values, NULL, SPI_OK_SELECT);
	if (SPI_processed > 0 && !cascade)
	{
		bool		isnull;

		ereport(ERROR,
				(errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
				 errmsg("cannot drop stream %s because query \"%s\" writes into it",
						sw_relation_name(relid),
						TextDatumGetCString(sw_spi_getdatum(0, 1, &isnull))),
				 errhint("Drop that query first, or use drop_stream(..., cascade => true) to drop it too.")));
	}
	sw_leave_role(&cx);
	drop_pane_tables("q.stream = $1 OR (q.result_stream AND q.result_table = $1)", OIDOID, values[0]);
	sw_enter_catalog(&cx);
	sw_spi_exec("DELETE FROM streamwm.late_event_log WHERE stream = $1",
				1, types, values, NULL, SPI_OK_DELETE);
	sw_spi_exec("DELETE FROM streamwm.query_def WHERE stream = $1"
				" OR (result_stream AND result_table = $1)",
				1, types, values, NULL, SPI_OK_DELETE);
	sw_spi_exec("DELETE FROM streamwm.retention_mark WHERE stream = $1",
				1, types, values, NULL, SPI_OK_DELETE);
	sw_spi_exec("DELETE FROM streamwm.partition_state WHERE stream = $1",
				1, types, values, NULL, SPI_OK_DELETE);
	sw_spi_exec("DELETE FROM streamwm.stream_def WHERE stream = $1",
				1, types, values, NULL, SPI_OK_DELETE);
	sw_stream_distributed_changed();
	/*
	 * A distributed stream's commit log belongs to the catalog (citus.c),
	 * and both tables are dropped as the catalog's owner, who distributed
	 * them: Citus refuses to touch, in one transaction, shard placements
	 * another user modified, and the log's are co-located with the stream's.
	 */
	if (OidIsValid(log))
	{
		if (get_rel_name(log) != NULL)
			sw_spi_exec(psprintf("DROP TABLE %s", sw_relation_name(log)),
						0, NULL, NULL, NULL, SPI_OK_UTILITY);
		sw_spi_exec(psprintf("DROP TABLE %s", sw_relation_name(relid)),
					0, NULL, NULL, NULL, SPI_OK_UTILITY);
	}
	sw_leave_role(&cx);
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * What every new query must be, checked where it is recorded (called by
 * streamwm_register_query with its arguments), so that it holds whoever
 * calls streamwm_internal._register_query, the _create_* functions or
 * anyone else: valid hop and size (both 0: an ordered query), start_from
 * and time_domain as the _create_* functions spell them, a text of the
 * shape of its kind (read as steps read it); and what depends
 * on the streams: a chain (result a stream) reads no stream with
 * allowed_lateness (a re-fired window would reach the result stream a
 * second time), writes into a stream without an event_time expression, is
 * neither ordered nor in processing time; an ordered query reads no
 * stream with allowed_lateness.  (A query in processing time must have
 * the pane plan: checked by the caller once it is chosen.)  Session and count queries are made from a query recorded here by
 * their own functions, which check what they need (session.c, count.c).
 */
static void
check_new_query(const char *name, Oid relid, Oid result, bool chain, FunctionCallInfo fcinfo)
{
	Interval   *hop = PG_GETARG_INTERVAL_P(4);
	Interval   *size = PG_GETARG_INTERVAL_P(5);
	int64		hop_us = sw_interval_usec(hop);
	int64		size_us = sw_interval_usec(size);
	char	   *start_from = text_to_cstring(PG_GETARG_TEXT_PP(7));
	char	   *domain = text_to_cstring(PG_GETARG_TEXT_PP(11));
	bool		ordered = hop_us == 0 && size_us == 0 && hop->month == 0 && size->month == 0;
	bool		processing = strcmp(domain, "processing") == 0;
	Oid			types[2] = {OIDOID, OIDOID};
	Datum		values[2] = {ObjectIdGetDatum(relid), ObjectIdGetDatum(result)};
	SwRoleContext cx;
	bool		isnull;
	int64		lateness_us;
	bool		timed;
	int			nestlevel;

	if (!ordered &&
		(hop->month != 0 || size->month != 0 || hop_us <= 0 || size_us <= 0 || size_us % hop_us != 0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("hop and size of query \"%s\" must be positive, without months or years, and size a whole multiple of hop",
						name)));
	if (strcmp(start_from, "latest") != 0 && strcmp(start_from, "earliest") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("start_from must be 'latest' or 'earliest', not '%s'", start_from)));
	if (!processing && strcmp(domain, "event") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("time_domain must be 'event' or 'processing', not '%s'", domain)));
	/* the text has the shape of its kind (as _query_columns checks it) */
	nestlevel = sw_enter_safe_path();
	if (ordered)
		(void) sw_ordered_columns(relid, text_to_cstring(PG_GETARG_TEXT_PP(2)));
	else
		(void) sw_query_columns(relid, text_to_cstring(PG_GETARG_TEXT_PP(2)));
	sw_leave_safe_path(nestlevel);

	sw_enter_catalog(&cx);
	sw_spi_exec("SELECT d.allowed_lateness, (SELECT r.event_time IS NOT NULL FROM streamwm.stream_def r"
				" WHERE r.stream OPERATOR(pg_catalog.=) $2)"
				" FROM streamwm.stream_def d WHERE d.stream OPERATOR(pg_catalog.=) $1",
				2, types, values, NULL, SPI_OK_SELECT);
	if (SPI_processed != 1 || SPI_gettypeid(SPI_tuptable->tupdesc, 1) != INTERVALOID)
		sw_not_a_stream(relid);
	lateness_us = sw_interval_usec(DatumGetIntervalP(sw_spi_getdatum(0, 1, &isnull)));
	timed = DatumGetBool(sw_spi_getdatum(0, 2, &isnull)) && !isnull;
	SPI_freetuptable(SPI_tuptable);
	sw_leave_role(&cx);

	if (chain && ordered)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("a query with hop and size NULL cannot write into a stream")));
	if (chain && processing)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("a query in processing time cannot write into a stream")));
	if (chain && lateness_us > 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("stream %s has allowed_lateness: a query over it cannot write into a stream",
						sw_relation_name(relid)),
				 errdetail("A window re-fired by a late event would reach the result stream a second time.")));
	if (chain && timed)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("result stream %s has an event_time expression", sw_relation_name(result)),
				 errdetail("A chained query's rows have their window start as event time: it is their write time."),
				 errhint("Create the result stream without event_time.")));
	if (ordered && lateness_us > 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("stream %s has allowed_lateness: a query with hop and size NULL emits each row once, in order, and cannot take one back",
						sw_relation_name(relid))));
}

/*
 * streamwm_internal._register_query(name, stream, query, query_text, hop, size,
 * result_table, start_from, start_offset, closed_until): records a query
 * owned by the current user.  It must manage the stream (a query holds the
 * stream's rows back from retention and runs in its steps) and own the
 * result table.
 */
Datum
streamwm_register_query(PG_FUNCTION_ARGS)
{
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	Oid			relid = PG_GETARG_OID(1);
	Oid			result = PG_GETARG_OID(6);
	Oid			types[17] = {TEXTOID, OIDOID, TEXTOID, TEXTOID, INTERVALOID, INTERVALOID,
		OIDOID, TEXTOID, INT8OID, TIMESTAMPTZOID, TEXTOID, OIDOID, TEXTOID, REGCLASSARRAYOID,
	BOOLOID, TIMESTAMPTZOID, TEXTOID};
	Datum		values[17];
	Oid			ntypes[1] = {TEXTOID};
	Oid			rtypes[1] = {OIDOID};
	SwRoleContext cx;
	char	   *relname;
	bool		chain;

	sw_require_extension_version();

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	(void) sw_check_stream_manager(relid, true);
	relname = get_rel_name(result);
	if (relname == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", result)));
	if (get_rel_relkind(result) != RELKIND_RELATION)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("result table \"%s\" is not an ordinary table", relname)));
	if (!pg_class_ownercheck(result, GetUserId()))
		aclcheck_error(ACLCHECK_NOT_OWNER, OBJECT_TABLE, relname);
	/* on Citus: a local result table, or one co-located with the stream (citus.c) */
	sw_citus_refuse_result_table(result, relid,
								 sw_interval_usec(PG_GETARG_INTERVAL_P(4)) == 0 ? NULL :
								 text_to_cstring(PG_GETARG_TEXT_PP(2)));
	/* a chain: the results go into another stream (SPEC section 10) */
	/* locked, so that two queries cannot both become its one writer */
	chain = sw_lookup_stream(result, true, NULL, NULL);
	if (chain && result == relid)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("query \"%s\" cannot write its results into the stream it reads", name)));

	for (int i = 0; i < 10; i++)
		values[i] = PG_GETARG_DATUM(i);
	values[10] = CStringGetTextDatum(sw_relation_name(result));
	values[11] = ObjectIdGetDatum(GetUserId());
	check_new_query(name, relid, result, chain, fcinfo);
	/* the plan is decided once, here, and recorded */
	values[12] = CStringGetTextDatum(sw_choose_plan(relid, TextDatumGetCString(values[2]),
													sw_interval_usec(PG_GETARG_INTERVAL_P(4)),
													sw_interval_usec(PG_GETARG_INTERVAL_P(5))));
	/* processing time keeps its state in panes only */
	if (strcmp(text_to_cstring(PG_GETARG_TEXT_PP(11)), "processing") == 0 &&
		strcmp(TextDatumGetCString(values[12]), "pane") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("a query in processing time must use aggregates that combine (the pane plan)"),
				 errdetail("Its state is the partial aggregates of the panes of each step's clock: the rows do not record when they were read."),
				 errhint("See streamwm.queries.plan: count, sum, min, max and avg over plain GROUP BY columns qualify.")));
	/* what the stored text reads, read as steps will (query_ddl.c) */
	values[13] = sw_query_reads(sw_analyze_bound_query(TextDatumGetCString(values[2])));
	sw_enter_catalog(&cx);
	sw_spi_exec("SELECT 1 FROM streamwm.query_def WHERE name = $1",
				1, ntypes, values, NULL, SPI_OK_SELECT);
	if (SPI_processed > 0)
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("query \"%s\" already exists", name)));
	if (chain)
	{
		/*
		 * One writer per result stream: its rows then come in window order,
		 * and the query's progress is a promise about the rows to come
		 * (process.c, chain_promise()).
		 */
		sw_spi_exec("SELECT name FROM streamwm.query_def WHERE result_stream AND result_table = $1",
					1, rtypes, &values[6], NULL, SPI_OK_SELECT);
		if (SPI_processed > 0)
		{
			bool		isnull;

			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_IN_USE),
					 errmsg("query \"%s\" already writes into stream %s",
							TextDatumGetCString(sw_spi_getdatum(0, 1, &isnull)), relname),
					 errdetail("A stream can be the result of one query only.")));
		}
	}
	values[14] = BoolGetDatum(chain);
	values[15] = PG_GETARG_DATUM(10);
	values[16] = PG_GETARG_DATUM(11);
	if (TIMESTAMP_NOT_FINITE(PG_GETARG_TIMESTAMPTZ(10)))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("origin must be finite")));
	sw_spi_exec("INSERT INTO streamwm.query_def (name, stream, query, query_text, hop, size,"
				" result_table, start_from, start_offset, closed_until, result_name,"
				" search_path, owner, plan, reads, result_stream, start_closed_until, origin,"
				" time_domain)"
				" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11,"
				" '" SW_SAFE_SEARCH_PATH "', $12, $13, $14, $15, $10, $16, $17)",
				17, types, values, NULL, SPI_OK_INSERT);
	sw_leave_role(&cx);
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * Find a query for one of its managers (the caller is a member of its
 * owner) and lock its stream's catalog row, as a step does first.
 * Returns its stream; *owner and *result (its result table, if it still
 * exists and belongs to the owner; may be NULL) are set.  The caller is
 * connected to SPI.
 */
static Oid
lock_managed_query(const char *name, Oid *owner, Oid *result)
{
	Oid			types[1] = {TEXTOID};
	Datum		values[1] = {CStringGetTextDatum(name)};
	SwRoleContext cx;
	Oid			stream;
	bool		isnull;

	sw_enter_catalog(&cx);
	sw_spi_exec("SELECT stream, owner, (SELECT c.oid FROM pg_catalog.pg_class c"
				"  WHERE c.relowner = q.owner AND (c.oid = q.result_table"
				"   OR c.oid = pg_catalog.to_regclass(q.result_name)) LIMIT 1)"
				" FROM streamwm.query_def q WHERE name = $1",
				1, types, values, NULL, SPI_OK_SELECT);
	if (SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("query \"%s\" does not exist", name)));
	stream = DatumGetObjectId(sw_spi_getdatum(0, 1, &isnull));
	*owner = DatumGetObjectId(sw_spi_getdatum(0, 2, &isnull));
	if (result)
	{
		*result = DatumGetObjectId(sw_spi_getdatum(0, 3, &isnull));
		if (isnull)
			*result = InvalidOid;
	}
	sw_leave_role(&cx);
	if (!sw_may_manage(*owner))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("must be owner of query \"%s\"", name)));
	/* the lock order of a step: the stream's catalog row first */
	(void) sw_lookup_stream(stream, true, NULL, NULL);
	return stream;
}

/*
 * pause_query(name) / resume_query(name): a paused query closes no window;
 * it keeps its position, and retention keeps the rows its open windows
 * need (its closed_until does not move), so resuming catches up.
 */
static void
set_query_paused(const char *name, bool paused)
{
	Oid			owner;
	SwRoleContext cx;
	Oid			types[2] = {TEXTOID, BOOLOID};
	Datum		values[2] = {CStringGetTextDatum(name), BoolGetDatum(paused)};

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	(void) lock_managed_query(name, &owner, NULL);
	sw_enter_catalog(&cx);
	sw_spi_exec("UPDATE streamwm.query_def SET paused = $2 WHERE name = $1",
				2, types, values, NULL, SPI_OK_UPDATE);
	sw_leave_role(&cx);
	SPI_finish();
}

/*
 * streamwm_internal._set_result_retention(name, result, result_retention): records
 * create_query's result_retention for the query just created; returns
 * result (create_query's value).  NULL: result rows are kept.
 */
Datum
streamwm_set_result_retention(PG_FUNCTION_ARGS)
{
	char	   *name;
	Oid			owner;
	SwRoleContext cx;
	Oid			types[2] = {TEXTOID, INTERVALOID};
	Datum		values[2];
	Interval   *rr;

	sw_require_extension_version();

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		PG_RETURN_NULL();
	if (PG_ARGISNULL(2))
		PG_RETURN_DATUM(PG_GETARG_DATUM(1));
	name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	rr = PG_GETARG_INTERVAL_P(2);
	if (rr->month != 0 || sw_interval_usec(rr) <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("result_retention must be positive and must not contain months or years")));
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	(void) lock_managed_query(name, &owner, NULL);
	values[0] = CStringGetTextDatum(name);
	values[1] = IntervalPGetDatum(rr);
	sw_enter_catalog(&cx);
	sw_spi_exec("UPDATE streamwm.query_def SET result_retention = $2 WHERE name = $1"
				" AND NOT result_stream",
				2, types, values, NULL, SPI_OK_UPDATE);
	if (SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("query \"%s\" writes into a stream: result_retention does not apply", name),
				 errhint("The result stream has its own retention.")));
	sw_leave_role(&cx);
	SPI_finish();
	PG_RETURN_DATUM(PG_GETARG_DATUM(1));
}

static Datum
pause_query_impl(PG_FUNCTION_ARGS)
{
	sw_require_extension_version();
	set_query_paused(text_to_cstring(PG_GETARG_TEXT_PP(0)), true);
	PG_RETURN_VOID();
}

/* the entry point: errors without streamwm's internal frames (api.c) */
Datum
streamwm_pause_query(PG_FUNCTION_ARGS)
{
	return sw_api_guard(pause_query_impl, fcinfo);
}

static Datum
resume_query_impl(PG_FUNCTION_ARGS)
{
	sw_require_extension_version();
	set_query_paused(text_to_cstring(PG_GETARG_TEXT_PP(0)), false);
	PG_RETURN_VOID();
}

/* the entry point: errors without streamwm's internal frames (api.c) */
Datum
streamwm_resume_query(PG_FUNCTION_ARGS)
{
	return sw_api_guard(resume_query_impl, fcinfo);
}

/*
 * streamwm_internal._unregister_query(name) RETURNS regclass: removes a query the
 * caller manages.  Returns its result table if that still exists and
 * belongs to the query's owner (a table of the same name made by someone
 * else is never offered for dropping), else NULL.
 */
Datum
streamwm_unregister_query(PG_FUNCTION_ARGS)
{
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	Oid			types[1] = {TEXTOID};
	Datum		values[1] = {CStringGetTextDatum(name)};
	SwRoleContext cx;
	Oid			owner;
	Oid			result;

	sw_require_extension_version();

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	(void) lock_managed_query(name, &owner, &result);
	drop_pane_tables("q.name = $1", TEXTOID, values[0]);
	sw_enter_catalog(&cx);
	sw_spi_exec("DELETE FROM streamwm.query_def WHERE name = $1",
				1, types, values, NULL, SPI_OK_DELETE);
	sw_leave_role(&cx);
	SPI_finish();
	if (!OidIsValid(result))
		PG_RETURN_NULL();
	PG_RETURN_OID(result);
}

/*
 * streamwm_internal._check_create_table(ddl text): the CREATE TABLE statement of
 * create_stream holds the caller's column list; make sure it is one CREATE
 * TABLE of plain columns and nothing else (no second statement, no
 * inheritance, partitioning, LIKE or table options).
 */
/*
 * Context of a syntax error in the column list create_stream() was given:
 * no position, since the text parsed is a statement made around it.
 */
static void
column_list_error_context(void *arg)
{
	errposition(0);
	errcontext("in the column list of the stream");
}

Datum
streamwm_check_create_table(PG_FUNCTION_ARGS)
{
	char	   *ddl = text_to_cstring(PG_GETARG_TEXT_PP(0));
	ErrorContextCallback errcb;
	List	   *raw;
	CreateStmt *cs;
	ListCell   *lc;

	sw_require_extension_version();

	errcb.callback = column_list_error_context;
	errcb.arg = NULL;
	errcb.previous = error_context_stack;
	error_context_stack = &errcb;
	raw = raw_parser(ddl, RAW_PARSE_DEFAULT);
	error_context_stack = errcb.previous;
	if (list_length(raw) != 1 ||
		!IsA(linitial_node(RawStmt, raw)->stmt, CreateStmt))
		ereport(ERROR,
				(errcode(ERRCODE_SYNTAX_ERROR),
				 errmsg("invalid column list"),
				 errdetail("Give column definitions only, as in 'pass int8, payload text'.")));
	cs = (CreateStmt *) linitial_node(RawStmt, raw)->stmt;
	if (cs->inhRelations != NIL || cs->partbound != NULL || cs->partspec != NULL ||
		cs->ofTypename != NULL || cs->options != NIL || cs->oncommit != ONCOMMIT_NOOP ||
		cs->tablespacename != NULL || cs->accessMethod != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_SYNTAX_ERROR),
				 errmsg("invalid column list"),
				 errdetail("Give column definitions only, as in 'pass int8, payload text'.")));
	foreach(lc, cs->tableElts)
	{
		if (!IsA(lfirst(lc), ColumnDef) && !IsA(lfirst(lc), Constraint))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("only column definitions and constraints may be given for a stream"),
					 errhint("LIKE is not supported; list the columns.")));
	}
	PG_RETURN_VOID();
}

/*
 * Does reading this stream as its owner run code of the owner's (forced
 * row-level security)?  The guard refuses FORCE ROW LEVEL SECURITY on a
 * stream; this catches a table forced before it became one, or with the
 * guard disabled.
 */
bool
sw_stream_forces_rls(Oid relid)
{
	HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	bool		forced;

	if (!HeapTupleIsValid(tup))
		return false;
	forced = ((Form_pg_class) GETSTRUCT(tup))->relforcerowsecurity;
	ReleaseSysCache(tup);
	return forced;
}

/*
 * Has the planner statistics of this stream (an ANALYZE stored them; read
 * on its sw_event_time)?  Without them its estimates are a few hundred
 * rows whatever its size.
 */
bool
sw_stream_has_statistics(Oid relid)
{
	return SearchSysCacheExists3(STATRELATTINH, ObjectIdGetDatum(relid),
								 Int16GetDatum(get_attnum(relid, "sw_event_time")),
								 BoolGetDatum(false));
}

/*
 * streamwm_internal._validate_as_owner(tab regclass, conname name): VALIDATE
 * CONSTRAINT of a user's foreign key as the owner of its table, in a
 * security-restricted operation.  Only the update from 0.1 calls it (and
 * drops it again): it re-makes the foreign keys a user's tables have to a
 * stream.  Checking one runs the owner's casts and operators; as the
 * superuser running the update they would run with its rights, and a plain
 * SET ROLE is one that code can RESET.
 */
PG_FUNCTION_INFO_V1(streamwm_validate_as_owner);
Datum
streamwm_validate_as_owner(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	Name		conname = PG_GETARG_NAME(1);
	SwRoleContext cx;

	if (!superuser())
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("only the update of streamwm may validate a constraint as its table's owner")));
	sw_enter_role(sw_relation_owner(relid), SW_SAFE_SEARCH_PATH, &cx);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	sw_spi_exec(psprintf("ALTER TABLE %s VALIDATE CONSTRAINT %s", sw_relation_name(relid),
						 quote_identifier(NameStr(*conname))),
				0, NULL, NULL, NULL, SPI_OK_UTILITY);
	SPI_finish();
	sw_leave_role(&cx);
	PG_RETURN_VOID();
}

/*
 * Run one of our statements with the latest snapshot rather than the
 * transaction's (purge.c: under REPEATABLE READ, the row a step committed
 * after the transaction began is the one to lock and add to).  The caller
 * is connected to SPI.
 */
void
sw_spi_exec_snapshot(const char *sql, int nargs, Oid *types, Datum *values,
					 const char *nulls, int expected, Snapshot snapshot)
{
	SPIPlanPtr	plan = SPI_prepare(sql, nargs, types);
	int			rc;

	if (plan == NULL)
		elog(ERROR, "streamwm: preparing \"%s\" failed: %s",
			 sql, SPI_result_code_string(SPI_result));
	rc = SPI_execute_snapshot(plan, values, nulls, snapshot,
							  InvalidSnapshot, false, true, 0);
	if (rc != expected)
		elog(ERROR, "streamwm: \"%s\" failed: %s", sql, SPI_result_code_string(rc));
	SPI_freeplan(plan);
}

/*
 * The same, with the rows sent to 'dest' instead of SPI_tuptable (a reader
 * that keeps only what it needs: no tuple formed and kept per row), whose
 * mydest is DestNone.  The statement must be a SELECT: it runs read-only,
 * with exactly 'snapshot'.
 */
void
sw_spi_exec_snapshot_to(const char *sql, int nargs, Oid *types, Datum *values,
						const char *nulls, Snapshot snapshot, DestReceiver *dest)
{
	SPIPlanPtr	plan = SPI_prepare(sql, nargs, types);
	ParamListInfo params = makeParamList(nargs);
	SPIExecuteOptions options;
	int			rc;

	if (plan == NULL)
		elog(ERROR, "streamwm: preparing \"%s\" failed: %s",
			 sql, SPI_result_code_string(SPI_result));
	for (int i = 0; i < nargs; i++)
	{
		params->params[i].value = values[i];
		params->params[i].isnull = nulls != NULL && nulls[i] == 'n';
		params->params[i].pflags = PARAM_FLAG_CONST;
		params->params[i].ptype = types[i];
	}
	memset(&options, 0, sizeof(options));
	options.params = params;
	options.read_only = true;	/* with the active snapshot, as it is */
	options.dest = dest;
	PushActiveSnapshot(snapshot);
	rc = SPI_execute_plan_extended(plan, &options);
	PopActiveSnapshot();
	/* a SELECT whose rows go to a receiver of DestNone is "utility" to SPI */
	if (rc != SPI_OK_UTILITY)
		elog(ERROR, "streamwm: \"%s\" failed: %s", sql, SPI_result_code_string(rc));
	SPI_freeplan(plan);
}

void
sw_spi_exec_latest(const char *sql, int nargs, Oid *types, Datum *values,
				   const char *nulls, int expected)
{
	sw_spi_exec_snapshot(sql, nargs, types, values, nulls, expected, GetLatestSnapshot());
}

/*
 * Is relid a stream table (listed in streamwm.stream_def)?  Connects to SPI
 * on its own.  The function calling it (guard.c) runs as the extension
 * owner, so row level security on the catalog does not hide other roles'
 * streams.
 */
bool
sw_catalog_is_stream(Oid relid)
{
	Oid			types[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(relid)};
	bool		found;
	int			rc;

	if (!OidIsValid(relid))
		return false;
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	rc = SPI_execute_with_args("SELECT 1 FROM streamwm.stream_def d"
							   " WHERE d.stream OPERATOR(pg_catalog.=) $1",
							   1, types, values, NULL, true, 1);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "streamwm: reading streamwm.stream_def failed: %s",
			 SPI_result_code_string(rc));
	found = SPI_processed > 0;
	SPI_finish();
	return found;
}

/*
 * The streams the current user manages, in OID order (streamwm.process()
 * without a stream).  Reads the catalog as its owner, judges as the
 * caller.  The caller is connected to SPI.
 */
List *
sw_catalog_managed_streams(void)
{
	SwRoleContext cx;
	List	   *streams = NIL;

	sw_enter_catalog(&cx);
	sw_spi_exec("SELECT stream, owner FROM streamwm.stream_def ORDER BY stream::pg_catalog.oid",
				0, NULL, NULL, NULL, SPI_OK_SELECT);
	sw_leave_role(&cx);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;

		if (sw_may_manage(DatumGetObjectId(sw_spi_getdatum(i, 2, &isnull))))
			streams = lappend_oid(streams,
								  DatumGetObjectId(sw_spi_getdatum(i, 1, &isnull)));
	}
	return streams;
}

/* max_future_skew of a stream (SQL NULL: no limit) into its clock. */
static void
load_future_skew(SwStreamClock *clock, Datum skew, bool isnull)
{
	clock->limit_future = !isnull;
	clock->max_future_skew_us = isnull ? 0 : sw_interval_usec(DatumGetIntervalP(skew));
	clock->future_events = 0;
}

/*
 * Lock a stream's catalog row for a step (FOR NO KEY UPDATE: steps on one
 * stream are serialised) and load its watermark state and retention.
 * Returns false when skip_locked and another step holds the stream.
 */
bool
sw_catalog_lock_stream(Oid relid, bool skip_locked, SwStreamClock *clock,
					   int64 *retention_us)
{
	Oid			types[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(relid)};
	bool		isnull;
	Datum		skew;

	sw_spi_exec(skip_locked ?
				"SELECT partitions, watermark_delay, idle_timeout, retention, created,"
				" watermark, max_future_skew, event_time IS NULL AND NOT EXISTS"
				" (SELECT 1 FROM streamwm.query_def q WHERE q.result_stream"
				" AND q.result_table = stream_def.stream), allowed_lateness"
				" FROM streamwm.stream_def WHERE stream = $1"
				" FOR NO KEY UPDATE SKIP LOCKED" :
				"SELECT partitions, watermark_delay, idle_timeout, retention, created,"
				" watermark, max_future_skew, event_time IS NULL AND NOT EXISTS"
				" (SELECT 1 FROM streamwm.query_def q WHERE q.result_stream"
				" AND q.result_table = stream_def.stream), allowed_lateness"
				" FROM streamwm.stream_def WHERE stream = $1"
				" FOR NO KEY UPDATE",
				1, types, values, NULL, SPI_OK_SELECT);
	if (SPI_processed != 1)
		return false;
	clock->npartitions = DatumGetInt32(sw_spi_getdatum(0, 1, &isnull));
	clock->delay_us = sw_interval_usec(DatumGetIntervalP(sw_spi_getdatum(0, 2, &isnull)));
	clock->idle_timeout_us = sw_interval_usec(DatumGetIntervalP(sw_spi_getdatum(0, 3, &isnull)));
	*retention_us = sw_interval_usec(DatumGetIntervalP(sw_spi_getdatum(0, 4, &isnull)));
	clock->created = DatumGetTimestampTz(sw_spi_getdatum(0, 5, &isnull));
	clock->watermark = DatumGetTimestampTz(sw_spi_getdatum(0, 6, &isnull));
	skew = sw_spi_getdatum(0, 7, &isnull);
	load_future_skew(clock, skew, isnull);
	clock->heartbeat = DatumGetBool(sw_spi_getdatum(0, 8, &isnull));
	clock->promise = DT_NOBEGIN;
	clock->lateness_us = sw_interval_usec(DatumGetIntervalP(sw_spi_getdatum(0, 9, &isnull)));
	clock->parts = palloc0(clock->npartitions * sizeof(SwPartitionClock));

	sw_spi_exec("SELECT partition, processed_offset, max_event_time,"
				" coalesce(last_arrival, '-infinity'), live"
				" FROM streamwm.partition_state WHERE stream = $1",
				1, types, values, NULL, SPI_OK_SELECT);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		int			p = DatumGetInt32(sw_spi_getdatum(i, 1, &isnull));

		if (p < 0 || p >= clock->npartitions)
			elog(ERROR, "streamwm: partition %d of stream %u out of range", p, relid);
		clock->parts[p].processed_offset = DatumGetInt64(sw_spi_getdatum(i, 2, &isnull));
		clock->parts[p].max_event_time = DatumGetTimestampTz(sw_spi_getdatum(i, 3, &isnull));
		clock->parts[p].last_arrival = DatumGetTimestampTz(sw_spi_getdatum(i, 4, &isnull));
		clock->parts[p].live = DatumGetBool(sw_spi_getdatum(i, 5, &isnull));
	}
	return true;
}

/*
 * Forget the commit log entries a step has read to the end ('offsets': each
 * partition's processed offset), all but each partition's newest, which
 * the next committer compares its offsets with (commit_order.c), and the
 * start floors (negative partitions) that every partition's newest entry
 * has reached (a commit compares with the higher of the two).  Not those
 * that every transaction running when they were set has left: a session
 * hands out offsets from a chunk it took earlier (commit_order.c), so a
 * later transaction may still commit offsets below the floor, and only the
 * floor sends it to be renumbered above a 'latest' query's start.  Those
 * below the stream's highest go too: a commit compares with that one
 * only.  So a stream with a partition never written keeps its highest.
 * As the catalog's owner; the caller is connected to SPI.
 */
void
sw_catalog_prune_commit_log(Oid relid, Datum offsets)
{
	SwRoleContext cx;
	Oid			types[2] = {OIDOID, INT8ARRAYOID};
	Datum		values[2] = {ObjectIdGetDatum(relid), offsets};

	sw_enter_catalog(&cx);
	sw_spi_exec("DELETE FROM streamwm.commit_log e"
				" USING pg_catalog.unnest($2) WITH ORDINALITY AS p(done, n)"
				" WHERE e.stream = $1 AND e.partition = (p.n - 1)::pg_catalog.int4"
				" AND e.hi <= p.done"
				" AND e.hi < (SELECT pg_catalog.max(m.hi) FROM streamwm.commit_log m"
				"             WHERE m.stream = $1 AND m.partition = e.partition)",
				2, types, values, NULL, SPI_OK_DELETE);
	sw_spi_exec("DELETE FROM streamwm.commit_log f"
				" WHERE f.stream = $1 AND f.partition < 0"
				" AND (f.hi <= (SELECT pg_catalog.min(coalesce("
				"   (SELECT m.hi FROM streamwm.commit_log m"
				"     WHERE m.stream = $1 AND m.partition = (p.n - 1)::pg_catalog.int4"
				"     ORDER BY m.hi DESC LIMIT 1), 0))"
				"   FROM pg_catalog.unnest($2) WITH ORDINALITY AS p(done, n))"
				" OR f.hi < (SELECT pg_catalog.max(g.hi) FROM streamwm.commit_log g"
				"             WHERE g.stream = $1 AND g.partition < 0))",
				2, types, values, NULL, SPI_OK_DELETE);
	sw_leave_role(&cx);
}

/*
 * Store what a step read: each partition's processed offset, maximum event
 * time and last arrival (only the partitions that changed), and the
 * stream's W and counters; clears the step's started mark (worker.c).
 */
void
sw_catalog_store_step(Oid relid, const SwStreamClock *clock, int64 events,
					  int64 late_events, TimestampTz now)
{
	int			np = clock->npartitions;
	int32	   *parts = palloc(np * sizeof(int32));
	int64	   *offsets = palloc(np * sizeof(int64));
	TimestampTz *maxes = palloc(np * sizeof(TimestampTz));
	TimestampTz *arrivals = palloc(np * sizeof(TimestampTz));
	Datum	   *lives = palloc(np * sizeof(Datum));
	Oid			ptypes[6] = {OIDOID, INT4ARRAYOID, INT8ARRAYOID,
	TIMESTAMPTZARRAYOID, TIMESTAMPTZARRAYOID, BOOLARRAYOID};
	Datum		pvalues[6];
	Oid			stypes[6] = {OIDOID, TIMESTAMPTZOID, INT8OID, INT8OID, TIMESTAMPTZOID,
	INT8OID};
	Datum		svalues[6];

	for (int i = 0; i < np; i++)
	{
		parts[i] = i;
		offsets[i] = clock->parts[i].processed_offset;
		maxes[i] = clock->parts[i].max_event_time;
		arrivals[i] = clock->parts[i].last_arrival;
		lives[i] = BoolGetDatum(clock->parts[i].live);
	}
	pvalues[0] = ObjectIdGetDatum(relid);
	pvalues[1] = sw_int4_array(parts, np);
	pvalues[2] = sw_int8_array(offsets, np);
	pvalues[3] = sw_timestamptz_array(maxes, np);
	pvalues[4] = sw_timestamptz_array(arrivals, np);
	pvalues[5] = PointerGetDatum(construct_array(lives, np, BOOLOID, 1, true, TYPALIGN_CHAR));
	sw_spi_exec("UPDATE streamwm.partition_state s SET processed_offset = x.o,"
				" max_event_time = x.m,"
				" last_arrival = NULLIF(x.a, '-infinity'::timestamptz), live = x.l"
				" FROM ROWS FROM (pg_catalog.unnest($2), pg_catalog.unnest($3), pg_catalog.unnest($4), pg_catalog.unnest($5), pg_catalog.unnest($6)) AS x(p, o, m, a, l)"
				" WHERE s.stream = $1 AND s.partition = x.p"
				" AND (s.processed_offset, s.max_event_time, s.last_arrival, s.live)"
				" IS DISTINCT FROM (x.o, x.m, NULLIF(x.a, '-infinity'::timestamptz), x.l)",
				6, ptypes, pvalues, NULL, SPI_OK_UPDATE);

	svalues[0] = ObjectIdGetDatum(relid);
	svalues[1] = TimestampTzGetDatum(clock->watermark);
	svalues[2] = Int64GetDatum(events);
	svalues[3] = Int64GetDatum(late_events);
	svalues[4] = TimestampTzGetDatum(now);
	svalues[5] = Int64GetDatum(clock->future_events);
	sw_spi_exec("UPDATE streamwm.stream_def SET step_started = NULL, step_crashes = 0, watermark = $2,"
				" events = events + $3, late_events = late_events + $4,"
				" last_processed = $5, future_events = future_events + $6"
				" WHERE stream = $1",
				6, stypes, svalues, NULL, SPI_OK_UPDATE);
}

/*
 * Add a retention mark (process.c): accepted rows up to 'offsets', read
 * while W reached 'watermark', none earlier than min_event_time.  Marks
 * that leave the same W share a row.
 */
void
sw_catalog_add_retention_mark(Oid relid, TimestampTz watermark, Datum offsets,
							  TimestampTz min_event_time)
{
	Oid			mtypes[4] = {OIDOID, TIMESTAMPTZOID, INT8ARRAYOID, TIMESTAMPTZOID};
	Datum		mvalues[4];

	mvalues[0] = ObjectIdGetDatum(relid);
	mvalues[1] = TimestampTzGetDatum(watermark);
	mvalues[2] = offsets;
	mvalues[3] = TimestampTzGetDatum(min_event_time);
	sw_spi_exec("INSERT INTO streamwm.retention_mark AS m"
				" (stream, watermark, offsets, min_event_time) VALUES ($1, $2, $3, $4)"
				" ON CONFLICT (stream, watermark) DO UPDATE SET offsets = EXCLUDED.offsets,"
				" min_event_time = LEAST(m.min_event_time, EXCLUDED.min_event_time)",
				4, mtypes, mvalues, NULL, SPI_OK_INSERT);
}

/* Log n late rows of a step in streamwm.late_event_log (n > 0). */
void
sw_catalog_log_late_rows(Oid relid, int n, const int32 *partition,
						 const int64 *offset, const TimestampTz *event_time,
						 const TimestampTz *watermark, const TimestampTz *arrival)
{
	Oid			ltypes[6] = {OIDOID, INT4ARRAYOID, INT8ARRAYOID,
	TIMESTAMPTZARRAYOID, TIMESTAMPTZARRAYOID, TIMESTAMPTZARRAYOID};
	Datum		lvalues[6];

	lvalues[0] = ObjectIdGetDatum(relid);
	lvalues[1] = sw_int4_array(partition, n);
	lvalues[2] = sw_int8_array(offset, n);
	lvalues[3] = sw_timestamptz_array(event_time, n);
	lvalues[4] = sw_timestamptz_array(watermark, n);
	lvalues[5] = sw_timestamptz_array(arrival, n);
	sw_spi_exec("INSERT INTO streamwm.late_event_log"
				" (stream, partition, sw_offset, sw_event_time, watermark, arrival)"
				" SELECT $1, x.p, x.o, x.t, x.w, x.a"
				" FROM ROWS FROM (pg_catalog.unnest($2), pg_catalog.unnest($3), pg_catalog.unnest($4), pg_catalog.unnest($5), pg_catalog.unnest($6)) AS x(p, o, t, w, a)",
				6, ltypes, lvalues, NULL, SPI_OK_INSERT);
}

/* Run one statement on a stream's catalog rows: $1 the stream, $2 a time. */
static void
exec_stream_time(const char *sql, Oid relid, TimestampTz t, int expected)
{
	Oid			types[2] = {OIDOID, TIMESTAMPTZOID};
	Datum		values[2];

	values[0] = ObjectIdGetDatum(relid);
	values[1] = TimestampTzGetDatum(t);
	sw_spi_exec(sql, 2, types, values, NULL, expected);
}

/*
 * Are late rows logged in the offsets a pane-plan fold reads (pane.c): per
 * partition n, after 'start' and after folded[n] (folded (Datum) 0: none),
 * up to processed[n]?  Rows judged late in this step are logged before the
 * fold runs; a query that is behind, or rebuilds its panes, reads rows of
 * earlier steps too.  One probe of the log's key per partition, as the
 * catalog's owner.
 */
bool
sw_catalog_has_late_in(Oid relid, int64 start, Datum processed, Datum folded)
{
	SwRoleContext cx;
	Oid			types[4] = {OIDOID, INT8OID, INT8ARRAYOID, INT8ARRAYOID};
	Datum		values[4];
	char		nulls[4] = {' ', ' ', ' ', folded == (Datum) 0 ? 'n' : ' '};
	bool		found;

	values[0] = ObjectIdGetDatum(relid);
	values[1] = Int64GetDatum(start);
	values[2] = processed;
	values[3] = folded;
	sw_enter_catalog(&cx);
	sw_spi_exec("SELECT 1 FROM pg_catalog.unnest($3) WITH ORDINALITY AS o(done, n)"
				" WHERE EXISTS (SELECT 1 FROM streamwm.late_event_log l"
				"  WHERE l.stream OPERATOR(pg_catalog.=) $1"
				"    AND l.partition OPERATOR(pg_catalog.=) (o.n OPERATOR(pg_catalog.-) 1)::pg_catalog.int4"
				"    AND l.sw_offset OPERATOR(pg_catalog.>) GREATEST($2, coalesce(($4)[o.n], 0))"
				"    AND l.sw_offset OPERATOR(pg_catalog.<=) o.done)"
				" LIMIT 1",
				4, types, values, nulls, SPI_OK_SELECT);
	found = SPI_processed > 0;
	sw_leave_role(&cx);
	return found;
}

/* Are late rows logged before 'cutoff'? (the caller runs as the catalog's owner) */
bool
sw_catalog_has_late_before(Oid relid, TimestampTz cutoff)
{
	exec_stream_time("SELECT 1 FROM streamwm.late_event_log"
					 " WHERE stream OPERATOR(pg_catalog.=) $1"
					 " AND arrival OPERATOR(pg_catalog.<) $2 LIMIT 1",
					 relid, cutoff, SPI_OK_SELECT);
	return SPI_processed > 0;
}

/* Forget the late rows logged before 'cutoff' (their rows are gone). */
void
sw_catalog_expire_late_log(Oid relid, TimestampTz cutoff)
{
	exec_stream_time("DELETE FROM streamwm.late_event_log"
					 " WHERE stream OPERATOR(pg_catalog.=) $1"
					 " AND arrival OPERATOR(pg_catalog.<) $2",
					 relid, cutoff, SPI_OK_DELETE);
}

/*
 * The newest retention mark with rows below 'horizon' (found on (stream,
 * min_event_time)): its offsets (copied) and W.  False if there is none.
 */
bool
sw_catalog_newest_mark_below(Oid relid, TimestampTz horizon, Datum *offsets,
							 TimestampTz *watermark)
{
	Oid			types[2] = {OIDOID, TIMESTAMPTZOID};
	Datum		values[2];
	bool		isnull;

	values[0] = ObjectIdGetDatum(relid);
	values[1] = TimestampTzGetDatum(horizon);
	sw_spi_exec("SELECT s.offsets, s.watermark FROM (SELECT m.offsets, m.watermark"
				" FROM streamwm.retention_mark m"
				" WHERE m.stream OPERATOR(pg_catalog.=) $1"
				" AND m.min_event_time OPERATOR(pg_catalog.<) $2 OFFSET 0) s"
				" ORDER BY s.watermark DESC LIMIT 1",
				2, types, values, NULL, SPI_OK_SELECT);
	if (SPI_processed == 0)
	{
		SPI_freetuptable(SPI_tuptable);
		return false;
	}
	*offsets = datumCopy(sw_spi_getdatum(0, 1, &isnull), false, -1);
	*watermark = DatumGetTimestampTz(sw_spi_getdatum(0, 2, &isnull));
	SPI_freetuptable(SPI_tuptable);
	return true;
}

/*
 * Retention removed the rows below 'horizon' up to the mark found by
 * sw_catalog_newest_mark_below() (its offsets and W): the older marks go,
 * and that one keeps the horizon as its minimum event time.
 */
void
sw_catalog_consume_marks(Oid relid, TimestampTz horizon, Datum offsets,
						 TimestampTz watermark)
{
	Oid			types[4] = {OIDOID, TIMESTAMPTZOID, INT8ARRAYOID, TIMESTAMPTZOID};
	Datum		values[4];

	values[0] = ObjectIdGetDatum(relid);
	values[1] = TimestampTzGetDatum(horizon);
	values[2] = offsets;
	values[3] = TimestampTzGetDatum(watermark);
	sw_spi_exec("DELETE FROM streamwm.retention_mark"
				" WHERE stream OPERATOR(pg_catalog.=) $1"
				" AND watermark OPERATOR(pg_catalog.<) $4",
				4, types, values, NULL, SPI_OK_DELETE);
	sw_spi_exec("UPDATE streamwm.retention_mark SET min_event_time = $2"
				" WHERE stream OPERATOR(pg_catalog.=) $1"
				" AND watermark OPERATOR(pg_catalog.=) $4"
				" AND min_event_time OPERATOR(pg_catalog.<) $2",
				4, types, values, NULL, SPI_OK_UPDATE);
}

/*
 * Retention removed accepted rows up to 'horizon': record it, for new
 * 'earliest' queries (limit.c) and for recompute() (alter.c).
 */
void
sw_catalog_set_retained_from(Oid relid, TimestampTz horizon)
{
	exec_stream_time("UPDATE streamwm.stream_def"
					 " SET retained_from = GREATEST(retained_from, $2),"
					 " retention_horizon = GREATEST(retention_horizon, $2)"
					 " WHERE stream OPERATOR(pg_catalog.=) $1",
					 relid, horizon, SPI_OK_UPDATE);
}

/* Count rows retention removed in stream_def.expired_rows. */
void
sw_catalog_count_expired(Oid relid, int64 removed)
{
	Oid			types[2] = {OIDOID, INT8OID};
	Datum		values[2];

	values[0] = ObjectIdGetDatum(relid);
	values[1] = Int64GetDatum(removed);
	sw_spi_exec("UPDATE streamwm.stream_def"
				" SET expired_rows = expired_rows OPERATOR(pg_catalog.+) $2"
				" WHERE stream OPERATOR(pg_catalog.=) $1",
				2, types, values, NULL, SPI_OK_UPDATE);
}

/* The names of a stream's queries, in name order. */
List *
sw_catalog_stream_queries(Oid relid)
{
	Oid			types[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(relid)};
	List	   *names = NIL;

	sw_spi_exec("SELECT name FROM streamwm.query_def WHERE stream = $1 ORDER BY name",
				1, types, values, NULL, SPI_OK_SELECT);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;

		names = lappend(names, TextDatumGetCString(sw_spi_getdatum(i, 1, &isnull)));
	}
	return names;
}

/*
 * A query's step succeeded: its windows closed up to closed_until, its
 * counters, the result table it wrote; its error is cleared.
 */
void
sw_catalog_query_succeeded(const char *name, TimestampTz closed_until,
						   int64 windows, int64 rows, Oid result_table,
						   int64 refired)
{
	Oid			utypes[6] = {TEXTOID, TIMESTAMPTZOID, INT8OID, INT8OID, OIDOID, INT8OID};
	Datum		uvalues[6];

	uvalues[0] = CStringGetTextDatum(name);
	uvalues[1] = TimestampTzGetDatum(closed_until);
	uvalues[2] = Int64GetDatum(windows);
	uvalues[3] = Int64GetDatum(rows);
	uvalues[4] = ObjectIdGetDatum(result_table);
	uvalues[5] = Int64GetDatum(refired);
	sw_spi_exec("UPDATE streamwm.query_def SET closed_until = $2,"
				" windows_emitted = windows_emitted + $3,"
				" rows_upserted = rows_upserted + $4, result_table = $5,"
				" windows_refired = windows_refired + $6,"
				" last_error = NULL, last_error_time = NULL, errors = 0"
				" WHERE name = $1",
				6, utypes, uvalues, NULL, SPI_OK_UPDATE);
}

/*
 * The general plan of a query on a stream with allowed_lateness: how far
 * its last successful step read (each partition's processed offset), so
 * that the next finds the rows that may re-fire closed windows.  As the
 * catalog's owner.
 */
void
sw_catalog_record_read(const char *name, Datum offsets)
{
	SwRoleContext cx;
	Oid			types[2] = {TEXTOID, INT8ARRAYOID};
	Datum		values[2];

	values[0] = CStringGetTextDatum(name);
	values[1] = offsets;
	sw_enter_catalog(&cx);
	sw_spi_exec("UPDATE streamwm.query_def SET folded_offsets = $2 WHERE name = $1",
				2, types, values, NULL, SPI_OK_UPDATE);
	sw_leave_role(&cx);
}

/* A query's step failed: record the error (the worker backs off on it). */
void
sw_catalog_query_failed(const char *name, const char *message, bool drop_pane_state)
{
	Oid			etypes[3] = {TEXTOID, TEXTOID, BOOLOID};
	Datum		evalues[3];

	evalues[0] = CStringGetTextDatum(name);
	evalues[1] = CStringGetTextDatum(message);
	evalues[2] = BoolGetDatum(drop_pane_state);
	sw_spi_exec("UPDATE streamwm.query_def SET last_error = $2,"
				" last_error_time = pg_catalog.clock_timestamp(),"
				" errors = errors + 1,"
				" pane_stamp = CASE WHEN $3 THEN NULL ELSE pane_stamp END WHERE name = $1",
				3, etypes, evalues, NULL, SPI_OK_UPDATE);
}

/* Load one query's definition; NULL when there is none. */
SwQueryDef *
sw_catalog_load_query(const char *name)
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
				" 0::pg_catalog.oid), pane_stamp, folded_offsets,"
				" (SELECT d.allowed_lateness FROM streamwm.stream_def d"
				"   WHERE d.stream = query_def.stream), start_closed_until, paused, result_stream,"
				" origin, rows_upserted, time_domain = 'processing',"
				" coalesce(session_from, '-infinity'), coalesce(session_floor, '-infinity'),"
				" count_size, count_slide, count_needs, result_retention"
				" FROM streamwm.query_def WHERE name = $1",
				1, types, values, NULL, SPI_OK_SELECT);
	if (SPI_processed != 1)
		return NULL;
	def = palloc0(sizeof(SwQueryDef));
	def->name = pstrdup(name);
	def->stream = DatumGetObjectId(sw_spi_getdatum(0, 1, &isnull));
	def->query = TextDatumGetCString(sw_spi_getdatum(0, 2, &isnull));
	/* a count query has neither */
	d = sw_spi_getdatum(0, 3, &isnull);
	def->hop_us = isnull ? 0 : sw_interval_usec(DatumGetIntervalP(d));
	d = sw_spi_getdatum(0, 4, &isnull);
	def->size_us = isnull ? 0 : sw_interval_usec(DatumGetIntervalP(d));
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
	d = sw_spi_getdatum(0, 17, &isnull);
	def->lateness_us = isnull ? 0 : sw_interval_usec(DatumGetIntervalP(d));
	d = sw_spi_getdatum(0, 18, &isnull);
	def->start_closed = isnull ? DT_NOBEGIN : DatumGetTimestampTz(d);
	def->paused = DatumGetBool(sw_spi_getdatum(0, 19, &isnull));
	def->result_stream = DatumGetBool(sw_spi_getdatum(0, 20, &isnull));
	def->origin = DatumGetTimestampTz(sw_spi_getdatum(0, 21, &isnull));
	def->rows_upserted = DatumGetInt64(sw_spi_getdatum(0, 22, &isnull));
	def->processing = DatumGetBool(sw_spi_getdatum(0, 23, &isnull));
	/* nothing is late in processing time: nothing re-fires either */
	if (def->processing)
		def->lateness_us = 0;
	def->session = strcmp(TextDatumGetCString(sw_spi_getdatum(0, 13, &isnull)), "session") == 0;
	def->session_from = DatumGetTimestampTz(sw_spi_getdatum(0, 24, &isnull));
	def->session_floor = DatumGetTimestampTz(sw_spi_getdatum(0, 25, &isnull));
	d = sw_spi_getdatum(0, 26, &isnull);
	def->count = !isnull;
	def->count_size = isnull ? 0 : DatumGetInt32(d);
	d = sw_spi_getdatum(0, 27, &isnull);
	def->count_slide = isnull ? 0 : DatumGetInt32(d);
	d = sw_spi_getdatum(0, 28, &isnull);
	def->count_needs = isnull ? DT_NOBEGIN : DatumGetTimestampTz(d);
	/* stored with hop and size 0 (a count query has NULL) */
	def->ordered = def->size_us == 0 && !def->count;
	d = sw_spi_getdatum(0, 29, &isnull);
	def->result_retention_us = isnull ? 0 : sw_interval_usec(DatumGetIntervalP(d));
	return def;
}

/*
 * Record a query's pane table, its stamp, and how far the step folded
 * (folded (Datum) 0: not at all; pane.c).  As the catalog's owner.
 */
void
sw_catalog_record_panes(const char *name, Oid pane_table, const char *stamp,
						Datum folded)
{
	SwRoleContext cx;
	Oid			ctypes[4] = {TEXTOID, OIDOID, TEXTOID, INT8ARRAYOID};
	Datum		cvalues[4];
	char		cnulls[4] = {' ', ' ', ' ', ' '};

	cvalues[0] = CStringGetTextDatum(name);
	cvalues[1] = ObjectIdGetDatum(pane_table);
	cvalues[2] = CStringGetTextDatum(stamp);
	cvalues[3] = folded;
	if (folded == (Datum) 0)
		cnulls[3] = 'n';
	sw_enter_catalog(&cx);
	sw_spi_exec("UPDATE streamwm.query_def SET pane_table = $2, pane_stamp = $3,"
				" folded_offsets = $4 WHERE name = $1",
				4, ctypes, cvalues, cnulls, SPI_OK_UPDATE);
	sw_leave_role(&cx);
}

/*
 * Make a query _register_query has just recorded a count query (count.c):
 * plan 'count', no hop or size, its window size and slide in events.  As
 * the catalog's owner.
 */
void
sw_catalog_make_count_query(const char *name, int32 size, int32 slide)
{
	SwRoleContext cx;
	Oid			types[3] = {TEXTOID, INT4OID, INT4OID};
	Datum		values[3];

	values[0] = CStringGetTextDatum(name);
	values[1] = Int32GetDatum(size);
	values[2] = Int32GetDatum(slide);
	sw_enter_catalog(&cx);
	sw_spi_exec("UPDATE streamwm.query_def SET plan = 'count', hop = NULL, size = NULL,"
				" count_size = $2, count_slide = $3, count_needs = NULL WHERE name = $1",
				3, types, values, NULL, SPI_OK_UPDATE);
	sw_leave_role(&cx);
}

/*
 * A count query's step records the earliest event time it still needs
 * (retention keeps every row from there on).  As the catalog's owner.
 */
void
sw_catalog_record_count_needs(const char *name, TimestampTz needs)
{
	SwRoleContext cx;
	Oid			types[2] = {TEXTOID, TIMESTAMPTZOID};
	Datum		values[2];

	values[0] = CStringGetTextDatum(name);
	values[1] = TimestampTzGetDatum(needs);
	sw_enter_catalog(&cx);
	sw_spi_exec("UPDATE streamwm.query_def SET count_needs = $2 WHERE name = $1",
				2, types, values, NULL, SPI_OK_UPDATE);
	sw_leave_role(&cx);
}

/*
 * The queries whose reads include one of relids or a relation in namespace
 * nspid (when valid), and those whose reads are not known (NULL), as
 * SwStoredQuery; read as the catalog's owner, so row-level security hides
 * no query.  Connects to SPI on its own; copied into the caller's memory
 * context.
 */
List *
sw_catalog_queries_reading(List *relids, Oid nspid)
{
	MemoryContext outer = CurrentMemoryContext;
	Oid			types[2] = {REGCLASSARRAYOID, OIDOID};
	Datum		values[2];
	Datum	   *d;
	int			n = 0;
	ListCell   *lc;
	SwRoleContext cx;
	List	   *result = NIL;

	d = palloc(sizeof(Datum) * Max(list_length(relids), 1));
	foreach(lc, relids)
		d[n++] = ObjectIdGetDatum(lfirst_oid(lc));
	values[0] = PointerGetDatum(construct_array(d, n, REGCLASSOID, sizeof(Oid),
												true, TYPALIGN_INT));
	values[1] = ObjectIdGetDatum(nspid);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	sw_enter_catalog(&cx);
	sw_spi_exec("SELECT q.name, q.owner, q.stream, q.query FROM streamwm.query_def q"
				" WHERE q.reads IS NULL OR q.reads OPERATOR(pg_catalog.&&) $1"
				" OR EXISTS (SELECT 1 FROM pg_catalog.pg_class c"
				"   WHERE c.oid OPERATOR(pg_catalog.=) ANY (q.reads::pg_catalog.oid[])"
				"     AND c.relnamespace OPERATOR(pg_catalog.=) $2)"
				" ORDER BY q.name",
				2, types, values, NULL, SPI_OK_SELECT);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		MemoryContext spi = MemoryContextSwitchTo(outer);
		SwStoredQuery *sq = palloc(sizeof(SwStoredQuery));
		bool		isnull;

		sq->name = TextDatumGetCString(sw_spi_getdatum(i, 1, &isnull));
		sq->owner = DatumGetObjectId(sw_spi_getdatum(i, 2, &isnull));
		sq->stream = DatumGetObjectId(sw_spi_getdatum(i, 3, &isnull));
		sq->query = TextDatumGetCString(sw_spi_getdatum(i, 4, &isnull));
		result = lappend(result, sq);
		MemoryContextSwitchTo(spi);
	}
	sw_leave_role(&cx);
	SPI_finish();
	return result;
}

/*
 * Store a query's text bound again under new names, and what it reads
 * (query_ddl.c).  As the catalog's owner; the caller is connected to SPI.
 */
void
sw_catalog_rebind_query(const char *name, const char *query, Datum reads)
{
	Oid			types[3] = {TEXTOID, TEXTOID, REGCLASSARRAYOID};
	Datum		values[3];
	SwRoleContext cx;

	values[0] = CStringGetTextDatum(name);
	values[1] = CStringGetTextDatum(query);
	values[2] = reads;
	sw_enter_catalog(&cx);
	sw_spi_exec("UPDATE streamwm.query_def SET query = $2, reads = $3 WHERE name = $1",
				3, types, values, NULL, SPI_OK_UPDATE);
	sw_leave_role(&cx);
}

/*
 * Give a query a new text (alter.c): the bound text, the user's text, the
 * plan decided for it and what it reads.  Its pane state is forgotten
 * (pane_stamp, folded_offsets: the next step folds every retained row of
 * its open windows again; the pane table itself too unless keep_panes),
 * and so is its last error: the new text is tried at the next step.
 * closed_until, start_offset, the result table and the counters stay.  As
 * the catalog's owner; the caller is connected to SPI.
 */
void
sw_catalog_alter_query(const char *name, const char *query, const char *query_text,
					   const char *plan, Datum reads, bool keep_panes)
{
	Oid			types[6] = {TEXTOID, TEXTOID, TEXTOID, TEXTOID, REGCLASSARRAYOID, BOOLOID};
	Datum		values[6];
	SwRoleContext cx;

	values[0] = CStringGetTextDatum(name);
	values[1] = CStringGetTextDatum(query);
	values[2] = CStringGetTextDatum(query_text);
	values[3] = CStringGetTextDatum(plan);
	values[4] = reads;
	values[5] = BoolGetDatum(keep_panes);
	sw_enter_catalog(&cx);
	sw_spi_exec("UPDATE streamwm.query_def SET query = $2, query_text = $3, plan = $4,"
				" reads = $5, pane_table = CASE WHEN $6 THEN pane_table END,"
				" pane_stamp = NULL, folded_offsets = NULL,"
				" last_error = NULL, last_error_time = NULL, errors = 0"
				" WHERE name OPERATOR(pg_catalog.=) $1",
				6, types, values, NULL, SPI_OK_UPDATE);
	if (SPI_processed != 1)
		elog(ERROR, "query \"%s\" vanished from streamwm.query_def", name);
	sw_leave_role(&cx);
}

/* One timestamp of a stream's catalog row by sql ($1: the stream), as the catalog's owner. */
static TimestampTz
stream_def_timestamp(Oid relid, const char *sql)
{
	Oid			types[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(relid)};
	TimestampTz result = DT_NOBEGIN;
	bool		isnull;
	SwRoleContext cx;

	sw_enter_catalog(&cx);
	sw_spi_exec(sql, 1, types, values, NULL, SPI_OK_SELECT);
	if (SPI_processed == 1)
		result = DatumGetTimestampTz(sw_spi_getdatum(0, 1, &isnull));
	sw_leave_role(&cx);
	return result;
}

/*
 * How far retention alone removed a stream's rows (stream_def.
 * retention_horizon: rows with event time before it may be gone; purges
 * do not move it), read as the catalog's owner; -infinity if the stream
 * has no row.  The caller is connected to SPI and holds the stream's
 * catalog row locked.
 */
TimestampTz
sw_catalog_retention_horizon(Oid relid)
{
	return stream_def_timestamp(relid, "SELECT retention_horizon FROM streamwm.stream_def"
								" WHERE stream OPERATOR(pg_catalog.=) $1");
}

/*
 * How far retention and purges removed a stream's rows (stream_def.
 * retained_from), read as the catalog's owner with the row locked FOR
 * SHARE (limit.c); -infinity if the stream has no row.  The caller is
 * connected to SPI.
 */
TimestampTz
sw_catalog_retained_from(Oid relid)
{
	return stream_def_timestamp(relid, "SELECT retained_from FROM streamwm.stream_def"
								" WHERE stream OPERATOR(pg_catalog.=) $1 FOR SHARE");
}

/*
 * The processed offset of each of a stream's np partitions into
 * processed[] (left alone for a partition with no row), read as the
 * catalog's owner (monitor.c).  The caller is connected to SPI.
 */
void
sw_catalog_processed_offsets(Oid relid, int np, int64 *processed)
{
	Oid			types[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(relid)};
	SwRoleContext cx;

	sw_enter_catalog(&cx);
	sw_spi_exec("SELECT partition, processed_offset FROM streamwm.partition_state"
				" WHERE stream = $1", 1, types, values, NULL, SPI_OK_SELECT);
	sw_leave_role(&cx);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;
		int			p = DatumGetInt32(sw_spi_getdatum(i, 1, &isnull));

		if (p >= 0 && p < np)
			processed[p] = DatumGetInt64(sw_spi_getdatum(i, 2, &isnull));
	}
}

/*
 * Lock the stream's catalog row as a step does, waiting for a step that
 * holds it, with the latest snapshot (purge.c).  Returns false if relid is
 * not a stream.  As the catalog's owner; the caller is connected to SPI.
 */
bool
sw_catalog_lock_stream_row(Oid relid)
{
	SwRoleContext cx;
	Oid			types[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(relid)};
	bool		found;

	sw_enter_catalog(&cx);
	sw_spi_exec_latest("SELECT 1 FROM streamwm.stream_def WHERE stream = $1 FOR NO KEY UPDATE",
					   1, types, values, NULL, SPI_OK_SELECT);
	found = SPI_processed == 1;
	sw_leave_role(&cx);
	return found;
}

/*
 * Add 'unread' to purged_rows and move retained_from to just after
 * 'newest' (SQL NULL when isnull: no row left a window), with the latest
 * snapshot (purge.c).  As the catalog's owner; the caller is connected to
 * SPI.
 */
void
sw_catalog_record_purge(Oid relid, int64 unread, TimestampTz newest, bool isnull)
{
	SwRoleContext cx;
	Oid			types[3] = {OIDOID, INT8OID, TIMESTAMPTZOID};
	Datum		values[3];
	char		nulls[3] = {' ', ' ', isnull ? 'n' : ' '};

	if (unread == 0 && isnull)
		return;
	values[0] = ObjectIdGetDatum(relid);
	values[1] = Int64GetDatum(unread);
	values[2] = TimestampTzGetDatum(newest);
	sw_enter_catalog(&cx);
	sw_spi_exec_latest("UPDATE streamwm.stream_def"
					   " SET purged_rows = purged_rows + $2,"
					   " retained_from = GREATEST(retained_from, $3 + interval '1 microsecond')"
					   " WHERE stream = $1",
					   3, types, values, nulls, SPI_OK_UPDATE);
	sw_leave_role(&cx);
}

/*
 * Where processing of a stream stands, for a TRUNCATE (purge.c): the
 * processed offset of every partition, in partition order (an int8[] in
 * the SPI result), and W; with the latest snapshot.  False if the stream
 * has no partitions.  As the catalog's owner; the caller is connected to
 * SPI.
 */
bool
sw_catalog_purge_positions(Oid relid, Datum *offsets, Datum *watermark)
{
	SwRoleContext cx;
	Oid			types[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(relid)};
	bool		isnull;
	bool		wm_null;

	sw_enter_catalog(&cx);
	sw_spi_exec_latest("SELECT pg_catalog.array_agg(coalesce(p.processed_offset, 0) ORDER BY g.n),"
					   " pg_catalog.min(d.watermark)"
					   " FROM streamwm.stream_def d"
					   " CROSS JOIN LATERAL pg_catalog.generate_series(0, d.partitions - 1) g(n)"
					   " LEFT JOIN streamwm.partition_state p"
					   "  ON p.stream = d.stream AND p.partition = g.n"
					   " WHERE d.stream = $1",
					   1, types, values, NULL, SPI_OK_SELECT);
	*offsets = sw_spi_getdatum(0, 1, &isnull);
	*watermark = sw_spi_getdatum(0, 2, &wm_null);
	sw_leave_role(&cx);
	return !isnull && !wm_null;
}

/*
 * The worker's schedule: every stream with its granularity, and whether a
 * step was marked as started (and how many in a row were) that did not
 * finish.  As whoever runs it (the worker); the caller is connected to SPI.
 */
List *
sw_catalog_schedule(void)
{
	List	   *streams = NIL;

	sw_spi_exec("SELECT stream, (extract(epoch FROM granularity) * 1000000)::int8,"
				" step_started IS NOT NULL, step_crashes,"
				" (extract(epoch FROM watermark_delay) * 1000000)::int8"
				" FROM streamwm.stream_def", 0, NULL, NULL, NULL,
				SPI_OK_SELECT);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		SwScheduledStream *s = palloc(sizeof(SwScheduledStream));
		bool		isnull;
		Datum		granularity;

		s->stream = DatumGetObjectId(sw_spi_getdatum(i, 1, &isnull));
		granularity = sw_spi_getdatum(i, 2, &s->granularity_null);
		s->granularity_us = s->granularity_null ? 0 : DatumGetInt64(granularity);
		s->step_started = DatumGetBool(sw_spi_getdatum(i, 3, &isnull));
		s->step_crashes = s->step_started ?
			DatumGetInt32(sw_spi_getdatum(i, 4, &isnull)) : 0;
		s->delay_us = DatumGetInt64(sw_spi_getdatum(i, 5, &isnull));
		streams = lappend(streams, s);
	}
	return streams;
}

/*
 * The steps marked as started on these streams did not finish: clear the
 * marks and count the crash, skipping a stream a step holds now.
 */
void
sw_catalog_steps_crashed(List *relids)
{
	Oid			types[1] = {OIDARRAYOID};
	Datum		values[1];
	Datum	   *oids = palloc(list_length(relids) * sizeof(Datum));
	ListCell   *lc;
	int			n = 0;

	foreach(lc, relids)
		oids[n++] = ObjectIdGetDatum(lfirst_oid(lc));
	values[0] = PointerGetDatum(construct_array(oids, n, OIDOID, sizeof(Oid), true,
												TYPALIGN_INT));
	sw_spi_exec("UPDATE streamwm.stream_def SET step_started = NULL,"
				" step_crashes = step_crashes + 1"
				" WHERE stream IN (SELECT d.stream FROM streamwm.stream_def d"
				" WHERE d.stream::pg_catalog.oid OPERATOR(pg_catalog.=) ANY ($1)"
				" FOR NO KEY UPDATE SKIP LOCKED)",
				1, types, values, NULL, SPI_OK_UPDATE);
}

/*
 * Mark a step on the stream as started (worker.c), unless a step holds it
 * now; the step's sw_catalog_store_step() clears the mark.
 */
void
sw_catalog_mark_step_started(Oid relid)
{
	Oid			types[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(relid)};

	sw_spi_exec("UPDATE streamwm.stream_def SET step_started = pg_catalog.clock_timestamp()"
				" WHERE stream IN (SELECT d.stream FROM streamwm.stream_def d"
				" WHERE d.stream OPERATOR(pg_catalog.=) $1 FOR NO KEY UPDATE SKIP LOCKED)",
				1, types, values, NULL, SPI_OK_UPDATE);
}

/*
 * The process holding a stream's catalog row, as far as we can tell: the
 * backend whose transaction (or subtransaction) id is the row's xmax.  0
 * when it cannot be found (e.g. the lock is a multixact).
 */
int
sw_catalog_stream_holder_pid(Oid relid)
{
	Oid			types[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(relid)};
	bool		isnull;
	int			pid = 0;

	sw_spi_exec("SELECT l.pid FROM pg_catalog.pg_locks l, streamwm.stream_def d"
				" WHERE d.stream OPERATOR(pg_catalog.=) $1"
				" AND l.locktype OPERATOR(pg_catalog.=) 'transactionid'"
				" AND l.mode OPERATOR(pg_catalog.=) 'ExclusiveLock' AND l.granted"
				" AND l.transactionid OPERATOR(pg_catalog.=) d.xmax LIMIT 1",
				1, types, values, NULL, SPI_OK_SELECT);
	if (SPI_processed == 1)
	{
		Datum		d = sw_spi_getdatum(0, 1, &isnull);

		if (!isnull)
			pid = DatumGetInt32(d);
	}
	return pid;
}

/*
 * A session query's step (session.c): the rows it is done with end at
 * session_from (the start of its earliest open session, or W).  In the
 * step's subtransaction, with closed_until.  As the catalog's owner.
 */
void
sw_catalog_record_session_from(const char *name, TimestampTz session_from)
{
	SwRoleContext cx;
	Oid			types[2] = {TEXTOID, TIMESTAMPTZOID};
	Datum		values[2];

	values[0] = CStringGetTextDatum(name);
	values[1] = TimestampTzGetDatum(session_from);
	sw_enter_catalog(&cx);
	sw_spi_exec("UPDATE streamwm.query_def SET session_from = $2 WHERE name = $1",
				2, types, values, NULL, SPI_OK_UPDATE);
	sw_leave_role(&cx);
}

/*
 * Make the query just registered in this transaction (by
 * _create_session_query) a session query: its plan, gap, where its rows
 * start and, for 'earliest', the first session start whose rows retention
 * cannot have touched.  A query registered earlier, or already a session
 * query, is refused: its state was built for hopping windows.  The caller
 * manages the query and is connected to SPI.
 */
void
sw_catalog_make_session(const char *name, Datum gap, int64 gap_us)
{
	SwRoleContext cx;
	Oid			types[1] = {TEXTOID};
	Datum		values[1];
	Oid			utypes[4] = {TEXTOID, INTERVALOID, TIMESTAMPTZOID, TIMESTAMPTZOID};
	Datum		uvalues[4];
	char		unulls[4] = {' ', ' ', ' ', ' '};
	bool		isnull;
	TransactionId xmin;
	bool		earliest;
	Oid			stream;
	TimestampTz closed_until;
	TimestampTz retained_from;

	values[0] = CStringGetTextDatum(name);
	sw_enter_catalog(&cx);
	sw_spi_exec("SELECT xmin, plan OPERATOR(pg_catalog.=) 'session', start_from"
				" OPERATOR(pg_catalog.=) 'earliest', stream, closed_until,"
				" hop OPERATOR(pg_catalog.=) size"
				" FROM streamwm.query_def WHERE name = $1",
				1, types, values, NULL, SPI_OK_SELECT);
	if (SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("query \"%s\" does not exist", name)));
	xmin = DatumGetTransactionId(sw_spi_getdatum(0, 1, &isnull));
	if (!TransactionIdIsCurrentTransactionId(xmin) ||
		DatumGetBool(sw_spi_getdatum(0, 2, &isnull)) ||
		!DatumGetBool(sw_spi_getdatum(0, 6, &isnull)))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("query \"%s\" cannot be made a session query", name),
				 errhint("Use streamwm.create_session_query().")));
	earliest = DatumGetBool(sw_spi_getdatum(0, 3, &isnull));
	stream = DatumGetObjectId(sw_spi_getdatum(0, 4, &isnull));
	closed_until = DatumGetTimestampTz(sw_spi_getdatum(0, 5, &isnull));
	SPI_freetuptable(SPI_tuptable);

	uvalues[0] = values[0];
	uvalues[1] = gap;
	if (earliest)
	{
		/*
		 * Every retained row; a session that starts less than gap after
		 * the rows retention removed may have lost its first events.  The
		 * stream's row is read FOR SHARE: a step removing rows commits
		 * first (as for a hopping 'earliest' query).
		 */
		retained_from = sw_catalog_retained_from(stream);
		unulls[2] = 'n';
		if (TIMESTAMP_NOT_FINITE(retained_from) ||
			pg_add_s64_overflow(retained_from, gap_us, &retained_from) ||
			!IS_VALID_TIMESTAMP(retained_from))
			unulls[3] = 'n';
		else
			uvalues[3] = TimestampTzGetDatum(retained_from);
	}
	else
	{
		/* rows after the query's start are accepted at or above W */
		uvalues[2] = TimestampTzGetDatum(closed_until);
		unulls[3] = 'n';
	}
	sw_spi_exec("UPDATE streamwm.query_def SET plan = 'session',"
				" gap = $2,"
				" session_from = $3, session_floor = $4 WHERE name = $1",
				4, utypes, uvalues, unulls, SPI_OK_UPDATE);
	sw_leave_role(&cx);
}
