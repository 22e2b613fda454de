-- Bad clocks, evidence, fairness and limits (issue 7): max_future_skew
-- (SPEC section 10), late events kept as evidence and 'earliest' after
-- retention (SPEC section 8), streamwm.query_timeout, privileges checked
-- before planning, streamwm.max_windows_per_row.
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
SET client_min_messages = warning;
-- streams here are stepped by the tests themselves (streamwm.process(now => ...)): no background worker steps in
DO $$BEGIN EXECUTE format('ALTER DATABASE %I SET streamwm.enabled = off', current_database()); END$$;
CREATE EXTENSION IF NOT EXISTS streamwm;
RESET client_min_messages;

-- ---------------------------------------------------------------------
-- max_future_skew: an event further ahead of its arrival (the server's
-- clock, never sw_write_time) than max_future_skew is accepted, but moves
-- its partition only to arrival + max_future_skew, and is counted.
-- ---------------------------------------------------------------------
SELECT streamwm.create_stream('fs', 'v int', max_future_skew => '1 minute',
                              idle_timeout => '1 hour');
SELECT streamwm.create_stream('fs_default', 'v int', idle_timeout => '1 hour');
SELECT streamwm.create_stream('fs_off', 'v int', max_future_skew => NULL,
                              idle_timeout => '1 hour');
SELECT stream, max_future_skew, future_events FROM streamwm.streams
 WHERE stream::text LIKE 'fs%' ORDER BY 1;
SELECT streamwm.create_stream('fs_bad', 'v int', max_future_skew => '-1 s');

SELECT streamwm.ingest(s, '{"v": 1}', write_time => now() - interval '10 minutes'),
       streamwm.ingest(s, '{"v": 2}', write_time => '9999-12-31'),
       streamwm.ingest(s, '{"v": 3}', write_time => now() + interval '1 hour')
  FROM unnest(ARRAY['fs', 'fs_default', 'fs_off']::regclass[]) s;
SELECT streamwm.process(s) FROM unnest(ARRAY['fs', 'fs_default', 'fs_off']::regclass[]) s;
-- W stops at arrival + max_future_skew, not in the year 9999 (the row an
-- hour ahead is too far ahead for a 1-minute skew as well); with the
-- default of 1 day the row an hour ahead then is late; NULL: no limit
SELECT stream,
       CASE WHEN watermark = '9999-12-31' THEN 'year 9999'
            WHEN watermark BETWEEN now() - interval '1 minute' AND now() + interval '1 minute'
                 THEN 'arrival + 1 minute'
            WHEN watermark BETWEEN now() + interval '1 day' - interval '1 minute'
                               AND now() + interval '1 day' + interval '1 minute'
                 THEN 'arrival + 1 day'
            ELSE watermark::text END AS watermark,
       future_events, late_events
  FROM streamwm.streams WHERE stream::text LIKE 'fs%' ORDER BY 1;
-- the far-ahead events are accepted (not late), and later rows are not late
SELECT streamwm.ingest('fs', '{"v": 4}', write_time => now() + interval '3 minutes');
SELECT streamwm.process('fs');
SELECT count(*) AS late FROM streamwm.late_events WHERE stream = 'fs'::regclass;
SELECT max_event_time < now() + interval '5 minutes' AS bounded
  FROM streamwm.partitions WHERE stream = 'fs'::regclass;

-- an event_time expression in the year 9999 is bounded the same way
SELECT streamwm.create_stream('fs_expr', 'ts timestamptz', event_time => 'ts',
                              idle_timeout => '1 hour');
SELECT streamwm.ingest('fs_expr', '[{"ts": "9999-12-31T00:00:00Z"}]');
SELECT streamwm.process('fs_expr');
SELECT watermark < now() + interval '1 day 1 minute' AS bounded, future_events
  FROM streamwm.streams WHERE stream = 'fs_expr'::regclass;

-- ---------------------------------------------------------------------
-- Late events are evidence: a late row and its late_events entry stay for
-- retention after they ARRIVED, however old their event time.
-- ---------------------------------------------------------------------
SELECT streamwm.create_stream('ev', 'v int', retention => '1 hour');
SELECT streamwm.ingest('ev', '{"v": 1}', write_time => '1970-01-01T00:00:00Z');
SELECT streamwm.ingest('ev', '{"v": 2}', write_time => '1970-01-02T00:00:00Z');
-- late by a day, older than W - retention
SELECT streamwm.ingest('ev', '{"v": 3}', write_time => '1970-01-01T00:00:05Z');
SELECT streamwm.process('ev');
SELECT v, sw_event_time FROM ev ORDER BY sw_offset;
SELECT l.partition, l.sw_event_time, l.watermark,
       l.arrival BETWEEN now() - interval '1 minute' AND now() AS arrival_is_the_clock
  FROM streamwm.late_event_log l WHERE l.stream = 'ev'::regclass;
SELECT late_events, expired_rows FROM streamwm.streams WHERE stream = 'ev'::regclass;
-- half the retention after it arrived: still kept
SELECT streamwm.process('ev', now => clock_timestamp() + interval '30 minutes');
SELECT count(*) AS late_rows, (SELECT count(*) FROM streamwm.late_events
                                WHERE stream = 'ev'::regclass) AS late_entries
  FROM ev WHERE v = 3;
-- once it arrived more than retention ago: removed, with its entry, counted
SELECT streamwm.process('ev', now => clock_timestamp() + interval '61 minutes');
SELECT v FROM ev ORDER BY sw_offset;
SELECT count(*) AS late_entries FROM streamwm.late_events WHERE stream = 'ev'::regclass;
SELECT late_events, expired_rows FROM streamwm.streams WHERE stream = 'ev'::regclass;

-- ---------------------------------------------------------------------
-- 'earliest' after retention never overwrites a complete window with a
-- partial one: it starts at the first window all of whose rows remain.
-- ---------------------------------------------------------------------
SELECT streamwm.create_stream('er', 'v int', retention => '25 s');
SELECT streamwm.create_query('er_q', 'SELECT count(*) AS n FROM er',
                             hop => '10 s', size => '10 s', result_table => 'er_out');
SELECT sum(streamwm.ingest('er', jsonb_build_object('v', i), write_time => to_timestamp(i)))
  FROM generate_series(0, 100) i;
SELECT streamwm.process('er');
-- retention removed the rows before W - 25 s = 75 s: window [70, 80) lost half
SELECT min(sw_event_time) AS oldest_row, (SELECT retained_from FROM streamwm.stream_def
                                           WHERE stream = 'er'::regclass)
  FROM er;
SELECT window_start, n FROM er_out WHERE window_start >= to_timestamp(60) ORDER BY 1;
SELECT streamwm.drop_query('er_q');
SELECT streamwm.create_query('er_q2', 'SELECT count(*) AS n FROM er',
                             hop => '10 s', size => '10 s', result_table => 'er_out',
                             start_from => 'earliest');
SELECT closed_until FROM streamwm.queries WHERE query = 'er_q2';
SELECT sum(streamwm.ingest('er', jsonb_build_object('v', i), write_time => to_timestamp(i)))
  FROM generate_series(101, 120) i;
SELECT streamwm.process('er');
-- every window keeps n = 10: [70, 80) was not recomputed from 5 rows
SELECT window_start, n FROM er_out WHERE window_start >= to_timestamp(60) ORDER BY 1;
-- with hop < size: the first window is the first that starts at or after
-- retained_from (now 95 s), i.e. [100, 120) for hop 10 s, size 20 s
SELECT streamwm.create_query('er_q3', 'SELECT count(*) AS n FROM er',
                             hop => '10 s', size => '20 s', start_from => 'earliest');
SELECT streamwm.process('er');
SELECT window_start, window_end, n FROM er_q3 ORDER BY 1;

-- ---------------------------------------------------------------------
-- streamwm.query_timeout: a query that sleeps is canceled and recorded,
-- and the next stream of the same process() call still gets its windows.
-- ---------------------------------------------------------------------
SHOW streamwm.query_timeout;
CREATE FUNCTION lim_slow(x int) RETURNS int LANGUAGE plpgsql AS
  $$BEGIN PERFORM pg_sleep(30); RETURN x; END$$;
SELECT streamwm.create_stream('ta', 'v int');
SELECT streamwm.create_stream('tb', 'v int');
SELECT streamwm.create_query('ta_slow', 'SELECT sum(lim_slow(v)) AS s FROM ta',
                             hop => '10 s', size => '10 s');
SELECT streamwm.create_query('tb_q', 'SELECT count(*) AS n FROM tb',
                             hop => '10 s', size => '10 s');
SELECT streamwm.ingest(s, '[{"v": 1}, {"v": 2}]', write_time => to_timestamp(1)),
       streamwm.ingest(s, '{"v": 3}', write_time => to_timestamp(20))
  FROM unnest(ARRAY['ta', 'tb']::regclass[]) s;
SET streamwm.query_timeout = '200ms';
SELECT streamwm.process(s) FROM unnest(ARRAY['ta', 'tb']::regclass[]) s;
SELECT query, windows_emitted, last_error FROM streamwm.queries
 WHERE query IN ('ta_slow', 'tb_q') ORDER BY 1;
SELECT window_start, n FROM tb_q;
-- a cancel that is not ours (here the session's statement_timeout) still
-- ends the whole statement
SET streamwm.query_timeout = 0;
SET statement_timeout = '300ms';
\set VERBOSITY terse
SELECT streamwm.process('ta');
\set VERBOSITY default
RESET statement_timeout;
RESET streamwm.query_timeout;
SELECT query, windows_emitted, closed_until FROM streamwm.queries WHERE query = 'ta_slow';
-- only a superuser may change it
CREATE ROLE regress_lim_carol;
SET ROLE regress_lim_carol;
SET streamwm.query_timeout = 0;
RESET ROLE;
-- a step nested in the query's own code (its function runs process() of
-- another stream, whose query closes a window) leaves the outer step's
-- timer armed: the outer query is still canceled after 200 ms, not after
-- the function's 30 s (before, the nested step disarmed it), and what the
-- nested step wrote goes with the outer step's rollback
SELECT streamwm.create_stream('tn_inner', 'v int');
SELECT streamwm.create_query('tn_inner_q', 'SELECT count(*) AS n FROM tn_inner',
                             hop => '10 s', size => '10 s');
CREATE FUNCTION lim_nest(x int) RETURNS int LANGUAGE plpgsql AS
  $$BEGIN PERFORM streamwm.process('public.tn_inner'); PERFORM pg_sleep(30); RETURN x; END$$;
SELECT streamwm.create_stream('tn_outer', 'v int');
SELECT streamwm.create_query('tn_outer_q', 'SELECT sum(lim_nest(v)) AS s FROM tn_outer',
                             hop => '10 s', size => '10 s');
SELECT streamwm.ingest(s, '[{"v": 1}, {"v": 2}]', write_time => to_timestamp(1)),
       streamwm.ingest(s, '{"v": 3}', write_time => to_timestamp(20))
  FROM unnest(ARRAY['tn_inner', 'tn_outer']::regclass[]) s;
SET streamwm.query_timeout = '200ms';
SELECT streamwm.process('tn_outer');
RESET streamwm.query_timeout;
SELECT query, windows_emitted, last_error FROM streamwm.queries
 WHERE query IN ('tn_inner_q', 'tn_outer_q') ORDER BY 1;
-- a query's code that runs process() of its own stream: refused (a second
-- step of the stream would read the same rows again and count them twice);
-- process() of all streams (the owner's) leaves that stream out
CREATE ROLE regress_lim_dave;
GRANT CREATE ON SCHEMA public TO regress_lim_dave;
SET ROLE regress_lim_dave;
CREATE FUNCTION lim_self(x int) RETURNS int LANGUAGE plpgsql AS
  $$BEGIN PERFORM streamwm.process('public.ts'); RETURN x; END$$;
CREATE FUNCTION lim_all(x int) RETURNS int LANGUAGE plpgsql AS
  $$BEGIN PERFORM streamwm.process(); RETURN x; END$$;
SELECT streamwm.create_stream('ts', 'v int');
SELECT streamwm.create_query('ts_self', 'SELECT sum(lim_self(v)) AS s FROM ts',
                             hop => '10 s', size => '10 s');
SELECT streamwm.ingest('ts', '[{"v": 1}, {"v": 2}]', write_time => to_timestamp(1)),
       streamwm.ingest('ts', '{"v": 3}', write_time => to_timestamp(20));
SELECT streamwm.process('ts');
SELECT query, windows_emitted, last_error FROM streamwm.queries WHERE query = 'ts_self';
SELECT streamwm.drop_query('ts_self');
SELECT streamwm.create_query('ts_all', 'SELECT sum(lim_all(v)) AS s FROM ts',
                             hop => '10 s', size => '10 s', start_from => 'earliest');
SELECT streamwm.process('ts');
SELECT query, windows_emitted, last_error FROM streamwm.queries WHERE query = 'ts_all';
SELECT window_start, s FROM ts_all;
SELECT events FROM streamwm.streams WHERE stream = 'ts'::regclass;
SELECT streamwm.drop_stream('ts', cascade => true);
DROP TABLE ts_self, ts_all;
DROP FUNCTION lim_self(int), lim_all(int);
RESET ROLE;
REVOKE CREATE ON SCHEMA public FROM regress_lim_dave;
DROP ROLE regress_lim_dave;
-- the pane plan's statement is planned with enable_seqscan and enable_sort
-- off (pane.c); the query's own code runs with the session's settings,
-- except work_mem: a step's statements run with streamwm.work_mem (limit.c)
SET work_mem = '1MB';
SET streamwm.work_mem = '20MB';
CREATE FUNCTION lim_settings(x int) RETURNS int LANGUAGE plpgsql AS
  $$BEGIN RAISE NOTICE 'in the step: enable_seqscan %, enable_sort %, work_mem %',
      current_setting('enable_seqscan'), current_setting('enable_sort'),
      current_setting('work_mem'); RETURN x; END$$;
SELECT streamwm.create_stream('tg', 'v int');
SELECT streamwm.create_query('tg_q', 'SELECT sum(lim_settings(v)) AS s FROM tg',
                             hop => '10 s', size => '10 s');
SELECT streamwm.ingest('tg', '{"v": 1}', write_time => to_timestamp(1)),
       streamwm.ingest('tg', '{"v": 3}', write_time => to_timestamp(20));
SELECT streamwm.process('tg');
SELECT window_start, s FROM tg_q;
SELECT current_setting('enable_seqscan') AS after_seqscan, current_setting('enable_sort') AS after_sort,
       current_setting('work_mem') AS after_work_mem;
-- -1: the session's work_mem
SET streamwm.work_mem = -1;
SELECT streamwm.ingest('tg', '{"v": 5}', write_time => to_timestamp(40));
SELECT streamwm.process('tg');
SELECT window_start, s FROM tg_q ORDER BY 1;
-- 0, as any value below work_mem's least, is 64kB
SET streamwm.work_mem = 0;
SELECT streamwm.ingest('tg', '{"v": 7}', write_time => to_timestamp(60));
SELECT streamwm.process('tg');
RESET streamwm.work_mem;
RESET work_mem;
-- User code run while a step's statement is planned (an IMMUTABLE function
-- the planner folds) may step another stream, whose statement is planned
-- inside the first: each plans its own fold (pane.c, make_pane_plans)
SELECT streamwm.create_stream('nest_b', 'k int, v int');
SELECT streamwm.create_query('nest_bq', 'SELECT k, count(*) AS n FROM nest_b GROUP BY k',
                             hop => '1 s', size => '2 s');
SELECT streamwm.create_stream('nest_a', 'k int, v int');
CREATE FUNCTION nest_step(int) RETURNS int LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN PERFORM streamwm.process('public.nest_b'::regclass, now => to_timestamp(1000)); RETURN $1; END $$;
SELECT streamwm.create_query('nest_aq',
         'SELECT k, count(*) AS n FROM nest_a WHERE v > public.nest_step(0) GROUP BY k',
         hop => '1 s', size => '2 s');
SELECT sum(streamwm.ingest('nest_b', jsonb_build_object('k', i % 3, 'v', i), write_time => to_timestamp(i))),
       sum(streamwm.ingest('nest_a', jsonb_build_object('k', i % 3, 'v', i), write_time => to_timestamp(i)))
  FROM generate_series(41, 60) i;
-- a new session, whose first step plans the statements
\c
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
SELECT streamwm.process('nest_a', now => to_timestamp(1000));
SELECT streamwm.process('nest_b', now => to_timestamp(1000));
SELECT count(*) AS windows, sum(n) AS counted FROM nest_aq
UNION ALL SELECT count(*), sum(n) FROM nest_bq;
SELECT current_setting('enable_sort') AS enable_sort_after;
SELECT streamwm.drop_query('nest_aq', true), streamwm.drop_query('nest_bq', true);
SELECT streamwm.drop_stream('nest_a'), streamwm.drop_stream('nest_b');
DROP FUNCTION nest_step(int);

-- ---------------------------------------------------------------------
-- Privileges are checked before planning: an IMMUTABLE function the
-- planner would fold never runs for a query that may not read its tables,
-- neither in create_query nor in a step.
-- ---------------------------------------------------------------------
CREATE ROLE regress_lim_bob;
GRANT CREATE ON SCHEMA public TO regress_lim_bob;
CREATE TABLE lim_secret (v int);
CREATE TABLE lim_dim (v int);
INSERT INTO lim_dim VALUES (1);
GRANT SELECT ON lim_dim TO regress_lim_bob;
SET ROLE regress_lim_bob;
CREATE FUNCTION lim_leak(x int) RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS
  $$BEGIN RAISE NOTICE 'lim_leak ran as %', current_user; RETURN true; END$$;
SELECT streamwm.create_stream('bs', 'v int');
SELECT streamwm.create_query('bs_peek', 'SELECT count(*) AS n FROM bs WHERE lim_leak(1) AND EXISTS (SELECT 1 FROM lim_secret)',
                             hop => '10 s', size => '10 s');
SELECT streamwm.create_query('bs_q', 'SELECT count(*) AS n FROM bs WHERE lim_leak(2) AND EXISTS (SELECT 1 FROM lim_dim)',
                             hop => '10 s', size => '10 s');
SELECT streamwm.ingest('bs', '{"v": 1}', write_time => to_timestamp(1));
SELECT streamwm.ingest('bs', '{"v": 1}', write_time => to_timestamp(20));
RESET ROLE;
REVOKE SELECT ON lim_dim FROM regress_lim_bob;
SELECT streamwm.process('bs');
SELECT query, windows_emitted, last_error FROM streamwm.queries WHERE query = 'bs_q';

-- ---------------------------------------------------------------------
-- streamwm.max_windows_per_row bounds size / hop.
-- ---------------------------------------------------------------------
SHOW streamwm.max_windows_per_row;
SELECT streamwm.create_query('mw_huge', 'SELECT count(*) AS n FROM ta',
                             hop => '1 microsecond', size => '1 day');
SET streamwm.max_windows_per_row = 100;
SELECT streamwm.create_query('mw_101', 'SELECT count(*) AS n FROM ta',
                             hop => '1 s', size => '101 s');
SELECT streamwm.create_query('mw_100', 'SELECT count(*) AS n FROM ta',
                             hop => '1 s', size => '100 s');
RESET streamwm.max_windows_per_row;
SELECT query, hop, size FROM streamwm.queries WHERE query LIKE 'mw%';

-- clean up
SELECT streamwm.drop_stream(s, cascade => true)
  FROM unnest(ARRAY['fs', 'fs_default', 'fs_off', 'fs_expr', 'ev', 'er', 'ta', 'tb', 'bs',
                     'tn_inner', 'tn_outer', 'tg']::regclass[]) s;
DROP TABLE er_out, er_q3, ta_slow, tb_q, bs_q, mw_100, lim_secret, lim_dim, tn_inner_q, tn_outer_q, tg_q;
DROP FUNCTION lim_slow(int), lim_leak(int), lim_nest(int), lim_settings(int);
REVOKE CREATE ON SCHEMA public FROM regress_lim_bob;
DROP ROLE regress_lim_bob;
DROP ROLE regress_lim_carol;

-- A bound on the groups of one window: the query fails for that step
-- (nothing written, last_error says why), the other query of the stream goes
-- on; raising the bound lets it catch up.
SELECT streamwm.create_stream('lg', 'k int, v int') IS NOT NULL AS created;
SELECT streamwm.create_query('lg_many', 'SELECT k, count(*) AS n FROM lg GROUP BY k',
                             hop => '10 s', size => '10 s') IS NOT NULL AS created;
SELECT streamwm.create_query('lg_many_g', 'SELECT k, string_agg(v::text, '','') AS vs FROM lg GROUP BY k',
                             hop => '10 s', size => '10 s') IS NOT NULL AS created;
SELECT streamwm.create_query('lg_one', 'SELECT count(*) AS n FROM lg',
                             hop => '10 s', size => '10 s') IS NOT NULL AS created;
SELECT streamwm.ingest('lg', jsonb_agg(jsonb_build_object('k', i, 'v', i)), write_time => '1970-01-01 00:00:01+00')
  FROM generate_series(1, 5) i;
SELECT streamwm.ingest('lg', '{"k": 0, "v": 0}', write_time => '1970-01-01 00:00:11+00');
SET streamwm.max_groups_per_window = 3;
SELECT streamwm.process('lg', now => clock_timestamp());
SELECT query, plan, windows_emitted, last_error FROM streamwm.queries WHERE query LIKE 'lg\_%' ORDER BY 1;
SELECT (SELECT count(*) FROM lg_many) AS many, (SELECT count(*) FROM lg_many_g) AS many_g, (SELECT n FROM lg_one) AS one;
RESET streamwm.max_groups_per_window;
SELECT streamwm.process('lg', now => clock_timestamp());
SELECT query, windows_emitted, last_error FROM streamwm.queries WHERE query LIKE 'lg\_%' ORDER BY 1;
SELECT (SELECT count(*) FROM lg_many) AS many, (SELECT count(*) FROM lg_many_g) AS many_g;
SELECT streamwm.drop_stream('lg', cascade => true);
DROP TABLE lg_many, lg_many_g, lg_one;
