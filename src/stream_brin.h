/*-------------------------------------------------------------------------
 * stream_brin.h
 *	  A local stream's own index: BRIN brought up to date at commit
 *	  (stream_brin.c).
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWM_STREAM_BRIN_H
#define STREAMWM_STREAM_BRIN_H

#include "storage/block.h"
#include "utils/relcache.h"

extern void sw_stream_brin_commit(Relation heap, BlockNumber first, BlockNumber last);
extern void sw_stream_brin_summarize(Relation heap);

#endif							/* STREAMWM_STREAM_BRIN_H */
