/*-------------------------------------------------------------------------
 * guard.h
 *	  Protection of stream tables against DDL that would break them.
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWM_GUARD_H
#define STREAMWM_GUARD_H

#include "access/attnum.h"
#include "access/tupdesc.h"
#include "utils/relcache.h"

/* Attribute numbers of the system columns of a stream table. */
typedef struct SwStreamColumns
{
	AttrNumber	partition;		/* sw_partition int4 */
	AttrNumber	offset;			/* sw_offset int8 */
	AttrNumber	write_time;		/* sw_write_time timestamptz */
	AttrNumber	event_time;		/* sw_event_time timestamptz */
} SwStreamColumns;

extern void sw_check_stream_columns(Relation rel, SwStreamColumns *cols);
extern void sw_check_result_types(TupleDesc tupdesc, const Oid *types, int n,
								  const char *relname);

#endif							/* STREAMWM_GUARD_H */
