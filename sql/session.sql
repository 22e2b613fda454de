-- SPEC section 11, session windows: per group, a maximal run of accepted
-- events that pass the WHERE, less than gap apart; it closes when
-- W >= last + gap, and its row is (window_start = first, window_end =
-- last + gap, group keys, outputs).  Every result is compared, EXCEPT both
-- ways, with a model in plain SQL that finds sessions another way (a
-- session starts at an event with no other event of its group in the gap
-- before it).  Two roles, and traps planted in public by one of them.
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
-- streams here are stepped by the tests themselves (streamwm.process(now => ...)): no background worker steps in
DO $$BEGIN EXECUTE format('ALTER DATABASE %I SET streamwm.enabled = off', current_database()); END$$;
CREATE EXTENSION IF NOT EXISTS streamwm;

CREATE ROLE regress_ss_alice;
CREATE ROLE regress_ss_bob;
GRANT CREATE ON SCHEMA public TO regress_ss_alice, regress_ss_bob;

-- bob's traps, for every operator a session step uses on its own account
-- and for the one alice's WHERE uses: each call is recorded
SET ROLE regress_ss_bob;
CREATE TABLE public.ss_pwned (who name, what text);
GRANT INSERT, SELECT ON public.ss_pwned TO PUBLIC;
CREATE FUNCTION public.ss_trap_lt(interval, interval) RETURNS boolean LANGUAGE plpgsql AS
  $$BEGIN INSERT INTO public.ss_pwned VALUES (current_user, 'interval < interval'); RETURN true; END$$;
CREATE OPERATOR public.< (LEFTARG = interval, RIGHTARG = interval, FUNCTION = public.ss_trap_lt);
CREATE FUNCTION public.ss_trap_mi(timestamptz, timestamptz) RETURNS interval LANGUAGE plpgsql AS
  $$BEGIN INSERT INTO public.ss_pwned VALUES (current_user, 'timestamptz - timestamptz'); RETURN '0'; END$$;
CREATE OPERATOR public.- (LEFTARG = timestamptz, RIGHTARG = timestamptz, FUNCTION = public.ss_trap_mi);
CREATE FUNCTION public.ss_trap_pl(timestamptz, interval) RETURNS timestamptz LANGUAGE plpgsql AS
  $$BEGIN INSERT INTO public.ss_pwned VALUES (current_user, 'timestamptz + interval'); RETURN $1; END$$;
CREATE OPERATOR public.+ (LEFTARG = timestamptz, RIGHTARG = interval, FUNCTION = public.ss_trap_pl);
CREATE FUNCTION public.ss_trap_gt(integer, integer) RETURNS boolean LANGUAGE plpgsql AS
  $$BEGIN INSERT INTO public.ss_pwned VALUES (current_user, 'integer > integer'); RETURN true; END$$;
CREATE OPERATOR public.> (LEFTARG = integer, RIGHTARG = integer, FUNCTION = public.ss_trap_gt);
CREATE FUNCTION public.lag(timestamptz) RETURNS timestamptz LANGUAGE plpgsql AS
  $$BEGIN INSERT INTO public.ss_pwned VALUES (current_user, 'lag'); RETURN NULL; END$$;
RESET ROLE;

-- alice, with public before pg_catalog: bob's traps come first wherever
-- her search_path is used
SET ROLE regress_ss_alice;
SET search_path = public, pg_catalog;
SELECT streamwm.create_stream('ss_bids', 'bidder int, price int', partitions => 2,
                              watermark_delay => '30 s', idle_timeout => '1 hour');
SELECT streamwm.create_session_query('ss_sess',
  'SELECT bidder, count(*) AS n, sum(price) AS total, min(price) AS low
     FROM ss_bids WHERE price OPERATOR(pg_catalog.>) 0 GROUP BY bidder', gap => '10 s');
-- no GROUP BY: the whole stream is one group
SELECT streamwm.create_session_query('ss_all', 'SELECT count(*) AS n, max(price) AS top FROM ss_bids',
                                     gap => '10 s');
SELECT query, hop, size, gap, plan, result_table, closed_until FROM streamwm.queries
 WHERE query LIKE 'ss\_%' ORDER BY 1;
\d ss_sess

-- the model: accepted rows (not late), sessions per group (NULL a group)
-- from their starts, closed when last + gap <= W
CREATE FUNCTION ss_accepted() RETURNS SETOF ss_bids LANGUAGE sql STABLE AS $$
  SELECT b.* FROM ss_bids b
   WHERE NOT EXISTS (SELECT 1 FROM streamwm.late_events l
                      WHERE l.stream OPERATOR(pg_catalog.=) 'ss_bids'::regclass
                        AND l.partition OPERATOR(pg_catalog.=) b.sw_partition
                        AND l.sw_offset OPERATOR(pg_catalog.=) b.sw_offset) $$;
CREATE VIEW ss_sess_model AS
  WITH a AS (SELECT * FROM ss_accepted() WHERE price OPERATOR(pg_catalog.>) 0),
  s AS (SELECT DISTINCT x.bidder, x.sw_event_time AS s FROM a x
         WHERE NOT EXISTS (SELECT 1 FROM a y WHERE y.bidder IS NOT DISTINCT FROM x.bidder
                             AND y.sw_event_time OPERATOR(pg_catalog.<) x.sw_event_time
                             AND y.sw_event_time OPERATOR(pg_catalog.>)
                                 (x.sw_event_time OPERATOR(pg_catalog.-) interval '10 s'))),
  m AS (SELECT a.*, (SELECT pg_catalog.max(s.s) FROM s WHERE s.bidder IS NOT DISTINCT FROM a.bidder
                       AND s.s OPERATOR(pg_catalog.<=) a.sw_event_time) AS s FROM a)
  SELECT s AS window_start, (pg_catalog.max(sw_event_time) OPERATOR(pg_catalog.+) interval '10 s') AS window_end,
         bidder, pg_catalog.count(*) AS n, pg_catalog.sum(price) AS total, pg_catalog.min(price) AS low
    FROM m GROUP BY bidder, s
  HAVING (pg_catalog.max(sw_event_time) OPERATOR(pg_catalog.+) interval '10 s') OPERATOR(pg_catalog.<=)
         (SELECT watermark FROM streamwm.streams WHERE stream OPERATOR(pg_catalog.=) 'ss_bids'::regclass);
CREATE VIEW ss_all_model AS
  WITH a AS (SELECT * FROM ss_accepted()),
  s AS (SELECT DISTINCT x.sw_event_time AS s FROM a x
         WHERE NOT EXISTS (SELECT 1 FROM a y WHERE y.sw_event_time OPERATOR(pg_catalog.<) x.sw_event_time
                             AND y.sw_event_time OPERATOR(pg_catalog.>)
                                 (x.sw_event_time OPERATOR(pg_catalog.-) interval '10 s'))),
  m AS (SELECT a.*, (SELECT pg_catalog.max(s.s) FROM s WHERE s.s OPERATOR(pg_catalog.<=) a.sw_event_time) AS s
          FROM a)
  SELECT s AS window_start, (pg_catalog.max(sw_event_time) OPERATOR(pg_catalog.+) interval '10 s') AS window_end,
         pg_catalog.count(*) AS n, pg_catalog.max(price) AS top
    FROM m GROUP BY s
  HAVING (pg_catalog.max(sw_event_time) OPERATOR(pg_catalog.+) interval '10 s') OPERATOR(pg_catalog.<=)
         (SELECT watermark FROM streamwm.streams WHERE stream OPERATOR(pg_catalog.=) 'ss_bids'::regclass);
-- rows of a result table not in its model, and the other way round (0, 0: equal)
CREATE FUNCTION ss_diff(OUT sess_extra bigint, OUT sess_missing bigint,
                        OUT all_extra bigint, OUT all_missing bigint) LANGUAGE sql AS $$
  SELECT (SELECT pg_catalog.count(*) FROM (TABLE ss_sess EXCEPT TABLE ss_sess_model) d),
         (SELECT pg_catalog.count(*) FROM (TABLE ss_sess_model EXCEPT TABLE ss_sess) d),
         (SELECT pg_catalog.count(*) FROM (TABLE ss_all EXCEPT TABLE ss_all_model) d),
         (SELECT pg_catalog.count(*) FROM (TABLE ss_all_model EXCEPT TABLE ss_all) d) $$;

-- batch 1 (W = min(5, 18) - 30 s: nothing closes).  Bidder 1 has two
-- sessions, at 0 and 18 s; bidder NULL one (3, 9); bidder 2's bid fails the
-- WHERE (it counts in ss_all); bidder 3 one (2).
INSERT INTO ss_bids (sw_partition, sw_write_time, bidder, price) VALUES
  (0, '2020-01-01 00:00:00', 1, 5), (1, '2020-01-01 00:00:18', 1, 7),
  (0, '2020-01-01 00:00:03', NULL, 1), (1, '2020-01-01 00:00:09', NULL, 2),
  (0, '2020-01-01 00:00:05', 2, 0), (1, '2020-01-01 00:00:02', 3, 4);
SELECT streamwm.process('ss_bids', now => now());
SELECT watermark FROM streamwm.streams WHERE stream = 'ss_bids'::regclass;
SELECT count(*) AS sessions FROM ss_sess;

-- batch 2: a bid at 9 s bridges bidder 1's two sessions into one (0, 9,
-- 18); new sessions at 40 and 44 s.  W = 10 s: nothing ends by then.
INSERT INTO ss_bids (sw_partition, sw_write_time, bidder, price) VALUES
  (0, '2020-01-01 00:00:09', 1, 3), (0, '2020-01-01 00:00:40', 1, 1), (1, '2020-01-01 00:00:44', 3, 1);
SELECT streamwm.process('ss_bids', now => now());
SELECT watermark FROM streamwm.streams WHERE stream = 'ss_bids'::regclass;
SELECT * FROM ss_sess ORDER BY window_start, bidder;
SELECT * FROM ss_diff();

-- batch 3: W = 27.999999 s, one microsecond before the merged session
-- ends (18 + 10 s): bidder 3 (2 s) and NULL (3, 9 s) close, bidder 1 not
INSERT INTO ss_bids (sw_partition, sw_write_time, bidder, price) VALUES
  (0, '2020-01-01 00:00:57.999999', 4, 1), (1, '2020-01-01 00:01:00', 4, 1);
SELECT streamwm.process('ss_bids', now => now());
SELECT watermark FROM streamwm.streams WHERE stream = 'ss_bids'::regclass;
SELECT * FROM ss_sess ORDER BY window_start, bidder;
SELECT * FROM ss_all ORDER BY window_start;
SELECT * FROM ss_diff();

-- batch 4: W = 28 s exactly: the merged session closes (W >= last + gap)
INSERT INTO ss_bids (sw_partition, sw_write_time, bidder, price) VALUES
  (0, '2020-01-01 00:00:58', 4, 1);
SELECT streamwm.process('ss_bids', now => now());
SELECT watermark FROM streamwm.streams WHERE stream = 'ss_bids'::regclass;
SELECT * FROM ss_sess ORDER BY window_start, bidder;
SELECT * FROM ss_all ORDER BY window_start;
SELECT * FROM ss_diff();

-- batch 5: a closed session is final.  A bid at 20 s is late (< W) and
-- enters nothing; one at 28 s is accepted and starts a new session (28 - 18
-- is not less than the gap).  Then W moves to 170 s.
INSERT INTO ss_bids (sw_partition, sw_write_time, bidder, price) VALUES
  (0, '2020-01-01 00:00:20', 1, 100), (1, '2020-01-01 00:00:28', 1, 2);
SELECT streamwm.process('ss_bids', now => now());
SELECT sw_event_time, watermark FROM streamwm.late_events WHERE stream = 'ss_bids'::regclass;
INSERT INTO ss_bids (sw_partition, sw_write_time, bidder, price) VALUES
  (0, '2020-01-01 00:03:20', 5, 1), (1, '2020-01-01 00:03:20', NULL, 1);
SELECT streamwm.process('ss_bids', now => now());
SELECT watermark FROM streamwm.streams WHERE stream = 'ss_bids'::regclass;
SELECT * FROM ss_sess ORDER BY window_start, bidder;
SELECT * FROM ss_all ORDER BY window_start;
SELECT * FROM ss_diff();
-- where the rows each query still needs start: its open sessions' first event
SELECT name, closed_until, session_from FROM streamwm.query_def WHERE name LIKE 'ss\_%' ORDER BY 1;

-- 'earliest' reads every retained row: the same sessions
SELECT streamwm.create_session_query('ss_early',
  'SELECT bidder, count(*) AS n, sum(price) AS total, min(price) AS low
     FROM ss_bids WHERE price OPERATOR(pg_catalog.>) 0 GROUP BY bidder', gap => '10 s',
  start_from => 'earliest');
SELECT streamwm.process('ss_bids', now => now());
SELECT (SELECT count(*) FROM (TABLE ss_early EXCEPT TABLE ss_sess_model) d) AS extra,
       (SELECT count(*) FROM (TABLE ss_sess_model EXCEPT TABLE ss_early) d) AS missing;

-- pause holds a session query; resume catches up
SELECT streamwm.pause_query('ss_sess');
INSERT INTO ss_bids (sw_partition, sw_write_time, bidder, price) VALUES
  (0, '2020-01-01 00:05:00', 6, 1), (1, '2020-01-01 00:05:00', 6, 1);
SELECT streamwm.process('ss_bids', now => now());
SELECT query, state, closed_until FROM streamwm.queries WHERE query LIKE 'ss\_%' ORDER BY 1;
SELECT * FROM ss_diff();   -- ss_sess lacks the two sessions that closed while it was paused
SELECT streamwm.resume_query('ss_sess');
SELECT streamwm.process('ss_bids', now => now());
SELECT * FROM ss_diff();
SELECT query, windows_emitted, rows_upserted, last_error FROM streamwm.queries
 WHERE query LIKE 'ss\_%' ORDER BY 1;

-- refused, clearly
SELECT streamwm.alter_query('ss_sess', 'SELECT bidder, count(*) AS n FROM ss_bids GROUP BY bidder');
SELECT streamwm.recompute('ss_sess', '2020-01-01', '2020-01-02');
SELECT streamwm.create_session_query('ss_bad', 'SELECT bidder FROM ss_bids', gap => '10 s');
SELECT streamwm.create_session_query('ss_bad', 'SELECT bidder, price FROM ss_bids', gap => '10 s');
CREATE TABLE ss_dim (bidder int, name text);
SELECT streamwm.create_session_query('ss_bad',
  'SELECT d.name, count(*) AS n FROM ss_bids b JOIN ss_dim d USING (bidder) GROUP BY d.name', gap => '10 s');
SELECT streamwm.create_session_query('ss_bad',
  'SELECT count(*) AS n FROM ss_bids WHERE bidder IN (SELECT bidder FROM ss_bids)', gap => '10 s');
SELECT streamwm.create_session_query('ss_bad',
  'SELECT count(*) AS n FROM ss_bids WHERE random() < 0.5', gap => '10 s');
SELECT streamwm.create_session_query('ss_bad',
  'SELECT count(*) AS sw_session_start FROM ss_bids', gap => '10 s');
SELECT streamwm.create_session_query('ss_bad', 'SELECT count(*) AS n FROM ss_bids', gap => '0 s');
SELECT streamwm.create_session_query('ss_bad', 'SELECT count(*) AS n FROM ss_bids', gap => '1 mon');
SELECT streamwm.create_stream('ss_late', 'v int', allowed_lateness => '5 s');
SELECT streamwm.create_session_query('ss_bad', 'SELECT count(*) AS n FROM ss_late', gap => '10 s');
-- a WHERE or GROUP BY that a later step could evaluate differently over
-- the rows of an open session: a subquery over another table (it can
-- change between steps), a stable function (TimeZone, DateStyle of the
-- session running the step)
SELECT streamwm.create_session_query('ss_bad',
  'SELECT bidder, count(*) AS n FROM ss_bids WHERE bidder NOT IN (SELECT d.bidder FROM ss_dim d) GROUP BY bidder',
  gap => '10 s');
SELECT streamwm.create_session_query('ss_bad',
  'SELECT sw_event_time::date AS day, count(*) AS n FROM ss_bids GROUP BY 1', gap => '10 s');
SELECT streamwm.create_session_query('ss_bad',
  'SELECT bidder, count(*) AS n FROM ss_bids WHERE to_char(sw_event_time, ''HH24'') <> ''00'' GROUP BY bidder',
  gap => '10 s');
-- a subquery on another table in the outputs is fine (evaluated once, when
-- the session is written), and so is an immutable day key
SELECT streamwm.create_session_query('ss_dimq',
  'SELECT bidder, count(*) AS n, (SELECT count(*) FROM ss_dim) AS dims FROM ss_bids GROUP BY bidder',
  gap => '10 s');
SELECT streamwm.create_session_query('ss_dayq',
  'SELECT (sw_event_time AT TIME ZONE ''UTC'')::date AS day, bidder, count(*) AS n FROM ss_bids GROUP BY 1, 2',
  gap => '10 s');
SELECT streamwm.drop_query('ss_dayq', drop_result => true);
SELECT streamwm_internal._register_session('ss_dimq', '10 s');   -- only create_session_query makes one
SELECT count(*) AS bad_queries FROM streamwm.queries WHERE query = 'ss_bad';
RESET ROLE;

-- bob cannot add a session query to alice's stream, nor read her sessions
SET ROLE regress_ss_bob;
SELECT streamwm.create_session_query('ss_bob', 'SELECT bidder, count(*) AS n FROM ss_bids GROUP BY bidder',
                                     gap => '10 s');
SELECT * FROM ss_sess;
SELECT count(*) AS visible FROM streamwm.queries WHERE query LIKE 'ss\_%';
RESET ROLE;

-- the superuser's steps, under bob's search_path: nothing of bob's ran
SET search_path = public, pg_catalog;
INSERT INTO ss_bids (sw_partition, sw_write_time, bidder, price) VALUES
  (0, '2020-01-01 00:10:00', 7, 1), (1, '2020-01-01 00:10:00', 7, 1);
SELECT streamwm.process(now => now());
RESET search_path;
SELECT * FROM ss_diff();
SELECT who, what FROM public.ss_pwned;

-- retention: rows of closed sessions go, those of open sessions stay
SELECT streamwm.create_stream('ss_ret', 'k int', retention => '1 s', idle_timeout => '1 hour');
SELECT streamwm.create_session_query('ss_retq', 'SELECT k, count(*) AS n FROM ss_ret GROUP BY k', gap => '10 s');
-- k 1 keeps a session open from 0 s to 100 s; k 2 has sessions at 0, 30,
-- 60 and 90 s, all closed at W = 100 s but the last (end 100 s <= W: closed too)
INSERT INTO ss_ret (sw_write_time, k)
  SELECT t, k FROM (SELECT '2020-01-01'::timestamptz + i * interval '5 s' AS t, 1 AS k FROM generate_series(0, 20) i
                    UNION ALL
                    SELECT '2020-01-01'::timestamptz + i * interval '30 s', 2 FROM generate_series(0, 3) i) r
   ORDER BY t, k;
SELECT streamwm.process('ss_ret', now => now());
SELECT k, count(*) AS kept, min(sw_event_time) FROM ss_ret GROUP BY k ORDER BY k;
SELECT * FROM ss_retq ORDER BY window_start, k;
SELECT session_from FROM streamwm.query_def WHERE name = 'ss_retq';
-- W = 120 s: k 1's session closes; the rows before W - retention go, but
-- not those of k 2's open session at 120 s
INSERT INTO ss_ret (sw_write_time, k) VALUES ('2020-01-01 00:02:00', 2);
SELECT streamwm.process('ss_ret', now => now());
SELECT k, count(*) AS kept, min(sw_event_time) FROM ss_ret GROUP BY k ORDER BY k;
SELECT * FROM ss_retq ORDER BY window_start, k;
SELECT session_from FROM streamwm.query_def WHERE name = 'ss_retq';
SELECT expired_rows FROM streamwm.streams WHERE stream = 'ss_ret'::regclass;

-- an event near the end of the timestamp range (any writer can send one)
-- keeps its session open, and does not make every step fail
SELECT streamwm.create_stream('ss_far', 'k int, ts timestamptz', event_time => 'ts',
                              idle_timeout => '1 hour', max_future_skew => NULL);
SELECT streamwm.create_session_query('ss_farq', 'SELECT k, count(*) AS n FROM ss_far GROUP BY k',
                                     gap => '10 s');
INSERT INTO ss_far (k, ts) VALUES (1, '2024-01-01 00:00:00+00'), (2, '2024-01-01 00:00:01+00'),
                                  (2, '294276-12-31 23:59:59+00'), (1, '2024-01-01 00:01:00+00');
SELECT streamwm.process('ss_far', now => now());
SELECT window_start, window_end, k, n FROM ss_farq ORDER BY 1, 3;
SELECT errors, last_error FROM streamwm.query_def WHERE name = 'ss_farq';
SELECT streamwm.drop_query('ss_farq', drop_result => true);
SELECT streamwm.drop_stream('ss_far');

-- The state a session query keeps (its open sessions with partial
-- aggregate states: a cache of the retained rows) and reading the rows of
-- open sessions again (an aggregate without a combine function) against a
-- model: random events over 3 partitions in random batches, some late;
-- the state table emptied after batch 3 and dropped after batch 5 (both
-- made anew from the retained rows of the open sessions).
SET ROLE regress_ss_alice;
SET search_path = public, pg_catalog;
SELECT streamwm.create_stream('ss_r', 'k int, v int', partitions => 3, watermark_delay => '5 s',
                              idle_timeout => '1 hour');
SELECT streamwm.create_session_query('ss_rk',
  'SELECT k, count(*) AS n, sum(v) AS total, max(v) AS top FROM ss_r GROUP BY k', gap => '3 s');
SELECT streamwm.create_session_query('ss_rl',
  'SELECT k, count(*) AS n, string_agg(v::text, '','' ORDER BY v, sw_offset) AS vs FROM ss_r GROUP BY k',
  gap => '3 s');
SET search_path = pg_catalog, public;
SELECT name, pane_table::regclass AS state FROM streamwm.query_def WHERE name IN ('ss_rk', 'ss_rl') ORDER BY 1;
CREATE FUNCTION public.ss_r_model(OUT window_start timestamptz, OUT window_end timestamptz, OUT k int,
                           OUT n bigint, OUT total bigint, OUT top int, OUT vs text)
  RETURNS SETOF record LANGUAGE sql STABLE SET search_path = pg_catalog AS $$
  WITH a AS (SELECT b.* FROM public.ss_r b
              WHERE NOT EXISTS (SELECT 1 FROM streamwm.late_events l WHERE l.stream = 'public.ss_r'::regclass
                                   AND l.partition = b.sw_partition AND l.sw_offset = b.sw_offset)),
  s AS (SELECT DISTINCT x.k, x.sw_event_time AS s FROM a x
         WHERE NOT EXISTS (SELECT 1 FROM a y WHERE y.k IS NOT DISTINCT FROM x.k
                              AND y.sw_event_time < x.sw_event_time
                              AND y.sw_event_time > x.sw_event_time - interval '3 s')),
  m AS (SELECT a.*, (SELECT max(s.s) FROM s WHERE s.k IS NOT DISTINCT FROM a.k AND s.s <= a.sw_event_time) AS s
          FROM a)
  SELECT s, max(sw_event_time) + interval '3 s', k, count(*), sum(v), max(v),
         string_agg(v::text, ',' ORDER BY v, sw_offset)
    FROM m GROUP BY k, s
  HAVING max(sw_event_time) + interval '3 s'
         <= (SELECT watermark FROM streamwm.streams WHERE stream = 'public.ss_r'::regclass) $$;
SELECT setseed(0.25);
SELECT c FROM generate_series(0, 7) i,
  LATERAL (VALUES (1, format($f$INSERT INTO ss_r (sw_partition, sw_write_time, k, v)
    SELECT floor(random() * 3)::int, '2020-01-01'::timestamptz + (%s + random() * 15) * interval '1 s',
           CASE WHEN random() < 0.1 THEN NULL ELSE 1 + floor(random() * 4)::int END, floor(random() * 100)::int
      FROM generate_series(1, 1 + floor(random() * 60)::int)$f$, i * 10)),
    (2, $f$SELECT streamwm.process('ss_r', now => now())$f$),
    (3, CASE i WHEN 3 THEN 'TRUNCATE ss_rk_sessions' WHEN 5 THEN 'DROP TABLE ss_rk_sessions' END)) v(o, c)
 ORDER BY i, o \gexec
-- the last: every partition far ahead, so that every session closes
INSERT INTO ss_r (sw_partition, sw_write_time, k, v)
  SELECT p, '2020-01-01 01:00:00', 9, 0 FROM generate_series(0, 2) p;
SELECT streamwm.process('ss_r', now => now());
SELECT (SELECT count(*) FROM (SELECT window_start, window_end, k, n, total, top FROM ss_rk
                              EXCEPT SELECT window_start, window_end, k, n, total, top FROM ss_r_model()) d) AS rk_extra,
       (SELECT count(*) FROM (SELECT window_start, window_end, k, n, total, top FROM ss_r_model()
                              EXCEPT SELECT window_start, window_end, k, n, total, top FROM ss_rk) d) AS rk_missing,
       (SELECT count(*) FROM (SELECT window_start, window_end, k, n, vs FROM ss_rl
                              EXCEPT SELECT window_start, window_end, k, n, vs FROM ss_r_model()) d) AS rl_extra,
       (SELECT count(*) FROM (SELECT window_start, window_end, k, n, vs FROM ss_r_model()
                              EXCEPT SELECT window_start, window_end, k, n, vs FROM ss_rl) d) AS rl_missing,
       (SELECT count(*) > 20 FROM ss_rk) AS many_sessions,
       (SELECT count(*) > 0 FROM streamwm.late_events WHERE stream = 'ss_r'::regclass) AS some_late;
-- the state was made anew (a new table), and holds no closed session
SELECT name, pane_table::regclass AS state, errors FROM streamwm.query_def WHERE name IN ('ss_rk', 'ss_rl') ORDER BY 1;
SELECT count(*) AS open_sessions FROM ss_rk_sessions;
SELECT streamwm.drop_stream('ss_r', cascade => true);
SELECT to_regclass('ss_rk_sessions') AS state_dropped;
DROP TABLE ss_rk, ss_rl;
DROP FUNCTION ss_r_model();
RESET search_path;
RESET ROLE;
SELECT count(*) AS traps_run FROM public.ss_pwned;

SELECT streamwm.drop_query('ss_retq', drop_result => true);
SELECT to_regclass('ss_retq');
SELECT streamwm.drop_query('ss_dimq', drop_result => true);
SELECT streamwm.drop_query('ss_early', drop_result => true);
SELECT name FROM streamwm.query_def WHERE name LIKE 'ss\_%' ORDER BY 1;
DROP VIEW ss_sess_model, ss_all_model;
DROP FUNCTION ss_diff(), ss_accepted();
SELECT streamwm.drop_stream('ss_ret', cascade => true);
SELECT streamwm.drop_stream('ss_late', cascade => true);
SELECT streamwm.drop_stream('ss_bids', cascade => true);
DROP TABLE ss_sess, ss_all, ss_dim, public.ss_pwned;
DROP FUNCTION public.lag(timestamptz);
DROP OPERATOR public.< (interval, interval);
DROP OPERATOR public.- (timestamptz, timestamptz);
DROP OPERATOR public.+ (timestamptz, interval);
DROP OPERATOR public.> (integer, integer);
DROP FUNCTION public.ss_trap_lt(interval, interval), public.ss_trap_mi(timestamptz, timestamptz),
  public.ss_trap_pl(timestamptz, interval), public.ss_trap_gt(integer, integer);
REVOKE CREATE ON SCHEMA public FROM regress_ss_alice, regress_ss_bob;
DROP ROLE regress_ss_alice;
DROP ROLE regress_ss_bob;
