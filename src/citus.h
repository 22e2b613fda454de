/*-------------------------------------------------------------------------
 * citus.h
 *	  Citus awareness: which tables Citus manages, and the refusals of what
 *	  streamwm does not support on them (DESIGN.md, "Citus").
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWM_CITUS_H
#define STREAMWM_CITUS_H

#include "nodes/plannodes.h"
#include "tcop/cmdtag.h"
#include "utils/rel.h"
#include "commit_order.h"

struct SwStreamClock;

extern void sw_citus_init(void);
extern bool sw_citus_wrote(Oid relid);
extern const char *sw_citus_table_kind(Oid relid);
extern Oid	sw_citus_shard_owner(Oid relid);
extern int	sw_citus_stream_partitions(Oid relid);

/* how many partitions' ranges a read of the shards writes out (sw_citus_ranges_sql) */
#define SW_CITUS_MAX_RANGES 16
extern char *sw_citus_ranges_sql(const char *alias, int nranges, int tail_param);
extern Datum sw_citus_ranges_tail(const Datum *parts, int n);
extern Trigger *sw_citus_stream_trigger(Relation rel);
extern void sw_citus_refuse_stream(Oid stream);
extern void sw_citus_refuse_query_relation(Oid relid, Oid stream);
extern void sw_citus_refuse_result_table(Oid result, Oid stream, const char *query);
extern void sw_citus_refuse_result_kind(Oid result, const char *kind);
struct SwQueryDef;
extern bool sw_citus_check_result(const struct SwQueryDef *def);
extern void sw_citus_check_copy(Oid relid);
extern bool sw_citus_utility(PlannedStmt *pstmt, const char *queryString,
							 QueryCompletion *qc);
extern void sw_citus_route_statement(Query *query);
extern bool sw_citus_has_partition_key(Oid relid);
extern void sw_citus_check_partition_key(Oid relid);
extern bool sw_citus_route_copy(PlannedStmt *pstmt, const char *queryString, Oid relid,
								QueryCompletion *qc);
extern Oid	sw_citus_log_shard(Oid shard, const char *logname);
extern TimestampTz sw_citus_read_arrivals(Oid relid, Oid rowsrel, Oid logrel, Oid owner,
										  bool on_nodes, struct SwStreamClock *clock,
										  SwPartitionHold *live);
extern void sw_citus_fill_copy(Oid relid, const int64 *processed, int np);
extern bool sw_citus_owned_by_creator(Oid relid);
extern void sw_citus_check_owner(Oid relid);
extern uint64 sw_citus_expire_on_nodes(Oid relid, const int64 *upto, TimestampTz horizon,
									   TimestampTz cutoff);
extern void sw_citus_forget_rows(Oid relid, struct SPITupleTable *tuptable, uint64 n);
extern void sw_citus_prune_log(Oid logrel, Oid owner, const struct SwStreamClock *clock,
							   const int64 *before);

#endif							/* STREAMWM_CITUS_H */
