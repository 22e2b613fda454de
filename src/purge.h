/*-------------------------------------------------------------------------
 * purge.h
 *	  Accounting of rows a user purges from a stream (DELETE, TRUNCATE), and
 *	  retention's DELETE, which that accounting leaves alone.
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWM_PURGE_H
#define STREAMWM_PURGE_H

#include "utils/relcache.h"

extern void sw_purge_truncate(Relation rel);
extern void sw_retention_delete(Oid relid, const char *relname, const char *sql,
								int nargs, Oid *types, Datum *values);

#endif							/* STREAMWM_PURGE_H */
