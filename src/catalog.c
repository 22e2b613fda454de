/*-------------------------------------------------------------------------
 * catalog.c
 *	  Owns access to streamwm's catalog tables (streamwm.stream_def,
 *	  partition_state, query_def, late_event_log; defined in
 *	  sql/streamwm--0.1.sql) and the SPI helpers the other files share.
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/guc.h"
#include "utils/syscache.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

#include "catalog.h"

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
 * Connects to SPI on its own, so it can be called from anywhere.
 */
int
sw_stream_partitions(Oid relid)
{
	Oid			types[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(relid)};
	bool		isnull;
	int			n = 0;
	bool		found;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	sw_spi_exec("SELECT partitions FROM streamwm.stream_def WHERE stream = $1",
				1, types, values, NULL, SPI_OK_SELECT);
	found = SPI_processed == 1;
	if (found)
		n = DatumGetInt32(sw_spi_getdatum(0, 1, &isnull));
	SPI_finish();
	if (!found)
	{
		char	   *name = get_rel_name(relid);

		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 name ? errmsg("\"%s\" is not a stream", name)
				 : errmsg("stream with OID %u does not exist", relid),
				 errhint("Create it with streamwm.create_stream().")));
	}
	return n;
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
 * Re-raise the error being handled (inside PG_CATCH) with more said about
 * where it happened: a prefix for its message ("row 3, column \"v\""), a
 * context line, and for errors in a text the user gave us (an expression, a
 * query), its position in that text rather than in the calling statement.
 * 'cxt' is the memory context that was current before PG_TRY.
 */
void
sw_reraise(MemoryContext cxt, const char *prefix, const char *context,
		   const char *source)
{
	ErrorData  *edata;

	MemoryContextSwitchTo(cxt);
	edata = CopyErrorData();
	FlushErrorState();
	ereport(ERROR,
			(errcode(edata->sqlerrcode),
			 prefix ? errmsg_internal("%s: %s", prefix, edata->message)
			 : errmsg_internal("%s", edata->message),
			 edata->detail ? errdetail_internal("%s", edata->detail) : 0,
			 edata->hint ? errhint("%s", edata->hint) : 0,
			 context ? errcontext("%s", context) : 0,
			 (source && edata->cursorpos > 0) ? internalerrposition(edata->cursorpos) : 0,
			 (source && edata->cursorpos > 0) ? internalerrquery(source) : 0));
}

/*
 * Run what follows as 'role', with SECURITY_RESTRICTED_OPERATION and the
 * given search_path, as matview.c does for REFRESH: the user's SQL (a
 * query, triggers and policies on a stream or result table) never runs with
 * the rights of whoever runs the step, a superuser worker included.  Undone
 * by sw_leave_role(), or by the abort of the (sub)transaction.
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
}

void
sw_leave_role(SwRoleContext *cx)
{
	AtEOXact_GUC(false, cx->save_nestlevel);
	SetUserIdAndSecContext(cx->save_userid, cx->save_sec_context);
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
