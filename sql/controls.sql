-- SPEC section 11, controls: pause_query / resume_query, and the state and
-- lag of streamwm.queries as numbers a monitoring system can graph.
-- (NOTIFY streamwm is tested in test/specs/notify.spec, where the
-- listener's output does not depend on process ids.)
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
-- streams here are stepped by the tests themselves (streamwm.process(now => ...)): no background worker steps in
DO $$BEGIN EXECUTE format('ALTER DATABASE %I SET streamwm.enabled = off', current_database()); END$$;
CREATE EXTENSION IF NOT EXISTS streamwm;
CREATE ROLE regress_sw_ctl_owner;
CREATE ROLE regress_sw_ctl_other;
GRANT CREATE ON SCHEMA public TO regress_sw_ctl_owner, regress_sw_ctl_other;
-- a hostile object: an = operator in public that every role can reach
CREATE FUNCTION public.ctl_evil_eq(text, text) RETURNS boolean LANGUAGE sql AS
  $$SELECT pg_catalog.texteq($1, $2) AND pg_catalog.pg_sleep(0) IS NOT NULL AND
           (SELECT pg_catalog.set_config('ctl.evil_ran', 'yes', false)) IS NOT NULL$$;
CREATE OPERATOR public.= (LEFTARG = text, RIGHTARG = text, FUNCTION = public.ctl_evil_eq);

SET ROLE regress_sw_ctl_owner;
SELECT streamwm.create_stream('ctl_s', 'k text, v int', retention => '10 s',
                              idle_timeout => '1 hour');
SELECT streamwm.create_query('ctl_live', 'SELECT k, count(*) AS n, sum(v) AS total FROM ctl_s GROUP BY k',
                             hop => '10 s', size => '10 s');
SELECT streamwm.create_query('ctl_paused', 'SELECT k, count(*) AS n, sum(v) AS total FROM ctl_s GROUP BY k',
                             hop => '5 s', size => '10 s');
-- another role may neither pause nor resume it
SET ROLE regress_sw_ctl_other;
SELECT streamwm.pause_query('ctl_paused');
SELECT streamwm.resume_query('ctl_paused');
SELECT streamwm.pause_query('no_such_query');
SET ROLE regress_sw_ctl_owner;
SELECT streamwm.pause_query('ctl_paused');
SELECT streamwm.pause_query('ctl_paused');   -- pausing twice is harmless
SELECT query, state, paused FROM streamwm.queries WHERE stream = 'ctl_s'::regclass ORDER BY 1;

-- rows over 60 s; the paused query closes nothing, the other goes on
SELECT sum(streamwm.ingest('ctl_s', format('{"k": "%s", "v": %s}', chr(97 + i % 3), i)::jsonb,
                           write_time => to_timestamp(i)))
  FROM generate_series(1, 60) i;
-- the model below reads this copy (retention removes rows from the stream)
CREATE TEMP TABLE ctl_rows AS SELECT k, v, sw_event_time FROM ctl_s;
SELECT streamwm.process('ctl_s', now => (SELECT max(last_arrival) FROM streamwm.partitions
                                         WHERE stream = 'ctl_s'::regclass));
SELECT query, state, closed_until, windows_emitted, pending_events, lag, lag_seconds
  FROM streamwm.queries WHERE stream = 'ctl_s'::regclass ORDER BY 1;
SELECT count(*) AS paused_results FROM ctl_paused;
-- retention keeps every row the paused query's open windows need (all of
-- them: it has closed nothing), although ctl_live is done with most
SELECT count(*) AS rows_kept FROM ctl_s;

-- resume: the next step catches up, with the same results as a
-- recomputation of every window that has closed
SELECT streamwm.resume_query('ctl_paused');
SELECT streamwm.process('ctl_s', now => (SELECT max(last_arrival) FROM streamwm.partitions
                                         WHERE stream = 'ctl_s'::regclass));
SELECT query, state, closed_until, windows_emitted FROM streamwm.queries
 WHERE stream = 'ctl_s'::regclass ORDER BY 1;
SELECT count(*) AS differences FROM (
  (SELECT window_start, k, n, total FROM ctl_paused
   EXCEPT
   SELECT to_timestamp(w), k, count(*), sum(v) FROM ctl_rows, generate_series(-5, 60, 5) w
    WHERE sw_event_time >= to_timestamp(w) AND sw_event_time < to_timestamp(w + 10)
      AND w + 10 <= 60
    GROUP BY 1, 2)
  UNION ALL
  (SELECT to_timestamp(w), k, count(*), sum(v) FROM ctl_rows, generate_series(-5, 60, 5) w
    WHERE sw_event_time >= to_timestamp(w) AND sw_event_time < to_timestamp(w + 10)
      AND w + 10 <= 60
    GROUP BY 1, 2
   EXCEPT
   SELECT window_start, k, n, total FROM ctl_paused)) d;
-- and now retention may take what both are done with
SELECT count(*) AS rows_kept FROM ctl_s;

-- a failing query is 'failing' and shows its lag too
SELECT streamwm.create_query('ctl_fails', 'SELECT k, 1 / (count(*) - count(*)) AS boom FROM ctl_s GROUP BY k',
                             hop => '10 s', size => '10 s');
SELECT streamwm.ingest('ctl_s', '[{"k": "a", "v": 0}]', write_time => to_timestamp(75));
SELECT streamwm.ingest('ctl_s', '[{"k": "a", "v": 0}]', write_time => to_timestamp(85));
SELECT streamwm.process('ctl_s', now => (SELECT max(last_arrival) FROM streamwm.partitions
                                         WHERE stream = 'ctl_s'::regclass));
SELECT query, state, last_error IS NOT NULL AS has_error, closed_until, lag_seconds, pending_events
  FROM streamwm.queries WHERE stream = 'ctl_s'::regclass ORDER BY 1;
RESET ROLE;
SELECT current_setting('ctl.evil_ran', true) AS evil_ran;

-- 'waiting for W': an empty partition that is not idle holds W back
SET ROLE regress_sw_ctl_owner;
SELECT streamwm.create_stream('ctl_two', 'v int', partitions => 2, idle_timeout => '1 hour');
SELECT streamwm.create_query('ctl_two_q', 'SELECT count(*) AS n FROM ctl_two', hop => '1 s', size => '1 s');
SELECT streamwm.ingest('ctl_two', '{"v": 1}', partition => 0, write_time => to_timestamp(5));
SELECT streamwm.process('ctl_two', now => (SELECT max(last_arrival) FROM streamwm.partitions
                                           WHERE stream = 'ctl_two'::regclass));
SELECT query, state, pending_events FROM streamwm.queries WHERE query = 'ctl_two_q';
SELECT watermark_stalled FROM streamwm.streams WHERE stream = 'ctl_two'::regclass;

-- result_retention (SPEC section 11): each step deletes the result rows
-- that ended before W - result_retention; an ordered query's by event
-- time, its seq going on without reuse
SELECT streamwm.create_query('ctl_rr', 'SELECT count(*) AS n FROM ctl_two', hop => '10 s', size => '10 s',
                             result_retention => '25 s');
SELECT streamwm.create_query('ctl_rr_log', 'SELECT v FROM ctl_two', hop => NULL, size => NULL,
                             result_retention => '25 s');
SELECT streamwm.create_query('ctl_rr_bad', 'SELECT count(*) AS n FROM ctl_two', hop => '10 s', size => '10 s',
                             result_retention => '-1 s');
SELECT sum(streamwm.ingest('ctl_two', format('{"v": %s}', i)::jsonb, partition => i % 2,
                           write_time => to_timestamp(i)))
  FROM generate_series(10, 70) i;
SELECT streamwm.process('ctl_two', now => (SELECT max(last_arrival) FROM streamwm.partitions
                                           WHERE stream = 'ctl_two'::regclass));
SELECT watermark FROM streamwm.streams WHERE stream = 'ctl_two'::regclass;
SELECT window_start, window_end, n FROM ctl_rr ORDER BY 1;
SELECT min(seq), max(seq), count(*), min(event_time) FROM ctl_rr_log;

SELECT streamwm.drop_query(q, drop_result => true)
  FROM unnest('{ctl_live,ctl_paused,ctl_fails,ctl_two_q,ctl_rr,ctl_rr_log}'::text[]) q;
SELECT streamwm.drop_stream('ctl_s');
SELECT streamwm.drop_stream('ctl_two');
DROP TABLE ctl_rows;
RESET ROLE;
DROP OPERATOR public.= (text, text);
DROP FUNCTION public.ctl_evil_eq(text, text);
REVOKE CREATE ON SCHEMA public FROM regress_sw_ctl_owner, regress_sw_ctl_other;
DROP ROLE regress_sw_ctl_owner;
DROP ROLE regress_sw_ctl_other;
