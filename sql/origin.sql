-- SPEC section 11, alignment: create_query(..., origin => o) makes windows
-- [o + n*hop, o + n*hop + size), as PostgreSQL's date_bin aligns them.
-- Intervals are fixed lengths (a day is 24 hours), exactly as date_bin
-- takes them, so a daily window aligned at local midnight starts at 01:00
-- local time after the spring DST change (23:00 UTC throughout): shown
-- below.  Compared with date_bin, for both plans.
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
-- streams here are stepped by the tests themselves (streamwm.process(now => ...)): no background worker steps in
DO $$BEGIN EXECUTE format('ALTER DATABASE %I SET streamwm.enabled = off', current_database()); END$$;
CREATE EXTENSION IF NOT EXISTS streamwm;

-- window_start(ts, hop, origin) is date_bin(hop, ts, origin), before and
-- after the origin, for odd hops and origins
SELECT count(*) AS differences
  FROM generate_series(1, 2000) i,
       LATERAL (SELECT timestamptz '2026-01-01' + (i * 7919 % 100000) * interval '37 s' - interval '20 days' AS ts,
                       (1 + i % 17) * interval '13 min' AS hop,
                       timestamptz '2026-01-05 03:07:11.5+00' + (i % 5) * interval '1 h 1 s' AS origin) x
 WHERE streamwm.window_start(ts, hop, origin) <> date_bin(hop, ts, origin);

SELECT streamwm.create_stream('or_s', 'ts timestamptz, k int, v int', event_time => 'ts',
                              idle_timeout => '1 hour', retention => '100 days');
-- daily windows aligned at midnight in Berlin, across the change to summer time
SELECT streamwm.create_query('or_daily', 'SELECT k, count(*) AS n, sum(v) AS s FROM or_s GROUP BY k',
  hop => '1 day', size => '1 day', origin => '2026-03-01 00:00:00 Europe/Berlin');
SELECT streamwm.create_query('or_daily_general', 'SELECT k, array_agg(v ORDER BY v) AS vs FROM or_s GROUP BY k',
  hop => '1 day', size => '1 day', origin => '2026-03-01 00:00:00 Europe/Berlin');
-- hopping windows aligned at 3 minutes past: [00:03, 00:33), [00:13, 00:43), ...
SELECT streamwm.create_query('or_hop', 'SELECT count(*) AS n, sum(v) AS s FROM or_s',
  hop => '10 min', size => '30 min', origin => '2026-03-27 00:03:00+00');
SELECT query, plan FROM streamwm.queries WHERE stream = 'or_s'::regclass ORDER BY 1;
SELECT streamwm.create_query('or_bad', 'SELECT count(*) AS n FROM or_s',
  hop => '1 day', size => '1 day', origin => 'infinity');

-- rows every 37 minutes from 26 to 31 March, Berlin's DST change on the 29th
CREATE PROCEDURE or_load(lo int, hi int) LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO or_s (ts, k, v)
    SELECT timestamptz '2026-03-26 00:00:00+00' + i * interval '37 min', i % 3, i
      FROM generate_series(lo, hi) i;
  COMMIT;
  PERFORM streamwm.process('or_s', now => now());
END $$;
CALL or_load(0, 90);
CALL or_load(91, 150);
CALL or_load(151, 200);

SET TimeZone = 'Europe/Berlin';
SELECT window_start, window_end, sum(n) AS events FROM or_daily GROUP BY 1, 2 ORDER BY 1;
SET TimeZone = 'UTC';

SELECT count(*) AS windows, count(*) FILTER (WHERE d.k IS NULL) AS missing,
       count(*) FILTER (WHERE q.k IS NULL) AS extra
  FROM or_daily q FULL JOIN (
    SELECT date_bin('1 day', ts, '2026-03-01 00:00:00 Europe/Berlin') AS ws, k, count(*) AS n, sum(v) AS s
      FROM or_s GROUP BY 1, 2
    HAVING date_bin('1 day', max(ts), '2026-03-01 00:00:00 Europe/Berlin') + interval '1 day'
           <= (SELECT closed_until FROM streamwm.queries WHERE query = 'or_daily')) d
    ON d.ws = q.window_start AND d.k = q.k AND d.n = q.n AND d.s = q.s;
SELECT count(*) AS windows, count(*) FILTER (WHERE d.k IS NULL) AS missing,
       count(*) FILTER (WHERE q.k IS NULL) AS extra
  FROM or_daily_general q FULL JOIN (
    SELECT date_bin('1 day', ts, '2026-03-01 00:00:00 Europe/Berlin') AS ws, k, array_agg(v ORDER BY v) AS vs
      FROM or_s GROUP BY 1, 2
    HAVING date_bin('1 day', max(ts), '2026-03-01 00:00:00 Europe/Berlin') + interval '1 day'
           <= (SELECT closed_until FROM streamwm.queries WHERE query = 'or_daily_general')) d
    ON d.ws = q.window_start AND d.k = q.k AND d.vs = q.vs;
SELECT count(*) AS windows, count(*) FILTER (WHERE d.ws IS NULL) AS missing,
       count(*) FILTER (WHERE q.window_start IS NULL) AS extra,
       bool_and(extract(minute FROM coalesce(q.window_start, d.ws))::int % 10 = 3) AS aligned_at_3
  FROM (SELECT * FROM or_hop WHERE window_start >= '2026-03-26 00:03:00+00') q FULL JOIN (
    SELECT w.ws, count(*) AS n, sum(v) AS s
      FROM or_s, LATERAL (SELECT date_bin('10 min', ts, '2026-03-27 00:03:00+00') - j * interval '10 min' AS ws
                            FROM generate_series(0, 2) j) w
     WHERE w.ws >= '2026-03-26 00:03:00+00'
     GROUP BY 1
    HAVING w.ws + interval '30 min' <= (SELECT closed_until FROM streamwm.queries WHERE query = 'or_hop')) d
    ON d.ws = q.window_start AND d.n = q.n AND d.s = q.s;

-- 'earliest' starts at the first window, aligned at the origin, whose rows
-- are all retained
SELECT streamwm.create_query('or_earliest', 'SELECT count(*) AS n FROM or_s',
  hop => '1 day', size => '1 day', origin => '2026-03-01 12:00:00+00', start_from => 'earliest');
SELECT streamwm.process('or_s', now => now());
SELECT window_start, window_end, n FROM or_earliest ORDER BY 1;
SELECT count(*) AS differences FROM or_earliest q
 WHERE q.n <> (SELECT count(*) FROM or_s WHERE ts >= q.window_start AND ts < q.window_end);

SELECT streamwm.drop_query(q, drop_result => true)
  FROM unnest('{or_daily,or_daily_general,or_hop,or_earliest}'::text[]) q;
DROP PROCEDURE or_load(int, int);
SELECT streamwm.drop_stream('or_s');
