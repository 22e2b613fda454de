/*-------------------------------------------------------------------------
 * stream_am.h
 *	  A local stream's table access method (stream_am.c).
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWM_STREAM_AM_H
#define STREAMWM_STREAM_AM_H

#include "storage/itemptr.h"
#include "utils/relcache.h"

extern bool sw_stream_am_copy_row(Relation rel, ItemPointer tid);
extern bool sw_stream_am_inserted_row(Relation rel, ItemPointer tid);

#endif							/* STREAMWM_STREAM_AM_H */
