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
} SwPartitionClock;

/* What the watermark rule remembers of one stream. */
typedef struct SwStreamClock
{
	int			npartitions;
	int64		delay_us;		/* watermark_delay */
	int64		idle_timeout_us;	/* idle_timeout */
	TimestampTz created;		/* when the stream was created */
	TimestampTz watermark;		/* W; DT_NOBEGIN is minus infinity */
	SwPartitionClock *parts;
	bool		limit_future;	/* max_future_skew is set */
	int64		max_future_skew_us; /* max_future_skew, if limit_future */
	int64		future_events;	/* events this step found too far ahead */
} SwStreamClock;

extern bool sw_partition_is_idle(const SwStreamClock *clock, int partition,
								 TimestampTz at);
extern TimestampTz sw_partition_watermark(const SwStreamClock *clock,
										  int partition);
extern TimestampTz sw_future_bound(const SwStreamClock *clock,
								   TimestampTz arrival);
extern bool sw_advance_watermark(SwStreamClock *clock, TimestampTz at);
extern bool sw_observe_event(SwStreamClock *clock, int partition, int64 offset,
							 TimestampTz event_time, TimestampTz arrival,
							 TimestampTz *watermark_before);

#endif							/* STREAMWM_WATERMARK_H */
