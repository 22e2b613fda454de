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

-- A local stream has no key btree (sw_partition, sw_offset) any more: one
-- BRIN index on (sw_partition, sw_offset, sw_event_time) serves steps' reads by offset
-- and windows' by event time, and a COPY no longer spends half its time
-- entering every row into a btree (DESIGN.md, "The stream table's indexes
-- and access paths"), and its offsets are handed out 64 to a nextval
-- (src/commit_order.c).  create_stream makes them so (CREATE OR REPLACE
-- keeps the function's OID, owner, privileges and comment), and each local
-- stream gets that index (one pass over the table) in place of its BRIN
-- index on sw_event_time, and loses its key, unless a foreign key of the
-- user's references it: then it keeps it, and its inserts keep paying for
-- it (the engine reads streams with or without one).  A stream's sequence
-- keeps stepping by 1 (one nextval a row, as before: the offsets code
-- takes any step).
DO $$
DECLARE
    s record;
    key record;
BEGIN
    FOR s IN SELECT d.stream::pg_catalog.regclass AS rel FROM streamwm.stream_def d
              WHERE d.rows_table IS NULL ORDER BY d.stream LOOP
        EXECUTE pg_catalog.format('CREATE INDEX ON %s USING streamwm_brin (sw_partition, sw_offset, sw_event_time) '
                                  'WITH (pages_per_range = 32, autosummarize = off)', s.rel);
        FOR key IN SELECT ic.oid::pg_catalog.regclass AS idx FROM pg_catalog.pg_index i
                     JOIN pg_catalog.pg_class ic ON ic.oid OPERATOR(pg_catalog.=) i.indexrelid
                     JOIN pg_catalog.pg_am a ON a.oid OPERATOR(pg_catalog.=) ic.relam
                     JOIN pg_catalog.pg_attribute t ON t.attrelid OPERATOR(pg_catalog.=) i.indrelid
                                                   AND t.attnum OPERATOR(pg_catalog.=) i.indkey[0]
                    WHERE i.indrelid OPERATOR(pg_catalog.=) s.rel AND a.amname OPERATOR(pg_catalog.=) 'brin'
                      AND i.indnatts OPERATOR(pg_catalog.=) 1 AND t.attname OPERATOR(pg_catalog.=) 'sw_event_time'
                      -- the one create_stream made (a user's own, made otherwise, stays)
                      AND ic.reloptions OPERATOR(pg_catalog.@>) ARRAY['pages_per_range=32', 'autosummarize=off']::pg_catalog.text[]
                      AND i.indpred IS NULL LOOP
            EXECUTE pg_catalog.format('DROP INDEX %s', key.idx);
        END LOOP;
        FOR key IN SELECT c.conname FROM pg_catalog.pg_constraint c
                    WHERE c.conrelid OPERATOR(pg_catalog.=) s.rel AND c.contype OPERATOR(pg_catalog.=) 'u'
                      AND c.conkey OPERATOR(pg_catalog.=) ARRAY[
                          (SELECT attnum FROM pg_catalog.pg_attribute WHERE attrelid OPERATOR(pg_catalog.=) s.rel AND attname OPERATOR(pg_catalog.=) 'sw_partition'),
                          (SELECT attnum FROM pg_catalog.pg_attribute WHERE attrelid OPERATOR(pg_catalog.=) s.rel AND attname OPERATOR(pg_catalog.=) 'sw_offset')]::pg_catalog.int2[]
                      AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_constraint f
                                       WHERE f.contype OPERATOR(pg_catalog.=) 'f'
                                         AND f.conindid OPERATOR(pg_catalog.=) c.conindid) LOOP
            EXECUTE pg_catalog.format('ALTER TABLE %s DROP CONSTRAINT %I', s.rel, key.conname);
        END LOOP;
    END LOOP;
END $$;

CREATE OR REPLACE FUNCTION streamwm_internal._create_stream(
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

-- A distributed stream's query that groups by sw_partition gets a result
-- table distributed by that column, co-located with the stream (Citus).
CREATE FUNCTION streamwm_internal._routing_column(stream regclass, query text)
    RETURNS text AS 'MODULE_PATHNAME', 'streamwm_routing_column' LANGUAGE C STABLE STRICT;
COMMENT ON FUNCTION streamwm_internal._routing_column(regclass, text) IS
    'internal: the GROUP BY output of a window query that is the stream''s sw_partition, by which a distributed stream''s result table is distributed, not for direct use';
CREATE OR REPLACE FUNCTION streamwm_internal._result_table(kind text, name text, result_table text,
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
