/*-------------------------------------------------------------------------
 * alter.c
 *	  Owns changing a query that runs (SPEC sections 10 and 11):
 *	  streamwm.alter_query() gives a query a new text from its next window
 *	  that has not closed, and streamwm.recompute() computes closed windows
 *	  again from the stream's retained rows.
 *
 * alter_query(name, query).  Only a role that manages the query (a member
 * of its owner) may; the new text is bound as create_query binds it
 * (analyzed under the caller's search_path, stored deparsed with every name
 * qualified) and must read the same stream.  What the query has done stays:
 * closed_until, the start offset, the result table and the counters.  So
 * windows that are final keep the old text's rows, and every window that
 * closes from the next step on is computed with the new text over all its
 * rows, those read before the change included.  A closed window is final
 * when no row can be accepted into it any more: with allowed_lateness L,
 * those that ended at or before closed_until - L.  The closed windows that
 * ended after that may still be re-fired by a late row, which would compute
 * them with the new text anyway (the old text is gone), so the change makes
 * the next step re-fire all of them with the new text (SPEC section 10:
 * a window that can still change is recomputed; the text that recomputes
 * it is the query's): its folded offsets are cleared, and every row after
 * them is unread, as the re-fire rule reads it (process.c, query.c,
 * pane.c).  The result then does not depend on whether a late row came.
 *
 *	 - the general plan computes a window from the stream's rows when it
 *	   closes, so the new text simply takes over;
 *	 - the pane plan's state is a cache of the retained rows (pane.c): the
 *	   change clears the query's pane stamp and folded offsets, the pane
 *	   table is emptied (or made anew for another layout, or dropped if the
 *	   new text takes the general plan), and the next step folds every
 *	   retained row of the open windows (and of the closed windows within L)
 *	   again, with the new text.  Retention keeps those rows (it never
 *	   removes a row of a window still open or still within L).
 *
 * The plan is decided again for the new text, and query_def.reads follows it
 * (the DDL guard, query_ddl.c, protects what the new text reads).  The
 * change holds the stream's catalog row as a step does, so no step runs
 * half before and half after it.  Result table: the key (window_start and
 * the GROUP BY output columns, by name and type) must stay; an output column
 * the table lacks is added (ALTER TABLE ... ADD COLUMN, NULL in the windows
 * computed before); one the table has must keep its type; a column the new
 * text no longer outputs stays in the table (NULL in new windows), unless it
 * is NOT NULL, which is refused.
 *
 * recompute(name, from, to).  The windows of the query with from <=
 * window_start and window_end <= to that have closed (window_end <=
 * closed_until; later ones are left to the steps that close them) are
 * computed again with the query's current text, as its owner, in the
 * caller's transaction: the result rows of those windows are deleted and
 * the query's rows for them inserted, so the result table holds exactly
 * what the query says over the rows the stream holds now (a window or
 * group whose rows were purged loses its row).  Rows are read as a step
 * reads them (processed, after the query's start offset, not late) with
 * the general plan's statement (query.c), whatever the query's plan.  A
 * range with a window that starts before the stream's retention_horizon
 * (rows retention may have removed) is refused: its result would be
 * partial.  Purges (DELETE, TRUNCATE) do not move that horizon: they are
 * the user's own removal of rows, and a recompute then reflects them.
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/pg_attribute.h"
#include "catalog/pg_index.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/resowner.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "api.h"
#include "catalog.h"
#include "citus.h"
#include "commit_order.h"
#include "query.h"
#include "result.h"
#include "version.h"
#include "window.h"

PG_FUNCTION_INFO_V1(streamwm_alter_query);
PG_FUNCTION_INFO_V1(streamwm_recompute);

/* query.c: the SQL-callable binding of a query text, as create_query uses it */
extern Datum streamwm_query_stream(PG_FUNCTION_ARGS);
extern Datum streamwm_bind_query(PG_FUNCTION_ARGS);

/*
 * The output columns of a stored (bound) query text, analyzed as its owner
 * under pg_catalog, pg_temp as a step reads it; NIL if it no longer
 * analyzes (an object it used is gone: the new text may be the repair).
 * A cancel is not swallowed.
 */
static void *
columns_of(void *arg)
{
	const SwQueryDef *def = arg;

	return sw_query_columns(def->stream, def->query);
}

static List *
stored_columns(const SwQueryDef *def)
{
	ErrorData  *error;
	List	   *cols = sw_try_as_role(def->owner, columns_of, (void *) def,
									  CurrentMemoryContext, &error);

	if (error)
		FreeErrorData(error);
	return cols;
}

/*
 * The key columns of an output column list, as "a integer, b text" (with
 * types) or "a, b", or "" for none.
 */
static char *
key_names(List *cols, bool types)
{
	StringInfoData s;
	ListCell   *lc;

	initStringInfo(&s);
	foreach(lc, cols)
	{
		SwOutputColumn *c = lfirst(lc);

		if (c->is_key)
			appendStringInfo(&s, "%s%s%s%s", s.len > 0 ? ", " : "", quote_identifier(c->name),
							 types ? " " : "", types ? c->type : "");
	}
	return s.data;
}


/*
 * Is the key of the new output the old one: the same GROUP BY output
 * columns, by name and type?
 */
static bool
same_key(List *old_cols, List *new_cols)
{
	ListCell   *lc;
	int			nold = 0;
	int			nnew = 0;

	foreach(lc, old_cols)
		nold += ((SwOutputColumn *) lfirst(lc))->is_key ? 1 : 0;
	foreach(lc, new_cols)
	{
		SwOutputColumn *c = lfirst(lc);
		SwOutputColumn *o;

		if (!c->is_key)
			continue;
		nnew++;
		o = sw_output_column(old_cols, c->name);
		if (o == NULL || !o->is_key || strcmp(o->type, c->type) != 0)
			return false;
	}
	return nold == nnew;
}

/*
 * Check the new output columns against the result table and return the
 * ALTER TABLE that adds the ones it lacks (NULL if none).  See the file
 * header for the rules.
 */
static char *
check_result_table(const SwQueryDef *def, List *old_cols, List *new_cols)
{
	Relation	rel;
	TupleDesc	desc;
	StringInfoData add;
	ListCell   *lc;

	sw_require_result_table(def);
	if (old_cols != NIL && !same_key(old_cols, new_cols))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot change the key of query \"%s\"", def->name),
				 errdetail("Its result table is keyed by window_start and its GROUP BY output columns (%s); the new text's are (%s).",
						   *key_names(old_cols, true) ? key_names(old_cols, true) : "none",
						   *key_names(new_cols, true) ? key_names(new_cols, true) : "none"),
				 errhint("Keep the GROUP BY output columns, with their names and types, or create a new query.")));

	/* a chain: the result stream must have every output (no key, no ADD) */
	if (def->result_stream)
	{
		foreach(lc, new_cols)
		{
			SwOutputColumn *c = lfirst(lc);

			if (get_attnum(def->result_table, c->name) == InvalidAttrNumber)
				ereport(ERROR,
						(errcode(ERRCODE_UNDEFINED_COLUMN),
						 errmsg("result stream %s lacks column \"%s\" of the new text of query \"%s\"",
								sw_relation_name(def->result_table), c->name, def->name)));
		}
		return NULL;
	}

	rel = table_open(def->result_table, AccessShareLock);
	desc = RelationGetDescr(rel);
	initStringInfo(&add);
	foreach(lc, new_cols)
	{
		SwOutputColumn *c = lfirst(lc);
		AttrNumber	attnum = get_attnum(def->result_table, c->name);

		if (attnum == InvalidAttrNumber)
		{
			if (c->is_key)
				ereport(ERROR,
						(errcode(ERRCODE_UNDEFINED_COLUMN),
						 errmsg("result table %s lacks key column \"%s\"",
								sw_relation_name(def->result_table), c->name)));
			appendStringInfo(&add, "%s ADD COLUMN %s %s", add.len > 0 ? "," : "",
							 quote_identifier(c->name), c->type);
		}
		else
		{
			Form_pg_attribute att = TupleDescAttr(desc, attnum - 1);
			char	   *type = format_type_with_typemod(att->atttypid, att->atttypmod);

			if (strcmp(type, c->type) != 0)
				ereport(ERROR,
						(errcode(ERRCODE_DATATYPE_MISMATCH),
						 errmsg("output column \"%s\" of the new text of query \"%s\" is of type %s, but column \"%s\" of result table %s is of type %s",
								c->name, def->name, c->type, c->name,
								sw_relation_name(def->result_table), type),
						 errhint("Cast the output to %s, or give it another name (a new column is added).",
								 type)));
		}
	}
	/* columns the new text no longer fills get NULL in the windows it writes */
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		const char *name = NameStr(att->attname);

		if (att->attisdropped || !att->attnotnull || att->atthasdef ||
			strcmp(name, "window_start") == 0 || strcmp(name, "window_end") == 0 ||
			sw_output_column(new_cols, name) != NULL)
			continue;
		ereport(ERROR,
				(errcode(ERRCODE_NOT_NULL_VIOLATION),
				 errmsg("the new text of query \"%s\" has no output column \"%s\", which is NOT NULL in result table %s",
						def->name, name, sw_relation_name(def->result_table)),
				 errhint("Keep the output column, or drop the NOT NULL constraint.")));
	}
	if (!sw_result_has_key_index(rel, new_cols))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TABLE_DEFINITION),
				 errmsg("result table %s has no unique index on (window_start%s%s) that the new text of query \"%s\" can use",
						sw_relation_name(def->result_table),
						*key_names(new_cols, false) ? ", " : "", key_names(new_cols, false), def->name),
				 errhint("A group key that can be NULL needs a UNIQUE NULLS NOT DISTINCT index.")));
	table_close(rel, AccessShareLock);
	if (add.len == 0)
		return NULL;
	return psprintf("ALTER TABLE %s%s", sw_relation_name(def->result_table), add.data);
}

/*
 * streamwm_internal._alter_query(name text, query text, user_path text): gives a
 * query the caller manages a new text, bound under user_path (the caller's
 * search_path, passed by streamwm.alter_query), effective from the next
 * window that has not closed.  streamwm.alter_query then plans it
 * (streamwm_internal._check_query, which also makes the pane table).
 */
Datum
streamwm_alter_query(PG_FUNCTION_ARGS)
{
	char	   *name;
	text	   *query;
	char	   *user_path;
	SwQueryDef *def;
	Oid			stream;
	char	   *bound;
	List	   *old_cols;
	List	   *new_cols;
	char	   *add;
	const char *plan;
	Datum		reads;
	int			nestlevel;

	sw_require_extension_version();

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2) ||
		VARSIZE_ANY_EXHDR(PG_GETARG_TEXT_PP(1)) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("query name and text must not be NULL or empty")));
	name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	query = PG_GETARG_TEXT_PP(1);
	user_path = text_to_cstring(PG_GETARG_TEXT_PP(2));

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	/* only the query's owner (or a member) may: checked before the text is read */
	def = sw_load_managed_query(name);
	/* the lock order of a step: the stream's catalog row first */
	(void) sw_lookup_stream(def->stream, true, NULL, NULL);
	/* loaded again under the lock: the query may have been re-created meanwhile */
	def = sw_load_managed_query(name);
	if (def->session)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot alter session query \"%s\"", name),
				 errdetail("A session still open holds events read under the old text; it would mix both."),
				 errhint("Drop it and create a new session query (start_from => 'earliest' reads the retained rows).")));
	if (def->ordered)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot alter query \"%s\": it emits the stream's rows in order (hop and size NULL)",
						name),
				 errhint("Drop it and create it again.")));
	if (def->count)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot alter count query \"%s\"", name),
				 errdetail("Its windows are numbered by the events its text selects; a new text would number them differently."),
				 errhint("Drop it and create it again with streamwm.create_count_query().")));

	/* bound as create_query binds it: under the caller's search_path, as the caller */
	nestlevel = NewGUCNestLevel();
	(void) set_config_option("search_path", user_path, PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	stream = DatumGetObjectId(DirectFunctionCall1(streamwm_query_stream, PointerGetDatum(query)));
	bound = TextDatumGetCString(DirectFunctionCall1(streamwm_bind_query, PointerGetDatum(query)));
	AtEOXact_GUC(true, nestlevel);
	if (stream != def->stream)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("the new text of query \"%s\" reads stream %s, not %s",
						name, sw_relation_name(stream), sw_relation_name(def->stream)),
				 errdetail("A query keeps its stream: its position is a position in that stream."),
				 errhint("Create a new query for the other stream.")));

	/* the result table: same key, new columns added, no type changed */
	old_cols = stored_columns(def);
	nestlevel = sw_enter_safe_path();
	new_cols = sw_query_columns(def->stream, bound);
	add = check_result_table(def, old_cols, new_cols);
	/* a result table co-located with the stream stays so (citus.c) */
	if (!def->result_stream)
		sw_citus_refuse_result_table(def->result_table, def->stream,
									 def->ordered ? NULL : bound);
	if (add != NULL)
		sw_spi_exec(add, 0, NULL, NULL, NULL, SPI_OK_UTILITY);

	/* the plan is decided again, and what the text reads recorded again */
	plan = sw_choose_plan(def->stream, bound, def->hop_us, def->size_us);
	/* processing time keeps its state in panes only (create_query refuses too) */
	if (def->processing && strcmp(plan, "pane") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("the new text of query \"%s\" cannot be computed in processing time", name),
				 errdetail("A query in processing time must use aggregates that combine (the pane plan)."),
				 errhint("See streamwm.queries.plan: count, sum, min, max and avg over plain GROUP BY columns qualify.")));
	reads = sw_query_reads(sw_analyze_bound_query(bound));

	/* pane state is a cache: a query that leaves the pane plan drops it */
	if (strcmp(plan, "pane") != 0 && OidIsValid(def->pane_table) &&
		sw_relation_owner(def->pane_table) == def->owner)
		sw_spi_exec(psprintf("DROP TABLE %s", sw_relation_name(def->pane_table)),
					0, NULL, NULL, NULL, SPI_OK_UTILITY);
	sw_leave_safe_path(nestlevel);

	sw_catalog_alter_query(name, bound, text_to_cstring(query), plan, reads,
						   strcmp(plan, "pane") == 0);
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * streamwm.recompute(name text, "from" timestamptz, "to" timestamptz)
 * RETURNS bigint: computes again the closed windows of a query with
 * from <= window_start and window_end <= to, and returns the result rows
 * written.  See the file header.
 */
static Datum
recompute_impl(PG_FUNCTION_ARGS)
{
	char	   *name;
	TimestampTz from;
	TimestampTz to;
	TimestampTz end;
	TimestampTz first;
	TimestampTz last;
	TimestampTz horizon;
	SwQueryDef *def;
	int			np;
	int64	   *processed;
	Datum		offsets;
	SwRoleContext cx;
	int64		windows;
	int64		rows;
	Oid			types[2] = {TIMESTAMPTZOID, TIMESTAMPTZOID};
	Datum		values[2];

	sw_require_extension_version();

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("query name, from and to must not be NULL"),
				 errhint("Use '-infinity' and 'infinity' for an open range.")));
	name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	from = PG_GETARG_TIMESTAMPTZ(1);
	to = PG_GETARG_TIMESTAMPTZ(2);
	if (to < from)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("\"to\" (%s) is before \"from\" (%s)",
						pstrdup(timestamptz_to_str(to)), pstrdup(timestamptz_to_str(from)))));

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	def = sw_load_managed_query(name);
	/* rows this transaction wrote have not arrived: they must not be read */
	if (sw_commit_order_wrote(def->stream))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot recompute query \"%s\" in a transaction that wrote into its stream %s",
						name, sw_relation_name(def->stream)),
				 errdetail("Rows arrive when the transaction that wrote them commits."),
				 errhint("Commit first, then call streamwm.recompute().")));
	/* as a step: the stream's catalog row first; no step runs until we commit */
	if (!sw_lookup_stream(def->stream, true, NULL, &np))
		sw_not_a_stream(def->stream);
	def = sw_load_managed_query(name);
	/* processing time: when each row was read is not kept, nothing to recompute from */
	if (def->processing)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot recompute query \"%s\": it is in processing time", name),
				 errdetail("Its windows hold the rows each step read, by that step's clock; the stream does not record when a row was read.")));
	/* an ordered query's rows are final: nothing to compute again */
	if (def->ordered)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot recompute query \"%s\": it emits the stream's rows in order (hop and size NULL)",
						name)));
	if (def->session)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot recompute session query \"%s\"", name),
				 errdetail("A session's extent depends on every event of its group before and after it, not on a time range."),
				 errhint("Drop it and create it again with start_from => 'earliest'.")));
	if (def->count)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot recompute count query \"%s\"", name),
				 errdetail("Its windows are runs of events numbered from the query's start, not time ranges; "
						   "retention has removed the rows that fixed their numbering.")));
	/* a stream is a log: its windows' rows were sent, and cannot be taken back */
	if (def->result_stream)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot recompute query \"%s\": it writes into stream %s",
						name, sw_relation_name(def->result_table)),
				 errdetail("The rows of its closed windows have been appended to that stream and read from it.")));
	sw_require_result_table(def);

	/*
	 * The windows: aligned starts from the first at or after 'from' to the
	 * last whose end is at or before both 'to' and closed_until.
	 */
	end = Min(to, def->closed_until);
	if (TIMESTAMP_IS_NOBEGIN(end) || from >= end)
	{
		SPI_finish();
		PG_RETURN_INT64(0);
	}
	first = sw_pane_start(from, def->hop_us, def->origin);
	if (first < from)
		first += def->hop_us;
	if (TIMESTAMP_IS_NOEND(end))
		last = DT_NOEND;
	else
		last = sw_pane_start(end - def->size_us, def->hop_us, def->origin);
	if (first > last)
	{
		SPI_finish();
		PG_RETURN_INT64(0);
	}

	/* a window some of whose rows retention may have removed: refused */
	horizon = sw_catalog_retention_horizon(def->stream);
	if (first < horizon)
	{
		TimestampTz ok = sw_pane_start(horizon, def->hop_us, def->origin);
		char	   *h = pstrdup(timestamptz_to_str(horizon));

		if (ok < horizon)
			ok += def->hop_us;
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cannot recompute windows of query \"%s\" that start before %s",
						name, h),
				 errdetail("Retention may have removed rows of stream %s with event time before %s.",
						   sw_relation_name(def->stream), h),
				 errhint("Recompute from %s or later.", timestamptz_to_str(ok))));
	}

	processed = palloc0(sizeof(int64) * np);
	sw_catalog_processed_offsets(def->stream, np, processed);
	offsets = sw_int8_array(processed, np);
	/* a distributed stream whose steps read its shards: its copy made now */
	if (sw_stream_distributed(def->stream, NULL, NULL))
		sw_citus_fill_copy(def->stream, processed, np);

	/* as the query's owner, as a step runs it */
	sw_enter_role(def->owner, def->search_path, &cx);
	values[0] = TimestampTzGetDatum(first);
	values[1] = TimestampTzGetDatum(last);
	sw_spi_exec(psprintf("DELETE FROM %s WHERE window_start OPERATOR(pg_catalog.>=) $1"
						 " AND window_start OPERATOR(pg_catalog.<=) $2",
						 sw_relation_name(def->result_table)),
				2, types, values, NULL, SPI_OK_DELETE);
	sw_recompute_windows(def, offsets, TIMESTAMP_IS_NOBEGIN(first) ? DT_NOBEGIN : first - 1,
						 last, &windows, &rows);
	sw_leave_role(&cx);
	SPI_finish();
	PG_RETURN_INT64(rows);
}

/* the entry point: errors without streamwm's internal frames (api.c) */
Datum
streamwm_recompute(PG_FUNCTION_ARGS)
{
	return sw_api_guard(recompute_impl, fcinfo);
}
