/*-------------------------------------------------------------------------
 * api.c
 *	  Owns what users see of an error raised inside a public API function:
 *	  the primary message, SQLSTATE, detail and hint of the error itself,
 *	  and a CONTEXT that names only what the user wrote or can act on.
 *
 * The public functions (streamwm.create_stream, create_query, drop_stream,
 * ...) are implemented by PL/pgSQL and SQL functions of schema
 * streamwm_internal and by C that runs statements through SPI.  Left alone,
 * an error from inside them carries one CONTEXT line per internal frame:
 *
 *	 PL/pgSQL function streamwm_internal._create_query(...) line 42 at RAISE
 *	 SQL statement "SELECT streamwm_internal._register_query(...)"
 *
 * which tell the user nothing and change with every release.  So each
 * public function runs its implementation through sw_api_guard():
 *
 *	 - the implementation runs with an empty error context stack, so that
 *	   the CONTEXT of an error raised inside holds only the lines of frames
 *	   inside the call;
 *	 - the error is caught, and of those lines the ones of streamwm's own
 *	   frames are dropped (sw_strip_internal_context): PL/pgSQL functions of
 *	   schemas streamwm and streamwm_internal, the statements they and the
 *	   C code run (SPI's "SQL statement" lines), and the implementation's own
 *	   frame.  Lines of the user's code called from inside (a function in a
 *	   user's query, a trigger on a stream or result table) are kept with
 *	   everything above them, and so are the context lines streamwm's C code
 *	   adds to say where (COPY-like "streamwm.ingest into s, row 3", "window
 *	   query "q"", "in expression ...");
 *	 - the error is thrown again with ThrowErrorData(), which runs the
 *	   caller's context callbacks again, so that a call from the user's own
 *	   function still shows the user's frames below ours.
 *
 * The message, SQLSTATE, detail, hint and error positions (errposition into
 * the user's query text, set with internalerrposition/internalerrquery) are
 * those of the original error, untouched.  Lines are recognized by the
 * (translated) formats PostgreSQL writes them with.
 *
 * streamwm_api_call() is the body of the public functions whose
 * implementation is SQL or PL/pgSQL: it calls streamwm_internal.<same name>
 * with the same argument types and the same arguments.  The C entry points
 * of the public functions written in C (ingest, process, ...) call
 * sw_api_guard() themselves.
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_proc.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "nodes/value.h"
#include "parser/parse_func.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/regproc.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "api.h"

PG_FUNCTION_INFO_V1(streamwm_api_call);

#define SW_INTERNAL_SCHEMA "streamwm_internal"

/* a context line as PostgreSQL writes it, for recognizing it */
typedef enum LineKind
{
	LINE_OTHER,					/* kept: a context line of C code */
	LINE_OUR_PLPGSQL,			/* a PL/pgSQL function of streamwm */
	LINE_USER_PLPGSQL,			/* any other PL/pgSQL function */
	LINE_SQL_FUNCTION,			/* an SQL function (named without schema) */
	LINE_STATEMENT				/* SPI's "SQL statement", "SQL expression",
								 * "PL/pgSQL assignment" */
} LineKind;

typedef struct ContextEntry
{
	LineKind	kind;
	int			first;			/* its lines, first..last */
	int			last;
} ContextEntry;

/* The part of a (translated) format before its first conversion. */
static char *
format_prefix(const char *domain, const char *fmt)
{
	const char *t = dgettext(domain, fmt);
	const char *pct = strchr(t, '%');

	return pnstrdup(t, pct ? pct - t : strlen(t));
}

/* The part of a (translated) format after its last "%s". */
static char *
format_suffix(const char *domain, const char *fmt)
{
	const char *t = dgettext(domain, fmt);
	const char *s = NULL;
	const char *p = t;

	while ((p = strstr(p, "%s")) != NULL)
	{
		s = p + 2;
		p += 2;
	}
	return pstrdup(s ? s : "");
}

static bool
starts_with(const char *s, const char *prefix)
{
	return prefix[0] != '\0' && strncmp(s, prefix, strlen(prefix)) == 0;
}

static bool
ends_with(const char *s, const char *suffix)
{
	size_t		ls = strlen(s);
	size_t		lx = strlen(suffix);

	return ls >= lx && strcmp(s + ls - lx, suffix) == 0;
}

/*
 * Context of an error raised inside a public function, without the lines of
 * streamwm's own frames (see the header comment).  'context' holds only the
 * lines of frames inside the call, innermost first.  With
 * implementation_frame, its last line is the frame of the SQL or PL/pgSQL
 * function that implements the public one.  Returns NULL for no context.
 */
char *
sw_strip_internal_context(const char *context, bool implementation_frame)
{
	const char *plpgsql = PG_TEXTDOMAIN("plpgsql");
	const char *postgres = PG_TEXTDOMAIN("postgres");
	char	   *plpgsql_prefix[4];
	char	   *sqlfunc_prefix[4];
	char	   *stmt_prefix[3];
	char	   *stmt_suffix[3];
	char	   *copy;
	char	  **lines;
	int			nlines = 0;
	ContextEntry *entries;
	int			nentries = 0;
	bool	   *keep;
	bool		ours = true;
	StringInfoData out;
	int			i;

	if (context == NULL || context[0] == '\0')
		return NULL;

	plpgsql_prefix[0] = format_prefix(plpgsql, "PL/pgSQL function %s line %d %s");
	plpgsql_prefix[1] = format_prefix(plpgsql, "PL/pgSQL function %s line %d at %s");
	plpgsql_prefix[2] = format_prefix(plpgsql, "PL/pgSQL function %s %s");
	plpgsql_prefix[3] = format_prefix(plpgsql, "PL/pgSQL function %s");
	sqlfunc_prefix[0] = format_prefix(postgres, "SQL function \"%s\" statement %d");
	sqlfunc_prefix[1] = format_prefix(postgres, "SQL function \"%s\" during startup");
	sqlfunc_prefix[2] = format_prefix(postgres, "SQL function \"%s\"");
	sqlfunc_prefix[3] = format_prefix(postgres, "SQL function \"%s\" during inlining");
	stmt_prefix[0] = format_prefix(postgres, "SQL statement \"%s\"");
	stmt_suffix[0] = format_suffix(postgres, "SQL statement \"%s\"");
	stmt_prefix[1] = format_prefix(postgres, "SQL expression \"%s\"");
	stmt_suffix[1] = format_suffix(postgres, "SQL expression \"%s\"");
	stmt_prefix[2] = format_prefix(postgres, "PL/pgSQL assignment \"%s\"");
	stmt_suffix[2] = format_suffix(postgres, "PL/pgSQL assignment \"%s\"");

	/* the lines */
	copy = pstrdup(context);
	lines = palloc(sizeof(char *) * (strlen(copy) + 1));
	for (char *p = copy;;)
	{
		char	   *nl = strchr(p, '\n');

		lines[nlines++] = p;
		if (nl == NULL)
			break;
		*nl = '\0';
		p = nl + 1;
	}

	/* the entries: a statement's text may take several lines */
	entries = palloc(sizeof(ContextEntry) * nlines);
	for (i = 0; i < nlines; i++)
	{
		ContextEntry *e = &entries[nentries++];
		const char *line = lines[i];
		int			k;

		e->first = e->last = i;
		e->kind = LINE_OTHER;
		for (k = 0; k < 3; k++)
		{
			if (starts_with(line, stmt_prefix[k]))
			{
				size_t		minlen = strlen(stmt_prefix[k]) + strlen(stmt_suffix[k]);

				e->kind = LINE_STATEMENT;
				/* up to the line that closes the quoted text */
				if (strlen(line) < minlen || !ends_with(line, stmt_suffix[k]))
				{
					while (e->last < nlines - 1)
					{
						e->last++;
						if (ends_with(lines[e->last], stmt_suffix[k]))
							break;
					}
				}
				break;
			}
		}
		if (e->kind == LINE_OTHER)
		{
			for (k = 0; k < 4; k++)
			{
				if (starts_with(line, plpgsql_prefix[k]))
				{
					const char *name = line + strlen(plpgsql_prefix[k]);

					e->kind = (starts_with(name, SW_INTERNAL_SCHEMA ".") ||
							   starts_with(name, "streamwm."))
						? LINE_OUR_PLPGSQL : LINE_USER_PLPGSQL;
					break;
				}
				if (starts_with(line, sqlfunc_prefix[k]))
				{
					e->kind = LINE_SQL_FUNCTION;
					break;
				}
			}
		}
		i = e->last;
	}

	/* from the call inwards: our frames until the user's code is reached */
	keep = palloc(sizeof(bool) * nentries);
	for (i = nentries - 1; i >= 0; i--)
	{
		LineKind	kind = entries[i].kind;

		keep[i] = true;
		if (!ours)
			continue;
		if (implementation_frame && i == nentries - 1 &&
			(kind == LINE_OUR_PLPGSQL || kind == LINE_USER_PLPGSQL ||
			 kind == LINE_SQL_FUNCTION))
			keep[i] = false;
		else if (kind == LINE_OUR_PLPGSQL || kind == LINE_STATEMENT)
			keep[i] = false;
		else if (kind == LINE_USER_PLPGSQL || kind == LINE_SQL_FUNCTION)
			ours = false;
	}

	initStringInfo(&out);
	for (i = 0; i < nentries; i++)
	{
		if (!keep[i])
			continue;
		for (int l = entries[i].first; l <= entries[i].last; l++)
		{
			if (out.len > 0)
				appendStringInfoChar(&out, '\n');
			appendStringInfoString(&out, lines[l]);
		}
	}
	return out.len > 0 ? out.data : NULL;
}

/*
 * Call fn(fcinfo), a public function's implementation, and throw an error
 * from inside it again with a context that names no internal frame (see
 * the header comment).
 */
static Datum
api_guard(PGFunction fn, FunctionCallInfo fcinfo, FmgrInfo *impl)
{
	ErrorContextCallback *save_stack = error_context_stack;
	MemoryContext cxt = CurrentMemoryContext;
	Datum		result = (Datum) 0;

	PG_TRY();
	{
		/* only the lines of frames inside the call */
		error_context_stack = NULL;
		if (impl != NULL)
			result = FunctionCallInvoke(fcinfo);
		else
			result = fn(fcinfo);
		error_context_stack = save_stack;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		/* PG_CATCH has restored error_context_stack to save_stack */
		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		edata->context = sw_strip_internal_context(edata->context, impl != NULL);
		/* runs the caller's context callbacks: their lines go below ours */
		ThrowErrorData(edata);
		/* not reached for an ERROR */
		ReThrowError(edata);
	}
	PG_END_TRY();
	return result;
}

Datum
sw_api_guard(PGFunction fn, FunctionCallInfo fcinfo)
{
	return api_guard(fn, fcinfo, NULL);
}

/*
 * A context callback for code that parses or analyzes a text the user gave
 * (arg: the text): an error position goes into that text, shown as QUERY
 * with its cursor, not into the statement that called streamwm.  As SPI's
 * error callback does for a statement's text.
 */
void
sw_source_error_context(void *arg)
{
	const char *source = (const char *) arg;
	int			pos = geterrposition();

	if (pos > 0)
	{
		errposition(0);
		internalerrposition(pos);
		internalerrquery(source);
	}
}

/* The implementation of a public function, found once per call site. */
typedef struct ApiImpl
{
	FmgrInfo	flinfo;
	bool		strict;
	Oid			oid;
} ApiImpl;

static ApiImpl *
api_lookup(FmgrInfo *public)
{
	HeapTuple	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(public->fn_oid));
	Form_pg_proc proc;
	ApiImpl    *impl;
	Oid			oid;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for function %u", public->fn_oid);
	proc = (Form_pg_proc) GETSTRUCT(tup);
	oid = LookupFuncName(list_make2(makeString(SW_INTERNAL_SCHEMA),
									makeString(pstrdup(NameStr(proc->proname)))),
						 proc->pronargs, proc->proargtypes.values, true);
	if (!OidIsValid(oid) || get_func_rettype(oid) != proc->prorettype ||
		get_func_retset(oid) != proc->proretset || proc->proretset)
		elog(ERROR, "function %s has no implementation in schema %s",
			 format_procedure(public->fn_oid), SW_INTERNAL_SCHEMA);
	ReleaseSysCache(tup);
	impl = MemoryContextAllocZero(public->fn_mcxt, sizeof(ApiImpl));
	fmgr_info_cxt(oid, &impl->flinfo, public->fn_mcxt);
	impl->strict = func_strict(oid);
	impl->oid = oid;
	return impl;
}

/*
 * The body of a public function implemented in SQL or PL/pgSQL: calls
 * streamwm_internal.<its name>(<its argument types>) with its arguments,
 * as the caller (the implementation is executable by whoever may execute
 * the public function, as when the public function was an SQL function
 * calling it), through sw_api_guard.
 */
Datum
streamwm_api_call(PG_FUNCTION_ARGS)
{
	ApiImpl    *impl = (ApiImpl *) fcinfo->flinfo->fn_extra;
	LOCAL_FCINFO(call, FUNC_MAX_ARGS);
	AclResult	aclresult;
	Datum		result;

	if (impl == NULL)
	{
		impl = api_lookup(fcinfo->flinfo);
		fcinfo->flinfo->fn_extra = impl;
	}
	aclresult = pg_proc_aclcheck(impl->oid, GetUserId(), ACL_EXECUTE);
	if (aclresult != ACLCHECK_OK)
		aclcheck_error(aclresult, OBJECT_FUNCTION, get_func_name(impl->oid));

	InitFunctionCallInfoData(*call, &impl->flinfo, fcinfo->nargs,
							 fcinfo->fncollation, NULL, NULL);
	for (int i = 0; i < fcinfo->nargs; i++)
	{
		call->args[i] = fcinfo->args[i];
		if (impl->strict && fcinfo->args[i].isnull)
			PG_RETURN_NULL();
	}
	result = api_guard(NULL, call, &impl->flinfo);
	if (call->isnull)
		PG_RETURN_NULL();
	return result;
}
