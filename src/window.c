/*-------------------------------------------------------------------------
 * window.c
 *	  Owns window arithmetic: windows are [origin + n*hop, origin + n*hop +
 *	  size) (PostgreSQL's date_bin alignment; the origin is the Unix epoch
 *	  unless create_query gives another), so an event at t belongs to
 *	  exactly size/hop windows, those whose start is one of the size/hop
 *	  pane starts ending at sw_pane_start(t, hop, origin).
 *
 * Intervals are taken as fixed lengths (a day is 86400 s; create_stream and
 * create_query refuse months), so the arithmetic is exact 64-bit integer
 * arithmetic on microseconds and does not depend on the session's TimeZone.
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/int.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "query.h"
#include "window.h"

PG_FUNCTION_INFO_V1(streamwm_window_start);
PG_FUNCTION_INFO_V1(streamwm_pane_windows);


/*
 * An interval as microseconds, a month counted as 30 days.  An interval
 * longer than int64 microseconds (about 292 000 years) is an error.
 */
int64
sw_interval_usec(const Interval *span)
{
	int64		days;
	int64		result;

	days = (int64) span->month * DAYS_PER_MONTH + span->day;
	if (pg_mul_s64_overflow(days, USECS_PER_DAY, &result) ||
		pg_add_s64_overflow(result, span->time, &result))
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("interval out of range")));
	return result;
}

/*
 * Start of the pane [origin + k*hop, origin + (k+1)*hop) that contains t.
 *
 * Computed as t - ((t - origin) mod hop) with the remainder taken from the
 * two operands' remainders, so that nothing overflows for a t or an origin
 * near either end of the timestamp range (t - origin alone may overflow
 * int64).  A pane start before the first representable timestamp is an
 * error, not a wrapped-around value.
 */
TimestampTz
sw_pane_start(TimestampTz t, int64 hop_us, TimestampTz origin)
{
	int64		rem;
	TimestampTz result;

	if (TIMESTAMP_NOT_FINITE(t))
		return t;
	if (hop_us <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("hop must be positive")));
	/* both remainders are in (-hop, hop): no overflow */
	rem = (t % hop_us) - (origin % hop_us);
	rem %= hop_us;
	if (rem < 0)
		rem += hop_us;
	if (pg_sub_s64_overflow(t, rem, &result) || !IS_VALID_TIMESTAMP(result))
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("timestamp out of range"),
				 errdetail("The window that contains %s would start before the first representable timestamp.",
						   timestamptz_to_str(t))));
	return result;
}

/*
 * streamwm.window_start(ts timestamptz, hop interval, origin timestamptz
 * DEFAULT 'epoch') RETURNS timestamptz: as date_bin(hop, ts, origin).
 */
Datum
streamwm_window_start(PG_FUNCTION_ARGS)
{
	TimestampTz t = PG_GETARG_TIMESTAMPTZ(0);
	int64		hop_us = sw_interval_usec(PG_GETARG_INTERVAL_P(1));
	TimestampTz origin = PG_NARGS() > 2 ? PG_GETARG_TIMESTAMPTZ(2) : SW_UNIX_EPOCH;

	if (TIMESTAMP_NOT_FINITE(origin))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("origin must be finite")));
	PG_RETURN_TIMESTAMPTZ(sw_pane_start(t, hop_us, origin));
}

/*
 * The SQL of window_start(ts_sql, hop) for windows aligned at origin: the
 * two-argument form for the Unix epoch (the default), else the origin as
 * the epoch plus its offset within a hop, which aligns the same and is
 * independent of DateStyle and TimeZone.
 */
char *
sw_window_start_sql(const char *ts_sql, int64 hop_us, TimestampTz origin)
{
	int64		offset = sw_pane_start(SW_UNIX_EPOCH, hop_us, origin) - SW_UNIX_EPOCH;

	if (offset < 0)
		offset += hop_us;
	if (offset == 0)
		return psprintf("streamwm.window_start(%s, %s)", ts_sql, sw_interval_literal(hop_us));
	return psprintf("streamwm.window_start(%s, %s, 'epoch'::pg_catalog.timestamptz + %s)",
					ts_sql, sw_interval_literal(hop_us), sw_interval_literal(offset));
}

/*
 * The windows that contain the pane starting at pane and whose start is in
 * (lo, hi]: their starts are *first, *first + hop, .. (*count of them).
 * The windows containing a pane start at pane - (size/hop - 1)*hop .. pane.
 */
void
sw_pane_windows(TimestampTz pane, TimestampTz lo, TimestampTz hi, int64 hop_us,
				int64 size_us, TimestampTz *first, int64 *count)
{
	TimestampTz last = Min(pane, hi);
	TimestampTz start = pane - (size_us - hop_us);

	/* the first aligned start after lo, if lo is later than pane's first window */
	if (pane <= lo)
	{
		*first = pane;
		*count = 0;
		return;
	}
	if (start <= lo)
		start = pane - ((pane - lo - 1) / hop_us) * hop_us;
	*first = start;
	*count = start > last ? 0 : (last - start) / hop_us + 1;
}

/*
 * streamwm_internal.pane_windows(pane timestamptz, lo timestamptz, hi timestamptz,
 * hop interval, size interval) RETURNS SETOF timestamptz: the starts of
 * the windows that contain the pane starting at pane and start in (lo, hi].
 * The pane plan pairs each pane with the windows a step closes by it.
 */
Datum
streamwm_pane_windows(PG_FUNCTION_ARGS)
{
	FuncCallContext *fctx;
	TimestampTz *next;

	if (SRF_IS_FIRSTCALL())
	{
		TimestampTz pane = PG_GETARG_TIMESTAMPTZ(0);
		TimestampTz lo = PG_GETARG_TIMESTAMPTZ(1);
		TimestampTz hi = PG_GETARG_TIMESTAMPTZ(2);
		int64		hop_us = sw_interval_usec(PG_GETARG_INTERVAL_P(3));
		int64		size_us = sw_interval_usec(PG_GETARG_INTERVAL_P(4));
		TimestampTz first;
		int64		count;

		fctx = SRF_FIRSTCALL_INIT();
		if (hop_us <= 0 || size_us < hop_us || size_us % hop_us != 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("size must be a positive multiple of hop")));
		sw_pane_windows(pane, lo, hi, hop_us, size_us, &first, &count);
		next = MemoryContextAlloc(fctx->multi_call_memory_ctx, sizeof(TimestampTz) * 2);
		next[0] = first;
		next[1] = hop_us;
		fctx->max_calls = count;
		fctx->user_fctx = next;
	}
	fctx = SRF_PERCALL_SETUP();
	next = fctx->user_fctx;
	if (fctx->call_cntr < fctx->max_calls)
	{
		TimestampTz ws = next[0] + (int64) fctx->call_cntr * next[1];

		SRF_RETURN_NEXT(fctx, TimestampTzGetDatum(ws));
	}
	SRF_RETURN_DONE(fctx);
}
