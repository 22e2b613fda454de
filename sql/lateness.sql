-- SPEC section 10: allowed_lateness.  An event with W - allowed_lateness
-- <= t < W (W as left by the events processed before it) is accepted: it
-- enters its windows, and every window of those that had closed is
-- computed and upserted again, in the same step, once.  Only
-- t < W - allowed_lateness is late.  Both plans; every expectation below
-- is worked out by hand in the comments.
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
-- streams here are stepped by the tests themselves (streamwm.process(now => ...)): no background worker steps in
DO $$BEGIN EXECUTE format('ALTER DATABASE %I SET streamwm.enabled = off', current_database()); END$$;
CREATE EXTENSION IF NOT EXISTS streamwm;

CREATE FUNCTION lt_arrival(s regclass) RETURNS timestamptz LANGUAGE sql AS
  $$SELECT max(last_arrival) FROM streamwm.partitions WHERE stream = s$$;
CREATE FUNCTION lt_w(s regclass) RETURNS timestamptz LANGUAGE sql AS
  $$SELECT watermark FROM streamwm.streams WHERE stream = s$$;
-- the rows of a result table that the newest transaction wrote (the step's upsert)
CREATE FUNCTION lt_written(t regclass) RETURNS SETOF text LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY EXECUTE format(
        'SELECT to_char(window_start, ''SS'') || ''-'' || to_char(window_end, ''SS'') || '' '' || r::text'
        ' FROM %s r WHERE pg_catalog.age(r.xmin) = (SELECT pg_catalog.min(pg_catalog.age(x.xmin)) FROM %s x)'
        ' ORDER BY window_start, 1', t, t);
END $$;
CREATE FUNCTION lt_counters() RETURNS TABLE (query text, closed_until timestamptz, windows_emitted bigint,
                                         windows_refired bigint, rows_upserted bigint, last_error text)
LANGUAGE sql AS $$
    SELECT query, closed_until, windows_emitted, windows_refired, rows_upserted, last_error
      FROM streamwm.queries WHERE stream::text = 'lt' ORDER BY query
$$;

-- the parameter: zero or positive, no months, shown in streamwm.streams
SELECT streamwm.create_stream('lt_bad', 'v int', allowed_lateness => '-1 s');
SELECT streamwm.create_stream('lt_bad', 'v int', allowed_lateness => NULL);
SELECT streamwm.create_stream('lt_bad', 'v int', allowed_lateness => '1 mon');
SELECT streamwm.create_stream('lt_zero', 'v int');
SELECT stream, allowed_lateness FROM streamwm.streams WHERE stream = 'lt_zero'::regclass;
SELECT streamwm.drop_stream('lt_zero');

-- watermark_delay 0, allowed_lateness 10 s, retention 1 s (so that only
-- what re-fires need keeps rows); hop 5 s, size 15 s: an event is in 3 windows
SELECT streamwm.create_stream('lt', 'k text, v int', allowed_lateness => '10 s',
                              retention => '1 s', idle_timeout => '1 hour');
SELECT stream, allowed_lateness, retention FROM streamwm.streams WHERE stream = 'lt'::regclass;
-- the pane plan (count, sum) and the general plan (array_agg ORDER BY,
-- percentile_cont have no combine function)
SELECT streamwm.create_query('lt_p', 'SELECT k, count(*) AS n, sum(v) AS s FROM lt GROUP BY k',
                             hop => '5 s', size => '15 s');
SELECT streamwm.create_query('lt_g', $$SELECT k, array_agg(v ORDER BY v) AS vs,
                                       percentile_cont(0.5) WITHIN GROUP (ORDER BY v) AS med
                                  FROM lt GROUP BY k$$,
                             hop => '5 s', size => '15 s');
-- a tumbling pane-plan query without GROUP BY
SELECT streamwm.create_query('lt_t', 'SELECT count(*) AS n, sum(v) AS s FROM lt',
                             hop => '10 s', size => '10 s');
SELECT query, plan FROM streamwm.queries WHERE stream = 'lt'::regclass ORDER BY 1;

-- a 1 at 100: W = 100
SELECT streamwm.ingest('lt', '{"k":"a","v":1}', write_time => to_timestamp(100));
SELECT streamwm.process('lt', now => lt_arrival('lt'));
-- a 2 at 131: W = 131; closes [90,105) [95,110) [100,115) (a: 1) and [100,110)
SELECT streamwm.ingest('lt', '{"k":"a","v":2}', write_time => to_timestamp(131));
SELECT streamwm.process('lt', now => lt_arrival('lt'));
SELECT lt_w('lt');
SELECT * FROM lt_counters();
SELECT window_start, window_end, k, n, s FROM lt_p ORDER BY 1, 3;

-- b 3 at 122: 121 <= 122 < 131, accepted.  It is in [110,125) [115,130)
-- [120,135); the first two have closed (end <= 131) and had no row: they
-- re-fire with the new group b; [120,135) is still open.
SELECT streamwm.ingest('lt', '{"k":"b","v":3}', write_time => to_timestamp(122));
SELECT streamwm.process('lt', now => lt_arrival('lt'));
SELECT lt_written('lt_p');
SELECT lt_written('lt_g');
-- and the tumbling [120,130), closed (130 <= 131) with no row
SELECT lt_written('lt_t');
SELECT * FROM lt_counters();
SELECT count(*) AS late FROM streamwm.late_events WHERE stream = 'lt'::regclass;

-- a 4 at 120.999999: just below W - allowed_lateness = 121: late
SELECT streamwm.ingest('lt', '{"k":"a","v":4}', write_time => to_timestamp(120.999999));
SELECT streamwm.process('lt', now => lt_arrival('lt'));
SELECT l.sw_event_time, l.watermark FROM streamwm.late_events l WHERE l.stream = 'lt'::regclass;
SELECT * FROM lt_counters();

-- a 5 at 126: accepted; in [115,130) (closed: re-fires, a joins b there),
-- [120,135) and [125,140) (open); the tumbling [120,130) (closed: 3 + 5)
SELECT streamwm.ingest('lt', '{"k":"a","v":5}', write_time => to_timestamp(126));
SELECT streamwm.process('lt', now => lt_arrival('lt'));
SELECT lt_written('lt_p');
SELECT lt_written('lt_g');
SELECT lt_written('lt_t');

-- a 6 at 141: W = 141; closes [120,135) (a: 2 5, b: 3) [125,140) (a: 2 5)
-- and the tumbling [130,140) (a: 2)
SELECT streamwm.ingest('lt', '{"k":"a","v":6}', write_time => to_timestamp(141));
SELECT streamwm.process('lt', now => lt_arrival('lt'));
SELECT lt_written('lt_p');
SELECT lt_written('lt_t');
SELECT * FROM lt_counters();

-- b 7 exactly at W - allowed_lateness = 131: accepted.  In [120,135)
-- (closed: b becomes {3,7}), [125,140) (closed: b appears beside a) and
-- [130,145) (open); the tumbling [130,140) (closed: 2 + 7).
SELECT streamwm.ingest('lt', '{"k":"b","v":7}', write_time => to_timestamp(131));
SELECT streamwm.process('lt', now => lt_arrival('lt'));
SELECT lt_written('lt_p');
SELECT lt_written('lt_g');
SELECT lt_written('lt_t');
SELECT * FROM lt_counters();

-- two accepted rows in one step into the same closed window re-fire it
-- once: a 8 and b 9 at 136, in [125,140) (closed), [130,145) and
-- [135,150) (open); the tumbling [130,140) (closed: 2 + 7 + 8 + 9)
SELECT streamwm.ingest('lt', '[{"k":"a","v":8},{"k":"b","v":9}]', write_time => to_timestamp(136));
SELECT streamwm.process('lt', now => lt_arrival('lt'));
SELECT lt_written('lt_p');
SELECT lt_written('lt_g');
SELECT lt_written('lt_t');
SELECT * FROM lt_counters();

-- panes and rows are kept while a window may still re-fire: with W = 141
-- a row needs t >= 131, so the windows that may change end after 131 and
-- start after 116 (panes 120 and on); rows before 116 are gone
-- (retention 1 s), as are the panes before 120
SELECT sw_pane FROM lt_p_panes ORDER BY 1;
SELECT k, v, sw_event_time FROM lt ORDER BY sw_offset;

-- W moves to 160 (a 10 at 160): now a row needs t >= 150
SELECT streamwm.ingest('lt', '{"k":"a","v":10}', write_time => to_timestamp(160));
SELECT streamwm.process('lt', now => lt_arrival('lt'));
SELECT sw_pane FROM lt_p_panes ORDER BY 1;
-- b 11 at 150 re-fires [140,155) and [145,160) from the kept panes and rows
SELECT streamwm.ingest('lt', '{"k":"b","v":11}', write_time => to_timestamp(150));
SELECT streamwm.process('lt', now => lt_arrival('lt'));
SELECT lt_written('lt_p');
SELECT lt_written('lt_g');
SELECT * FROM lt_counters();

-- the same events, processed in one step by a stream that keeps its rows:
-- every window ends up the same (late or not is decided in the same order)
SELECT streamwm.create_stream('lt1', 'k text, v int', allowed_lateness => '10 s',
                              idle_timeout => '1 hour');
SELECT streamwm.create_query('lt1_p', 'SELECT k, count(*) AS n, sum(v) AS s FROM lt1 GROUP BY k',
                             hop => '5 s', size => '15 s');
SELECT streamwm.create_query('lt1_g', $$SELECT k, array_agg(v ORDER BY v) AS vs,
                                        percentile_cont(0.5) WITHIN GROUP (ORDER BY v) AS med
                                   FROM lt1 GROUP BY k$$,
                             hop => '5 s', size => '15 s');
INSERT INTO lt1 (k, v, sw_write_time)
SELECT k, v, to_timestamp(t) FROM (VALUES ('a', 1, 100), ('a', 2, 131), ('b', 3, 122),
    ('a', 4, 120.999999), ('a', 5, 126), ('a', 6, 141), ('b', 7, 131), ('a', 8, 136),
    ('b', 9, 136), ('a', 10, 160), ('b', 11, 150)) e(k, v, t) ORDER BY v;
SELECT streamwm.process('lt1', now => lt_arrival('lt1'));
SELECT lt_w('lt1') AS w, (SELECT count(*) FROM streamwm.late_events WHERE stream = 'lt1'::regclass) AS late;
(SELECT window_start, k, n, s FROM lt_p EXCEPT SELECT window_start, k, n, s FROM lt1_p)
UNION ALL
(SELECT window_start, k, n, s FROM lt1_p EXCEPT SELECT window_start, k, n, s FROM lt_p);
(SELECT window_start, k, vs, med FROM lt_g EXCEPT SELECT window_start, k, vs, med FROM lt1_g)
UNION ALL
(SELECT window_start, k, vs, med FROM lt1_g EXCEPT SELECT window_start, k, vs, med FROM lt_g);
-- and both equal the model: each window over the stream's accepted events
SELECT window_start, k, count(*) AS n, sum(v) AS s, array_agg(v ORDER BY v) AS vs
  FROM lt1 e CROSS JOIN LATERAL (SELECT to_timestamp((floor(extract(epoch FROM e.sw_event_time) / 5) - j) * 5) AS window_start
                                   FROM generate_series(0, 2) j) w
 WHERE NOT EXISTS (SELECT 1 FROM streamwm.late_event_log l WHERE l.stream = 'lt1'::regclass
                     AND l.partition = e.sw_partition AND l.sw_offset = e.sw_offset)
   AND window_start + interval '15 s' <= lt_w('lt1')
 GROUP BY 1, 2
EXCEPT SELECT window_start, p.k, n, s, vs FROM lt1_p p JOIN lt1_g g USING (window_start, k);
SELECT count(*) FROM lt1_p;

-- a query created when W had passed a window never re-fires it, in its
-- first step or later ones: its windows start with the first one that
-- closes after its creation (W = 160: [155,160) is its first)
SELECT streamwm.create_query('lt_new', 'SELECT count(*) AS n FROM lt', hop => '5 s', size => '5 s');
SELECT streamwm.ingest('lt', '{"k":"a","v":12}', write_time => to_timestamp(152));
SELECT streamwm.process('lt', now => lt_arrival('lt'));
SELECT streamwm.ingest('lt', '{"k":"a","v":13}', write_time => to_timestamp(153));
SELECT streamwm.process('lt', now => lt_arrival('lt'));
SELECT count(*) FROM lt_new;
-- lt_p's [140,155) re-fired twice (a 12, then a 13): a 6 12 13, b 11
SELECT window_start, k, n, s FROM lt_p WHERE window_start = to_timestamp(140) ORDER BY k;
-- a 14 at 156: [155,160) ended when lt_new was made: not its window either
SELECT streamwm.ingest('lt', '{"k":"a","v":14}', write_time => to_timestamp(156));
SELECT streamwm.process('lt', now => lt_arrival('lt'));
SELECT count(*) FROM lt_new;
-- a 15 at 170 closes lt_new's first windows [160,165) [165,170) (no row it
-- sees: a 10 came before it); a 16 at 162 then re-fires [160,165)
SELECT streamwm.ingest('lt', '{"k":"a","v":15}', write_time => to_timestamp(170));
SELECT streamwm.process('lt', now => lt_arrival('lt'));
SELECT streamwm.ingest('lt', '{"k":"a","v":16}', write_time => to_timestamp(162));
SELECT streamwm.process('lt', now => lt_arrival('lt'));
SELECT window_start, window_end, n FROM lt_new;
SELECT * FROM lt_counters();

SELECT streamwm.drop_stream('lt', cascade => true);
SELECT streamwm.drop_stream('lt1', cascade => true);
DROP FUNCTION lt_arrival(regclass), lt_w(regclass), lt_written(regclass), lt_counters();
