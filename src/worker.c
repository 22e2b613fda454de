/*-------------------------------------------------------------------------
 * worker.c
 *	  Owns the background workers (SPEC section 7).
 *
 * With shared_preload_libraries = 'streamwm':
 *
 *	 launcher	  one static worker, connected to no database.  At start, and
 *				  every streamwm.launcher_naptime, it starts a database worker
 *				  for every connectable database it has not probed yet.
 *	 db worker	  one per database, started by the launcher or, at once, by
 *				  CREATE EXTENSION (streamwm_internal._launch()).  It takes a session
 *				  lock (take_worker_lock()) so that there is never more than
 *				  one per database, and exits (for good) if the database has
 *				  no streamwm, or when DROP EXTENSION removes it.
 *
 * A database worker processes each stream every watermark_granularity of
 * that stream: one transaction per stream and tick, running exactly
 * sw_process_stream(), as streamwm.process() does, with the wall clock as
 * 'now' and at most streamwm.batch_size rows per tick; a tick that read a
 * full batch (rows are waiting) makes the stream due again at once, so a
 * backlog drains at full speed, each backlogged stream in turn.  A step that another
 * step holds (a user's process() call) is skipped, not waited for.  Window
 * queries run as their owners (process.c); an error in one query is
 * recorded in streamwm.queries.last_error and retried with exponential
 * backoff; an error in a whole step is logged and the stream retried with
 * backoff.  Nothing is lost while it fails: the step's transaction rolls
 * back and the next one starts from the last committed offsets.  After each
 * step the worker releases every session advisory lock a user's query took
 * (pg_advisory_lock() in a query would otherwise stay held by the worker
 * for good), and it says in the log, at most once a minute per stream,
 * when a stream is skipped because another transaction holds it.
 *
 * The schedule (the streams and their granularity) is cached in the
 * worker's hash table and read again only when it is stale, as pg_cron's
 * job cache is: the statement trigger schedule_changed on
 * streamwm.stream_def (INSERT, UPDATE OF granularity, DELETE, TRUNCATE)
 * invalidates stream_def's relcache entry at commit, and the worker's
 * relcache callback marks the schedule stale (so does a relcache reset, and
 * a failed step).  Dropping the extension drops stream_def, which is such
 * an invalidation too; besides, an idle worker checks every
 * SW_EXTENSION_CHECK_MS that the extension is still there.  A worker with
 * nothing to do thus reads no catalog table.
 *
 * Versions: after a package upgrade the new library runs while a database
 * still has the old extension version, until ALTER EXTENSION streamwm UPDATE
 * there.  Its worker then processes nothing: it says so once in the log
 * (with a hint to update), keeps no schedule, and looks again every
 * SW_VERSION_CHECK_MS; it resumes when the update has committed
 * (wait_for_update(), version.c).
 *
 * Crashes: a worker that exits with an error is restarted by the postmaster
 * after streamwm.worker_restart_seconds; a SIGKILL makes the postmaster
 * reinitialise, after which the launcher starts everything again.
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/pg_database.h"
#include "catalog/namespace.h"
#include "catalog/pg_extension.h"
#include "commands/dbcommands.h"
#include "commands/extension.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/backend_status.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "catalog.h"
#include "process.h"
#include "version.h"
#include "worker.h"
#include "worker_coord.h"

PG_FUNCTION_INFO_V1(streamwm_launch);
PG_FUNCTION_INFO_V1(streamwm_schedule_changed);

PGDLLEXPORT void streamwm_launcher_main(Datum arg);
PGDLLEXPORT void streamwm_worker_main(Datum arg);

/* GUCs */
bool		sw_enabled = true;
int			sw_launcher_naptime = 10;
int			sw_worker_restart_seconds = 5;
int			sw_lock_timeout_ms = 1000;
int			sw_max_workers = 8;

/* objsubid of the lock that makes a database worker unique */
#define SW_WORKER_LOCK_CLASS 0x7378

/* how often the worker may say that a stream is held by another step */
#define SW_HELD_LOG_INTERVAL_US (60 * USECS_PER_SEC)

/* longest a database worker sleeps, so it notices new streams soon */
#define SW_MAX_SLEEP_MS 1000L
/* longest backoff after errors */
#define SW_MAX_BACKOFF_MS 60000L
/* a database's worker is started at most this often */
#define SW_MIN_START_INTERVAL_US USECS_PER_SEC
/* how long after a granule's end a tick comes (next_tick) */
#define SW_TICK_SLACK_US 2000
/* how often a worker whose schedule is fresh checks that streamwm is there */
#define SW_EXTENSION_CHECK_MS 10000L
/* how often a worker waiting for ALTER EXTENSION streamwm UPDATE looks again */
#define SW_VERSION_CHECK_MS 1000L

static bool
library_preloaded(void)
{
	return process_shared_preload_libraries_in_progress;
}

/* Register the launcher; called from _PG_init when preloaded. */
void
sw_register_launcher(void)
{
	BackgroundWorker worker;

	if (!library_preloaded())
		return;
	sw_coord_init();
	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = 10;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "streamwm");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "streamwm_launcher_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "streamwm launcher");
	snprintf(worker.bgw_type, BGW_MAXLEN, "streamwm launcher");
	RegisterBackgroundWorker(&worker);
}

/*
 * Start the database worker of one database in shared slot 'slot' (the
 * launcher's); false if no background worker slot is free.  The postmaster
 * never restarts it: the launcher does, after an error, if the database is
 * still there (worker_coord.c).
 */
static bool
start_db_worker(Oid dboid, const char *dbname, int slot, BackgroundWorkerHandle **handle)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = BGW_NEVER_RESTART;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "streamwm");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "streamwm_worker_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "streamwm worker for database %s",
			 dbname ? dbname : "?");
	snprintf(worker.bgw_type, BGW_MAXLEN, "streamwm worker");
	worker.bgw_main_arg = ObjectIdGetDatum(dboid);
	{
		uint32		generation = sw_slot_generation(slot);

		memcpy(worker.bgw_extra, &slot, sizeof(slot));
		memcpy(worker.bgw_extra + sizeof(slot), &generation, sizeof(generation));
	}
	/* tell the launcher when it stops */
	worker.bgw_notify_pid = MyProcPid;
	return RegisterDynamicBackgroundWorker(&worker, handle);
}

/*
 * Database whose worker the launcher is asked for when the current
 * transaction commits, and whether to say that no worker will run.
 */
static Oid	launch_at_commit = InvalidOid;
static bool launch_notice = false;
static bool launch_callback_registered = false;

static void
launch_xact_callback(XactEvent event, void *arg)
{
	if (!OidIsValid(launch_at_commit))
		return;
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:

			/*
			 * Said here, not in the extension script, where CREATE EXTENSION
			 * holds notices back.
			 */
			if (launch_notice && !sw_coord_active())
				ereport(NOTICE,
						(errmsg("streamwm is not in shared_preload_libraries: no background worker will process streams"),
						 errdetail("Streams are processed only by calls to streamwm.process()."),
						 errhint("Add streamwm to shared_preload_libraries and restart the server to process streams continuously.")));
			break;
		case XACT_EVENT_COMMIT:
			sw_request_worker(launch_at_commit);
			launch_at_commit = InvalidOid;
			launch_notice = false;
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_PARALLEL_ABORT:
			launch_at_commit = InvalidOid;
			launch_notice = false;
			break;
		default:
			break;
	}
}

/* Ask the launcher for this database's worker when the transaction commits. */
static void
launch_when_committed(void)
{
	if (!launch_callback_registered)
	{
		RegisterXactCallback(launch_xact_callback, NULL);
		launch_callback_registered = true;
	}
	launch_at_commit = MyDatabaseId;
}

/*
 * streamwm_internal._launch() RETURNS boolean: CREATE EXTENSION runs it.  Without the
 * library preloaded, says when the transaction commits that no worker will
 * run.  With it, asks the launcher for this database's worker then (a
 * database worker leaves at once while the database has no stream; the
 * first create_stream asks again).  Returns whether workers run.
 */
Datum
streamwm_launch(PG_FUNCTION_ARGS)
{
	launch_when_committed();
	launch_notice = true;
	PG_RETURN_BOOL(sw_coord_active());
}

/* Top of a worker's or the launcher's loop: SIGTERM, then SIGHUP. */
static void
handle_interrupts(void)
{
	CHECK_FOR_INTERRUPTS();
	if (ConfigReloadPending)
	{
		ConfigReloadPending = false;
		ProcessConfigFile(PGC_SIGHUP);
	}
}

/* ---------------------------------------------------------------------
 * The launcher
 * ---------------------------------------------------------------------
 */

typedef struct ProbedDb
{
	Oid			dboid;			/* hash key */
	bool		present;		/* seen in pg_database this round */
	bool		wanted;			/* asked for (first seen, CREATE EXTENSION, a new stream) */
	TimestampTz restart_at;		/* after an error: when to start it again; 0: no */
	TimestampTz last_start;		/* when we last started its worker */
	int			slot;			/* its worker's shared slot, -1: none */
	BackgroundWorkerHandle *handle; /* in TopMemoryContext */
} ProbedDb;

/*
 * Collect a worker of ours that has stopped: free its slot and, if it left
 * on an error rather than cleanly, plan its restart.
 */
static void
collect_stopped(ProbedDb *entry, TimestampTz now)
{
	pid_t		pid;

	if (entry->handle == NULL ||
		GetBackgroundWorkerPid(entry->handle, &pid) != BGWH_STOPPED)
		return;
	if (!sw_slot_release(entry->slot) && entry->restart_at == 0)
		entry->restart_at = now + sw_worker_restart_seconds * USECS_PER_SEC;
	pfree(entry->handle);
	entry->handle = NULL;
	entry->slot = -1;
}

/* Workers this launcher started that have not exited yet. */
static int
alive_started_workers(HTAB *probed)
{
	HASH_SEQ_STATUS status;
	ProbedDb   *entry;
	int			n = 0;

	hash_seq_init(&status, probed);
	while ((entry = hash_seq_search(&status)) != NULL)
	{
		if (entry->handle != NULL)
			n++;
	}
	return n;
}

/* How many database workers run now (from the shared backend status). */
static int
running_db_workers(void)
{
	int			n = 0;

	pgstat_clear_backend_activity_snapshot();
	for (int i = 1; i <= pgstat_fetch_stat_numbackends(); i++)
	{
		LocalPgBackendStatus *local = pgstat_fetch_stat_local_beentry(i);

		if (local != NULL &&
			local->backendStatus.st_backendType == B_BG_WORKER &&
			strcmp(local->backendStatus.st_appname, "streamwm worker") == 0)
			n++;
	}
	pgstat_clear_backend_activity_snapshot();
	return n;
}

static List *
connectable_databases(void)
{
	List	   *result = NIL;
	Relation	rel;
	SysScanDesc scan;
	HeapTuple	tup;
	MemoryContext cxt = CurrentMemoryContext;

	StartTransactionCommand();
	(void) GetTransactionSnapshot();
	rel = table_open(DatabaseRelationId, AccessShareLock);
	scan = systable_beginscan(rel, InvalidOid, false, NULL, 0, NULL);
	while (HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		Form_pg_database db = (Form_pg_database) GETSTRUCT(tup);

		if (db->datallowconn && !db->datistemplate)
		{
			MemoryContext old = MemoryContextSwitchTo(cxt);

			result = lappend_oid(result, db->oid);
			MemoryContextSwitchTo(old);
		}
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	CommitTransactionCommand();
	return result;
}

void
streamwm_launcher_main(Datum arg)
{
	HTAB	   *probed;
	HASHCTL		ctl;
	bool	   *owned;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	pgstat_report_appname("streamwm launcher");
	sw_launcher_attach();

	ctl.keysize = sizeof(Oid);
	ctl.entrysize = sizeof(ProbedDb);
	probed = hash_create("streamwm probed databases", 16, &ctl, HASH_ELEM | HASH_BLOBS);
	owned = palloc0(sizeof(bool) * sw_slot_count());

	for (;;)
	{
		List	   *dbs;
		List	   *requests;
		List	   *to_start = NIL;
		ListCell   *lc;
		int			running;
		bool		all;
		HASH_SEQ_STATUS status;
		ProbedDb   *entry;
		TimestampTz now;
		long		sleep_ms = sw_launcher_naptime * 1000L;

		handle_interrupts();
		now = GetCurrentTimestamp();

		/* what is asked for: taken before the databases are read */
		requests = sw_take_requests(&all);
		dbs = connectable_databases();

		hash_seq_init(&status, probed);
		while ((entry = hash_seq_search(&status)) != NULL)
		{
			collect_stopped(entry, now);
			entry->present = false;
		}
		foreach(lc, dbs)
		{
			Oid			dboid = lfirst_oid(lc);
			bool		found;

			entry = hash_search(probed, &dboid, HASH_ENTER, &found);
			if (!found)
			{
				/* a database seen for the first time is probed once */
				entry->wanted = true;
				entry->restart_at = 0;
				entry->last_start = 0;
				entry->slot = -1;
				entry->handle = NULL;
			}
			entry->present = true;
			if (all || list_member_oid(requests, dboid))
				entry->wanted = true;
		}
		/* forget databases that are gone (dropped, or no longer connectable) */
		hash_seq_init(&status, probed);
		while ((entry = hash_seq_search(&status)) != NULL)
		{
			if (!entry->present && entry->handle == NULL)
				(void) hash_search(probed, &entry->dboid, HASH_REMOVE, NULL);
		}
		list_free(requests);
		list_free(dbs);

		/*
		 * Workers we registered may not show in the backend status yet, and
		 * those a launcher before us started are not ours: count both ways.
		 */
		running = Max(running_db_workers(), alive_started_workers(probed));
		memset(owned, 0, sizeof(bool) * sw_slot_count());
		hash_seq_init(&status, probed);
		while ((entry = hash_seq_search(&status)) != NULL)
		{
			bool		due;

			if (entry->handle != NULL)
			{
				owned[entry->slot] = true;
				continue;		/* running; a request waits until it leaves */
			}
			if (!entry->present || sw_database_kept_away(entry->dboid))
				continue;
			/*
			 * A request does not cut short the wait after an error, and a
			 * database gets at most one start a second: asking (CREATE
			 * EXTENSION, a new stream) must not let anyone make the
			 * launcher fork workers as fast as they can ask.
			 */
			{
				TimestampTz not_before = Max(entry->restart_at,
											 entry->last_start + SW_MIN_START_INTERVAL_US);

				due = (entry->wanted || entry->restart_at != 0) && not_before <= now;
				if (due)
					to_start = lappend_oid(to_start, entry->dboid);
				else if (entry->wanted || entry->restart_at != 0)
					sleep_ms = Min(sleep_ms, (not_before - now) / 1000 + 1);
			}
		}
		/* (not in the scan above: a transaction's end would end it) */
		foreach(lc, to_start)
		{
			Oid			dboid = lfirst_oid(lc);
			char	   *dbname;
			int			slot;
			MemoryContext old;
			bool		started;

			/* past streamwm.max_workers, wait for the next round */
			if (running >= sw_max_workers)
				break;
			slot = sw_slot_acquire(dboid);
			if (slot < 0)
				break;
			entry = hash_search(probed, &dboid, HASH_FIND, NULL);
			StartTransactionCommand();
			dbname = get_database_name(dboid);
			old = MemoryContextSwitchTo(TopMemoryContext);
			started = start_db_worker(dboid, dbname, slot, &entry->handle);
			MemoryContextSwitchTo(old);
			CommitTransactionCommand();
			if (started)
			{
				running++;
				owned[slot] = true;
				entry->slot = slot;
				entry->wanted = false;
				entry->restart_at = 0;
				entry->last_start = now;
			}
			else
			{
				(void) sw_slot_release(slot);
				entry->handle = NULL;
			}
		}
		list_free(to_start);
		sw_slots_reclaim(owned);

		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 Max(sleep_ms, 1), PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}

/* ---------------------------------------------------------------------
 * The database worker
 * ---------------------------------------------------------------------
 */

typedef struct StreamSchedule
{
	Oid			stream;			/* hash key */
	int64		granularity_us; /* stream_def.granularity */
	TimestampTz next_due;
	int64		phase_us;		/* ticks fall on k * granularity + phase */
	int			failures;
	int			backlog_steps;	/* consecutive steps that read a full batch */
	bool		seen;
	TimestampTz held_logged;	/* when we last said it was held */
} StreamSchedule;

/*
 * A step of a backlogged stream reads twice the rows of the one before, up
 * to 2^SW_MAX_BACKLOG_SHIFT batches: closing windows once per step, not
 * once per batch, is what drains a backlog fast (a 2,000,000-row burst:
 * 116,347 events/s in steps of one batch of 100,000 rows, 185,529 in one
 * step, bench/results-e2e.md), while a step stays bounded (each batch is
 * read and judged on its own; the window statements see the step's rows).
 */
#define SW_MAX_BACKLOG_SHIFT 4

/*
 * The next tick of a stream after 'now': one every granularity, on the
 * instants k * granularity + phase, where phase is watermark_delay (mod
 * granularity) plus SW_TICK_SLACK_US.  Windows end on whole multiples of
 * their hop from their origin (the epoch unless given), and a write-time
 * stream's W is the clock minus watermark_delay: so a window ending on a
 * whole granule closes at the first tick after W reaches its end, not up to
 * one granularity later, as ticks phased by the worker's start time did
 * (bench/results-e2e.md measured that 0.2 - 0.6 s on every window).
 */
static TimestampTz
next_tick(TimestampTz now, const StreamSchedule *entry)
{
	int64		r = (now - entry->phase_us) % entry->granularity_us;

	if (r < 0)
		r += entry->granularity_us;
	return now - r + entry->granularity_us;
}

/* Per-tick memory of a database worker, reset at the top of each tick. */
static MemoryContext tick_cxt = NULL;

/*
 * The schedule must be read again from streamwm.stream_def (whose OID is
 * schedule_relid, InvalidOid until first read).  Set by the relcache
 * callback, at start and after a failed step.
 */
static bool schedule_stale = true;
/* has this worker read the schedule at least once? (crash marks, refresh_schedule) */
static bool schedule_read_once = false;
static Oid	schedule_relid = InvalidOid;

/*
 * The extension here is not this library's version (a package upgrade
 * restarted the server with the new library, ALTER EXTENSION streamwm UPDATE
 * has not run yet): the worker processes nothing, and looks again every
 * SW_VERSION_CHECK_MS.  Said once in the log per worker and episode.
 */
static bool version_waiting = false;

static void
schedule_relcache_callback(Datum arg, Oid relid)
{
	/* InvalidOid: the whole relcache was reset, we may have missed ours */
	if (!OidIsValid(relid) || relid == schedule_relid)
		schedule_stale = true;
}

/*
 * streamwm_internal._schedule_changed(): statement trigger on streamwm.stream_def
 * (INSERT, UPDATE OF granularity, DELETE, TRUNCATE).  Invalidates
 * stream_def's relcache entry when the transaction commits, in every
 * backend of the database, and so tells the worker that its schedule is
 * stale (schedule_relcache_callback).
 */
Datum
streamwm_schedule_changed(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("streamwm_internal._schedule_changed() must be called as a trigger")));
	CacheInvalidateRelcache(trigdata->tg_relation);
	/* a new stream (create_stream, a restore): the database needs its worker */
	if (TRIGGER_FIRED_BY_INSERT(trigdata->tg_event))
		launch_when_committed();
	PG_RETURN_POINTER(NULL);
}

static void
worker_start_transaction(const char *activity)
{
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, activity);
	/* streamwm's own statements resolve names in pg_catalog only */
	(void) set_config_option("search_path", SW_SAFE_SEARCH_PATH,
							 PGC_SUSET, PGC_S_SESSION, GUC_ACTION_LOCAL, true, 0, false);
	/* do not make DROP EXTENSION or a user wait on us for long */
	(void) set_config_option("lock_timeout", psprintf("%d", sw_lock_timeout_ms),
							 PGC_SUSET, PGC_S_SESSION, GUC_ACTION_LOCAL, true, 0, false);
}

static void
worker_commit(void)
{
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	MemoryContextSwitchTo(tick_cxt);
	pgstat_report_stat(false);
	pgstat_report_activity(STATE_IDLE, NULL);
}

/* Is streamwm still installed in this database? */
static bool
extension_installed(void)
{
	bool		present;

	worker_start_transaction("streamwm: checking the extension");
	present = OidIsValid(get_extension_oid("streamwm", true));
	worker_commit();
	return present;
}

/*
 * In refresh_schedule()'s transaction: is the extension in this database of
 * another version than this library (version.c)?  Then forget the
 * schedule, whose catalog may have another shape, say so once, and wait.
 */
static bool
wait_for_update(HTAB *schedule)
{
	char	   *installed;
	HASH_SEQ_STATUS status;
	StreamSchedule *entry;

	if (sw_extension_version_matches(&installed))
	{
		if (version_waiting)
			ereport(LOG,
					(errmsg("streamwm: the extension in database \"%s\" is now %s; processing resumes",
							get_database_name(MyDatabaseId), SW_LIBRARY_VERSION)));
		version_waiting = false;
		return false;
	}
	if (!version_waiting)
		ereport(LOG,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("streamwm library %s is installed but the extension in database \"%s\" is %s",
						SW_LIBRARY_VERSION, get_database_name(MyDatabaseId), installed),
				 errdetail("The streams of this database are not processed until the extension is updated."),
				 errhint("Run ALTER EXTENSION streamwm UPDATE in database \"%s\".",
						 get_database_name(MyDatabaseId))));
	version_waiting = true;
	hash_seq_init(&status, schedule);
	while ((entry = hash_seq_search(&status)) != NULL)
		(void) hash_search(schedule, &entry->stream, HASH_REMOVE, NULL);
	return true;
}

/*
 * Read the schedule again from streamwm.stream_def: the streams and their
 * granularity; a new stream is due at once, the others keep their next
 * tick.  Returns false when the extension is gone from this database.
 */
static bool
refresh_schedule(HTAB *schedule, TimestampTz now)
{
	HASH_SEQ_STATUS status;
	StreamSchedule *entry;
	bool		present;
	List	   *crashed = NIL;
	List	   *streams;
	ListCell   *lc;

	worker_start_transaction("streamwm: reading streams");

	/*
	 * Starting the transaction ran the callbacks of every change committed
	 * before our snapshot; a change we do not see yet marks us stale again.
	 */
	schedule_stale = false;
	present = OidIsValid(get_extension_oid("streamwm", true));
	if (present && !wait_for_update(schedule))
	{
		Oid			nsp = get_namespace_oid("streamwm", true);

		schedule_relid = OidIsValid(nsp) ? get_relname_relid("stream_def", nsp) : InvalidOid;
		streams = sw_catalog_schedule();
		hash_seq_init(&status, schedule);
		while ((entry = hash_seq_search(&status)) != NULL)
			entry->seen = false;
		foreach(lc, streams)
		{
			SwScheduledStream *s = lfirst(lc);
			Oid			relid = s->stream;
			bool		found;

			entry = hash_search(schedule, &relid, HASH_ENTER, &found);
			if (!found)
			{
				entry->next_due = now;
				entry->failures = 0;
				entry->backlog_steps = 0;
				entry->held_logged = DT_NOBEGIN;
			}
			entry->granularity_us = s->granularity_null ? USECS_PER_SEC :
				Max(s->granularity_us, 1);
			/* just after W passes a whole granule: see next_tick() */
			entry->phase_us = (s->delay_us % entry->granularity_us + SW_TICK_SLACK_US) %
				entry->granularity_us;
			entry->seen = true;

			/*
			 * A step marked as started when this worker began: the worker
			 * before us ended inside it (a query that swallowed the timeout's
			 * cancel was ended with its process, or the server crashed).  Do
			 * not run that stream first again: back it off, longer each time
			 * in a row, so the other streams go on.
			 */
			if (!schedule_read_once && s->step_started)
			{
				int			crashes = s->step_crashes + 1;

				entry->next_due = now + Min(SW_MAX_BACKOFF_MS * INT64CONST(1000),
											entry->granularity_us << Min(crashes, 16));
				crashed = lappend_oid(crashed, relid);
				ereport(LOG,
						(errmsg("streamwm: the last step of stream %s did not finish (its worker ended); retrying it in %d ms",
								get_rel_name(relid) ? get_rel_name(relid) : "?",
								(int) ((entry->next_due - now) / 1000))));
			}
		}
		hash_seq_init(&status, schedule);
		while ((entry = hash_seq_search(&status)) != NULL)
		{
			if (!entry->seen)
				(void) hash_search(schedule, &entry->stream, HASH_REMOVE, NULL);
		}
		if (crashed != NIL)
			sw_catalog_steps_crashed(crashed);
		schedule_read_once = true;
	}
	worker_commit();
	return present;
}

/*
 * Say (at most once a minute per stream) that a stream was skipped because
 * another step holds it: typically a user's transaction that called
 * streamwm.process() and is still open.  In the tick's transaction.
 */
static void
report_held_stream(Oid relid, const char *name, StreamSchedule *entry)
{
	TimestampTz now = GetCurrentTimestamp();
	int			pid;

	if (entry != NULL && !TIMESTAMP_IS_NOBEGIN(entry->held_logged) &&
		now < entry->held_logged + SW_HELD_LOG_INTERVAL_US)
		return;
	if (entry != NULL)
		entry->held_logged = now;
	pid = sw_catalog_stream_holder_pid(relid);
	ereport(LOG,
			(errmsg("streamwm worker skipped stream \"%s\": another step holds it",
					name ? name : "?"),
			 pid != 0 ?
			 errdetail("Process %d holds the stream in an open transaction.", pid) :
			 errdetail("Another transaction holds the stream."),
			 errhint("A transaction that called streamwm.process() on the stream holds it until it commits or rolls back.")));
}

/*
 * Take the lock that makes this worker the only one of its database.  It is
 * a session lock on an object tag that no command takes (pg_extension, OID
 * 0, sub-ID SW_WORKER_LOCK_CLASS), in the default lock method and not an
 * advisory lock, so that releasing the session advisory locks user queries
 * leave behind (LockReleaseSession(USER_LOCKMETHOD)) keeps it.  The abort of
 * a top-level transaction releases session locks of the default method, so
 * the worker takes it again after each abort.  Returns false if another
 * process holds it.
 */
static bool
take_worker_lock(Oid dboid)
{
	LOCKTAG		tag;

	SET_LOCKTAG_OBJECT(tag, dboid, ExtensionRelationId, InvalidOid,
					   SW_WORKER_LOCK_CLASS);
	if (LockHeldByMe(&tag, ExclusiveLock))
		return true;
	return LockAcquire(&tag, ExclusiveLock, true, true) != LOCKACQUIRE_NOT_AVAIL;
}

/*
 * before_shmem_exit callback of a database worker: release the session lock
 * of take_worker_lock().  Session locks of the default lock method outlive
 * a process that ends outside a transaction (only an abort releases them),
 * and would keep every later worker of the database out.
 */
static void
release_worker_lock(int code, Datum arg)
{
	LockReleaseSession(DEFAULT_LOCKMETHOD);
}

/*
 * One tick of one stream, in its own transaction.  Returns false, having
 * done nothing, when the schedule turned out stale as the transaction
 * started (the stream may be gone): the caller reads it again first.
 * 'entry' is the stream's schedule entry, for report_held_stream().
 */
static bool
tick_stream(Oid relid, StreamSchedule *entry, bool *backlog)
{
	char	   *name;
	bool		ticked = false;
	int64		events;
	int64		max_rows = (int64) sw_batch_size << Min(entry ? entry->backlog_steps : 0,
													   SW_MAX_BACKLOG_SHIFT);

	/*
	 * Mark the step as started, committed on its own, so that if this
	 * process ends inside it the next worker knows which stream to back off
	 * (refresh_schedule).  The step's commit clears the mark.
	 */
	worker_start_transaction("streamwm: marking a step");
	(void) set_config_option("synchronous_commit", "off",
							 PGC_SUSET, PGC_S_SESSION, GUC_ACTION_LOCAL, true, 0, false);
	sw_catalog_mark_step_started(relid);
	worker_commit();

	worker_start_transaction("streamwm: processing a stream");
	if (!schedule_stale)
	{
		name = get_rel_name(relid);
		pgstat_report_activity(STATE_RUNNING,
							   psprintf("streamwm: processing stream %s", name ? name : "?"));
		events = sw_process_stream(relid, DT_NOBEGIN, true, max_rows);
		if (events < 0)
			report_held_stream(relid, name, entry);
		/* full: rows are waiting, step again (with more) once the others had theirs */
		*backlog = events >= max_rows;
		ticked = true;
	}
	worker_commit();
	return ticked;
}

void
streamwm_worker_main(Datum arg)
{
	Oid			dboid = DatumGetObjectId(arg);
	HTAB	   *schedule;
	HASHCTL		ctl;
	bool		got_lock;
	TimestampTz extension_checked;

	int			slot;
	uint32		generation;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	memcpy(&slot, MyBgworkerEntry->bgw_extra, sizeof(slot));
	memcpy(&generation, MyBgworkerEntry->bgw_extra + sizeof(slot), sizeof(generation));
	/* a database that DROP DATABASE (or the like) keeps us out of, or a stale slot */
	if (!sw_worker_attach(slot, generation))
		sw_worker_exit_cleanly();
	BackgroundWorkerInitializeConnectionByOid(dboid, InvalidOid, 0);
	/* steps need READ COMMITTED (process.c), whatever the database's default */
	SetConfigOption("default_transaction_isolation", "read committed",
					PGC_SUSET, PGC_S_OVERRIDE);
	pgstat_report_appname("streamwm worker");

	/*
	 * Leave at once, never holding the lock, if streamwm is not installed
	 * (yet): the launcher's probe of a database whose CREATE EXTENSION has
	 * not committed must not keep out the worker that commit starts.
	 */
	if (!extension_installed())
	{
		ereport(DEBUG1,
				(errmsg("streamwm worker for database %u stops: the extension is not installed",
						dboid)));
		sw_worker_exit_cleanly();
	}

	/* One worker per database: a session lock, released when we exit. */
	before_shmem_exit(release_worker_lock, (Datum) 0);
	StartTransactionCommand();
	got_lock = take_worker_lock(dboid);
	CommitTransactionCommand();
	if (!got_lock)
		sw_worker_exit_cleanly();

	ctl.keysize = sizeof(Oid);
	ctl.entrysize = sizeof(StreamSchedule);
	schedule = hash_create("streamwm stream schedule", 16, &ctl, HASH_ELEM | HASH_BLOBS);
	tick_cxt = AllocSetContextCreate(TopMemoryContext, "streamwm tick",
									 ALLOCSET_DEFAULT_SIZES);
	CacheRegisterRelcacheCallback(schedule_relcache_callback, (Datum) 0);
	schedule_stale = true;
	extension_checked = GetCurrentTimestamp();

	for (;;)
	{
		TimestampTz now;
		TimestampTz wake;
		HASH_SEQ_STATUS status;
		StreamSchedule *entry;
		List	   *due = NIL;
		ListCell   *lc;
		long		sleep_ms;

		bool		present = true;

		handle_interrupts();
		MemoryContextReset(tick_cxt);
		MemoryContextSwitchTo(tick_cxt);

		/*
		 * Run the callbacks of catalog changes committed since we last
		 * looked (outside a transaction, as pg_cron's scheduler does): a
		 * change of stream_def marks the schedule stale.
		 */
		AcceptInvalidationMessages();

		now = GetCurrentTimestamp();
		if (!sw_enabled)
			wake = now + SW_MAX_SLEEP_MS * 1000;
		else
		{
			if (schedule_stale ||
				(version_waiting && now >= extension_checked + SW_VERSION_CHECK_MS * 1000))
			{
				present = refresh_schedule(schedule, now);
				extension_checked = now;
			}
			else if (now >= extension_checked + SW_EXTENSION_CHECK_MS * 1000)
			{
				present = extension_installed();
				extension_checked = now;
			}
			if (!present)
			{
				ereport(LOG,
						(errmsg("streamwm worker for database %u stops: the extension is not installed",
								dboid)));
				sw_worker_exit_cleanly();
			}

			/*
			 * No stream: leave, so that a database with the extension and
			 * nothing to process holds no background worker slot.  The
			 * transaction that creates its first stream asks the launcher
			 * for a worker when it commits (schedule_changed).  A worker
			 * waiting for ALTER EXTENSION ... UPDATE stays: it resumes then.
			 */
			if (hash_get_num_entries(schedule) == 0 && !version_waiting)
			{
				ereport(DEBUG1,
						(errmsg("streamwm worker for database %u stops: no stream to process",
								dboid)));
				sw_worker_exit_cleanly();
			}
			hash_seq_init(&status, schedule);
			while ((entry = hash_seq_search(&status)) != NULL)
			{
				if (entry->next_due <= now)
					due = lappend_oid(due, entry->stream);
			}
			foreach(lc, due)
			{
				Oid			relid = lfirst_oid(lc);
				MemoryContext cxt = CurrentMemoryContext;
				bool		ticked = false;
				bool		failed = false;
				bool		backlog = false;

				CHECK_FOR_INTERRUPTS();
				if (schedule_stale)
					break;		/* read the schedule again first */
				PG_TRY();
				{
					ticked = tick_stream(relid,
										 hash_search(schedule, &relid, HASH_FIND, NULL),
										 &backlog);
				}
				PG_CATCH();
				{
					MemoryContextSwitchTo(cxt);
					EmitErrorReport();
					FlushErrorState();
					AbortCurrentTransaction();
					MemoryContextSwitchTo(tick_cxt);
					pgstat_report_activity(STATE_IDLE, NULL);
					failed = true;
				}
				PG_END_TRY();
				MemoryContextSwitchTo(cxt);

				/* no lock a user's query took outlives its step */
				LockReleaseSession(USER_LOCKMETHOD);
				if (failed)
				{
					bool		again;

					/* the abort released our session lock: take it again */
					StartTransactionCommand();
					again = take_worker_lock(dboid);
					CommitTransactionCommand();
					MemoryContextSwitchTo(cxt);
					if (!again)
					{
						ereport(LOG,
								(errmsg("streamwm worker for database %u stops: another worker took over",
										dboid)));
						sw_worker_exit_cleanly();
					}
				}

				entry = hash_search(schedule, &relid, HASH_FIND, NULL);
				if (entry == NULL)
					continue;
				if (failed)
				{
					int64		backoff = Min(SW_MAX_BACKOFF_MS * 1000,
											  entry->granularity_us << Min(entry->failures, 16));

					entry->failures++;
					/* a step that failed tries one batch again */
					entry->backlog_steps = 0;
					entry->next_due = GetCurrentTimestamp() + backoff;
					/* the stream may be gone or changed: read them again */
					schedule_stale = true;
				}
				else if (!ticked)
					break;		/* stale: still due after the schedule is read */
				else if (backlog)
				{
					/* drain a backlog at full speed, not a batch per granularity */
					entry->failures = 0;
					entry->backlog_steps++;
					entry->next_due = GetCurrentTimestamp();
				}
				else
				{
					entry->failures = 0;
					entry->backlog_steps = 0;
					entry->next_due = next_tick(GetCurrentTimestamp(), entry);
				}
			}

			wake = GetCurrentTimestamp() + SW_MAX_SLEEP_MS * 1000;
			hash_seq_init(&status, schedule);
			while ((entry = hash_seq_search(&status)) != NULL)
			{
				if (entry->next_due < wake)
					wake = entry->next_due;
			}
			if (schedule_stale)
				wake = GetCurrentTimestamp();
			else if (version_waiting && extension_checked + SW_VERSION_CHECK_MS * 1000 < wake)
				wake = extension_checked + SW_VERSION_CHECK_MS * 1000;
		}

		sleep_ms = (long) ((wake - GetCurrentTimestamp()) / 1000);
		if (sleep_ms > 0)
		{
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 sleep_ms, PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
		}
	}
}
