/*-------------------------------------------------------------------------
 * streamwm.c
 *	  Module entry: _PG_init, the GUCs, and the one ProcessUtility hook
 *	  (what streamwm checks before a utility statement: worker_coord.c's
 *	  databases kept away, citus.c's refusals).
 *
 * Data flows ingest.c (rows into stream tables) -> process.c (one step:
 * read, watermark.c, close windows with query.c, retention), with state in
 * the catalog tables of catalog.c.  See DESIGN.md.
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "tcop/utility.h"
#include "utils/guc.h"

#include "catalog.h"
#include "citus.h"
#include "commit_order.h"
#include "limit.h"
#include "pane.h"
#include "stream_brin.h"
#include "worker.h"
#include "worker_coord.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

static ProcessUtility_hook_type prev_ProcessUtility = NULL;

static void
sw_process_utility(PlannedStmt *pstmt, const char *queryString,
				   bool readOnlyTree, ProcessUtilityContext context,
				   ParamListInfo params, QueryEnvironment *queryEnv,
				   DestReceiver *dest, QueryCompletion *qc)
{
	sw_coord_utility(pstmt, context);
	if (sw_citus_utility(pstmt, queryString, qc))
		return;
	if (prev_ProcessUtility)
		prev_ProcessUtility(pstmt, queryString, readOnlyTree, context,
							params, queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context,
								params, queryEnv, dest, qc);
}

int			sw_batch_size = 100000;
bool		sw_pane_engine = true;
bool		sw_notify = true;

void
_PG_init(void)
{
	/* nothing runs during pg_upgrade */
	if (IsBinaryUpgrade)
		return;

	sw_commit_order_init();
	sw_stream_brin_init();
	sw_citus_init();
	sw_pane_init();
	prev_ProcessUtility = ProcessUtility_hook;
	ProcessUtility_hook = sw_process_utility;

	DefineCustomIntVariable("streamwm.batch_size",
							"Rows read from a stream per batch of a processing step.",
							"A step reads in batches of this many rows; a worker tick "
							"reads at most one batch per stream.",
							&sw_batch_size,
							100000, 1, INT_MAX,
							PGC_USERSET, 0,
							NULL, NULL, NULL);
	DefineCustomBoolVariable("streamwm.pane_engine",
							 "Aggregate each row once into its pane when a query allows it.",
							 "Read by create_query only: a query that reads its stream once and "
							 "calls only aggregates with a combine function (count, sum, avg, "
							 "min, max, ...) over plain GROUP BY columns gets the pane plan, "
							 "aggregating each row once into its pane instead of once per "
							 "window. The plan is shown in streamwm.queries.plan.",
							 &sw_pane_engine,
							 true,
							 PGC_USERSET, 0,
							 NULL, NULL, NULL);
	DefineCustomBoolVariable("streamwm.notify",
							 "Whether a step that writes results sends NOTIFY streamwm.",
							 "Every role that can connect may LISTEN: the payload names the query "
							 "and its result table and counts its rows.",
							 &sw_notify,
							 true,
							 PGC_SUSET, 0,
							 NULL, NULL, NULL);
	DefineCustomBoolVariable("streamwm.enabled",
							 "Whether background workers process streams.",
							 "When off, the workers idle; streamwm.process() still works.  "
							 "Set per database with ALTER DATABASE ... SET: a database's "
							 "worker reads it when it starts.",
							 &sw_enabled,
							 true,
							 PGC_SUSET, 0,
							 NULL, NULL, NULL);
	DefineCustomIntVariable("streamwm.max_workers",
							"Most database workers the launcher starts.",
							"One worker serves one database; each takes a max_worker_processes slot.",
							&sw_max_workers,
							8, 1, 1024,
							PGC_SIGHUP, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("streamwm.launcher_naptime",
							"How often the launcher looks for new databases.",
							"Every this many seconds the launcher probes the databases it has "
							"not probed yet and starts a worker where streamwm is installed; "
							"CREATE EXTENSION starts its database's worker at once.",
							&sw_launcher_naptime,
							10, 1, 3600,
							PGC_SIGHUP, GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomIntVariable("streamwm.worker_restart_seconds",
							"How long the launcher waits before restarting a database worker that failed.",
							"A database worker that exits with an error is started again by the "
							"launcher after this many seconds, if its database is still there; "
							"its streams go on from their last committed step.",
							&sw_worker_restart_seconds,
							5, 1, 3600,
							PGC_SIGHUP, GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomIntVariable("streamwm.lock_timeout",
							"lock_timeout of a worker's processing steps.",
							"A step that waits longer for a lock fails and is retried, "
							"so that DDL and users never wait long on a worker.",
							&sw_lock_timeout_ms,
							1000, 0, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);
	sw_limits_define_gucs();
	MarkGUCPrefixReserved("streamwm");
	sw_register_launcher();
}
