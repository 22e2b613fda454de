/*-------------------------------------------------------------------------
 * commit_order.h
 *	  Rows of a stream arrive when their transaction commits (commit_order.c).
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWM_COMMIT_ORDER_H
#define STREAMWM_COMMIT_ORDER_H

#include "datatype/timestamp.h"
#include "storage/itemptr.h"
#include "utils/relcache.h"
#include "utils/snapshot.h"

/* An open writing transaction holding a partition: the oldest one. */
typedef struct SwPartitionHold
{
	int			pid;			/* 0: nobody holds it */
	TimestampTz since;			/* its transaction's start; DT_NOBEGIN if unknown */
} SwPartitionHold;

extern void sw_commit_order_init(void);
extern bool sw_commit_order_wrote(Oid relid);
extern void sw_commit_order_note(Oid relid, Oid table, Oid log, Oid seqoid, int32 partition,
								 int64 offset);
extern void sw_commit_order_stored(Relation rel, ItemPointer tid);
extern void sw_commit_order_batch(bool begin);
/* the runs of blocks a transaction's rows went to, per stream table */
extern int	sw_commit_order_own_runs(Oid table, BlockNumber (**runs)[2]);
extern bool sw_commit_order_owns_block(Relation rel, BlockNumber blk);
extern void sw_commit_order_left_for_flush(void);
extern void sw_commit_order_flush_indexes(void);
extern bool sw_commit_order_stored_any(void);
extern int64 sw_take_offset(Oid seqoid);
extern int64 sw_shard_offset(Oid seqoid, Oid log, int32 partition, char *mode);
extern int	sw_pick_free_partition(Oid relid, int npartitions, int start, bool *claimed);
extern bool sw_partition_claimed(Oid relid, int partition);
extern void sw_partition_holders(Oid relid, int npartitions, SwPartitionHold *holds);
extern TimestampTz sw_commit_fence_node(Oid relid, int npartitions, SwPartitionHold *holds);
extern Snapshot sw_commit_fence(Oid relid, int npartitions, SwPartitionHold *holds,
								TimestampTz *clock);

#endif							/* STREAMWM_COMMIT_ORDER_H */
