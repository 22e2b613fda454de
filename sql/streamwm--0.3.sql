/* streamwm--0.3.sql — catalog, SQL API and views of streamwm 0.3 */

\echo Use "CREATE EXTENSION streamwm" to load this file. \quit

/*
 * Internal helpers (trigger and event trigger functions, the functions the
 * C code and the API functions call, the pane plan's aggregates) live in a
 * schema of their own, so that the streamwm schema holds only what users
 * call and read.  Every role may use it: stream tables' triggers run its
 * functions as the inserting role, window queries its aggregates as their
 * owners; each function checks who may do what itself.
 */
CREATE SCHEMA streamwm_internal;
GRANT USAGE ON SCHEMA streamwm_internal TO PUBLIC;

/*
 * Catalog.  Everything the engine remembers between steps lives in these
 * tables and is changed only inside the transaction that also upserts the
 * results (see DESIGN.md).  They are dumped by pg_dump as configuration
 * tables; the stream and result tables themselves are ordinary user tables,
 * never extension members.
 */

CREATE TABLE streamwm.stream_def (
    stream          regclass PRIMARY KEY,
    partitions      int NOT NULL CHECK (partitions BETWEEN 1 AND 4096),
    watermark_delay interval NOT NULL,
    event_time      text,
    partition_key   text,
    granularity     interval NOT NULL,
    idle_timeout    interval NOT NULL,
    retention       interval NOT NULL,
    created         timestamptz NOT NULL DEFAULT clock_timestamp(),
    owner           regrole NOT NULL DEFAULT current_user::regrole,
    watermark       timestamptz NOT NULL DEFAULT '-infinity',
    events          bigint NOT NULL DEFAULT 0,
    late_events     bigint NOT NULL DEFAULT 0,
    expired_rows    bigint NOT NULL DEFAULT 0,
    last_processed  timestamptz,
    max_future_skew interval,           -- NULL: no limit (SPEC section 10)
    future_events   bigint NOT NULL DEFAULT 0,
    retained_from   timestamptz NOT NULL DEFAULT '-infinity', -- rows with event time
                                        -- before this may have been removed by retention
                                        -- or a purge
    retention_horizon timestamptz NOT NULL DEFAULT '-infinity', -- rows with event time
                                        -- before this may have been removed by retention
                                        -- (a purge does not move it): recompute() refuses
                                        -- windows that start before it
    purged_rows     bigint NOT NULL DEFAULT 0, -- unread rows a DELETE or TRUNCATE removed
    step_started    timestamptz,        -- a worker's step began (committed first), until it ends
    step_crashes    int NOT NULL DEFAULT 0, -- workers that ended inside this stream's step in a row
    allowed_lateness interval NOT NULL DEFAULT '0', -- events down to W - this are accepted (SPEC section 10)
    rows_table      regclass,           -- a distributed stream (Citus): the coordinator's copy of
                                        -- the rows steps read, which windows are computed from
    log_table       regclass            -- a distributed stream: its commit log, distributed with it
);

CREATE TABLE streamwm.partition_state (
    stream           regclass NOT NULL,
    partition        int NOT NULL,
    processed_offset bigint NOT NULL DEFAULT 0,
    max_event_time   timestamptz NOT NULL DEFAULT '-infinity',
    last_arrival     timestamptz,
    live             boolean NOT NULL DEFAULT false, -- its newest row was written live, not
                                        -- replayed: the heartbeat applies (SPEC section 10)
    PRIMARY KEY (stream, partition)
);

CREATE TABLE streamwm.query_def (
    name            text PRIMARY KEY,
    stream          regclass NOT NULL,
    query           text NOT NULL,      -- bound: deparsed with every name qualified
    query_text      text NOT NULL,      -- as the user wrote it
    hop             interval,           -- NULL for a count query
    size            interval,           -- NULL for a count query
    result_table    regclass NOT NULL,
    result_name     text NOT NULL,      -- to find it again if dropped and re-created
    start_from      text NOT NULL CHECK (start_from IN ('latest', 'earliest')),
    start_offset    bigint NOT NULL,
    search_path     text NOT NULL,
    owner           regrole NOT NULL DEFAULT current_user::regrole,
    created         timestamptz NOT NULL DEFAULT clock_timestamp(),
    closed_until    timestamptz NOT NULL DEFAULT '-infinity',
    windows_emitted bigint NOT NULL DEFAULT 0,
    rows_upserted   bigint NOT NULL DEFAULT 0,
    last_error      text,
    last_error_time timestamptz,
    errors          bigint NOT NULL DEFAULT 0,
    plan            text NOT NULL DEFAULT 'general'  -- 'pane' | 'general', decided at create_query;
        CHECK (plan IN ('pane', 'general', 'session', 'count')), -- 'session': create_session_query,
                                        -- 'count': create_count_query (src/count.c)
    reads           regclass[],         -- every relation the query reads (src/query_ddl.c)
    pane_table      regclass,           -- pane plan: the partial aggregates per (pane, group)
    pane_stamp      text,               -- what pane_table's contents were built with
    folded_offsets  bigint[],           -- per partition: rows up to here are in pane_table
                                        -- (general plan with allowed_lateness: were read)
    windows_refired bigint NOT NULL DEFAULT 0, -- closed windows upserted again (allowed_lateness)
    start_closed_until timestamptz,     -- closed_until at create_query: windows that ended
                                        -- by then are not the query's, and never re-fire
    paused          boolean NOT NULL DEFAULT false, -- pause_query(): closes no window until resumed
    result_stream   boolean NOT NULL DEFAULT false, -- result_table is a stream (a chain)
    origin          timestamptz NOT NULL DEFAULT '1970-01-01 00:00:00+00', -- windows start at
                                        -- origin + n * hop (date_bin alignment)
    time_domain     text NOT NULL DEFAULT 'event' -- 'processing': the clock of the step
        CHECK (time_domain IN ('event', 'processing')), -- that read a row (SPEC section 11)
    result_retention interval,          -- result rows ending before W - this are deleted
    -- session windows (create_session_query, src/session.c); hop = size = gap internally
    gap             interval,           -- NULL for hopping queries
    session_from    timestamptz,        -- the first event time of the earliest session still
                                        -- open, or W: older rows are done with (NULL: all)
    session_floor   timestamptz,        -- 'earliest': sessions starting before this may have
                                        -- lost rows to retention and are not emitted
    count_size      int,                -- count query: events per window (else NULL)
    count_slide     int,                -- count query: events from one window to the next
    count_needs     timestamptz,        -- count query: rows from here on are in windows not
                                        -- emitted yet (its state table is pane_table)
    CHECK ((plan = 'count') = (count_size IS NOT NULL AND count_slide IS NOT NULL)),
    CHECK (plan = 'count' OR (hop IS NOT NULL AND size IS NOT NULL))
);
CREATE INDEX ON streamwm.query_def (stream);

CREATE TABLE streamwm.late_event_log (
    stream        regclass NOT NULL,
    partition     int NOT NULL,
    sw_offset     bigint NOT NULL,
    sw_event_time timestamptz NOT NULL,
    watermark     timestamptz NOT NULL,
    arrival       timestamptz NOT NULL, -- when the row arrived (its commit): kept for retention after it
    PRIMARY KEY (stream, partition, sw_offset)
);

-- Retention's map of a stream by offset (src/process.c): each step that
-- read accepted rows records where it left the partitions' processed
-- offsets and the earliest event time of those rows (steps that leave the
-- same W share a row).  Retention reads, on the primary key, only up to the
-- offsets of the newest mark whose min_event_time is below its horizon.
CREATE TABLE streamwm.retention_mark (
    stream         regclass NOT NULL,
    watermark      timestamptz NOT NULL, -- W after the step(s): orders the marks
    offsets        bigint[] NOT NULL,    -- processed offset of each partition, in partition order
    min_event_time timestamptz NOT NULL, -- <= the event time of every accepted row still
                                         -- retained after the previous mark, up to offsets
    PRIMARY KEY (stream, watermark)
);
CREATE INDEX ON streamwm.retention_mark (stream, min_event_time);

-- The order in which rows reached a stream (src/commit_order.c): one row
-- per transaction and partition it wrote into, added as it commits.  That
-- transaction's rows in the partition are exactly those with
-- lo < sw_offset <= hi (lo is the previous entry's hi); they arrived at
-- 'arrival' (the commit, on the server's clock); the partition was held by
-- the transaction, not idle, from held_from (its start) until then.  Steps
-- delete the entries they have read, all but each partition's newest.
CREATE TABLE streamwm.commit_log (
    stream    regclass NOT NULL,
    partition int NOT NULL,
    lo        bigint NOT NULL,
    hi        bigint NOT NULL,
    arrival   timestamptz NOT NULL,
    held_from timestamptz NOT NULL,
    PRIMARY KEY (stream, partition, hi)
);

/*
 * The catalog is written only by streamwm itself: the API functions and the
 * processing step write it through C helpers that check the caller's rights
 * and then act as the catalog's owner (as pg_cron's cron.job).  No ordinary
 * role has INSERT, UPDATE or DELETE on it.  Each role may SELECT the rows of
 * the streams it may see (owned by a role it is a member of, or readable by
 * it) and of the queries it owns; pg_read_all_stats sees everything.
 * There are no foreign keys between these tables: pg_restore -j loads them
 * in any order; drop_stream and the sql_drop event trigger remove a
 * stream's rows from all of them.
 */
REVOKE ALL ON streamwm.stream_def, streamwm.partition_state,
    streamwm.query_def, streamwm.late_event_log, streamwm.retention_mark,
    streamwm.commit_log FROM PUBLIC;
GRANT SELECT ON streamwm.stream_def, streamwm.partition_state,
    streamwm.query_def, streamwm.late_event_log, streamwm.retention_mark,
    streamwm.commit_log TO PUBLIC;
ALTER TABLE streamwm.stream_def ENABLE ROW LEVEL SECURITY;
ALTER TABLE streamwm.partition_state ENABLE ROW LEVEL SECURITY;
ALTER TABLE streamwm.query_def ENABLE ROW LEVEL SECURITY;
ALTER TABLE streamwm.late_event_log ENABLE ROW LEVEL SECURITY;
ALTER TABLE streamwm.retention_mark ENABLE ROW LEVEL SECURITY;
ALTER TABLE streamwm.commit_log ENABLE ROW LEVEL SECURITY;
CREATE POLICY visible_rows ON streamwm.stream_def FOR SELECT
    USING (pg_catalog.pg_has_role(current_user, owner, 'USAGE')
           OR pg_catalog.pg_has_role(current_user, 'pg_read_all_stats', 'USAGE')
           OR coalesce(pg_catalog.has_table_privilege(stream::pg_catalog.oid, 'SELECT'), false));
CREATE POLICY visible_rows ON streamwm.query_def FOR SELECT
    USING (pg_catalog.pg_has_role(current_user, owner, 'USAGE')
           OR pg_catalog.pg_has_role(current_user, 'pg_read_all_stats', 'USAGE'));
CREATE POLICY visible_rows ON streamwm.partition_state FOR SELECT
    USING (EXISTS (SELECT 1 FROM streamwm.stream_def d
                    WHERE d.stream OPERATOR(pg_catalog.=) partition_state.stream));
CREATE POLICY visible_rows ON streamwm.late_event_log FOR SELECT
    USING (EXISTS (SELECT 1 FROM streamwm.stream_def d
                    WHERE d.stream OPERATOR(pg_catalog.=) late_event_log.stream));
CREATE POLICY visible_rows ON streamwm.retention_mark FOR SELECT
    USING (EXISTS (SELECT 1 FROM streamwm.stream_def d
                    WHERE d.stream OPERATOR(pg_catalog.=) retention_mark.stream));
CREATE POLICY visible_rows ON streamwm.commit_log FOR SELECT
    USING (EXISTS (SELECT 1 FROM streamwm.stream_def d
                    WHERE d.stream OPERATOR(pg_catalog.=) commit_log.stream));

SELECT pg_catalog.pg_extension_config_dump('streamwm.stream_def', '');
SELECT pg_catalog.pg_extension_config_dump('streamwm.partition_state', '');
SELECT pg_catalog.pg_extension_config_dump('streamwm.query_def', '');
SELECT pg_catalog.pg_extension_config_dump('streamwm.late_event_log', '');
SELECT pg_catalog.pg_extension_config_dump('streamwm.retention_mark', '');
SELECT pg_catalog.pg_extension_config_dump('streamwm.commit_log', '');

-- The background worker caches its schedule (the streams and their
-- granularity); a change of either invalidates stream_def's relcache entry
-- at commit, which tells the worker to read it again (src/worker.c).
CREATE FUNCTION streamwm_internal._schedule_changed() RETURNS trigger
    AS 'MODULE_PATHNAME', 'streamwm_schedule_changed' LANGUAGE C;
CREATE TRIGGER schedule_changed
    AFTER INSERT OR UPDATE OF granularity OR DELETE OR TRUNCATE ON streamwm.stream_def
    FOR EACH STATEMENT EXECUTE FUNCTION streamwm_internal._schedule_changed();

/* ---------------------------------------------------------------------
 * C entry points
 * --------------------------------------------------------------------- */

-- The sw_ingest row trigger of every stream table.  Its WHEN clause, built
-- by _ingest_when(), binds the event_time and partition_key expressions
-- (see src/ingest.c); argument: the number of partitions (and a distributed
-- stream's commit log).  On a local stream it is a BEFORE UPDATE trigger
-- that never changes a row (the access method below fills them); on the
-- shards of a distributed stream, a BEFORE INSERT trigger that fills them.
CREATE FUNCTION streamwm_internal._stream_insert() RETURNS trigger
    AS 'MODULE_PATHNAME', 'streamwm_stream_insert' LANGUAGE C;

-- The table access method of local stream tables: the heap, with every row
-- given its system columns as it is inserted (src/stream_am.c).
CREATE FUNCTION streamwm_internal._stream_am_handler(internal) RETURNS table_am_handler
    AS 'MODULE_PATHNAME', 'streamwm_stream_am_handler' LANGUAGE C;
CREATE ACCESS METHOD streamwm_stream TYPE TABLE HANDLER streamwm_internal._stream_am_handler;
-- The index access method of a local stream's own index: BRIN, but the
-- stream's writers bring its summaries up to date once per block range when
-- they commit, not row by row as they insert (src/stream_brin.c); with
-- BRIN's minmax operator classes.
CREATE FUNCTION streamwm_internal._stream_brin_handler(internal) RETURNS index_am_handler
    AS 'MODULE_PATHNAME', 'streamwm_brin_handler' LANGUAGE C;
CREATE ACCESS METHOD streamwm_brin TYPE INDEX HANDLER streamwm_internal._stream_brin_handler;
CREATE OPERATOR FAMILY streamwm_internal.integer_minmax_ops USING streamwm_brin;
CREATE OPERATOR CLASS streamwm_internal.int4_minmax_ops DEFAULT FOR TYPE int4
    USING streamwm_brin FAMILY streamwm_internal.integer_minmax_ops AS
    OPERATOR 1 pg_catalog.< (int4, int4), OPERATOR 2 pg_catalog.<= (int4, int4),
    OPERATOR 3 pg_catalog.= (int4, int4), OPERATOR 4 pg_catalog.>= (int4, int4),
    OPERATOR 5 pg_catalog.> (int4, int4),
    FUNCTION 1 pg_catalog.brin_minmax_opcinfo(internal),
    FUNCTION 2 pg_catalog.brin_minmax_add_value(internal, internal, internal, internal),
    FUNCTION 3 pg_catalog.brin_minmax_consistent(internal, internal, internal),
    FUNCTION 4 pg_catalog.brin_minmax_union(internal, internal, internal);
CREATE OPERATOR CLASS streamwm_internal.int8_minmax_ops DEFAULT FOR TYPE int8
    USING streamwm_brin FAMILY streamwm_internal.integer_minmax_ops AS
    OPERATOR 1 pg_catalog.< (int8, int8), OPERATOR 2 pg_catalog.<= (int8, int8),
    OPERATOR 3 pg_catalog.= (int8, int8), OPERATOR 4 pg_catalog.>= (int8, int8),
    OPERATOR 5 pg_catalog.> (int8, int8),
    FUNCTION 1 pg_catalog.brin_minmax_opcinfo(internal),
    FUNCTION 2 pg_catalog.brin_minmax_add_value(internal, internal, internal, internal),
    FUNCTION 3 pg_catalog.brin_minmax_consistent(internal, internal, internal),
    FUNCTION 4 pg_catalog.brin_minmax_union(internal, internal, internal);
ALTER OPERATOR FAMILY streamwm_internal.integer_minmax_ops USING streamwm_brin ADD
    OPERATOR 1 pg_catalog.< (int4, int8), OPERATOR 2 pg_catalog.<= (int4, int8),
    OPERATOR 3 pg_catalog.= (int4, int8), OPERATOR 4 pg_catalog.>= (int4, int8),
    OPERATOR 5 pg_catalog.> (int4, int8),
    OPERATOR 1 pg_catalog.< (int8, int4), OPERATOR 2 pg_catalog.<= (int8, int4),
    OPERATOR 3 pg_catalog.= (int8, int4), OPERATOR 4 pg_catalog.>= (int8, int4),
    OPERATOR 5 pg_catalog.> (int8, int4);
CREATE OPERATOR FAMILY streamwm_internal.datetime_minmax_ops USING streamwm_brin;
CREATE OPERATOR CLASS streamwm_internal.timestamptz_minmax_ops DEFAULT FOR TYPE timestamptz
    USING streamwm_brin FAMILY streamwm_internal.datetime_minmax_ops AS
    OPERATOR 1 pg_catalog.< (timestamptz, timestamptz), OPERATOR 2 pg_catalog.<= (timestamptz, timestamptz),
    OPERATOR 3 pg_catalog.= (timestamptz, timestamptz), OPERATOR 4 pg_catalog.>= (timestamptz, timestamptz),
    OPERATOR 5 pg_catalog.> (timestamptz, timestamptz),
    FUNCTION 1 pg_catalog.brin_minmax_opcinfo(internal),
    FUNCTION 2 pg_catalog.brin_minmax_add_value(internal, internal, internal, internal),
    FUNCTION 3 pg_catalog.brin_minmax_consistent(internal, internal, internal),
    FUNCTION 4 pg_catalog.brin_minmax_union(internal, internal, internal);
COMMENT ON FUNCTION streamwm_internal._stream_brin_handler(internal) IS
    'internal: handler of the streamwm_brin index access method, not for direct use';
COMMENT ON ACCESS METHOD streamwm_brin IS
    'the index access method of local streams'' own index: BRIN, its summaries brought up to date when the writers commit';
COMMENT ON OPERATOR FAMILY streamwm_internal.integer_minmax_ops USING streamwm_brin IS
    'minmax summaries of int4 and int8 columns in a stream''s own index';
COMMENT ON OPERATOR CLASS streamwm_internal.int4_minmax_ops USING streamwm_brin IS
    'minmax summaries of an int4 column (sw_partition) in a stream''s own index';
COMMENT ON OPERATOR CLASS streamwm_internal.int8_minmax_ops USING streamwm_brin IS
    'minmax summaries of an int8 column (sw_offset) in a stream''s own index';
COMMENT ON OPERATOR FAMILY streamwm_internal.datetime_minmax_ops USING streamwm_brin IS
    'minmax summaries of timestamptz columns in a stream''s own index';
COMMENT ON OPERATOR CLASS streamwm_internal.timestamptz_minmax_ops USING streamwm_brin IS
    'minmax summaries of a timestamptz column (sw_event_time) in a stream''s own index';
-- BEFORE INSERT statement trigger of every local stream: its rows are
-- filled by that access method only (src/stream_am.c).
CREATE FUNCTION streamwm_internal._stream_check_method() RETURNS trigger
    AS 'MODULE_PATHNAME', 'streamwm_stream_check_method' LANGUAGE C;

-- Validates a stream's event_time and partition_key expressions and returns
-- the WHEN condition of its sw_ingest trigger that binds them.
CREATE FUNCTION streamwm_internal._ingest_when(rel regclass, event_time text, partition_key text)
    RETURNS text AS 'MODULE_PATHNAME', 'streamwm_ingest_when' LANGUAGE C;

-- BEFORE UPDATE statement trigger of every stream table: a stream is append-only.
CREATE FUNCTION streamwm_internal._stream_no_update() RETURNS trigger
    AS 'MODULE_PATHNAME', 'streamwm_stream_no_update' LANGUAGE C;

-- BEFORE and AFTER TRUNCATE statement triggers of every stream table:
-- TRUNCATE ... RESTART IDENTITY would reuse offsets (src/guard.c).
CREATE FUNCTION streamwm_internal._stream_truncate() RETURNS trigger
    AS 'MODULE_PATHNAME', 'streamwm_stream_truncate' LANGUAGE C;

-- BEFORE and AFTER DELETE statement triggers of every stream table: a
-- purged row that processing had not read is counted (src/purge.c).
CREATE FUNCTION streamwm_internal._stream_purge() RETURNS trigger
    AS 'MODULE_PATHNAME', 'streamwm_stream_purge' LANGUAGE C;

CREATE FUNCTION streamwm_internal._query_columns(stream regclass, query text,
    OUT colname text, OUT coltype text, OUT is_key boolean, OUT nullable boolean)
    RETURNS SETOF record AS 'MODULE_PATHNAME', 'streamwm_query_columns' LANGUAGE C STRICT;
-- the GROUP BY output that is the stream's sw_partition (src/result.c)
CREATE FUNCTION streamwm_internal._routing_column(stream regclass, query text)
    RETURNS text AS 'MODULE_PATHNAME', 'streamwm_routing_column' LANGUAGE C STABLE STRICT;
-- the output columns of an ordered query (hop and size NULL)
CREATE FUNCTION streamwm_internal._query_columns(stream regclass, query text, ordered boolean,
    OUT colname text, OUT coltype text, OUT is_key boolean, OUT nullable boolean)
    RETURNS SETOF record AS 'MODULE_PATHNAME', 'streamwm_query_columns' LANGUAGE C STRICT;

-- The statement a step runs for a query, for inspection.
CREATE FUNCTION streamwm_internal._window_sql(query text)
    RETURNS text AS 'MODULE_PATHNAME', 'streamwm_window_sql' LANGUAGE C STRICT;

CREATE FUNCTION streamwm.window_start(ts timestamptz, hop interval)
    RETURNS timestamptz AS 'MODULE_PATHNAME', 'streamwm_window_start'
    LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION streamwm.window_start(ts timestamptz, hop interval, origin timestamptz)
    RETURNS timestamptz AS 'MODULE_PATHNAME', 'streamwm_window_start'
    LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION streamwm_internal.pane_windows(pane timestamptz, lo timestamptz, hi timestamptz,
    hop interval, size interval)
    RETURNS SETOF timestamptz AS 'MODULE_PATHNAME', 'streamwm_pane_windows'
    LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE ROWS 1;

-- Aggregates run in pieces, for the pane plan (src/aggstate.c): the partial
-- state of an aggregate per pane and group, states merged, and states
-- combined and finalized into the aggregate's result.  The first argument
-- names the aggregate; combine's third is a typed NULL fixing the result type.
CREATE FUNCTION streamwm_internal._partial_sfunc(internal, oid)
    RETURNS internal AS 'MODULE_PATHNAME', 'streamwm_partial_sfunc' LANGUAGE C;
CREATE FUNCTION streamwm_internal._partial_sfunc(internal, oid, VARIADIC "any")
    RETURNS internal AS 'MODULE_PATHNAME', 'streamwm_partial_sfunc' LANGUAGE C;
CREATE FUNCTION streamwm_internal._state_ffunc(internal)
    RETURNS bytea AS 'MODULE_PATHNAME', 'streamwm_state_ffunc' LANGUAGE C;
CREATE FUNCTION streamwm_internal._combine_sfunc(internal, bytea, oid)
    RETURNS internal AS 'MODULE_PATHNAME', 'streamwm_combine_sfunc' LANGUAGE C;
CREATE FUNCTION streamwm_internal._combine_sfunc(internal, bytea, oid, anyelement)
    RETURNS internal AS 'MODULE_PATHNAME', 'streamwm_combine_sfunc' LANGUAGE C;
CREATE FUNCTION streamwm_internal._combine_ffunc(internal, bytea, oid, anyelement)
    RETURNS anyelement AS 'MODULE_PATHNAME', 'streamwm_combine_ffunc' LANGUAGE C;
-- SSPACE: a group's state is a small struct (aggstate.c) holding the
-- aggregate's own state.  Without it the planner assumes 8 kB a group for
-- an internal state, and a hash aggregate, which also limits its groups to
-- hash_mem over that estimate, spilled to disk past about 1,000 groups.
CREATE AGGREGATE streamwm_internal.partial(oid) (
    SFUNC = streamwm_internal._partial_sfunc, STYPE = internal, SSPACE = 128,
    FINALFUNC = streamwm_internal._state_ffunc);
CREATE AGGREGATE streamwm_internal.partial(oid, VARIADIC "any") (
    SFUNC = streamwm_internal._partial_sfunc, STYPE = internal, SSPACE = 128,
    FINALFUNC = streamwm_internal._state_ffunc);
CREATE AGGREGATE streamwm_internal.merge(bytea, oid) (
    SFUNC = streamwm_internal._combine_sfunc, STYPE = internal, SSPACE = 128,
    FINALFUNC = streamwm_internal._state_ffunc);
CREATE AGGREGATE streamwm_internal.combine(bytea, oid, anyelement) (
    SFUNC = streamwm_internal._combine_sfunc, STYPE = internal, SSPACE = 128,
    FINALFUNC = streamwm_internal._combine_ffunc, FINALFUNC_EXTRA);

CREATE FUNCTION streamwm.ingest(stream regclass, rows jsonb,
    partition int DEFAULT NULL, write_time timestamptz DEFAULT NULL)
    RETURNS bigint AS 'MODULE_PATHNAME', 'streamwm_ingest' LANGUAGE C;

CREATE FUNCTION streamwm.ingest_lines(stream regclass, lines text,
    partition int DEFAULT NULL, write_time timestamptz DEFAULT NULL)
    RETURNS bigint AS 'MODULE_PATHNAME', 'streamwm_ingest_lines' LANGUAGE C;

CREATE FUNCTION streamwm.process(stream regclass DEFAULT NULL, now timestamptz DEFAULT NULL)
    RETURNS void AS 'MODULE_PATHNAME', 'streamwm_process' LANGUAGE C;

-- Statement-level helpers of the API, in C (catalog.c, query.c): each checks
-- the caller's rights itself; those that write the catalog then act as the
-- catalog's owner.
-- Distributed streams on a Citus coordinator (src/citus.c): create_stream's
-- checks, the distribution of the stream and its commit log, the partition
-- a row goes to when it gives none (sw_partition's DEFAULT, evaluated on
-- the coordinator before Citus routes the row), and the fence a step
-- passes on each node that holds a partition.
CREATE FUNCTION streamwm_internal._check_distributed(partition_key text)
    RETURNS void AS 'MODULE_PATHNAME', 'streamwm_check_distributed' LANGUAGE C;
CREATE FUNCTION streamwm_internal._distribute(stream regclass, rows_table regclass)
    RETURNS void AS 'MODULE_PATHNAME', 'streamwm_distribute' LANGUAGE C STRICT;
CREATE FUNCTION streamwm_internal._pick_partition(stream text)
    RETURNS int AS 'MODULE_PATHNAME', 'streamwm_pick_partition' LANGUAGE C VOLATILE STRICT;
CREATE FUNCTION streamwm_internal._key_partition(stream regclass, key_columns record)
    RETURNS int AS 'MODULE_PATHNAME', 'streamwm_key_partition' LANGUAGE C STABLE STRICT;
CREATE FUNCTION streamwm_internal._dist_fence(stream text, partitions int[])
    RETURNS timestamptz[] AS 'MODULE_PATHNAME', 'streamwm_dist_fence' LANGUAGE C VOLATILE STRICT;
REVOKE ALL ON FUNCTION streamwm_internal._dist_fence(text, int[]) FROM PUBLIC;
CREATE FUNCTION streamwm_internal._dist_newest(log text, partitions int[])
    RETURNS bigint[] AS 'MODULE_PATHNAME', 'streamwm_dist_newest' LANGUAGE C VOLATILE STRICT;
REVOKE ALL ON FUNCTION streamwm_internal._dist_newest(text, int[]) FROM PUBLIC;

CREATE FUNCTION streamwm_internal._register_stream(stream regclass, partitions int,
    watermark_delay interval, event_time text, partition_key text,
    granularity interval, idle_timeout interval, retention interval,
    max_future_skew interval)
    RETURNS void AS 'MODULE_PATHNAME', 'streamwm_register_stream' LANGUAGE C;

-- create_stream's allowed_lateness, for a stream nothing has processed or queried yet
CREATE FUNCTION streamwm_internal._set_allowed_lateness(stream regclass, allowed_lateness interval)
    RETURNS regclass AS 'MODULE_PATHNAME', 'streamwm_set_allowed_lateness' LANGUAGE C;

CREATE FUNCTION streamwm_internal._unregister_stream(stream regclass, cascade boolean)
    RETURNS void AS 'MODULE_PATHNAME', 'streamwm_unregister_stream' LANGUAGE C STRICT;

CREATE FUNCTION streamwm_internal._register_query(name text, stream regclass, query text,
    query_text text, hop interval, size interval, result_table regclass,
    start_from text, start_offset bigint, closed_until timestamptz, origin timestamptz,
    time_domain text)
    RETURNS void AS 'MODULE_PATHNAME', 'streamwm_register_query' LANGUAGE C STRICT;

CREATE FUNCTION streamwm_internal._unregister_query(name text)
    RETURNS regclass AS 'MODULE_PATHNAME', 'streamwm_unregister_query' LANGUAGE C STRICT;

-- The one stream a query reads (however it is spelled), and the query's
-- text bound: deparsed with every name schema-qualified, so that it means
-- the same whoever's search_path it is later read under.
CREATE FUNCTION streamwm_internal._query_stream(query text)
    RETURNS regclass AS 'MODULE_PATHNAME', 'streamwm_query_stream' LANGUAGE C STRICT;

CREATE FUNCTION streamwm_internal._bind_query(query text)
    RETURNS text AS 'MODULE_PATHNAME', 'streamwm_bind_query' LANGUAGE C STRICT;

/* ---------------------------------------------------------------------
 * Helpers
 *
 * Every function below runs with search_path = pg_catalog, pg_temp, so
 * that no name in it can be resolved to an object another role planted.
 * Where the caller's own names must be resolved (the stream's name and
 * column types, expressions, the query), the caller's search_path is set
 * around exactly that statement, which contains no unqualified name of
 * ours.
 * --------------------------------------------------------------------- */

-- Parses a table name the way regclass input does ('a', 'public.a',
-- '"My Stream"') and returns it quoted, schema-qualified, with unqualified
-- names placed in the first schema of the caller's search_path.
CREATE FUNCTION streamwm_internal._qualified_name(name text, user_path text) RETURNS text
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    parts pg_catalog.text[];
    sch   pg_catalog.text;
BEGIN
    BEGIN
        parts := pg_catalog.parse_ident(name);
    EXCEPTION WHEN invalid_parameter_value THEN
        RAISE EXCEPTION 'invalid table name "%"', name
            USING ERRCODE = 'invalid_name',
                  HINT = 'Quote names that need it, as in ''"My Stream"''.';
    END;
    IF pg_catalog.array_length(parts, 1) = 1 THEN
        PERFORM pg_catalog.set_config('search_path', user_path, true);
        sch := pg_catalog.current_schema();
        PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
        IF sch IS NULL THEN
            RAISE EXCEPTION 'no schema has been selected to create "%" in', name
                USING ERRCODE = 'invalid_schema_name';
        END IF;
        RETURN format('%I.%I', sch, parts[1]);
    ELSIF array_length(parts, 1) = 2 THEN
        RETURN format('%I.%I', parts[1], parts[2]);
    END IF;
    RAISE EXCEPTION 'invalid table name "%"', name USING ERRCODE = 'invalid_name';
END $$;

-- An interval as a fixed number of microseconds: streamwm works on the
-- Unix-epoch time line, where a day is 86400 s (months are refused).
CREATE FUNCTION streamwm_internal._check_interval(what text, i interval, allow_zero boolean)
RETURNS interval LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF i IS NULL THEN
        RAISE EXCEPTION '% must not be NULL', what USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF extract(month FROM i) <> 0 OR extract(year FROM i) <> 0 THEN
        RAISE EXCEPTION '% must not contain months or years: %', what, i
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Use days, hours, minutes or seconds.';
    END IF;
    IF i < interval '0' OR (NOT allow_zero AND i = interval '0') THEN
        RAISE EXCEPTION '% must be %: %', what,
            CASE WHEN allow_zero THEN 'zero or positive' ELSE 'positive' END, i
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN make_interval(secs => extract(epoch FROM i));
END $$;

CREATE FUNCTION streamwm_internal._stream_of(stream regclass) RETURNS streamwm.stream_def
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    s streamwm.stream_def;
BEGIN
    SELECT * INTO s FROM streamwm.stream_def d WHERE d.stream = _stream_of.stream;
    IF NOT FOUND THEN
        RAISE EXCEPTION '"%" is not a stream', stream
            USING ERRCODE = 'wrong_object_type',
                  HINT = 'Create it with streamwm.create_stream().';
    END IF;
    RETURN s;
END $$;

/* ---------------------------------------------------------------------
 * Streams
 * --------------------------------------------------------------------- */

CREATE FUNCTION streamwm.create_stream(
    name                  text,
    columns               text,
    partitions            int      DEFAULT 1,
    watermark_delay       interval DEFAULT '0',
    event_time            text     DEFAULT NULL,
    partition_key         text     DEFAULT NULL,
    watermark_granularity interval DEFAULT '1 second',
    idle_timeout          interval DEFAULT '5 seconds',
    retention             interval DEFAULT '1 day',
    max_future_skew       interval DEFAULT '1 day',
    allowed_lateness      interval DEFAULT '0',
    distributed           boolean  DEFAULT false)
RETURNS regclass
AS 'MODULE_PATHNAME', 'streamwm_api_call' LANGUAGE C;

-- its implementation: streamwm.create_stream runs it through src/api.c, which keeps
-- streamwm's internal frames out of the CONTEXT of its errors
CREATE FUNCTION streamwm_internal.create_stream(
    name                  text,
    columns               text,
    partitions            int,
    watermark_delay       interval,
    event_time            text,
    partition_key         text,
    watermark_granularity interval,
    idle_timeout          interval,
    retention             interval,
    max_future_skew       interval,
    allowed_lateness      interval,
    distributed           boolean)
RETURNS regclass
LANGUAGE sql AS $$
SELECT streamwm_internal._set_allowed_lateness(
           streamwm_internal._create_stream($1, $2, $3, $4, $5, $6, $7, $8, $9, $10,
                                   pg_catalog.current_setting('search_path'), coalesce($12, false)),
           $11)
$$;

CREATE FUNCTION streamwm_internal._create_stream(
    name                  text,
    columns               text,
    partitions            int,
    watermark_delay       interval,
    event_time            text,
    partition_key         text,
    watermark_granularity interval,
    idle_timeout          interval,
    retention             interval,
    max_future_skew       interval,
    user_path             text,
    distributed           boolean)
RETURNS regclass
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    qname   text;
    seqname text;
    when_clause text;
    rel     regclass;
    col     record;
    i       int;
    ddl     text;
    log_name  text;
    rows_name text;
BEGIN
    -- A distributed stream (DESIGN.md, "Citus"): Citus must be there, and
    -- this must be its coordinator.
    IF distributed THEN
        PERFORM streamwm_internal._check_distributed(partition_key);
    END IF;
    IF name IS NULL OR columns IS NULL THEN
        RAISE EXCEPTION 'stream name and columns must not be NULL'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF partitions IS NULL OR partitions < 1 OR partitions > 4096 THEN
        RAISE EXCEPTION 'partitions must be between 1 and 4096, not %', partitions
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    watermark_delay := streamwm_internal._check_interval('watermark_delay', watermark_delay, true);
    watermark_granularity := streamwm_internal._check_interval('watermark_granularity', watermark_granularity, false);
    idle_timeout := streamwm_internal._check_interval('idle_timeout', idle_timeout, false);
    retention := streamwm_internal._check_interval('retention', retention, false);
    IF max_future_skew IS NOT NULL THEN
        max_future_skew := streamwm_internal._check_interval('max_future_skew', max_future_skew, true);
    END IF;

    qname := streamwm_internal._qualified_name(name, user_path);
    IF to_regclass(qname) IS NOT NULL THEN
        RAISE EXCEPTION 'relation % already exists', qname
            USING ERRCODE = 'duplicate_table';
    END IF;

    -- The column list is the caller's: one list of column definitions,
    -- whose types resolve under the caller's search_path.
    -- A local stream's rows get their system columns from its table access
    -- method (src/stream_am.c), after the executor checked NOT NULL: the
    -- columns are nullable there, and the method never stores a NULL.  A
    -- distributed stream's get them from its insert trigger on the shards.
    ddl := format('CREATE TABLE %s (%s, '
                   'sw_partition int%3$s, '
                   'sw_offset bigint%3$s, '
                   'sw_write_time timestamptz%3$s, '
                   'sw_event_time timestamptz%3$s)',
                   qname, columns, CASE WHEN distributed THEN ' NOT NULL' ELSE '' END);
    PERFORM streamwm_internal._check_create_table(ddl);
    PERFORM pg_catalog.set_config('search_path', user_path, true);
    PERFORM pg_catalog.set_config('default_table_access_method',
                                  CASE WHEN distributed THEN 'heap' ELSE 'streamwm_stream' END, true);
    EXECUTE ddl;
    PERFORM pg_catalog.set_config('default_table_access_method', 'heap', true);
    PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
    rel := qname::regclass;

    FOR col IN SELECT attname FROM pg_attribute
               WHERE attrelid = rel AND attnum > 0 AND NOT attisdropped
                 AND attname LIKE 'sw\_%'
                 AND attname NOT IN ('sw_partition', 'sw_offset', 'sw_write_time',
                                     'sw_event_time')
    LOOP
        RAISE EXCEPTION 'column name "%" is reserved', col.attname
            USING ERRCODE = 'reserved_name',
                  DETAIL = 'Column names starting with "sw_" belong to streamwm.';
    END LOOP;
    -- a stored generated column is computed before the access method fills
    -- the row (src/stream_am.c): over a system column it would see NULL
    FOR col IN SELECT g.attname
                 FROM pg_attrdef ad
                 JOIN pg_attribute g ON g.attrelid = ad.adrelid AND g.attnum = ad.adnum
                 JOIN pg_depend d ON d.classid = 'pg_attrdef'::regclass AND d.objid = ad.oid
                                 AND d.refclassid = 'pg_class'::regclass AND d.refobjid = rel
                 JOIN pg_attribute r ON r.attrelid = rel AND r.attnum = d.refobjsubid
                WHERE ad.adrelid = rel AND g.attgenerated <> '' AND r.attname LIKE 'sw\_%'
    LOOP
        RAISE EXCEPTION 'generated column "%" cannot be computed from a system column', col.attname
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'It is computed before streamwm gives the row its partition, offset and times: it would see them NULL.';
    END LOOP;

    -- Validated here, bound in the sw_ingest trigger below (src/ingest.c),
    -- both under the caller's search_path.
    PERFORM pg_catalog.set_config('search_path', user_path, true);
    when_clause := streamwm_internal._ingest_when(rel, event_time, partition_key);
    PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);

    seqname := streamwm_internal._offset_sequence_name(rel);
    -- a local stream's offsets are handed out 64 to a nextval (src/commit_order.c)
    EXECUTE format('CREATE SEQUENCE %s AS bigint INCREMENT BY %s OWNED BY %s.sw_offset',
                   seqname, CASE WHEN distributed THEN 1 ELSE 64 END, rel);

    IF distributed THEN
        EXECUTE format('ALTER TABLE %s ADD PRIMARY KEY (sw_partition, sw_offset)', rel);
        -- the shards' rows are read by the primary key; only the general
        -- plan's window reads and the views filter by event time
        EXECUTE format('CREATE INDEX ON %s USING brin (sw_event_time) '
                       'WITH (pages_per_range = 32, autosummarize = off)', rel);
    ELSE
        -- No btree every row must enter (half the time of a COPY): steps
        -- read a partition's offsets in bounded ranges, and windows by event
        -- time, both of which follow the order rows are written in, so one
        -- BRIN index serves both, the partition first so that a partition's
        -- reads skip the block ranges that hold only others' rows (DESIGN.md,
        -- "The stream table's indexes and access paths").  Offsets are unique
        -- by construction (one sequence, a user never gives one).  With no
        -- key, the renumbering at commit and retention's DELETE need the
        -- whole row as replica identity, or a publication of the stream's
        -- updates and deletes would make them fail.
        EXECUTE format('ALTER TABLE %s REPLICA IDENTITY FULL', rel);
        EXECUTE format('CREATE INDEX ON %s USING streamwm_brin (sw_partition, sw_offset, sw_event_time) '
                       'WITH (pages_per_range = 32, autosummarize = off)', rel);
    END IF;
    IF distributed THEN
        -- its commit log, distributed with it: the shards' commits write it
        -- where each partition lives (src/commit_order.c)
        -- (_distribute creates it, owned by streamwm's catalog: commits
        -- and steps write it with the catalog's rights)
        log_name := streamwm_internal._sibling_table(rel, '_sw_log');
        ddl := format(E'CREATE TRIGGER sw_ingest BEFORE INSERT ON %s FOR EACH ROW\nWHEN (\n%s\n)\n'
                      'EXECUTE FUNCTION streamwm_internal._stream_insert(%L, %L)',
                      rel, when_clause, partitions, log_name);
    ELSE
        -- bound here, evaluated by the access method (src/ingest.c): an
        -- UPDATE trigger, so that COPY keeps its multi-row inserts
        ddl := format(E'CREATE TRIGGER sw_ingest BEFORE UPDATE ON %s FOR EACH ROW\nWHEN (\n%s\n)\n'
                      'EXECUTE FUNCTION streamwm_internal._stream_insert(%L)',
                      rel, when_clause, partitions);
    END IF;
    PERFORM pg_catalog.set_config('search_path', user_path, true);
    EXECUTE ddl;
    PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
    EXECUTE format('CREATE TRIGGER sw_no_update BEFORE UPDATE ON %s FOR EACH STATEMENT '
                   'EXECUTE FUNCTION streamwm_internal._stream_no_update()', rel);
    IF NOT distributed THEN
        EXECUTE format('CREATE TRIGGER sw_access_method BEFORE INSERT ON %s FOR EACH STATEMENT '
                       'EXECUTE FUNCTION streamwm_internal._stream_check_method()', rel);
    END IF;
    IF distributed THEN
        -- The coordinator's copy of the rows steps read (src/citus.c): the
        -- window statements read it as they read a local stream.
        -- routed by partition, chosen on the coordinator before routing; the
        -- default names the stream by text: Citus creates the table on the
        -- other nodes with it, before the name means anything there
        EXECUTE format('ALTER TABLE %s ALTER COLUMN sw_partition SET DEFAULT '
                       'streamwm_internal._pick_partition(%L::pg_catalog.text)', rel, rel::text);
        rows_name := streamwm_internal._sibling_table(rel, '_sw_rows');
        EXECUTE format('CREATE TABLE %s (LIKE %s)', rows_name, rel);
        EXECUTE format('ALTER TABLE %s ADD PRIMARY KEY (sw_partition, sw_offset)', rows_name);
        EXECUTE format('CREATE INDEX ON %s USING brin (sw_event_time) '
                       'WITH (pages_per_range = 32, autosummarize = off)', rows_name);
        PERFORM streamwm_internal._register_stream(rel, partitions, watermark_delay,
                                          nullif(event_time, ''), nullif(partition_key, ''),
                                          watermark_granularity, idle_timeout, retention,
                                          max_future_skew);
        PERFORM streamwm_internal._distribute(rel, rows_name::pg_catalog.regclass);
        RETURN rel;
    END IF;
    EXECUTE format('CREATE TRIGGER sw_truncate_start BEFORE TRUNCATE ON %s FOR EACH STATEMENT '
                   'EXECUTE FUNCTION streamwm_internal._stream_truncate()', rel);
    EXECUTE format('CREATE TRIGGER sw_truncate_check AFTER TRUNCATE ON %s FOR EACH STATEMENT '
                   'EXECUTE FUNCTION streamwm_internal._stream_truncate()', rel);
    EXECUTE format('CREATE TRIGGER sw_purge_start BEFORE DELETE ON %s FOR EACH STATEMENT '
                   'EXECUTE FUNCTION streamwm_internal._stream_purge()', rel);
    EXECUTE format('CREATE TRIGGER sw_purge AFTER DELETE ON %s REFERENCING OLD TABLE AS sw_purged '
                   'FOR EACH STATEMENT EXECUTE FUNCTION streamwm_internal._stream_purge()', rel);

    PERFORM streamwm_internal._register_stream(rel, partitions, watermark_delay,
                                      nullif(event_time, ''), nullif(partition_key, ''),
                                      watermark_granularity, idle_timeout, retention,
                                      max_future_skew);
    RETURN rel;
END $$;

-- Refuses anything but one CREATE TABLE statement (the column list of
-- create_stream is the caller's text).
CREATE FUNCTION streamwm_internal._check_create_table(ddl text) RETURNS void
    AS 'MODULE_PATHNAME', 'streamwm_check_create_table' LANGUAGE C STRICT;

-- A free name for a relation that belongs to a stream, in the stream's
-- schema: <relname><suffix>, the relation name shortened (by whole
-- characters) to fit in 63 bytes, with a counter when that is taken.
CREATE FUNCTION streamwm_internal._sibling_table(rel regclass, sibling text) RETURNS text
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    nsp    oid;
    base   text;
    suffix text;
    name   text;
    n      int := 0;
BEGIN
    SELECT c.relnamespace, c.relname INTO nsp, base FROM pg_class c WHERE c.oid = rel;
    LOOP
        suffix := sibling || CASE WHEN n = 0 THEN '' ELSE n::text END;
        name := base;
        WHILE octet_length(name || suffix) > 63 LOOP
            name := left(name, -1);
        END LOOP;
        name := name || suffix;
        EXIT WHEN NOT EXISTS (SELECT 1 FROM pg_class c
                               WHERE c.relnamespace OPERATOR(pg_catalog.=) nsp
                                 AND c.relname OPERATOR(pg_catalog.=) name);
        n := n + 1;
    END LOOP;
    RETURN format('%I.%I', (SELECT nspname FROM pg_namespace WHERE oid OPERATOR(pg_catalog.=) nsp), name);
END $$;

-- A free name for a stream's offset sequence in the stream's schema:
-- <relname>_sw_offset_seq (as above).
CREATE FUNCTION streamwm_internal._offset_sequence_name(rel regclass) RETURNS text
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
SELECT streamwm_internal._sibling_table(rel, '_sw_offset_seq')
$$;

CREATE FUNCTION streamwm.drop_stream(stream regclass, cascade boolean DEFAULT false)
RETURNS void
AS 'MODULE_PATHNAME', 'streamwm_api_call' LANGUAGE C;

-- its implementation: streamwm.drop_stream runs it through src/api.c, which keeps
-- streamwm's internal frames out of the CONTEXT of its errors
CREATE FUNCTION streamwm_internal.drop_stream(stream regclass, cascade boolean)
RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    rows_rel regclass;
BEGIN
    IF stream IS NULL THEN
        RAISE EXCEPTION 'stream must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    -- the coordinator's copy of a distributed stream's rows
    SELECT d.rows_table INTO rows_rel
      FROM streamwm.stream_def d WHERE d.stream OPERATOR(pg_catalog.=) drop_stream.stream;
    -- Locks the stream's catalog row first, as process() does, then the
    -- table; a distributed stream and its commit log it drops itself.
    PERFORM streamwm_internal._unregister_stream(stream, coalesce(cascade, false));
    IF rows_rel IS NULL THEN
        EXECUTE format('DROP TABLE %s', stream);
    END IF;
    IF rows_rel IS NOT NULL THEN
        EXECUTE format('DROP TABLE IF EXISTS %s', rows_rel);
    END IF;
END $$;

/* ---------------------------------------------------------------------
 * Queries
 * --------------------------------------------------------------------- */

CREATE FUNCTION streamwm.create_query(
    name         text,
    query        text,
    hop          interval,
    size         interval,
    result_table text DEFAULT NULL,
    start_from   text DEFAULT 'latest',
    result_stream regclass DEFAULT NULL,  -- a chain: write the windows into this stream
    origin       timestamptz DEFAULT '1970-01-01 00:00:00+00',  -- windows start at origin + n * hop
    time_domain  text DEFAULT 'event',    -- 'processing': the clock of the step that reads a row
    result_retention interval DEFAULT NULL) -- delete result rows ending before W minus this
RETURNS regclass
AS 'MODULE_PATHNAME', 'streamwm_api_call' LANGUAGE C;

-- its implementation: streamwm.create_query runs it through src/api.c, which keeps
-- streamwm's internal frames out of the CONTEXT of its errors
CREATE FUNCTION streamwm_internal.create_query(
    name         text,
    query        text,
    hop          interval,
    size         interval,
    result_table text,
    start_from   text,
    result_stream regclass,  -- a chain: write the windows into this stream
    origin       timestamptz,  -- windows start at origin + n * hop
    time_domain  text,    -- 'processing': the clock of the step that reads a row
    result_retention interval) -- delete result rows ending before W minus this
RETURNS regclass
LANGUAGE sql AS $$
SELECT streamwm_internal._set_result_retention($1,
         CASE WHEN $3 IS NULL AND $4 IS NULL
              THEN streamwm_internal._create_ordered_query($1, $2, $5, $6,
                                                 pg_catalog.current_setting('search_path'), $7)
              ELSE streamwm_internal._create_query($1, $2, $3, $4, $5, $6,
                                          pg_catalog.current_setting('search_path'), $7, $8, $9) END,
         $10)
$$;

-- create_query's result_retention (SPEC section 11): each step deletes the
-- query's result rows whose window_end (an ordered query's event_time) is
-- older than W - result_retention.  Returns result.
CREATE FUNCTION streamwm_internal._set_result_retention(name text, result regclass, result_retention interval)
    RETURNS regclass AS 'MODULE_PATHNAME', 'streamwm_set_result_retention' LANGUAGE C;

-- A new query's start offset.  'earliest': every retained row.  'latest':
-- the rows that arrive from now on (SPEC sections 3 and 5: a row arrives
-- when its transaction commits), so the start is the highest offset
-- committed so far (_latest_offset, C: read under the stream's commit
-- gate): every committed row is at or below the hi of its commit-log
-- entry.  A transaction still open now, committing later, either took
-- offsets above that or is renumbered above it when it commits, in
-- whatever partition it wrote: _latest_offset leaves that offset in the
-- commit log as a start floor (an entry of a negative partition), which
-- every commit compares its offsets with as with its partition's newest
-- entry (commit_order.c).  Only a role that may add queries to the stream
-- may call it.  (The sequence's last value, used first, also dropped
-- the rows of a transaction open now and committing later with nothing
-- committed meanwhile; the highest committed offset alone, used next,
-- those of one whose offsets lay between its partition's newest entry and
-- the stream's highest.)
CREATE FUNCTION streamwm_internal._latest_offset(stream regclass)
    RETURNS bigint AS 'MODULE_PATHNAME', 'streamwm_latest_offset' LANGUAGE C VOLATILE STRICT;
CREATE FUNCTION streamwm_internal._start_offset(stream regclass, start_from text)
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

-- The result table of a new query that writes into a table (every kind but
-- chains), for the _create_* functions: the table named (default: the
-- query's name, in the first schema of the caller's search_path) if it
-- exists, checked, else made by the caller.  kind: 'window' (create_query),
-- 'session', 'count' or 'ordered'; the columns before the outputs and the
-- key the upsert uses:
--   window, session: window_start, window_end; (window_start, group keys)
--   count:           window_seq, window_start, window_end; (window_seq, group keys)
--   ordered:         seq, event_time; (seq)
-- A NULL group key is a group like any other (SPEC section 5): the key is a
-- primary key when no key column can be NULL, else a UNIQUE NULLS NOT
-- DISTINCT constraint.  A table that exists must have every column and a
-- unique index the upsert can use: valid, on exactly the key columns
-- (INCLUDE columns aside), without predicate or expressions, NULLS NOT
-- DISTINCT when a key can be NULL (alter_query checks the same, src/alter.c).
CREATE FUNCTION streamwm_internal._result_table(kind text, name text, result_table text,
    user_path text, stream regclass, bound text)
RETURNS regclass
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    rel      regclass;
    tname    text;
    cols     record;
    lead     text[];
    leaddefs text;
    coldefs  text := '';
    keys     text[];
    missing  text;
    routing  text;
    nullable_key boolean := false;
BEGIN
    IF kind = 'ordered' THEN
        lead := ARRAY['seq', 'event_time'];
        leaddefs := 'seq bigint NOT NULL, event_time timestamptz NOT NULL';
    ELSIF kind = 'count' THEN
        lead := ARRAY['window_seq', 'window_start', 'window_end'];
        leaddefs := 'window_seq bigint NOT NULL, window_start timestamptz NOT NULL, '
                    'window_end timestamptz NOT NULL';
    ELSIF kind IN ('window', 'session') THEN
        lead := ARRAY['window_start', 'window_end'];
        leaddefs := 'window_start timestamptz NOT NULL, window_end timestamptz NOT NULL';
    ELSE
        RAISE EXCEPTION 'unknown kind of query: %', kind USING ERRCODE = 'invalid_parameter_value';
    END IF;
    keys := lead[1:1];
    FOR cols IN SELECT * FROM streamwm_internal._query_columns(stream, bound, kind = 'ordered') LOOP
        IF kind = 'count' AND cols.colname = 'window_seq' THEN
            RAISE EXCEPTION 'output column name "window_seq" is reserved for the window number'
                USING ERRCODE = 'duplicate_column';
        END IF;
        coldefs := coldefs || format(', %I %s', cols.colname, cols.coltype);
        IF cols.is_key THEN
            keys := keys || cols.colname;
            nullable_key := nullable_key OR cols.nullable;
        END IF;
    END LOOP;

    tname := streamwm_internal._qualified_name(coalesce(result_table,
                 CASE WHEN name ~ '^[a-z_][a-z0-9_$]*$' THEN name ELSE quote_ident(name) END),
                 user_path);
    rel := to_regclass(tname);
    IF rel IS NOT NULL AND EXISTS (SELECT 1 FROM streamwm.stream_def d WHERE d.stream = rel) THEN
        IF kind = 'window' THEN
            RAISE EXCEPTION 'result table % is a stream', rel
                USING ERRCODE = 'wrong_object_type',
                      HINT = 'To write a query''s windows into a stream, give it as result_stream.';
        ELSIF kind = 'session' THEN
            RAISE EXCEPTION 'result table % is a stream', rel
                USING ERRCODE = 'wrong_object_type',
                      DETAIL = 'A session query writes into a table.';
        ELSIF kind = 'count' THEN
            RAISE EXCEPTION 'result table % is a stream', rel
                USING ERRCODE = 'wrong_object_type',
                      HINT = 'A count query writes into a table.';
        END IF;
        RAISE EXCEPTION 'result table % is a stream', rel USING ERRCODE = 'wrong_object_type';
    END IF;
    IF rel IS NULL THEN
        EXECUTE format('CREATE TABLE %s (%s%s, %s (%s))',
                       tname, leaddefs, coldefs,
                       CASE WHEN nullable_key THEN 'UNIQUE NULLS NOT DISTINCT' ELSE 'PRIMARY KEY' END,
                       (SELECT string_agg(quote_ident(k), ', ') FROM unnest(keys) k));
        rel := tname::regclass;
        -- a distributed stream's window query that groups by sw_partition:
        -- its results live with their partition, co-located with the
        -- stream (Citus; the argument is a parameter, which citus.c's
        -- refusal of distributing calls does not look at).  Session and
        -- count queries keep theirs local (citus.c, sw_citus_refuse_result_kind).
        IF kind = 'window' AND EXISTS (SELECT 1 FROM streamwm.stream_def d
                                          WHERE d.stream OPERATOR(pg_catalog.=) _result_table.stream
                                            AND d.rows_table IS NOT NULL) THEN
            routing := streamwm_internal._routing_column(stream, bound);
            IF routing IS NOT NULL THEN
                EXECUTE 'SELECT pg_catalog.create_distributed_table($1, $2, colocate_with => $3)'
                    USING rel, routing, stream::text;
            END IF;
        END IF;
        RETURN rel;
    END IF;

    SELECT string_agg(c, ', ') INTO missing
      FROM unnest(lead || ARRAY(SELECT colname FROM streamwm_internal._query_columns(stream, bound,
                                                                             kind = 'ordered'))) c
     WHERE NOT EXISTS (SELECT 1 FROM pg_attribute a
                        WHERE a.attrelid = rel AND a.attname = c AND a.attnum > 0
                          AND NOT a.attisdropped);
    IF missing IS NOT NULL THEN
        RAISE EXCEPTION 'result table % lacks columns: %', rel, missing
            USING ERRCODE = 'undefined_column';
    END IF;
    IF NOT EXISTS (
        SELECT 1 FROM pg_index i
         WHERE i.indrelid = rel AND i.indisunique AND i.indisvalid AND i.indpred IS NULL
           AND i.indexprs IS NULL AND (i.indnullsnotdistinct OR NOT nullable_key)
           AND i.indnkeyatts = cardinality(keys)
           AND (SELECT array_agg(a.attname::text ORDER BY a.attname)
                  FROM unnest(i.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord)
                  JOIN pg_attribute a ON a.attrelid = rel AND a.attnum = k.attnum
                 WHERE k.ord <= i.indnkeyatts)
               = (SELECT array_agg(k ORDER BY k) FROM unnest(keys) k)) THEN
        IF kind = 'ordered' THEN
            RAISE EXCEPTION 'result table % has no unique index on (seq)', rel
                USING ERRCODE = 'invalid_table_definition';
        END IF;
        RAISE EXCEPTION 'result table % has no unique index on (%)', rel, array_to_string(keys, ', ')
            USING ERRCODE = 'invalid_table_definition',
                  HINT = CASE WHEN nullable_key
                              THEN 'A group key can be NULL: the index must be UNIQUE NULLS NOT DISTINCT.'
                              WHEN kind = 'session' THEN 'Sessions are upserted on their start and the GROUP BY columns.'
                              WHEN kind = 'count' THEN 'Results are upserted on the window number and the GROUP BY columns.'
                              ELSE 'Results are upserted on the window start and the GROUP BY columns.' END;
    END IF;
    RETURN rel;
END $$;

-- An ordered query (SPEC section 11: create_query with hop and size NULL):
-- no aggregate, no GROUP BY; each accepted row once, when W passes its
-- event time, in (sw_event_time, sw_partition, sw_offset) order, into a
-- result table (seq bigint PRIMARY KEY, event_time timestamptz, outputs).
CREATE FUNCTION streamwm_internal._create_ordered_query(
    name          text,
    query         text,
    result_table  text,
    start_from    text,
    user_path     text,
    result_stream regclass)
RETURNS regclass
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    s        streamwm.stream_def;
    rel      regclass;
    sid      regclass;
    bound    text;
BEGIN
    IF name IS NULL OR name = '' OR query IS NULL THEN
        RAISE EXCEPTION 'query name and text must not be NULL or empty'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF result_stream IS NOT NULL THEN
        RAISE EXCEPTION 'a query with hop and size NULL cannot write into a stream'
            USING ERRCODE = 'feature_not_supported';
    END IF;
    start_from := lower(coalesce(start_from, 'latest'));
    IF start_from NOT IN ('latest', 'earliest') THEN
        RAISE EXCEPTION 'start_from must be ''latest'' or ''earliest'', not ''%''', start_from
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM pg_catalog.set_config('search_path', user_path, true);
    sid := streamwm_internal._query_stream(query);
    bound := streamwm_internal._bind_query(query);
    PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
    s := streamwm_internal._stream_of(sid);
    rel := streamwm_internal._result_table('ordered', name, result_table, user_path, s.stream, bound);

    -- stored with hop and size 0; 'earliest' starts at the stream's
    -- retained_from (every row from there on is retained)
    PERFORM streamwm_internal._register_query(name, s.stream, bound, query, interval '0', interval '0', rel,
        start_from, streamwm_internal._start_offset(s.stream, start_from),
        CASE WHEN start_from = 'latest' THEN s.watermark
             ELSE streamwm_internal._earliest_closed_until(s.stream, interval '1 microsecond',
                                                  interval '1 microsecond', 'epoch') END,
        '1970-01-01 00:00:00+00', 'event');
    PERFORM streamwm_internal._check_query(name);
    RETURN rel;
END $$;

CREATE FUNCTION streamwm_internal._create_query(
    name         text,
    query        text,
    hop          interval,
    size         interval,
    result_table text,
    start_from   text,
    user_path    text,
    result_stream regclass,
    origin       timestamptz,
    time_domain  text)
RETURNS regclass
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    s        streamwm.stream_def;
    rs       streamwm.stream_def;
    rel      regclass;
    missing  text;
    start_at bigint;
    sid      regclass;
    bound    text;
BEGIN
    IF name IS NULL OR name = '' OR query IS NULL THEN
        RAISE EXCEPTION 'query name and text must not be NULL or empty'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    hop := streamwm_internal._check_interval('hop', hop, false);
    size := streamwm_internal._check_interval('size', size, false);
    IF (extract(epoch FROM size) * 1000000)::numeric % (extract(epoch FROM hop) * 1000000)::numeric <> 0 THEN
        RAISE EXCEPTION 'size % is not a whole multiple of hop %', size, hop
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    start_from := lower(coalesce(start_from, 'latest'));
    IF start_from NOT IN ('latest', 'earliest') THEN
        RAISE EXCEPTION 'start_from must be ''latest'' or ''earliest'', not ''%''', start_from
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    time_domain := lower(coalesce(time_domain, 'event'));
    IF time_domain NOT IN ('event', 'processing') THEN
        RAISE EXCEPTION 'time_domain must be ''event'' or ''processing'', not ''%''', time_domain
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF time_domain = 'processing' AND result_stream IS NOT NULL THEN
        RAISE EXCEPTION 'a query in processing time cannot write into a stream'
            USING ERRCODE = 'feature_not_supported';
    END IF;

    -- The query is the caller's: understood under the caller's search_path
    -- once, here, and kept bound (every name qualified).
    PERFORM pg_catalog.set_config('search_path', user_path, true);
    sid := streamwm_internal._query_stream(query);
    bound := streamwm_internal._bind_query(query);
    PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
    s := streamwm_internal._stream_of(sid);

    -- the text's outputs first: a text that is not a window query is
    -- reported before anything about where its results go
    PERFORM streamwm_internal._query_columns(s.stream, bound);

    IF result_stream IS NOT NULL THEN
        -- A chain (SPEC section 10): each window's rows go into another
        -- stream, with window_start as their write time (the event time
        -- there), and window_start/window_end columns filled if it has them.
        IF result_table IS NOT NULL THEN
            RAISE EXCEPTION 'cannot give both result_table and result_stream'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        -- a stream with allowed_lateness, a result stream with an event_time
        -- expression: refused by _register_query (src/catalog.c)
        rs := streamwm_internal._stream_of(result_stream);
        SELECT string_agg(quote_ident(c), ', ') INTO missing
          FROM unnest(ARRAY(SELECT colname FROM streamwm_internal._query_columns(s.stream, bound))) c
         WHERE NOT EXISTS (SELECT 1 FROM pg_attribute a
                            WHERE a.attrelid = rs.stream AND a.attname = c AND a.attnum > 0
                              AND NOT a.attisdropped);
        IF missing IS NOT NULL THEN
            RAISE EXCEPTION 'result stream % lacks columns: %', rs.stream, missing
                USING ERRCODE = 'undefined_column';
        END IF;
        rel := rs.stream;
    ELSE
        rel := streamwm_internal._result_table('window', name, result_table, user_path, s.stream, bound);
    END IF;

    start_at := streamwm_internal._start_offset(s.stream, start_from);

    -- processing time: windows of the clock of the steps from now on
    PERFORM streamwm_internal._register_query(name, s.stream, bound, query, hop, size, rel,
        start_from, start_at,
        CASE WHEN time_domain = 'processing' THEN clock_timestamp()
             WHEN start_from = 'latest' THEN s.watermark
             ELSE streamwm_internal._earliest_closed_until(s.stream, hop, size, origin) END,
        coalesce(origin, '1970-01-01 00:00:00+00'), time_domain);
    -- Plan the upsert once now, so that an error shows here and not in the worker.
    PERFORM streamwm_internal._check_query(name);
    RETURN rel;
END $$;

CREATE FUNCTION streamwm_internal._check_query(name text) RETURNS void
    AS 'MODULE_PATHNAME', 'streamwm_check_query' LANGUAGE C STRICT;

-- Session windows (SPEC section 11, src/session.c): per group, a maximal
-- run of accepted events less than gap apart; a session closes when
-- W >= its last event time + gap.  Same catalog row, steps, views and
-- retention as create_query; hop and size are stored as the gap.
CREATE FUNCTION streamwm.create_session_query(
    name         text,
    query        text,
    gap          interval,
    result_table text DEFAULT NULL,
    start_from   text DEFAULT 'latest')
RETURNS regclass
AS 'MODULE_PATHNAME', 'streamwm_api_call' LANGUAGE C;

-- its implementation: streamwm.create_session_query runs it through src/api.c, which keeps
-- streamwm's internal frames out of the CONTEXT of its errors
CREATE FUNCTION streamwm_internal.create_session_query(
    name         text,
    query        text,
    gap          interval,
    result_table text,
    start_from   text)
RETURNS regclass
LANGUAGE sql AS $$
SELECT streamwm_internal._create_session_query($1, $2, $3, $4, $5,
                                      pg_catalog.current_setting('search_path'))
$$;

CREATE FUNCTION streamwm_internal._register_session(name text, gap interval)
    RETURNS void AS 'MODULE_PATHNAME', 'streamwm_register_session' LANGUAGE C STRICT;

CREATE FUNCTION streamwm_internal._create_session_query(
    name         text,
    query        text,
    gap          interval,
    result_table text,
    start_from   text,
    user_path    text)
RETURNS regclass
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    s        streamwm.stream_def;
    rel      regclass;
    start_at bigint;
    sid      regclass;
    bound    text;
BEGIN
    IF name IS NULL OR name = '' OR query IS NULL THEN
        RAISE EXCEPTION 'query name and text must not be NULL or empty'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    gap := streamwm_internal._check_interval('gap', gap, false);
    start_from := lower(coalesce(start_from, 'latest'));
    IF start_from NOT IN ('latest', 'earliest') THEN
        RAISE EXCEPTION 'start_from must be ''latest'' or ''earliest'', not ''%''', start_from
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    -- bound under the caller's search_path once, as create_query does
    PERFORM pg_catalog.set_config('search_path', user_path, true);
    sid := streamwm_internal._query_stream(query);
    bound := streamwm_internal._bind_query(query);
    PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
    s := streamwm_internal._stream_of(sid);

    rel := streamwm_internal._result_table('session', name, result_table, user_path, s.stream, bound);

    start_at := streamwm_internal._start_offset(s.stream, start_from);
    PERFORM streamwm_internal._register_query(name, s.stream, bound, query, gap, gap, rel,
        start_from, start_at,
        CASE WHEN start_from = 'latest' THEN s.watermark ELSE '-infinity' END,
        '1970-01-01 00:00:00+00', 'event');
    -- make it a session query (plan, gap, where its rows start), then plan it
    PERFORM streamwm_internal._register_session(name, gap);
    PERFORM streamwm_internal._check_query(name);
    RETURN rel;
END $$;

-- closed_until of a new 'earliest' query: its first window is the first one
-- all of whose rows retention has kept (SPEC section 8).  Waits for a step
-- that is moving retained_from to commit.
CREATE FUNCTION streamwm_internal._earliest_closed_until(stream regclass, hop interval, size interval,
    origin timestamptz)
    RETURNS timestamptz AS 'MODULE_PATHNAME', 'streamwm_earliest_closed_until' LANGUAGE C STRICT;

/* ---------------------------------------------------------------------
 * Count windows (SPEC section 11, src/count.c)
 * --------------------------------------------------------------------- */

CREATE FUNCTION streamwm.create_count_query(
    name         text,
    query        text,
    size         int,
    slide        int  DEFAULT NULL,     -- NULL: size (tumbling)
    result_table text DEFAULT NULL,     -- default: the query's name
    start_from   text DEFAULT 'latest') -- 'latest' | 'earliest' (all retained rows)
RETURNS regclass
AS 'MODULE_PATHNAME', 'streamwm_api_call' LANGUAGE C;

-- its implementation: streamwm.create_count_query runs it through src/api.c, which keeps
-- streamwm's internal frames out of the CONTEXT of its errors
CREATE FUNCTION streamwm_internal.create_count_query(
    name         text,
    query        text,
    size         int,
    slide        int,     -- NULL: size (tumbling)
    result_table text,     -- default: the query's name
    start_from   text) -- 'latest' | 'earliest' (all retained rows)
RETURNS regclass
LANGUAGE sql AS $$
SELECT streamwm_internal._create_count_query($1, $2, $3, $4, $5, $6,
                                    pg_catalog.current_setting('search_path'))
$$;

CREATE FUNCTION streamwm_internal._set_count_windows(name text, size int, slide int)
    RETURNS void AS 'MODULE_PATHNAME', 'streamwm_set_count_windows' LANGUAGE C STRICT;

CREATE FUNCTION streamwm_internal._check_count_query(name text)
    RETURNS void AS 'MODULE_PATHNAME', 'streamwm_check_count_query' LANGUAGE C STRICT;

CREATE FUNCTION streamwm_internal._create_count_query(
    name         text,
    query        text,
    size         int,
    slide        int,
    result_table text,
    start_from   text,
    user_path    text)
RETURNS regclass
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    s        streamwm.stream_def;
    rel      regclass;
    start_at bigint;
    sid      regclass;
    bound    text;
BEGIN
    IF name IS NULL OR name = '' OR query IS NULL THEN
        RAISE EXCEPTION 'query name and text must not be NULL or empty'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF size IS NULL OR size <= 0 THEN
        RAISE EXCEPTION 'size must be a positive number of events: %', coalesce(size::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    slide := coalesce(slide, size);
    IF slide <= 0 THEN
        RAISE EXCEPTION 'slide must be a positive number of events: %', slide
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    start_from := lower(coalesce(start_from, 'latest'));
    IF start_from NOT IN ('latest', 'earliest') THEN
        RAISE EXCEPTION 'start_from must be ''latest'' or ''earliest'', not ''%''', start_from
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    -- The query is the caller's: understood under the caller's search_path
    -- once, here, and kept bound (every name qualified).
    PERFORM pg_catalog.set_config('search_path', user_path, true);
    sid := streamwm_internal._query_stream(query);
    bound := streamwm_internal._bind_query(query);
    PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
    s := streamwm_internal._stream_of(sid);

    rel := streamwm_internal._result_table('count', name, result_table, user_path, s.stream, bound);

    start_at := streamwm_internal._start_offset(s.stream, start_from);

    -- Recorded as a query is (ownership, name), then made a count query.
    -- 'earliest' numbers the events from retained_from on, all retained.
    PERFORM streamwm_internal._register_query(name, s.stream, bound, query,
        interval '1 microsecond', interval '1 microsecond', rel, start_from, start_at,
        CASE WHEN start_from = 'latest' THEN s.watermark
             ELSE streamwm_internal._earliest_closed_until(s.stream, interval '1 microsecond',
                                                  interval '1 microsecond', 'epoch') END,
        '1970-01-01 00:00:00+00', 'event');
    PERFORM streamwm_internal._set_count_windows(name, size, slide);

    -- Its state table is made and its statement planned now, as its owner.
    PERFORM streamwm_internal._check_count_query(name);
    RETURN rel;
END $$;

-- A paused query closes no window and keeps its position; retention keeps
-- the rows its open windows need, so resume_query() catches up.
CREATE FUNCTION streamwm.pause_query(name text) RETURNS void
    AS 'MODULE_PATHNAME', 'streamwm_pause_query' LANGUAGE C STRICT;
CREATE FUNCTION streamwm.resume_query(name text) RETURNS void
    AS 'MODULE_PATHNAME', 'streamwm_resume_query' LANGUAGE C STRICT;

CREATE FUNCTION streamwm.drop_query(name text, drop_result boolean DEFAULT false)
RETURNS void
AS 'MODULE_PATHNAME', 'streamwm_api_call' LANGUAGE C;

-- its implementation: streamwm.drop_query runs it through src/api.c, which keeps
-- streamwm's internal frames out of the CONTEXT of its errors
CREATE FUNCTION streamwm_internal.drop_query(name text, drop_result boolean)
RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    rel regclass;
BEGIN
    IF name IS NULL THEN
        RAISE EXCEPTION 'query name must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    -- Locks the stream's catalog row first, as process() does.  Returns the
    -- result table if it still exists and belongs to the query's owner.
    rel := streamwm_internal._unregister_query(name);
    IF coalesce(drop_result, false) AND rel IS NOT NULL THEN
        EXECUTE format('DROP TABLE %s', rel);
    END IF;
END $$;

-- A query's text changed in place (src/alter.c): from the next window that
-- has not closed, keeping closed_until, the start offset, the result table
-- and the counters.  Bound under the caller's search_path as in create_query,
-- then planned as its owner.
CREATE FUNCTION streamwm.alter_query(name text, query text)
RETURNS void
AS 'MODULE_PATHNAME', 'streamwm_api_call' LANGUAGE C;

-- its implementation: streamwm.alter_query runs it through src/api.c, which keeps
-- streamwm's internal frames out of the CONTEXT of its errors
CREATE FUNCTION streamwm_internal.alter_query(name text, query text)
RETURNS void
LANGUAGE sql AS $$
SELECT streamwm_internal._alter_query($1, $2, pg_catalog.current_setting('search_path'));
SELECT streamwm_internal._check_query($1);
$$;

CREATE FUNCTION streamwm_internal._alter_query(name text, query text, user_path text)
    RETURNS void AS 'MODULE_PATHNAME', 'streamwm_alter_query' LANGUAGE C;

-- The closed windows of a query with "from" <= window_start and window_end
-- <= "to", computed again from the stream's rows as its owner (src/alter.c);
-- returns the result rows written.
CREATE FUNCTION streamwm.recompute(name text, "from" timestamptz, "to" timestamptz)
    RETURNS bigint AS 'MODULE_PATHNAME', 'streamwm_recompute' LANGUAGE C;

/* A stream table dropped with plain DROP TABLE takes its catalog rows along. */
CREATE FUNCTION streamwm_internal._on_sql_drop() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    gone oid[];
    pane regclass;
    chain record;
BEGIN
    SELECT array_agg(o.objid) INTO gone
      FROM pg_event_trigger_dropped_objects() o
     WHERE o.classid = 'pg_class'::regclass AND o.objsubid = 0
       AND o.object_type = 'table';
    IF gone IS NULL THEN
        RETURN;
    END IF;
    -- a chain into a dropped stream would fail for good and hold its own
    -- stream's rows back: refused, as drop_stream refuses it
    SELECT q.name, q.result_name INTO chain FROM streamwm.query_def q
     WHERE q.result_stream AND q.result_table::oid = ANY (gone) AND NOT q.stream::oid = ANY (gone)
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'cannot drop stream % because query "%" writes into it', chain.result_name, chain.name
            USING ERRCODE = 'dependent_objects_still_exist',
                  HINT = 'Drop that query first, or use streamwm.drop_stream(..., cascade => true).';
    END IF;
    DELETE FROM streamwm.late_event_log l WHERE l.stream::oid = ANY (gone);
    -- the pane state of the stream's queries goes with them
    FOR pane IN SELECT c.oid::regclass FROM streamwm.query_def q
                  JOIN pg_class c ON c.oid = q.pane_table AND c.relowner = q.owner
                 WHERE q.stream::oid = ANY (gone) AND NOT c.oid = ANY (gone)
    LOOP
        EXECUTE format('DROP TABLE IF EXISTS %s', pane);
    END LOOP;
    DELETE FROM streamwm.query_def q WHERE q.stream::oid = ANY (gone);
    DELETE FROM streamwm.retention_mark m WHERE m.stream::oid = ANY (gone);
    DELETE FROM streamwm.commit_log c WHERE c.stream::oid = ANY (gone);
    DELETE FROM streamwm.partition_state p WHERE p.stream::oid = ANY (gone);
    DELETE FROM streamwm.stream_def d WHERE d.stream::oid = ANY (gone);
END $$;

CREATE EVENT TRIGGER streamwm_sql_drop ON sql_drop
    EXECUTE FUNCTION streamwm_internal._on_sql_drop();

/*
 * DDL that would break a stream is refused (src/guard.c): changes of its
 * sw_* columns and triggers, rules, inheritance, its offset sequence.
 * SECURITY DEFINER so that it sees every stream in stream_def; no SET
 * search_path, because it must find the tables a command names as the
 * command will (its one SQL statement is schema-qualified throughout).
 */
CREATE FUNCTION streamwm_internal._guard_ddl() RETURNS event_trigger
    AS 'MODULE_PATHNAME', 'streamwm_guard_ddl'
    LANGUAGE C SECURITY DEFINER;

CREATE EVENT TRIGGER streamwm_guard_ddl ON ddl_command_start
    EXECUTE FUNCTION streamwm_internal._guard_ddl();

/*
 * Renames of what a query reads: the queries kept by _guard_ddl at the
 * start of the command are deparsed again under the new names
 * (src/query_ddl.c).
 */
CREATE FUNCTION streamwm_internal._guard_ddl_end() RETURNS event_trigger
    AS 'MODULE_PATHNAME', 'streamwm_guard_ddl_end'
    LANGUAGE C;

CREATE EVENT TRIGGER streamwm_guard_ddl_end ON ddl_command_end
    EXECUTE FUNCTION streamwm_internal._guard_ddl_end();

/* ... and what a CASCADE would take along: a stream's own triggers. */
CREATE FUNCTION streamwm_internal._guard_sql_drop() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    o   record;
    rel regclass;
BEGIN
    FOR o IN SELECT * FROM pg_event_trigger_dropped_objects() d
              WHERE d.object_type OPERATOR(pg_catalog.=) 'trigger'
                AND pg_catalog.array_length(d.address_names, 1) OPERATOR(pg_catalog.=) 3
                AND d.address_names[3] OPERATOR(pg_catalog.~~) 'sw\_%' LOOP
        rel := pg_catalog.to_regclass(pg_catalog.quote_ident(o.address_names[1]) || '.' ||
                                      pg_catalog.quote_ident(o.address_names[2]));
        IF rel IS NOT NULL AND EXISTS (SELECT 1 FROM streamwm.stream_def d
                                        WHERE d.stream OPERATOR(pg_catalog.=) rel) THEN
            RAISE EXCEPTION 'cannot drop trigger "%" of stream "%"', o.address_names[3],
                o.address_names[2]
                USING ERRCODE = 'dependent_objects_still_exist',
                      DETAIL = 'streamwm assigns offsets and keeps the stream append-only with this trigger.',
                      HINT = 'Drop the stream with streamwm.drop_stream(), or leave out CASCADE.';
        END IF;
    END LOOP;
END $$;

CREATE EVENT TRIGGER streamwm_guard_sql_drop ON sql_drop
    EXECUTE FUNCTION streamwm_internal._guard_sql_drop();

/* ---------------------------------------------------------------------
 * Views
 *
 * They run as their owner (the catalog's), so each filters for the role
 * that reads it: a stream is visible to members of its owner, to roles that
 * may SELECT from it, and to pg_read_all_stats; a query's text and last
 * error only to members of its owner and to pg_read_all_stats, as
 * pg_stat_statements does.  security_barrier keeps a caller's functions
 * from seeing rows before the filter.
 * --------------------------------------------------------------------- */

-- Per partition of a visible stream: newest offset and arrival, rows not
-- yet processed and the arrival of the oldest of them, and the open writing
-- transaction that holds it (backend, since when).  Reads the stream table
-- as its owner; nothing for a stream the caller may not see.
CREATE FUNCTION streamwm_internal._partition_stats(stream regclass,
    OUT partition int, OUT last_offset bigint, OUT last_arrival timestamptz,
    OUT backlog bigint, OUT oldest_arrival timestamptz,
    OUT held_by int, OUT held_since timestamptz)
    RETURNS SETOF record AS 'MODULE_PATHNAME', 'streamwm_partition_stats'
    LANGUAGE C STABLE STRICT;

-- How far a query trails its stream: rows not yet in a window it closed
-- (processed or not), and the newest and oldest of their event times.
CREATE FUNCTION streamwm_internal._query_pending(stream regclass, closed_until timestamptz,
    OUT pending_events bigint, OUT newest_event timestamptz, OUT oldest_event timestamptz)
    RETURNS record AS 'MODULE_PATHNAME', 'streamwm_query_pending'
    LANGUAGE C STABLE STRICT;

CREATE VIEW streamwm.partitions WITH (security_barrier) AS
SELECT p.stream,
       p.partition,
       coalesce(h.last_offset, p.processed_offset) AS last_offset,
       p.processed_offset,
       p.max_event_time,
       p.max_event_time - d.watermark_delay AS watermark,
       coalesce(h.last_arrival, p.last_arrival) AS last_arrival,
       h.held_by IS NULL AND
       CASE WHEN coalesce(h.last_arrival, p.last_arrival) IS NULL
            THEN d.created < clock_timestamp() - d.idle_timeout
            ELSE coalesce(h.last_arrival, p.last_arrival) < clock_timestamp() - d.idle_timeout
       END AS idle,
       coalesce(h.last_offset, p.processed_offset) > p.processed_offset AS behind,
       h.held_by,
       h.held_since
  FROM streamwm.stream_def d
  JOIN streamwm.partition_state p ON p.stream = d.stream
  LEFT JOIN (SELECT d2.stream, x.*
               FROM streamwm.stream_def d2
               CROSS JOIN LATERAL streamwm_internal._partition_stats(d2.stream) x) h
    ON h.stream = p.stream AND h.partition = p.partition
 WHERE pg_catalog.pg_has_role(d.owner, 'USAGE')
    OR pg_catalog.pg_has_role('pg_read_all_stats', 'USAGE')
    OR coalesce(pg_catalog.has_table_privilege(d.stream::oid, 'SELECT'), false);

CREATE VIEW streamwm.streams WITH (security_barrier) AS
SELECT d.stream,
       d.partitions,
       d.watermark,
       d.events,
       d.late_events,
       d.watermark_delay,
       d.idle_timeout,
       d.event_time,
       d.partition_key,
       d.granularity AS watermark_granularity,
       d.retention,
       d.expired_rows,
       d.created,
       d.owner,
       d.last_processed,
       b.unprocessed_events,
       coalesce(clock_timestamp() - b.oldest_unprocessed, interval '0') AS processing_lag,
       d.max_future_skew,
       d.future_events,
       d.purged_rows,
       d.allowed_lateness,
       d.event_time IS NULL AS heartbeat,
       w.watermark_stalled
  FROM streamwm.stream_def d
  CROSS JOIN LATERAL (
      SELECT coalesce(sum(x.backlog), 0)::bigint AS unprocessed_events,
             min(x.oldest_arrival) AS oldest_unprocessed
        FROM streamwm_internal._partition_stats(d.stream) x) b
  -- Why W cannot move now, in words (NULL: it can): Renoir's "no watermark,
  -- windows buffer forever" made visible.
  CROSS JOIN LATERAL (
      SELECT CASE
        WHEN bool_and(s.max_event_time = '-infinity') THEN 'no event processed yet'
        WHEN bool_or(x.held_by IS NOT NULL) THEN
             (array_agg(format('partition %s waits for an open transaction'
                               ' (backend %s, since %s)', s.partition, x.held_by, x.held_since)
                        ORDER BY x.held_since) FILTER (WHERE x.held_by IS NOT NULL))[1]
        WHEN bool_or(s.max_event_time = '-infinity' AND x.held_by IS NULL AND
                     coalesce(x.last_arrival, s.last_arrival, d.created)
                     >= clock_timestamp() - d.idle_timeout) THEN
             format('partition %s has had no event yet: W waits for it until it is idle'
                    ' (idle_timeout %s)',
                    min(s.partition) FILTER (WHERE s.max_event_time = '-infinity'), d.idle_timeout)
        WHEN d.event_time IS NULL AND bool_or(s.live) THEN NULL
        WHEN bool_and(coalesce(x.last_arrival, s.last_arrival, d.created)
                      < clock_timestamp() - d.idle_timeout) THEN
             format('every partition is idle (no events since %s): W holds until an event arrives, ',
                    max(coalesce(x.last_arrival, s.last_arrival))) ||
             CASE WHEN d.event_time IS NULL
                  THEN 'as the newest rows were written with explicit write times'
                  ELSE 'as the event time comes from the data and nothing is known of later events'
             END
        END AS watermark_stalled
        FROM streamwm.partition_state s
        LEFT JOIN streamwm_internal._partition_stats(d.stream) x ON x.partition = s.partition
       WHERE s.stream = d.stream) w
 WHERE pg_catalog.pg_has_role(d.owner, 'USAGE')
    OR pg_catalog.pg_has_role('pg_read_all_stats', 'USAGE')
    OR coalesce(pg_catalog.has_table_privilege(d.stream::oid, 'SELECT'), false);

CREATE VIEW streamwm.queries WITH (security_barrier) AS
SELECT q.name AS query,
       q.stream,
       CASE WHEN q.gap IS NULL THEN NULLIF(q.hop, interval '0') END AS hop,   -- NULL: an ordered
       CASE WHEN q.gap IS NULL THEN NULLIF(q.size, interval '0') END AS size, -- or session query
       coalesce((SELECT c.oid::regclass FROM pg_catalog.pg_class c WHERE c.oid = q.result_table),
                (SELECT c.oid::regclass FROM pg_catalog.pg_class c
                  WHERE c.oid = to_regclass(q.result_name) AND c.relowner = q.owner)) AS result_table,
       q.closed_until,
       q.windows_emitted,
       CASE WHEN o.full THEN q.last_error END AS last_error,
       q.last_error_time,
       q.rows_upserted,
       q.start_from,
       q.owner,
       CASE WHEN o.full THEN q.query_text END AS definition,
       q.plan,
       l.pending_events,
       g.lag,
       q.windows_refired,
       extract(epoch FROM g.lag)::float8 AS lag_seconds,
       CASE WHEN q.paused THEN 'paused'
            WHEN q.errors > 0 THEN 'failing'
            WHEN l.pending_events > 0 AND s.watermark_stalled IS NOT NULL THEN 'waiting for W'
            ELSE 'running' END AS state,
       q.paused,
       q.gap,
       q.count_size,
       q.count_slide
  FROM streamwm.query_def q
  JOIN streamwm.stream_def d ON d.stream = q.stream
  CROSS JOIN LATERAL (SELECT pg_catalog.pg_has_role(q.owner, 'USAGE')
                          OR pg_catalog.pg_has_role('pg_read_all_stats', 'USAGE') AS full) o
  LEFT JOIN LATERAL streamwm_internal._query_pending(q.stream, q.closed_until) l ON true
  -- how far its results trail the newest event: from the end of the last
  -- window it closed, or, before its first, from the oldest event it waits for
  CROSS JOIN LATERAL (SELECT CASE WHEN l.newest_event IS NULL THEN interval '0'
            ELSE greatest(l.newest_event - CASE WHEN q.closed_until = '-infinity'
                                                THEN l.oldest_event ELSE q.closed_until END,
                          interval '0') END AS lag) g
  LEFT JOIN streamwm.streams s ON s.stream = q.stream
 WHERE o.full
    OR pg_catalog.pg_has_role(d.owner, 'USAGE')
    OR coalesce(pg_catalog.has_table_privilege(d.stream::oid, 'SELECT'), false);

CREATE VIEW streamwm.late_events WITH (security_barrier) AS
SELECT l.stream, l.partition, l.sw_offset, l.sw_event_time, l.watermark
  FROM streamwm.late_event_log l
  JOIN streamwm.stream_def d ON d.stream = l.stream
 WHERE pg_catalog.pg_has_role(d.owner, 'USAGE')
    OR pg_catalog.pg_has_role('pg_read_all_stats', 'USAGE')
    OR coalesce(pg_catalog.has_table_privilege(d.stream::oid, 'SELECT'), false);

GRANT USAGE ON SCHEMA streamwm TO PUBLIC;
GRANT SELECT ON streamwm.streams, streamwm.partitions, streamwm.queries,
               streamwm.late_events TO PUBLIC;

/* ---------------------------------------------------------------------
 * Background worker
 * --------------------------------------------------------------------- */

CREATE FUNCTION streamwm_internal._launch() RETURNS boolean
    AS 'MODULE_PATHNAME', 'streamwm_launch' LANGUAGE C;
-- only CREATE EXTENSION and updates run it: each call has the launcher
-- start a worker, so no role may call it at will
REVOKE ALL ON FUNCTION streamwm_internal._launch() FROM PUBLIC;


/* ---------------------------------------------------------------------
 * Descriptions (COMMENT ON ...)
 *
 * What \dx+ streamwm, \df+, \dv+, \d+ and obj_description() show.  Every
 * object of the extension and every column of its views and catalog
 * tables has one (sql/descriptions.sql fails for one that has none).
 * Functions whose names start with "_" and the partial/merge/combine
 * aggregates are internal: called by streamwm itself, never by users.
 * --------------------------------------------------------------------- */

COMMENT ON SCHEMA streamwm IS
    'streamwm: event-time streams, watermarks and window queries with exactly-once results';
COMMENT ON SCHEMA streamwm_internal IS
    'internal: streamwm''s trigger functions, helpers and pane-plan aggregates, not for direct use';

-- public API
COMMENT ON FUNCTION streamwm.create_stream(text, text, int, interval, text, text, interval, interval,
                                           interval, interval, interval, boolean) IS
    'create a stream table named name with the given columns plus sw_partition, sw_offset, sw_write_time and sw_event_time, split into partitions; the other arguments set its watermark (watermark_delay, idle_timeout, watermark_granularity, max_future_skew, allowed_lateness), its event_time expression (NULL: write time), partition_key and retention; distributed (on a Citus coordinator) distributes it by partition over the nodes; returns the table';
COMMENT ON FUNCTION streamwm.drop_stream(regclass, boolean) IS
    'drop a stream table and everything streamwm keeps about it; refused while a query reads it or writes into it, unless cascade, which drops those queries too (their result tables are kept)';
COMMENT ON FUNCTION streamwm.ingest(regclass, jsonb, int, timestamptz) IS
    'insert rows (a JSON object, or an array of objects keyed by column name) into a stream, into partition if given and with write_time as sw_write_time if given; returns the number of rows stored';
COMMENT ON FUNCTION streamwm.ingest_lines(regclass, text, int, timestamptz) IS
    'insert rows given as one JSON object per line (JSONEachRow) into a stream, into partition if given and with write_time as sw_write_time if given; returns the number of rows stored';
COMMENT ON FUNCTION streamwm.process(regclass, timestamptz) IS
    'run one processing step synchronously, as a worker tick does: read the committed rows of stream (NULL: every stream the caller manages), advance the watermarks, close and upsert windows, apply retention; now is the clock for idle detection (NULL: clock_timestamp())';
COMMENT ON FUNCTION streamwm.create_query(text, text, interval, interval, text, text, regclass,
                                          timestamptz, text, interval) IS
    'create a window query: query (SELECT ... FROM a stream ...) over windows [origin + n*hop, +size), upserted into result_table (default: the name) or written into result_stream, from start_from (''latest''|''earliest''), in time_domain (''event''|''processing''), with result rows older than W - result_retention deleted; hop and size NULL: ordered output; returns the result table';
COMMENT ON FUNCTION streamwm.create_session_query(text, text, interval, text, text) IS
    'create a session window query: per GROUP BY group, a session is a run of events less than gap apart, closed when W >= last event + gap and upserted into result_table (default: the name); start_from ''latest''|''earliest''; returns the result table';
COMMENT ON FUNCTION streamwm.create_count_query(text, text, int, int, text, text) IS
    'create a count window query: per GROUP BY group, windows of size events every slide events (NULL: size), in event-time order, emitted once all their events are below W, upserted into result_table (default: the name); start_from ''latest''|''earliest''; returns the result table';
COMMENT ON FUNCTION streamwm.alter_query(text, text) IS
    'replace the text of query name with query, from its next window that has not closed, keeping its position, result table and counters (not for ordered, session or count queries)';
COMMENT ON FUNCTION streamwm.recompute(text, timestamptz, timestamptz) IS
    'recompute from the retained stream rows and upsert again the closed windows of query name with from <= window_start and window_end <= to; refused for a range retention has removed; returns the result rows written';
COMMENT ON FUNCTION streamwm.pause_query(text) IS
    'pause a query: it closes no window until resumed, keeps its position, and retention keeps the rows its open windows need';
COMMENT ON FUNCTION streamwm.resume_query(text) IS
    'resume a paused query; its next steps catch up on every window that closed meanwhile';
COMMENT ON FUNCTION streamwm.drop_query(text, boolean) IS
    'drop a query; drop_result also drops its result table (only if it belongs to the query''s owner)';
COMMENT ON FUNCTION streamwm.window_start(timestamptz, interval) IS
    'start of the epoch-aligned window of width hop that contains ts (the pane a row belongs to)';
COMMENT ON FUNCTION streamwm.window_start(timestamptz, interval, timestamptz) IS
    'start of the window of width hop aligned at origin that contains ts, as date_bin(hop, ts, origin)';
COMMENT ON FUNCTION streamwm_internal.pane_windows(timestamptz, timestamptz, timestamptz, interval, interval) IS
    'internal: the pane plan''s pairing of a pane with the windows a step closes (starts of the windows of width size every hop that contain the pane starting at pane and start in (lo, hi]), not for direct use';

-- internal functions and aggregates
COMMENT ON FUNCTION streamwm_internal._alter_query(text, text, text) IS
    'internal: alter_query''s rewrite of the catalog row, not for direct use';
COMMENT ON FUNCTION streamwm_internal._bind_query(text) IS
    'internal: a query''s text deparsed with every name schema-qualified, not for direct use';
COMMENT ON FUNCTION streamwm_internal._check_count_query(text) IS
    'internal: creates a count query''s state table and plans its statement, not for direct use';
COMMENT ON FUNCTION streamwm_internal._check_create_table(text) IS
    'internal: refuses anything but one CREATE TABLE statement (create_stream''s columns), not for direct use';
COMMENT ON FUNCTION streamwm_internal._check_interval(text, interval, boolean) IS
    'internal: checks an interval argument (not NULL, no months, positive), not for direct use';
COMMENT ON FUNCTION streamwm_internal._check_query(text) IS
    'internal: plans a new or altered query''s statement as its owner, not for direct use';
COMMENT ON FUNCTION streamwm_internal._combine_ffunc(internal, bytea, oid, anyelement) IS
    'internal: final function of the combine aggregate (pane plan), not for direct use';
COMMENT ON FUNCTION streamwm_internal._combine_sfunc(internal, bytea, oid) IS
    'internal: transition function of the merge aggregate (pane plan), not for direct use';
COMMENT ON FUNCTION streamwm_internal._combine_sfunc(internal, bytea, oid, anyelement) IS
    'internal: transition function of the combine aggregate (pane plan), not for direct use';
COMMENT ON FUNCTION streamwm_internal._create_count_query(text, text, int, int, text, text, text) IS
    'internal: body of create_count_query, not for direct use';
COMMENT ON FUNCTION streamwm_internal._create_ordered_query(text, text, text, text, text, regclass) IS
    'internal: body of create_query with hop and size NULL (ordered output), not for direct use';
COMMENT ON FUNCTION streamwm_internal._create_query(text, text, interval, interval, text, text, text, regclass,
                                           timestamptz, text) IS
    'internal: body of create_query for window queries, not for direct use';
COMMENT ON FUNCTION streamwm_internal._create_session_query(text, text, interval, text, text, text) IS
    'internal: body of create_session_query, not for direct use';
COMMENT ON FUNCTION streamwm_internal.create_stream(text, text, int, interval, text, text, interval, interval,
                                                    interval, interval, interval, boolean) IS
    'internal: implementation of streamwm.create_stream, not for direct use';
COMMENT ON FUNCTION streamwm_internal.drop_stream(regclass, boolean) IS
    'internal: implementation of streamwm.drop_stream, not for direct use';
COMMENT ON FUNCTION streamwm_internal.create_query(text, text, interval, interval, text, text, regclass,
                                                   timestamptz, text, interval) IS
    'internal: implementation of streamwm.create_query, not for direct use';
COMMENT ON FUNCTION streamwm_internal.create_session_query(text, text, interval, text, text) IS
    'internal: implementation of streamwm.create_session_query, not for direct use';
COMMENT ON FUNCTION streamwm_internal.create_count_query(text, text, int, int, text, text) IS
    'internal: implementation of streamwm.create_count_query, not for direct use';
COMMENT ON FUNCTION streamwm_internal.drop_query(text, boolean) IS
    'internal: implementation of streamwm.drop_query, not for direct use';
COMMENT ON FUNCTION streamwm_internal.alter_query(text, text) IS
    'internal: implementation of streamwm.alter_query, not for direct use';
COMMENT ON FUNCTION streamwm_internal._create_stream(text, text, int, interval, text, text, interval, interval,
                                            interval, interval, text, boolean) IS
    'internal: body of create_stream, not for direct use';
COMMENT ON FUNCTION streamwm_internal._earliest_closed_until(regclass, interval, interval, timestamptz) IS
    'internal: where a new ''earliest'' query starts (its first window whose rows are all retained), not for direct use';
COMMENT ON FUNCTION streamwm_internal._guard_ddl() IS
    'internal: event trigger function refusing DDL that would break a stream or a query, not for direct use';
COMMENT ON FUNCTION streamwm_internal._guard_ddl_end() IS
    'internal: event trigger function writing renames into the queries that read the renamed objects, not for direct use';
COMMENT ON FUNCTION streamwm_internal._guard_sql_drop() IS
    'internal: event trigger function refusing to drop a stream''s sw_ triggers, not for direct use';
COMMENT ON FUNCTION streamwm_internal._ingest_when(regclass, text, text) IS
    'internal: validates event_time and partition_key and builds the sw_ingest trigger''s WHEN clause, not for direct use';
COMMENT ON FUNCTION streamwm_internal._launch() IS
    'internal: starts this database''s background worker, not for direct use';
COMMENT ON FUNCTION streamwm_internal._offset_sequence_name(regclass) IS
    'internal: a free name for a stream''s offset sequence, not for direct use';
COMMENT ON FUNCTION streamwm_internal._sibling_table(regclass, text) IS
    'internal: a free name for a relation that belongs to a stream (its name and a suffix), not for direct use';
COMMENT ON FUNCTION streamwm_internal._check_distributed(text) IS
    'internal: create_stream''s checks of a distributed stream (Citus coordinator, no partition_key), not for direct use';
COMMENT ON FUNCTION streamwm_internal._distribute(regclass, regclass) IS
    'internal: creates a new stream''s commit log, distributes both with Citus and records them, not for direct use';
COMMENT ON FUNCTION streamwm_internal._pick_partition(text) IS
    'internal: the partition of a row of a distributed stream that gives none (sw_partition''s default), not for direct use';
COMMENT ON FUNCTION streamwm_internal._key_partition(regclass, record) IS
    'internal: the partition a row of a distributed stream gets from its partition_key (computed before Citus routes it), not for direct use';
COMMENT ON FUNCTION streamwm_internal._dist_newest(text, int[]) IS
    'internal: on a node that holds partitions of a distributed stream, the newest offset its commit log has for each of them there, not for direct use';
COMMENT ON FUNCTION streamwm_internal._dist_fence(text, int[]) IS
    'internal: a step''s fence on a node that holds partitions of a distributed stream (its clock, and since when an open writer holds each of them), not for direct use';
COMMENT ON FUNCTION streamwm_internal._on_sql_drop() IS
    'internal: event trigger function removing the catalog rows of dropped stream tables, not for direct use';
COMMENT ON FUNCTION streamwm_internal._partial_sfunc(internal, oid) IS
    'internal: transition function of the partial aggregate (pane plan), not for direct use';
COMMENT ON FUNCTION streamwm_internal._partial_sfunc(internal, oid, VARIADIC "any") IS
    'internal: transition function of the partial aggregate (pane plan), not for direct use';
COMMENT ON FUNCTION streamwm_internal._partition_stats(regclass) IS
    'internal: per-partition figures of a stream for the views (newest offset, backlog, open writers), not for direct use';
COMMENT ON FUNCTION streamwm_internal._qualified_name(text, text) IS
    'internal: a table name quoted and schema-qualified under a search_path, not for direct use';
COMMENT ON FUNCTION streamwm_internal._routing_column(regclass, text) IS
    'internal: the GROUP BY output of a window query that is the stream''s sw_partition, by which a distributed stream''s result table is distributed, not for direct use';
COMMENT ON FUNCTION streamwm_internal._query_columns(regclass, text) IS
    'internal: the output columns and key of a window query, not for direct use';
COMMENT ON FUNCTION streamwm_internal._query_columns(regclass, text, boolean) IS
    'internal: the output columns of an ordered query, not for direct use';
COMMENT ON FUNCTION streamwm_internal._query_pending(regclass, timestamptz) IS
    'internal: rows a query has not yet closed a window over, for streamwm.queries, not for direct use';
COMMENT ON FUNCTION streamwm_internal._query_stream(text) IS
    'internal: the one stream a query reads, not for direct use';
COMMENT ON FUNCTION streamwm_internal._result_table(text, text, text, text, regclass, text) IS
    'internal: the result table of a new query of the given kind (window, session, count, ordered): the one named, checked, or a new one';
COMMENT ON FUNCTION streamwm_internal._register_query(text, regclass, text, text, interval, interval, regclass,
                                             text, bigint, timestamptz, timestamptz, text) IS
    'internal: records a new query in the catalog after checking the caller''s rights, not for direct use';
COMMENT ON FUNCTION streamwm_internal._register_session(text, interval) IS
    'internal: makes a registered query a session query, not for direct use';
COMMENT ON FUNCTION streamwm_internal._register_stream(regclass, int, interval, text, text, interval, interval,
                                              interval, interval) IS
    'internal: records a new stream in the catalog after checking the caller''s rights, not for direct use';
COMMENT ON FUNCTION streamwm_internal._schedule_changed() IS
    'internal: trigger function telling the worker that the streams or their granularity changed, not for direct use';
COMMENT ON FUNCTION streamwm_internal._set_allowed_lateness(regclass, interval) IS
    'internal: create_stream''s allowed_lateness, not for direct use';
COMMENT ON FUNCTION streamwm_internal._set_count_windows(text, int, int) IS
    'internal: makes a registered query a count query, not for direct use';
COMMENT ON FUNCTION streamwm_internal._set_result_retention(text, regclass, interval) IS
    'internal: create_query''s result_retention, not for direct use';
COMMENT ON FUNCTION streamwm_internal._latest_offset(regclass) IS
    'internal: the highest offset committed into the stream, left as its start floor, not for direct use';
COMMENT ON FUNCTION streamwm_internal._start_offset(regclass, text) IS
    'internal: the offset a new query starts reading after, not for direct use';
COMMENT ON FUNCTION streamwm_internal._state_ffunc(internal) IS
    'internal: final function of the partial and merge aggregates (serialized state), not for direct use';
COMMENT ON FUNCTION streamwm_internal._stream_insert() IS
    'internal: the sw_ingest trigger function of stream tables (binds event_time and partition_key; fills the rows of a distributed stream''s shards), not for direct use';
COMMENT ON FUNCTION streamwm_internal._stream_am_handler(internal) IS
    'internal: handler of the streamwm_stream table access method, not for direct use';
COMMENT ON ACCESS METHOD streamwm_stream IS
    'the table access method of local streams: the heap, each row given its partition, offset, write and event time as it is inserted';
COMMENT ON FUNCTION streamwm_internal._stream_check_method() IS
    'internal: BEFORE INSERT trigger function of local stream tables (refuses rows the access method would not fill), not for direct use';
COMMENT ON FUNCTION streamwm_internal._stream_no_update() IS
    'internal: BEFORE UPDATE trigger function of stream tables (append-only), not for direct use';
COMMENT ON FUNCTION streamwm_internal._stream_of(regclass) IS
    'internal: a stream''s catalog row, or an error if it is not a stream, not for direct use';
COMMENT ON FUNCTION streamwm_internal._stream_purge() IS
    'internal: DELETE trigger function of stream tables (counts purged unread rows), not for direct use';
COMMENT ON FUNCTION streamwm_internal._stream_truncate() IS
    'internal: TRUNCATE trigger function of stream tables (refuses RESTART IDENTITY, counts purged rows), not for direct use';
COMMENT ON FUNCTION streamwm_internal._unregister_query(text) IS
    'internal: removes a query from the catalog after checking the caller''s rights, not for direct use';
COMMENT ON FUNCTION streamwm_internal._unregister_stream(regclass, boolean) IS
    'internal: removes a stream from the catalog after checking the caller''s rights, not for direct use';
COMMENT ON FUNCTION streamwm_internal._window_sql(text) IS
    'internal: the statement a step runs for a query, for inspection, not for direct use';
COMMENT ON AGGREGATE streamwm_internal.partial(oid) IS
    'internal: partial state of an aggregate over a pane (pane plan), not for direct use';
COMMENT ON AGGREGATE streamwm_internal.partial(oid, VARIADIC "any") IS
    'internal: partial state of an aggregate over a pane (pane plan), not for direct use';
COMMENT ON AGGREGATE streamwm_internal.merge(bytea, oid) IS
    'internal: partial states of an aggregate merged into one (pane plan), not for direct use';
COMMENT ON AGGREGATE streamwm_internal.combine(bytea, oid, anyelement) IS
    'internal: partial states of an aggregate combined and finalized into its result (pane plan), not for direct use';

-- event triggers, the catalog's trigger and row-level security policies
COMMENT ON EVENT TRIGGER streamwm_guard_ddl IS
    'streamwm: refuses DDL that would break a stream (its sw_ columns, triggers, sequence) or a query (columns and tables it uses)';
COMMENT ON EVENT TRIGGER streamwm_guard_ddl_end IS
    'streamwm: writes renames of streams, tables, columns and schemas into the queries that read them';
COMMENT ON EVENT TRIGGER streamwm_guard_sql_drop IS
    'streamwm: refuses DROP ... CASCADE that would take a stream''s sw_ triggers along';
COMMENT ON EVENT TRIGGER streamwm_sql_drop IS
    'streamwm: a stream table dropped with DROP TABLE takes its catalog rows and its queries along';
COMMENT ON TRIGGER schedule_changed ON streamwm.stream_def IS
    'tells the background worker to read its schedule again when streams or their granularity change';
COMMENT ON POLICY visible_rows ON streamwm.stream_def IS
    'a stream''s row is visible to members of its owner, to roles that may SELECT from it, and to pg_read_all_stats';
COMMENT ON POLICY visible_rows ON streamwm.query_def IS
    'a query''s row is visible to members of its owner and to pg_read_all_stats';
COMMENT ON POLICY visible_rows ON streamwm.partition_state IS
    'visible when its stream''s row in stream_def is';
COMMENT ON POLICY visible_rows ON streamwm.late_event_log IS
    'visible when its stream''s row in stream_def is';
COMMENT ON POLICY visible_rows ON streamwm.retention_mark IS
    'visible when its stream''s row in stream_def is';
COMMENT ON POLICY visible_rows ON streamwm.commit_log IS
    'visible when its stream''s row in stream_def is';

-- views
COMMENT ON VIEW streamwm.streams IS
    'one row per stream the caller may see: its settings, watermark, counters, backlog, and why W cannot advance';
COMMENT ON COLUMN streamwm.streams.stream IS 'the stream table';
COMMENT ON COLUMN streamwm.streams.partitions IS 'number of partitions (0 .. partitions-1)';
COMMENT ON COLUMN streamwm.streams.watermark IS 'W, the stream watermark: never decreases; -infinity before the first event';
COMMENT ON COLUMN streamwm.streams.events IS 'rows processed so far, late ones included';
COMMENT ON COLUMN streamwm.streams.late_events IS 'rows processed as late (event time below W - allowed_lateness): in no window, listed in streamwm.late_events';
COMMENT ON COLUMN streamwm.streams.watermark_delay IS 'a partition''s watermark is its maximum event time minus this';
COMMENT ON COLUMN streamwm.streams.idle_timeout IS 'a partition with no arrival for this long (and no open writing transaction) is idle and does not hold W back';
COMMENT ON COLUMN streamwm.streams.event_time IS 'the event time expression over the columns; NULL: the write time';
COMMENT ON COLUMN streamwm.streams.partition_key IS 'the expression hashed to pick a partition; NULL: the writer''s sticky partition';
COMMENT ON COLUMN streamwm.streams.watermark_granularity IS 'how often a background worker processes the stream';
COMMENT ON COLUMN streamwm.streams.retention IS 'rows older than W - retention that every query is done with are removed (late rows: retention after they arrived)';
COMMENT ON COLUMN streamwm.streams.expired_rows IS 'rows removed by retention';
COMMENT ON COLUMN streamwm.streams.created IS 'when the stream was created';
COMMENT ON COLUMN streamwm.streams.owner IS 'the owner: its processing runs as this role';
COMMENT ON COLUMN streamwm.streams.last_processed IS 'the clock (now) of the last step that processed the stream; NULL: never processed';
COMMENT ON COLUMN streamwm.streams.unprocessed_events IS 'committed rows that processing has not read yet';
COMMENT ON COLUMN streamwm.streams.processing_lag IS 'how long the oldest unprocessed row has waited since it arrived (0 when there is none)';
COMMENT ON COLUMN streamwm.streams.max_future_skew IS 'an event further ahead of its arrival than this advances its partition''s watermark only to arrival + this; NULL: no limit';
COMMENT ON COLUMN streamwm.streams.future_events IS 'events whose event time was more than max_future_skew ahead of their arrival';
COMMENT ON COLUMN streamwm.streams.purged_rows IS 'unprocessed rows removed by a user''s DELETE or TRUNCATE';
COMMENT ON COLUMN streamwm.streams.allowed_lateness IS 'events down to W - allowed_lateness are still accepted and re-fire the closed windows they fall into';
COMMENT ON COLUMN streamwm.streams.heartbeat IS 'whether idle partitions'' watermarks advance with the wall clock (a write-time stream)';
COMMENT ON COLUMN streamwm.streams.watermark_stalled IS 'why W cannot advance now, in words; NULL when it can';

COMMENT ON VIEW streamwm.partitions IS
    'one row per partition of each stream the caller may see: offsets, watermark, arrival, whether it is idle or held by an open transaction';
COMMENT ON COLUMN streamwm.partitions.stream IS 'the stream table';
COMMENT ON COLUMN streamwm.partitions.partition IS 'the partition number';
COMMENT ON COLUMN streamwm.partitions.last_offset IS 'the newest committed offset in the partition';
COMMENT ON COLUMN streamwm.partitions.processed_offset IS 'processing has read the partition up to this offset';
COMMENT ON COLUMN streamwm.partitions.max_event_time IS 'the maximum event time processed in the partition (capped by max_future_skew); -infinity before its first';
COMMENT ON COLUMN streamwm.partitions.watermark IS 'the partition watermark: max_event_time - watermark_delay';
COMMENT ON COLUMN streamwm.partitions.last_arrival IS 'when the newest committed row arrived (its transaction committed)';
COMMENT ON COLUMN streamwm.partitions.idle IS 'whether the partition is idle now (no arrival for idle_timeout, no open writing transaction), so that it does not hold W back';
COMMENT ON COLUMN streamwm.partitions.behind IS 'whether committed rows of the partition wait to be processed';
COMMENT ON COLUMN streamwm.partitions.held_by IS 'process ID of a backend whose open transaction has written into the partition (W waits for it); NULL: none';
COMMENT ON COLUMN streamwm.partitions.held_since IS 'when that transaction began';

COMMENT ON VIEW streamwm.queries IS
    'one row per query the caller may see: its kind, position, counters, state, lag and last error';
COMMENT ON COLUMN streamwm.queries.query IS 'the query''s name';
COMMENT ON COLUMN streamwm.queries.stream IS 'the stream it reads';
COMMENT ON COLUMN streamwm.queries.hop IS 'windows start every hop; NULL for ordered, session and count queries';
COMMENT ON COLUMN streamwm.queries.size IS 'window length; NULL for ordered, session and count queries';
COMMENT ON COLUMN streamwm.queries.result_table IS 'the table (or, for a chain, the stream) its results go into; NULL if it was dropped';
COMMENT ON COLUMN streamwm.queries.closed_until IS 'every window ending at or before this is closed and its result written';
COMMENT ON COLUMN streamwm.queries.windows_emitted IS 'windows closed and written';
COMMENT ON COLUMN streamwm.queries.last_error IS 'the error of its last step, if that failed (shown to members of its owner and pg_read_all_stats only)';
COMMENT ON COLUMN streamwm.queries.last_error_time IS 'when last_error happened';
COMMENT ON COLUMN streamwm.queries.rows_upserted IS 'result rows written';
COMMENT ON COLUMN streamwm.queries.start_from IS '''latest'' (rows ingested after its creation) or ''earliest'' (every retained row)';
COMMENT ON COLUMN streamwm.queries.owner IS 'the owner: the query runs as this role';
COMMENT ON COLUMN streamwm.queries.definition IS 'the query text as given (shown to members of its owner and pg_read_all_stats only)';
COMMENT ON COLUMN streamwm.queries.plan IS 'how it is computed: pane (partial aggregates per pane), general (each window from its rows), session or count';
COMMENT ON COLUMN streamwm.queries.pending_events IS 'rows of the stream, processed or not, in no window the query has closed yet';
COMMENT ON COLUMN streamwm.queries.lag IS 'how far its results trail the newest event: newest event time - closed_until (before its first window: - the oldest pending event)';
COMMENT ON COLUMN streamwm.queries.windows_refired IS 'closed windows written again because of events accepted through allowed_lateness';
COMMENT ON COLUMN streamwm.queries.lag_seconds IS 'lag in seconds, for monitoring';
COMMENT ON COLUMN streamwm.queries.state IS 'running, paused, failing (its last step failed; retried with backoff) or waiting for W (rows pending while W cannot advance)';
COMMENT ON COLUMN streamwm.queries.paused IS 'whether pause_query() paused it';
COMMENT ON COLUMN streamwm.queries.gap IS 'a session query''s gap; NULL for other queries';
COMMENT ON COLUMN streamwm.queries.count_size IS 'a count query''s window size in events; NULL for other queries';
COMMENT ON COLUMN streamwm.queries.count_slide IS 'a count query''s slide in events; NULL for other queries';

COMMENT ON VIEW streamwm.late_events IS
    'every late event of the streams the caller may see (in no window), kept for at least retention after it arrived';
COMMENT ON COLUMN streamwm.late_events.stream IS 'the stream table';
COMMENT ON COLUMN streamwm.late_events.partition IS 'the row''s sw_partition';
COMMENT ON COLUMN streamwm.late_events.sw_offset IS 'the row''s sw_offset: the row itself stays in the stream table';
COMMENT ON COLUMN streamwm.late_events.sw_event_time IS 'the row''s event time';
COMMENT ON COLUMN streamwm.late_events.watermark IS 'W when the row was processed';

-- catalog tables (written only by streamwm; read the views instead)
COMMENT ON TABLE streamwm.stream_def IS
    'streamwm catalog: one row per stream, its settings, W and counters (written only by streamwm; read streamwm.streams)';
COMMENT ON COLUMN streamwm.stream_def.stream IS 'the stream table';
COMMENT ON COLUMN streamwm.stream_def.partitions IS 'number of partitions';
COMMENT ON COLUMN streamwm.stream_def.watermark_delay IS 'create_stream''s watermark_delay';
COMMENT ON COLUMN streamwm.stream_def.event_time IS 'create_stream''s event_time expression; NULL: the write time';
COMMENT ON COLUMN streamwm.stream_def.partition_key IS 'create_stream''s partition_key expression';
COMMENT ON COLUMN streamwm.stream_def.granularity IS 'create_stream''s watermark_granularity: how often the worker processes the stream';
COMMENT ON COLUMN streamwm.stream_def.idle_timeout IS 'create_stream''s idle_timeout';
COMMENT ON COLUMN streamwm.stream_def.retention IS 'create_stream''s retention';
COMMENT ON COLUMN streamwm.stream_def.created IS 'when the stream was created (partitions with no arrival are idle from then on)';
COMMENT ON COLUMN streamwm.stream_def.owner IS 'the owner of the stream table when it was created';
COMMENT ON COLUMN streamwm.stream_def.watermark IS 'W after the last step';
COMMENT ON COLUMN streamwm.stream_def.events IS 'rows processed, late ones included';
COMMENT ON COLUMN streamwm.stream_def.late_events IS 'rows processed as late';
COMMENT ON COLUMN streamwm.stream_def.expired_rows IS 'rows removed by retention';
COMMENT ON COLUMN streamwm.stream_def.last_processed IS 'the clock of the last step';
COMMENT ON COLUMN streamwm.stream_def.max_future_skew IS 'create_stream''s max_future_skew; NULL: no limit';
COMMENT ON COLUMN streamwm.stream_def.future_events IS 'events further ahead of their arrival than max_future_skew';
COMMENT ON COLUMN streamwm.stream_def.retained_from IS 'rows with an earlier event time may have been removed by retention or a purge (where an ''earliest'' query starts)';
COMMENT ON COLUMN streamwm.stream_def.retention_horizon IS 'rows with an earlier event time may have been removed by retention (recompute() refuses windows starting before it)';
COMMENT ON COLUMN streamwm.stream_def.purged_rows IS 'unprocessed rows removed by a user''s DELETE or TRUNCATE';
COMMENT ON COLUMN streamwm.stream_def.step_started IS 'a worker''s step of this stream began at this time and has not ended';
COMMENT ON COLUMN streamwm.stream_def.step_crashes IS 'workers that ended inside this stream''s step in a row (the worker backs off on it)';
COMMENT ON COLUMN streamwm.stream_def.allowed_lateness IS 'create_stream''s allowed_lateness';
COMMENT ON COLUMN streamwm.stream_def.rows_table IS 'a distributed stream (Citus): the coordinator''s copy of the rows steps read, which its queries are computed from; NULL for a local stream';
COMMENT ON COLUMN streamwm.stream_def.log_table IS 'a distributed stream (Citus): its commit log, a table distributed with it; NULL for a local stream';

COMMENT ON TABLE streamwm.partition_state IS
    'streamwm catalog: what the watermark rule remembers of each partition (written only by streamwm; read streamwm.partitions)';
COMMENT ON COLUMN streamwm.partition_state.stream IS 'the stream table';
COMMENT ON COLUMN streamwm.partition_state.partition IS 'the partition number';
COMMENT ON COLUMN streamwm.partition_state.processed_offset IS 'processing has read the partition up to this offset';
COMMENT ON COLUMN streamwm.partition_state.max_event_time IS 'the maximum event time processed in the partition (capped by max_future_skew)';
COMMENT ON COLUMN streamwm.partition_state.last_arrival IS 'arrival of the newest row processed in the partition';
COMMENT ON COLUMN streamwm.partition_state.live IS 'whether its newest row was written live, not with an explicit write time (the heartbeat applies)';

COMMENT ON TABLE streamwm.query_def IS
    'streamwm catalog: one row per query, its definition, position and window state (written only by streamwm; read streamwm.queries)';
COMMENT ON COLUMN streamwm.query_def.name IS 'the query''s name';
COMMENT ON COLUMN streamwm.query_def.stream IS 'the stream it reads';
COMMENT ON COLUMN streamwm.query_def.query IS 'the query bound: deparsed with every name schema-qualified';
COMMENT ON COLUMN streamwm.query_def.query_text IS 'the query as the user wrote it';
COMMENT ON COLUMN streamwm.query_def.hop IS 'windows start every hop (0: ordered query; the gap for a session query; NULL for a count query)';
COMMENT ON COLUMN streamwm.query_def.size IS 'window length (0: ordered query; the gap for a session query; NULL for a count query)';
COMMENT ON COLUMN streamwm.query_def.result_table IS 'the result table, or the result stream of a chain';
COMMENT ON COLUMN streamwm.query_def.result_name IS 'the result table''s qualified name, to find it again if it is dropped and re-created';
COMMENT ON COLUMN streamwm.query_def.start_from IS 'latest or earliest';
COMMENT ON COLUMN streamwm.query_def.start_offset IS 'the query reads rows with a higher offset';
COMMENT ON COLUMN streamwm.query_def.search_path IS 'the creator''s search_path when the query was created';
COMMENT ON COLUMN streamwm.query_def.owner IS 'the role the query runs as';
COMMENT ON COLUMN streamwm.query_def.created IS 'when the query was created';
COMMENT ON COLUMN streamwm.query_def.closed_until IS 'windows ending at or before this are closed and written';
COMMENT ON COLUMN streamwm.query_def.windows_emitted IS 'windows closed and written';
COMMENT ON COLUMN streamwm.query_def.rows_upserted IS 'result rows written';
COMMENT ON COLUMN streamwm.query_def.last_error IS 'the error of the last step, if it failed';
COMMENT ON COLUMN streamwm.query_def.last_error_time IS 'when last_error happened';
COMMENT ON COLUMN streamwm.query_def.errors IS 'steps failed in a row (0 after a success)';
COMMENT ON COLUMN streamwm.query_def.plan IS 'pane, general, session or count';
COMMENT ON COLUMN streamwm.query_def.reads IS 'every relation the query reads (for the DDL guards)';
COMMENT ON COLUMN streamwm.query_def.pane_table IS 'the query''s state table: partial aggregates per pane and group (pane plan), counts per group (count query)';
COMMENT ON COLUMN streamwm.query_def.pane_stamp IS 'what pane_table''s contents were built with (server version, aggregates); rebuilt from the stream when it does not match';
COMMENT ON COLUMN streamwm.query_def.folded_offsets IS 'per partition, rows up to this offset are folded into pane_table (general plan with allowed_lateness: were read)';
COMMENT ON COLUMN streamwm.query_def.windows_refired IS 'closed windows written again (allowed_lateness)';
COMMENT ON COLUMN streamwm.query_def.start_closed_until IS 'closed_until at creation: windows that ended by then are not the query''s and never re-fire';
COMMENT ON COLUMN streamwm.query_def.paused IS 'paused by pause_query()';
COMMENT ON COLUMN streamwm.query_def.result_stream IS 'whether result_table is a stream (a chain)';
COMMENT ON COLUMN streamwm.query_def.origin IS 'windows start at origin + n * hop';
COMMENT ON COLUMN streamwm.query_def.time_domain IS 'event or processing';
COMMENT ON COLUMN streamwm.query_def.result_retention IS 'result rows ending before W - this are deleted by each step; NULL: kept';
COMMENT ON COLUMN streamwm.query_def.gap IS 'a session query''s gap; NULL for other queries';
COMMENT ON COLUMN streamwm.query_def.session_from IS 'session query: first event time of the earliest session still open, or W; older rows are done with';
COMMENT ON COLUMN streamwm.query_def.session_floor IS 'session query from ''earliest'': sessions starting before this may have lost rows to retention and are not emitted';
COMMENT ON COLUMN streamwm.query_def.count_size IS 'count query: events per window; NULL for other queries';
COMMENT ON COLUMN streamwm.query_def.count_slide IS 'count query: events from one window to the next; NULL for other queries';
COMMENT ON COLUMN streamwm.query_def.count_needs IS 'count query: rows from this event time on are in windows not emitted yet';

COMMENT ON TABLE streamwm.late_event_log IS
    'streamwm catalog: the late events (written only by streamwm; read streamwm.late_events)';
COMMENT ON COLUMN streamwm.late_event_log.stream IS 'the stream table';
COMMENT ON COLUMN streamwm.late_event_log.partition IS 'the row''s sw_partition';
COMMENT ON COLUMN streamwm.late_event_log.sw_offset IS 'the row''s sw_offset';
COMMENT ON COLUMN streamwm.late_event_log.sw_event_time IS 'the row''s event time';
COMMENT ON COLUMN streamwm.late_event_log.watermark IS 'W when the row was processed';
COMMENT ON COLUMN streamwm.late_event_log.arrival IS 'when the row arrived; the row and this entry are kept for retention after it';

COMMENT ON TABLE streamwm.retention_mark IS
    'streamwm catalog: retention''s map of a stream by offset, one row per step (or run of steps) that read accepted rows';
COMMENT ON COLUMN streamwm.retention_mark.stream IS 'the stream table';
COMMENT ON COLUMN streamwm.retention_mark.watermark IS 'W after the step(s); orders the marks';
COMMENT ON COLUMN streamwm.retention_mark.offsets IS 'processed offset of each partition, in partition order';
COMMENT ON COLUMN streamwm.retention_mark.min_event_time IS 'no accepted row retained after the previous mark, up to offsets, has an earlier event time';

COMMENT ON TABLE streamwm.commit_log IS
    'streamwm catalog: one row per committed transaction and partition it wrote into: the order and time rows arrived';
COMMENT ON COLUMN streamwm.commit_log.stream IS 'the stream table';
COMMENT ON COLUMN streamwm.commit_log.partition IS 'the partition; below 0: a start floor left by a query started at ''latest'' (hi: the highest offset committed then; a later commit with offsets at or below it is renumbered above it; lo: the next transaction id then), one partition per backend';
COMMENT ON COLUMN streamwm.commit_log.lo IS 'the transaction''s rows in the partition have lo < sw_offset <= hi';
COMMENT ON COLUMN streamwm.commit_log.hi IS 'the transaction''s rows in the partition have lo < sw_offset <= hi';
COMMENT ON COLUMN streamwm.commit_log.arrival IS 'when the transaction committed: its rows'' arrival';
COMMENT ON COLUMN streamwm.commit_log.held_from IS 'when the transaction began: the partition was not idle from then until arrival';

-- Last: say, when CREATE EXTENSION commits, that no worker will run if the
-- library is not preloaded (a database's worker starts with its first stream).
SELECT streamwm_internal._launch();
