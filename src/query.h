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

typedef struct SwOutputColumn
{
	char	   *name;
	char	   *type;			/* format_type_with_typemod() */
	bool		is_key;			/* a GROUP BY output */
} SwOutputColumn;

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
} SwQueryDef;

#define SW_WINDOW_NPARAMS 4
extern const Oid sw_window_param_types[SW_WINDOW_NPARAMS];

extern List *sw_query_columns(Oid relid, const char *query);
extern char *sw_window_select(Oid relid, const char *query, int64 hop_us,
							  int64 size_us);
extern char *sw_upsert_sql(const SwQueryDef *def);
extern SwQueryDef *sw_load_query(const char *name);
extern Query *sw_analyze_bound_query(const char *query);
extern char *sw_deparse_query(Query *q);
extern List *sw_query_relids(Query *q);
extern Datum sw_query_reads(Query *q);

#endif							/* STREAMWM_QUERY_H */
