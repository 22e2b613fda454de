/*-------------------------------------------------------------------------
 * query.h
 *	  Window queries: checking, describing and rewriting the user's SELECT.
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWM_QUERY_H
#define STREAMWM_QUERY_H

#include "datatype/timestamp.h"
#include "nodes/parsenodes.h"
#include "nodes/pg_list.h"

typedef struct SwQueryDef
{
	char	   *name;
	Oid			stream;
	char	   *query;
	int64		hop_us;
	int64		size_us;
	Oid			result_table;	/* InvalidOid if dropped and not re-created */
	char	   *result_name;
	int64		start_offset;
	char	   *search_path;
	Oid			owner;
	TimestampTz closed_until;
	int64		errors;			/* consecutive failures */
	TimestampTz last_error_time;	/* DT_NOBEGIN if none */
	bool		pane;			/* the pane plan, else the general plan */
	Oid			pane_table;		/* pane plan: its pane state, InvalidOid if none */
	char	   *pane_stamp;		/* what the pane state was built with */
	Datum		folded_offsets; /* int8[]: per partition, how far it is folded (the
								 * general plan: read, with allowed_lateness); 0 if none */
	int64		lateness_us;	/* the stream's allowed_lateness */
	TimestampTz start_closed;	/* closed_until at creation: windows that ended
								 * by then are not the query's */
	bool		paused;			/* pause_query(): no window closes until resumed */
	bool		result_stream;	/* result_table is a stream: a chain */
	TimestampTz origin;			/* windows start at origin + n * hop */
	int64		rows_upserted;	/* rows written so far (an ordered query's seq) */
	bool		processing;		/* time_domain 'processing': windows of the
								 * clock of the step that read the rows */
	bool		session;		/* a session query (session.c): size_us is the gap */
	TimestampTz session_from;	/* session: rows before it are done with (DT_NOBEGIN: none) */
	TimestampTz session_floor;	/* session: no session starting before it is emitted */
	bool		count;			/* a count query (count.c): hop_us and size_us are 0,
								 * pane_table is its state table */
	int64		count_size;		/* count query: events per window */
	int64		count_slide;	/* count query: events from one window to the next */
	TimestampTz count_needs;	/* count query: rows from here on are still needed
								 * (DT_NOBEGIN before its first step: closed_until) */
	bool		ordered;		/* an ordered query (hop and size NULL, stored as 0) */
	int64		result_retention_us;	/* 0: keep every result row */
} SwQueryDef;

extern List *sw_relation_rtes(Query *q);
extern const char *sw_choose_plan(Oid relid, const char *query, int64 hop_us,
								  int64 size_us);
extern void sw_upsert_windows(SwQueryDef *def, Datum offsets, TimestampTz lo,
							  TimestampTz hi, int64 *windows, int64 *rows,
							  int64 *refired);
extern TimestampTz sw_refire_floor(const SwQueryDef *def, TimestampTz lo);
extern void sw_recompute_windows(SwQueryDef *def, Datum offsets, TimestampTz lo,
								 TimestampTz hi, int64 *windows, int64 *rows);
extern SwQueryDef *sw_load_managed_query(const char *name);
extern bool sw_query_folds_on_nodes(const SwQueryDef *def);
extern void sw_rte_unrelation(RangeTblEntry *rte, RTEKind kind);
extern int	sw_alone_stream_rtindex(Query *q, Oid relid, const char *kind);
extern void sw_window_query_error_context(void *arg);
extern void sw_dry_run_statement(const char *name, const char *sql, int nparams,
								 const Oid *types, Datum *values, const char *nulls);
extern Query *sw_analyze_bound_query(const char *query);
extern char *sw_deparse_query(Query *q);
extern List *sw_query_relids(Query *q);
extern Query *sw_analyze_window_query(const char *query);
extern Query *sw_analyze_internal(const char *sql, const Oid *types, int ntypes);
extern int	sw_replace_stream(Query *q, Oid relid, Query *rows);
extern void sw_query_rows_only(Query *q, List *tlist);
extern char *sw_stream_columns_sql(Oid relid, const char *alias);
extern char *sw_not_late_sql(Oid relid);
extern char *sw_interval_literal(int64 usec);
extern Datum sw_query_reads(Query *q);

#endif							/* STREAMWM_QUERY_H */
