-- SPEC section 5: a window query is understood as PostgreSQL understands
-- it.  Every spelling of the stream works and every reference to it reads
-- only the window's rows; a NULL group key is a group like any other.
-- Each query is compared with a model: the same text run over a table
-- holding exactly one window's non-late rows.
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
-- streams here are stepped by the tests themselves (streamwm.process(now => ...)): no background worker steps in
DO $$BEGIN EXECUTE format('ALTER DATABASE %I SET streamwm.enabled = off', current_database()); END$$;
CREATE EXTENSION IF NOT EXISTS streamwm;

SELECT streamwm.create_stream('sp', 'k text, v int', partitions => 2) IS NOT NULL AS created;
CREATE TABLE sp_dim (k text, label text);
INSERT INTO sp_dim VALUES ('a', 'A'), ('b', 'B'), (NULL, 'none');

-- name, template (%1$s = the stream), how the stream is spelled, how the
-- model's one-window table is spelled, plan forced to general?
CREATE TABLE sp_cases (name text, template text, spelled text, model text, general boolean DEFAULT false);
INSERT INTO sp_cases VALUES
 ('sp_only',    'SELECT k, count(*) AS n, sum(v) AS s FROM ONLY %1$s GROUP BY k', 'sp', 'win', false),
 ('sp_alias',   'SELECT a, count(*) AS n, sum(b) AS s FROM %1$s AS x(a, b) GROUP BY a', 'sp', 'win', false),
 ('sp_qual',    'SELECT %1$s.k, max(%1$s.v) AS m FROM %1$s GROUP BY %1$s.k', 'public.sp', 'pg_temp.win', false),
 ('sp_uescape', 'SELECT k, count(*) AS n FROM %1$s GROUP BY k', 'U&"\0073p"', 'win', false),
 ('sp_fromsub', 'SELECT k, count(*) AS n FROM (SELECT k, v FROM %1$s WHERE v > 1) e GROUP BY k', 'sp', 'win', false),
 ('sp_cte',     'WITH e AS (SELECT k, v FROM %1$s) SELECT k, sum(v) AS s FROM e GROUP BY k', 'sp', 'win', false),
 ('sp_scalar',  'SELECT k, count(*) AS n FROM %1$s WHERE v > (SELECT min(v) FROM %1$s) GROUP BY k', 'sp', 'win', false),
 ('sp_self',    'SELECT a.k, count(*) AS n FROM %1$s a JOIN %1$s b ON a.k = b.k GROUP BY a.k', 'sp', 'win', false),
 ('sp_dimjoin', 'SELECT d.label, count(*) AS n FROM %1$s s JOIN sp_dim d ON d.k IS NOT DISTINCT FROM s.k GROUP BY d.label', 'sp', 'win', false),
 ('sp_nulls',   'SELECT k, count(*) AS n, sum(v) AS s, min(v) AS lo, max(v) AS hi, avg(v) AS a FROM %1$s GROUP BY k', 'sp', 'win', false),
 ('sp_nulls_g', 'SELECT k, count(*) AS n, sum(v) AS s, min(v) AS lo, max(v) AS hi, avg(v) AS a FROM %1$s GROUP BY k', 'sp', 'win', true),
 ('sp_nulls_agg', 'SELECT k, string_agg(v::text, '','' ORDER BY v) AS vs, array_agg(v ORDER BY v) AS va FROM %1$s GROUP BY k', 'sp', 'win', false),
 ('sp_having',  'SELECT k, sum(v) * 2 + count(*) AS x, count(*) FILTER (WHERE v > 2) AS big FROM %1$s GROUP BY k HAVING count(*) > 1', 'sp', 'win', false),
 ('sp_nogroup', 'SELECT count(*) AS n, sum(v) AS s FROM %1$s WHERE v > 3', 'sp', 'win', false);

SELECT c.name, streamwm.create_query(c.name, format(c.template, c.spelled), hop => '10 s', size => '20 s') IS NOT NULL AS created
  FROM sp_cases c ORDER BY c.name;
UPDATE streamwm.query_def q SET plan = 'general' FROM sp_cases c WHERE c.name = q.name AND c.general;
SELECT query, plan FROM streamwm.queries WHERE query LIKE 'sp\_%' ORDER BY query;
-- the key of a result table with a nullable key, and with a NOT NULL one
SELECT conrelid::regclass, contype, pg_get_constraintdef(oid) FROM pg_constraint
 WHERE conrelid IN ('sp_nulls'::regclass, 'sp_nogroup'::regclass) ORDER BY 1;

-- rows: NULL keys, two partitions, out of order, one late row
SELECT streamwm.ingest('sp', x.r, partition => x.p, write_time => x.t) FROM (VALUES
  ('{"k": "a", "v": 1}'::jsonb, 0, '1970-01-01 00:00:01+00'::timestamptz),
  ('{"k": "a", "v": 2}', 1, '1970-01-01 00:00:03+00'),
  ('{"k": null, "v": 3}', 0, '1970-01-01 00:00:04+00'),
  ('{"k": "b", "v": 4}', 1, '1970-01-01 00:00:12+00'),
  ('{"v": 5}', 0, '1970-01-01 00:00:15+00'),
  ('{"k": "a", "v": 6}', 1, '1970-01-01 00:00:27+00'),
  ('{"k": null, "v": 7}', 0, '1970-01-01 00:00:33+00'),
  ('{"k": "b", "v": 8}', 1, '1970-01-01 00:00:35+00'),
  ('{"k": "a", "v": 9}', 0, '1970-01-01 00:00:02+00'),
  ('{"k": "b", "v": 10}', 1, '1970-01-01 00:01:01+00'),
  ('{"k": "a", "v": 11}', 0, '1970-01-01 00:01:02+00')) x(r, p, t);
SELECT streamwm.process('sp', now => clock_timestamp());
SELECT watermark, events, late_events FROM streamwm.streams WHERE stream = 'sp'::regclass;

-- The model.
CREATE FUNCTION sp_model(c sp_cases, hop interval, size interval, upto timestamptz)
RETURNS TABLE (window_start timestamptz, r jsonb) LANGUAGE plpgsql AS $$
DECLARE
    ws timestamptz;
BEGIN
    FOR ws IN SELECT DISTINCT g FROM sp s,
              generate_series(streamwm.window_start(s.sw_event_time, hop) - (size - hop),
                              streamwm.window_start(s.sw_event_time, hop), hop) g
              ORDER BY 1
    LOOP
        CONTINUE WHEN ws + size > upto;
        DROP TABLE IF EXISTS pg_temp.win;
        CREATE TEMP TABLE win AS
            SELECT * FROM sp s
             WHERE s.sw_event_time >= ws AND s.sw_event_time < ws + size
               AND NOT EXISTS (SELECT 1 FROM streamwm.late_events l
                                WHERE l.stream = 'sp'::regclass AND l.partition = s.sw_partition
                                  AND l.sw_offset = s.sw_offset);
        -- no row for a window where no event passes the WHERE
        RETURN QUERY EXECUTE format('SELECT $1, to_jsonb(t) FROM (%s) t', format(c.template, c.model))
            USING ws;
    END LOOP;
    DROP TABLE IF EXISTS pg_temp.win;
END $$;

CREATE TEMP TABLE sp_got AS
SELECT c.name, w.window_start, w.r
  FROM sp_cases c,
       LATERAL (SELECT m.window_start, m.r FROM sp_model(c, '10 s', '20 s',
                (SELECT watermark FROM streamwm.streams WHERE stream = 'sp'::regclass)) m) w
 WHERE c.name <> 'sp_nogroup' OR (w.r->>'n')::int > 0;
CREATE FUNCTION sp_result(name text) RETURNS TABLE (window_start timestamptz, r jsonb)
LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY EXECUTE format('SELECT t.window_start, to_jsonb(t) - ''window_start'' - ''window_end'' FROM %I t', name);
END $$;

-- every query equals its model, window by window, row by row
SELECT c.name,
       (SELECT count(*) FROM sp_result(c.name)) AS rows,
       (SELECT count(*) FROM (SELECT * FROM sp_result(c.name)
                              EXCEPT ALL SELECT g.window_start, g.r FROM sp_got g WHERE g.name = c.name) d) AS extra,
       (SELECT count(*) FROM (SELECT g.window_start, g.r FROM sp_got g WHERE g.name = c.name
                              EXCEPT ALL SELECT * FROM sp_result(c.name)) d) AS missing
  FROM sp_cases c ORDER BY c.name;

-- the NULL group is there, in both plans
SELECT window_start, k, n, s, lo, hi, a FROM sp_nulls ORDER BY window_start, k NULLS FIRST;
SELECT count(*) AS differences FROM (
  (SELECT window_start, k, n, s, lo, hi, a FROM sp_nulls EXCEPT SELECT window_start, k, n, s, lo, hi, a FROM sp_nulls_g)
  UNION ALL
  (SELECT window_start, k, n, s, lo, hi, a FROM sp_nulls_g EXCEPT SELECT window_start, k, n, s, lo, hi, a FROM sp_nulls)) d;
-- replaying a window with a NULL group upserts it, no duplicate
UPDATE streamwm.query_def SET closed_until = '-infinity' WHERE name IN ('sp_nulls', 'sp_nulls_g', 'sp_nulls_agg');
SELECT streamwm.process('sp', now => clock_timestamp());
SELECT name, (SELECT count(*) FROM sp_result(name)) AS rows_after_replay FROM sp_cases
 WHERE name IN ('sp_nulls', 'sp_nulls_g', 'sp_nulls_agg') ORDER BY 1;
SELECT query, last_error FROM streamwm.queries WHERE query LIKE 'sp\_%' AND last_error IS NOT NULL;

SELECT streamwm.drop_stream('sp', cascade => true);
DO $$DECLARE n text; BEGIN FOR n IN SELECT name FROM sp_cases LOOP EXECUTE format('DROP TABLE %I', n); END LOOP; END$$;
DROP FUNCTION sp_model(sp_cases, interval, interval, timestamptz);
DROP FUNCTION sp_result(text);
DROP TABLE sp_cases, sp_dim;
