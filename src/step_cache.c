/*-------------------------------------------------------------------------
 * step_cache.c
 *	  Owns what a backend keeps of a query between steps: the plan derived
 *	  from its definition (the pane plan), the statement text a step runs
 *	  and its prepared plan (SPI_keepplan), so that a step neither parses,
 *	  analyzes nor deparses the query again.
 *
 * An entry is keyed by the query's name and everything its statement is
 * built from (bound text, stream, hop, size, result and pane tables,
 * owner, search_path, plan kind).  It is marked stale when a relation it
 * depends on changes (a relcache invalidation: DDL, GRANT/REVOKE, TRUNCATE,
 * ANALYZE, a restore) or any function or type does (a syscache
 * invalidation: CREATE OR REPLACE, DROP, GRANT EXECUTE), and rebuilt at the
 * next step.  Marking never frees: an invalidation can arrive in the middle
 * of a step that is using the entry (and a step can run user code that
 * runs another process()); stale entries are freed at the end of the
 * transaction, when no step runs.
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "executor/spi.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

#include "citus.h"
#include "step_cache.h"

#define SW_MAX_STEP_ENTRIES 64

static List *entries = NIL;		/* of SwStepEntry, oldest first */
static SwStepEntry *plain_insert_running = NULL;	/* see sw_step_entry_execute */
static bool use_upsert = false;	/* a step run again: the upsert, whatever its
								 * entry says (it may be a new one by then) */
static bool callbacks_registered = false;

static void
relcache_changed(Datum arg, Oid relid)
{
	ListCell   *lc;

	foreach(lc, entries)
	{
		SwStepEntry *e = lfirst(lc);

		if (!OidIsValid(relid) || list_member_oid(e->relids, relid))
			e->stale = true;
	}
}

static void
syscache_changed(Datum arg, int cacheid, uint32 hashvalue)
{
	ListCell   *lc;

	foreach(lc, entries)
		((SwStepEntry *) lfirst(lc))->stale = true;
}

/* At the end of a transaction no step runs: free the stale entries. */
static void
free_stale_entries(XactEvent event, void *arg)
{
	ListCell   *lc;

	if (event != XACT_EVENT_COMMIT && event != XACT_EVENT_ABORT &&
		event != XACT_EVENT_PARALLEL_COMMIT && event != XACT_EVENT_PARALLEL_ABORT)
		return;
	plain_insert_running = NULL;
	use_upsert = false;
	foreach(lc, entries)
	{
		SwStepEntry *e = lfirst(lc);

		if (!e->stale)
			continue;
		if (e->plan != NULL)
			SPI_freeplan(e->plan);
		if (e->insert_plan != NULL)
			SPI_freeplan(e->insert_plan);
		MemoryContextDelete(e->cxt);
		pfree(e);
		entries = foreach_delete_current(entries, lc);
	}
}

static bool
same_definition(const SwStepEntry *e, const SwQueryDef *def)
{
	return strcmp(e->name, def->name) == 0 && strcmp(e->query, def->query) == 0 &&
		strcmp(e->search_path, def->search_path) == 0 &&
		e->stream == def->stream && e->hop_us == def->hop_us &&
		e->size_us == def->size_us && e->result_table == def->result_table &&
		e->owner == def->owner && e->pane == def->pane && e->session == def->session;
}

/*
 * The entry of a query: the one kept, if it was built from this definition
 * and nothing it depends on changed since; else a new, empty one.
 */
SwStepEntry *
sw_step_entry(const SwQueryDef *def)
{
	ListCell   *lc;
	SwStepEntry *e;
	MemoryContext old;
	bool		citus_result;

	if (!callbacks_registered)
	{
		CacheRegisterRelcacheCallback(relcache_changed, (Datum) 0);
		CacheRegisterSyscacheCallback(PROCOID, syscache_changed, (Datum) 0);
		CacheRegisterSyscacheCallback(TYPEOID, syscache_changed, (Datum) 0);
		CacheRegisterSyscacheCallback(AUTHMEMROLEMEM, syscache_changed, (Datum) 0);
		RegisterXactCallback(free_stale_entries, NULL);
		callbacks_registered = true;
	}
	foreach(lc, entries)
	{
		e = lfirst(lc);
		if (!e->stale && strcmp(e->name, def->name) == 0)
		{
			if (same_definition(e, def))
				return e;
			e->stale = true;
		}
	}
	/* a Citus result table: checked again, as create_query checks it (citus.c) */
	citus_result = sw_citus_check_result(def);
	if (list_length(entries) >= SW_MAX_STEP_ENTRIES)
		((SwStepEntry *) linitial(entries))->stale = true;

	old = MemoryContextSwitchTo(CacheMemoryContext);
	e = palloc0(sizeof(SwStepEntry));
	e->cxt = AllocSetContextCreate(CacheMemoryContext, "streamwm step cache entry",
								   ALLOCSET_SMALL_SIZES);
	MemoryContextSwitchTo(e->cxt);
	e->name = pstrdup(def->name);
	e->query = pstrdup(def->query);
	e->search_path = pstrdup(def->search_path);
	e->stream = def->stream;
	e->hop_us = def->hop_us;
	e->size_us = def->size_us;
	e->result_table = def->result_table;
	e->owner = def->owner;
	e->pane = def->pane;
	e->session = def->session;
	e->citus_result = citus_result;
	e->relids = list_make2_oid(def->stream, def->result_table);
	MemoryContextSwitchTo(CacheMemoryContext);
	entries = lappend(entries, e);
	MemoryContextSwitchTo(old);
	return e;
}

/* The relations the entry also depends on. */
void
sw_step_entry_depends(SwStepEntry *e, List *relids)
{
	MemoryContext old = MemoryContextSwitchTo(e->cxt);
	ListCell   *lc;

	foreach(lc, relids)
		e->relids = list_append_unique_oid(e->relids, lfirst_oid(lc));
	MemoryContextSwitchTo(old);
}

static SPIPlanPtr
keep_plan(const char *sql, int nparams, const Oid *types, int cursor_options)
{
	SPIPlanPtr	plan = SPI_prepare_cursor(sql, nparams, (Oid *) types, cursor_options);

	if (plan == NULL)
		elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
	if (SPI_keepplan(plan) != 0)
		elog(ERROR, "SPI_keepplan failed");
	return plan;
}

/*
 * Keep the statement a step of the entry's query runs, and its plan.  Any
 * plain-INSERT form of it (sw_step_entry_set_insert) is dropped.
 * cursor_options: CURSOR_OPT_GENERIC_PLAN for a statement whose plan the
 * caller makes under settings of its own (sw_step_entry_make_plans), 0 to
 * let the plan cache choose.
 */
void
sw_step_entry_set_statement(SwStepEntry *e, const char *sql, int nparams, const Oid *types,
							Oid pane_table, int cursor_options)
{
	if (e->plan != NULL)
		SPI_freeplan(e->plan);
	e->plan = NULL;
	if (e->insert_plan != NULL)
		SPI_freeplan(e->insert_plan);
	e->insert_plan = NULL;
	e->insert_backoff = 0;
	e->sql = MemoryContextStrdup(e->cxt, sql);
	/*
	 * A result table Citus distributes (co-located with its distributed
	 * stream, citus.c): Citus plans a statement that writes it only with
	 * its parameters' values ("could not create distributed plan" for a
	 * generic plan), so it is planned again at every step.
	 */
	if (e->citus_result)
		cursor_options = CURSOR_OPT_CUSTOM_PLAN;
	e->cursor_options = cursor_options;
	e->plan = keep_plan(sql, nparams, types, cursor_options);
	e->statement_pane_table = pane_table;
	if (OidIsValid(pane_table))
		sw_step_entry_depends(e, list_make1_oid(pane_table));
}

/*
 * Keep the statement's plain-INSERT form (sw_result_plain_insert_ok), same
 * parameters, same result columns.
 */
void
sw_step_entry_set_insert(SwStepEntry *e, const char *sql, int nparams, const Oid *types)
{
	Assert(e->plan != NULL && e->insert_plan == NULL);
	e->insert_plan = keep_plan(sql, nparams, types, e->cursor_options);
}

/*
 * Make the entry's generic plans now, if they are not made or no longer
 * valid, under the planner settings the caller has set; the step then runs
 * them as made (sw_step_entry_execute finds them valid) while the code the
 * statement runs (the query's functions, and the plans they make and keep)
 * runs under the session's settings.
 */
void
sw_step_entry_make_plans(SwStepEntry *e)
{
	SPIPlanPtr	plans[2] = {e->plan, e->insert_plan};

	/* planned as it runs (a Citus result table: above) */
	if (!(e->cursor_options & CURSOR_OPT_GENERIC_PLAN))
		return;
	for (int i = 0; i < lengthof(plans); i++)
	{
		CachedPlan *cplan;

		if (plans[i] == NULL)
			continue;
		cplan = SPI_plan_get_cached_plan(plans[i]);
		if (cplan == NULL)
			elog(ERROR, "streamwm: planning the window statement failed");
		ReleaseCachedPlan(cplan, CurrentResourceOwner);
	}
}

/*
 * Run a step's statement: its plain-INSERT form, if it has one and it has
 * not met a row already in the result table in the last SW_INSERT_BACKOFF
 * steps, else the upsert.  The result is in SPI_tuptable.  When the
 * INSERT meets a key the table holds (rows the owner or recompute() wrote,
 * a table kept from an earlier query: unique_violation, or exclusion_violation
 * from an exclusion constraint that the upsert's update would not violate),
 * the error ends the query's step as any error does, and its caller,
 * seeing sw_step_plain_insert_failed(), runs the step again with use_upsert
 * set (sw_step_insert_set_marks).  No subtransaction of its own: the step's
 * is enough, and a second one per query would double the subtransactions a
 * process() of many queries keeps open (past 64, every snapshot in the
 * server overflows to pg_subtrans).
 */
#define SW_INSERT_BACKOFF 64

void
sw_step_entry_execute(SwStepEntry *e, const char *name, Datum *values, const char *nulls)
{
	SPIPlanPtr	plan = e->plan;

	plain_insert_running = NULL;
	if (use_upsert)
		e->insert_backoff = SW_INSERT_BACKOFF;
	else if (e->insert_plan != NULL && e->insert_backoff == 0)
	{
		plan = e->insert_plan;
		plain_insert_running = e;
	}
	else if (e->insert_backoff > 0)
		e->insert_backoff--;
	if (SPI_execute_plan(plan, values, nulls, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "streamwm: window statement of query \"%s\" failed", name);
	plain_insert_running = NULL;
}

/*
 * The two marks above, read and set: a step sets them as it starts and
 * puts back what it found as it ends, since a query's step can run user
 * code that runs process() (a nested step), which must leave the outer
 * step's marks as they were (close_windows_once).
 */
void
sw_step_insert_marks(SwStepEntry **running, bool *upsert)
{
	*running = plain_insert_running;
	*upsert = use_upsert;
}

void
sw_step_insert_set_marks(SwStepEntry *running, bool upsert)
{
	plain_insert_running = running;
	use_upsert = upsert;
}

/*
 * After an error in a query's step: was it its plain INSERT's, and a
 * unique_violation or exclusion_violation ('conflict')?  Then the upsert is
 * used from now on, for SW_INSERT_BACKOFF steps, and the caller runs the
 * step again.
 */
bool
sw_step_plain_insert_failed(bool conflict)
{
	SwStepEntry *e = plain_insert_running;

	plain_insert_running = NULL;
	if (e == NULL || !conflict)
		return false;
	e->insert_backoff = SW_INSERT_BACKOFF;
	return true;
}
