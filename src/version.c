/*-------------------------------------------------------------------------
 * version.c
 *	  Owns the check that the streamwm installed in this database (its
 *	  catalog tables, views and SQL functions: pg_extension.extversion) is
 *	  the version this library was built for (SW_LIBRARY_VERSION, from
 *	  streamwm.control).
 *
 * After a package upgrade the new library is loaded (it is preloaded, so
 * from the restart on) while each database keeps the old extension version
 * until ALTER EXTENSION streamwm UPDATE runs there.  In that window the C
 * code must not touch catalog tables of another shape: every C entry point
 * that reads or writes the catalog, and the stream tables' triggers, call
 * sw_require_extension_version() first and fail with
 * ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE and a hint to update; the
 * database worker waits (worker.c).  Exempt are the functions that read no
 * catalog: window_start(), pane_windows() (IMMUTABLE, possibly used in a
 * user's index), the aggregate support functions (only a step, which is
 * checked, reaches a catalog through them), _launch() (so that CREATE
 * EXTENSION streamwm VERSION '0.1' still works with this library, to be
 * updated at once) and _schedule_changed() (it only sends an
 * invalidation).  While the extension's own update scripts run, every
 * entry point is allowed (sw_require_extension_version_slow).  Event
 * triggers in a database of another version do nothing rather than fail,
 * so that DDL, ALTER EXTENSION UPDATE itself included, still runs.
 *
 * Cost.  The answer is cached per backend: once it is "matches", a check is
 * a test of a static variable (the insert trigger runs it for every row).
 * It is forgotten on any invalidation of pg_proc's syscache: every update
 * script creates, replaces or drops functions, and so does DROP EXTENSION
 * and CREATE EXTENSION, so a backend that cached one answer sees the next
 * version at its next check.  (pg_extension itself has no syscache, and an
 * update need not alter any particular table.)  A mismatch is never cached:
 * each call reads pg_extension again (one index lookup), so everything
 * works from the moment the update commits.
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/indexing.h"
#include "catalog/pg_extension.h"
#include "commands/dbcommands.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "version.h"

/* the cached answer: the extension here is this library's version */
bool		sw_version_ok = false;
static bool callback_registered = false;

static void
proc_changed(Datum arg, int cacheid, uint32 hashvalue)
{
	sw_version_ok = false;
}

/*
 * The extversion of streamwm in this database, or NULL if it is not
 * installed.  Needs a transaction.
 */
static char *
installed_version(void)
{
	Relation	rel;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tuple;
	char	   *version = NULL;

	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_extension_extname, BTEqualStrategyNumber, F_NAMEEQ,
				CStringGetDatum("streamwm"));
	scan = systable_beginscan(rel, ExtensionNameIndexId, true, NULL, 1, &key);
	tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple))
	{
		bool		isnull;
		Datum		d = heap_getattr(tuple, Anum_pg_extension_extversion,
									 RelationGetDescr(rel), &isnull);

		if (!isnull)
			version = TextDatumGetCString(d);
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return version;
}

/*
 * Is the extension in this database the version of this library?  Sets
 * *installed (if not NULL) to the installed version, NULL when streamwm is
 * not installed (which counts as a match: nothing of another shape is
 * there).  Needs a transaction.
 */
bool
sw_extension_version_matches(char **installed)
{
	char	   *v;

	if (!callback_registered)
	{
		CacheRegisterSyscacheCallback(PROCOID, proc_changed, (Datum) 0);
		callback_registered = true;
	}
	if (sw_version_ok && installed == NULL)
		return true;
	v = installed_version();
	if (installed)
		*installed = v;
	if (v == NULL)
		return true;
	if (strcmp(v, SW_LIBRARY_VERSION) != 0)
		return false;
	sw_version_ok = true;
	return true;
}

void
sw_version_mismatch_error(const char *installed)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("streamwm library %s is installed but the extension in database \"%s\" is %s",
					SW_LIBRARY_VERSION, get_database_name(MyDatabaseId),
					installed ? installed : "not installed"),
			 errhint("Run ALTER EXTENSION streamwm UPDATE in this database.")));
}

/* sw_require_extension_version() when the answer is not cached */
void
sw_require_extension_version_slow(void)
{
	char	   *installed;

	if (!sw_extension_version_matches(&installed))
	{
		/*
		 * An update in progress: ALTER EXTENSION UPDATE runs the script of
		 * each step with extversion already set to that step's target, so
		 * a script that calls a C function (0.1--0.2 plans every query
		 * with _upgrade_query) finds an intermediate version.  Only a
		 * superuser runs the extension's scripts (and what they call: a
		 * query's casts and functions, as _upgrade_query plans it), with
		 * this library; the C code of this version must work on the
		 * catalog each earlier step leaves (0.2's and 0.3's catalog tables
		 * are the same).
		 */
		if (creating_extension &&
			CurrentExtensionObject == get_extension_oid("streamwm", true))
			return;
		sw_version_mismatch_error(installed);
	}
}
