/* streamwm--0.2--0.3.sql — update from streamwm 0.2 to 0.3 */

\echo Use "ALTER EXTENSION streamwm UPDATE TO '0.3'" to load this file. \quit

-- The pane plan's aggregates declare the size of a group's state (SSPACE):
-- without it the planner assumed 8 kB a group for an internal state, and a
-- hash aggregate, which also limits its groups to hash_mem over that
-- estimate, spilled to disk past about 1,000 groups.  CREATE OR REPLACE
-- keeps each aggregate's OID, owner, privileges and comment.
CREATE OR REPLACE AGGREGATE streamwm_internal.partial(oid) (
    SFUNC = streamwm_internal._partial_sfunc, STYPE = internal, SSPACE = 128,
    FINALFUNC = streamwm_internal._state_ffunc);
CREATE OR REPLACE AGGREGATE streamwm_internal.partial(oid, VARIADIC "any") (
    SFUNC = streamwm_internal._partial_sfunc, STYPE = internal, SSPACE = 128,
    FINALFUNC = streamwm_internal._state_ffunc);
CREATE OR REPLACE AGGREGATE streamwm_internal.merge(bytea, oid) (
    SFUNC = streamwm_internal._combine_sfunc, STYPE = internal, SSPACE = 128,
    FINALFUNC = streamwm_internal._state_ffunc);
CREATE OR REPLACE AGGREGATE streamwm_internal.combine(bytea, oid, anyelement) (
    SFUNC = streamwm_internal._combine_sfunc, STYPE = internal, SSPACE = 128,
    FINALFUNC = streamwm_internal._combine_ffunc, FINALFUNC_EXTRA);
