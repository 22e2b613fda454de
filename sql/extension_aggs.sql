-- Aggregates of other extensions in window queries (SPEC section 5: "any
-- PostgreSQL aggregate ... user-defined ones"): hll's hll_add_agg and
-- tdigest's tdigest_percentile, both with a combine function, each query
-- created with streamwm.pane_engine on and off, compared with the same
-- aggregate computed directly over each closed window's rows (the model:
-- every row in each window [n*hop, n*hop + size) that holds it, windows
-- closed by the stream's watermark, late rows left out).
-- test/setup.sh installs postgresql-15-hll and postgresql-15-tdigest; where
-- they are missing the test says so and checks nothing
-- (expected/extension_aggs_1.out).
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
SET extra_float_digits = 0;
-- streams here are stepped by the tests themselves (streamwm.process(now => ...)): no background worker steps in
DO $$BEGIN EXECUTE format('ALTER DATABASE %I SET streamwm.enabled = off', current_database()); END$$;
CREATE EXTENSION IF NOT EXISTS streamwm;
SELECT count(*) = 2 AS have_sketches FROM pg_available_extensions WHERE name IN ('hll', 'tdigest') \gset
\if :have_sketches
CREATE EXTENSION hll;
CREATE EXTENSION tdigest;

SELECT streamwm.create_stream('sk', 'i int, k int, v int, f float8', partitions => 2,
                              watermark_delay => '1 s', idle_timeout => '1 hour') IS NOT NULL AS created;

CREATE TABLE sk_case (name text PRIMARY KEY, sel text, approx text[]);
CREATE TABLE sk_shape (shape text PRIMARY KEY, hop interval, size interval);
INSERT INTO sk_shape VALUES ('5x1', '1 s', '5 s'), ('60x1', '1 s', '60 s');
-- few rows per window and compression 10000: each value stays its own
-- centroid, so a combined digest equals a one-pass one (within rounding)
INSERT INTO sk_case VALUES
('hll',     'k, hll_cardinality(hll_add_agg(hll_hash_integer(v)))::bigint AS dv, count(*) AS n', '{}'),
('tdigest', 'k, tdigest_percentile(f, 10000, 0.5) AS med, tdigest_percentile(f, 10000, 0.9) AS p90', '{med,p90}'),
('mixed',   'k, hll_cardinality(hll_add_agg(hll_hash_integer(v)))::bigint AS dv,
             tdigest_percentile(f, 10000, 0.25) AS q1, sum(v) AS s', '{q1}');

DO $$
DECLARE c record; sh record; e text;
BEGIN
    FOR c IN SELECT * FROM sk_case ORDER BY name LOOP
        FOR sh IN SELECT * FROM sk_shape ORDER BY shape LOOP
            FOREACH e IN ARRAY ARRAY['on', 'off'] LOOP
                PERFORM set_config('streamwm.pane_engine', e, true);
                PERFORM streamwm.create_query(format('sk_%s_%s_%s', c.name, sh.shape, e),
                    format('SELECT %s FROM sk GROUP BY k', c.sel), hop => sh.hop, size => sh.size);
            END LOOP;
        END LOOP;
    END LOOP;
END $$;
-- the plans (the one part that changes when the engine takes these aggregates)
SELECT query, plan FROM streamwm.queries WHERE query LIKE 'sk\_%' ORDER BY query;

-- 400 rows over 100 s, out of order by up to 2 s, in four steps; the first
-- rows of each step 6 s behind (some late)
-- a procedure: rows arrive when their transaction commits
CREATE PROCEDURE sk_rows(lo int, hi int) LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO sk (sw_partition, sw_write_time, i, k, v, f)
    SELECT i % 2, to_timestamp(2000 + i * 0.25 + ((i * 7919) % 11 - 5) * 0.4 - CASE WHEN i < lo + 4 THEN 6 ELSE 0 END),
           i, (i * 7) % 3, CASE WHEN i % 19 = 0 THEN NULL ELSE (i * 31) % 29 END, ((i * 37) % 101) * 0.37 - 5
      FROM generate_series(lo, hi) i ORDER BY i;
  COMMIT;
  PERFORM streamwm.process('sk', now => '1970-01-01 02:00:00+00');
END $$;
CALL sk_rows(1, 100);
CALL sk_rows(101, 220);
CALL sk_rows(221, 330);
CALL sk_rows(331, 400);
SELECT late_events > 0 AS some_late FROM streamwm.streams WHERE stream = 'sk'::regclass;
SELECT count(*) AS query_errors FROM streamwm.queries WHERE query LIKE 'sk\_%' AND last_error IS NOT NULL;

CREATE FUNCTION sk_compare(result regclass, sel text, hop interval, size interval, approx text[],
                           OUT model_rows bigint, OUT differences bigint)
LANGUAGE plpgsql AS $$
DECLARE exact text; joined text; close text; d bigint;
BEGIN
    EXECUTE format($m$CREATE TEMP TABLE sk_m AS
        SELECT sk.ws AS window_start, sk.ws + %2$L::interval AS window_end, %3$s
          FROM (SELECT s.*, w.ws FROM sk s,
                       generate_series(date_bin(%1$L, s.sw_event_time, 'epoch') - (%2$L::interval - %1$L::interval),
                                       date_bin(%1$L, s.sw_event_time, 'epoch'), %1$L::interval) w(ws)
                 WHERE w.ws + %2$L::interval <= (SELECT watermark FROM streamwm.streams WHERE stream = 'sk'::regclass)
                   AND NOT EXISTS (SELECT 1 FROM streamwm.late_events l WHERE l.stream = 'sk'::regclass
                                      AND l.partition = s.sw_partition AND l.sw_offset = s.sw_offset)) sk
         GROUP BY sk.ws, k$m$, hop, size, sel);
    SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum),
           string_agg(format('r.%1$I IS NOT DISTINCT FROM m.%1$I', attname), ' AND ' ORDER BY attnum)
      INTO exact, joined
      FROM pg_attribute WHERE attrelid = result AND attnum > 0 AND NOT attisdropped AND attname <> ALL (approx);
    SELECT count(*) INTO model_rows FROM sk_m;
    EXECUTE format('SELECT count(*) FROM ((SELECT %1$s FROM %2$s EXCEPT SELECT %1$s FROM sk_m)
                                UNION ALL (SELECT %1$s FROM sk_m EXCEPT SELECT %1$s FROM %2$s)) d',
                   exact, result) INTO differences;
    IF cardinality(approx) > 0 THEN
        SELECT string_agg(format('((r.%1$I IS NULL AND m.%1$I IS NULL) OR abs(r.%1$I - m.%1$I) <= 1e-9 * greatest(1, abs(m.%1$I)))', a),
                          ' AND ') INTO close FROM unnest(approx) a;
        EXECUTE format('SELECT count(*) FROM %s r JOIN sk_m m ON %s WHERE NOT (%s)', result, joined, close) INTO d;
        differences := differences + d;
    END IF;
    DROP TABLE sk_m;
END $$;

SELECT c.name, sh.shape, m.model_rows, m.model_rows > 0 AS compared,
       m.differences AS diff_on, f.differences AS diff_off
  FROM sk_case c CROSS JOIN sk_shape sh,
       LATERAL sk_compare(format('sk_%s_%s_on', c.name, sh.shape)::regclass, c.sel, sh.hop, sh.size, c.approx) m,
       LATERAL sk_compare(format('sk_%s_%s_off', c.name, sh.shape)::regclass, c.sel, sh.hop, sh.size, c.approx) f
 ORDER BY c.name, sh.shape;

SELECT streamwm.drop_stream('sk', cascade => true);
DO $$
DECLARE r record;
BEGIN
    FOR r IN SELECT relname FROM pg_class WHERE relname LIKE 'sk\_%' AND relkind = 'r'
               AND relname NOT IN ('sk_case', 'sk_shape') LOOP
        EXECUTE format('DROP TABLE IF EXISTS %I', r.relname);
    END LOOP;
END $$;
DROP FUNCTION sk_compare(regclass, text, interval, interval, text[]);
DROP PROCEDURE sk_rows(int, int);
DROP TABLE sk_case, sk_shape;
DROP EXTENSION tdigest;
DROP EXTENSION hll;
\else
\echo hll or tdigest is not installed here: nothing to check (test/setup.sh installs them)
\endif
