/*-------------------------------------------------------------------------
 * worker.h
 *	  Background workers: the launcher and the per-database workers.
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWM_WORKER_H
#define STREAMWM_WORKER_H

extern bool sw_enabled;
extern int	sw_launcher_naptime;
extern int	sw_worker_restart_seconds;
extern int	sw_lock_timeout_ms;
extern int	sw_max_workers;

extern void sw_register_launcher(void);

#endif							/* STREAMWM_WORKER_H */
