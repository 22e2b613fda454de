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

#endif							/* STREAMWM_WINDOW_H */
