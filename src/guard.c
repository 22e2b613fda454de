/*-------------------------------------------------------------------------
 * guard.c
 *	  Owns the protection of stream tables against DDL that would break them
 *	  (SPEC section 3: a stream is an append-only log; DDL that would break
 *	  it is refused).
 *
 * Three layers:
 *
 *	 1. An event trigger on ddl_command_start, streamwm_internal._guard_ddl(), looks
 *		at the parse tree of each DDL command and refuses, for the tables
 *		listed in streamwm.stream_def, what would change or remove the
 *		system columns (sw_*), the triggers streamwm put on the table
 *		(sw_*), or what the table is (rules, inheritance, partitions), and
 *		any change of the offset sequence.  DROP COLUMN ... CASCADE and the
 *		like, which could take a trigger along, are caught afterwards by the
 *		sql_drop trigger streamwm_internal._guard_sql_drop() (SQL).  What the user's
 *		event_time and partition_key expressions use is protected by
 *		PostgreSQL itself: they are part of the sw_ingest trigger's WHEN
 *		clause, so the trigger depends on those columns (ingest.c).
 *	 2. Statement triggers on each stream table: UPDATE is refused
 *		(streamwm_internal._stream_no_update()), and TRUNCATE ... RESTART IDENTITY,
 *		which would hand out offsets again from 1 so that processing never
 *		reads the new rows, is undone with an error
 *		(streamwm_internal._stream_truncate(), BEFORE and AFTER TRUNCATE).  The
 *		BEFORE TRUNCATE trigger also counts the rows processing had not read
 *		(purge.c), as the sw_purge triggers do for DELETE.
 *	 3. Defence in depth, because a superuser can disable event triggers:
 *		sw_check_stream_columns() checks that every system column is there
 *		with its type before C code reads a Datum of it.
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/dependency.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "commands/event_trigger.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "nodes/parsenodes.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "catalog.h"
#include "citus.h"
#include "commit_order.h"
#include "guard.h"
#include "purge.h"
#include "query_ddl.h"
#include "version.h"

PG_FUNCTION_INFO_V1(streamwm_guard_ddl);
PG_FUNCTION_INFO_V1(streamwm_stream_no_update);
PG_FUNCTION_INFO_V1(streamwm_stream_truncate);

/* The system columns of a stream table and their types (SPEC section 2). */
static const struct
{
	const char *name;
	Oid			type;
}			sw_columns[] =
{
	{"sw_partition", INT4OID},
	{"sw_offset", INT8OID},
	{"sw_write_time", TIMESTAMPTZOID},
	{"sw_event_time", TIMESTAMPTZOID},
};

/*
 * Check that every system column of a stream table is there and has its
 * type, and return their attribute numbers.  C code reads these columns as
 * int4, int8 and timestamptz Datums; a column dropped or retyped behind
 * streamwm's back (with the event trigger disabled) must give an error, not
 * a read of the wrong type.
 */
void
sw_check_stream_columns(Relation rel, SwStreamColumns *cols)
{
	TupleDesc	tupdesc = RelationGetDescr(rel);
	AttrNumber *out[] = {&cols->partition, &cols->offset, &cols->write_time,
	&cols->event_time};

	StaticAssertStmt(lengthof(out) == lengthof(sw_columns),
					 "one attnum per system column");
	for (int i = 0; i < lengthof(sw_columns); i++)
	{
		AttrNumber	attno = InvalidAttrNumber;

		for (int j = 0; j < tupdesc->natts; j++)
		{
			Form_pg_attribute att = TupleDescAttr(tupdesc, j);

			if (!att->attisdropped &&
				strcmp(NameStr(att->attname), sw_columns[i].name) == 0)
			{
				if (att->atttypid != sw_columns[i].type)
					ereport(ERROR,
							(errcode(ERRCODE_DATATYPE_MISMATCH),
							 errmsg("column \"%s\" of stream \"%s\" has type %s, not %s",
									sw_columns[i].name, RelationGetRelationName(rel),
									format_type_be(att->atttypid),
									format_type_be(sw_columns[i].type)),
							 errdetail("The system columns of a stream are assigned by streamwm and must not be altered.")));
				attno = att->attnum;
				break;
			}
		}
		if (attno == InvalidAttrNumber)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("stream \"%s\" has no column \"%s\"",
							RelationGetRelationName(rel), sw_columns[i].name),
					 errdetail("The system columns of a stream are assigned by streamwm and must not be dropped.")));
		*out[i] = attno;
	}
}

/*
 * Check the types of the columns of an SPI result that C code reads as
 * system columns: column i (1-based) must have type types[i - 1].
 */
void
sw_check_result_types(TupleDesc tupdesc, const Oid *types, int n, const char *relname)
{
	if (tupdesc->natts < n)
		elog(ERROR, "streamwm: expected %d columns reading stream %s, got %d",
			 n, relname, tupdesc->natts);
	for (int i = 0; i < n; i++)
	{
		Form_pg_attribute att = TupleDescAttr(tupdesc, i);

		if (att->atttypid != types[i])
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("column \"%s\" of stream %s has type %s, not %s",
							NameStr(att->attname), relname,
							format_type_be(att->atttypid), format_type_be(types[i])),
					 errdetail("The system columns of a stream are assigned by streamwm and must not be altered.")));
	}
}

/* A table named by a RangeVar, if it exists (no lock: this is a check). */
static Oid
stream_of_rangevar(RangeVar *rv)
{
	Oid			relid;

	if (rv == NULL)
		return InvalidOid;
	relid = RangeVarGetRelid(rv, NoLock, true);
	if (!OidIsValid(relid) || !sw_catalog_is_stream(relid))
		return InvalidOid;
	return relid;
}

static bool
is_sw_name(const char *name)
{
	return name != NULL && strncmp(name, "sw_", 3) == 0;
}

/* Does a raw expression name a column whose name starts with "sw_"? */
static bool
names_sw_column(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, ColumnRef))
	{
		Node	   *last = llast(((ColumnRef *) node)->fields);

		return IsA(last, String) && is_sw_name(strVal(last));
	}
	return raw_expression_tree_walker(node, names_sw_column, context);
}

static void
refuse_column(Oid stream, const char *column, const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("cannot %s column \"%s\" of stream \"%s\"",
					what, column, get_rel_name(stream)),
			 errdetail("Columns whose names start with \"sw_\" belong to streamwm, which assigns them.")));
}

static void
refuse_trigger(Oid stream, const char *trigger, const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("cannot %s trigger \"%s\" of stream \"%s\"",
					what, trigger, get_rel_name(stream)),
			 errdetail("streamwm assigns offsets and keeps the stream append-only with this trigger.")));
}

static void
refuse_stream(Oid stream, const char *what, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_WRONG_OBJECT_TYPE),
			 errmsg("cannot %s stream \"%s\"", what, get_rel_name(stream)),
			 errdetail("%s", detail)));
}

/*
 * What a distributed stream (Citus, citus.c) cannot do yet: its column list
 * is also that of the coordinator's copy of the rows read, and its name is
 * in sw_partition's default, which Citus does not let change.
 */
static void
refuse_distributed(Oid stream, const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("cannot %s distributed stream \"%s\"", what, get_rel_name(stream)),
			 errdetail("The coordinator keeps a copy of the rows steps read, with the stream's columns, "
					   "and sw_partition's default names the stream."),
			 errhint("Create a new stream and a query that reads it.")));
}

/* The stream whose offset sequence seqoid is, or InvalidOid. */
static Oid
stream_of_sequence(Oid seqoid)
{
	Oid			tableid;
	int32		colid;

	if (!OidIsValid(seqoid) || get_rel_relkind(seqoid) != RELKIND_SEQUENCE)
		return InvalidOid;
	if (!sequenceIsOwned(seqoid, DEPENDENCY_AUTO, &tableid, &colid) &&
		!sequenceIsOwned(seqoid, DEPENDENCY_INTERNAL, &tableid, &colid))
		return InvalidOid;
	return sw_catalog_is_stream(tableid) ? tableid : InvalidOid;
}

static void
refuse_sequence(Oid stream, Oid seqoid, const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("cannot %s sequence \"%s\": it holds the offsets of stream \"%s\"",
					what, get_rel_name(seqoid), get_rel_name(stream)),
			 errdetail("Offsets must only grow, or processing skips rows.")));
}

/* ALTER TABLE on a stream: look at each subcommand. */
static void
guard_alter_table(AlterTableStmt *stmt)
{
	Oid			stream;
	ListCell   *lc;

	if (stmt->objtype == OBJECT_SEQUENCE)
	{
		Oid			seqoid = RangeVarGetRelid(stmt->relation, NoLock, true);
		Oid			owner = stream_of_sequence(seqoid);

		if (OidIsValid(owner))
			refuse_sequence(owner, seqoid, "alter");
		return;
	}

	/* attaching a stream as a partition of another table */
	foreach(lc, stmt->cmds)
	{
		AlterTableCmd *cmd = lfirst_node(AlterTableCmd, lc);

		if (cmd->subtype == AT_AttachPartition && cmd->def != NULL &&
			IsA(cmd->def, PartitionCmd))
		{
			Oid			part = stream_of_rangevar(((PartitionCmd *) cmd->def)->name);

			if (OidIsValid(part))
				refuse_stream(part, "attach",
							  "A stream cannot become a partition of another table.");
		}
		else if (cmd->subtype == AT_AddInherit && cmd->def != NULL &&
				 IsA(cmd->def, RangeVar))
		{
			Oid			parent = stream_of_rangevar((RangeVar *) cmd->def);

			if (OidIsValid(parent))
				refuse_stream(parent, "inherit from",
							  "The rows of a stream are its own; no other table may add to them.");
		}
	}

	stream = stream_of_rangevar(stmt->relation);
	if (!OidIsValid(stream))
		return;

	foreach(lc, stmt->cmds)
	{
		AlterTableCmd *cmd = lfirst_node(AlterTableCmd, lc);

		if ((cmd->subtype == AT_AddColumn || cmd->subtype == AT_DropColumn ||
			 cmd->subtype == AT_AlterColumnType) &&
			sw_stream_distributed(stream, NULL, NULL))
			refuse_distributed(stream, "change the columns of");
		switch (cmd->subtype)
		{
			case AT_AddColumn:
				if (cmd->def && IsA(cmd->def, ColumnDef))
				{
					ColumnDef  *def = (ColumnDef *) cmd->def;
					ListCell   *lc2;

					if (is_sw_name(def->colname))
						refuse_column(stream, def->colname, "add");
					/* computed before the access method fills the row */
					foreach(lc2, def->constraints)
					{
						Constraint *c = lfirst_node(Constraint, lc2);

						if (c->contype == CONSTR_GENERATED &&
							names_sw_column(c->raw_expr, NULL))
							ereport(ERROR,
									(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
									 errmsg("cannot add generated column \"%s\" over a system column of stream \"%s\"",
											def->colname, get_rel_name(stream)),
									 errdetail("A stored generated column is computed before streamwm gives the row its partition, offset and times: it would see them NULL.")));
					}
				}
				break;
			case AT_DropColumn:
				if (is_sw_name(cmd->name))
					refuse_column(stream, cmd->name, "drop");
				break;
			case AT_AlterColumnType:
				if (is_sw_name(cmd->name))
					refuse_column(stream, cmd->name, "alter the type of");
				break;
			case AT_ColumnDefault:
			case AT_CookedColumnDefault:
				if (is_sw_name(cmd->name))
					refuse_column(stream, cmd->name, "change the default of");
				break;
			case AT_DropNotNull:
			case AT_SetNotNull:
				if (is_sw_name(cmd->name))
					refuse_column(stream, cmd->name, "change NOT NULL of");
				break;
			case AT_DropExpression:
			case AT_AddIdentity:
			case AT_SetIdentity:
			case AT_DropIdentity:
				if (is_sw_name(cmd->name))
					refuse_column(stream, cmd->name, "alter");
				break;
			case AT_EnableTrig:
			case AT_EnableAlwaysTrig:
			case AT_EnableReplicaTrig:
			case AT_DisableTrig:
				if (is_sw_name(cmd->name))
					refuse_trigger(stream, cmd->name,
								   cmd->subtype == AT_DisableTrig ? "disable" : "change when to fire");
				break;
			case AT_DisableTrigAll:
			case AT_DisableTrigUser:
				refuse_trigger(stream, "sw_ingest", "disable");
				break;
			case AT_AddInherit:
				refuse_stream(stream, "add a parent to",
							  "A stream cannot inherit from another table.");
				break;
			case AT_AddOf:
				refuse_stream(stream, "make a typed table of",
							  "A stream keeps the columns create_stream gave it.");
				break;
			case AT_SetAccessMethod:
				/* back to it: a stream restored as a heap (stream_am.c) */
				if (cmd->name != NULL && strcmp(cmd->name, "streamwm_stream") == 0 &&
					!sw_stream_distributed(stream, NULL, NULL))
					break;
				refuse_stream(stream, "change the access method of",
							  "A local stream's rows get their partition, offset and times from its "
							  "access method, streamwm_stream (a stream from release 0.1, and a "
							  "distributed one, from its insert trigger on the heap).");
				break;
			case AT_ForceRowSecurity:
				refuse_stream(stream, "force row level security on",
							  "streamwm reads a stream as its owner; forced policies would run "
							  "the owner's code in every step and in every session that reads "
							  "the monitoring views.");
				break;
			default:
				break;
		}
	}
}

/* ALTER TABLE ... RENAME COLUMN / ALTER TRIGGER ... RENAME */
static void
guard_rename(RenameStmt *stmt)
{
	Oid			stream;

	if (stmt->renameType == OBJECT_SEQUENCE)
		return;					/* the offset sequence is found by ownership */
	if (stmt->renameType == OBJECT_SCHEMA)
	{
		Oid			nspid = get_namespace_oid(stmt->subname, true);

		stream = OidIsValid(nspid) ? sw_distributed_stream_in_schema(nspid) : InvalidOid;
		if (OidIsValid(stream))
			refuse_distributed(stream, "rename the schema of");
		return;
	}
	if (stmt->renameType == OBJECT_TABLE)
	{
		stream = stream_of_rangevar(stmt->relation);
		if (OidIsValid(stream) && sw_stream_distributed(stream, NULL, NULL))
			refuse_distributed(stream, "rename");
		return;
	}
	if (stmt->renameType != OBJECT_COLUMN && stmt->renameType != OBJECT_TRIGGER)
		return;
	stream = stream_of_rangevar(stmt->relation);
	if (!OidIsValid(stream))
		return;
	if (stmt->renameType == OBJECT_COLUMN && sw_stream_distributed(stream, NULL, NULL))
		refuse_distributed(stream, "rename a column of");
	if (stmt->renameType == OBJECT_COLUMN)
	{
		if (is_sw_name(stmt->subname))
			refuse_column(stream, stmt->subname, "rename");
		if (is_sw_name(stmt->newname))
			refuse_column(stream, stmt->newname, "rename a column to");
	}
	else
	{
		if (is_sw_name(stmt->subname))
			refuse_trigger(stream, stmt->subname, "rename");
	}
}

/* DROP TRIGGER sw_* ON stream; DROP SEQUENCE of a stream's offsets */
static void
guard_drop(DropStmt *stmt)
{
	ListCell   *lc;

	if (stmt->removeType != OBJECT_TRIGGER && stmt->removeType != OBJECT_SEQUENCE)
		return;
	foreach(lc, stmt->objects)
	{
		List	   *names = (List *) lfirst(lc);

		if (stmt->removeType == OBJECT_TRIGGER)
		{
			/* names: [schema,] table, trigger */
			char	   *trigger = strVal(llast(names));
			RangeVar   *rv;
			Oid			stream;

			if (!is_sw_name(trigger) || list_length(names) < 2)
				continue;
			rv = makeRangeVarFromNameList(list_truncate(list_copy(names),
														list_length(names) - 1));
			stream = stream_of_rangevar(rv);
			if (OidIsValid(stream))
				refuse_trigger(stream, trigger, "drop");
		}
		else
		{
			Oid			seqoid = RangeVarGetRelid(makeRangeVarFromNameList(names),
												  NoLock, true);
			Oid			stream = stream_of_sequence(seqoid);

			if (OidIsValid(stream))
				refuse_sequence(stream, seqoid, "drop");
		}
	}
}

/*
 * streamwm_internal._guard_ddl(): the ddl_command_start event trigger.  Runs as the
 * extension owner (SECURITY DEFINER) so that it sees every stream.
 */
Datum
streamwm_guard_ddl(PG_FUNCTION_ARGS)
{
	EventTriggerData *trigdata;
	Node	   *parsetree;

	/* another version's catalog: leave DDL alone (version.c) */
	if (!sw_extension_version_matches(NULL))
		PG_RETURN_VOID();

	if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
		elog(ERROR, "streamwm_internal._guard_ddl() must be called as an event trigger");
	trigdata = (EventTriggerData *) fcinfo->context;
	parsetree = trigdata->parsetree;

	switch (nodeTag(parsetree))
	{
		case T_AlterTableStmt:
			guard_alter_table((AlterTableStmt *) parsetree);
			break;
		case T_RenameStmt:
			guard_rename((RenameStmt *) parsetree);
			break;
		case T_DropStmt:
			guard_drop((DropStmt *) parsetree);
			break;
		case T_RuleStmt:
			{
				RuleStmt   *stmt = (RuleStmt *) parsetree;
				Oid			stream = stream_of_rangevar(stmt->relation);

				if (OidIsValid(stream))
					refuse_stream(stream, "create a rule on",
								  "Rows enter a stream only through its insert trigger, and a stream stays a table.");
				break;
			}
		case T_CreateTrigStmt:
			{
				CreateTrigStmt *stmt = (CreateTrigStmt *) parsetree;

				/* CREATE OR REPLACE TRIGGER sw_ingest would replace ours */
				if (stmt->replace && is_sw_name(stmt->trigname))
				{
					Oid			stream = stream_of_rangevar(stmt->relation);

					if (OidIsValid(stream))
						refuse_trigger(stream, stmt->trigname, "replace");
				}
				break;
			}
		case T_AlterObjectDependsStmt:
			{
				/* DROP EXTENSION x would drop sw_ingest with it */
				AlterObjectDependsStmt *stmt = (AlterObjectDependsStmt *) parsetree;
				char	   *name;
				Oid			stream;

				if (stmt->objectType != OBJECT_TRIGGER || stmt->relation == NULL)
					break;
				name = strVal(llast(castNode(List, stmt->object)));
				stream = stream_of_rangevar(stmt->relation);
				if (OidIsValid(stream) && is_sw_name(name))
					refuse_trigger(stream, name, "make an extension's object of");
				break;
			}
		case T_AlterObjectSchemaStmt:
			{
				/* its commit log is named by text on the nodes */
				AlterObjectSchemaStmt *stmt = (AlterObjectSchemaStmt *) parsetree;
				Oid			stream;

				if (stmt->objectType != OBJECT_TABLE || stmt->relation == NULL)
					break;
				stream = stream_of_rangevar(stmt->relation);
				if (OidIsValid(stream) && sw_stream_distributed(stream, NULL, NULL))
					refuse_distributed(stream, "set the schema of");
				break;
			}
		case T_CreateStmt:
			{
				CreateStmt *stmt = (CreateStmt *) parsetree;
				ListCell   *lc;

				foreach(lc, stmt->inhRelations)
				{
					Oid			parent = stream_of_rangevar(lfirst_node(RangeVar, lc));

					if (OidIsValid(parent))
						refuse_stream(parent, "inherit from",
									  "The rows of a stream are its own; no other table may add to them.");
				}
				break;
			}
		case T_AlterSeqStmt:
			{
				AlterSeqStmt *stmt = (AlterSeqStmt *) parsetree;
				Oid			seqoid = RangeVarGetRelid(stmt->sequence, NoLock, true);
				Oid			stream = stream_of_sequence(seqoid);

				if (OidIsValid(stream))
					refuse_sequence(stream, seqoid, "alter");
				break;
			}
		default:
			break;
	}
	/* what the command would do to the window queries (query_ddl.c) */
	sw_query_ddl_start(parsetree);
	PG_RETURN_VOID();
}

/*
 * streamwm_internal._stream_no_update(): BEFORE UPDATE ... FOR EACH STATEMENT
 * trigger of every stream table.  A stream is an append-only log.
 */
Datum
streamwm_stream_no_update(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	Oid			relid;

	sw_require_extension_version();

	if (!CALLED_AS_TRIGGER(fcinfo))
		elog(ERROR, "streamwm_internal._stream_no_update() must be called as a trigger");
	/* on a Citus node, a distributed stream's shard: name the stream */
	relid = sw_citus_shard_owner(RelationGetRelid(trigdata->tg_relation));
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("cannot update stream \"%s\"",
					OidIsValid(relid) ? get_rel_name(relid) :
					RelationGetRelationName(trigdata->tg_relation)),
			 errdetail("A stream is an append-only log: rows can be inserted and deleted, not updated.")));
	return PointerGetDatum(NULL);
}

/*
 * TRUNCATE ... RESTART IDENTITY resets a stream's offset sequence, and every
 * row written afterwards would get an offset processing has already passed.
 * The BEFORE TRUNCATE trigger remembers the sequence's storage (RESTART
 * IDENTITY gives the sequence a new relfilenode, nothing else in a TRUNCATE
 * does), the AFTER TRUNCATE trigger compares: if it changed, the
 * statement is refused and rolled back.
 */
typedef struct TruncateSeen
{
	Oid			relid;
	Oid			seqoid;
	Oid			relfilenode;
} TruncateSeen;

static List *truncate_seen = NIL;	/* in TopTransactionContext */
static LocalTransactionId truncate_seen_lxid = InvalidLocalTransactionId;

static Oid
sequence_relfilenode(Oid seqoid)
{
	HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(seqoid));
	Oid			result;

	if (!HeapTupleIsValid(tup))
		return InvalidOid;
	result = ((Form_pg_class) GETSTRUCT(tup))->relfilenode;
	ReleaseSysCache(tup);
	return result;
}

Datum
streamwm_stream_truncate(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	Oid			relid;
	List	   *seqs;
	Oid			seqoid;
	ListCell   *lc;

	sw_require_extension_version();

	if (!CALLED_AS_TRIGGER(fcinfo) ||
		!TRIGGER_FIRED_BY_TRUNCATE(trigdata->tg_event))
		elog(ERROR, "streamwm_internal._stream_truncate() must be a TRUNCATE trigger");
	relid = RelationGetRelid(trigdata->tg_relation);
	seqs = getOwnedSequences(relid);
	if (list_length(seqs) != 1)
		return PointerGetDatum(NULL);
	seqoid = linitial_oid(seqs);

	if (truncate_seen_lxid != MyProc->lxid)
	{
		truncate_seen = NIL;	/* the old list went with its transaction */
		truncate_seen_lxid = MyProc->lxid;
	}

	if (TRIGGER_FIRED_BEFORE(trigdata->tg_event))
	{
		MemoryContext old;
		TruncateSeen *seen;

		/* the rows processing had not read are counted before they go */
		sw_purge_truncate(trigdata->tg_relation);

		old = MemoryContextSwitchTo(TopTransactionContext);
		seen = palloc(sizeof(TruncateSeen));

		seen->relid = relid;
		seen->seqoid = seqoid;
		seen->relfilenode = sequence_relfilenode(seqoid);
		truncate_seen = lcons(seen, truncate_seen);
		MemoryContextSwitchTo(old);
		return PointerGetDatum(NULL);
	}

	foreach(lc, truncate_seen)
	{
		TruncateSeen *seen = lfirst(lc);

		if (seen->relid != relid || seen->seqoid != seqoid)
			continue;
		if (seen->relfilenode != sequence_relfilenode(seqoid))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot truncate stream \"%s\" with RESTART IDENTITY",
							RelationGetRelationName(trigdata->tg_relation)),
					 errdetail("Offsets of a stream are never reused: processing has read past them."),
					 errhint("Use TRUNCATE without RESTART IDENTITY.")));
		truncate_seen = foreach_delete_current(truncate_seen, lc);
		break;
	}
	return PointerGetDatum(NULL);
}
