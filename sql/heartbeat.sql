-- SPEC section 10, heartbeat: in a stream whose event time is the
-- server-assigned write time, a partition whose newest row was written live
-- (its write time not before its transaction began) has its watermark
-- advance with the clock: at least (clock - watermark_delay), idle or not,
-- so the last windows close when traffic stops.  Replayed rows (an explicit
-- past write time) and streams whose event time comes from the data keep
-- the rule of section 4, and streamwm.streams says why W does not move.
-- (test/specs/heartbeat.spec: never past an open writing transaction.)
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
-- streams here are stepped by the tests themselves (streamwm.process(now => ...)): no background worker steps in
DO $$BEGIN EXECUTE format('ALTER DATABASE %I SET streamwm.enabled = off', current_database()); END$$;
CREATE EXTENSION IF NOT EXISTS streamwm;

CREATE OR REPLACE FUNCTION last_arrival(s regclass) RETURNS timestamptz LANGUAGE sql AS
  $$SELECT max(last_arrival) FROM streamwm.partitions WHERE stream = s$$;
CREATE OR REPLACE FUNCTION w(s regclass) RETURNS timestamptz LANGUAGE sql AS
  $$SELECT watermark FROM streamwm.streams WHERE stream = s$$;

-- The README's usage example: rows written now, nothing after them.
SELECT streamwm.create_stream('hb_clicks', 'pass int8, payload text', watermark_delay => 'PT5S');
SELECT streamwm.create_query('hb_example',
  $$SELECT array_agg(payload ORDER BY payload) AS result, count(*) AS n
      FROM hb_clicks WHERE pass > 0$$,
  hop => 'PT5S', size => 'PT10S');
SELECT streamwm.ingest('hb_clicks', '[{"pass": 1, "payload": "a"}, {"pass": 1, "payload": "b"},
                                      {"pass": 0, "payload": "c"}, {"pass": 1, "payload": "d"}]');
SELECT heartbeat, watermark_stalled FROM streamwm.streams WHERE stream = 'hb_clicks'::regclass;
-- at the moment they arrived, no window can have closed
SELECT streamwm.process('hb_clicks', now => last_arrival('hb_clicks'));
SELECT count(*) AS results FROM hb_example;
SELECT w('hb_clicks') = last_arrival('hb_clicks') - interval '5 s' AS w_is_clock_minus_delay;
-- 4.9 s later the partition is not idle yet (idle_timeout 5 s), and W has
-- followed the clock anyway
SELECT streamwm.process('hb_clicks', now => last_arrival('hb_clicks') + interval '4.9 s');
SELECT w('hb_clicks') = last_arrival('hb_clicks') - interval '0.1 s' AS w_is_clock_minus_delay;
SELECT partition, idle, behind FROM streamwm.partitions WHERE stream = 'hb_clicks'::regclass;
-- 15 s later both windows holding the rows have closed: every row that
-- passes the WHERE is in exactly two windows
SELECT streamwm.process('hb_clicks', now => last_arrival('hb_clicks') + interval '15 s');
SELECT count(*) >= 2 AS closed, sum(n) AS rows_in_windows,
       bool_and(result <@ '{a,b,d}' AND result @> '{a,b,d}' OR n < 3) AS arrays_ok
  FROM hb_example;
SELECT late_events, watermark_stalled FROM streamwm.streams WHERE stream = 'hb_clicks'::regclass;
-- the clock does not go back: a step at an earlier clock leaves W
SELECT streamwm.process('hb_clicks', now => last_arrival('hb_clicks'));
SELECT w('hb_clicks') = last_arrival('hb_clicks') + interval '10 s' AS w_held;
-- Replayed rows: the YDB example with explicit write times keeps section 4's
-- rule however far the clock moves (the heartbeat would make every later
-- replayed row late).
SELECT streamwm.create_stream('hb_input', 'pass int8, payload text',
                              watermark_delay => 'PT5S', idle_timeout => '1 s');
SELECT streamwm.ingest('hb_input', '{"pass": 1, "payload": "a"}', write_time => '1970-01-01T00:00:40Z');
SELECT streamwm.process('hb_input', now => last_arrival('hb_input') + interval '1 day');
SELECT w('hb_input');
SELECT partition, live FROM streamwm.partition_state WHERE stream = 'hb_input'::regclass;
SELECT pg_sleep(1.1);  -- the view judges idleness on the real clock
SELECT regexp_replace(watermark_stalled, 'since [^)]*', 'since T') AS watermark_stalled
  FROM streamwm.streams WHERE stream = 'hb_input'::regclass;
-- a write time equal to the transaction's start (now()) is live, as the
-- server's own would be: from then on the clock moves W
SELECT streamwm.ingest('hb_input', '{"pass": 1, "payload": "b"}', write_time => now());
SELECT streamwm.process('hb_input', now => last_arrival('hb_input') + interval '1 day');
SELECT w('hb_input') = last_arrival('hb_input') + interval '1 day' - interval '5 s' AS w_follows_clock;
SELECT partition, live FROM streamwm.partition_state WHERE stream = 'hb_input'::regclass;
-- and a replayed row turns it off again
SELECT w('hb_input') AS w_before \gset
SELECT streamwm.ingest('hb_input', '{"pass": 1, "payload": "c"}', write_time => '1970-01-01T00:00:41Z');
SELECT partition, live FROM streamwm.partition_state WHERE stream = 'hb_input'::regclass;
SELECT streamwm.process('hb_input', now => last_arrival('hb_input') + interval '2 days');
SELECT partition, live FROM streamwm.partition_state WHERE stream = 'hb_input'::regclass;
-- c is late (W had followed the clock); since then p is idle and not
-- live: W holds, however far the clock moves
SELECT w('hb_input') = :'w_before' AS w_held, late_events
  FROM streamwm.streams WHERE stream = 'hb_input'::regclass;

-- Two partitions: a live one and a replayed one.  While the replayed one is
-- not idle its own watermark bounds W; once idle it is excluded and the live
-- one's heartbeat moves W.
SELECT streamwm.create_stream('hb_two', 'v int', partitions => 2, idle_timeout => '1 minute');
SELECT streamwm.ingest('hb_two', '{"v": 1}', partition => 0);
SELECT streamwm.ingest('hb_two', '{"v": 2}', partition => 1, write_time => to_timestamp(100));
SELECT streamwm.process('hb_two', now => last_arrival('hb_two') + interval '30 s');
SELECT w('hb_two');
SELECT streamwm.process('hb_two', now => last_arrival('hb_two') + interval '2 minutes');
SELECT w('hb_two') = last_arrival('hb_two') + interval '2 minutes' AS w_follows_clock;

-- Event time from the data: no heartbeat; the view says why W holds.
SELECT streamwm.create_stream('hb_data', 'ts timestamptz, v int', event_time => 'ts',
                              idle_timeout => '1 s');
SELECT streamwm.ingest('hb_data', '{"ts": "2026-01-01T00:00:00Z", "v": 1}');
SELECT streamwm.process('hb_data', now => last_arrival('hb_data') + interval '1 day');
SELECT heartbeat, w('hb_data') FROM streamwm.streams WHERE stream = 'hb_data'::regclass;
SELECT pg_sleep(1.1);
SELECT regexp_replace(watermark_stalled, 'since [^)]*', 'since T') AS watermark_stalled
  FROM streamwm.streams WHERE stream = 'hb_data'::regclass;
-- and before any event
SELECT streamwm.create_stream('hb_empty', 'v int');
SELECT watermark_stalled FROM streamwm.streams WHERE stream = 'hb_empty'::regclass;

SELECT streamwm.drop_query('hb_example', drop_result => true);
SELECT streamwm.drop_stream(s) FROM unnest('{hb_clicks,hb_input,hb_two,hb_data,hb_empty}'::regclass[]) s;
