/*-------------------------------------------------------------------------
 * session.h
 *	  Session windows (SPEC section 11): a session query's statement and step.
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWM_SESSION_H
#define STREAMWM_SESSION_H

#include "query.h"

extern char *sw_session_statement(const SwQueryDef *def);
extern void sw_session_upsert_windows(SwQueryDef *def, Datum offsets, TimestampTz hi,
									  int64 *windows, int64 *rows);
extern void sw_session_check(SwQueryDef *def);

#endif							/* STREAMWM_SESSION_H */
