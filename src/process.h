/*-------------------------------------------------------------------------
 * process.h
 *	  One processing step of a stream.
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWM_PROCESS_H
#define STREAMWM_PROCESS_H

#include "datatype/timestamp.h"

extern int64 sw_process_stream(Oid relid, TimestampTz now, bool from_worker,
							   int64 max_rows);

#endif							/* STREAMWM_PROCESS_H */
