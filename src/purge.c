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
 * the latest snapshot rather than the transaction's (sw_spi_exec_latest):
 * under REPEATABLE READ, the row a step committed after the transaction
 * began is the one to lock and add to.  Those statements are in catalog.c
 * (sw_catalog_lock_stream_row, sw_catalog_record_purge,
 * sw_catalog_purge_positions).
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
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "catalog.h"
#include "guard.h"
#include "limit.h"
#include "purge.h"
#include "version.h"

PG_FUNCTION_INFO_V1(streamwm_stream_purge);

/* the stream whose retention DELETE is running in this backend, if any */
static Oid	retention_relid = InvalidOid;

/*
 * streamwm_internal._stream_purge(): the sw_purge_start (BEFORE) and sw_purge
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

	sw_require_extension_version();

	if (!CALLED_AS_TRIGGER(fcinfo) ||
		!TRIGGER_FIRED_BY_DELETE(trigdata->tg_event) ||
		!TRIGGER_FIRED_FOR_STATEMENT(trigdata->tg_event))
		elog(ERROR, "streamwm_internal._stream_purge() must be a DELETE statement trigger");
	rel = trigdata->tg_relation;
	relid = RelationGetRelid(rel);

	/* retention's own DELETE: nothing to count, retained_from is moved */
	if (relid == retention_relid)
		return PointerGetDatum(NULL);

	if (TRIGGER_FIRED_BEFORE(trigdata->tg_event))
	{
		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "SPI_connect failed");
		(void) sw_catalog_lock_stream_row(relid);
		SPI_finish();
		return PointerGetDatum(NULL);
	}

	if (trigdata->tg_oldtable == NULL)
		elog(ERROR, "streamwm_internal._stream_purge() must be created REFERENCING OLD TABLE AS sw_purged");
	if (tuplestore_tuple_count(trigdata->tg_oldtable) == 0)
		return PointerGetDatum(NULL);
	/* the transition table has the stream's columns: check their types */
	sw_check_stream_columns(rel, &cols);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_register_trigger_data(trigdata) != SPI_OK_TD_REGISTER)
		elog(ERROR, "streamwm: registering the transition table failed");
	/* normally taken by sw_purge_start already */
	if (!sw_catalog_lock_stream_row(relid))
	{
		SPI_finish();
		return PointerGetDatum(NULL);
	}
	values[0] = ObjectIdGetDatum(relid);
	sw_enter_catalog(&cx);
	sw_spi_exec_latest("SELECT count(*) FILTER (WHERE o.sw_offset > coalesce(p.processed_offset, 0)),"
			   " max(o.sw_event_time) FILTER ("
			   "  WHERE o.sw_offset > coalesce(p.processed_offset, 0)"
			   "  OR NOT EXISTS (SELECT 1 FROM streamwm.late_event_log l"
			   "   WHERE l.stream = $1 AND l.partition = o.sw_partition"
			   "   AND l.sw_offset = o.sw_offset))"
			   " FROM sw_purged o LEFT JOIN streamwm.partition_state p"
			   " ON p.stream = $1 AND p.partition = o.sw_partition",
			   1, types, values, NULL, SPI_OK_SELECT);
	unread = DatumGetInt64(sw_spi_getdatum(0, 1, &isnull));
	newest = DatumGetTimestampTz(sw_spi_getdatum(0, 2, &newest_null));
	sw_leave_role(&cx);
	sw_catalog_record_purge(relid, unread, newest, newest_null);
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
	bool		newest_null = true;
	int64		unread;
	TimestampTz newest = 0;
	static const Oid count_type[1] = {INT8OID};
	static const Oid newest_type[1] = {TIMESTAMPTZOID};

	sw_check_stream_columns(rel, &cols);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (!sw_catalog_lock_stream_row(relid))
	{
		SPI_finish();
		return;
	}

	/* the processed offset of every partition, in partition order */
	values[0] = ObjectIdGetDatum(relid);
	if (!sw_catalog_purge_positions(relid, &values[1], &values[2]))
		elog(ERROR, "streamwm: stream %s has no partitions", relname);

	/*
	 * Unread rows: above their partition's processed offset, found by the
	 * primary key as a step finds them.  A row of no partition 0..n-1 would
	 * never be read, so it counts too.
	 */
	sw_enter_role(owner, SW_SAFE_SEARCH_PATH, &cx);
	sw_spi_exec_latest(psprintf("SELECT (SELECT count(*)"
						"  FROM pg_catalog.unnest($2::int8[]) WITH ORDINALITY AS p(done, n)"
						"  CROSS JOIN LATERAL (SELECT 1 FROM ONLY %s t"
						"   WHERE t.sw_partition = (p.n - 1)::int4 AND t.sw_offset > p.done) s)"
						" + (SELECT count(*) FROM ONLY %s t"
						"  WHERE t.sw_partition < 0"
						"  OR t.sw_partition >= pg_catalog.cardinality($2::int8[]))",
						relname, relname),
			   2, types, values, NULL, SPI_OK_SELECT);
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
		sw_spi_exec_latest(psprintf("SELECT pg_catalog.max(t.sw_event_time) FROM ONLY %s t"
							" WHERE (t.sw_offset > coalesce(($2::int8[])[t.sw_partition + 1], 0)"
							" OR NOT EXISTS (SELECT 1 FROM streamwm.late_event_log l"
							"  WHERE l.stream = $1 AND l.partition = t.sw_partition"
							"  AND l.sw_offset = t.sw_offset))%s",
							relname, pass == 0 ? " AND t.sw_event_time >= $3" : ""),
				   pass == 0 ? 3 : 2, types, values, NULL, SPI_OK_SELECT);
		sw_check_result_types(SPI_tuptable->tupdesc, newest_type, 1, relname);
		newest = DatumGetTimestampTz(sw_spi_getdatum(0, 1, &newest_null));
		/* with W at -infinity the first pass read everything */
		if (TIMESTAMP_IS_NOBEGIN(DatumGetTimestampTz(values[2])))
			break;
	}
	sw_leave_role(&cx);

	sw_catalog_record_purge(relid, unread, newest, newest_null);
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
							sql, nargs, types, values, NULL,
							strstr(sql, " RETURNING ") ? SPI_OK_DELETE_RETURNING : SPI_OK_DELETE,
							InvalidSnapshot);
	}
	PG_FINALLY();
	{
		retention_relid = save;
	}
	PG_END_TRY();
}
