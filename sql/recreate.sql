-- DROP + CREATE of a query (YDB's "lost events when recreating a query")
-- versus start_from => 'earliest': what each loses.
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
-- streams here are stepped by the tests themselves (streamwm.process(now => ...)): no background worker steps in
DO $$BEGIN EXECUTE format('ALTER DATABASE %I SET streamwm.enabled = off', current_database()); END$$;
CREATE EXTENSION IF NOT EXISTS streamwm;

SELECT streamwm.create_stream('rc', 'v int', watermark_delay => '0');
SELECT streamwm.create_query('rc_q', 'SELECT count(*) AS n, sum(v) AS s FROM rc',
                             hop => '10 s', size => '10 s', result_table => 'rc_before');
SELECT sum(streamwm.ingest('rc', jsonb_build_object('v', i), write_time => to_timestamp(i)))
  FROM generate_series(1, 25) i;
SELECT streamwm.process('rc');
SELECT window_start, n, s FROM rc_before ORDER BY 1;

-- the query is dropped; events keep arriving and are processed
SELECT streamwm.drop_query('rc_q');
SELECT sum(streamwm.ingest('rc', jsonb_build_object('v', i), write_time => to_timestamp(i)))
  FROM generate_series(26, 45) i;
SELECT streamwm.process('rc');

-- recreated from 'latest': it sees only rows ingested after it was created,
-- and starts at the current watermark, so the windows of the gap are lost
-- and the first window it closes is partial
SELECT streamwm.create_query('rc_latest', 'SELECT count(*) AS n, sum(v) AS s FROM rc',
                             hop => '10 s', size => '10 s');
-- recreated from 'earliest': every retained row, every window again
SELECT streamwm.create_query('rc_earliest', 'SELECT count(*) AS n, sum(v) AS s FROM rc',
                             hop => '10 s', size => '10 s', start_from => 'earliest');
SELECT sum(streamwm.ingest('rc', jsonb_build_object('v', i), write_time => to_timestamp(i)))
  FROM generate_series(46, 65) i;
SELECT streamwm.process('rc');

SELECT 'latest' AS start_from, window_start, n, s FROM rc_latest
UNION ALL
SELECT 'earliest', window_start, n, s FROM rc_earliest
ORDER BY 1, 2;
-- 'earliest' equals the truth: every window of every retained row
SELECT count(*) AS earliest_differences FROM (
  SELECT window_start, n, s FROM rc_earliest
  EXCEPT
  SELECT streamwm.window_start(sw_event_time, '10 s'), count(*), sum(v) FROM rc
   GROUP BY 1 HAVING streamwm.window_start(sw_event_time, '10 s') + '10 s'
                     <= (SELECT watermark FROM streamwm.streams WHERE stream = 'rc'::regclass)) d;

-- How far things lag: rows written but not processed, rows not yet in a
-- closed window, newest event time minus closed_until.
SELECT sum(streamwm.ingest('rc', jsonb_build_object('v', i), write_time => to_timestamp(i)))
  FROM generate_series(66, 70) i;
SELECT stream, unprocessed_events, processing_lag > interval '0' AS lagging FROM streamwm.streams
 WHERE stream = 'rc'::regclass;
SELECT query, closed_until, pending_events, lag FROM streamwm.queries WHERE stream = 'rc'::regclass ORDER BY 1;
SELECT streamwm.process('rc');
SELECT stream, unprocessed_events, processing_lag FROM streamwm.streams WHERE stream = 'rc'::regclass;
SELECT query, closed_until, pending_events, lag FROM streamwm.queries WHERE stream = 'rc'::regclass ORDER BY 1;
