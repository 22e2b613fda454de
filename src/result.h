/*-------------------------------------------------------------------------
 * result.h
 *	  Result tables: their columns and key, and the UPSERT into them.
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWM_RESULT_H
#define STREAMWM_RESULT_H

#include "query.h"
#include "utils/relcache.h"

typedef struct SwOutputColumn
{
	char	   *name;
	char	   *type;			/* format_type_with_typemod() */
	bool		is_key;			/* a GROUP BY output */
	bool		nullable;		/* a key that can be NULL */
	bool		routes;			/* a key that is the stream's sw_partition */
} SwOutputColumn;

extern void sw_require_result_table(const SwQueryDef *def);
extern char *sw_result_key_order(const SwQueryDef *def);
extern List *sw_query_columns(Oid relid, const char *query);
extern SwOutputColumn *sw_output_column(List *cols, const char *name);
extern char *sw_routing_column(Oid relid, const char *query);
extern List *sw_ordered_columns(Oid relid, const char *query);
extern int	sw_ordered_stream_rte(Query *q, Oid relid);
extern char *sw_upsert_statement(const SwQueryDef *def, const char *ctes, const char *select,
								 const char *window_start, const char *result);
extern char *sw_plain_insert_statement(const SwQueryDef *def, const char *ctes, const char *select,
									   const char *window_start, const char *result);
extern bool sw_result_plain_insert_ok(const SwQueryDef *def);
extern bool sw_result_has_key_index(Relation rel, List *cols);

#endif							/* STREAMWM_RESULT_H */
