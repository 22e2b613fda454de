/*-------------------------------------------------------------------------
 * watermark.h
 *	  The watermark rule of SPEC section 4, as a pure state machine.
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWM_WATERMARK_H
#define STREAMWM_WATERMARK_H

#include "datatype/timestamp.h"

/* What the watermark rule remembers of one partition. */
typedef struct SwPartitionClock
{
	int64		processed_offset;	/* newest offset processed */
	TimestampTz max_event_time; /* DT_NOBEGIN before the first event */
	TimestampTz last_arrival;	/* DT_NOBEGIN when no row has arrived */
	bool		live;			/* its newest row was written live: its write
								 * time is not before its transaction began */
} SwPartitionClock;

/*
 * Since when partition p has been held by a writing transaction that had
 * not committed by the moment being judged (SPEC section 4: such a
 * partition is not idle); DT_NOEND when none.  Supplied by process.c.
 */
typedef TimestampTz (*SwHeldFrom) (void *arg, int partition);

/* What the watermark rule remembers of one stream. */
typedef struct SwStreamClock
{
	int			npartitions;
	int64		delay_us;		/* watermark_delay */
	int64		idle_timeout_us;	/* idle_timeout */
	TimestampTz created;		/* when the stream was created */
	TimestampTz watermark;		/* W; DT_NOBEGIN is minus infinity */
	SwPartitionClock *parts;
	bool		heartbeat;		/* the event time is the write time */
	TimestampTz promise;		/* a chain's: no row to come has an earlier
								 * event time; DT_NOBEGIN if none */
	bool		limit_future;	/* max_future_skew is set */
	int64		max_future_skew_us; /* max_future_skew, if limit_future */
	int64		future_events;	/* events this step found too far ahead */
	int64		lateness_us;	/* allowed_lateness (>= 0) */
	SwHeldFrom	held_from;		/* NULL: no partition is ever held */
	void	   *held_arg;
} SwStreamClock;

extern bool sw_partition_is_idle(const SwStreamClock *clock, int partition,
								 TimestampTz at);
extern TimestampTz sw_partition_watermark(const SwStreamClock *clock,
										  int partition);
extern TimestampTz sw_heartbeat(const SwStreamClock *clock, int partition,
								TimestampTz at);
extern TimestampTz sw_late_bound(TimestampTz watermark, int64 lateness_us);
extern TimestampTz sw_future_bound(const SwStreamClock *clock,
								   TimestampTz arrival);
extern bool sw_advance_watermark(SwStreamClock *clock, TimestampTz at);
extern void sw_advance_until(SwStreamClock *clock, TimestampTz at);
extern void sw_observe_arrival(SwStreamClock *clock, const int32 *partitions,
							   int n, TimestampTz at);
extern bool sw_observe_event(SwStreamClock *clock, int partition, int64 offset,
							 TimestampTz event_time, TimestampTz arrival,
							 bool live, TimestampTz *watermark_before);

#endif							/* STREAMWM_WATERMARK_H */
