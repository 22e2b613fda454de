/*-------------------------------------------------------------------------
 * purge.c
 *	  Owns the accounting of rows a user purges from a stream (SPEC sections
 *	  3 and 8): DELETE and TRUNCATE are allowed, and a purged row that
 *	  processing had not read yet is counted, like a row removed by
 *	  retention, in streamwm.stream_def.purged_rows.
 *
 * Two statement triggers on every stream table (created by create_stream,
 * kept by guard.c like every sw_* trigger) and one call from the BEFORE
 * TRUNCATE trigger (guard.c):
 *
 *	 sw_purge_start	 BEFORE DELETE FOR EACH STATEMENT: locks the stream's
 *					 catalog row as a step does (FOR NO KEY UPDATE), so that
 *					 no step runs between the DELETE and its commit.  The
 *					 lock order is then the step's (catalog row, then stream
 *					 rows), so a DELETE never deadlocks with retention, and
 *					 which rows processing has read (processed_offset) cannot
 *					 change under the count.
 *	 sw_purge		 AFTER DELETE FOR EACH STATEMENT REFERENCING OLD TABLE AS
 *					 sw_purged: counts the deleted rows whose sw_offset is
 *					 above their partition's processed_offset, adds them to
 *					 purged_rows, and moves retained_from past the newest
 *					 event time the DELETE removed from a window (the
 *					 accepted rows and the unread ones; a late row is in no
 *					 window), so that a new 'earliest' query never starts
 *					 with a window that lost rows (limit.c).
 *	 TRUNCATE		 sw_purge_truncate(), from the BEFORE TRUNCATE trigger,
 *					 counts the same from the table before its rows go.
 *
 * Retention's own DELETE (process.c) is marked by a backend-local flag
 * (the stream whose retention is running) and both triggers return at
 * once for it: it removes only rows processing has read, and records
 * retained_from itself.  What it still pays is PostgreSQL's capture of the
 * transition table.
 *
 * The catalog is read and written as its owner (sw_enter_catalog), with
 * the latest snapshot rather than the transaction's: under REPEATABLE
 * READ, the row a step committed after the transaction began is the one to
 * lock and add to.
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "catalog.h"
#include "guard.h"
#include "limit.h"
#include "purge.h"

PG_FUNCTION_INFO_V1(streamwm_stream_purge);

/* the stream whose retention DELETE is running in this backend, if any */
static Oid	retention_relid = InvalidOid;

/*
 * Run one of our statements with the latest snapshot (see the file
 * header).  The caller is connected to SPI.
 */
static void
purge_exec(const char *sql, int nargs, Oid *types, Datum *values, int expected)
{
	SPIPlanPtr	plan = SPI_prepare(sql, nargs, types);
	int			rc;

	if (plan == NULL)
		elog(ERROR, "streamwm: preparing \"%s\" failed: %s",
			 sql, SPI_result_code_string(SPI_result));
	rc = SPI_execute_snapshot(plan, values, NULL, GetLatestSnapshot(),
							  InvalidSnapshot, false, true, 0);
	if (rc != expected)
		elog(ERROR, "streamwm: \"%s\" failed: %s", sql, SPI_result_code_string(rc));
	SPI_freeplan(plan);
}

/*
 * Lock the stream's catalog row as a step does, waiting for a step that
 * holds it.  Returns false if relid is not a stream.  As the catalog's
 * owner; the caller is connected to SPI.
 */
static bool
lock_stream_row(Oid relid)
{
	SwRoleContext cx;
	Oid			types[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(relid)};
	bool		found;

	sw_enter_catalog(&cx);
	purge_exec("SELECT 1 FROM streamwm.stream_def WHERE stream = $1 FOR NO KEY UPDATE",
			   1, types, values, SPI_OK_SELECT);
	found = SPI_processed == 1;
	sw_leave_role(&cx);
	return found;
}

/*
 * Add 'unread' to purged_rows and move retained_from to just after
 * 'newest' (SQL NULL when isnull: no row left a window).  As the catalog's
 * owner; the caller is connected to SPI.
 */
static void
record_purge(Oid relid, int64 unread, TimestampTz newest, bool isnull)
{
	SwRoleContext cx;
	Oid			types[3] = {OIDOID, INT8OID, TIMESTAMPTZOID};
	Datum		values[3];
	char		nulls[3] = {' ', ' ', isnull ? 'n' : ' '};
	SPIPlanPtr	plan;
	int			rc;
	const char *sql = "UPDATE streamwm.stream_def"
		" SET purged_rows = purged_rows + $2,"
		" retained_from = GREATEST(retained_from, $3 + interval '1 microsecond')"
		" WHERE stream = $1";

	if (unread == 0 && isnull)
		return;
	values[0] = ObjectIdGetDatum(relid);
	values[1] = Int64GetDatum(unread);
	values[2] = TimestampTzGetDatum(newest);
	sw_enter_catalog(&cx);
	plan = SPI_prepare(sql, 3, types);
	if (plan == NULL)
		elog(ERROR, "streamwm: preparing \"%s\" failed: %s",
			 sql, SPI_result_code_string(SPI_result));
	rc = SPI_execute_snapshot(plan, values, nulls, GetLatestSnapshot(),
							  InvalidSnapshot, false, true, 0);
	if (rc != SPI_OK_UPDATE)
		elog(ERROR, "streamwm: \"%s\" failed: %s", sql, SPI_result_code_string(rc));
	SPI_freeplan(plan);
	sw_leave_role(&cx);
}

/*
 * streamwm._stream_purge(): the sw_purge_start (BEFORE) and sw_purge
 * (AFTER, with the transition table sw_purged) DELETE statement triggers
 * of every stream table.  See the file header.
 */
Datum
streamwm_stream_purge(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	Relation	rel;
	Oid			relid;
	SwStreamColumns cols;
	SwRoleContext cx;
	Oid			types[1] = {OIDOID};
	Datum		values[1];
	bool		isnull;
	bool		newest_null;
	int64		unread;
	TimestampTz newest;

	if (!CALLED_AS_TRIGGER(fcinfo) ||
		!TRIGGER_FIRED_BY_DELETE(trigdata->tg_event) ||
		!TRIGGER_FIRED_FOR_STATEMENT(trigdata->tg_event))
		elog(ERROR, "streamwm._stream_purge() must be a DELETE statement trigger");
	rel = trigdata->tg_relation;
	relid = RelationGetRelid(rel);

	/* retention's own DELETE: nothing to count, retained_from is moved */
	if (relid == retention_relid)
		return PointerGetDatum(NULL);

	if (TRIGGER_FIRED_BEFORE(trigdata->tg_event))
	{
		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "SPI_connect failed");
		(void) lock_stream_row(relid);
		SPI_finish();
		return PointerGetDatum(NULL);
	}

	if (trigdata->tg_oldtable == NULL)
		elog(ERROR, "streamwm._stream_purge() must be created REFERENCING OLD TABLE AS sw_purged");
	if (tuplestore_tuple_count(trigdata->tg_oldtable) == 0)
		return PointerGetDatum(NULL);
	/* the transition table has the stream's columns: check their types */
	sw_check_stream_columns(rel, &cols);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_register_trigger_data(trigdata) != SPI_OK_TD_REGISTER)
		elog(ERROR, "streamwm: registering the transition table failed");
	/* normally taken by sw_purge_start already */
	if (!lock_stream_row(relid))
	{
		SPI_finish();
		return PointerGetDatum(NULL);
	}
	values[0] = ObjectIdGetDatum(relid);
	sw_enter_catalog(&cx);
	purge_exec("SELECT count(*) FILTER (WHERE o.sw_offset > coalesce(p.processed_offset, 0)),"
			   " max(o.sw_event_time) FILTER ("
			   "  WHERE o.sw_offset > coalesce(p.processed_offset, 0)"
			   "  OR NOT EXISTS (SELECT 1 FROM streamwm.late_event_log l"
			   "   WHERE l.stream = $1 AND l.partition = o.sw_partition"
			   "   AND l.sw_offset = o.sw_offset))"
			   " FROM sw_purged o LEFT JOIN streamwm.partition_state p"
			   " ON p.stream = $1 AND p.partition = o.sw_partition",
			   1, types, values, SPI_OK_SELECT);
	unread = DatumGetInt64(sw_spi_getdatum(0, 1, &isnull));
	newest = DatumGetTimestampTz(sw_spi_getdatum(0, 2, &newest_null));
	sw_leave_role(&cx);
	record_purge(relid, unread, newest, newest_null);
	SPI_finish();
	return PointerGetDatum(NULL);
}

/*
 * Called by the BEFORE TRUNCATE trigger of a stream (guard.c): count the
 * rows processing has not read yet, and the newest event time that leaves
 * a window, before TRUNCATE removes them.  The table is read as its owner,
 * as a step reads it, with the latest snapshot: TRUNCATE holds an ACCESS
 * EXCLUSIVE lock, so every row it removes is committed and in it.
 */
void
sw_purge_truncate(Relation rel)
{
	Oid			relid = RelationGetRelid(rel);
	Oid			owner = rel->rd_rel->relowner;
	char	   *relname = sw_relation_name(relid);
	SwStreamColumns cols;
	SwRoleContext cx;
	Oid			types[3] = {OIDOID, INT8ARRAYOID, TIMESTAMPTZOID};
	Datum		values[3];
	bool		isnull;
	bool		wm_null;
	bool		newest_null = true;
	int64		unread;
	TimestampTz newest = 0;
	static const Oid count_type[1] = {INT8OID};
	static const Oid newest_type[1] = {TIMESTAMPTZOID};

	sw_check_stream_columns(rel, &cols);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (!lock_stream_row(relid))
	{
		SPI_finish();
		return;
	}

	/* the processed offset of every partition, in partition order */
	values[0] = ObjectIdGetDatum(relid);
	sw_enter_catalog(&cx);
	purge_exec("SELECT pg_catalog.array_agg(coalesce(p.processed_offset, 0) ORDER BY g.n),"
			   " pg_catalog.min(d.watermark)"
			   " FROM streamwm.stream_def d"
			   " CROSS JOIN LATERAL pg_catalog.generate_series(0, d.partitions - 1) g(n)"
			   " LEFT JOIN streamwm.partition_state p"
			   "  ON p.stream = d.stream AND p.partition = g.n"
			   " WHERE d.stream = $1",
			   1, types, values, SPI_OK_SELECT);
	values[1] = sw_spi_getdatum(0, 1, &isnull);
	values[2] = sw_spi_getdatum(0, 2, &wm_null);
	sw_leave_role(&cx);
	if (isnull || wm_null)
		elog(ERROR, "streamwm: stream %s has no partitions", relname);

	/*
	 * Unread rows: above their partition's processed offset, found by the
	 * primary key as a step finds them.  A row of no partition 0..n-1 would
	 * never be read, so it counts too.
	 */
	sw_enter_role(owner, SW_SAFE_SEARCH_PATH, &cx);
	purge_exec(psprintf("SELECT (SELECT count(*)"
						"  FROM pg_catalog.unnest($2::int8[]) WITH ORDINALITY AS p(done, n)"
						"  CROSS JOIN LATERAL (SELECT 1 FROM ONLY %s t"
						"   WHERE t.sw_partition = (p.n - 1)::int4 AND t.sw_offset > p.done) s)"
						" + (SELECT count(*) FROM ONLY %s t"
						"  WHERE t.sw_partition < 0"
						"  OR t.sw_partition >= pg_catalog.cardinality($2::int8[]))",
						relname, relname),
			   2, types, values, SPI_OK_SELECT);
	sw_check_result_types(SPI_tuptable->tupdesc, count_type, 1, relname);
	unread = DatumGetInt64(sw_spi_getdatum(0, 1, &isnull));

	/*
	 * The newest event time that leaves a window: of an unread row, or of a
	 * read row that is not late.  Such rows at or after W are looked for
	 * first, through the BRIN index on sw_event_time (the last block ranges
	 * of the table); when there is none, the whole table is read.
	 */
	for (int pass = 0; pass < 2 && newest_null; pass++)
	{
		purge_exec(psprintf("SELECT pg_catalog.max(t.sw_event_time) FROM ONLY %s t"
							" WHERE (t.sw_offset > coalesce(($2::int8[])[t.sw_partition + 1], 0)"
							" OR NOT EXISTS (SELECT 1 FROM streamwm.late_event_log l"
							"  WHERE l.stream = $1 AND l.partition = t.sw_partition"
							"  AND l.sw_offset = t.sw_offset))%s",
							relname, pass == 0 ? " AND t.sw_event_time >= $3" : ""),
				   pass == 0 ? 3 : 2, types, values, SPI_OK_SELECT);
		sw_check_result_types(SPI_tuptable->tupdesc, newest_type, 1, relname);
		newest = DatumGetTimestampTz(sw_spi_getdatum(0, 1, &newest_null));
		/* with W at -infinity the first pass read everything */
		if (TIMESTAMP_IS_NOBEGIN(DatumGetTimestampTz(values[2])))
			break;
	}
	sw_leave_role(&cx);

	record_purge(relid, unread, newest, newest_null);
	SPI_finish();
}

/*
 * Retention's DELETE on a stream (process.c): run as the caller set it up
 * (the stream's owner), under streamwm.query_timeout (the owner's triggers
 * and policies run in it), with the purge triggers told to stand aside.
 */
void
sw_retention_delete(Oid relid, const char *relname, const char *sql,
					int nargs, Oid *types, Datum *values)
{
	Oid			save = retention_relid;

	retention_relid = relid;
	PG_TRY();
	{
		sw_spi_exec_bounded(psprintf("retention of stream %s", relname),
							sql, nargs, types, values, NULL, SPI_OK_DELETE);
	}
	PG_FINALLY();
	{
		retention_relid = save;
	}
	PG_END_TRY();
}
