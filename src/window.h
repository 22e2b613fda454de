/*-------------------------------------------------------------------------
 * window.h
 *	  Epoch-aligned hopping windows and panes.
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWM_WINDOW_H
#define STREAMWM_WINDOW_H

#include "datatype/timestamp.h"

extern int64 sw_interval_usec(const Interval *span);
extern TimestampTz sw_pane_start(TimestampTz t, int64 hop_us);
extern void sw_pane_windows(TimestampTz pane, TimestampTz lo, TimestampTz hi, int64 hop_us,
							int64 size_us, TimestampTz *first, int64 *count);

#endif							/* STREAMWM_WINDOW_H */
