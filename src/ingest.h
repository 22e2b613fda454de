/*-------------------------------------------------------------------------
 * ingest.h
 *	  Rows into stream tables: the system columns of every row (the access
 *	  method's and the insert trigger's) and the ingest functions.
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWM_INGEST_H
#define STREAMWM_INGEST_H

#include "executor/tuptable.h"
#include "fmgr.h"
#include "nodes/primnodes.h"
#include "utils/reltrigger.h"
#include "utils/relcache.h"

extern Expr *sw_row_expression(Relation rel, const char *exprtext,
							   bool want_timestamptz);

/* The system columns sw_ingest_fill_slot() filled in a row (it had them NULL). */
typedef struct SwFilled
{
	int			natts;
	AttrNumber	atts[4];
} SwFilled;

extern Trigger *sw_copy_trigger(const Trigger *trigger);
extern Expr *sw_ingest_partition_key(Relation rel, const Trigger *trigger);
extern int32 sw_key_partition(FmgrInfo *hash, Oid collation, Datum key, int npartitions);
/* What sw_ingest_fill_slot() did with a row. */
typedef enum SwFill
{
	SW_FILL_NONE,				/* no stream's row: the heap's */
	SW_FILL_AS_GIVEN,			/* a stream's, stored as given */
	SW_FILL_FILLED				/* a stream's, filled */
} SwFill;

extern SwFill sw_ingest_fill_slot(Relation rel, TupleTableSlot *slot, SwFilled *filled);
extern bool sw_ingest_stream_rows(Relation rel);
typedef struct IngestState IngestState;
extern IngestState *sw_ingest_batch_state(Relation rel);
extern void sw_ingest_fill_batch_row(IngestState *st, Relation rel, TupleTableSlot *slot);
extern void sw_ingest_unfill_slot(TupleTableSlot *slot, const SwFilled *filled);

#endif							/* STREAMWM_INGEST_H */
