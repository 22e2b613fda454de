-- The window engine against a model (SPEC section 5).  Each case is one
-- query, given as its parts (select list, WHERE, GROUP BY, HAVING); it is
-- created for three window shapes (size/hop = 1, 3 and 60), each twice:
-- with streamwm.pane_engine on and off.  The model is the same parts run
-- by plain SQL over the stream table's rows, each row expanded into every
-- window [n*hop, n*hop + size) that contains it (date_bin, not the
-- extension's arithmetic), keeping only the windows the stream's watermark
-- has closed and leaving out the rows streamwm.late_events lists.  Every
-- result table must equal its model both ways (EXCEPT in both directions;
-- float outputs within a relative 1e-7, since a combine adds in another
-- order than a one-pass aggregate).  Only the plan each query got may
-- change with the engine: it is shown in one query, near the top.
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
SET extra_float_digits = 0;
-- streams here are stepped by the tests themselves (streamwm.process(now => ...)): no background worker steps in
DO $$BEGIN EXECUTE format('ALTER DATABASE %I SET streamwm.enabled = off', current_database()); END$$;
CREATE EXTENSION IF NOT EXISTS streamwm;

-- tu sorts case-insensitively first ('a' < 'B'), t by code point ('B' < 'a')
SELECT streamwm.create_stream('eng',
    'i int, k int, v int, i2 int2, i8 int8, nm numeric, f4 float4, f8 float8,
     t text, tu text COLLATE "en-x-icu", ts timestamptz, b bool, x float8, y float8',
    partitions => 3, watermark_delay => '1 s', idle_timeout => '1 hour') IS NOT NULL AS created;

CREATE TABLE eng_case (
    name     text PRIMARY KEY,
    sel      text NOT NULL,            -- the select list
    wh       text,                     -- WHERE
    grp      text,                     -- GROUP BY
    hav      text,                     -- HAVING
    approx   text[] NOT NULL DEFAULT '{}'   -- float outputs: compared within 1e-7
);
CREATE TABLE eng_shape (shape text PRIMARY KEY, hop interval, size interval);
CREATE TABLE eng_made (name text, shape text, engine text, query text);
INSERT INTO eng_shape VALUES ('1x1', '1 s', '1 s'), ('3x2', '2 s', '6 s'), ('60x1', '1 s', '60 s');

INSERT INTO eng_case (name, sel, wh, grp, hav, approx) VALUES
-- 1. expressions over aggregates, FILTER, HAVING, GROUP BY expressions, no GROUP BY
('expr',      'k, sum(v)::float8 / count(*) AS r, count(*) FILTER (WHERE v > 5) AS big, max(v) - min(v) AS spread',
              NULL, 'k', 'count(*) > 1', '{r}'),
('grp_expr',  'k % 3 AS m, k % 3 + 1 AS m1, count(*) AS n, sum(v) AS s',
              NULL, 'k % 3', NULL, '{}'),
('having_only', 'k, count(*) AS n', NULL, 'k', 'sum(v) > 12', '{}'),
('no_group',  'count(*) AS n, sum(v) AS s', 'v > 3', NULL, NULL, '{}'),
('filter_mix', 'k, sum(v) FILTER (WHERE b) AS sb, avg(v) FILTER (WHERE v < 10) AS av, count(t) FILTER (WHERE t > ''b'') AS ct',
              'i % 4 <> 0', 'k', 'count(*) FILTER (WHERE v IS NULL) = 0 OR max(v) > 15', '{}'),
-- 2. the combinable aggregates
('counts',    'k, count(*) AS n, count(v) AS nv, count(t) AS nt, count(1) AS n1', NULL, 'k', NULL, '{}'),
('sum_int',   'k, sum(i2) AS s2, sum(v) AS s4, sum(i8) AS s8, sum(nm) AS sn', NULL, 'k', NULL, '{}'),
('avg_int',   'k, avg(i2) AS a2, avg(v) AS a4, avg(i8) AS a8, avg(nm) AS an', NULL, 'k', NULL, '{}'),
('float',     'k, sum(f4) AS s4, sum(f8) AS s8, avg(f4) AS a4, avg(f8) AS a8, sum(v::float8) AS sv',
              NULL, 'k', NULL, '{s4,s8,a4,a8,sv}'),
('float_sum', 'k, sum(f4) AS s4, sum(f8) AS s8, sum(v::float8) AS sv, sum(x * y) AS sxy, min(f8) AS lo, max(f4) AS hi',
              NULL, 'k', NULL, '{s4,s8,sv,sxy}'),
('minmax',    'k, min(v) AS lo, max(v) AS hi, min(nm) AS nlo, max(nm) AS nhi, min(ts) AS tlo, max(ts) AS thi,
               min(f8) AS flo, max(f4) AS fhi', NULL, 'k', NULL, '{}'),
('minmax_text', 'k, min(t) AS lo, max(t) AS hi, min(t COLLATE "C") AS loc, max(tu COLLATE "C") AS hic',
              NULL, 'k', NULL, '{}'),
('minmax_icu', 'k, min(tu) AS lo, max(tu) AS hi', NULL, 'k', NULL, '{}'),
('stats_int', 'k, stddev(v) AS sd, stddev_pop(v) AS sdp, variance(v) AS var, var_pop(v) AS varp,
               stddev_samp(i8) AS sd8, var_samp(i2) AS var2', NULL, 'k', NULL, '{}'),
('stats_float', 'k, stddev(f8) AS sd, stddev_pop(f8) AS sdp, variance(f8) AS var, var_pop(f8) AS varp',
              NULL, 'k', NULL, '{sd,sdp,var,varp}'),
('bools',     'k, bool_and(b) AS ba, bool_or(b) AS bo, every(b) AS ev, bit_and(v) AS band, bit_or(v) AS bor,
               bit_and(i2) AS band2, bit_or(i8) AS bor8', NULL, 'k', NULL, '{}'),
('regr',      'k, corr(y, x) AS c, regr_slope(y, x) AS sl, regr_intercept(y, x) AS ic, covar_pop(y, x) AS cp,
               regr_count(y, x) AS rc', NULL, 'k', NULL, '{c,sl,ic,cp}'),
('null_keys', 't, k, count(*) AS n, sum(v) AS s, max(v) AS hi', NULL, 't, k', NULL, '{}'),
-- 3. the aggregates without a combine function (and DISTINCT / ORDER BY in the call)
('ordered_set', 'k, percentile_cont(0.5) WITHIN GROUP (ORDER BY v) AS med, mode() WITHIN GROUP (ORDER BY v) AS mo,
               percentile_disc(0.25) WITHIN GROUP (ORDER BY i2) AS q1', NULL, 'k', NULL, '{}'),
('arrays',    'k, array_agg(v ORDER BY v) AS vs, string_agg(t, '','' ORDER BY t) AS ts', NULL, 'k', NULL, '{}'),
('distinct',  'k, count(DISTINCT v) AS nd, sum(DISTINCT v) AS sd, count(DISTINCT t) AS ntd', NULL, 'k', NULL, '{}'),
('json',      'k, json_agg(v ORDER BY i)::text AS ja, jsonb_object_agg(i::text, v) AS jo, jsonb_agg(t ORDER BY i) AS jt',
              NULL, 'k', NULL, '{}'),
('mixed',     'k, count(*) AS n, sum(v) AS s, array_agg(i ORDER BY i) AS ids', 'v IS NOT NULL', 'k', 'count(*) > 1', '{}');

-- the query text of a case, and its model over the windows of a shape
CREATE FUNCTION eng_query(c eng_case) RETURNS text LANGUAGE sql AS $$
  SELECT 'SELECT ' || c.sel || ' FROM eng' || coalesce(' WHERE ' || c.wh, '')
         || coalesce(' GROUP BY ' || c.grp, '') || coalesce(' HAVING ' || c.hav, '')
$$;
CREATE FUNCTION eng_model(c eng_case, hop interval, size interval) RETURNS text LANGUAGE sql AS $$
  SELECT format($m$SELECT eng.ws AS window_start, eng.ws + %2$L::interval AS window_end, %3$s
    FROM (SELECT s.*, w.ws
            FROM eng s,
                 generate_series(date_bin(%1$L, s.sw_event_time, 'epoch') - (%2$L::interval - %1$L::interval),
                                 date_bin(%1$L, s.sw_event_time, 'epoch'), %1$L::interval) w(ws)
           WHERE w.ws + %2$L::interval <= (SELECT watermark FROM streamwm.streams WHERE stream = 'eng'::regclass)
             AND NOT EXISTS (SELECT 1 FROM streamwm.late_events l
                              WHERE l.stream = 'eng'::regclass AND l.partition = s.sw_partition
                                AND l.sw_offset = s.sw_offset)) eng
    %4$s GROUP BY eng.ws%5$s %6$s$m$,
    hop, size, c.sel, coalesce('WHERE ' || c.wh, ''), coalesce(', ' || c.grp, ''),
    coalesce('HAVING ' || c.hav, ''))
$$;

-- every case, shape and engine setting: result table eng_<case>_<shape>_<on|off>
CREATE FUNCTION eng_create() RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    c eng_case;
    sh eng_shape;
    e text;
BEGIN
    FOR c IN SELECT * FROM eng_case ORDER BY name LOOP
        FOR sh IN SELECT * FROM eng_shape ORDER BY shape LOOP
            FOREACH e IN ARRAY ARRAY['on', 'off'] LOOP
                PERFORM set_config('streamwm.pane_engine', e, true);
                PERFORM streamwm.create_query(format('eng_%s_%s_%s', c.name, sh.shape, e),
                                              eng_query(c), hop => sh.hop, size => sh.size);
                INSERT INTO eng_made VALUES (c.name, sh.shape, e, format('eng_%s_%s_%s', c.name, sh.shape, e));
            END LOOP;
        END LOOP;
    END LOOP;
END $$;
SELECT eng_create();
SHOW streamwm.pane_engine;

-- THE PLANS (the one part of this file that changes with the engine):
-- the plan each case got with the engine on, for every shape; off is
-- always general
SELECT m.name,
       string_agg(DISTINCT q.plan, ',') FILTER (WHERE m.engine = 'on') AS engine_on,
       string_agg(DISTINCT q.plan, ',') FILTER (WHERE m.engine = 'off') AS engine_off,
       count(*) AS queries
  FROM eng_made m JOIN streamwm.queries q ON q.query = m.query
 GROUP BY m.name ORDER BY m.name;

-- the rows: three partitions, event times out of order by up to 2 s,
-- NULL keys and inputs, in four steps; rows spread over 150 s so that
-- windows of 60 s span steps; each step's first rows are 6 s behind, so
-- that some are late (behind the watermark the step before left)
-- a procedure: rows arrive when their transaction commits
CREATE PROCEDURE eng_rows(lo int, hi int) LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO eng (sw_partition, sw_write_time, i, k, v, i2, i8, nm, f4, f8, t, tu, ts, b, x, y)
    SELECT i % 3, to_timestamp(1000 + i * 0.3 + ((i * 7919) % 11 - 5) * 0.4 - CASE WHEN i < lo + 6 THEN 6 ELSE 0 END),
           i, k, v, v::int2, v::int8 * 1000000007, round(v::numeric / 4, 2), (v * 0.5)::float4,
           v * 0.25 + 0.1, t, t, 'epoch'::timestamptz + ((i * 97) % 1000) * interval '1 minute',
           v > 5, v::float8, 2 * v + (i % 5) * 0.5
      FROM generate_series(lo, hi) i,
           LATERAL (SELECT CASE WHEN i % 17 = 0 THEN NULL ELSE (i * 13) % 5 END AS k,
                           CASE WHEN i % 11 = 0 THEN NULL ELSE (i * 31) % 23 - 3 END AS v,
                           CASE WHEN i % 13 = 0 THEN NULL
                                ELSE (ARRAY['a', 'B', 'c', 'D', 'ab', 'Ab', 'b'])[1 + (i / 2 * 3) % 7] END AS t) x
     ORDER BY i;
  COMMIT;
  PERFORM streamwm.process('eng', now => '1970-01-01 02:00:00+00');
END $$;
CALL eng_rows(1, 120);
CALL eng_rows(121, 260);
-- one row far behind the watermark: late, in no window
SELECT streamwm.ingest('eng', '{"i": 0, "k": 1, "v": 1000, "t": "late"}', partition => 1,
                       write_time => to_timestamp(1010)) AS stored;
CALL eng_rows(261, 380);
CALL eng_rows(381, 500);
SELECT watermark, events, late_events > 1 AS some_late,
       (SELECT count(*) FROM eng JOIN streamwm.late_events l ON l.stream = 'eng'::regclass
          AND l.partition = eng.sw_partition AND l.sw_offset = eng.sw_offset WHERE eng.i = 0) AS late_row_listed
  FROM streamwm.streams WHERE stream = 'eng'::regclass;
SELECT count(*) AS query_errors FROM streamwm.queries WHERE query LIKE 'eng\_%' AND last_error IS NOT NULL;

-- a result table against its model: the model's rows and windows (both
-- must be > 0) and the rows that differ, both ways
CREATE FUNCTION eng_approx_eq(a float8, b float8) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
  SELECT (a IS NULL AND b IS NULL) OR abs(a - b) <= 1e-7 * greatest(1, abs(a), abs(b))
$$;
CREATE FUNCTION eng_compare(result regclass, model text, approx text[],
                            OUT model_rows bigint, OUT model_windows bigint, OUT differences bigint)
LANGUAGE plpgsql AS $$
DECLARE
    exact text;
    joined text;
    close text;
    d bigint;
BEGIN
    EXECUTE 'CREATE TEMP TABLE eng_m AS ' || model;
    SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum),
           string_agg(format('r.%1$I IS NOT DISTINCT FROM m.%1$I', attname), ' AND ' ORDER BY attnum)
      INTO exact, joined
      FROM pg_attribute WHERE attrelid = result AND attnum > 0 AND NOT attisdropped
       AND attname <> ALL (approx);
    EXECUTE format('SELECT count(*), count(DISTINCT window_start) FROM eng_m') INTO model_rows, model_windows;
    EXECUTE format('SELECT count(*) FROM ((SELECT %1$s FROM %2$s EXCEPT SELECT %1$s FROM eng_m)
                                UNION ALL (SELECT %1$s FROM eng_m EXCEPT SELECT %1$s FROM %2$s)) d',
                   exact, result) INTO differences;
    IF cardinality(approx) > 0 THEN
        SELECT string_agg(format('eng_approx_eq(r.%1$I, m.%1$I)', a), ' AND ') INTO close
          FROM unnest(approx) a;
        EXECUTE format('SELECT count(*) FROM %s r JOIN eng_m m ON %s WHERE NOT (%s)', result, joined, close)
           INTO d;
        differences := differences + d;
    END IF;
    DROP TABLE eng_m;
END $$;

-- every case, shape and setting: the model's size, and no difference
SELECT c.name, sh.shape, m.model_rows, m.model_windows,
       m.model_rows > 0 AND m.model_windows > 0 AS compared,
       m.differences AS diff_on, f.differences AS diff_off
  FROM eng_case c CROSS JOIN eng_shape sh,
       LATERAL eng_compare(format('eng_%s_%s_on', c.name, sh.shape)::regclass,
                           eng_model(c, sh.hop, sh.size), c.approx) m,
       LATERAL eng_compare(format('eng_%s_%s_off', c.name, sh.shape)::regclass,
                           eng_model(c, sh.hop, sh.size), c.approx) f
 ORDER BY c.name, sh.shape;

SELECT streamwm.drop_stream('eng', cascade => true);
DO $$
DECLARE r record;
BEGIN
    FOR r IN SELECT relname FROM pg_class WHERE relname LIKE 'eng\_%' AND relkind = 'r'
               AND relname NOT IN ('eng_case', 'eng_shape', 'eng_made') LOOP
        EXECUTE format('DROP TABLE IF EXISTS %I', r.relname);
    END LOOP;
END $$;
DROP FUNCTION eng_compare(regclass, text, text[]), eng_approx_eq(float8, float8),
              eng_create(), eng_model(eng_case, interval, interval), eng_query(eng_case);
DROP PROCEDURE eng_rows(int, int);
DROP TABLE eng_case, eng_shape, eng_made;
