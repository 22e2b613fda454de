/*-------------------------------------------------------------------------
 * count.h
 *	  Count windows (SPEC section 11): see count.c.
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWM_COUNT_H
#define STREAMWM_COUNT_H

#include "query.h"

extern void sw_count_check(SwQueryDef *def);
extern char *sw_count_statement(const SwQueryDef *def);
extern void sw_count_upsert_windows(SwQueryDef *def, Datum offsets, TimestampTz lo,
									TimestampTz hi, int64 *windows, int64 *rows);

#endif							/* STREAMWM_COUNT_H */
