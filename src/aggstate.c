/*-------------------------------------------------------------------------
 * aggstate.c
 *	  Owns running an aggregate in pieces, as PostgreSQL's parallel
 *	  aggregation does, for the pane plan: a partial state per pane and
 *	  group, kept as bytes in the query's pane table, and windows assembled
 *	  from their panes with the aggregate's own combine and final functions
 *	  (aggtransfn, aggserialfn/aggdeserialfn, aggcombinefn, aggfinalfn from
 *	  pg_aggregate).
 *
 * Three SQL aggregates, each taking the aggregate's OID as a constant:
 *
 *	 streamwm_internal.partial(aggregate oid [, its arguments ...]) -> bytea
 *		 the partial state of <aggregate> over the group's rows, serialized
 *	 streamwm_internal.merge(state bytea, aggregate oid) -> bytea
 *		 several serialized states combined into one (a pane that receives
 *		 rows in several steps)
 *	 streamwm_internal.combine(state bytea, aggregate oid, result anyelement)
 *		 -> anyelement: the states combined and finalized, i.e. the
 *		 aggregate's result over all the rows behind them; the third
 *		 argument is a typed NULL that fixes the result type
 *
 * A serialized state starts with a header naming its aggregate and state
 * type and carrying a MAC, followed by the aggregate's serialfn output
 * (state type internal), the value's bytes (by-value state types) or the
 * state type's binary send output (the others).  The bytes
 * come from a table the query's owner owns (or straight from any caller of
 * streamwm_internal.merge/combine), so that role can forge them, and deserialfns are
 * not written for hostile input: PostgreSQL gives them an internal argument
 * so that SQL never calls them, and numeric_avg_deserialize, for one, writes
 * out of bounds on a forged digit count or weight.  So an internal state
 * is only deserialized when its MAC (SipHash-2-4 under a key in the data
 * directory that no SQL role can read, over the server version, the
 * database, the header and the payload) shows this server wrote it: a
 * forged, truncated or patched state, or one of another aggregate,
 * database or key, is an error before any deserialfn sees it.  Other
 * states need no MAC (a by-value state's bytes are always some value; a
 * receive function checks its input as it does a client's), only the
 * header check that they are this aggregate's.
 *
 * Privileges are checked as nodeAgg.c checks them: the caller must be able
 * to execute the aggregate, and the aggregate's owner its support
 * functions.  Each call site caches what it looked up in fn_extra.
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_aggregate.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "parser/parse_agg.h"
#include "storage/fd.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/expandeddatum.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/regproc.h"
#include "utils/syscache.h"

#include "aggstate.h"

PG_FUNCTION_INFO_V1(streamwm_partial_sfunc);
PG_FUNCTION_INFO_V1(streamwm_state_ffunc);
PG_FUNCTION_INFO_V1(streamwm_combine_sfunc);
PG_FUNCTION_INFO_V1(streamwm_combine_ffunc);

#define SW_STATE_VERSION 3
#define SW_KEY_FILE "streamwm_state.key"
#define SW_KEY_LEN 32
#define SW_MAC_LEN 8

/* The header of a serialized state. */
typedef struct SwStateHeader
{
	int32		version;
	Oid			aggfnoid;
	Oid			transtype;
	int32		isnull;			/* the state is NULL (no payload) */
	Oid			collation;		/* the aggregate call's input collation */
	uint8		mac[SW_MAC_LEN];	/* over all of the above and the payload */
} SwStateHeader;

static uint8 sw_state_key[SW_KEY_LEN];
static bool sw_state_key_loaded = false;

/* What a call site knows of its aggregate, looked up once. */
typedef struct SwAggInfo
{
	Oid			aggfnoid;
	Oid			transtype;
	int16		translen;
	bool		transbyval;
	Oid			rettype;
	int			nargs;			/* the aggregate's arguments */
	bool		init_isnull;
	Datum		initval;		/* in the call site's memory context */
	bool		final_extra;
	bool		has_final;
	FmgrInfo	transfn;		/* valid only in streamwm_internal.partial */
	FmgrInfo	combinefn;
	FmgrInfo	finalfn;
	FmgrInfo	serialfn;		/* state type internal */
	FmgrInfo	deserialfn;
	FmgrInfo	sendfn;			/* other state types */
	FmgrInfo	recvfn;
	Oid			recv_ioparam;
} SwAggInfo;

/* One group's state. */
typedef struct SwAggState
{
	SwAggInfo  *info;
	Datum		value;
	bool		isnull;
	bool		notrans;		/* no value yet (NULL initial value, no input) */
	Oid			collation;		/* what the support functions are called with */
} SwAggState;

/*
 * The key of the states' MACs: random bytes in a file of the data
 * directory, made by the first backend that needs one (written aside and
 * linked into place, so that concurrent first users agree on one key).
 * Files of the data directory are the server's, never an SQL role's.
 */
static const uint8 *
state_key(void)
{
	char		path[MAXPGPATH];
	int			fd;
	int			r;

	if (sw_state_key_loaded)
		return sw_state_key;
	snprintf(path, sizeof(path), "%s/%s", DataDir, SW_KEY_FILE);
	fd = OpenTransientFile(path, O_RDONLY | PG_BINARY);
	if (fd < 0 && errno == ENOENT)
	{
		char		tmp[MAXPGPATH];
		uint8		fresh[SW_KEY_LEN];

		if (!pg_strong_random(fresh, sizeof(fresh)))
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("could not generate a random key for partial aggregate states")));
		snprintf(tmp, sizeof(tmp), "%s.%d", path, MyProcPid);
		fd = OpenTransientFile(tmp, O_WRONLY | O_CREAT | O_TRUNC | PG_BINARY);
		if (fd < 0)
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not create file \"%s\": %m", tmp)));
		errno = 0;
		if (write(fd, fresh, sizeof(fresh)) != sizeof(fresh) || pg_fsync(fd) != 0)
		{
			if (errno == 0)
				errno = ENOSPC;
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not write file \"%s\": %m", tmp)));
		}
		CloseTransientFile(fd);
		if (link(tmp, path) != 0 && errno != EEXIST)
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not link file \"%s\" to \"%s\": %m", tmp, path)));
		unlink(tmp);
		fd = OpenTransientFile(path, O_RDONLY | PG_BINARY);
	}
	if (fd < 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not open file \"%s\": %m", path)));
	r = read(fd, sw_state_key, SW_KEY_LEN);
	CloseTransientFile(fd);
	if (r != SW_KEY_LEN)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("file \"%s\" is not a streamwm key", path)));
	sw_state_key_loaded = true;
	return sw_state_key;
}

/*
 * SipHash-2-4 (Aumasson and Bernstein), the keyed hash made for short
 * inputs: a MAC costs tens of nanoseconds, not the microseconds of an
 * HMAC-SHA256, and a step checks one per pane state it reads.
 */
typedef struct SipHash
{
	uint64		v0,
				v1,
				v2,
				v3;
	uint64		tail;			/* bytes not yet in a full word */
	int			ntail;
	uint64		total;
} SipHash;

#define SIP_ROTL(x, b) (((x) << (b)) | ((x) >> (64 - (b))))

static inline void
sip_round(SipHash *h)
{
	h->v0 += h->v1;
	h->v1 = SIP_ROTL(h->v1, 13);
	h->v1 ^= h->v0;
	h->v0 = SIP_ROTL(h->v0, 32);
	h->v2 += h->v3;
	h->v3 = SIP_ROTL(h->v3, 16);
	h->v3 ^= h->v2;
	h->v0 += h->v3;
	h->v3 = SIP_ROTL(h->v3, 21);
	h->v3 ^= h->v0;
	h->v2 += h->v1;
	h->v1 = SIP_ROTL(h->v1, 17);
	h->v1 ^= h->v2;
	h->v2 = SIP_ROTL(h->v2, 32);
}

static void
sip_word(SipHash *h, uint64 m)
{
	h->v3 ^= m;
	sip_round(h);
	sip_round(h);
	h->v0 ^= m;
}

static void
sip_init(SipHash *h, const uint8 *key)
{
	uint64		k0 = 0;
	uint64		k1 = 0;

	for (int i = 7; i >= 0; i--)
	{
		k0 = (k0 << 8) | key[i];
		k1 = (k1 << 8) | key[8 + i];
	}
	h->v0 = UINT64CONST(0x736f6d6570736575) ^ k0;
	h->v1 = UINT64CONST(0x646f72616e646f6d) ^ k1;
	h->v2 = UINT64CONST(0x6c7967656e657261) ^ k0;
	h->v3 = UINT64CONST(0x7465646279746573) ^ k1;
	h->tail = 0;
	h->ntail = 0;
	h->total = 0;
}

static void
sip_update(SipHash *h, const uint8 *in, Size len)
{
	h->total += len;
	/* whole little-endian words straight from the input */
	if (h->ntail == 0)
	{
		for (; len >= 8; in += 8, len -= 8)
		{
			uint64		m = 0;

			for (int i = 7; i >= 0; i--)
				m = (m << 8) | in[i];
			sip_word(h, m);
		}
	}
	while (len > 0)
	{
		h->tail |= ((uint64) *in++) << (8 * h->ntail);
		len--;
		if (++h->ntail == 8)
		{
			sip_word(h, h->tail);
			h->tail = 0;
			h->ntail = 0;
		}
	}
}

static uint64
sip_final(SipHash *h)
{
	sip_word(h, h->tail | (h->total << 56));
	h->v2 ^= 0xff;
	for (int i = 0; i < 4; i++)
		sip_round(h);
	return h->v0 ^ h->v1 ^ h->v2 ^ h->v3;
}

/*
 * The MAC under the state key of the given pieces (len <= 8 bytes), bound
 * to the server version and the database.
 */
static void
state_hmac(const void *a, Size alen, const void *b, Size blen, uint8 *out, Size len)
{
	int32		context[2] = {PG_VERSION_NUM, (int32) MyDatabaseId};
	SipHash		h;
	uint64		tag;

	Assert(len <= sizeof(tag));
	sip_init(&h, state_key());
	sip_update(&h, (const uint8 *) context, sizeof(context));
	sip_update(&h, (const uint8 *) a, alen);
	sip_update(&h, (const uint8 *) b, blen);
	tag = sip_final(&h);
	memcpy(out, &tag, len);
}

/* The MAC of a state: its header up to the MAC, and its payload. */
static void
state_mac(const SwStateHeader *hdr, const char *payload, Size len, uint8 *mac)
{
	state_hmac(hdr, offsetof(SwStateHeader, mac), payload, len, mac, SW_MAC_LEN);
}

/*
 * What serialized states depend on besides the aggregate: their format and
 * the key (by a fingerprint of it).  Part of a pane table's stamp, so that a
 * new key or format rebuilds the pane tables instead of failing on them.
 */
char *
sw_state_stamp(void)
{
	uint8		id[8];
	const char	label[] = "streamwm key id";

	state_hmac(label, sizeof(label), "", 0, id, sizeof(id));
	return psprintf("v%d:%02x%02x%02x%02x%02x%02x%02x%02x", SW_STATE_VERSION,
					id[0], id[1], id[2], id[3], id[4], id[5], id[6], id[7]);
}

static void
check_execute(Oid fn, Oid role)
{
	AclResult	acl;

	if (!OidIsValid(fn))
		return;
	acl = pg_proc_aclcheck(fn, role, ACL_EXECUTE);
	if (acl != ACLCHECK_OK)
		aclcheck_error(acl, OBJECT_FUNCTION, get_func_name(fn));
}

/*
 * Why an aggregate cannot be run in pieces, or NULL when it can.  Shared
 * by the planner (which falls back to reading the window's rows) and the
 * functions below (which refuse it).
 */
const char *
sw_agg_piecewise_refusal(Oid aggfnoid)
{
	HeapTuple	tup;
	Form_pg_aggregate agg;
	const char *why = NULL;
	Oid		   *argtypes;
	int			nargs;
	Oid			rettype;

	tup = SearchSysCache1(AGGFNOID, ObjectIdGetDatum(aggfnoid));
	if (!HeapTupleIsValid(tup))
		return "it is not an aggregate";
	agg = (Form_pg_aggregate) GETSTRUCT(tup);
	rettype = get_func_signature(aggfnoid, &argtypes, &nargs);
	if (agg->aggkind != AGGKIND_NORMAL)
		why = "it is an ordered-set or hypothetical-set aggregate";
	else if (!OidIsValid(agg->aggcombinefn))
		why = "it has no combine function";
	else if (IsPolymorphicType(agg->aggtranstype) || IsPolymorphicType(rettype))
		why = "its state or result type is polymorphic";
	else if (agg->aggtranstype == INTERNALOID &&
			 (!OidIsValid(agg->aggserialfn) || !OidIsValid(agg->aggdeserialfn)))
		why = "its internal state has no serialization functions";
	else if (agg->aggtranstype != INTERNALOID)
	{
		HeapTuple	ttup = SearchSysCache1(TYPEOID, ObjectIdGetDatum(agg->aggtranstype));

		if (!HeapTupleIsValid(ttup))
			why = "its state type is missing";
		else
		{
			Form_pg_type t = (Form_pg_type) GETSTRUCT(ttup);

			if (!OidIsValid(t->typsend) || !OidIsValid(t->typreceive))
				why = "its state type has no binary send and receive functions";
			ReleaseSysCache(ttup);
		}
	}
	if (why == NULL && agg->aggfinalextra)
	{
		for (int i = 0; i < nargs; i++)
			if (IsPolymorphicType(argtypes[i]))
				why = "its final function takes polymorphic arguments";
	}
	ReleaseSysCache(tup);
	return why;
}

static void
init_fn(FmgrInfo *fn, Oid fnoid, Expr *expr, MemoryContext cxt)
{
	fmgr_info_cxt(fnoid, fn, cxt);
	fmgr_info_set_expr((Node *) expr, fn);
}

/*
 * The call site's aggregate: looked up and checked on first use.
 * input_types/ninputs are the actual argument types of streamwm_internal.partial
 * (NULL otherwise).
 */
static SwAggInfo *
agg_info(FunctionCallInfo fcinfo, Oid aggfnoid, Oid *input_types, int ninputs)
{
	SwAggInfo  *info = (SwAggInfo *) fcinfo->flinfo->fn_extra;
	MemoryContext cxt = fcinfo->flinfo->fn_mcxt;
	HeapTuple	tup;
	Form_pg_aggregate agg;
	const char *why;
	Oid		   *argtypes;
	Oid			owner;
	Oid			collation = fcinfo->fncollation;
	Expr	   *expr;
	bool		isnull;
	Datum		initval_text;

	if (info != NULL && info->aggfnoid == aggfnoid)
		return info;

	why = sw_agg_piecewise_refusal(aggfnoid);
	if (why != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("aggregate %s cannot be computed in panes: %s",
						format_procedure(aggfnoid), why)));
	tup = SearchSysCache1(AGGFNOID, ObjectIdGetDatum(aggfnoid));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for aggregate %u", aggfnoid);
	agg = (Form_pg_aggregate) GETSTRUCT(tup);

	info = MemoryContextAllocZero(cxt, sizeof(SwAggInfo));
	info->aggfnoid = aggfnoid;
	info->transtype = agg->aggtranstype;
	get_typlenbyval(info->transtype, &info->translen, &info->transbyval);
	info->rettype = get_func_signature(aggfnoid, &argtypes, &info->nargs);
	info->final_extra = agg->aggfinalextra;

	/* as nodeAgg.c: the caller runs the aggregate, its owner the parts */
	check_execute(aggfnoid, GetUserId());
	{
		HeapTuple	ptup = SearchSysCache1(PROCOID, ObjectIdGetDatum(aggfnoid));

		if (!HeapTupleIsValid(ptup))
			elog(ERROR, "cache lookup failed for function %u", aggfnoid);
		owner = ((Form_pg_proc) GETSTRUCT(ptup))->proowner;
		ReleaseSysCache(ptup);
	}
	check_execute(agg->aggtransfn, owner);
	check_execute(agg->aggcombinefn, owner);
	check_execute(agg->aggfinalfn, owner);
	check_execute(agg->aggserialfn, owner);
	check_execute(agg->aggdeserialfn, owner);

	if (input_types != NULL)
	{
		/* the arguments must be the aggregate's own, as the parser made them */
		if (ninputs != info->nargs)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("aggregate %s takes %d arguments, not %d",
							format_procedure(aggfnoid), info->nargs, ninputs)));
		for (int i = 0; i < ninputs; i++)
			if (argtypes[i] != input_types[i] && argtypes[i] != ANYOID &&
				!IsPolymorphicType(argtypes[i]))
				ereport(ERROR,
						(errcode(ERRCODE_DATATYPE_MISMATCH),
						 errmsg("argument %d of aggregate %s is %s, not %s", i + 1,
								format_procedure(aggfnoid), format_type_be(input_types[i]),
								format_type_be(argtypes[i]))));
		build_aggregate_transfn_expr(input_types, ninputs, 0, false, info->transtype,
									 collation, agg->aggtransfn, InvalidOid, &expr, NULL);
		init_fn(&info->transfn, agg->aggtransfn, expr, cxt);
	}
	/* the combine function's expression is a transition function's over the state */
	build_aggregate_transfn_expr(&info->transtype, 1, 0, false, info->transtype,
								 collation, agg->aggcombinefn, InvalidOid, &expr, NULL);
	init_fn(&info->combinefn, agg->aggcombinefn, expr, cxt);
	if (OidIsValid(agg->aggfinalfn))
	{
		info->has_final = true;
		build_aggregate_finalfn_expr(argtypes, 1 + (info->final_extra ? info->nargs : 0),
									 info->transtype, info->rettype, collation,
									 agg->aggfinalfn, &expr);
		init_fn(&info->finalfn, agg->aggfinalfn, expr, cxt);
	}
	if (info->transtype == INTERNALOID)
	{
		build_aggregate_serialfn_expr(agg->aggserialfn, &expr);
		init_fn(&info->serialfn, agg->aggserialfn, expr, cxt);
		build_aggregate_deserialfn_expr(agg->aggdeserialfn, &expr);
		init_fn(&info->deserialfn, agg->aggdeserialfn, expr, cxt);
	}
	else
	{
		Oid			fn;
		bool		varlena;

		getTypeBinaryOutputInfo(info->transtype, &fn, &varlena);
		fmgr_info_cxt(fn, &info->sendfn, cxt);
		getTypeBinaryInputInfo(info->transtype, &fn, &info->recv_ioparam);
		fmgr_info_cxt(fn, &info->recvfn, cxt);
	}

	initval_text = SysCacheGetAttr(AGGFNOID, tup, Anum_pg_aggregate_agginitval, &isnull);
	info->init_isnull = isnull;
	if (!isnull)
	{
		Oid			typinput;
		Oid			typioparam;
		MemoryContext old = MemoryContextSwitchTo(cxt);

		getTypeInputInfo(info->transtype, &typinput, &typioparam);
		info->initval = OidInputFunctionCall(typinput, TextDatumGetCString(initval_text),
											 typioparam, -1);
		MemoryContextSwitchTo(old);
	}
	ReleaseSysCache(tup);
	fcinfo->flinfo->fn_extra = info;
	return info;
}

static MemoryContext
agg_context(FunctionCallInfo fcinfo)
{
	MemoryContext cxt;

	if (!AggCheckCallContext(fcinfo, &cxt))
		elog(ERROR, "streamwm aggregate support function called in non-aggregate context");
	return cxt;
}

/* A new group's state: the aggregate's initial value, in the group's context. */
static SwAggState *
new_state(SwAggInfo *info, MemoryContext cxt)
{
	SwAggState *st = MemoryContextAllocZero(cxt, sizeof(SwAggState));

	st->info = info;
	st->isnull = info->init_isnull;
	st->notrans = info->init_isnull;
	if (!info->init_isnull)
	{
		MemoryContext old = MemoryContextSwitchTo(cxt);

		st->value = datumCopy(info->initval, info->transbyval, info->translen);
		MemoryContextSwitchTo(old);
	}
	return st;
}

/*
 * Advance the state by a transition or combine function over inputs, and
 * keep what it returned as the state, as nodeAgg.c does: a new
 * by-reference value is copied into the group's context (unless it is an
 * expanded object already there) and the old one freed.
 */
static void
advance_state(SwAggState *st, FmgrInfo *fn, Oid collation, fmNodePtr context,
			  const NullableDatum *inputs, int ninputs, MemoryContext cxt)
{
	SwAggInfo  *info = st->info;
	LOCAL_FCINFO(inner, FUNC_MAX_ARGS);
	Datum		value;
	bool		isnull;

	InitFunctionCallInfoData(*inner, fn, ninputs + 1, collation, context, NULL);
	inner->args[0].value = st->value;
	inner->args[0].isnull = st->isnull;
	for (int i = 0; i < ninputs; i++)
		inner->args[i + 1] = inputs[i];
	value = FunctionCallInvoke(inner);
	isnull = inner->isnull;

	if (!info->transbyval && DatumGetPointer(value) != DatumGetPointer(st->value))
	{
		if (!isnull)
		{
			MemoryContext old = MemoryContextSwitchTo(cxt);

			if (!(DatumIsReadWriteExpandedObject(value, false, info->translen) &&
				  MemoryContextGetParent(DatumGetEOHP(value)->eoh_context) == cxt))
				value = datumCopy(value, info->transbyval, info->translen);
			MemoryContextSwitchTo(old);
		}
		if (!st->isnull)
		{
			if (DatumIsReadWriteExpandedObject(st->value, false, info->translen))
				DeleteExpandedObject(st->value);
			else
				pfree(DatumGetPointer(st->value));
		}
	}
	st->value = value;
	st->isnull = isnull;
	st->notrans = false;
}

/*
 * A strict transition or combine function is not called with a NULL: the
 * first non-NULL input becomes the state when there is none yet, and a
 * NULL state stays NULL.  Returns true when the input was consumed so.
 */
static bool
strict_step(SwAggState *st, FmgrInfo *fn, Datum input, bool input_null, MemoryContext cxt)
{
	if (!fn->fn_strict)
		return false;
	if (input_null)
		return true;
	if (st->notrans)
	{
		MemoryContext old = MemoryContextSwitchTo(cxt);

		st->value = datumCopy(input, st->info->transbyval, st->info->translen);
		MemoryContextSwitchTo(old);
		st->isnull = false;
		st->notrans = false;
		return true;
	}
	return st->isnull;
}

/*
 * streamwm_internal._partial_sfunc(internal, aggregate oid [, VARIADIC "any"]):
 * the aggregate's transition function over one row.
 */
Datum
streamwm_partial_sfunc(PG_FUNCTION_ARGS)
{
	MemoryContext cxt = agg_context(fcinfo);
	int			ninputs = PG_NARGS() - 2;
	SwAggState *st;

	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("the aggregate of streamwm_internal.partial must not be NULL")));
	if (PG_ARGISNULL(0))
	{
		Oid			types[FUNC_MAX_ARGS];

		for (int i = 0; i < ninputs; i++)
			types[i] = get_fn_expr_argtype(fcinfo->flinfo, i + 2);
		st = new_state(agg_info(fcinfo, PG_GETARG_OID(1), types, ninputs), cxt);
		st->collation = fcinfo->fncollation;
	}
	else
	{
		st = (SwAggState *) PG_GETARG_POINTER(0);
		if (st->info->aggfnoid != PG_GETARG_OID(1))
			elog(ERROR, "streamwm_internal.partial called with another aggregate in the same group");
	}

	if (st->info->transfn.fn_strict)
	{
		for (int i = 0; i < ninputs; i++)
			if (PG_ARGISNULL(i + 2))
				PG_RETURN_POINTER(st);
		if (ninputs > 0 &&
			strict_step(st, &st->info->transfn, PG_GETARG_DATUM(2), false, cxt))
			PG_RETURN_POINTER(st);
		if (st->isnull)
			PG_RETURN_POINTER(st);
	}
	advance_state(st, &st->info->transfn, fcinfo->fncollation, fcinfo->context,
				  &fcinfo->args[2], ninputs, cxt);
	PG_RETURN_POINTER(st);
}

/*
 * streamwm_internal._state_ffunc(internal) -> bytea: the state serialized, behind
 * its header; NULL when the group had no input (no row passed the FILTER):
 * streamwm_internal.combine skips it.  A NULL state is a header saying so, passed
 * on to the combine function as PostgreSQL's parallel aggregation does.
 */
Datum
streamwm_state_ffunc(PG_FUNCTION_ARGS)
{
	SwAggState *st;
	SwAggInfo  *info;
	SwStateHeader hdr;
	bytea	   *payload;
	bytea	   *result;
	Size		len;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	st = (SwAggState *) PG_GETARG_POINTER(0);
	info = st->info;
	if (st->isnull)
		payload = palloc(VARHDRSZ);
	else if (info->transtype == INTERNALOID)
	{
		LOCAL_FCINFO(inner, 1);

		InitFunctionCallInfoData(*inner, &info->serialfn, 1, InvalidOid, fcinfo->context, NULL);
		inner->args[0].value = st->value;
		inner->args[0].isnull = false;
		payload = DatumGetByteaPP(FunctionCallInvoke(inner));
		if (inner->isnull)
			elog(ERROR, "serialization function of aggregate %u returned NULL", info->aggfnoid);
	}
	else if (info->transbyval)
	{
		/* a by-value state: its bytes */
		payload = palloc(VARHDRSZ + info->translen);
		SET_VARSIZE(payload, VARHDRSZ + info->translen);
		store_att_byval(VARDATA(payload), st->value, info->translen);
	}
	else
		payload = SendFunctionCall(&info->sendfn, st->value);
	if (st->isnull)
		SET_VARSIZE(payload, VARHDRSZ);

	memset(&hdr, 0, sizeof(hdr));
	hdr.isnull = st->isnull;
	hdr.collation = st->collation;
	hdr.version = SW_STATE_VERSION;
	hdr.aggfnoid = info->aggfnoid;
	hdr.transtype = info->transtype;
	len = VARSIZE_ANY_EXHDR(payload);
	if (info->transtype == INTERNALOID)
		state_mac(&hdr, VARDATA_ANY(payload), len, hdr.mac);
	result = palloc(VARHDRSZ + sizeof(hdr) + len);
	SET_VARSIZE(result, VARHDRSZ + sizeof(hdr) + len);
	memcpy(VARDATA(result), &hdr, sizeof(hdr));
	memcpy(VARDATA(result) + sizeof(hdr), VARDATA_ANY(payload), len);
	PG_RETURN_BYTEA_P(result);
}

/*
 * A state of aggregate aggfnoid that a node of a Citus cluster wrote,
 * under its own key, as the output of streamwm_internal.partial in the
 * fold this server sent it (citus_fold.c), signed with this server's key
 * after checking that it is a state of that aggregate.  Such bytes come
 * from no table anyone can write, only from our own aggregate on a node
 * of the cluster, which this server trusts as Citus does: its MAC cannot
 * be checked here (another key, another database).  Never for bytes a
 * role could have chosen.
 */
bytea *
sw_state_vouch(bytea *state, Oid aggfnoid)
{
	SwStateHeader hdr;
	Size		len = VARSIZE_ANY_EXHDR(state);
	const char *data = VARDATA_ANY(state);
	HeapTuple	tup;
	Oid			transtype;
	bytea	   *result;

	tup = SearchSysCache1(AGGFNOID, ObjectIdGetDatum(aggfnoid));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for aggregate %u", aggfnoid);
	transtype = ((Form_pg_aggregate) GETSTRUCT(tup))->aggtranstype;
	ReleaseSysCache(tup);
	if (len < sizeof(hdr))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("partial aggregate state is too short")));
	memcpy(&hdr, data, sizeof(hdr));
	if (hdr.version != SW_STATE_VERSION || hdr.aggfnoid != aggfnoid ||
		hdr.transtype != transtype || (hdr.isnull != 0 && hdr.isnull != 1))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("partial aggregate state is not a state of aggregate %s",
						format_procedure(aggfnoid))));
	if (transtype != INTERNALOID)
		return state;
	result = palloc(VARHDRSZ + len);
	SET_VARSIZE(result, VARHDRSZ + len);
	state_mac(&hdr, data + sizeof(hdr), len - sizeof(hdr), hdr.mac);
	memcpy(VARDATA(result), &hdr, sizeof(hdr));
	memcpy(VARDATA(result) + sizeof(hdr), data + sizeof(hdr), len - sizeof(hdr));
	return result;
}

/*
 * A serialized state read back, after checking it is this aggregate's and
 * was written by this server; *isnull for a NULL state.
 */
static Datum
read_state(FunctionCallInfo fcinfo, SwAggInfo *info, bytea *bytes, bool *isnull,
		   Oid *collation)
{
	SwStateHeader hdr;
	Size		len = VARSIZE_ANY_EXHDR(bytes);
	const char *data = VARDATA_ANY(bytes);
	StringInfoData buf;
	Datum		value;
	uint8		mac[SW_MAC_LEN];
	uint8		diff = 0;

	if (len < sizeof(hdr))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("partial aggregate state is too short")));
	memcpy(&hdr, data, sizeof(hdr));
	if (hdr.version != SW_STATE_VERSION || hdr.aggfnoid != info->aggfnoid ||
		hdr.transtype != info->transtype || (hdr.isnull != 0 && hdr.isnull != 1))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("partial aggregate state is not a state of aggregate %s",
						format_procedure(info->aggfnoid))));
	/*
	 * No deserialization function reads a state this server did not write
	 * (see the head comment).  By-value states and states read by a receive
	 * function need no MAC: any bytes are some value, or are checked as
	 * input from a client is.
	 */
	if (info->transtype == INTERNALOID)
	{
		state_mac(&hdr, data + sizeof(hdr), len - sizeof(hdr), mac);
		for (int i = 0; i < SW_MAC_LEN; i++)
			diff |= mac[i] ^ hdr.mac[i];
	}
	if (diff != 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("partial aggregate state of aggregate %s was not written by this server",
						format_procedure(info->aggfnoid)),
				 errdetail("Its MAC does not match: it was changed, or made under another key or in another database.")));
	*isnull = hdr.isnull;
	*collation = hdr.collation;
	if (*isnull)
		return (Datum) 0;
	data += sizeof(hdr);
	len -= sizeof(hdr);
	if (info->transbyval && info->transtype != INTERNALOID)
	{
		if (len != info->translen)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("partial aggregate state of aggregate %s has the wrong length",
							format_procedure(info->aggfnoid))));
		return fetch_att(data, true, info->translen);
	}
	if (info->transtype == INTERNALOID)
	{
		LOCAL_FCINFO(inner, 2);
		bytea	   *payload = palloc(VARHDRSZ + len);

		SET_VARSIZE(payload, VARHDRSZ + len);
		memcpy(VARDATA(payload), data, len);
		InitFunctionCallInfoData(*inner, &info->deserialfn, 2, InvalidOid, fcinfo->context, NULL);
		inner->args[0].value = PointerGetDatum(payload);
		inner->args[0].isnull = false;
		inner->args[1].value = (Datum) 0;
		inner->args[1].isnull = false;
		value = FunctionCallInvoke(inner);
		if (inner->isnull)
			elog(ERROR, "deserialization function of aggregate %u returned NULL", info->aggfnoid);
		return value;
	}
	/* a terminated copy of the bytes, as receive functions expect */
	buf.data = palloc(len + 1);
	memcpy(buf.data, data, len);
	buf.data[len] = '\0';
	buf.len = len;
	buf.maxlen = len + 1;
	buf.cursor = 0;
	value = ReceiveFunctionCall(&info->recvfn, &buf, info->recv_ioparam, -1);
	if (buf.cursor != buf.len)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
				 errmsg("incorrect binary data format in partial aggregate state")));
	return value;
}

/*
 * streamwm_internal._combine_sfunc(internal, state bytea, aggregate oid
 * [, result anyelement]): one more serialized state combined in.
 */
Datum
streamwm_combine_sfunc(PG_FUNCTION_ARGS)
{
	MemoryContext cxt = agg_context(fcinfo);
	SwAggState *st;
	SwAggInfo  *info;
	Datum		input = (Datum) 0;
	bool		input_null = PG_ARGISNULL(1);
	Oid			collation;
	NullableDatum in;

	if (PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("the aggregate of streamwm_internal.combine must not be NULL")));
	if (PG_ARGISNULL(0))
	{
		st = new_state(agg_info(fcinfo, PG_GETARG_OID(2), NULL, 0), cxt);
		st->collation = fcinfo->fncollation;
	}
	else
	{
		st = (SwAggState *) PG_GETARG_POINTER(0);
		if (st->info->aggfnoid != PG_GETARG_OID(2))
			elog(ERROR, "streamwm_internal.combine called with another aggregate in the same group");
	}
	info = st->info;
	/* a NULL state has no rows behind it (see streamwm_state_ffunc) */
	if (input_null)
		PG_RETURN_POINTER(st);
	input = read_state(fcinfo, info, PG_GETARG_BYTEA_PP(1), &input_null, &collation);

	/*
	 * streamwm_internal.merge has no collatable argument: it combines under the
	 * collation the states were made with (max(text) needs one)
	 */
	if (!OidIsValid(st->collation))
		st->collation = collation;
	if (strict_step(st, &info->combinefn, input, input_null, cxt))
		PG_RETURN_POINTER(st);
	in.value = input;
	in.isnull = input_null;
	advance_state(st, &info->combinefn, st->collation, fcinfo->context, &in, 1, cxt);
	PG_RETURN_POINTER(st);
}

/*
 * streamwm_internal._combine_ffunc(internal, bytea, oid, anyelement) -> anyelement:
 * the aggregate's final function over the combined state.
 */
Datum
streamwm_combine_ffunc(PG_FUNCTION_ARGS)
{
	SwAggState *st;
	SwAggInfo  *info;
	Datum		result;
	LOCAL_FCINFO(inner, FUNC_MAX_ARGS);

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();		/* no input row at all */
	st = (SwAggState *) PG_GETARG_POINTER(0);
	info = st->info;
	if (get_fn_expr_rettype(fcinfo->flinfo) != info->rettype)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("aggregate %s returns %s, not %s", format_procedure(info->aggfnoid),
						format_type_be(info->rettype),
						format_type_be(get_fn_expr_rettype(fcinfo->flinfo)))));
	if (!info->has_final)
	{
		if (st->isnull)
			PG_RETURN_NULL();
		PG_RETURN_DATUM(datumCopy(st->value, info->transbyval, info->translen));
	}
	InitFunctionCallInfoData(*inner, &info->finalfn,
							 1 + (info->final_extra ? info->nargs : 0),
							 OidIsValid(fcinfo->fncollation) ? fcinfo->fncollation : st->collation,
							 fcinfo->context, NULL);
	inner->args[0].value = st->value;
	inner->args[0].isnull = st->isnull;
	for (int i = 1; i < inner->nargs; i++)
	{
		inner->args[i].value = (Datum) 0;
		inner->args[i].isnull = true;
	}
	/* as nodeAgg.c: a strict final function gets no NULL, extra arguments included */
	if (info->finalfn.fn_strict && (st->isnull || inner->nargs > 1))
		PG_RETURN_NULL();
	result = FunctionCallInvoke(inner);
	if (inner->isnull)
		PG_RETURN_NULL();
	PG_RETURN_DATUM(result);
}
