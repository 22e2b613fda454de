-- SPEC section 11, processing time (the Flink draft's operator time):
-- create_query(..., time_domain => 'processing'): a row belongs to the
-- windows of the clock (now) of the step that first reads it, and windows
-- close when that clock passes their end.  Nothing is late.  Driven by
-- process(now => ...), so the results are exact.
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
-- streams here are stepped by the tests themselves (streamwm.process(now => ...)): no background worker steps in
DO $$BEGIN EXECUTE format('ALTER DATABASE %I SET streamwm.enabled = off', current_database()); END$$;
CREATE EXTENSION IF NOT EXISTS streamwm;

SELECT streamwm.create_stream('pt_s', 'ts timestamptz, k int, v int', event_time => 'ts',
                              idle_timeout => '1 hour');
SELECT streamwm.create_query('pt_q', 'SELECT k, count(*) AS n, sum(v) AS s FROM pt_s GROUP BY k',
  hop => '10 s', size => '10 s', time_domain => 'processing');
SELECT streamwm.create_query('pt_hop', 'SELECT count(*) AS n FROM pt_s',
  hop => '5 s', size => '10 s', time_domain => 'processing');
-- the same query in event time, for contrast
SELECT streamwm.create_query('pt_event', 'SELECT k, count(*) AS n, sum(v) AS s FROM pt_s GROUP BY k',
  hop => '10 s', size => '10 s');
-- refused: a query whose state is not panes, a chain, an unknown domain
SELECT streamwm.create_query('pt_bad', 'SELECT k, array_agg(v ORDER BY v) AS vs FROM pt_s GROUP BY k',
  hop => '10 s', size => '10 s', time_domain => 'processing');
SELECT streamwm.create_query('pt_bad', 'SELECT k, count(*) AS n FROM pt_s GROUP BY k',
  hop => '10 s', size => '10 s', time_domain => 'wall');
SELECT count(*) AS bad FROM streamwm.queries WHERE query = 'pt_bad';

-- rows with event times from 1970, read by steps at 2030-01-01 00:00:03,
-- :07, :12 and :25; one row far in the past of the others (late in event
-- time, counted in processing time)
CREATE PROCEDURE pt_step(ts int[], at timestamptz) LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO pt_s (ts, k, v) SELECT to_timestamp(t), t % 2, t FROM unnest(ts) t;
  COMMIT;
  PERFORM streamwm.process('pt_s', now => at);
END $$;
CALL pt_step('{100, 101, 102}', '2030-01-01 00:00:03+00');
CALL pt_step('{103, 50}', '2030-01-01 00:00:07+00');
SELECT count(*) AS closed_yet FROM pt_q;
CALL pt_step('{104, 105}', '2030-01-01 00:00:12+00');
SELECT window_start, window_end, k, n, s FROM pt_q ORDER BY 1, 3;
CALL pt_step('{106}', '2030-01-01 00:00:25+00');
SELECT window_start, window_end, k, n, s FROM pt_q ORDER BY 1, 3;
SELECT window_start, window_end, n FROM pt_hop ORDER BY 1;
SELECT query, closed_until FROM streamwm.queries WHERE stream = 'pt_s'::regclass ORDER BY 1;
-- in event time, 50 was late
SELECT late_events FROM streamwm.streams WHERE stream = 'pt_s'::regclass;
-- a step at an earlier clock closes nothing and moves nothing; what it
-- read counts at the query's clock (closed_until, 00:00:25: window [20, 30))
CALL pt_step('{107}', '2030-01-01 00:00:20+00');
SELECT query, closed_until FROM streamwm.queries WHERE query = 'pt_q';
CALL pt_step('{108}', '2030-01-01 00:00:31+00');
SELECT window_start, k, n, s FROM pt_q WHERE window_start >= '2030-01-01 00:00:20+00' ORDER BY 1, 2;

-- nothing to recompute from: when each row was read is not kept
SELECT streamwm.recompute('pt_q', '-infinity', 'infinity');

SELECT streamwm.drop_query(q, drop_result => true) FROM unnest('{pt_q,pt_hop,pt_event}'::text[]) q;
DROP PROCEDURE pt_step(int[], timestamptz);
SELECT streamwm.drop_stream('pt_s');
