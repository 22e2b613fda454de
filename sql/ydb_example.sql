-- SPEC section 9: the YDB example must reproduce exactly.
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
-- streams here are stepped by the tests themselves (streamwm.process(now => ...)): no background worker steps in
DO $$BEGIN EXECUTE format('ALTER DATABASE %I SET streamwm.enabled = off', current_database()); END$$;
SET client_min_messages = warning;   -- the NOTICE without preload
CREATE EXTENSION IF NOT EXISTS streamwm;
RESET client_min_messages;
SELECT streamwm.create_stream('input', 'pass int8, payload text',
                              watermark_delay => 'PT5S');
SELECT streamwm.create_query('example',
  $$SELECT array_agg(payload ORDER BY payload) AS result
      FROM input WHERE pass > 0$$,
  hop => 'PT5S', size => 'PT10S');
SELECT streamwm.ingest('input', '{"pass": 1, "payload": "a"}', write_time => '1970-01-01T00:00:40Z');
SELECT streamwm.ingest('input', '{"pass": 1, "payload": "b"}', write_time => '1970-01-01T00:00:42Z');
SELECT streamwm.ingest('input', '{"pass": 0, "payload": "c"}', write_time => '1970-01-01T00:00:50Z');
SELECT streamwm.ingest('input', '{"pass": 1, "payload": "d"}', write_time => '1970-01-01T00:00:40Z');
SELECT streamwm.process('input');
SELECT window_end, result FROM example;
SELECT * FROM example;
-- d is late: 40 s < W = 45 s
SELECT partition, sw_offset, sw_event_time, watermark FROM streamwm.late_events;
SELECT payload FROM input i JOIN streamwm.late_events l
    ON l.stream = 'input'::regclass AND l.sw_offset = i.sw_offset;
SELECT stream, partitions, watermark, events, late_events, watermark_delay, idle_timeout
  FROM streamwm.streams;
SELECT stream, partition, last_offset, processed_offset, max_event_time, watermark
  FROM streamwm.partitions;
-- window [40, 50) stays open
SELECT query, stream, hop, size, result_table, closed_until, windows_emitted, last_error
  FROM streamwm.queries;

-- The same events, processed after every row, give the same result.
SELECT streamwm.create_stream('input2', 'pass int8, payload text',
                              watermark_delay => 'PT5S');
SELECT streamwm.create_query('example2',
  $$SELECT array_agg(payload ORDER BY payload) AS result
      FROM input2 WHERE pass > 0$$,
  hop => 'PT5S', size => 'PT10S');
SELECT streamwm.ingest('input2', '{"pass": 1, "payload": "a"}', write_time => '1970-01-01T00:00:40Z');
SELECT streamwm.process('input2');
SELECT streamwm.ingest('input2', '{"pass": 1, "payload": "b"}', write_time => '1970-01-01T00:00:42Z');
SELECT streamwm.process('input2');
SELECT streamwm.ingest('input2', '{"pass": 0, "payload": "c"}', write_time => '1970-01-01T00:00:50Z');
SELECT streamwm.process('input2');
SELECT streamwm.ingest('input2', '{"pass": 1, "payload": "d"}', write_time => '1970-01-01T00:00:40Z');
SELECT streamwm.process('input2');
SELECT window_start, window_end, result FROM example2;
SELECT watermark, events, late_events FROM streamwm.streams WHERE stream = 'input2'::regclass;
