-- The same random events, in the same arrival order, into a local stream on
-- the coordinator and a distributed one (4 partitions over both workers),
-- each processed at its own random moments: the result tables, watermarks,
-- late counts and late events are identical.  (Results do not depend on
-- batching, SPEC section 4; and a distributed stream processes its
-- arrivals exactly as a local one.)
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
SET client_min_messages = warning;

SELECT setseed(0.4242);
-- transactions: one partition each, 1 to 3 rows, event times drifting
-- forward by 0.5 s a transaction with up to 8 s of disorder (watermark
-- delay 2 s: some rows are late); after each, each stream is stepped with
-- probability 0.3, independently
CREATE TABLE oracle_tx AS
SELECT j, floor(random() * 4)::int AS part,
       (SELECT jsonb_agg(jsonb_build_object(
                   'k', (random() * 4)::int,
                   'v', (random() * 100)::int,
                   't', '1970-01-01 00:00:00+00'::timestamptz
                        + make_interval(secs => j * 0.5 + random() * 10 - 8 + r * 0)))
          FROM generate_series(1, 1 + (random() * 2.2)::int + j * 0) r) AS rows,
       random() < 0.3 AS step_local, random() < 0.3 AS step_dist
  FROM generate_series(1, 120) j;
SELECT count(*) AS transactions, sum(jsonb_array_length(rows)) AS events,
       count(DISTINCT part) AS partitions FROM oracle_tx;

SELECT streamwm.create_stream('o_local', 'k int, v int, t timestamptz', partitions => 4,
                              watermark_delay => '2 s', event_time => 't', idle_timeout => '1 hour');
SELECT streamwm.create_stream('o_dist', 'k int, v int, t timestamptz', partitions => 4,
                              watermark_delay => '2 s', event_time => 't', idle_timeout => '1 hour',
                              distributed => true);
-- a pane-plan query, a general-plan one, a session query, on each
SELECT streamwm.create_query('ol_pane', 'SELECT k, count(*) AS n, sum(v) AS s FROM o_local GROUP BY k',
                             hop => '2 s', size => '6 s');
SELECT streamwm.create_query('od_pane', 'SELECT k, count(*) AS n, sum(v) AS s FROM o_dist GROUP BY k',
                             hop => '2 s', size => '6 s');
SELECT streamwm.create_query('ol_gen', 'SELECT array_agg(v ORDER BY v, k) AS vs FROM o_local WHERE v % 2 = 0',
                             hop => '5 s', size => '5 s');
SELECT streamwm.create_query('od_gen', 'SELECT array_agg(v ORDER BY v, k) AS vs FROM o_dist WHERE v % 2 = 0',
                             hop => '5 s', size => '5 s');
SELECT streamwm.create_session_query('ol_sess', 'SELECT k, count(*) AS n FROM o_local GROUP BY k', gap => '3 s');
SELECT streamwm.create_session_query('od_sess', 'SELECT k, count(*) AS n FROM o_dist GROUP BY k', gap => '3 s');
-- and a third stream, distributed, whose only query folds on the nodes:
-- its steps copy nothing and read the rows' event times from the shards
-- (fold.sql); stepped at moments of its own (j * 7919 mod 10 < 3, so as
-- not to change the random events above)
SELECT streamwm.create_stream('o_nodes', 'k int, v int, t timestamptz', partitions => 4,
                              watermark_delay => '2 s', event_time => 't', idle_timeout => '1 hour',
                              distributed => true);
SELECT streamwm.create_query('on_pane', 'SELECT k, count(*) AS n, sum(v) AS s FROM o_nodes GROUP BY k',
                             hop => '2 s', size => '6 s');
SELECT query, plan FROM streamwm.queries ORDER BY 1;

-- each transaction commits into the local stream, then into the distributed
-- one: both get the same arrival order
CREATE PROCEDURE oracle_run() LANGUAGE plpgsql AS $$
DECLARE
    tx record;
BEGIN
    FOR tx IN SELECT * FROM oracle_tx ORDER BY j LOOP
        PERFORM streamwm.ingest('o_local', tx.rows, partition => tx.part);
        COMMIT;
        PERFORM streamwm.ingest('o_dist', tx.rows, partition => tx.part);
        COMMIT;
        PERFORM streamwm.ingest('o_nodes', tx.rows, partition => tx.part);
        COMMIT;
        IF (tx.j * 7919) % 10 < 3 THEN
            PERFORM streamwm.process('o_nodes');
            COMMIT;
        END IF;
        IF tx.step_local THEN
            PERFORM streamwm.process('o_local');
            COMMIT;
        END IF;
        IF tx.step_dist THEN
            PERFORM streamwm.process('o_dist');
            COMMIT;
        END IF;
    END LOOP;
    PERFORM streamwm.process('o_local');
    COMMIT;
    PERFORM streamwm.process('o_dist');
    COMMIT;
    PERFORM streamwm.process('o_nodes');
    COMMIT;
END $$;
CALL oracle_run();

-- what the local stream made of them (the reference)
SELECT events, late_events, watermark FROM streamwm.streams WHERE stream = 'o_local'::regclass;
SELECT (SELECT count(*) FROM ol_pane) AS pane_rows, (SELECT count(*) FROM ol_gen) AS gen_rows,
       (SELECT count(*) FROM ol_sess) AS session_rows;
-- the distributed stream made the same
SELECT l.events = d.events AS events, l.late_events = d.late_events AS late_events,
       l.watermark = d.watermark AS watermark
  FROM streamwm.streams l, streamwm.streams d
 WHERE l.stream = 'o_local'::regclass AND d.stream = 'o_dist'::regclass;
SELECT (SELECT count(*) FROM (SELECT * FROM ol_pane EXCEPT ALL SELECT * FROM od_pane) x) +
       (SELECT count(*) FROM (SELECT * FROM od_pane EXCEPT ALL SELECT * FROM ol_pane) x) AS pane_differ,
       (SELECT count(*) FROM (SELECT * FROM ol_gen EXCEPT ALL SELECT * FROM od_gen) x) +
       (SELECT count(*) FROM (SELECT * FROM od_gen EXCEPT ALL SELECT * FROM ol_gen) x) AS gen_differ,
       (SELECT count(*) FROM (SELECT * FROM ol_sess EXCEPT ALL SELECT * FROM od_sess) x) +
       (SELECT count(*) FROM (SELECT * FROM od_sess EXCEPT ALL SELECT * FROM ol_sess) x) AS session_differ;
-- the same events were late, with the same W when they were
SELECT (SELECT count(*) FROM (
          SELECT partition, sw_event_time, watermark FROM streamwm.late_events WHERE stream::text = 'o_local'
          EXCEPT ALL
          SELECT partition, sw_event_time, watermark FROM streamwm.late_events WHERE stream::text = 'o_dist') x) +
       (SELECT count(*) FROM (
          SELECT partition, sw_event_time, watermark FROM streamwm.late_events WHERE stream::text = 'o_dist'
          EXCEPT ALL
          SELECT partition, sw_event_time, watermark FROM streamwm.late_events WHERE stream::text = 'o_local') x)
       AS late_differ;
SELECT l.query, l.closed_until = d.closed_until AS closed_until, l.windows_emitted = d.windows_emitted AS windows,
       d.last_error
  FROM streamwm.queries l JOIN streamwm.queries d ON d.query = 'od' || substr(l.query, 3)
 WHERE l.query LIKE 'ol%' ORDER BY 1;
-- the stream whose query folds on the nodes made the same too, with no copy
SELECT l.events = d.events AS events, l.late_events = d.late_events AS late_events,
       l.watermark = d.watermark AS watermark
  FROM streamwm.streams l, streamwm.streams d
 WHERE l.stream = 'o_local'::regclass AND d.stream = 'o_nodes'::regclass;
SELECT (SELECT count(*) FROM (SELECT * FROM ol_pane EXCEPT ALL SELECT * FROM on_pane) x) +
       (SELECT count(*) FROM (SELECT * FROM on_pane EXCEPT ALL SELECT * FROM ol_pane) x) AS pane_differ,
       (SELECT count(*) FROM (
          SELECT partition, sw_event_time, watermark FROM streamwm.late_events WHERE stream::text = 'o_local'
          EXCEPT ALL
          SELECT partition, sw_event_time, watermark FROM streamwm.late_events WHERE stream::text = 'o_nodes') x) +
       (SELECT count(*) FROM (
          SELECT partition, sw_event_time, watermark FROM streamwm.late_events WHERE stream::text = 'o_nodes'
          EXCEPT ALL
          SELECT partition, sw_event_time, watermark FROM streamwm.late_events WHERE stream::text = 'o_local') x)
       AS late_differ,
       (SELECT count(*) FROM o_nodes_sw_rows) AS copied;
-- and every row was stored once, on the workers
SELECT (SELECT count(*) FROM o_dist) AS dist_rows, count(DISTINCT nodeport) AS on_nodes
  FROM citus_shards WHERE table_name = 'o_dist'::regclass;

SELECT streamwm.drop_stream('o_local', cascade => true);
SELECT streamwm.drop_stream('o_dist', cascade => true);
SELECT streamwm.drop_stream('o_nodes', cascade => true);
DROP TABLE ol_pane, od_pane, ol_gen, od_gen, ol_sess, od_sess, on_pane, oracle_tx;
DROP PROCEDURE oracle_run();
