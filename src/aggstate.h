/*-------------------------------------------------------------------------
 * aggstate.h
 *	  Running an aggregate in pieces (partial states, combine, finalize).
 *-------------------------------------------------------------------------
 */
#ifndef STREAMWM_AGGSTATE_H
#define STREAMWM_AGGSTATE_H

extern const char *sw_agg_piecewise_refusal(Oid aggfnoid);
extern char *sw_state_stamp(void);
extern bytea *sw_state_vouch(bytea *state, Oid aggfnoid);

#endif
