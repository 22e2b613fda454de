-- How a step writes a pane query's closed windows (src/result.c,
-- src/step_cache.c): SPEC section 5 says "INSERT ... ON CONFLICT ... DO
-- UPDATE".  Where nothing could tell them apart (no re-firing, no chain, a
-- plain table without triggers, rules or row-level security), a step
-- writes windows that close for the first time with a plain INSERT, and
-- runs the upsert when that meets a key the table already holds.  Here:
-- results equal the model whatever the table held before, and a table
-- with triggers sees exactly the upsert's firings.
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
-- streams here are stepped by the tests themselves (streamwm.process(now => ...)): no background worker steps in
DO $$BEGIN EXECUTE format('ALTER DATABASE %I SET streamwm.enabled = off', current_database()); END$$;
CREATE EXTENSION IF NOT EXISTS streamwm;

-- keys in output order (n, k2, k1): the result key is (window_start, k2, k1);
-- k1 can be NULL, so the key is UNIQUE NULLS NOT DISTINCT
SELECT streamwm.create_stream('rw', 'k1 int, k2 text, v int');
SELECT streamwm.create_query('rw_q', 'SELECT count(*) AS n, k2, k1, sum(v) AS s FROM rw GROUP BY k1, k2',
                             hop => '10 s', size => '30 s');
SELECT plan FROM streamwm.queries WHERE query = 'rw_q';
SELECT indexdef FROM pg_indexes WHERE tablename = 'rw_q';

-- the model: the query over the stream's rows, in plain SQL
CREATE VIEW rw_model AS
SELECT ws AS window_start, ws + interval '30 s' AS window_end, count(*) AS n, k2, k1, sum(v) AS s
  FROM rw, LATERAL (SELECT to_timestamp(floor(extract(epoch FROM sw_event_time) / 10) * 10 - j * 10) AS ws
                      FROM generate_series(0, 2) j) w
 WHERE ws + interval '30 s' <= (SELECT closed_until FROM streamwm.queries WHERE query = 'rw_q')
 GROUP BY 1, 2, k2, k1;
CREATE FUNCTION rw_diff(OUT missing bigint, OUT extra bigint) LANGUAGE sql AS $$
    SELECT (SELECT count(*) FROM (SELECT * FROM rw_model EXCEPT SELECT * FROM rw_q) x),
           (SELECT count(*) FROM (SELECT * FROM rw_q EXCEPT SELECT * FROM rw_model) x)
$$;

-- 1. A first step: many windows, many groups, NULL keys among them.
INSERT INTO rw (sw_write_time, k1, k2, v)
SELECT to_timestamp(i), nullif(i % 7, 3), (i % 3)::text, i FROM generate_series(1, 300) i;
SELECT streamwm.process('rw', now => to_timestamp(200));
SELECT closed_until, windows_emitted, last_error FROM streamwm.queries WHERE query = 'rw_q';
SELECT * FROM rw_diff();
SELECT count(*) AS rows, count(*) FILTER (WHERE k1 IS NULL) AS null_k1 FROM rw_q;

-- 2. The table already holds rows of windows that close next (written by
-- its owner: wrong counts, and a NULL key): the step's INSERT meets them,
-- and the upsert makes them right; nothing else changes, no error.
INSERT INTO rw_q VALUES ('1970-01-01 00:04:40+00', '1970-01-01 00:05:10+00', 999, '0', 0, -1),
                        ('1970-01-01 00:05:00+00', '1970-01-01 00:05:30+00', 999, '1', NULL, -1);
INSERT INTO rw (sw_write_time, k1, k2, v)
SELECT to_timestamp(i), nullif(i % 7, 3), (i % 3)::text, i FROM generate_series(301, 400) i;
CREATE TEMP TABLE rw_before AS SELECT count(*) AS n FROM rw_q;
BEGIN;
SELECT streamwm.process('rw', now => to_timestamp(500));
-- the INSERT was tried and rolled back: more insertions counted than rows written
SELECT (SELECT n_tup_ins FROM pg_stat_xact_user_tables WHERE relid = 'rw_q'::regclass)
       > (SELECT count(*) FROM rw_q) - (SELECT n FROM rw_before) AS retried;
COMMIT;
SELECT closed_until, windows_emitted, last_error FROM streamwm.queries WHERE query = 'rw_q';
SELECT * FROM rw_diff();
SELECT window_start, k2, k1, n FROM rw_q WHERE n = 999 OR s = -1;
-- the next steps (the upsert for a while, then the INSERT again) too
INSERT INTO rw (sw_write_time, k1, k2, v)
SELECT to_timestamp(i), nullif(i % 7, 3), (i % 3)::text, i FROM generate_series(401, 450) i;
SELECT streamwm.process('rw', now => to_timestamp(500));
SELECT * FROM rw_diff();
-- a violation the upsert does not arbitrate (another unique index) fails
-- the step as it did before, and leaves nothing of it
CREATE UNIQUE INDEX rw_q_n ON rw_q (n, window_start) WHERE n > 0 AND window_start >= '1970-01-01 00:08:00+00';
INSERT INTO rw_q VALUES ('1970-01-01 00:08:00+00', '1970-01-01 00:08:30+00', 30, 'y', 5, 0);
INSERT INTO rw (sw_write_time, k1, k2, v) SELECT to_timestamp(i), 0, 'x', i FROM generate_series(480, 539) i;
SELECT streamwm.process('rw', now => to_timestamp(600));
SELECT closed_until, windows_emitted, last_error FROM streamwm.queries WHERE query = 'rw_q';
SELECT count(*) FROM rw_q WHERE window_start >= '1970-01-01 00:07:00+00';
DROP INDEX rw_q_n;
DELETE FROM rw_q WHERE k2 = 'y';
SELECT streamwm.process('rw', now => to_timestamp(600));
SELECT closed_until, windows_emitted, last_error FROM streamwm.queries WHERE query = 'rw_q';
SELECT * FROM rw_diff();

-- 2b. The step that meets a key already there may also have made its pane
-- table anew (it was emptied or dropped: a cache): the second run starts
-- from the definition as the first found it, takes the upsert whatever
-- happened to the step's cached plans meanwhile, and its windows close.
TRUNCATE rw_q_panes;
INSERT INTO rw_q VALUES ('1970-01-01 00:09:00+00', '1970-01-01 00:09:30+00', 999, 'x', 0, -1);
INSERT INTO rw (sw_write_time, k1, k2, v) SELECT to_timestamp(i), 0, 'x', i FROM generate_series(540, 620) i;
SELECT streamwm.process('rw', now => to_timestamp(700));
SELECT closed_until, windows_emitted, last_error FROM streamwm.queries WHERE query = 'rw_q';
SELECT * FROM rw_diff();
DROP TABLE rw_q_panes;
INSERT INTO rw_q VALUES ('1970-01-01 00:10:20+00', '1970-01-01 00:10:50+00', 999, 'x', 0, -1);
INSERT INTO rw (sw_write_time, k1, k2, v) SELECT to_timestamp(i), 0, 'x', i FROM generate_series(621, 700) i;
SELECT streamwm.process('rw', now => to_timestamp(800));
SELECT closed_until, windows_emitted, last_error FROM streamwm.queries WHERE query = 'rw_q';
SELECT * FROM rw_diff();

-- 2c. Where the upsert would fail, the INSERT is not taken: a publication
-- of the table's updates without a replica identity (a key that can be
-- NULL is no primary key) fails every step, conflict or not; so does a key
-- index the owner dropped (the upsert has nothing to arbitrate on: no
-- second row for a key); an exclusion constraint on the key that the
-- INSERT violates is retried with the upsert, whose update does not.
SELECT streamwm.create_stream('rwp', 'k int');
SELECT streamwm.create_query('rwp_q', 'SELECT k, count(*) AS n FROM rwp GROUP BY k', hop => '10 s', size => '10 s');
SET client_min_messages = error;   -- wal_level need not be logical here
CREATE PUBLICATION rwp_pub FOR TABLE rwp_q;
RESET client_min_messages;
INSERT INTO rwp (sw_write_time, k) SELECT to_timestamp(i), i % 2 FROM generate_series(1, 25) i;
SELECT streamwm.process('rwp', now => to_timestamp(30));
SELECT closed_until, last_error FROM streamwm.queries WHERE query = 'rwp_q';
SELECT count(*) FROM rwp_q;
DROP PUBLICATION rwp_pub;
SELECT streamwm.process('rwp', now => to_timestamp(30));
SELECT closed_until, last_error FROM streamwm.queries WHERE query = 'rwp_q';
SELECT window_start, k, n FROM rwp_q ORDER BY 1, 2;
-- the key index dropped, a row of a window that closes next already there
SELECT conname FROM pg_constraint WHERE conrelid = 'rwp_q'::regclass AND contype = 'u' \gset
ALTER TABLE rwp_q DROP CONSTRAINT :conname;
INSERT INTO rwp_q VALUES (to_timestamp(20), to_timestamp(30), 1, 99);
INSERT INTO rwp (sw_write_time, k) SELECT to_timestamp(i), i % 2 FROM generate_series(26, 45) i;
SELECT streamwm.process('rwp', now => to_timestamp(50));
SELECT closed_until, last_error FROM streamwm.queries WHERE query = 'rwp_q';
SELECT window_start, k, n FROM rwp_q ORDER BY 1, 2, 3;
-- an exclusion constraint on the key, checked before the key index
ALTER TABLE rwp_q ADD CONSTRAINT rwp_q_excl EXCLUDE USING btree (window_start WITH =, k WITH =);
ALTER TABLE rwp_q ADD UNIQUE NULLS NOT DISTINCT (window_start, k);
SELECT streamwm.process('rwp', now => to_timestamp(50));
SELECT closed_until, last_error FROM streamwm.queries WHERE query = 'rwp_q';
SELECT window_start, k, n FROM rwp_q ORDER BY 1, 2, 3;

-- 2d. A step nested in the query's own code (a function that calls
-- process() of another stream, whose query closes windows) leaves the
-- outer step able to take the upsert when its INSERT meets a row.
SELECT streamwm.create_stream('rwn_b', 'v int');
SELECT streamwm.create_query('rwn_bq', 'SELECT count(*) AS n FROM rwn_b', hop => '10 s', size => '10 s',
                             time_domain => 'processing');
INSERT INTO rwn_b (sw_write_time, v) VALUES (now(), 1);
CREATE TABLE rwn_calls (i serial);
CREATE FUNCTION rwn_f(x int) RETURNS int LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.rwn_calls DEFAULT VALUES;
    PERFORM streamwm.process('public.rwn_b',
                             now => to_timestamp(1000 + (SELECT count(*) FROM public.rwn_calls) * 20));
    RETURN x;
END $$;
SELECT streamwm.create_stream('rwn', 'k int, v int');
SELECT streamwm.create_query('rwn_q', 'SELECT k, count(*) AS n, sum(rwn_f(v)) AS s FROM rwn GROUP BY k',
                             hop => '10 s', size => '10 s');
INSERT INTO rwn (sw_write_time, k, v) SELECT to_timestamp(i), i % 2, i FROM generate_series(1, 50) i;
SELECT streamwm.process('rwn', now => to_timestamp(100));
INSERT INTO rwn_q VALUES ('1970-01-01 00:01:00+00', '1970-01-01 00:01:10+00', 0, 999, -1);
INSERT INTO rwn (sw_write_time, k, v) SELECT to_timestamp(i), i % 2, i FROM generate_series(51, 95) i;
SELECT streamwm.process('rwn', now => to_timestamp(200));
SELECT closed_until, last_error FROM streamwm.queries WHERE query = 'rwn_q';
SELECT window_start, k, n, s FROM rwn_q WHERE window_start >= '1970-01-01 00:00:50+00' ORDER BY 1, 2;
SELECT count(*) > 0 AS nested_steps_ran FROM rwn_calls;

-- 3. A result table with triggers: the upsert, as SPEC section 5 says:
-- INSERT and UPDATE statement triggers fire at every step that writes,
-- and a row trigger once per row, also where a row is already there.
CREATE TABLE rw_fired (what text, n int);
CREATE FUNCTION rw_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE public.rw_fired SET n = n + 1 WHERE what = TG_OP || ' ' || TG_LEVEL;
    IF NOT FOUND THEN INSERT INTO public.rw_fired VALUES (TG_OP || ' ' || TG_LEVEL, 1); END IF;
    RETURN NEW;
END $$;
SELECT streamwm.create_stream('rwtrig', 'k int');
SELECT streamwm.create_query('rwtrig_q', 'SELECT k, count(*) AS n FROM rwtrig GROUP BY k', hop => '10 s', size => '10 s');
CREATE TRIGGER rt_s_ins BEFORE INSERT ON rwtrig_q FOR EACH STATEMENT EXECUTE FUNCTION rw_count();
CREATE TRIGGER rt_s_upd BEFORE UPDATE ON rwtrig_q FOR EACH STATEMENT EXECUTE FUNCTION rw_count();
CREATE TRIGGER rt_r_ins BEFORE INSERT ON rwtrig_q FOR EACH ROW EXECUTE FUNCTION rw_count();
INSERT INTO rwtrig (sw_write_time, k) SELECT to_timestamp(i), i % 2 FROM generate_series(1, 40) i;
INSERT INTO rwtrig_q VALUES (to_timestamp(20), to_timestamp(30), 1, 99);
DELETE FROM rw_fired;
BEGIN;
SELECT streamwm.process('rwtrig', now => to_timestamp(45));
-- no INSERT tried first: one insertion counted per row written (PostgreSQL
-- counts an upsert that updates as an insertion too), 1 update
SELECT n_tup_ins, n_tup_upd FROM pg_stat_xact_user_tables WHERE relid = 'rwtrig_q'::regclass;
COMMIT;
SELECT * FROM rw_fired ORDER BY 1;
SELECT window_start, k, n FROM rwtrig_q ORDER BY 1, 2;
-- a trigger made later is seen at the next step (the step's plans are made again)
DROP TRIGGER rt_s_upd ON rwtrig_q;
DROP TRIGGER rt_r_ins ON rwtrig_q;
DELETE FROM rw_fired;
INSERT INTO rwtrig (sw_write_time, k) SELECT to_timestamp(i), i % 2 FROM generate_series(41, 60) i;
SELECT streamwm.process('rwtrig', now => to_timestamp(65));
SELECT * FROM rw_fired ORDER BY 1;
CREATE TRIGGER rt_s_upd BEFORE UPDATE ON rwtrig_q FOR EACH STATEMENT EXECUTE FUNCTION rw_count();
DELETE FROM rw_fired;
INSERT INTO rwtrig (sw_write_time, k) SELECT to_timestamp(i), i % 2 FROM generate_series(61, 80) i;
SELECT streamwm.process('rwtrig', now => to_timestamp(85));
SELECT * FROM rw_fired ORDER BY 1;
SELECT window_start, k, n FROM rwtrig_q ORDER BY 1, 2;

DROP VIEW rw_model;
SELECT streamwm.drop_query('rw_q');
SELECT streamwm.drop_query('rwtrig_q');
SELECT streamwm.drop_query('rwp_q');
SELECT streamwm.drop_query('rwn_q');
SELECT streamwm.drop_query('rwn_bq');
SELECT streamwm.drop_stream('rw');
SELECT streamwm.drop_stream('rwtrig');
SELECT streamwm.drop_stream('rwp');
SELECT streamwm.drop_stream('rwn');
SELECT streamwm.drop_stream('rwn_b');
DROP FUNCTION rw_diff();
DROP TABLE rw_before;
DROP TABLE rw_q, rwtrig_q, rwp_q, rwn_q, rwn_bq, rw_fired, rwn_calls;
DROP FUNCTION rwn_f(int);
DROP FUNCTION rw_count();
