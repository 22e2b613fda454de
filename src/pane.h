/*-------------------------------------------------------------------------
 * pane.h
 *	  The pane plan: partial aggregates per pane, windows combined from them.
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWM_PANE_H
#define STREAMWM_PANE_H

#include "query.h"

struct SwStepEntry;

/*
 * The partial-aggregate plan of a query, derived from its analyzed tree:
 * hopping windows keep it per pane (this file), session windows per open
 * session (session.c).  Its state table has nlead leading timestamptz
 * columns (sw_pane; or sw_start, sw_last), the group keys sw_k1.. and the
 * aggregates' partial states sw_a1.. (bytea).
 */
typedef struct PanePlan
{
	char	   *fold_select;	/* lead columns, sw_k1.., sw_a1.. of the new rows */
	char	   *remote_fold;	/* the fold on a distributed stream's nodes, or NULL
								 * (citus_fold.c) */
	int			nlead;
	const char *const *lead;	/* the lead columns' names */
	Oid		   *lead_types;		/* and types */
	const char *suffix;			/* of the state table's name */
	int			nkeys;
	Oid		   *key_types;
	int32	   *key_typmods;
	Oid		   *key_collations;
	int			naggs;
	Oid		   *aggs;			/* the aggregate of each state column */
	List	   *outputs;		/* output expressions over the state table */
	Node	   *having;			/* HAVING over the state table, or NULL */
} PanePlan;

extern PanePlan *sw_pane_plan(Oid relid, const char *query, int64 hop_us,
							  TimestampTz origin, int64 processing_size_us,
							  const char **why);
extern Query *sw_fold_rows_query(Oid relid, const char *pane_sql, bool by_event_time);
extern PanePlan *sw_partial_plan(Oid relid, Query *q, Query *rows, const char *const *lead,
								 int nlead, int ntrail, const char *suffix, const char **why);
extern char *sw_pane_stamp(const PanePlan *pp, Oid state_table);
extern void sw_state_outputs(const SwQueryDef *def, const PanePlan *pp, char **outputs,
							 char **group_tail);
extern char *sw_merge_states_sql(const PanePlan *pp, const char *alias);
extern char *sw_state_columns(const PanePlan *pp, const char *prefix, bool lead_and_keys_only);
extern void sw_ensure_pane_table(SwQueryDef *def, const PanePlan *pp, bool *rebuild);
extern void sw_record_panes(SwQueryDef *def, const PanePlan *pp, Datum folded);
extern char *sw_pane_statement(const SwQueryDef *def, const PanePlan *pp);
extern void sw_pane_init(void);
extern void sw_pane_upsert_windows(SwQueryDef *def, struct SwStepEntry *e, Datum offsets,
								   TimestampTz lo, TimestampTz hi, int64 *windows,
								   int64 *rows, int64 *refired);
/*
 * the pane plan's statement has this many parameters (pane.c), one more
 * (the nodes' partial states) when it folds on the nodes
 */
#define SW_PANE_NPARAMS 7
#define SW_PANE_MAX_NPARAMS 8

extern char *sw_pane_check(SwQueryDef *def, const PanePlan *pp, Oid *types, int *nparams,
						   Datum *fresh);

#endif
