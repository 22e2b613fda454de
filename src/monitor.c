/*-------------------------------------------------------------------------
 * monitor.c
 *	  Owns the figures the monitoring views (streamwm.streams, partitions,
 *	  queries) read from stream tables themselves: newest offsets, backlog,
 *	  pending events.
 *
 * The views run as their owner, so these functions decide what a caller
 * may see: nothing about a stream unless the caller is a member of its
 * owner, may SELECT from it, or has pg_read_all_stats.  They read only
 * relations registered in streamwm.stream_def (which only streamwm writes,
 * and only for plain tables with its system columns), and read them as the
 * stream's owner under SECURITY_RESTRICTED_OPERATION with search_path =
 * pg_catalog, pg_temp: nothing a caller chooses, and no code of anyone
 * else's, runs with more rights than it had.
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "catalog.h"
#include "citus.h"
#include "commit_order.h"
#include "version.h"

PG_FUNCTION_INFO_V1(streamwm_partition_stats);
PG_FUNCTION_INFO_V1(streamwm_query_pending);

/*
 * Is relid a stream the caller may see?  Returns its owner and partition
 * count.  The caller is connected to SPI.
 */
static bool
visible_stream(Oid relid, Oid *owner, int *npartitions)
{
	if (!sw_lookup_stream(relid, false, owner, npartitions))
		return false;
	/* never run the owner's policies in the session that reads a view */
	if (sw_stream_forces_rls(relid))
		return false;
	return sw_may_see_stream(relid, *owner);
}

/*
 * May the stream's recorded owner still read it?  Not after a restore with
 * --no-owner, or ALTER TABLE ... OWNER TO another role, until the table is
 * given back: the figures read from the stream are then NULL, so that one
 * such stream does not make the views fail for every stream.
 */
static bool
owner_reads(Oid relid, Oid owner)
{
	return pg_class_aclcheck(relid, owner, ACL_SELECT) == ACLCHECK_OK;
}

/* Check that column col of the last SPI result has the type we read it as. */
static void
check_result_type(int col, Oid type)
{
	if (SPI_gettypeid(SPI_tuptable->tupdesc, col) != type)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("a system column of a stream has the wrong type"),
				 errdetail("Expected %s, found %s.", format_type_be(type),
						   format_type_be(SPI_gettypeid(SPI_tuptable->tupdesc, col)))));
}

/* A read of a stream's one row, its first n columns into values/nulls. */
typedef struct StreamRead
{
	const char *sql;
	int			nargs;
	Oid		   *types;
	Datum	   *args;
	int			n;
	const Oid  *coltypes;
	Datum	   *values;
	bool	   *nulls;
} StreamRead;

static void *
read_row(void *arg)
{
	StreamRead *r = arg;

	sw_spi_exec(r->sql, r->nargs, r->types, r->args, NULL, SPI_OK_SELECT);
	for (int i = 0; i < r->n; i++)
	{
		check_result_type(i + 1, r->coltypes[i]);
		r->values[i] = sw_spi_getdatum(0, i + 1, &r->nulls[i]);
	}
	return r;
}

/*
 * Run a read of a stream as its owner (the current user) and take the
 * first n columns of its one row into values/nulls.  A distributed
 * stream's read goes to its nodes: one that is down makes it fail, and the
 * views show NULL (unknown) for what it would have read instead of failing,
 * in a subtransaction of its own (sw_try_as_role); a cancel still cancels.
 * Returns false when it failed.
 */
static bool
read_stream_row(bool distributed, Oid owner, const char *sql, int nargs, Oid *types,
				Datum *args, int n, const Oid *coltypes, Datum *values, bool *nulls)
{
	StreamRead	r = {sql, nargs, types, args, n, coltypes, values, nulls};
	ErrorData  *error;

	if (!distributed)
	{
		(void) read_row(&r);
		return true;
	}
	if (sw_try_as_role(owner, read_row, &r, CurrentMemoryContext, &error) != NULL)
		return true;
	FreeErrorData(error);
	for (int i = 0; i < n; i++)
		nulls[i] = true;
	return false;
}

/*
 * streamwm_internal._partition_stats(stream regclass) RETURNS SETOF (partition,
 * last_offset, last_arrival, backlog, oldest_arrival, held_by, held_since):
 * per partition, the newest row's offset, when the newest transaction that
 * wrote into it committed, the rows after the processed offset and when
 * the oldest of them arrived (the commit log), and the open writing
 * transaction holding it, if any: its backend and when it began
 * (commit_order.c).
 */
Datum
streamwm_partition_stats(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Oid			relid = PG_GETARG_OID(0);
	Oid			owner;
	int			np;
	int64	   *processed;
	int64	   *head_floor;
	char	   *relname;
	char	   *head_sql;
	char	   *backlog_sql;
	const char *only;
	bool		distributed;
	bool		readable;
	static const Oid int8_type[1] = {INT8OID};
	SwRoleContext cx;
	SwPartitionHold *holds;
	Datum	   *values;
	bool	   *nulls;

	sw_require_extension_version();

	InitMaterializedSRF(fcinfo, 0);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (!visible_stream(relid, &owner, &np))
	{
		SPI_finish();
		return (Datum) 0;
	}

	processed = palloc0(np * sizeof(int64));
	sw_catalog_processed_offsets(relid, np, processed);
	head_floor = palloc(np * sizeof(int64));
	holds = palloc(np * sizeof(SwPartitionHold));
	sw_partition_holders(relid, np, holds);
	values = palloc(np * 7 * sizeof(Datum));
	nulls = palloc0(np * 7 * sizeof(bool));

	/* the commit log, as the catalog's owner */
	sw_enter_catalog(&cx);
	for (int p = 0; p < np; p++)
	{
		Oid			types[3] = {OIDOID, INT4OID, INT8OID};
		Datum		args[3] = {ObjectIdGetDatum(relid), Int32GetDatum(p),
		Int64GetDatum(processed[p])};
		Datum	   *v = &values[p * 7];
		bool	   *n = &nulls[p * 7];
		Datum		newest_lo;
		bool		isnull;

		head_floor[p] = processed[p];
		sw_spi_exec("SELECT n.arrival, n.lo,"
					"       (SELECT arrival FROM streamwm.commit_log"
					"         WHERE stream = $1 AND partition = $2 AND hi > $3 ORDER BY hi LIMIT 1)"
					"  FROM (SELECT 1) o LEFT JOIN LATERAL"
					"       (SELECT arrival, lo FROM streamwm.commit_log"
					"         WHERE stream = $1 AND partition = $2 ORDER BY hi DESC LIMIT 1) n ON true",
					3, types, args, NULL, SPI_OK_SELECT);
		v[2] = sw_spi_getdatum(0, 1, &n[2]);
		newest_lo = sw_spi_getdatum(0, 2, &isnull);
		/* the newest row is above the newest commit's lo, unless it is gone */
		if (!isnull && DatumGetInt64(newest_lo) < head_floor[p])
			head_floor[p] = DatumGetInt64(newest_lo);
		v[4] = sw_spi_getdatum(0, 3, &n[4]);
		v[5] = Int32GetDatum(holds[p].pid);
		n[5] = holds[p].pid == 0;
		v[6] = TimestampTzGetDatum(holds[p].since);
		n[6] = holds[p].pid == 0 || TIMESTAMP_IS_NOBEGIN(holds[p].since);
	}
	sw_leave_role(&cx);

	/* the stream itself, as its owner */
	if (!owner_reads(relid, owner))
	{
		for (int p = 0; p < np; p++)
		{
			values[p * 7] = Int32GetDatum(p);
			nulls[p * 7 + 1] = nulls[p * 7 + 3] = true;
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc,
								 &values[p * 7], &nulls[p * 7]);
		}
		SPI_finish();
		return (Datum) 0;
	}
	/*
	 * The stream itself, also a distributed one (its partitions' shards on
	 * their nodes, each read routed there): the coordinator's copy of its
	 * rows holds only rows steps read, or none (citus_fold.c).
	 */
	relname = sw_relation_name(relid);
	distributed = sw_stream_distributed(relid, NULL, NULL);
	/* not as another role than its creator (citus.c) */
	readable = !distributed || sw_citus_owned_by_creator(relid);
	only = distributed ? "" : "ONLY ";
	/*
	 * The newest row: above the floor (what the stream's BRIN index finds
	 * at once), or, when nothing is left there (retention, a purge), the
	 * greatest offset of them all (a read of the whole partition).
	 */
	head_sql = psprintf("SELECT coalesce((SELECT pg_catalog.max(t.sw_offset) FROM %s%s t"
						"                  WHERE t.sw_partition = $1 AND t.sw_offset > $3),"
						"                 (SELECT pg_catalog.max(t.sw_offset) FROM %s%s t"
						"                  WHERE t.sw_partition = $1))",
						only, relname, only, relname);
	backlog_sql = psprintf("SELECT pg_catalog.count(*)"
						   " FROM %s%s t WHERE t.sw_partition = $1 AND t.sw_offset > $2",
						   only, relname);
	sw_enter_role(owner, SW_SAFE_SEARCH_PATH, &cx);
	for (int p = 0; p < np; p++)
	{
		Oid			types[3] = {INT4OID, INT8OID, INT8OID};
		Datum		args[3] = {Int32GetDatum(p), Int64GetDatum(processed[p]),
		Int64GetDatum(head_floor[p])};
		Datum	   *v = &values[p * 7];
		bool	   *n = &nulls[p * 7];

		v[0] = Int32GetDatum(p);
		if (!readable)
			n[1] = n[3] = true;
		else if (read_stream_row(distributed, owner, head_sql, 3, types, args, 1, int8_type, &v[1], &n[1]))
			(void) read_stream_row(distributed, owner, backlog_sql, 2, types, args, 1, int8_type,
								   &v[3], &n[3]);
		else
			n[3] = true;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, v, n);
	}
	sw_leave_role(&cx);
	SPI_finish();
	return (Datum) 0;
}

/*
 * streamwm_internal._query_pending(stream regclass, closed_until timestamptz,
 * OUT pending_events bigint, OUT newest_event timestamptz, OUT oldest_event
 * timestamptz): the rows of a stream not yet in a window a query closed,
 * and the newest and oldest of their event times.
 * NULLs for a stream the caller may not see.
 */
Datum
streamwm_query_pending(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	TimestampTz closed_until = PG_GETARG_TIMESTAMPTZ(1);
	TupleDesc	tupdesc;
	Datum		values[3];
	bool		nulls[3] = {true, true, true};
	Oid			owner;
	int			np;

	sw_require_extension_version();

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (visible_stream(relid, &owner, &np) && owner_reads(relid, owner))
	{
		SwRoleContext cx;
		Oid			types[1] = {TIMESTAMPTZOID};
		Datum		args[1] = {TimestampTzGetDatum(closed_until)};

		static const Oid coltypes[3] = {INT8OID, TIMESTAMPTZOID, TIMESTAMPTZOID};
		bool		distributed = sw_stream_distributed(relid, NULL, NULL);

		sw_enter_role(owner, SW_SAFE_SEARCH_PATH, &cx);
		if (distributed && !sw_citus_owned_by_creator(relid))
			nulls[0] = nulls[1] = nulls[2] = true;
		else
			(void) read_stream_row(distributed, owner,
							   psprintf("SELECT pg_catalog.count(*), pg_catalog.max(t.sw_event_time),"
										" pg_catalog.min(t.sw_event_time)"
										" FROM %s%s t WHERE t.sw_event_time >= $1",
										distributed ? "" : "ONLY ", sw_relation_name(relid)),
							   1, types, args, 3, coltypes, values, nulls);
		sw_leave_role(&cx);
	}
	SPI_finish();
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}
