/*-------------------------------------------------------------------------
 * pane.h
 *	  The pane plan: partial aggregates per pane, windows combined from them.
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWM_PANE_H
#define STREAMWM_PANE_H

#include "query.h"

typedef struct PanePlan PanePlan;
struct SwStepEntry;

extern PanePlan *sw_pane_plan(Oid relid, const char *query, int64 hop_us,
							  TimestampTz origin, int64 processing_size_us,
							  const char **why);
extern void sw_ensure_pane_table(SwQueryDef *def, const PanePlan *pp, bool *rebuild);
extern void sw_record_panes(SwQueryDef *def, const PanePlan *pp, Datum folded);
extern char *sw_pane_statement(const SwQueryDef *def, const PanePlan *pp);
extern void sw_pane_upsert_windows(SwQueryDef *def, struct SwStepEntry *e, Datum offsets,
								   TimestampTz lo, TimestampTz hi, int64 *windows,
								   int64 *rows, int64 *refired);
/* the pane plan's statement has this many parameters (pane.c) */
#define SW_PANE_NPARAMS 7

extern char *sw_pane_check(SwQueryDef *def, const PanePlan *pp, const Oid **types);

#endif
