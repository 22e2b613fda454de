/*-------------------------------------------------------------------------
 * window.c
 *	  Owns window arithmetic: windows are [n*hop, n*hop + size) on the Unix
 *	  epoch time line, so an event at t belongs to exactly size/hop windows,
 *	  those whose start is one of the size/hop pane starts ending at
 *	  sw_pane_start(t, hop).
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
#include "utils/timestamp.h"

#include "window.h"

PG_FUNCTION_INFO_V1(streamwm_window_start);
PG_FUNCTION_INFO_V1(streamwm_pane_windows);

/* Microseconds from 2000-01-01 (PostgreSQL's epoch) back to 1970-01-01. */
#define SW_UNIX_EPOCH_PG_USEC \
	(-((int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY))

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
 * Start of the epoch-aligned pane [k*hop, (k+1)*hop) that contains t.
 *
 * Computed as t - ((t - epoch) mod hop) with the remainder taken from the
 * two operands' remainders, so that nothing overflows for a t near either
 * end of the timestamp range (t - epoch alone overflows int64 near the
 * end).  A pane start before the first representable timestamp is an
 * error, not a wrapped-around value.
 */
TimestampTz
sw_pane_start(TimestampTz t, int64 hop_us)
{
	int64		rem;
	TimestampTz result;

	if (TIMESTAMP_NOT_FINITE(t))
		return t;
	if (hop_us <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("hop must be positive")));
	/* both remainders are in (-hop, hop) and the epoch is small: no overflow */
	rem = (t % hop_us) - (SW_UNIX_EPOCH_PG_USEC % hop_us);
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
 * streamwm.window_start(ts timestamptz, hop interval) RETURNS timestamptz
 */
Datum
streamwm_window_start(PG_FUNCTION_ARGS)
{
	TimestampTz t = PG_GETARG_TIMESTAMPTZ(0);
	int64		hop_us = sw_interval_usec(PG_GETARG_INTERVAL_P(1));

	PG_RETURN_TIMESTAMPTZ(sw_pane_start(t, hop_us));
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
 * streamwm.pane_windows(pane timestamptz, lo timestamptz, hi timestamptz,
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
