-- The YDB example (SPEC section 9), as the README's first command runs it.
CREATE EXTENSION streamwm;
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
\echo 'Result table "example":'
SELECT window_end, result FROM example;
\echo 'Late events:'
SELECT partition, sw_offset, sw_event_time, watermark FROM streamwm.late_events;
\echo 'Stream:'
SELECT stream, watermark, events, late_events FROM streamwm.streams;
