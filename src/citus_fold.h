/*-------------------------------------------------------------------------
 * citus_fold.h
 *	  The pane plan's fold on the nodes of a distributed stream.
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWM_CITUS_FOLD_H
#define STREAMWM_CITUS_FOLD_H

#include "nodes/parsenodes.h"
#include "pane.h"

extern char *sw_citus_fold_sql(Oid relid, Query *q, int64 hop_us, TimestampTz origin,
							   int64 processing_size_us);
extern Datum sw_citus_fold(const SwQueryDef *def, const PanePlan *pp, Datum processed,
						   Datum folded, TimestampTz at, bool has_late);
extern void sw_citus_fold_check(const SwQueryDef *def, const char *fold_sql);

#endif							/* STREAMWM_CITUS_FOLD_H */
