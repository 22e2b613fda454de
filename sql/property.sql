-- Property test: random event sequences (several partitions, out-of-order
-- times, random transaction and batch boundaries, allowed_lateness of 0 to
-- 9 s: accepted events re-fire closed windows) through the extension,
-- compared with a small reference model of the SPEC's rules written here in
-- PL/pgSQL.  Rows arrive when their transaction commits, in the order they
-- were written: the model's order.  A second stream without
-- allowed_lateness gets the same events (a NULL key for every fourth) and a
-- session query, compared with a model of sessions; a third (prop_c) gets
-- them too, with a count-window query of random size and slide (SPEC
-- section 11), compared with the events numbered from scratch.
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
-- streams here are stepped by the tests themselves (streamwm.process(now => ...)): no background worker steps in
DO $$BEGIN EXECUTE format('ALTER DATABASE %I SET streamwm.enabled = off', current_database()); END$$;
CREATE EXTENSION IF NOT EXISTS streamwm;

CREATE TEMP TABLE prop_results (seed float8, events int, partitions int, hop int, size int,
               late_model int, late_got bigint,
               late_rows_differ bigint, w_equal boolean, windows bigint, missing bigint, extra bigint,
               pane_missing bigint, pane_extra bigint, general_missing bigint, general_extra bigint,
               expr_windows bigint, expr_differ bigint, plans text,
               lateness bigint, refired bigint,
               gap bigint, session_windows bigint, session_missing bigint, session_extra bigint,
               count_size int, count_slide int, count_windows bigint, count_missing bigint,
               count_extra bigint);

-- A procedure: it commits the rows it writes, in random groups.
CREATE PROCEDURE prop_trial(seed float8)
LANGUAGE plpgsql AS $$
DECLARE
    events int; partitions int; hop int; size int; late_model int; late_got bigint;
    late_rows_differ bigint; w_equal boolean; windows bigint; missing bigint; extra bigint;
    pane_missing bigint; pane_extra bigint; general_missing bigint; general_extra bigint;
    expr_windows bigint; expr_differ bigint; plans text;
    np int;
    lateness bigint;            -- allowed_lateness, milliseconds
    refired bigint;
    gap bigint;                 -- the session query's gap, milliseconds
    session_windows bigint; session_missing bigint; session_extra bigint;
    count_size int; count_slide int; count_windows bigint; count_missing bigint; count_extra bigint;
    delay bigint;
    n int;
    clock bigint := 1000000;    -- milliseconds: the model's arithmetic is exact
    t bigint;
    p int;
    maxes bigint[];
    w numeric := NULL;          -- NULL is minus infinity
    m numeric;
    late int := 0;
    got_w timestamptz;
BEGIN
    PERFORM setseed(seed);
    np := 1 + floor(random() * 4)::int;
    delay := floor(random() * 6) * 1000;
    hop := (ARRAY[1, 2, 3, 5])[1 + floor(random() * 4)::int];
    size := hop * (ARRAY[1, 2, 5, 60])[1 + floor(random() * 4)::int];
    n := 100 + floor(random() * 200)::int;
    partitions := np;
    events := n;
    maxes := array_fill(NULL::bigint, ARRAY[np]);
    -- not drawn from random(): the trials keep their sequences
    lateness := (abs(hashint4((seed * 1000)::int + 7)) % 4) * 3000;
    gap := (ARRAY[1000, 2000, 4000, 8000])[1 + abs(hashint4((seed * 1000)::int + 11)) % 4];
    -- count windows: 1 to 7 events, every 1 to 8 (overlapping, tumbling or with gaps)
    count_size := 1 + abs(hashint4((seed * 1000)::int + 11)) % 7;
    count_slide := 1 + abs(hashint4((seed * 1000)::int + 13)) % 8;

    PERFORM streamwm.create_stream('prop_s', 'k int, v int', partitions => np,
                                   watermark_delay => make_interval(secs => delay / 1000),
                                   idle_timeout => '1 hour',
                                   allowed_lateness => make_interval(secs => lateness / 1000));
    PERFORM streamwm.create_stream('prop_c', 'k int, v int', partitions => np,
                                   watermark_delay => make_interval(secs => delay / 1000),
                                   idle_timeout => '1 hour');
    PERFORM streamwm.create_count_query('prop_cq',
        'SELECT k, count(*) AS n, sum(v) AS s, array_agg(v ORDER BY v) AS vs FROM prop_c WHERE v % 5 <> 0 GROUP BY k',
        count_size, count_slide);
    PERFORM streamwm.create_query('prop_q',
        'SELECT k, count(*) AS n, sum(v) AS s, array_agg(v ORDER BY v) AS vs FROM prop_s WHERE v % 5 <> 0 GROUP BY k',
        hop => make_interval(secs => hop), size => make_interval(secs => size));
    -- count/sum/min/max only: computed by the pane plan
    PERFORM streamwm.create_query('prop_q2',
        'SELECT k, count(*) AS n, sum(v) AS s, min(v) AS lo, max(v) AS hi, avg(v) AS av FROM prop_s WHERE v % 5 <> 0 GROUP BY k',
        hop => make_interval(secs => hop), size => make_interval(secs => size));
    -- the same query with streamwm.pane_engine off: the general plan
    PERFORM set_config('streamwm.pane_engine', 'off', true);
    PERFORM streamwm.create_query('prop_q3',
        'SELECT k, count(*) AS n, sum(v) AS s, min(v) AS lo, max(v) AS hi, avg(v) AS av FROM prop_s WHERE v % 5 <> 0 GROUP BY k',
        hop => make_interval(secs => hop), size => make_interval(secs => size));
    -- expressions over aggregates, FILTER and HAVING, with the engine off
    -- (general) and on (whichever plan the engine gives it)
    PERFORM streamwm.create_query('prop_q4_off',
        'SELECT k, count(*) FILTER (WHERE v % 2 = 0) AS ev, max(v) - min(v) AS spread, sum(v) * 2 + count(v) AS mix FROM prop_s WHERE v % 5 <> 0 GROUP BY k HAVING count(*) > 1',
        hop => make_interval(secs => hop), size => make_interval(secs => size));
    PERFORM set_config('streamwm.pane_engine', 'on', true);
    PERFORM streamwm.create_query('prop_q4_on',
        'SELECT k, count(*) FILTER (WHERE v % 2 = 0) AS ev, max(v) - min(v) AS spread, sum(v) * 2 + count(v) AS mix FROM prop_s WHERE v % 5 <> 0 GROUP BY k HAVING count(*) > 1',
        hop => make_interval(secs => hop), size => make_interval(secs => size));
    -- sessions: a stream without allowed_lateness (session queries refuse it)
    PERFORM streamwm.create_stream('prop_ss', 'k int, v int', partitions => np,
                                   watermark_delay => make_interval(secs => delay / 1000),
                                   idle_timeout => '1 hour');
    PERFORM streamwm.create_session_query('prop_sq',
        'SELECT k, count(*) AS n, sum(v) AS s, array_agg(v ORDER BY v) AS vs FROM prop_ss WHERE v % 5 <> 0 GROUP BY k',
        gap => make_interval(secs => gap / 1000.0));
    -- the same without array_agg: it keeps its open sessions as partial states
    PERFORM streamwm.create_session_query('prop_sk',
        'SELECT k, count(*) AS n, sum(v) AS s FROM prop_ss WHERE v % 5 <> 0 GROUP BY k',
        gap => make_interval(secs => gap / 1000.0));
    SELECT string_agg(q.query || '=' || q.plan, ' ' ORDER BY q.query) INTO plans
      FROM streamwm.queries q WHERE q.query IN ('prop_q', 'prop_q2', 'prop_q3');
    CREATE TEMP TABLE model_events (i int, p int, t bigint, k int, v int, late boolean,
                                    late0 boolean);   -- late without allowed_lateness (prop_c)
    COMMIT;

    FOR i IN 1..n LOOP
        clock := clock + floor(random() * 2000)::bigint;
        t := clock - floor(random() * 10000)::bigint + 2000;
        p := floor(random() * np)::int;
        -- the model: late if t < W - allowed_lateness, every event advances
        -- its partition, W = max(W, min wm)
        INSERT INTO model_events VALUES (i, p, t, i % 3, i, coalesce(t < w - lateness, false),
                                         coalesce(t < w, false));
        IF t < w - lateness THEN late := late + 1; END IF;
        maxes[p + 1] := greatest(maxes[p + 1], t);
        IF array_position(maxes, NULL) IS NULL THEN    -- no partition is still empty
            m := (SELECT min(x) FROM unnest(maxes) x) - delay;
            w := greatest(w, m);
        END IF;
        -- the extension
        INSERT INTO prop_s (sw_partition, sw_write_time, k, v)
             VALUES (p, 'epoch'::timestamptz + t * interval '1 millisecond', i % 3, i);
        INSERT INTO prop_ss (sw_partition, sw_write_time, k, v)
             VALUES (p, 'epoch'::timestamptz + t * interval '1 millisecond', nullif(i % 4, 3), i);
        INSERT INTO prop_c (sw_partition, sw_write_time, k, v)
             VALUES (p, 'epoch'::timestamptz + t * interval '1 millisecond', i % 3, i);
        -- transactions of one to a few rows (not drawn from random(): the
        -- trials keep their sequences)
        IF hashint4(i + (seed * 1000)::int) % 4 <> 0 THEN
            COMMIT;
        END IF;
        IF random() < 0.25 THEN
            COMMIT;
            PERFORM streamwm.process('prop_s', now => clock_timestamp());
            PERFORM streamwm.process('prop_ss', now => clock_timestamp());
            PERFORM streamwm.process('prop_c', now => clock_timestamp());
        END IF;
    END LOOP;
    COMMIT;
    PERFORM streamwm.process('prop_s', now => clock_timestamp());
    PERFORM streamwm.process('prop_ss', now => clock_timestamp());

    -- the model's sessions: per key (NULL a key), over the events not late
    -- with lateness 0 that pass the WHERE, a session starts at an event with
    -- no other in the gap before it; closed when last + gap <= W
    CREATE TEMP TABLE model_sessions AS
    WITH a AS (SELECT nullif(e.i % 4, 3) AS sk, e.t AS st, e.v AS sv FROM model_events e
                WHERE NOT e.late0 AND e.v % 5 <> 0),
    b AS (SELECT DISTINCT x.sk, x.st AS first FROM a x
           WHERE NOT EXISTS (SELECT 1 FROM a y WHERE y.sk IS NOT DISTINCT FROM x.sk
                               AND y.st < x.st AND y.st > x.st - gap)),
    c AS (SELECT a.*, (SELECT max(b.first) FROM b WHERE b.sk IS NOT DISTINCT FROM a.sk
                          AND b.first <= a.st) AS first
            FROM a)
    SELECT 'epoch'::timestamptz + c.first * interval '1 millisecond' AS window_start,
           'epoch'::timestamptz + (max(c.st) + gap) * interval '1 millisecond' AS window_end,
           c.sk AS k, count(*) AS n, sum(c.sv) AS s, array_agg(c.sv ORDER BY c.sv) AS vs
      FROM c GROUP BY c.sk, c.first HAVING max(c.st) + gap <= w;
    SELECT count(*) INTO session_windows FROM prop_sq;
    SELECT count(*) INTO session_missing FROM (SELECT * FROM model_sessions EXCEPT SELECT * FROM prop_sq) d;
    SELECT count(*) INTO session_extra FROM (SELECT * FROM prop_sq EXCEPT SELECT * FROM model_sessions) d;
    session_missing := session_missing + (SELECT count(*) FROM (
        SELECT m.window_start, m.window_end, m.k, m.n, m.s FROM model_sessions m EXCEPT TABLE prop_sk) d);
    session_extra := session_extra + (SELECT count(*) FROM (
        TABLE prop_sk EXCEPT SELECT m.window_start, m.window_end, m.k, m.n, m.s FROM model_sessions m) d);
    PERFORM streamwm.process('prop_c', now => clock_timestamp());

    late_model := late;
    SELECT s.late_events, s.watermark INTO late_got, got_w FROM streamwm.streams s
     WHERE s.stream = 'prop_s'::regclass;
    w_equal := coalesce('epoch'::timestamptz + w * interval '1 millisecond', '-infinity') = got_w;
    SELECT count(*) INTO late_rows_differ FROM (
        (SELECT e.v FROM model_events e WHERE e.late
         EXCEPT SELECT s.v FROM prop_s s JOIN streamwm.late_events l
                  ON l.stream = 'prop_s'::regclass AND l.sw_offset = s.sw_offset)
        UNION ALL
        (SELECT s.v FROM prop_s s JOIN streamwm.late_events l
                  ON l.stream = 'prop_s'::regclass AND l.sw_offset = s.sw_offset
         EXCEPT SELECT e.v FROM model_events e WHERE e.late)) d;

    SELECT sum(q.windows_refired) INTO refired FROM streamwm.queries q
     WHERE q.stream = 'prop_s'::regclass;

    -- the model's windows: [j*hop, j*hop + size) closed by the final W,
    -- over every accepted event (those that came within allowed_lateness
    -- re-fired the windows that had closed)
    CREATE TEMP TABLE model_result AS
    SELECT 'epoch'::timestamptz + ws * interval '1 second' AS window_start,
           'epoch'::timestamptz + (ws + size) * interval '1 second' AS window_end,
           e.k, count(*) AS n, sum(e.v) AS s, array_agg(e.v ORDER BY e.v) AS vs
      FROM model_events e,
           LATERAL (SELECT (floor(e.t / (hop * 1000.0)) - j) * hop AS ws
                      FROM generate_series(0, size / hop - 1) j) x
     WHERE NOT e.late AND e.v % 5 <> 0 AND (ws + size) * 1000 <= w
     GROUP BY ws, e.k;
    SELECT count(*) INTO windows FROM prop_q;
    SELECT count(*) INTO missing FROM (SELECT * FROM model_result EXCEPT SELECT * FROM prop_q) d;
    SELECT count(*) INTO extra FROM (SELECT * FROM prop_q EXCEPT SELECT * FROM model_result) d;
    SELECT count(*) INTO pane_missing FROM (
        SELECT m.window_start, m.window_end, m.k, m.n, m.s, m.vs[1], m.vs[array_length(m.vs, 1)],
               m.s::numeric / m.n FROM model_result m
        EXCEPT SELECT * FROM prop_q2) d;
    SELECT count(*) INTO pane_extra FROM (
        SELECT * FROM prop_q2
        EXCEPT SELECT m.window_start, m.window_end, m.k, m.n, m.s, m.vs[1], m.vs[array_length(m.vs, 1)],
                      m.s::numeric / m.n FROM model_result m) d;

    SELECT count(*) INTO general_missing FROM (
        SELECT m.window_start, m.window_end, m.k, m.n, m.s, m.vs[1], m.vs[array_length(m.vs, 1)],
               m.s::numeric / m.n FROM model_result m
        EXCEPT SELECT * FROM prop_q3) d;
    SELECT count(*) INTO general_extra FROM (
        SELECT * FROM prop_q3
        EXCEPT SELECT m.window_start, m.window_end, m.k, m.n, m.s, m.vs[1], m.vs[array_length(m.vs, 1)],
                      m.s::numeric / m.n FROM model_result m) d;
    -- the model of prop_q4_*: from the same windows, HAVING count(*) > 1
    CREATE TEMP TABLE model_expr AS
    SELECT m.window_start, m.window_end, m.k,
           (SELECT count(*) FROM unnest(m.vs) x WHERE x % 2 = 0) AS ev,
           m.vs[array_length(m.vs, 1)] - m.vs[1] AS spread, m.s * 2 + m.n AS mix
      FROM model_result m WHERE m.n > 1;
    SELECT count(*) INTO expr_windows FROM model_expr;
    SELECT count(*) INTO expr_differ FROM (
        (SELECT * FROM model_expr EXCEPT SELECT * FROM prop_q4_off) UNION ALL
        (SELECT * FROM prop_q4_off EXCEPT SELECT * FROM model_expr) UNION ALL
        (SELECT * FROM model_expr EXCEPT SELECT * FROM prop_q4_on) UNION ALL
        (SELECT * FROM prop_q4_on EXCEPT SELECT * FROM model_expr)) d;

    -- count windows: per k, the accepted events below the final W that
    -- pass the WHERE, numbered by (event time, partition, arrival)
    CREATE TEMP TABLE model_count AS
    SELECT c.seq AS window_seq, min(x.ts) AS window_start, max(x.ts) AS window_end, x.k,
           count(*) AS n, sum(x.v) AS s, array_agg(x.v ORDER BY x.v) AS vs
      FROM (SELECT e.*, 'epoch'::timestamptz + e.t * interval '1 millisecond' AS ts,
                   row_number() OVER (PARTITION BY e.k ORDER BY e.t, e.p, e.i) - 1 AS num,
                   count(*) OVER (PARTITION BY e.k) AS total
              FROM model_events e WHERE NOT e.late0 AND e.v % 5 <> 0 AND e.t < w) x,
           LATERAL generate_series(0, x.num / count_slide) c(seq)
     WHERE x.num >= c.seq * count_slide AND x.num < c.seq * count_slide + count_size
       AND c.seq * count_slide + count_size <= x.total
     GROUP BY c.seq, x.k;
    SELECT count(*) INTO count_windows FROM prop_cq;
    SELECT count(*) INTO count_missing FROM (TABLE model_count EXCEPT TABLE prop_cq) d;
    SELECT count(*) INTO count_extra FROM (TABLE prop_cq EXCEPT TABLE model_count) d;

    PERFORM streamwm.drop_stream('prop_s', cascade => true);
    PERFORM streamwm.drop_stream('prop_ss', cascade => true);
    PERFORM streamwm.drop_stream('prop_c', cascade => true);
    DROP TABLE prop_cq, model_count;
    DROP TABLE prop_q, prop_q2, prop_q3, prop_q4_off, prop_q4_on, model_events, model_result, model_expr,
               prop_sq, prop_sk, model_sessions;
    INSERT INTO prop_results VALUES (seed, events, partitions, hop, size, late_model, late_got,
        late_rows_differ, w_equal, windows, missing, extra, pane_missing, pane_extra,
        general_missing, general_extra, expr_windows, expr_differ, plans, lateness, refired,
        gap, session_windows, session_missing, session_extra,
        count_size, count_slide, count_windows, count_missing, count_extra);
    COMMIT;
END $$;
DO $$BEGIN FOR seed IN 1..12 LOOP CALL prop_trial(seed / 13.0); END LOOP; END$$;

-- Each row is one random trial; every trial must agree with the model,
-- prop_q2 by the pane plan and prop_q3 (the same query) by the general one.
SELECT round(r.seed * 13)::int AS seed, r.size / r.hop AS ratio, r.lateness / 1000 AS lateness,
       r.refired > 0 AS refired, r.late_model = r.late_got AS late_count_ok, r.late_rows_differ, r.w_equal,
       r.windows > 0 AS has_windows, r.missing, r.extra, r.pane_missing, r.pane_extra,
       r.general_missing, r.general_extra, r.expr_windows > 0 AS has_expr, r.expr_differ, r.plans,
       r.gap / 1000 AS gap, r.session_windows > 0 AS has_sessions, r.session_missing, r.session_extra
  FROM prop_results r ORDER BY r.seed;
-- count windows (prop_cq over prop_c, the same rows without allowed_lateness)
SELECT round(r.seed * 13)::int AS seed, r.partitions, r.count_size, r.count_slide,
       r.count_windows > 0 AS has_count_windows, r.count_missing, r.count_extra
  FROM prop_results r ORDER BY r.seed;
