/*-------------------------------------------------------------------------
 * step_cache.h
 *	  What a backend keeps of a query between steps.
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWM_STEP_CACHE_H
#define STREAMWM_STEP_CACHE_H

#include "executor/spi.h"
#include "query.h"

typedef struct SwStepEntry
{
	/* what it was built from */
	char	   *name;
	char	   *query;
	char	   *search_path;
	Oid			stream;
	int64		hop_us;
	int64		size_us;
	Oid			result_table;
	Oid			owner;
	bool		pane;
	bool		session;
	bool		citus_result;	/* a Citus result table: planned at every step */
	List	   *relids;			/* relations whose change makes it stale */
	bool		stale;
	MemoryContext cxt;			/* everything below lives here */
	void	   *pane_plan;		/* a pane-plan or session query's PanePlan, once built */
	bool		pane_plan_decided;	/* a session query's: whether it has one */
	char	   *sql;			/* the step's statement, once built */
	Oid			statement_pane_table;	/* the pane table it was built for */
	SPIPlanPtr	plan;			/* its plan, kept */
	SPIPlanPtr	insert_plan;	/* its plain-INSERT form's, or NULL */
	int			cursor_options; /* they were prepared with */
	int			insert_backoff; /* steps left that use the upsert */
} SwStepEntry;

extern SwStepEntry *sw_step_entry(const SwQueryDef *def);
extern void sw_step_entry_depends(SwStepEntry *e, List *relids);
extern void sw_step_entry_set_statement(SwStepEntry *e, const char *sql, int nparams,
										const Oid *types, Oid pane_table,
										int cursor_options);
extern void sw_step_entry_make_plans(SwStepEntry *e);

extern void sw_step_entry_set_insert(SwStepEntry *e, const char *sql, int nparams,
									 const Oid *types);
extern void sw_step_entry_execute(SwStepEntry *e, const char *name, Datum *values,
								  const char *nulls);
extern bool sw_step_plain_insert_failed(bool conflict);
extern void sw_step_insert_marks(SwStepEntry **running, bool *upsert);
extern void sw_step_insert_set_marks(SwStepEntry *running, bool upsert);

#endif
