/*-------------------------------------------------------------------------
 * worker_coord.h
 *	  Shared memory between backends, the launcher and database workers.
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWM_WORKER_COORD_H
#define STREAMWM_WORKER_COORD_H

#include "nodes/pg_list.h"
#include "nodes/plannodes.h"
#include "tcop/utility.h"

extern void sw_coord_init(void);
extern bool sw_coord_active(void);
extern void sw_coord_utility(PlannedStmt *pstmt, ProcessUtilityContext context);

/* backends */
extern void sw_request_worker(Oid dboid);

/* the launcher */
extern void sw_launcher_attach(void);
extern List *sw_take_requests(bool *all);
extern int	sw_slot_acquire(Oid dboid);
extern uint32 sw_slot_generation(int slot);
extern bool sw_slot_release(int slot);
extern void sw_slots_reclaim(const bool *owned);
extern int	sw_slot_count(void);
extern bool sw_database_kept_away(Oid dboid);

/* database workers */
extern bool sw_worker_attach(int slot, uint32 generation);
extern void sw_worker_exit_cleanly(void) pg_attribute_noreturn();

#endif							/* STREAMWM_WORKER_COORD_H */
