/*-------------------------------------------------------------------------
 * query_ddl.c
 *	  Owns keeping window queries whole under DDL of the relations they read
 *	  (SPEC section 3: DDL that would break a query is refused with an error
 *	  naming the query; renaming the stream, a column or another table the
 *	  query reads keeps it working).
 *
 * A query is stored bound: query_def.query is the user's SELECT analyzed
 * once and deparsed under search_path = pg_catalog, pg_temp, so every name
 * outside pg_catalog is qualified (_bind_query, query.c); steps read it
 * again under that path.  query_def.reads lists every relation the query
 * reads, at any depth (filled by _register_query).  Two event triggers
 * look after those relations:
 *
 *	 - At ddl_command_start (streamwm_internal._guard_ddl calls sw_query_ddl_start):
 *	   ALTER TABLE ... DROP COLUMN / ALTER COLUMN ... TYPE of a column a query
 *	   uses, and DROP TABLE / VIEW of a relation a query reads other than its
 *	   stream (drop_stream and the sql_drop trigger deal with that one), or
 *	   DROP SCHEMA of a schema holding one, are refused with
 *	   ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST.  Whether a query
 *	   uses a column is decided on its stored text analyzed again, as its
 *	   owner: the column is in the selectedCols of an RTE of that relation,
 *	   at any depth -- PostgreSQL's own record of every Var of it (through
 *	   join aliases too) and of a whole-row reference, which uses them all.
 *	 - Renames of a relation a query reads (ALTER TABLE/VIEW ... RENAME,
 *	   RENAME COLUMN, SET SCHEMA, and ALTER SCHEMA ... RENAME of its schema):
 *	   at ddl_command_start the query's stored text is analyzed while the
 *	   old names still resolve, and the tree is kept; at ddl_command_end
 *	   (streamwm_internal._guard_ddl_end) the tree is deparsed again.  ruleutils
 *	   finds relations and columns by OID and attribute number and prints
 *	   their current names, so the new text carries the new names (output
 *	   column names stay: they are the result table's).  It replaces
 *	   query_def.query, written as the catalog's owner.
 *
 * A stored query that no longer analyzes (broken by something else) never
 * blocks DDL: it is left as it is, with a WARNING for a rename.
 *
 * The kept trees live in a context under TopTransactionContext, each tagged
 * with the command's parse tree and the subtransaction it ran in, which is
 * what ddl_command_end matches: entries of a command that failed (in a
 * subtransaction rolled back to a savepoint) are never matched again and go
 * with the transaction.
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/sysattr.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "commands/event_trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "nodes/bitmapset.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "nodes/parsenodes.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/resowner.h"

#include "catalog.h"
#include "query.h"
#include "query_ddl.h"
#include "version.h"

PG_FUNCTION_INFO_V1(streamwm_guard_ddl_end);

/* A query to deparse again when the command that renames ends. */
typedef struct PendingRebind
{
	Node	   *command;		/* the DDL's parse tree */
	SubTransactionId subxid;	/* the subtransaction it runs in */
	char	   *name;
	Query	   *tree;			/* analyzed under the old names */
} PendingRebind;

static List *pending = NIL;		/* in pending_cxt */
static MemoryContext pending_cxt = NULL;	/* under TopTransactionContext */
static LocalTransactionId pending_lxid = InvalidLocalTransactionId;

/* A column change to check: DROP COLUMN or ALTER COLUMN ... TYPE. */
typedef struct ColumnChange
{
	const char *column;
	AttrNumber	attnum;
	const char *what;			/* "drop" or "alter type of" */
} ColumnChange;

/* Is this an object type whose renames and drops concern the queries reading it? */
static bool
is_readable_objtype(ObjectType t)
{
	return t == OBJECT_TABLE || t == OBJECT_VIEW || t == OBJECT_MATVIEW ||
		t == OBJECT_FOREIGN_TABLE;
}

/* "stream", "table", "view", ... for messages */
static const char *
relation_kind(Oid relid, const SwStoredQuery *sq)
{
	if (sq != NULL && relid == sq->stream)
		return "stream";
	switch (get_rel_relkind(relid))
	{
		case RELKIND_VIEW:
			return "view";
		case RELKIND_MATVIEW:
			return "materialized view";
		case RELKIND_FOREIGN_TABLE:
			return "foreign table";
		default:
			return "table";
	}
}

/*
 * A stored query analyzed again, as its owner, with names resolved as a
 * step resolves them; the tree is allocated in cxt.  NULL if it no longer
 * analyzes (with the error in *error): such a query is broken already, and
 * must not block the DDL.  A cancel is not swallowed.
 */
static void *
analyze_text(void *arg)
{
	return sw_analyze_bound_query((const char *) arg);
}

static Query *
analyze_stored(const SwStoredQuery *sq, MemoryContext cxt, ErrorData **error)
{
	return sw_try_as_role(sq->owner, analyze_text, (void *) sq->query, cxt, error);
}

/*
 * The memory context of the kept trees, under TopTransactionContext: made
 * again in each transaction.
 */
static MemoryContext
pending_context(void)
{
	if (pending_lxid != MyProc->lxid || pending_cxt == NULL)
	{
		/* the old list and context went with their transaction */
		pending = NIL;
		pending_cxt = AllocSetContextCreate(TopTransactionContext,
											"streamwm query rebind",
											ALLOCSET_DEFAULT_SIZES);
		pending_lxid = MyProc->lxid;
	}
	return pending_cxt;
}

/* Keep a tree (in pending_context()) for the end of command. */
static void
add_pending(Node *command, const char *name, Query *tree)
{
	MemoryContext old = MemoryContextSwitchTo(pending_context());
	PendingRebind *p = palloc(sizeof(PendingRebind));

	p->command = command;
	p->subxid = GetCurrentSubTransactionId();
	p->name = pstrdup(name);
	p->tree = tree;
	pending = lappend(pending, p);
	MemoryContextSwitchTo(old);
}

/* Does a query tree use column attnum of relid (or all of it, as a row)? */
typedef struct ColumnUseContext
{
	Oid			relid;
	AttrNumber	attnum;
} ColumnUseContext;

static bool
column_use_walker(Node *node, ColumnUseContext *ctx)
{
	if (node == NULL)
		return false;
	if (IsA(node, RangeTblEntry))
	{
		RangeTblEntry *rte = (RangeTblEntry *) node;

		if (rte->rtekind == RTE_RELATION && rte->relid == ctx->relid &&
			(bms_is_member(ctx->attnum - FirstLowInvalidHeapAttributeNumber,
						   rte->selectedCols) ||
			 bms_is_member(InvalidAttrNumber - FirstLowInvalidHeapAttributeNumber,
						   rte->selectedCols)))
			return true;
		return false;
	}
	if (IsA(node, Query))
		return query_tree_walker((Query *) node, column_use_walker, ctx,
								 QTW_EXAMINE_RTES_BEFORE);
	return expression_tree_walker(node, column_use_walker, ctx);
}

static bool
query_uses_column(Query *q, Oid relid, AttrNumber attnum)
{
	ColumnUseContext ctx;

	ctx.relid = relid;
	ctx.attnum = attnum;
	return column_use_walker((Node *) q, &ctx);
}

/* The names of the queries beyond the first, for a DETAIL: "b", "c" */
static char *
other_names(List *names)
{
	StringInfoData buf;
	ListCell   *lc;

	initStringInfo(&buf);
	for_each_from(lc, names, 1)
		appendStringInfo(&buf, "%s\"%s\"", buf.len > 0 ? ", " : "",
						 (char *) lfirst(lc));
	return buf.data;
}

/*
 * ALTER TABLE ... DROP COLUMN / ALTER COLUMN ... TYPE: refused when a query
 * uses the column.  A column no query uses may go; the queries reading the
 * relation are then deparsed again at ddl_command_end, since a stored text
 * may list the relation's columns (ruleutils writes a column alias list
 * where a rename needs one, as in JOIN ... USING).
 */
static void
check_alter_table(AlterTableStmt *stmt)
{
	Oid			relid;
	List	   *changes = NIL;
	List	   *queries;
	List	   *trees = NIL;
	bool		drops = false;
	MemoryContext cxt;
	ListCell   *lc;
	ListCell   *lc2;
	ListCell   *lc3;

	if (!is_readable_objtype(stmt->objtype) || stmt->relation == NULL)
		return;
	foreach(lc, stmt->cmds)
	{
		AlterTableCmd *cmd = lfirst_node(AlterTableCmd, lc);
		ColumnChange *ch;

		if ((cmd->subtype != AT_DropColumn && cmd->subtype != AT_AlterColumnType) ||
			cmd->name == NULL)
			continue;
		ch = palloc(sizeof(ColumnChange));
		ch->column = cmd->name;
		ch->what = cmd->subtype == AT_DropColumn ? "drop" : "alter type of";
		ch->attnum = InvalidAttrNumber;
		drops |= (cmd->subtype == AT_DropColumn);
		changes = lappend(changes, ch);
	}
	if (changes == NIL)
		return;
	relid = RangeVarGetRelid(stmt->relation, NoLock, true);
	if (!OidIsValid(relid))
		return;
	foreach(lc, changes)
	{
		ColumnChange *ch = lfirst(lc);

		ch->attnum = get_attnum(relid, ch->column);
	}

	queries = sw_catalog_queries_reading(list_make1_oid(relid), InvalidOid);
	if (queries == NIL)
		return;
	cxt = drops ? pending_context() : CurrentMemoryContext;
	foreach(lc, queries)
	{
		ErrorData  *error;

		trees = lappend(trees, analyze_stored(lfirst(lc), cxt, &error));
	}

	foreach(lc, changes)
	{
		ColumnChange *ch = lfirst(lc);
		List	   *users = NIL;
		SwStoredQuery *first = NULL;

		if (ch->attnum <= 0)
			continue;			/* no such column: PostgreSQL says so */
		forboth(lc2, queries, lc3, trees)
		{
			SwStoredQuery *sq = lfirst(lc2);
			Query	   *tree = lfirst(lc3);

			if (tree != NULL && query_uses_column(tree, relid, ch->attnum))
			{
				if (first == NULL)
					first = sq;
				users = lappend(users, sq->name);
			}
		}
		if (first != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
					 errmsg("cannot %s column \"%s\" of %s \"%s\" because query \"%s\" uses it",
							ch->what, ch->column, relation_kind(relid, first),
							get_rel_name(relid), first->name),
					 list_length(users) > 1 ?
					 errdetail_plural("Query %s uses it too.", "Queries %s use it too.",
									  list_length(users) - 1, other_names(users)) : 0,
					 errhint("Drop the query with streamwm.drop_query() first.")));
	}

	if (drops)
	{
		forboth(lc, queries, lc2, trees)
		{
			if (lfirst(lc2) != NULL)
				add_pending((Node *) stmt, ((SwStoredQuery *) lfirst(lc))->name,
							lfirst(lc2));
		}
	}
}

/*
 * DROP TABLE / VIEW / ... of a relation a query reads, other than the
 * query's own stream (drop_stream and the sql_drop trigger handle that).
 */
static void
check_drop(DropStmt *stmt)
{
	List	   *relids = NIL;
	List	   *queries;
	ListCell   *lc;

	if (!is_readable_objtype(stmt->removeType))
		return;
	foreach(lc, stmt->objects)
	{
		Oid			relid = RangeVarGetRelid(makeRangeVarFromNameList((List *) lfirst(lc)),
											 NoLock, true);

		if (OidIsValid(relid))
			relids = lappend_oid(relids, relid);
	}
	if (relids == NIL)
		return;
	queries = sw_catalog_queries_reading(relids, InvalidOid);
	foreach(lc, relids)
	{
		Oid			relid = lfirst_oid(lc);
		List	   *users = NIL;
		ListCell   *lc2;

		foreach(lc2, queries)
		{
			SwStoredQuery *sq = lfirst(lc2);
			ErrorData  *error;
			Query	   *tree;

			if (list_member_oid(relids, sq->stream))
				continue;		/* the query goes with its stream */
			tree = analyze_stored(sq, CurrentMemoryContext, &error);
			if (tree != NULL && list_member_oid(sw_query_relids(tree), relid))
				users = lappend(users, sq->name);
		}
		if (users != NIL)
			ereport(ERROR,
					(errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
					 errmsg("cannot drop %s \"%s\" because query \"%s\" reads it",
							relation_kind(relid, NULL), get_rel_name(relid),
							(char *) linitial(users)),
					 list_length(users) > 1 ?
					 errdetail_plural("Query %s reads it too.", "Queries %s read it too.",
									  list_length(users) - 1, other_names(users)) : 0,
					 errhint("Drop the query with streamwm.drop_query() first.")));
	}
}

/*
 * DROP SCHEMA (... CASCADE) of a schema holding a relation a query reads,
 * unless the query's stream is dropped along (its queries go with it).
 */
static void
check_drop_schema(DropStmt *stmt)
{
	List	   *nspids = NIL;
	ListCell   *lc;

	foreach(lc, stmt->objects)
	{
		Oid			nspid = get_namespace_oid(strVal(lfirst(lc)), true);

		if (OidIsValid(nspid))
			nspids = lappend_oid(nspids, nspid);
	}
	foreach(lc, nspids)
	{
		Oid			nspid = lfirst_oid(lc);
		ListCell   *lc2;

		foreach(lc2, sw_catalog_queries_reading(NIL, nspid))
		{
			SwStoredQuery *sq = lfirst(lc2);
			ErrorData  *error;
			Query	   *tree;
			ListCell   *lc3;

			if (list_member_oid(nspids, get_rel_namespace(sq->stream)))
				continue;
			tree = analyze_stored(sq, CurrentMemoryContext, &error);
			if (tree == NULL)
				continue;
			foreach(lc3, sw_query_relids(tree))
			{
				if (get_rel_namespace(lfirst_oid(lc3)) == nspid)
					ereport(ERROR,
							(errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
							 errmsg("cannot drop schema \"%s\" because query \"%s\" reads %s",
									get_namespace_name(nspid), sq->name,
									sw_relation_name(lfirst_oid(lc3))),
							 errhint("Drop the query with streamwm.drop_query() first.")));
			}
		}
	}
}

/*
 * A rename of relids, or of the relations in namespace nspid: keep each
 * query that reads one of them, analyzed under the old names, to be
 * deparsed again under the new ones at ddl_command_end.
 */
static void
keep_for_rebind(Node *command, List *relids, Oid nspid)
{
	List	   *queries = sw_catalog_queries_reading(relids, nspid);
	ListCell   *lc;

	foreach(lc, queries)
	{
		SwStoredQuery *sq = lfirst(lc);
		ErrorData  *error;
		Query	   *tree = analyze_stored(sq, pending_context(), &error);

		if (tree == NULL)
			ereport(WARNING,
					(errmsg("query \"%s\" is not updated for this change because it no longer analyzes",
							sq->name),
					 errdetail("%s", error->message)));
		else
			add_pending(command, sq->name, tree);
	}
}

/* RenameStmt: a relation, a column of one, or a schema. */
static void
check_rename(RenameStmt *stmt)
{
	Oid			relid;

	if (stmt->renameType == OBJECT_SCHEMA)
	{
		Oid			nspid = get_namespace_oid(stmt->subname, true);

		if (OidIsValid(nspid))
			keep_for_rebind((Node *) stmt, NIL, nspid);
		return;
	}
	if (stmt->renameType == OBJECT_COLUMN)
	{
		if (!is_readable_objtype(stmt->relationType))
			return;
	}
	else if (!is_readable_objtype(stmt->renameType))
		return;
	if (stmt->relation == NULL)
		return;
	relid = RangeVarGetRelid(stmt->relation, NoLock, true);
	if (OidIsValid(relid))
		keep_for_rebind((Node *) stmt, list_make1_oid(relid), InvalidOid);
}

/* ALTER TABLE ... SET SCHEMA */
static void
check_set_schema(AlterObjectSchemaStmt *stmt)
{
	Oid			relid;

	if (!is_readable_objtype(stmt->objectType) || stmt->relation == NULL)
		return;
	relid = RangeVarGetRelid(stmt->relation, NoLock, true);
	if (OidIsValid(relid))
		keep_for_rebind((Node *) stmt, list_make1_oid(relid), InvalidOid);
}

/*
 * Called by streamwm_internal._guard_ddl() (ddl_command_start) for every DDL
 * command, after the stream guards.
 */
void
sw_query_ddl_start(Node *parsetree)
{
	switch (nodeTag(parsetree))
	{
		case T_AlterTableStmt:
			check_alter_table((AlterTableStmt *) parsetree);
			break;
		case T_DropStmt:
			if (((DropStmt *) parsetree)->removeType == OBJECT_SCHEMA)
				check_drop_schema((DropStmt *) parsetree);
			else
				check_drop((DropStmt *) parsetree);
			break;
		case T_RenameStmt:
			check_rename((RenameStmt *) parsetree);
			break;
		case T_AlterObjectSchemaStmt:
			check_set_schema((AlterObjectSchemaStmt *) parsetree);
			break;
		default:
			break;
	}
}

/*
 * streamwm_internal._guard_ddl_end(): the ddl_command_end event trigger.  Deparses
 * again, under the new names, the queries kept at the start of this
 * command, and stores their text as the catalog's owner.
 */
Datum
streamwm_guard_ddl_end(PG_FUNCTION_ARGS)
{
	EventTriggerData *trigdata;
	SubTransactionId subxid = GetCurrentSubTransactionId();
	List	   *mine = NIL;
	ListCell   *lc;

	/* another version's catalog: leave DDL alone (version.c) */
	if (!sw_extension_version_matches(NULL))
		PG_RETURN_VOID();

	if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
		elog(ERROR, "streamwm_internal._guard_ddl_end() must be called as an event trigger");
	trigdata = (EventTriggerData *) fcinfo->context;
	if (pending_lxid != MyProc->lxid || pending == NIL)
		PG_RETURN_VOID();

	foreach(lc, pending)
	{
		PendingRebind *p = lfirst(lc);

		if (p->command != trigdata->parsetree || p->subxid != subxid)
			continue;
		mine = lappend(mine, p);
		pending = foreach_delete_current(pending, lc);
	}
	if (mine == NIL)
		PG_RETURN_VOID();

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	foreach(lc, mine)
	{
		PendingRebind *p = lfirst(lc);

		sw_catalog_rebind_query(p->name, sw_deparse_query(p->tree),
								sw_query_reads(p->tree));
	}
	SPI_finish();
	PG_RETURN_VOID();
}
