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

-- 'latest' starts after the highest committed offset (the commit log), not
-- the sequence's last value: a transaction open at create_query and
-- committing after it was dropped.  That offset is left in the commit log
-- as the stream's start floor, which later commits compare with (see
-- streamwm--0.3.sql).
CREATE FUNCTION streamwm_internal._latest_offset(stream regclass)
    RETURNS bigint AS 'MODULE_PATHNAME', 'streamwm_latest_offset' LANGUAGE C VOLATILE STRICT;
COMMENT ON FUNCTION streamwm_internal._latest_offset(regclass) IS
    'internal: the highest offset committed into the stream, left as its start floor, not for direct use';
COMMENT ON COLUMN streamwm.commit_log.partition IS 'the partition; below 0: a start floor left by a query started at ''latest'' (hi: the highest offset committed then; a later commit with offsets at or below it is renumbered above it; lo: the next transaction id then), one partition per backend';
-- a distributed stream's partition_key: hashed before Citus routes a row
CREATE FUNCTION streamwm_internal._key_partition(stream regclass, key_columns record)
    RETURNS int AS 'MODULE_PATHNAME', 'streamwm_key_partition' LANGUAGE C STABLE STRICT;
COMMENT ON FUNCTION streamwm_internal._key_partition(regclass, record) IS
    'internal: the partition a row of a distributed stream gets from its partition_key (computed before Citus routes it), not for direct use';
CREATE OR REPLACE FUNCTION streamwm_internal._start_offset(stream regclass, start_from text)
RETURNS bigint
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    start_at bigint := 0;
    has_rows boolean;
BEGIN
    IF start_from = 'latest' AND EXISTS (SELECT 1 FROM streamwm.stream_def d
                                          WHERE d.stream OPERATOR(pg_catalog.=) _start_offset.stream
                                            AND d.rows_table IS NOT NULL) THEN
        -- a distributed stream's offsets come from each node's range of its
        -- sequence: one offset cannot tell the rows written from now on
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM %s)', stream) INTO has_rows;
        IF has_rows THEN
            RAISE EXCEPTION 'start_from => ''latest'' is not supported on distributed stream % once it has rows', stream
                USING ERRCODE = 'feature_not_supported',
                      DETAIL = 'Its offsets come from a range of its sequence on each node.',
                      HINT = 'Use start_from => ''earliest'', or create the query before the first row.';
        END IF;
    ELSIF start_from = 'latest' THEN
        start_at := streamwm_internal._latest_offset(stream);
    END IF;
    RETURN start_at;
END $$;
