/*-------------------------------------------------------------------------
 * worker_coord.c
 *	  How backends, the launcher and the database workers coordinate, in
 *	  shared memory (only with shared_preload_libraries = 'streamwm').
 *
 *	 requests	  a backend whose transaction created the extension or a
 *				  stream asks, when it commits, for its database's worker
 *				  (sw_request_worker); the launcher takes the requests
 *				  (sw_take_requests) and is woken by its latch.
 *	 slots		  one per database worker the launcher started: the
 *				  worker's database and pid, and whether it left cleanly
 *				  (nothing to do: no extension, no stream, another worker
 *				  runs, or its database is kept away) or not (an error:
 *				  the launcher starts it again after
 *				  streamwm.worker_restart_seconds).  Database workers are
 *				  never restarted by the postmaster, which would restart
 *				  one into a database that no longer exists forever.
 *	 kept away	  databases that a utility command needs without other
 *				  sessions: DROP DATABASE, ALTER DATABASE ... RENAME TO or
 *				  SET TABLESPACE, CREATE DATABASE ... TEMPLATE.  The
 *				  ProcessUtility hook marks the database, stops its worker
 *				  (only for a statement alone, outside a transaction block:
 *				  its transaction ends with it) and, when the command's
 *				  transaction ends, unmarks it and
 *				  asks for the worker again (the launcher starts none for a
 *				  database that no longer exists).  So plain DROP DATABASE
 *				  works while a worker runs, as TimescaleDB's loader does it.
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>

#include "access/xact.h"
#include "commands/dbcommands.h"
#include "commands/defrem.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/memutils.h"

#include "worker_coord.h"

#define SW_MAX_REQUESTS 64
#define SW_MAX_KEPT_AWAY 16

typedef struct SwWorkerSlot
{
	bool		in_use;			/* taken by the launcher for a worker */
	Oid			dboid;
	pid_t		pid;			/* 0 until the worker runs, and once it left */
	bool		clean_exit;		/* it left because it had nothing to do */
	uint32		generation;		/* one more each time the slot is taken */
} SwWorkerSlot;

typedef struct SwCoordShared
{
	slock_t		mutex;
	PGPROC	   *launcher;		/* to wake it; NULL before it runs */
	int			nrequests;
	bool		overflow;		/* requests were lost: probe every database */
	Oid			requests[SW_MAX_REQUESTS];
	Oid			kept_away[SW_MAX_KEPT_AWAY];	/* InvalidOid: free */
	int			nslots;
	SwWorkerSlot slots[FLEXIBLE_ARRAY_MEMBER];
} SwCoordShared;

static SwCoordShared *coord = NULL;
static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

/* the slot of this database worker, -1 elsewhere */
static int	my_slot = -1;

/* databases this backend keeps away until its transaction ends */
static List *kept_by_me = NIL;
static bool keep_callback_registered = false;

static Size
coord_size(void)
{
	return add_size(offsetof(SwCoordShared, slots),
					mul_size(max_worker_processes, sizeof(SwWorkerSlot)));
}

static void
coord_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(coord_size());
}

static void
coord_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	coord = ShmemInitStruct("streamwm worker coordination", coord_size(), &found);
	if (!found)
	{
		memset(coord, 0, coord_size());
		SpinLockInit(&coord->mutex);
		coord->nslots = max_worker_processes;
	}
	LWLockRelease(AddinShmemInitLock);
}

/* From _PG_init while shared_preload_libraries is being processed. */
void
sw_coord_init(void)
{
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = coord_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = coord_shmem_startup;
}

bool
sw_coord_active(void)
{
	return coord != NULL;
}

/* ---------------------------------------------------------------------
 * Requests
 * ---------------------------------------------------------------------
 */

static void
wake_launcher(void)
{
	PGPROC	   *launcher;

	SpinLockAcquire(&coord->mutex);
	launcher = coord->launcher;
	SpinLockRelease(&coord->mutex);
	if (launcher != NULL)
		SetLatch(&launcher->procLatch);
}

void
sw_request_worker(Oid dboid)
{
	bool		known = false;

	if (coord == NULL)
		return;
	SpinLockAcquire(&coord->mutex);
	for (int i = 0; i < coord->nrequests; i++)
		known |= coord->requests[i] == dboid;
	if (!known)
	{
		if (coord->nrequests < SW_MAX_REQUESTS)
			coord->requests[coord->nrequests++] = dboid;
		else
			coord->overflow = true;
	}
	SpinLockRelease(&coord->mutex);
	wake_launcher();
}

void
sw_launcher_attach(void)
{
	SpinLockAcquire(&coord->mutex);
	coord->launcher = MyProc;
	SpinLockRelease(&coord->mutex);
}

List *
sw_take_requests(bool *all)
{
	List	   *result = NIL;
	Oid			taken[SW_MAX_REQUESTS];
	int			n;

	SpinLockAcquire(&coord->mutex);
	n = coord->nrequests;
	memcpy(taken, coord->requests, n * sizeof(Oid));
	coord->nrequests = 0;
	*all = coord->overflow;
	coord->overflow = false;
	SpinLockRelease(&coord->mutex);
	for (int i = 0; i < n; i++)
		result = lappend_oid(result, taken[i]);
	return result;
}

/* ---------------------------------------------------------------------
 * Slots
 * ---------------------------------------------------------------------
 */

int
sw_slot_acquire(Oid dboid)
{
	int			slot = -1;

	SpinLockAcquire(&coord->mutex);
	for (int i = 0; i < coord->nslots && slot < 0; i++)
	{
		if (!coord->slots[i].in_use)
		{
			slot = i;
			coord->slots[i].in_use = true;
			coord->slots[i].dboid = dboid;
			coord->slots[i].pid = 0;
			coord->slots[i].clean_exit = false;
			coord->slots[i].generation++;
		}
	}
	SpinLockRelease(&coord->mutex);
	return slot;
}

/* The slot's generation, for its worker to check that it is still its own. */
uint32
sw_slot_generation(int slot)
{
	uint32		generation;

	SpinLockAcquire(&coord->mutex);
	generation = coord->slots[slot].generation;
	SpinLockRelease(&coord->mutex);
	return generation;
}

bool
sw_slot_release(int slot)
{
	bool		clean;

	SpinLockAcquire(&coord->mutex);
	clean = coord->slots[slot].clean_exit;
	coord->slots[slot].in_use = false;
	coord->slots[slot].pid = 0;
	SpinLockRelease(&coord->mutex);
	return clean;
}

/*
 * Free the slots of workers that a launcher before this one started (the
 * launcher was restarted) and that have left since: 'owned' says which
 * slots this launcher tracks itself.
 */
void
sw_slots_reclaim(const bool *owned)
{
	SpinLockAcquire(&coord->mutex);
	for (int i = 0; i < coord->nslots; i++)
	{
		if (coord->slots[i].in_use && !owned[i] && coord->slots[i].pid == 0)
			coord->slots[i].in_use = false;
	}
	SpinLockRelease(&coord->mutex);
}

int
sw_slot_count(void)
{
	return coord->nslots;
}

static bool
kept_away_locked(Oid dboid)
{
	for (int i = 0; i < SW_MAX_KEPT_AWAY; i++)
	{
		if (coord->kept_away[i] == dboid)
			return true;
	}
	return false;
}

bool
sw_database_kept_away(Oid dboid)
{
	bool		away;

	SpinLockAcquire(&coord->mutex);
	away = kept_away_locked(dboid);
	SpinLockRelease(&coord->mutex);
	return away;
}

static void
slot_exit_callback(int code, Datum arg)
{
	SpinLockAcquire(&coord->mutex);
	coord->slots[my_slot].pid = 0;
	SpinLockRelease(&coord->mutex);
}

/*
 * A database worker starting in 'slot' of 'generation': records its pid.
 * Returns false if it must leave at once: its database is kept away (either
 * the utility command sees our pid and stops us, or we see its mark), or
 * the slot is no longer the one we were started in (a launcher started
 * after ours freed it before we got here, and may have given it to another
 * database): then we leave without touching it.
 */
bool
sw_worker_attach(int slot, uint32 generation)
{
	bool		away;
	bool		ours;

	if (coord == NULL || slot < 0 || slot >= coord->nslots)
		return true;
	SpinLockAcquire(&coord->mutex);
	ours = coord->slots[slot].in_use && coord->slots[slot].generation == generation &&
		coord->slots[slot].pid == 0;
	if (ours)
		coord->slots[slot].pid = MyProcPid;
	away = ours && kept_away_locked(coord->slots[slot].dboid);
	SpinLockRelease(&coord->mutex);
	if (!ours)
		return false;
	my_slot = slot;
	before_shmem_exit(slot_exit_callback, (Datum) 0);
	return !away;
}

void
sw_worker_exit_cleanly(void)
{
	if (coord != NULL && my_slot >= 0)
	{
		SpinLockAcquire(&coord->mutex);
		coord->slots[my_slot].clean_exit = true;
		SpinLockRelease(&coord->mutex);
	}
	proc_exit(0);
}

/* ---------------------------------------------------------------------
 * Keeping workers away from a database during a utility command
 * ---------------------------------------------------------------------
 */

static void
keep_xact_callback(XactEvent event, void *arg)
{
	ListCell   *lc;

	if (kept_by_me == NIL ||
		(event != XACT_EVENT_COMMIT && event != XACT_EVENT_ABORT))
		return;
	SpinLockAcquire(&coord->mutex);
	foreach(lc, kept_by_me)
	{
		for (int i = 0; i < SW_MAX_KEPT_AWAY; i++)
		{
			if (coord->kept_away[i] == lfirst_oid(lc))
			{
				coord->kept_away[i] = InvalidOid;
				break;
			}
		}
	}
	SpinLockRelease(&coord->mutex);
	/* the database may still be there (the command failed, or kept it) */
	foreach(lc, kept_by_me)
		sw_request_worker(lfirst_oid(lc));
	list_free(kept_by_me);
	kept_by_me = NIL;
}

/*
 * Keep database workers away from 'dbname' until this transaction ends and
 * stop the one that runs there.  The command itself then waits (up to 5 s,
 * as for any other session) for it to leave.
 */
static void
keep_workers_away(const char *dbname)
{
	Oid			dboid = get_database_oid(dbname, true);
	List	   *pids = NIL;
	ListCell   *lc;
	bool		marked = false;
	MemoryContext old;

	/* only for a command that may go ahead: its owner's or a superuser's */
	if (!OidIsValid(dboid) || dboid == MyDatabaseId ||
		!pg_database_ownercheck(dboid, GetUserId()))
		return;
	if (!keep_callback_registered)
	{
		RegisterXactCallback(keep_xact_callback, NULL);
		keep_callback_registered = true;
	}
	SpinLockAcquire(&coord->mutex);
	if (kept_away_locked(dboid))
		marked = true;			/* by another command too: it unmarks */
	for (int i = 0; i < SW_MAX_KEPT_AWAY && !marked; i++)
	{
		if (!OidIsValid(coord->kept_away[i]))
		{
			coord->kept_away[i] = dboid;
			marked = true;
		}
	}
	for (int i = 0; i < coord->nslots; i++)
	{
		if (coord->slots[i].in_use && coord->slots[i].dboid == dboid &&
			coord->slots[i].pid != 0)
			pids = lappend_int(pids, coord->slots[i].pid);
	}
	SpinLockRelease(&coord->mutex);
	old = MemoryContextSwitchTo(TopMemoryContext);
	kept_by_me = lappend_oid(kept_by_me, dboid);
	MemoryContextSwitchTo(old);
	foreach(lc, pids)
		(void) kill(lfirst_int(lc), SIGTERM);
	list_free(pids);
}

static const char *
template_of(CreatedbStmt *stmt)
{
	ListCell   *lc;

	foreach(lc, stmt->options)
	{
		DefElem    *opt = lfirst(lc);

		if (strcmp(opt->defname, "template") == 0 && opt->arg != NULL)
			return defGetString(opt);
	}
	return NULL;
}

static bool
moves_tablespace(AlterDatabaseStmt *stmt)
{
	ListCell   *lc;

	foreach(lc, stmt->options)
	{
		if (strcmp(((DefElem *) lfirst(lc))->defname, "tablespace") == 0)
			return true;
	}
	return false;
}

/* Before a utility statement (streamwm.c): keep workers away from a database it needs alone. */
void
sw_coord_utility(PlannedStmt *pstmt, ProcessUtilityContext context)
{
	Node	   *parsetree = pstmt->utilityStmt;

	/*
	 * Only a statement of its own, outside a transaction block (where DROP
	 * DATABASE, CREATE DATABASE and SET TABLESPACE must run anyway): its
	 * transaction then ends with it, and so does the mark.  Inside a block
	 * a savepoint or PREPARE TRANSACTION could keep the mark, and the
	 * worker away, for as long as the block lives; a RENAME there fails on
	 * the worker's session as on any other, and can be run alone.
	 */
	if (coord != NULL && context == PROCESS_UTILITY_TOPLEVEL && !IsTransactionBlock())
	{
		switch (nodeTag(parsetree))
		{
			case T_DropdbStmt:
				keep_workers_away(((DropdbStmt *) parsetree)->dbname);
				break;
			case T_RenameStmt:
				if (((RenameStmt *) parsetree)->renameType == OBJECT_DATABASE &&
					have_createdb_privilege())
					keep_workers_away(((RenameStmt *) parsetree)->subname);
				break;
			case T_CreatedbStmt:
				{
					const char *template = template_of((CreatedbStmt *) parsetree);

					if (template != NULL && have_createdb_privilege())
						keep_workers_away(template);
				}
				break;
			case T_AlterDatabaseStmt:
				if (moves_tablespace((AlterDatabaseStmt *) parsetree))
					keep_workers_away(((AlterDatabaseStmt *) parsetree)->dbname);
				break;
			default:
				break;
		}
	}
}
