/*-------------------------------------------------------------------------
 * window.h
 *	  Hopping windows and panes, aligned at an origin (date_bin).
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWM_WINDOW_H
#define STREAMWM_WINDOW_H

#include "datatype/timestamp.h"

extern int64 sw_interval_usec(const Interval *span);
/* Microseconds from 2000-01-01 (PostgreSQL's epoch) back to 1970-01-01. */
#define SW_UNIX_EPOCH \
	(-((int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY))

extern TimestampTz sw_pane_start(TimestampTz t, int64 hop_us, TimestampTz origin);
extern char *sw_window_start_sql(const char *ts_sql, int64 hop_us, TimestampTz origin);
extern void sw_pane_windows(TimestampTz pane, TimestampTz lo, TimestampTz hi, int64 hop_us,
							int64 size_us, TimestampTz *first, int64 *count);

#endif							/* STREAMWM_WINDOW_H */
