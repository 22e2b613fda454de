-- SPEC section 8: rows older than retention that every query has finished
-- with are removed, so the stream table stays bounded; a failing query holds
-- its rows back instead of losing them.
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
-- streams here are stepped by the tests themselves (streamwm.process(now => ...)): no background worker steps in
DO $$BEGIN EXECUTE format('ALTER DATABASE %I SET streamwm.enabled = off', current_database()); END$$;
CREATE EXTENSION IF NOT EXISTS streamwm;

SELECT streamwm.create_stream('ret', 'v int', retention => '5 minutes');
SELECT streamwm.create_query('ret_q', 'SELECT count(*) AS n, sum(v) AS s FROM ret',
                             hop => '10 s', size => '30 s');
CREATE TABLE gate (ok boolean);
INSERT INTO gate VALUES (true);
SELECT streamwm.create_query('ret_gated', 'SELECT count(*) AS n FROM ret WHERE v / CASE WHEN (SELECT ok FROM gate) THEN 1 ELSE 0 END IS NOT NULL',
                             hop => '1 min', size => '1 min');
CREATE TEMP TABLE src AS SELECT i, to_timestamp(i) AS t FROM generate_series(1, 3600) i;
CREATE TEMP TABLE sizes (step int, phase text, n bigint);

-- an hour of event time in 60 steps of a minute each; the gated query
-- fails for the middle 10 minutes
DO $$
BEGIN
    FOR step IN 0..59 LOOP
        IF step = 25 THEN UPDATE gate SET ok = false; END IF;
        IF step = 35 THEN UPDATE gate SET ok = true; END IF;
        PERFORM streamwm.ingest('ret', jsonb_agg(jsonb_build_object('v', i)), write_time => t)
           FROM src WHERE i > step * 60 AND i <= (step + 1) * 60 GROUP BY t;
        COMMIT;     -- rows arrive when their transaction commits
        PERFORM streamwm.process('ret');
        INSERT INTO sizes SELECT step, CASE WHEN step BETWEEN 25 AND 34 THEN 'failing' ELSE 'healthy' END,
                                 count(*) FROM ret;
    END LOOP;
END $$;

-- bounded: about 5 minutes of rows plus the open windows while healthy;
-- growing while a query fails, and back down once it recovers
SELECT phase, max(n) FILTER (WHERE step >= 10) AS max_rows FROM sizes GROUP BY phase ORDER BY phase;
SELECT n AS rows_at_end FROM sizes WHERE step = 59;
SELECT expired_rows, events, late_events FROM streamwm.streams WHERE stream = 'ret'::regclass;
SELECT min(sw_event_time) >= (SELECT watermark - interval '5 minutes' - interval '1 minute'
                                FROM streamwm.streams WHERE stream = 'ret'::regclass) AS oldest_within_retention
  FROM ret;

-- nothing lost: both result tables equal a recomputation from the source
SELECT count(*) AS ret_q_windows,
       count(*) FILTER (WHERE n IS DISTINCT FROM (
           SELECT count(*) FROM src WHERE t >= window_start AND t < window_end)
           OR s IS DISTINCT FROM (SELECT sum(i) FROM src WHERE t >= window_start AND t < window_end)) AS wrong
  FROM ret_q;
SELECT count(*) AS gated_windows,
       count(*) FILTER (WHERE n IS DISTINCT FROM (
           SELECT count(*) FROM src WHERE t >= window_start AND t < window_end)) AS wrong,
       min(window_start), max(window_end)
  FROM ret_gated;
SELECT query, last_error FROM streamwm.queries WHERE stream = 'ret'::regclass ORDER BY 1;

-- The stream is read by offset on its primary key; only the general plan's
-- window reads and the views filter by event time, through a BRIN index:
-- there is no btree on sw_event_time for every row to enter.
SELECT am.amname, array_agg(a.attname ORDER BY k.ord) AS columns, i.indisprimary
  FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am am ON am.oid = c.relam
 CROSS JOIN LATERAL unnest(i.indkey::int2[]) WITH ORDINALITY k(attnum, ord)
  JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
 WHERE i.indrelid = 'ret'::regclass
 GROUP BY i.indexrelid, am.amname, i.indisprimary ORDER BY 1, 2;
-- retention's map by offset: a few marks, none below what it removed
SELECT count(*) BETWEEN 1 AND 10 AS few_marks,
       min(min_event_time) >= (SELECT watermark - interval '5 minutes' - interval '1 minute'
                                 FROM streamwm.streams WHERE stream = 'ret'::regclass) AS none_below_horizon
  FROM streamwm.retention_mark WHERE stream = 'ret'::regclass;
