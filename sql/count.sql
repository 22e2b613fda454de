-- SPEC section 11: count windows (Renoir's CountWindow).  Per group, the
-- accepted events that pass the WHERE, ordered by (sw_event_time,
-- sw_partition, sw_offset), are numbered 0, 1, 2, ...; window n holds the
-- events n*slide .. n*slide + size - 1 and is emitted once all of them are
-- below W.  Every result below is compared with a plain-SQL model that
-- numbers the events from scratch (the watermark rule recomputed from the
-- arrival order, not read from streamwm), EXCEPT both ways.
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
-- streams here are stepped by the tests themselves (streamwm.process(now => ...)): no background worker steps in
DO $$BEGIN EXECUTE format('ALTER DATABASE %I SET streamwm.enabled = off', current_database()); END$$;
CREATE EXTENSION IF NOT EXISTS streamwm;

-- 1. refused, each with its reason; nothing is left behind
SELECT streamwm.create_stream('cw_a', 'i int, k int, v int', partitions => 2,
                              watermark_delay => '3 s', idle_timeout => '1 hour');
SELECT streamwm.create_stream('cw_late', 'k int', allowed_lateness => '5 s');
SELECT streamwm.create_count_query('cw_bad', 'SELECT k, count(*) AS n FROM cw_late GROUP BY k', 3);
SELECT streamwm.create_count_query('cw_bad', 'SELECT k, count(*) AS n FROM cw_a GROUP BY k', 0);
SELECT streamwm.create_count_query('cw_bad', 'SELECT k, count(*) AS n FROM cw_a GROUP BY k', NULL);
SELECT streamwm.create_count_query('cw_bad', 'SELECT k, count(*) AS n FROM cw_a GROUP BY k', 3, 0);
SELECT streamwm.create_count_query('cw_bad', 'SELECT k, count(*) AS n FROM cw_a GROUP BY k', 3, -2);
SELECT streamwm.create_count_query('cw_bad', 'SELECT k, v FROM cw_a', 3);
SELECT streamwm.create_count_query('cw_bad', 'SELECT count(*) AS n FROM cw_a, pg_catalog.pg_am', 3);
SELECT streamwm.create_count_query('cw_bad', 'SELECT count(*) AS n FROM cw_a WHERE k IN (SELECT k FROM cw_a)', 3);
SELECT streamwm.create_count_query('cw_bad', 'SELECT count(*) AS n FROM cw_a WHERE random() < 2', 3);
-- a WHERE or GROUP BY that a later step could evaluate differently: a
-- stable function (TimeZone or DateStyle of the session running the step)
-- or a subquery over another table (it can change between steps)
CREATE TABLE cw_dim (k int);
SELECT streamwm.create_count_query('cw_bad', 'SELECT sw_event_time::date AS d, count(*) AS n FROM cw_a GROUP BY 1', 3);
SELECT streamwm.create_count_query('cw_bad',
  'SELECT to_char(sw_event_time, ''YYYY-MM-DD HH24'') AS h, count(*) AS n FROM cw_a GROUP BY 1', 3);
SELECT streamwm.create_count_query('cw_bad',
  'SELECT count(*) AS n FROM cw_a WHERE sw_event_time > now() - interval ''1 day''', 3);
SELECT streamwm.create_count_query('cw_bad', 'SELECT count(*) AS n FROM cw_a WHERE k IN (SELECT k FROM cw_dim)', 3);
SELECT streamwm.create_count_query('cw_bad',
  'SELECT k, (SELECT max(d.k) FROM cw_dim d) AS m, count(*) AS n FROM cw_a GROUP BY 1, 2', 3);
SELECT streamwm.create_count_query('cw_bad', 'SELECT count(*) AS window_seq FROM cw_a', 3);
SELECT streamwm.create_count_query('cw_bad', 'SELECT count(*) AS n FROM cw_a', 3, start_from => 'now');
-- a result table given by name needs a unique index the upsert can use:
-- valid, on exactly (window_seq, keys) (INCLUDE columns aside); these are
-- the checks of every kind of query (streamwm_internal._result_table)
CREATE TABLE cw_inv (window_seq bigint, window_start timestamptz, window_end timestamptz, n bigint);
INSERT INTO cw_inv VALUES (1, now(), now(), 1), (1, now(), now(), 1);
CREATE UNIQUE INDEX CONCURRENTLY cw_inv_seq ON cw_inv (window_seq);
DELETE FROM cw_inv;
SELECT indisvalid FROM pg_index WHERE indexrelid = 'cw_inv_seq'::regclass;
SELECT streamwm.create_count_query('cw_bad', 'SELECT count(*) AS n FROM cw_a', 3, result_table => 'cw_inv');
CREATE TABLE cw_wide (window_seq bigint, window_start timestamptz, window_end timestamptz, n bigint,
                      UNIQUE (window_seq, n));
SELECT streamwm.create_count_query('cw_bad', 'SELECT count(*) AS n FROM cw_a', 3, result_table => 'cw_wide');
CREATE TABLE cw_incl (window_seq bigint, window_start timestamptz, window_end timestamptz, n bigint,
                      UNIQUE (window_seq) INCLUDE (n));
SELECT streamwm.create_count_query('cw_incl', 'SELECT count(*) AS n FROM cw_a', 3, result_table => 'cw_incl');
SELECT streamwm.drop_query('cw_incl');
DROP TABLE cw_inv, cw_wide, cw_incl;
SELECT count(*) AS bad_queries, to_regclass('cw_bad') AS bad_table
  FROM streamwm.queries WHERE query = 'cw_bad';
DROP TABLE cw_dim;

-- 1b. an immutable day key (the time zone named) is accepted, and steps
-- run under different TimeZone settings number the events as one model
SELECT streamwm.create_stream('cw_tz', 'v int', idle_timeout => '1 hour');
SELECT streamwm.create_count_query('cw_tz_q',
  'SELECT (sw_event_time AT TIME ZONE ''UTC'')::date AS day, count(*) AS n, sum(v) AS total
     FROM cw_tz GROUP BY 1', 2);
CREATE TABLE cw_tz_all (v int, t timestamptz);
INSERT INTO cw_tz_all SELECT i, '2020-03-01 20:00+00'::timestamptz + i * interval '1 hour'
  FROM generate_series(1, 9) i;
INSERT INTO cw_tz (sw_write_time, v) SELECT t, v FROM cw_tz_all WHERE v <= 4;
SET TimeZone = 'Pacific/Kiritimati';   -- UTC+14: another day than UTC for most of these rows
SELECT streamwm.process('cw_tz', now => now());
INSERT INTO cw_tz (sw_write_time, v) SELECT t, v FROM cw_tz_all WHERE v > 4;
SET TimeZone = 'America/Adak';         -- UTC-10 (UTC-9 in summer)
SELECT streamwm.process('cw_tz', now => now());
SET TimeZone = 'UTC';
INSERT INTO cw_tz (sw_write_time, v) VALUES ('2020-03-02 12:00+00', 100);
SELECT streamwm.process('cw_tz', now => now());
-- the model: each UTC day's events below W numbered by time, in pairs
SELECT window_seq, window_start, window_end, day, n, total FROM cw_tz_q ORDER BY day, window_seq;
SELECT count(*) AS differences FROM (
  (TABLE cw_tz_q EXCEPT
   SELECT seq, min(t), max(t), day, count(*), sum(v) FROM (
     SELECT a.*, (a.t AT TIME ZONE 'UTC')::date AS day,
            (row_number() OVER (PARTITION BY (a.t AT TIME ZONE 'UTC')::date ORDER BY a.t) - 1) / 2 AS seq,
            count(*) OVER (PARTITION BY (a.t AT TIME ZONE 'UTC')::date) AS total_n
       FROM cw_tz_all a) m WHERE (seq + 1) * 2 <= total_n GROUP BY seq, day)
  UNION ALL
  (SELECT seq, min(t), max(t), day, count(*), sum(v) FROM (
     SELECT a.*, (a.t AT TIME ZONE 'UTC')::date AS day,
            (row_number() OVER (PARTITION BY (a.t AT TIME ZONE 'UTC')::date ORDER BY a.t) - 1) / 2 AS seq,
            count(*) OVER (PARTITION BY (a.t AT TIME ZONE 'UTC')::date) AS total_n
       FROM cw_tz_all a) m WHERE (seq + 1) * 2 <= total_n GROUP BY seq, day
   EXCEPT TABLE cw_tz_q)) d;
SELECT streamwm.drop_stream('cw_tz', cascade => true);
DROP TABLE cw_tz_q, cw_tz_all;

-- 2. the same rows, in the same transactions, into two streams: cw_a is
-- processed after every batch (of 1, 5 or 13 rows), cw_b once at the end.
-- Event times are out of order by up to 16 s with a delay of 3 s, so some
-- rows are late; k is NULL for every 7th row.
SELECT streamwm.create_stream('cw_b', 'i int, k int, v int', partitions => 2,
                              watermark_delay => '3 s', idle_timeout => '1 hour');
CREATE FUNCTION cw_make(s text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  -- tumbling, a filter, NULL keys, an aggregate without a combine function
  PERFORM streamwm.create_count_query(s || '_t',
    format('SELECT k, count(*) AS n, sum(v) AS total, array_agg(v ORDER BY v) AS vs
              FROM %I WHERE v <> 5 GROUP BY k', s), 3);
  -- sliding: overlapping windows of 4 every 2
  PERFORM streamwm.create_count_query(s || '_s',
    format('SELECT k, sum(v) AS total, min(v) AS lo FROM %I GROUP BY k', s), 4, 2);
  -- gaps: 2 events out of every 5, one group (no GROUP BY)
  PERFORM streamwm.create_count_query(s || '_g',
    format('SELECT count(*) AS n, sum(v) AS total FROM %I', s), 2, 5);
  -- an ordered-set aggregate, grouped by an expression, slide 1, HAVING
  PERFORM streamwm.create_count_query(s || '_p',
    format('SELECT k %% 2 AS parity, percentile_cont(0.5) WITHIN GROUP (ORDER BY v) AS med
              FROM %I GROUP BY k %% 2 HAVING max(v) > 2', s), 5, 1);
END $$;
SELECT cw_make('cw_a'), cw_make('cw_b');
SELECT query, stream, plan, hop, size, count_size, count_slide, result_table, closed_until
  FROM streamwm.queries WHERE query LIKE 'cw\_%' ORDER BY 1;
\d cw_a_t
\d cw_a_t_count

CREATE PROCEDURE cw_load(lo int, hi int, batch int) LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN lo..hi LOOP
    INSERT INTO cw_a (sw_partition, sw_write_time, i, k, v)
      VALUES (i % 2, to_timestamp(100 + i + (i * 13) % 17 - 8), i,
              CASE WHEN i % 7 <> 0 THEN i % 3 END, (i * 37) % 11);
    INSERT INTO cw_b (sw_partition, sw_write_time, i, k, v)
      VALUES (i % 2, to_timestamp(100 + i + (i * 13) % 17 - 8), i,
              CASE WHEN i % 7 <> 0 THEN i % 3 END, (i * 37) % 11);
    IF i % batch = 0 THEN
      COMMIT;
      PERFORM streamwm.process('cw_a', now => now());
      COMMIT;
    END IF;
  END LOOP;
  COMMIT;
END $$;
CALL cw_load(1, 40, 1);
-- a paused query holds its position and its rows, and catches up
SELECT streamwm.pause_query('cw_a_s');
CALL cw_load(41, 120, 5);
SELECT query, state, closed_until < (SELECT watermark FROM streamwm.streams WHERE stream = 'cw_a'::regclass) AS behind
  FROM streamwm.queries WHERE query = 'cw_a_s';
SELECT streamwm.resume_query('cw_a_s');
CALL cw_load(121, 300, 13);
SELECT streamwm.process('cw_a', now => now());
SELECT streamwm.process('cw_b', now => now());

-- the model: the watermark rule over the arrival order (i), per partition
-- the running maximum, W the minimum of both minus the delay; an event is
-- late when its time is below W as it was before it
CREATE VIEW cw_model_rows AS
WITH r AS (
  SELECT a.*, a.sw_event_time AS t,
         max(a.sw_event_time) FILTER (WHERE a.sw_partition = 0) OVER (ORDER BY a.i) AS m0,
         max(a.sw_event_time) FILTER (WHERE a.sw_partition = 1) OVER (ORDER BY a.i) AS m1
    FROM cw_a a),
w AS (SELECT r.*, CASE WHEN m0 IS NULL OR m1 IS NULL THEN '-infinity'
                        ELSE least(m0, m1) - interval '3 s' END AS w_after FROM r)
SELECT w.*, coalesce(max(w_after) OVER (ORDER BY i ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING),
                     '-infinity') AS w_before,
       max(w_after) OVER () AS w_final
  FROM w;
SELECT count(*) FILTER (WHERE t < w_before) AS model_late, min(w_final) AS model_w,
       (SELECT late_events FROM streamwm.streams WHERE stream = 'cw_a'::regclass) AS late_a,
       (SELECT late_events FROM streamwm.streams WHERE stream = 'cw_b'::regclass) AS late_b,
       (SELECT watermark FROM streamwm.streams WHERE stream = 'cw_a'::regclass) AS w_a,
       (SELECT watermark FROM streamwm.streams WHERE stream = 'cw_b'::regclass) AS w_b
  FROM cw_model_rows;

-- the members of every complete window: numbered from scratch per group
CREATE FUNCTION cw_members(size int, slide int, grp text, filtered boolean)
RETURNS TABLE (seq bigint, g int, k int, v int, ws timestamptz, we timestamptz)
LANGUAGE sql AS $$
WITH ev AS (
  SELECT CASE grp WHEN 'k' THEN m.k WHEN 'parity' THEN m.k % 2 END AS g, m.k, m.v, m.t,
         m.sw_partition AS p, m.sw_offset AS o
    FROM cw_model_rows m
   WHERE m.t >= m.w_before AND m.t < m.w_final AND (NOT filtered OR m.v <> 5)),
num AS (
  SELECT ev.*, row_number() OVER (PARTITION BY g ORDER BY t, p, o) - 1 AS n,
         count(*) OVER (PARTITION BY g) AS total
    FROM ev),
mem AS (
  SELECT s.seq, num.* FROM num, generate_series(0, num.n / slide) s(seq)
   WHERE num.n >= s.seq * slide AND num.n < s.seq * slide + size
     AND s.seq * slide + size <= num.total)
SELECT seq, g, k, v, min(t) OVER (PARTITION BY g, seq), max(t) OVER (PARTITION BY g, seq) FROM mem
$$;
CREATE VIEW cw_model_t AS
SELECT seq AS window_seq, ws AS window_start, we AS window_end, g AS k, count(*) AS n,
       sum(v) AS total, array_agg(v ORDER BY v) AS vs
  FROM cw_members(3, 3, 'k', true) GROUP BY 1, 2, 3, 4;
CREATE VIEW cw_model_s AS
SELECT seq AS window_seq, ws AS window_start, we AS window_end, g AS k, sum(v) AS total, min(v) AS lo
  FROM cw_members(4, 2, 'k', false) GROUP BY 1, 2, 3, 4;
CREATE VIEW cw_model_g AS
SELECT seq AS window_seq, ws AS window_start, we AS window_end, count(*) AS n, sum(v) AS total
  FROM cw_members(2, 5, 'none', false) GROUP BY 1, 2, 3;
CREATE VIEW cw_model_p AS
SELECT seq AS window_seq, ws AS window_start, we AS window_end, g AS parity,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY v) AS med
  FROM cw_members(5, 1, 'parity', false) GROUP BY 1, 2, 3, 4 HAVING max(v) > 2;

-- windows per query, and the differences with the model (both ways) and
-- between the stream processed per batch and the one processed at once
CREATE FUNCTION cw_diff(res text, model text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE n bigint;
BEGIN
  EXECUTE format('SELECT count(*) FROM ((TABLE %I EXCEPT TABLE %I) UNION ALL (TABLE %I EXCEPT TABLE %I)) d',
                 res, model, model, res) INTO n;
  RETURN n;
END $$;
SELECT q, cw_diff('cw_a_' || q, 'cw_model_' || q) AS diff_a,
       cw_diff('cw_b_' || q, 'cw_model_' || q) AS diff_b,
       cw_diff('cw_a_' || q, 'cw_b_' || q) AS diff_ab
  FROM unnest(ARRAY['t', 's', 'g', 'p']) q;
SELECT 'cw_model_t' AS model, count(*) AS windows, count(DISTINCT k) AS groups,
       count(*) FILTER (WHERE k IS NULL) AS null_key_windows FROM cw_model_t
UNION ALL SELECT 'cw_model_s', count(*), count(DISTINCT k), count(*) FILTER (WHERE k IS NULL) FROM cw_model_s
UNION ALL SELECT 'cw_model_g', count(*), 1, 0 FROM cw_model_g
UNION ALL SELECT 'cw_model_p', count(*), count(DISTINCT parity), count(*) FILTER (WHERE parity IS NULL) FROM cw_model_p;
-- windows whose events arrived out of event-time order (numbered by event time)
SELECT count(*) AS windows_whose_events_arrived_out_of_order FROM (
  SELECT r.window_seq, r.k FROM cw_a_t r
   WHERE EXISTS (SELECT 1 FROM cw_a x, cw_a y
                  WHERE x.k IS NOT DISTINCT FROM r.k AND y.k IS NOT DISTINCT FROM r.k
                    AND x.v <> 5 AND y.v <> 5
                    AND x.sw_event_time BETWEEN r.window_start AND r.window_end
                    AND y.sw_event_time BETWEEN r.window_start AND r.window_end
                    AND x.i < y.i AND x.sw_event_time > y.sw_event_time)) z;
SELECT window_seq, window_start, window_end, k, n, total, vs FROM cw_a_t
 WHERE k IS NULL ORDER BY window_seq LIMIT 4;
SELECT query, windows_emitted, rows_upserted, last_error, state FROM streamwm.queries
 WHERE query LIKE 'cw\_a\_%' ORDER BY 1;
-- a group's last, incomplete window waits: not emitted, its rows retained
SELECT sw_k1 AS k, sw_count, sw_next, sw_keep_t IS NOT NULL AS has_open_window FROM cw_a_t_count ORDER BY 1;

-- start_from => 'earliest': every retained row is numbered, from the first
SELECT streamwm.create_count_query('cw_a_e',
  'SELECT k, count(*) AS n, sum(v) AS total, array_agg(v ORDER BY v) AS vs FROM cw_a WHERE v <> 5 GROUP BY k',
  3, start_from => 'earliest');
SELECT streamwm.process('cw_a', now => now());
SELECT cw_diff('cw_a_e', 'cw_model_t') AS diff_earliest, (SELECT count(*) FROM cw_a_e) AS windows;

-- 2b. _s and _g keep partial states per chunk of events (sum, min, count
-- have combine functions: a step reads only the events W passed since the
-- last); _t (array_agg) and _p (percentile_cont) read their incomplete
-- windows' events again at each step
SELECT c.relname AS state_table,
       EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'sw_chunk') AS keeps_chunks
  FROM pg_class c WHERE c.relname IN ('cw_a_t_count', 'cw_a_s_count', 'cw_a_g_count', 'cw_a_p_count')
 ORDER BY 1;
-- the chunks are a cache of the retained rows: made anew when their stamp
-- no longer matches, and when a state fails its check (that step fails;
-- the next one makes them anew)
SELECT count(*) > 0 AS has_chunks FROM cw_a_s_count WHERE sw_chunk >= 0;
UPDATE streamwm.query_def SET pane_stamp = NULL WHERE name = 'cw_a_g';
UPDATE cw_a_s_count SET sw_a1 = '\x0102'::bytea WHERE sw_chunk >= 0;
-- checking a running query plans its own statement and changes nothing
SELECT streamwm_internal._check_query('cw_a_g'), streamwm_internal._check_query('cw_a_t');
SELECT left(streamwm_internal._window_sql('cw_a_g'), 13) AS keeps_chunks,
       left(streamwm_internal._window_sql('cw_a_t'), 10) AS reads_again;
CALL cw_load(301, 340, 7);
SELECT streamwm.process('cw_a', now => now());
SELECT streamwm.process('cw_b', now => now());
SELECT name, errors, last_error FROM streamwm.query_def WHERE name IN ('cw_a_s', 'cw_a_g') ORDER BY 1;
SELECT q, cw_diff('cw_a_' || q, 'cw_model_' || q) AS diff_a,
       cw_diff('cw_b_' || q, 'cw_model_' || q) AS diff_b,
       cw_diff('cw_a_' || q, 'cw_b_' || q) AS diff_ab
  FROM unnest(ARRAY['t', 's', 'g', 'p']) q;

-- 3. alter_query and recompute are refused; drop_query drops the state table
SELECT streamwm.alter_query('cw_b_t', 'SELECT k, count(*) AS n FROM cw_b GROUP BY k');
SELECT streamwm.recompute('cw_b_t', '-infinity', 'infinity');
SELECT streamwm.drop_query('cw_b_g', drop_result => true);
SELECT to_regclass('cw_b_g') AS result_table, to_regclass('cw_b_g_count') AS state_table;

-- 4. retention keeps the rows of a window not emitted yet, for as long as
-- it takes, and removes the others.  Group 'x' has 2 events, then none for
-- 100 s; 'y' has one every second.
SELECT streamwm.create_stream('cw_r', 'i int, g text, v int', retention => '20 s',
                              idle_timeout => '1 hour');
SELECT streamwm.create_count_query('cw_rq', 'SELECT g, count(*) AS n, sum(v) AS total FROM cw_r GROUP BY g', 3);
CREATE TABLE cw_r_all (i int, g text, v int, t timestamptz);
CREATE PROCEDURE cw_r_load(lo int, hi int, grp text) LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN lo..hi LOOP
    INSERT INTO cw_r (sw_write_time, i, g, v) VALUES (to_timestamp(i), i, grp, i * 10);
    INSERT INTO cw_r_all VALUES (i, grp, i * 10, to_timestamp(i));
    IF i % 10 = 0 THEN
      COMMIT;
      PERFORM streamwm.process('cw_r', now => now());
      COMMIT;
    END IF;
  END LOOP;
  COMMIT;
END $$;
CALL cw_r_load(1, 2, 'x');
CALL cw_r_load(3, 100, 'y');
SELECT streamwm.process('cw_r', now => now());
SELECT g, count(*) AS rows_kept, min(sw_event_time) AS oldest FROM cw_r GROUP BY g ORDER BY g;
SELECT (SELECT expired_rows FROM streamwm.streams WHERE stream = 'cw_r'::regclass) AS expired,
       (SELECT count(*) FROM cw_rq WHERE g = 'x') AS x_windows;
CALL cw_r_load(101, 101, 'x');
CALL cw_r_load(102, 105, 'y');
SELECT streamwm.process('cw_r', now => now());
-- the model: from every row ever written (none is late: times increase)
SELECT count(*) AS differences FROM (
  (SELECT window_seq, window_start, window_end, g, n, total FROM cw_rq
   EXCEPT
   SELECT seq, min(t), max(t), g, count(*), sum(v)
     FROM (SELECT a.*, (row_number() OVER (PARTITION BY g ORDER BY t, i) - 1) / 3 AS seq,
                  count(*) OVER (PARTITION BY g) AS total
             FROM cw_r_all a WHERE t < (SELECT watermark FROM streamwm.streams WHERE stream = 'cw_r'::regclass)) m
    WHERE (seq + 1) * 3 <= total GROUP BY seq, g)
  UNION ALL
  (SELECT seq, min(t), max(t), g, count(*), sum(v)
     FROM (SELECT a.*, (row_number() OVER (PARTITION BY g ORDER BY t, i) - 1) / 3 AS seq,
                  count(*) OVER (PARTITION BY g) AS total
             FROM cw_r_all a WHERE t < (SELECT watermark FROM streamwm.streams WHERE stream = 'cw_r'::regclass)) m
    WHERE (seq + 1) * 3 <= total GROUP BY seq, g
   EXCEPT
   SELECT window_seq, window_start, window_end, g, n, total FROM cw_rq)) d;
SELECT window_seq, window_start, window_end, g, n, total FROM cw_rq WHERE g = 'x';
SELECT g, count(*) AS rows_kept FROM cw_r GROUP BY g ORDER BY g;

-- 5. two roles and a hostile object planted in public: bob can neither add
-- a count query to alice's stream nor read her results, and nothing of
-- his runs in her steps, whoever runs them and under whatever search_path
CREATE ROLE regress_cw_alice;
CREATE ROLE regress_cw_bob;
GRANT CREATE ON SCHEMA public TO regress_cw_alice, regress_cw_bob;
SET ROLE regress_cw_alice;
SELECT streamwm.create_stream('cw_alice', 'k int, v int', idle_timeout => '1 hour');
SELECT streamwm.create_count_query('cw_alice_q', 'SELECT k, sum(v) AS total FROM cw_alice GROUP BY k', 2, 1);
RESET ROLE;
SET ROLE regress_cw_bob;
SELECT streamwm.create_count_query('cw_bob_q', 'SELECT k, count(*) AS n FROM cw_alice GROUP BY k', 2);
SELECT * FROM cw_alice_q;
SELECT * FROM cw_alice_q_count;
CREATE TABLE public.cw_pwned (who name, what text);
GRANT INSERT, SELECT ON public.cw_pwned TO PUBLIC;
CREATE FUNCTION public.cw_trap_ge(timestamptz, timestamptz) RETURNS boolean LANGUAGE plpgsql AS
  $$BEGIN INSERT INTO public.cw_pwned VALUES (current_user, 'timestamptz >= timestamptz'); RETURN true; END$$;
CREATE OPERATOR public.>= (LEFTARG = timestamptz, RIGHTARG = timestamptz, FUNCTION = public.cw_trap_ge);
CREATE FUNCTION public.cw_trap_plus(bigint, bigint) RETURNS bigint LANGUAGE plpgsql AS
  $$BEGIN INSERT INTO public.cw_pwned VALUES (current_user, 'bigint + bigint'); RETURN 0; END$$;
CREATE OPERATOR public.+ (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = public.cw_trap_plus);
CREATE FUNCTION public.cw_trap_eq(integer, integer) RETURNS boolean LANGUAGE plpgsql AS
  $$BEGIN INSERT INTO public.cw_pwned VALUES (current_user, 'integer = integer'); RETURN true; END$$;
CREATE OPERATOR public.= (LEFTARG = integer, RIGHTARG = integer, FUNCTION = public.cw_trap_eq);
CREATE FUNCTION public.generate_series(bigint, bigint) RETURNS SETOF bigint LANGUAGE plpgsql AS
  $$BEGIN INSERT INTO public.cw_pwned VALUES (current_user, 'generate_series'); RETURN QUERY SELECT 0::bigint; END$$;
CREATE FUNCTION public.unnest(bigint[]) RETURNS SETOF bigint LANGUAGE plpgsql AS
  $$BEGIN INSERT INTO public.cw_pwned VALUES (current_user, 'unnest'); RETURN QUERY SELECT pg_catalog.unnest($1); END$$;
RESET ROLE;
SET ROLE regress_cw_alice;
SET search_path = public, pg_catalog;
SELECT streamwm.ingest('cw_alice', '[{"k": 1, "v": 1}, {"k": 2, "v": 10}, {"k": 1, "v": 2}]',
                       write_time => to_timestamp(1));
SELECT streamwm.ingest('cw_alice', '{"k": 1, "v": 3}', write_time => to_timestamp(2));
SELECT streamwm.process('cw_alice');
RESET ROLE;
SELECT streamwm.ingest('cw_alice', '[{"k": 1, "v": 4}, {"k": 2, "v": 20}]', write_time => to_timestamp(3));
SELECT streamwm.ingest('cw_alice', '{"k": 3, "v": 0}', write_time => to_timestamp(9));
SELECT streamwm.process('cw_alice');
RESET search_path;
SELECT who, what FROM cw_pwned;   -- nothing of bob's ever ran
SELECT window_seq, window_start, window_end, k, total FROM cw_alice_q ORDER BY k, window_seq;
SELECT tableowner, tablename FROM pg_tables WHERE tablename LIKE 'cw\_alice\_q%' ORDER BY 2;
SELECT query, last_error FROM streamwm.queries WHERE query = 'cw_alice_q';
-- 5b. create_count_query's helpers, called directly: bob cannot reach
-- alice's query; alice cannot get a new state table once windows were
-- emitted (it would number every group from 0 again and overwrite them);
-- a state table whose columns changed type is refused before it is read
SET ROLE regress_cw_bob;
SELECT streamwm_internal._check_count_query('cw_alice_q');
SELECT streamwm_internal._set_count_windows('cw_alice_q', 5, 5);
RESET ROLE;
SET ROLE regress_cw_alice;
SELECT streamwm_internal._set_count_windows('cw_alice_q', 5, 5);
CREATE TABLE cw_alice_before AS SELECT * FROM cw_alice_q;
SELECT streamwm.create_count_query('cw_alice_q2', 'SELECT k, count(*) AS n FROM cw_alice GROUP BY k', 2);
DROP TABLE cw_alice_q_count;
SELECT streamwm_internal._check_count_query('cw_alice_q');
SELECT to_regclass('cw_alice_q_count') AS state_table;
ALTER TABLE cw_alice_q2_count ALTER COLUMN sw_keep_t TYPE text;
SELECT streamwm.ingest('cw_alice', '[{"k": 1, "v": 5}, {"k": 1, "v": 6}, {"k": 2, "v": 30}]', write_time => to_timestamp(20));
SELECT streamwm.ingest('cw_alice', '{"k": 9, "v": 0}', write_time => to_timestamp(30));
SELECT streamwm.process('cw_alice');
SELECT query, windows_emitted, last_error FROM streamwm.queries WHERE query LIKE 'cw\_alice\_q%' ORDER BY 1;
SELECT count(*) AS changed_windows FROM ((TABLE cw_alice_q EXCEPT TABLE cw_alice_before)
                                         UNION ALL (TABLE cw_alice_before EXCEPT TABLE cw_alice_q)) d;
SELECT count(*) AS q2_windows FROM cw_alice_q2;
DROP TABLE cw_alice_before;
SELECT streamwm.drop_query('cw_alice_q2', drop_result => true);
RESET ROLE;
SELECT streamwm.drop_query('cw_alice_q', drop_result => true);
SELECT streamwm.drop_stream('cw_alice');
DROP TABLE cw_pwned;
DROP FUNCTION public.generate_series(bigint, bigint), public.unnest(bigint[]);
DROP OPERATOR public.>= (timestamptz, timestamptz), public.+ (bigint, bigint), public.= (integer, integer);
DROP FUNCTION public.cw_trap_ge(timestamptz, timestamptz), public.cw_trap_plus(bigint, bigint),
              public.cw_trap_eq(integer, integer);
REVOKE CREATE ON SCHEMA public FROM regress_cw_alice, regress_cw_bob;
DROP ROLE regress_cw_alice;
DROP ROLE regress_cw_bob;
