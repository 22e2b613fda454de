/*-------------------------------------------------------------------------
 * stream_brin.h
 *	  A local stream's own index: BRIN whose writers enter their rows at commit
 *	  (stream_brin.c).
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWM_STREAM_BRIN_H
#define STREAMWM_STREAM_BRIN_H

#include "storage/block.h"
#include "utils/relcache.h"

extern void sw_stream_brin_init(void);
extern bool sw_stream_brin_defers(Relation index);
extern void sw_stream_brin_flush(Relation heap, BlockNumber runs[][2], int nruns);
extern void sw_stream_brin_summarize(Relation heap);

#endif							/* STREAMWM_STREAM_BRIN_H */
