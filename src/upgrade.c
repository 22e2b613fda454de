/*-------------------------------------------------------------------------
 * upgrade.c
 *	  Owns what the extension's update scripts (sql/streamwm--X--Y.sql)
 *	  need from C, and the C entry points that an older version's script
 *	  names but this version no longer uses.
 *
 * streamwm_internal._upgrade_query(name): streamwm--0.1--0.2.sql creates it, calls it
 * once per query and drops it again, so a fresh 0.2 installation never has
 * it.  A 0.1 query kept the text its creator wrote and was analyzed at
 * every step under the search_path recorded in query_def; 0.2 keeps the
 * text bound (deparsed with every name qualified, query.c) and decides the
 * plan once (pane or general) and what the query reads (the DDL guard,
 * query_ddl.c).  This function does for a 0.1 query what create_query does
 * for a new one: it analyzes the recorded text as the query's owner under
 * the recorded search_path (what the 0.1 steps did), and stores the bound
 * text, the plan, the relations read and search_path = pg_catalog,
 * pg_temp.  It may only run inside an extension script (creating_extension),
 * as the extension's owner.
 *
 * The stubs: CREATE FUNCTION of a C function checks that its symbol exists,
 * also when pg_dump --binary-upgrade (pg_upgrade) re-creates a 0.1
 * installation member by member with this library, and a 0.1 database calls
 * 0.1's functions until ALTER EXTENSION streamwm UPDATE.  0.1's
 * _check_expression and _reads_stream are gone in 0.2; their symbols stay
 * and only say that the extension must be updated (version.c).
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "catalog.h"
#include "query.h"
#include "version.h"
#include "window.h"

PG_FUNCTION_INFO_V1(streamwm_upgrade_query);
PG_FUNCTION_INFO_V1(streamwm_check_expression);
PG_FUNCTION_INFO_V1(streamwm_reads_stream);

/* query.c: streamwm_internal._bind_query(text), under the current search_path */
extern Datum streamwm_bind_query(PG_FUNCTION_ARGS);

/*
 * streamwm_internal._upgrade_query(name text) RETURNS void; see the file header.
 * The caller (the update script) catches an error, which it records as the
 * query's last_error: a query that no longer analyzes fails in its steps
 * as it did in 0.1's.
 */
Datum
streamwm_upgrade_query(PG_FUNCTION_ARGS)
{
	Oid			types[4] = {TEXTOID, TEXTOID, TEXTOID, REGCLASSARRAYOID};
	Datum		values[4];
	bool		isnull;
	Oid			stream;
	char	   *query;
	int64		hop_us;
	int64		size_us;
	char	   *search_path;
	Oid			owner;
	SwRoleContext cx;
	Datum		bound;
	const char *plan;
	Datum		reads;

	if (!creating_extension)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("streamwm_internal._upgrade_query() may only be called by an extension update script")));
	sw_require_extension_version();
	values[0] = PG_GETARG_DATUM(0);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	sw_spi_exec("SELECT stream, query, hop, size, search_path, owner"
				" FROM streamwm.query_def WHERE name = $1",
				1, types, values, NULL, SPI_OK_SELECT);
	if (SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("query \"%s\" does not exist", TextDatumGetCString(values[0]))));
	stream = DatumGetObjectId(sw_spi_getdatum(0, 1, &isnull));
	query = TextDatumGetCString(sw_spi_getdatum(0, 2, &isnull));
	hop_us = sw_interval_usec(DatumGetIntervalP(sw_spi_getdatum(0, 3, &isnull)));
	size_us = sw_interval_usec(DatumGetIntervalP(sw_spi_getdatum(0, 4, &isnull)));
	search_path = TextDatumGetCString(sw_spi_getdatum(0, 5, &isnull));
	owner = DatumGetObjectId(sw_spi_getdatum(0, 6, &isnull));

	/* as 0.1's steps analyzed it: its owner, its recorded search_path */
	sw_enter_role(owner, search_path, &cx);
	bound = DirectFunctionCall1(streamwm_bind_query, CStringGetTextDatum(query));
	sw_leave_role(&cx);

	/* as create_query decides them (catalog.c, streamwm_register_query) */
	sw_enter_role(owner, SW_SAFE_SEARCH_PATH, &cx);
	plan = sw_choose_plan(stream, TextDatumGetCString(bound), hop_us, size_us);
	reads = sw_query_reads(sw_analyze_bound_query(TextDatumGetCString(bound)));
	sw_leave_role(&cx);

	values[1] = bound;
	values[2] = CStringGetTextDatum(plan);
	values[3] = reads;
	sw_spi_exec("UPDATE streamwm.query_def SET query = $2, plan = $3, reads = $4,"
				" search_path = '" SW_SAFE_SEARCH_PATH "' WHERE name = $1",
				4, types, values, NULL, SPI_OK_UPDATE);
	SPI_finish();
	PG_RETURN_VOID();
}

/* 0.1's streamwm._check_expression(regclass, text, boolean) */
Datum
streamwm_check_expression(PG_FUNCTION_ARGS)
{
	sw_require_extension_version();
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("streamwm._check_expression() is not part of streamwm %s",
					SW_LIBRARY_VERSION)));
	PG_RETURN_NULL();
}

/* 0.1's streamwm._reads_stream(text, regclass) */
Datum
streamwm_reads_stream(PG_FUNCTION_ARGS)
{
	sw_require_extension_version();
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("streamwm._reads_stream() is not part of streamwm %s",
					SW_LIBRARY_VERSION)));
	PG_RETURN_NULL();
}
