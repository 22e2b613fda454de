/* streamwm--0.1.sql — catalog, SQL API and views of streamwm 0.1 */

\echo Use "CREATE EXTENSION streamwm" to load this file. \quit

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
    last_processed  timestamptz
);

CREATE TABLE streamwm.partition_state (
    stream           regclass NOT NULL REFERENCES streamwm.stream_def ON DELETE CASCADE,
    partition        int NOT NULL,
    processed_offset bigint NOT NULL DEFAULT 0,
    max_event_time   timestamptz NOT NULL DEFAULT '-infinity',
    last_arrival     timestamptz,
    PRIMARY KEY (stream, partition)
);

CREATE TABLE streamwm.query_def (
    name            text PRIMARY KEY,
    stream          regclass NOT NULL REFERENCES streamwm.stream_def ON DELETE CASCADE,
    query           text NOT NULL,
    hop             interval NOT NULL,
    size            interval NOT NULL,
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
    errors          bigint NOT NULL DEFAULT 0
);
CREATE INDEX ON streamwm.query_def (stream);

CREATE TABLE streamwm.late_event_log (
    stream        regclass NOT NULL REFERENCES streamwm.stream_def ON DELETE CASCADE,
    partition     int NOT NULL,
    sw_offset     bigint NOT NULL,
    sw_event_time timestamptz NOT NULL,
    watermark     timestamptz NOT NULL,
    PRIMARY KEY (stream, partition, sw_offset)
);

/*
 * Any role may create streams and queries; each sees and changes only the
 * catalog rows of the streams and queries it owns (or is a member of the
 * owner of).  The background worker is a superuser process and sees all.
 */
GRANT SELECT, INSERT, UPDATE, DELETE ON streamwm.stream_def, streamwm.partition_state,
    streamwm.query_def, streamwm.late_event_log TO PUBLIC;
ALTER TABLE streamwm.stream_def ENABLE ROW LEVEL SECURITY;
ALTER TABLE streamwm.partition_state ENABLE ROW LEVEL SECURITY;
ALTER TABLE streamwm.query_def ENABLE ROW LEVEL SECURITY;
ALTER TABLE streamwm.late_event_log ENABLE ROW LEVEL SECURITY;
CREATE POLICY owner_rows ON streamwm.stream_def
    USING (pg_catalog.pg_has_role(current_user, owner, 'MEMBER'))
    WITH CHECK (pg_catalog.pg_has_role(current_user, owner, 'MEMBER'));
CREATE POLICY owner_rows ON streamwm.query_def
    USING (pg_catalog.pg_has_role(current_user, owner, 'MEMBER'))
    WITH CHECK (pg_catalog.pg_has_role(current_user, owner, 'MEMBER'));
CREATE POLICY stream_rows ON streamwm.partition_state
    USING (EXISTS (SELECT 1 FROM streamwm.stream_def d WHERE d.stream = partition_state.stream));
CREATE POLICY stream_rows ON streamwm.late_event_log
    USING (EXISTS (SELECT 1 FROM streamwm.stream_def d WHERE d.stream = late_event_log.stream));

SELECT pg_catalog.pg_extension_config_dump('streamwm.stream_def', '');
SELECT pg_catalog.pg_extension_config_dump('streamwm.partition_state', '');
SELECT pg_catalog.pg_extension_config_dump('streamwm.query_def', '');
SELECT pg_catalog.pg_extension_config_dump('streamwm.late_event_log', '');

/* ---------------------------------------------------------------------
 * C entry points
 * --------------------------------------------------------------------- */

-- BEFORE INSERT row trigger of every stream table: partition, offset,
-- write time, arrival and event time.  Arguments: partitions, event_time
-- expression ('' for the write time), partition_key expression ('' for none).
CREATE FUNCTION streamwm._stream_insert() RETURNS trigger
    AS 'MODULE_PATHNAME', 'streamwm_stream_insert' LANGUAGE C;

-- Checks that an expression is valid over a table and returns its type.
CREATE FUNCTION streamwm._check_expression(rel regclass, expr text, want_timestamptz boolean)
    RETURNS regtype AS 'MODULE_PATHNAME', 'streamwm_check_expression' LANGUAGE C STRICT;

CREATE FUNCTION streamwm._query_columns(stream regclass, query text,
    OUT colname text, OUT coltype text, OUT is_key boolean)
    RETURNS SETOF record AS 'MODULE_PATHNAME', 'streamwm_query_columns' LANGUAGE C STRICT;

CREATE FUNCTION streamwm._window_sql(stream regclass, query text, hop interval, size interval)
    RETURNS text AS 'MODULE_PATHNAME', 'streamwm_window_sql' LANGUAGE C STRICT;

CREATE FUNCTION streamwm.window_start(ts timestamptz, hop interval)
    RETURNS timestamptz AS 'MODULE_PATHNAME', 'streamwm_window_start'
    LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION streamwm.window_start(timestamptz, interval) IS
    'start of the epoch-aligned pane of width hop that contains ts';

CREATE FUNCTION streamwm.ingest(stream regclass, rows jsonb,
    partition int DEFAULT NULL, write_time timestamptz DEFAULT NULL)
    RETURNS bigint AS 'MODULE_PATHNAME', 'streamwm_ingest' LANGUAGE C;

CREATE FUNCTION streamwm.ingest_lines(stream regclass, lines text,
    partition int DEFAULT NULL, write_time timestamptz DEFAULT NULL)
    RETURNS bigint AS 'MODULE_PATHNAME', 'streamwm_ingest_lines' LANGUAGE C;

CREATE FUNCTION streamwm.process(stream regclass DEFAULT NULL, now timestamptz DEFAULT NULL)
    RETURNS void AS 'MODULE_PATHNAME', 'streamwm_process' LANGUAGE C;

/* ---------------------------------------------------------------------
 * Helpers
 * --------------------------------------------------------------------- */

-- Parses a table name the way regclass input does ('a', 'public.a',
-- '"My Stream"') and returns it quoted, schema-qualified.
CREATE FUNCTION streamwm._qualified_name(name text) RETURNS text
LANGUAGE plpgsql STABLE AS $$
DECLARE
    parts text[];
BEGIN
    BEGIN
        parts := parse_ident(name);
    EXCEPTION WHEN invalid_parameter_value THEN
        RAISE EXCEPTION 'invalid table name "%"', name
            USING ERRCODE = 'invalid_name',
                  HINT = 'Quote names that need it, as in ''"My Stream"''.';
    END;
    IF array_length(parts, 1) = 1 THEN
        IF current_schema() IS NULL THEN
            RAISE EXCEPTION 'no schema has been selected to create "%" in', name
                USING ERRCODE = 'invalid_schema_name';
        END IF;
        RETURN format('%I.%I', current_schema(), parts[1]);
    ELSIF array_length(parts, 1) = 2 THEN
        RETURN format('%I.%I', parts[1], parts[2]);
    END IF;
    RAISE EXCEPTION 'invalid table name "%"', name USING ERRCODE = 'invalid_name';
END $$;

-- An interval as a fixed number of microseconds: streamwm works on the
-- Unix-epoch time line, where a day is 86400 s (months are refused).
CREATE FUNCTION streamwm._check_interval(what text, i interval, allow_zero boolean)
RETURNS interval LANGUAGE plpgsql IMMUTABLE AS $$
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

CREATE FUNCTION streamwm._stream_of(stream regclass) RETURNS streamwm.stream_def
LANGUAGE plpgsql STABLE AS $$
DECLARE
    s streamwm.stream_def;
BEGIN
    SELECT * INTO s FROM streamwm.stream_def d WHERE d.stream = _stream_of.stream;
    IF NOT FOUND THEN
        RAISE EXCEPTION '"%" is not a stream', stream
            USING ERRCODE = 'undefined_table',
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
    retention             interval DEFAULT '1 day')
RETURNS regclass
LANGUAGE plpgsql AS $$
DECLARE
    qname   text;
    seqname text;
    rel     regclass;
    col     record;
    i       int;
BEGIN
    IF name IS NULL OR columns IS NULL THEN
        RAISE EXCEPTION 'stream name and columns must not be NULL'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF partitions IS NULL OR partitions < 1 OR partitions > 4096 THEN
        RAISE EXCEPTION 'partitions must be between 1 and 4096, not %', partitions
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    watermark_delay := streamwm._check_interval('watermark_delay', watermark_delay, true);
    watermark_granularity := streamwm._check_interval('watermark_granularity', watermark_granularity, false);
    idle_timeout := streamwm._check_interval('idle_timeout', idle_timeout, false);
    retention := streamwm._check_interval('retention', retention, false);

    qname := streamwm._qualified_name(name);
    IF to_regclass(qname) IS NOT NULL THEN
        RAISE EXCEPTION 'relation % already exists', qname
            USING ERRCODE = 'duplicate_table';
    END IF;

    EXECUTE format('CREATE TABLE %s (%s, '
                   'sw_partition int NOT NULL, '
                   'sw_offset bigint NOT NULL, '
                   'sw_write_time timestamptz NOT NULL, '
                   'sw_event_time timestamptz NOT NULL, '
                   'sw_arrival timestamptz NOT NULL)', qname, columns);
    rel := qname::regclass;

    FOR col IN SELECT attname FROM pg_attribute
               WHERE attrelid = rel AND attnum > 0 AND NOT attisdropped
                 AND attname LIKE 'sw\_%'
                 AND attname NOT IN ('sw_partition', 'sw_offset', 'sw_write_time',
                                     'sw_event_time', 'sw_arrival')
    LOOP
        RAISE EXCEPTION 'column name "%" is reserved', col.attname
            USING ERRCODE = 'reserved_name',
                  DETAIL = 'Column names starting with "sw_" belong to streamwm.';
    END LOOP;

    IF nullif(event_time, '') IS NOT NULL THEN
        PERFORM streamwm._check_expression(rel, event_time, true);
    END IF;
    IF nullif(partition_key, '') IS NOT NULL THEN
        PERFORM streamwm._check_expression(rel, partition_key, false);
    END IF;

    seqname := format('%I.%I',
                      (SELECT nspname FROM pg_namespace n JOIN pg_class c ON c.relnamespace = n.oid
                        WHERE c.oid = rel),
                      left((SELECT relname FROM pg_class WHERE oid = rel), 40) || '_sw_offset_seq');
    EXECUTE format('CREATE SEQUENCE %s AS bigint OWNED BY %s.sw_offset', seqname, rel);

    EXECUTE format('ALTER TABLE %s ADD PRIMARY KEY (sw_partition, sw_offset)', rel);
    EXECUTE format('CREATE INDEX ON %s (sw_event_time)', rel);
    EXECUTE format('CREATE TRIGGER sw_ingest BEFORE INSERT ON %s FOR EACH ROW '
                   'EXECUTE FUNCTION streamwm._stream_insert(%L, %L, %L)',
                   rel, partitions, coalesce(event_time, ''), coalesce(partition_key, ''));
    EXECUTE format('CREATE TRIGGER sw_no_update BEFORE UPDATE OF sw_partition, sw_offset, '
                   'sw_write_time, sw_event_time, sw_arrival ON %s FOR EACH ROW '
                   'EXECUTE FUNCTION streamwm._stream_no_update()', rel);

    INSERT INTO streamwm.stream_def (stream, partitions, watermark_delay, event_time,
                                     partition_key, granularity, idle_timeout, retention)
    VALUES (rel, partitions, watermark_delay, nullif(event_time, ''),
            nullif(partition_key, ''), watermark_granularity, idle_timeout, retention);
    INSERT INTO streamwm.partition_state (stream, partition)
    SELECT rel, p FROM generate_series(0, partitions - 1) p;
    RETURN rel;
END $$;

CREATE FUNCTION streamwm._stream_no_update() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the system columns of stream % cannot be updated', TG_RELID::regclass
        USING ERRCODE = 'feature_not_supported',
              DETAIL = 'sw_partition, sw_offset, sw_write_time, sw_event_time and sw_arrival are assigned on ingest.';
END $$;

CREATE FUNCTION streamwm.drop_stream(stream regclass, cascade boolean DEFAULT false)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    s streamwm.stream_def;
    q text;
    n int;
BEGIN
    s := streamwm._stream_of(stream);
    -- Same lock order as process(): the catalog row first, then the table.
    PERFORM 1 FROM streamwm.stream_def d WHERE d.stream = s.stream FOR UPDATE;
    SELECT count(*) INTO n FROM streamwm.query_def qd WHERE qd.stream = s.stream;
    IF n > 0 AND NOT coalesce(cascade, false) THEN
        RAISE EXCEPTION 'cannot drop stream % because % quer% read%', s.stream, n,
            CASE WHEN n = 1 THEN 'y' ELSE 'ies' END, CASE WHEN n = 1 THEN 's it' ELSE ' it' END
            USING ERRCODE = 'dependent_objects_still_exist',
                  DETAIL = (SELECT string_agg(format('query %s', qd.name), ', ' ORDER BY qd.name)
                              FROM streamwm.query_def qd WHERE qd.stream = s.stream),
                  HINT = 'Use drop_stream(..., cascade => true) to drop the queries too (their result tables are kept).';
    END IF;
    FOR q IN SELECT qd.name FROM streamwm.query_def qd WHERE qd.stream = s.stream LOOP
        PERFORM streamwm.drop_query(q, false);
    END LOOP;
    DELETE FROM streamwm.stream_def d WHERE d.stream = s.stream;
    EXECUTE format('DROP TABLE %s', s.stream);
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
    start_from   text DEFAULT 'latest')
RETURNS regclass
LANGUAGE plpgsql AS $$
DECLARE
    s        streamwm.stream_def;
    rel      regclass;
    relid    oid;
    tname    text;
    cols     record;
    coldefs  text := '';
    keys     text[] := ARRAY['window_start'];
    missing  text;
    start_at bigint;
    seq      regclass;
    sid      regclass;
    n        int;
BEGIN
    IF name IS NULL OR name = '' OR query IS NULL THEN
        RAISE EXCEPTION 'query name and text must not be NULL or empty'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF EXISTS (SELECT 1 FROM streamwm.query_def qd WHERE qd.name = create_query.name) THEN
        RAISE EXCEPTION 'query "%" already exists', name USING ERRCODE = 'duplicate_object';
    END IF;
    hop := streamwm._check_interval('hop', hop, false);
    size := streamwm._check_interval('size', size, false);
    IF (extract(epoch FROM size) * 1000000)::numeric % (extract(epoch FROM hop) * 1000000)::numeric <> 0 THEN
        RAISE EXCEPTION 'size % is not a whole multiple of hop %', size, hop
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    start_from := lower(coalesce(start_from, 'latest'));
    IF start_from NOT IN ('latest', 'earliest') THEN
        RAISE EXCEPTION 'start_from must be ''latest'' or ''earliest'', not ''%''', start_from
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    -- Which stream does the query read?  _query_columns() finds it among the
    -- FROM items; here we only need the set of streams to try.
    FOR sid IN SELECT d.stream FROM streamwm.stream_def d LOOP
        IF streamwm._reads_stream(query, sid) THEN
            IF s.stream IS NOT NULL THEN
                RAISE EXCEPTION 'query reads more than one stream'
                    USING ERRCODE = 'feature_not_supported';
            END IF;
            s := streamwm._stream_of(sid);
        END IF;
    END LOOP;
    IF s.stream IS NULL THEN
        RAISE EXCEPTION 'query does not read a stream'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'The FROM clause must name a table created with streamwm.create_stream().';
    END IF;

    FOR cols IN SELECT * FROM streamwm._query_columns(s.stream, query) LOOP
        coldefs := coldefs || format(', %I %s', cols.colname, cols.coltype);
        IF cols.is_key THEN
            keys := keys || cols.colname;
        END IF;
    END LOOP;

    tname := streamwm._qualified_name(coalesce(result_table,
                 CASE WHEN name ~ '^[a-z_][a-z0-9_$]*$' THEN name ELSE quote_ident(name) END));
    relid := to_regclass(tname);
    IF relid IS NULL THEN
        EXECUTE format('CREATE TABLE %s (window_start timestamptz NOT NULL, '
                       'window_end timestamptz NOT NULL%s, PRIMARY KEY (%s))',
                       tname, coldefs,
                       (SELECT string_agg(quote_ident(k), ', ') FROM unnest(keys) k));
        rel := tname::regclass;
    ELSE
        rel := relid;
        SELECT string_agg(c, ', ') INTO missing
          FROM unnest(ARRAY['window_start', 'window_end'] ||
                      ARRAY(SELECT colname FROM streamwm._query_columns(s.stream, query))) c
         WHERE NOT EXISTS (SELECT 1 FROM pg_attribute a
                            WHERE a.attrelid = rel AND a.attname = c AND a.attnum > 0
                              AND NOT a.attisdropped);
        IF missing IS NOT NULL THEN
            RAISE EXCEPTION 'result table % lacks columns: %', rel, missing
                USING ERRCODE = 'undefined_column';
        END IF;
        IF NOT EXISTS (
            SELECT 1 FROM pg_index i
             WHERE i.indrelid = rel AND i.indisunique AND i.indpred IS NULL
               AND i.indexprs IS NULL
               AND (SELECT array_agg(a.attname::text ORDER BY a.attname)
                      FROM pg_attribute a
                     WHERE a.attrelid = rel AND a.attnum = ANY (i.indkey::int2[]))
                   = (SELECT array_agg(k ORDER BY k) FROM unnest(keys) k)) THEN
            RAISE EXCEPTION 'result table % has no unique index on (%)', rel,
                array_to_string(keys, ', ')
                USING ERRCODE = 'invalid_table_definition',
                      HINT = 'Results are upserted on the window start and the GROUP BY columns.';
        END IF;
    END IF;

    -- 'latest': only rows that get their offset after this point.
    seq := (SELECT objid FROM pg_depend
             WHERE refclassid = 'pg_class'::regclass AND refobjid = s.stream
               AND classid = 'pg_class'::regclass AND deptype = 'a'
               AND objid IN (SELECT oid FROM pg_class WHERE relkind = 'S')
             LIMIT 1);
    IF start_from = 'latest' THEN
        EXECUTE format('SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM %s', seq)
            INTO start_at;
    ELSE
        start_at := 0;
    END IF;

    INSERT INTO streamwm.query_def (name, stream, query, hop, size, result_table, result_name,
                                    start_from, start_offset, search_path, closed_until)
    VALUES (name, s.stream, query, hop, size, rel, rel::text, start_from, start_at,
            current_setting('search_path'),
            CASE WHEN start_from = 'latest' THEN s.watermark ELSE '-infinity' END);

    -- Plan the upsert once now, so that an error shows here and not in the worker.
    PERFORM streamwm._check_query(name);
    RETURN rel;
END $$;

CREATE FUNCTION streamwm._reads_stream(query text, stream regclass) RETURNS boolean
    AS 'MODULE_PATHNAME', 'streamwm_reads_stream' LANGUAGE C STRICT;

CREATE FUNCTION streamwm._check_query(name text) RETURNS void
    AS 'MODULE_PATHNAME', 'streamwm_check_query' LANGUAGE C STRICT;

CREATE FUNCTION streamwm.drop_query(name text, drop_result boolean DEFAULT false)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    q streamwm.query_def;
    rel regclass;
BEGIN
    SELECT * INTO q FROM streamwm.query_def qd WHERE qd.name = drop_query.name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'query "%" does not exist', name USING ERRCODE = 'undefined_object';
    END IF;
    -- Same lock order as process(): the stream's catalog row first.
    PERFORM 1 FROM streamwm.stream_def d WHERE d.stream = q.stream FOR UPDATE;
    DELETE FROM streamwm.query_def qd WHERE qd.name = q.name;
    IF coalesce(drop_result, false) THEN
        rel := coalesce((SELECT c.oid FROM pg_class c WHERE c.oid = q.result_table),
                        to_regclass(q.result_name));
        IF rel IS NOT NULL THEN
            EXECUTE format('DROP TABLE %s', rel);
        END IF;
    END IF;
END $$;

/* A stream table dropped with plain DROP TABLE takes its catalog rows along. */
CREATE FUNCTION streamwm._on_sql_drop() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    DELETE FROM streamwm.stream_def d
     USING pg_event_trigger_dropped_objects() o
     WHERE o.classid = 'pg_class'::regclass AND o.objsubid = 0
       AND o.object_type = 'table' AND d.stream::oid = o.objid;
END $$;

CREATE EVENT TRIGGER streamwm_sql_drop ON sql_drop
    EXECUTE FUNCTION streamwm._on_sql_drop();

/* ---------------------------------------------------------------------
 * Views
 * --------------------------------------------------------------------- */

-- Newest offset and arrival of a partition, read from the stream table's
-- primary key (an index-only backward scan).
CREATE FUNCTION streamwm._partition_head(stream regclass, part int,
    OUT last_offset bigint, OUT last_arrival timestamptz)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM streamwm.stream_def d WHERE d.stream = _partition_head.stream) THEN
        RETURN;
    END IF;
    EXECUTE format('SELECT sw_offset, sw_arrival FROM ONLY %s WHERE sw_partition = $1 '
                   'ORDER BY sw_offset DESC LIMIT 1', stream)
        INTO last_offset, last_arrival USING part;
END $$;

-- Rows of a partition written but not yet processed, and when the oldest
-- of them arrived.
CREATE FUNCTION streamwm._partition_backlog(stream regclass, part int, processed bigint,
    OUT events bigint, OUT oldest_arrival timestamptz)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM streamwm.stream_def d WHERE d.stream = _partition_backlog.stream) THEN
        RETURN;
    END IF;
    EXECUTE format('SELECT count(*), min(sw_arrival) FROM ONLY %s '
                   'WHERE sw_partition = $1 AND sw_offset > $2', stream)
        INTO events, oldest_arrival USING part, processed;
END $$;

-- How far a query trails its stream: rows not yet in a window it closed
-- (processed or not), and the newest event time minus closed_until.
CREATE FUNCTION streamwm._query_lag(stream regclass, closed_until timestamptz,
    OUT pending_events bigint, OUT lag interval)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    newest timestamptz;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM streamwm.stream_def d WHERE d.stream = _query_lag.stream) THEN
        RETURN;
    END IF;
    EXECUTE format('SELECT count(*), max(sw_event_time) FROM ONLY %s WHERE sw_event_time >= $1', stream)
        INTO pending_events, newest USING closed_until;
    lag := CASE WHEN newest IS NULL THEN interval '0'
                WHEN closed_until = '-infinity' THEN NULL
                ELSE greatest(newest - closed_until, interval '0') END;
END $$;

CREATE VIEW streamwm.partitions AS
SELECT p.stream,
       p.partition,
       coalesce(h.last_offset, p.processed_offset) AS last_offset,
       p.processed_offset,
       p.max_event_time,
       p.max_event_time - d.watermark_delay AS watermark,
       coalesce(h.last_arrival, p.last_arrival) AS last_arrival,
       CASE WHEN coalesce(h.last_arrival, p.last_arrival) IS NULL
            THEN d.created < clock_timestamp() - d.idle_timeout
            ELSE coalesce(h.last_arrival, p.last_arrival) < clock_timestamp() - d.idle_timeout
       END AS idle,
       coalesce(h.last_offset, p.processed_offset) > p.processed_offset AS behind
  FROM streamwm.partition_state p
  JOIN streamwm.stream_def d USING (stream)
  CROSS JOIN LATERAL streamwm._partition_head(p.stream, p.partition) h;

CREATE VIEW streamwm.streams AS
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
       coalesce(clock_timestamp() - b.oldest_unprocessed, interval '0') AS processing_lag
  FROM streamwm.stream_def d
  CROSS JOIN LATERAL (
      SELECT sum(x.events)::bigint AS unprocessed_events, min(x.oldest_arrival) AS oldest_unprocessed
        FROM streamwm.partition_state p,
             LATERAL streamwm._partition_backlog(p.stream, p.partition, p.processed_offset) x
       WHERE p.stream = d.stream) b;

CREATE VIEW streamwm.queries AS
SELECT q.name AS query,
       q.stream,
       q.hop,
       q.size,
       coalesce((SELECT c.oid::regclass FROM pg_catalog.pg_class c WHERE c.oid = q.result_table),
                to_regclass(q.result_name)) AS result_table,
       q.closed_until,
       q.windows_emitted,
       q.last_error,
       q.last_error_time,
       q.rows_upserted,
       q.start_from,
       q.owner,
       q.query AS definition,
       l.pending_events,
       l.lag
  FROM streamwm.query_def q
  CROSS JOIN LATERAL streamwm._query_lag(q.stream, q.closed_until) l;

CREATE VIEW streamwm.late_events AS
SELECT l.stream, l.partition, l.sw_offset, l.sw_event_time, l.watermark
  FROM streamwm.late_event_log l;

GRANT USAGE ON SCHEMA streamwm TO PUBLIC;
GRANT SELECT ON streamwm.streams, streamwm.partitions, streamwm.queries,
               streamwm.late_events TO PUBLIC;

/* ---------------------------------------------------------------------
 * Background worker
 * --------------------------------------------------------------------- */

CREATE FUNCTION streamwm._launch() RETURNS boolean
    AS 'MODULE_PATHNAME', 'streamwm_launch' LANGUAGE C;

-- Start this database's worker when CREATE EXTENSION commits (or say that
-- none will run because the library is not preloaded).
SELECT streamwm._launch();
