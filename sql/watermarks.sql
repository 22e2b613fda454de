-- SPEC section 4: per-partition watermarks, idle partitions, W never
-- decreasing, lateness.  Idle detection is judged on real arrival times;
-- the tests pass process(now => ...) relative to those arrivals, so they do
-- not depend on how fast they run.
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
-- streams here are stepped by the tests themselves (streamwm.process(now => ...)): no background worker steps in
DO $$BEGIN EXECUTE format('ALTER DATABASE %I SET streamwm.enabled = off', current_database()); END$$;
CREATE EXTENSION IF NOT EXISTS streamwm;

CREATE FUNCTION last_arrival(s regclass) RETURNS timestamptz LANGUAGE sql AS
  $$SELECT max(last_arrival) FROM streamwm.partitions WHERE stream = s$$;
CREATE FUNCTION w(s regclass) RETURNS timestamptz LANGUAGE sql AS
  $$SELECT watermark FROM streamwm.streams WHERE stream = s$$;

-- W is the minimum over partitions; an empty partition holds it at -infinity
SELECT streamwm.create_stream('wm2', 'v text', partitions => 2, idle_timeout => '1 hour',
                              watermark_delay => '1 s');
SELECT streamwm.create_query('wm2_q', 'SELECT string_agg(v, '','' ORDER BY v) AS vs FROM wm2',
                             hop => '10 s', size => '10 s');
SELECT streamwm.ingest('wm2', '[{"v":"a"},{"v":"b"}]', partition => 0, write_time => to_timestamp(100));
SELECT streamwm.ingest('wm2', '{"v":"c"}', partition => 0, write_time => to_timestamp(111));
SELECT streamwm.process('wm2', now => last_arrival('wm2'));
SELECT w('wm2');
SELECT partition, max_event_time, watermark FROM streamwm.partitions WHERE stream = 'wm2'::regclass ORDER BY 1;

-- p1 has never received a row: once the stream is older than idle_timeout
-- at the step's clock, p1 is idle and W follows p0 alone
SELECT streamwm.process('wm2', now => last_arrival('wm2') + interval '1 hour' - interval '1 microsecond');
SELECT w('wm2');
SELECT window_start, window_end, vs FROM wm2_q ORDER BY 1;

-- p1 rejoins: its rows older than W are late, and W does not move back
SELECT streamwm.ingest('wm2', '[{"v":"late"},{"v":"d"}]', partition => 1, write_time => to_timestamp(105));
SELECT streamwm.ingest('wm2', '{"v":"e"}', partition => 1, write_time => to_timestamp(125));
SELECT streamwm.process('wm2', now => last_arrival('wm2'));
SELECT w('wm2');
SELECT l.partition, s.v, l.sw_event_time, l.watermark FROM streamwm.late_events l
  JOIN wm2 s ON s.sw_partition = l.partition AND s.sw_offset = l.sw_offset
 WHERE l.stream = 'wm2'::regclass ORDER BY l.sw_offset;
-- with both partitions active, W is the smaller of the two again
SELECT streamwm.ingest('wm2', '{"v":"f"}', partition => 0, write_time => to_timestamp(140));
SELECT streamwm.process('wm2', now => last_arrival('wm2'));
SELECT w('wm2');
SELECT window_start, window_end, vs FROM wm2_q ORDER BY 1;
SELECT events, late_events FROM streamwm.streams WHERE stream = 'wm2'::regclass;

-- two hours later every partition is idle, but not from the same moment:
-- p1 (newest row e) went idle an hour after e arrived, p0 (f) an hour after
-- f arrived, a little later.  In between, W followed p0 alone (139 s), at
-- that moment, whether or not a step ran then; since both are idle, W holds.
SELECT streamwm.process('wm2', now => last_arrival('wm2') + interval '2 hours');
SELECT w('wm2');

-- A partition that is merely behind is never idle, however late processing
-- runs: idleness is judged at each event's arrival, not at the step's clock.
SELECT streamwm.create_stream('behind', 'v text', partitions => 2, idle_timeout => '1 hour');
SELECT streamwm.ingest('behind', '{"v":"p0"}', partition => 0, write_time => to_timestamp(100));
SELECT streamwm.ingest('behind', '{"v":"p1"}', partition => 1, write_time => to_timestamp(50));
SELECT streamwm.process('behind', now => last_arrival('behind') + interval '3 hours');
SELECT w('behind'), (SELECT late_events FROM streamwm.streams WHERE stream = 'behind'::regclass) AS late;

-- Late means event time < W when processed, W advanced by every event before
-- it, filtered or not, whether processed one by one or at once.
SELECT streamwm.create_stream('late1', 'pass int, v text', watermark_delay => '5 s');
SELECT streamwm.create_stream('late2', 'pass int, v text', watermark_delay => '5 s');
SELECT streamwm.create_query('late1_q', 'SELECT string_agg(v, '''' ORDER BY v) AS vs FROM late1 WHERE pass > 0',
                             hop => '5 s', size => '5 s');
SELECT streamwm.create_query('late2_q', 'SELECT string_agg(v, '''' ORDER BY v) AS vs FROM late2 WHERE pass > 0',
                             hop => '5 s', size => '5 s');
CREATE TEMP TABLE seq (i int, pass int, v text, t float8);
INSERT INTO seq VALUES (1, 1, 'a', 10), (2, 0, 'b', 30), (3, 1, 'c', 24), (4, 1, 'd', 26),
                       (5, 1, 'e', 25), (6, 1, 'f', 19.999), (7, 1, 'g', 20), (8, 1, 'h', 40);
SELECT streamwm.ingest('late1', jsonb_build_object('pass', pass, 'v', v), write_time => to_timestamp(t))
  FROM seq ORDER BY i;
SELECT streamwm.process('late1', now => last_arrival('late1'));
DO $$
DECLARE r record;
BEGIN
    FOR r IN SELECT * FROM seq ORDER BY i LOOP
        PERFORM streamwm.ingest('late2', jsonb_build_object('pass', r.pass, 'v', r.v),
                                write_time => to_timestamp(r.t));
        COMMIT;     -- rows arrive when their transaction commits
        PERFORM streamwm.process('late2', now => last_arrival('late2'));
    END LOOP;
END $$;
SELECT s.v, s.sw_event_time, l.watermark AS w_when_processed
  FROM late1 s JOIN streamwm.late_events l ON l.stream = 'late1'::regclass AND l.sw_offset = s.sw_offset
 ORDER BY s.sw_offset;
SELECT window_start, vs FROM late1_q ORDER BY 1;
SELECT count(*) AS differences FROM (
  (SELECT window_start, window_end, vs FROM late1_q EXCEPT SELECT window_start, window_end, vs FROM late2_q)
  UNION ALL
  (SELECT window_start, window_end, vs FROM late2_q EXCEPT SELECT window_start, window_end, vs FROM late1_q)) d;
SELECT stream, watermark, events, late_events FROM streamwm.streams
 WHERE stream IN ('late1'::regclass, 'late2'::regclass) ORDER BY stream::text;

-- A stream on its own event-time expression, several partitions
SELECT streamwm.create_stream('evt', 'k text, at timestamptz', partitions => 3,
                              event_time => 'at', partition_key => 'k', idle_timeout => '1 hour');
SELECT streamwm.create_query('evt_q', 'SELECT k, count(*) AS n FROM evt GROUP BY k', hop => '1 min', size => '1 min');
INSERT INTO evt (k, at) SELECT k, '2024-05-01 12:00:00+00'::timestamptz + i * interval '7 s'
  FROM generate_series(0, 30) i, (VALUES ('x'), ('y'), ('z'), ('w')) ks(k);
SELECT streamwm.process('evt', now => last_arrival('evt'));
SELECT count(DISTINCT sw_partition) AS partitions_used FROM evt;
SELECT w('evt');
SELECT window_start, k, n FROM evt_q ORDER BY 1, 2;
