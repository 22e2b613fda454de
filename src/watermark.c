/*-------------------------------------------------------------------------
 * watermark.c
 *	  Owns the watermark rule (SPEC section 4): per-partition watermarks,
 *	  idle partitions, the stream watermark W and lateness.
 *
 * This file is pure computation: no SPI, no catalog access.  process.c loads
 * an SwStreamClock from streamwm.stream_def / streamwm.partition_state
 * (sw_catalog_lock_stream), feeds it every event of a step in processing
 * order, and stores it back (sw_catalog_store_step) in the same transaction
 * that upserts the results.  Keeping the rule here, apart
 * from I/O, is what makes the results independent of batching: the state
 * after a sequence of events is the same whether it was fed in one step or
 * in many.
 *
 * The rule:
 *	 wm(p) = max event time seen in p - watermark_delay (minus infinity
 *			 before the first event);
 *	 p is idle at clock time a if its newest row that arrived up to a
 *			 arrived before a - idle_timeout, or it has none and the stream
 *			 was created before a - idle_timeout, unless a transaction that
 *			 writes into p had begun by a and not committed yet (p is held);
 *	 W	   = max(W, min of wm(p) over the partitions not idle at a); with
 *			 every partition idle, W holds;
 *	 heartbeat (SPEC section 10): when the event time is the write time,
 *			 a partition whose newest row was written live (its write time
 *			 not before its transaction began: assigned by the server, not
 *			 a replayed one) will get no row written before the oldest
 *			 transaction holding it began, or before 'a' if none does; so
 *			 at a, wm(p) is at least that moment - watermark_delay, idle or
 *			 not (sw_heartbeat).  That bound only grows with a, and does not
 *			 jump: W stays a nondecreasing function of the clock, and is
 *			 the same whether it is evaluated at every moment or only at
 *			 the next arrival or step end;
 *	 a chain's promise (a stream that is the result of a query, SPEC
 *			 section 10): no row to come has an event time below the start
 *			 of the query's next window; at the end of a step, every
 *			 partition's wm(p) is at least that - watermark_delay, so the
 *			 windows of windows close when the first stage's do;
 *	 W is advanced at every moment a partition becomes idle (then, not
 *			 when some step happens to end: sw_advance_until), at each moment
 *			 rows arrive, before they are judged, and after each event;
 *			 the rows of one transaction arrive together, so every partition
 *			 it wrote is active at that moment;
 *	 an event is late when its event time is < W - allowed_lateness, W as
 *			 left by the events processed before it (SPEC section 10; with
 *			 allowed_lateness 0, < W); an accepted event with t < W falls
 *			 into windows that may have closed already, and process.c has
 *			 them re-fired;
 *	 an event whose event time is more than max_future_skew ahead of its
 *			 arrival (the server's clock, never a write time the user gave)
 *			 counts toward max event time only as arrival + max_future_skew
 *			 (SPEC section 10): it is accepted into its windows, but one bad
 *			 clock cannot move W to the year 9999.
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/int.h"
#include "datatype/timestamp.h"

#include "watermark.h"

/*
 * Is partition p idle at clock time 'at'?
 *
 * last_arrival is the arrival of the newest row of p processed so far; the
 * rows of a step are processed in arrival order, so when an event that
 * arrived at 'at' is processed, every row of p that arrived up to 'at' has
 * been seen.  A partition with a backlog is therefore never judged idle,
 * and neither is one held by a writing transaction still open at 'at'.
 */
bool
sw_partition_is_idle(const SwStreamClock *clock, int partition, TimestampTz at)
{
	const SwPartitionClock *p = &clock->parts[partition];
	TimestampTz newest = p->last_arrival;

	if (TIMESTAMP_IS_NOBEGIN(newest))
		newest = clock->created;
	if (newest >= at - clock->idle_timeout_us)
		return false;
	if (clock->held_from != NULL && clock->held_from(clock->held_arg, partition) <= at)
		return false;
	return true;
}

/* wm(p): the partition's watermark, DT_NOBEGIN before its first event. */
TimestampTz
sw_partition_watermark(const SwStreamClock *clock, int partition)
{
	TimestampTz m = clock->parts[partition].max_event_time;

	if (TIMESTAMP_IS_NOBEGIN(m))
		return DT_NOBEGIN;
	if (TIMESTAMP_IS_NOEND(m))
		return DT_NOEND;
	return m - clock->delay_us;
}

/*
 * The heartbeat of partition p at clock time 'at': the lowest watermark a
 * row written into p from now on can have, if write times are assigned by
 * the server: the start of the oldest transaction holding p (its rows are
 * on their way), else 'at', minus watermark_delay.  DT_NOBEGIN when the
 * heartbeat does not apply to p (the event time comes from the data, or p's
 * newest row was replayed with an explicit write time, or has none).
 */
TimestampTz
sw_heartbeat(const SwStreamClock *clock, int partition, TimestampTz at)
{
	TimestampTz since = at;
	TimestampTz beat = DT_NOBEGIN;
	TimestampTz promised;

	if (clock->heartbeat && clock->parts[partition].live)
	{
		if (clock->held_from != NULL)
		{
			TimestampTz held = clock->held_from(clock->held_arg, partition);

			if (held < since)
				since = held;
		}
		if (TIMESTAMP_NOT_FINITE(since) ||
			pg_sub_s64_overflow(since, clock->delay_us, &beat) ||
			!IS_VALID_TIMESTAMP(beat))
			beat = DT_NOBEGIN;
	}
	/* a chain's promise holds for every partition */
	if (!TIMESTAMP_NOT_FINITE(clock->promise) &&
		!pg_sub_s64_overflow(clock->promise, clock->delay_us, &promised) &&
		IS_VALID_TIMESTAMP(promised) && promised > beat)
		beat = promised;
	return beat;
}

/*
 * Advance W with the partitions that are not idle at clock time 'at' (and
 * those the heartbeat moves, idle or not).  Returns true if W moved.
 */
bool
sw_advance_watermark(SwStreamClock *clock, TimestampTz at)
{
	TimestampTz low = DT_NOEND;
	bool		any_active = false;

	for (int i = 0; i < clock->npartitions; i++)
	{
		TimestampTz wm;
		TimestampTz beat = sw_heartbeat(clock, i, at);

		if (TIMESTAMP_IS_NOBEGIN(beat) && sw_partition_is_idle(clock, i, at))
			continue;
		any_active = true;
		wm = sw_partition_watermark(clock, i);
		if (beat > wm)
			wm = beat;
		if (wm < low)
			low = wm;
	}
	if (any_active && low > clock->watermark)
	{
		clock->watermark = low;
		return true;
	}
	return false;
}

/*
 * The furthest an event that arrived at 'arrival' may move its partition:
 * arrival + max_future_skew, DT_NOEND when that is past the end of the
 * timestamp range (then nothing valid is too far ahead).
 */
TimestampTz
sw_future_bound(const SwStreamClock *clock, TimestampTz arrival)
{
	TimestampTz bound;

	if (TIMESTAMP_NOT_FINITE(arrival) ||
		pg_add_s64_overflow(arrival, clock->max_future_skew_us, &bound) ||
		!IS_VALID_TIMESTAMP(bound))
		return DT_NOEND;
	return bound;
}

static int
timestamp_cmp(const void *a, const void *b)
{
	TimestampTz x = *(const TimestampTz *) a;
	TimestampTz y = *(const TimestampTz *) b;

	return x < y ? -1 : x > y ? 1 : 0;
}

/*
 * Advance W through every moment from the newest arrival applied so far up
 * to 'at': at each moment a partition became idle (its newest arrival plus
 * idle_timeout; whether a writing transaction held it then is asked at
 * that moment), and at 'at'.  Nothing arrives in between, so these are the
 * only moments W can move; taking them one by one is what makes the result
 * independent of when steps run.
 */
void
sw_advance_until(SwStreamClock *clock, TimestampTz at)
{
	TimestampTz from = DT_NOBEGIN;
	TimestampTz *moments = palloc(clock->npartitions * sizeof(TimestampTz));
	int			n = 0;

	for (int i = 0; i < clock->npartitions; i++)
	{
		TimestampTz newest = clock->parts[i].last_arrival;

		if (TIMESTAMP_IS_NOBEGIN(newest))
			newest = clock->created;
		if (newest > from)
			from = newest;
	}
	for (int i = 0; i < clock->npartitions; i++)
	{
		TimestampTz newest = clock->parts[i].last_arrival;
		TimestampTz idle_at;

		if (TIMESTAMP_IS_NOBEGIN(newest))
			newest = clock->created;
		/* the first moment 'newest < moment - idle_timeout' holds */
		if (pg_add_s64_overflow(newest, clock->idle_timeout_us + 1, &idle_at))
			continue;
		if (idle_at > from && idle_at < at)
			moments[n++] = idle_at;
	}
	qsort(moments, n, sizeof(TimestampTz), timestamp_cmp);
	for (int i = 0; i < n; i++)
		sw_advance_watermark(clock, moments[i]);
	sw_advance_watermark(clock, at);
	pfree(moments);
}

/*
 * Rows arrive at 'at' in these partitions (one transaction's, or several
 * that committed in the same microsecond): first W moves with the
 * partitions that went idle since the previous arrival, then the
 * partitions count as active from 'at' on.
 */
void
sw_observe_arrival(SwStreamClock *clock, const int32 *partitions, int n, TimestampTz at)
{
	sw_advance_until(clock, at);
	for (int i = 0; i < n; i++)
	{
		SwPartitionClock *p = &clock->parts[partitions[i]];

		if (TIMESTAMP_IS_NOBEGIN(p->last_arrival) || at > p->last_arrival)
			p->last_arrival = at;
	}
}

/*
 * The event time below which an event is late when the stream watermark is
 * 'watermark': watermark - allowed_lateness, minus infinity when W is (or
 * that is before the first representable timestamp).
 */
TimestampTz
sw_late_bound(TimestampTz watermark, int64 lateness_us)
{
	TimestampTz bound;

	if (TIMESTAMP_NOT_FINITE(watermark) || lateness_us == 0)
		return watermark;
	if (pg_sub_s64_overflow(watermark, lateness_us, &bound) || !IS_VALID_TIMESTAMP(bound))
		return DT_NOBEGIN;
	return bound;
}

/*
 * Process one event: decide whether it is late, then let it advance its
 * partition (late or not, filtered out by a query or not) and W.  'live':
 * its write time is not before its transaction began (see sw_heartbeat).
 * Returns true if the event is late; *watermark_before is W at that moment.
 */
bool
sw_observe_event(SwStreamClock *clock, int partition, int64 offset,
				 TimestampTz event_time, TimestampTz arrival, bool live,
				 TimestampTz *watermark_before)
{
	SwPartitionClock *p = &clock->parts[partition];
	bool		late = event_time < sw_late_bound(clock->watermark, clock->lateness_us);
	TimestampTz advance = event_time;

	*watermark_before = clock->watermark;
	if (clock->limit_future)
	{
		TimestampTz bound = sw_future_bound(clock, arrival);

		if (advance > bound)
		{
			advance = bound;
			clock->future_events++;
		}
	}
	if (advance > p->max_event_time)
		p->max_event_time = advance;
	if (arrival > p->last_arrival)
		p->last_arrival = arrival;
	p->processed_offset = offset;
	p->live = live;
	sw_advance_watermark(clock, arrival);
	return late;
}
