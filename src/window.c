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

#include "fmgr.h"
#include "utils/timestamp.h"

#include "window.h"

PG_FUNCTION_INFO_V1(streamwm_window_start);

/* Microseconds from 2000-01-01 (PostgreSQL's epoch) back to 1970-01-01. */
#define SW_UNIX_EPOCH_PG_USEC \
	(-((int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY))

/* An interval as microseconds, a month counted as 30 days. */
int64
sw_interval_usec(const Interval *span)
{
	return span->time + (int64) span->day * USECS_PER_DAY +
		(int64) span->month * DAYS_PER_MONTH * USECS_PER_DAY;
}

/* Start of the epoch-aligned pane [k*hop, (k+1)*hop) that contains t. */
TimestampTz
sw_pane_start(TimestampTz t, int64 hop_us)
{
	int64		since_epoch;
	int64		k;

	if (TIMESTAMP_NOT_FINITE(t))
		return t;
	since_epoch = t - SW_UNIX_EPOCH_PG_USEC;
	k = since_epoch / hop_us;
	if (since_epoch % hop_us < 0)
		k--;
	return SW_UNIX_EPOCH_PG_USEC + k * hop_us;
}

/*
 * streamwm.window_start(ts timestamptz, hop interval) RETURNS timestamptz
 */
Datum
streamwm_window_start(PG_FUNCTION_ARGS)
{
	TimestampTz t = PG_GETARG_TIMESTAMPTZ(0);
	int64		hop_us = sw_interval_usec(PG_GETARG_INTERVAL_P(1));

	if (hop_us <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("hop must be positive")));
	PG_RETURN_TIMESTAMPTZ(sw_pane_start(t, hop_us));
}
