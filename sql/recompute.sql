-- SPEC section 11: streamwm.recompute(name, from, to) computes again, from
-- the stream's retained rows, the closed windows of a query with
-- from <= window_start and window_end <= to, and makes the result table hold
-- exactly what the query says for them; a range whose rows retention may
-- have removed is refused.
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
-- streams here are stepped by the tests themselves (streamwm.process(now => ...)): no background worker steps in
DO $$BEGIN EXECUTE format('ALTER DATABASE %I SET streamwm.enabled = off', current_database()); END$$;
CREATE EXTENSION IF NOT EXISTS streamwm;

SELECT streamwm.create_stream('rcp', 'k int, v int');
SELECT streamwm.create_query('rcp_pane', 'SELECT k, count(*) AS n, sum(v) AS s FROM rcp GROUP BY k',
                             hop => '10 s', size => '20 s');
SELECT streamwm.create_query('rcp_gen', $$SELECT k, string_agg(v::text, ',' ORDER BY v) AS l FROM rcp GROUP BY k$$,
                             hop => '10 s', size => '20 s');
SELECT query, plan FROM streamwm.queries WHERE stream = 'rcp'::regclass ORDER BY 1;
INSERT INTO rcp (sw_write_time, k, v) SELECT to_timestamp(i), i % 2, i FROM generate_series(1, 100) i;
SELECT streamwm.process('rcp');
SELECT query, closed_until, windows_emitted FROM streamwm.queries WHERE stream = 'rcp'::regclass ORDER BY 1;

-- the model: the queries over the stream's rows as they are now, in plain SQL
CREATE VIEW rcp_model AS
SELECT ws AS window_start, ws + interval '20 s' AS window_end, k, count(*) AS n, sum(v) AS s,
       string_agg(v::text, ',' ORDER BY v) AS l
  FROM rcp, LATERAL (SELECT to_timestamp(floor(extract(epoch FROM sw_event_time) / 10) * 10 - j * 10) AS ws
                      FROM generate_series(0, 1) j) w
 WHERE ws + interval '20 s' <= (SELECT closed_until FROM streamwm.queries WHERE query = 'rcp_pane')
 GROUP BY 1, 2, 3;
CREATE FUNCTION rcp_diff() RETURNS TABLE (query text, missing bigint, extra bigint) LANGUAGE sql AS $$
    SELECT 'rcp_pane',
           (SELECT count(*) FROM (SELECT window_start, window_end, k, n, s FROM rcp_model
                                  EXCEPT SELECT window_start, window_end, k, n, s FROM rcp_pane) x),
           (SELECT count(*) FROM (SELECT window_start, window_end, k, n, s FROM rcp_pane
                                  EXCEPT SELECT window_start, window_end, k, n, s FROM rcp_model) x)
    UNION ALL
    SELECT 'rcp_gen',
           (SELECT count(*) FROM (SELECT window_start, window_end, k, l FROM rcp_model
                                  EXCEPT SELECT window_start, window_end, k, l FROM rcp_gen) x),
           (SELECT count(*) FROM (SELECT window_start, window_end, k, l FROM rcp_gen
                                  EXCEPT SELECT window_start, window_end, k, l FROM rcp_model) x)
$$;
SELECT * FROM rcp_diff();

-- 1. Results changed by hand are restored inside the range; outside it
-- nothing is touched.
UPDATE rcp_pane SET n = 999 WHERE window_start IN ('1970-01-01 00:00:20+00', '1970-01-01 00:01:00+00');
DELETE FROM rcp_gen WHERE window_start = '1970-01-01 00:00:30+00' AND k = 1;
-- a group the query does not produce for that window
INSERT INTO rcp_pane VALUES ('1970-01-01 00:00:30+00', '1970-01-01 00:00:50+00', 7, 1, 1);
SELECT * FROM rcp_diff();
-- from 00:05 to 01:00: the windows starting at 10, 20, 30 and 40 s
SELECT streamwm.recompute('rcp_pane', '1970-01-01 00:00:05+00', '1970-01-01 00:01:00+00') AS rows;
SELECT streamwm.recompute('rcp_gen', '1970-01-01 00:00:05+00', '1970-01-01 00:01:00+00') AS rows;
SELECT window_start, k, n FROM rcp_pane WHERE n = 999 OR k = 7 ORDER BY 1, 2;   -- the window at 60 s was outside
SELECT * FROM rcp_diff();
SELECT streamwm.recompute('rcp_pane', '-infinity', 'infinity') AS rows;
SELECT * FROM rcp_diff();

-- 2. Only closed windows: the range is clipped at closed_until (later
-- windows are computed by the steps that close them).
SELECT streamwm.recompute('rcp_pane', '1970-01-01 00:01:20+00', 'infinity') AS rows;   -- [80, 100) only
SELECT streamwm.recompute('rcp_pane', '1970-01-01 00:01:21+00', 'infinity') AS rows;   -- [90, 110) is open
SELECT streamwm.recompute('rcp_pane', '1970-01-01 00:00:00+00', '1970-01-01 00:00:19+00') AS rows;   -- no whole window
SELECT count(*) AS rows_of_open_windows FROM rcp_pane
 WHERE window_end > (SELECT closed_until FROM streamwm.queries WHERE query = 'rcp_pane');
\set VERBOSITY default
SELECT streamwm.recompute('rcp_pane', '1970-01-01 00:01:00+00', '1970-01-01 00:00:00+00');
\echo :LAST_ERROR_SQLSTATE
SELECT streamwm.recompute('rcp_pane', NULL, 'infinity');
\echo :LAST_ERROR_SQLSTATE
SELECT streamwm.recompute('no_such_query', '-infinity', 'infinity');
\echo :LAST_ERROR_SQLSTATE
-- rows this transaction wrote have not arrived: not read, so refused
BEGIN;
INSERT INTO rcp (sw_write_time, k, v) VALUES (to_timestamp(200), 0, 0);
SELECT streamwm.recompute('rcp_pane', '-infinity', 'infinity');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
-- in one transaction: rolled back, nothing happened
BEGIN;
DELETE FROM rcp_pane WHERE k = 0;
SELECT streamwm.recompute('rcp_pane', '1970-01-01 00:00:00+00', '1970-01-01 00:00:40+00') AS rows;
SELECT count(*) AS k0_rows FROM rcp_pane WHERE k = 0;
ROLLBACK;
SELECT * FROM rcp_diff();

-- 3. Stream rows purged with DELETE: the results are what the query says
-- over the rows that are left.  A window or group with no rows left loses
-- its row.  (A purge is the user's own removal: it does not move the
-- retention horizon that recompute refuses to cross.)
DELETE FROM rcp WHERE sw_event_time >= '1970-01-01 00:00:40+00' AND sw_event_time < '1970-01-01 00:00:50+00' AND k = 1;
DELETE FROM rcp WHERE sw_event_time >= '1970-01-01 00:01:00+00' AND sw_event_time < '1970-01-01 00:01:20+00';
SELECT retained_from, retention_horizon FROM streamwm.stream_def WHERE stream = 'rcp'::regclass;
SELECT * FROM rcp_diff();   -- the results still count the purged rows
SELECT streamwm.recompute('rcp_pane', '-infinity', 'infinity') AS rows;
SELECT streamwm.recompute('rcp_gen', '-infinity', 'infinity') AS rows;
SELECT * FROM rcp_diff();
SELECT window_start, k, n, s FROM rcp_pane
 WHERE window_start BETWEEN '1970-01-01 00:00:30+00' AND '1970-01-01 00:01:10+00' ORDER BY 1, 2;

-- 4. After alter_query, a recompute writes the closed windows with the new
-- text too.
SELECT streamwm.alter_query('rcp_gen', $$SELECT k, string_agg(v::text, '+' ORDER BY v) AS l FROM rcp GROUP BY k$$);
SELECT streamwm.recompute('rcp_gen', '1970-01-01 00:00:00+00', '1970-01-01 00:00:30+00') AS rows;
SELECT window_start, k, l FROM rcp_gen WHERE window_start <= '1970-01-01 00:00:20+00' ORDER BY 1, 2;

-- 5. Retention: a range some of whose rows retention may have removed is
-- refused, with the first window that can be recomputed.
SELECT streamwm.create_stream('rcr', 'v int', retention => '30 s');
SELECT streamwm.create_query('rcr_q', 'SELECT count(*) AS n, sum(v) AS s FROM rcr', hop => '10 s', size => '10 s');
INSERT INTO rcr (sw_write_time, v) SELECT to_timestamp(i), i FROM generate_series(1, 100) i;
SELECT streamwm.process('rcr');
SELECT s.retention_horizon, s.retained_from, (SELECT min(sw_event_time) FROM rcr) AS oldest_row
  FROM streamwm.stream_def s WHERE stream = 'rcr'::regclass;
SELECT streamwm.recompute('rcr_q', '-infinity', 'infinity');
\echo :LAST_ERROR_SQLSTATE
SELECT streamwm.recompute('rcr_q', '1970-01-01 00:01:00+00', 'infinity');
\echo :LAST_ERROR_SQLSTATE
UPDATE rcr_q SET n = 0, s = 0;
-- from 01:05: the first window starts at 01:10
SELECT streamwm.recompute('rcr_q', '1970-01-01 00:01:05+00', 'infinity') AS rows;
SELECT window_start, n, s FROM rcr_q WHERE window_start >= '1970-01-01 00:00:50+00' ORDER BY 1;

-- 6. As the query's owner, whoever calls it: a superuser's recompute runs
-- alice's trigger on her result table as alice; bob may not recompute.
CREATE ROLE regress_rc_alice;
CREATE ROLE regress_rc_bob;
GRANT CREATE ON SCHEMA public TO regress_rc_alice, regress_rc_bob;
SET ROLE regress_rc_alice;
SELECT streamwm.create_stream('rcp_a', 'v int');
SELECT streamwm.create_query('rcp_aq', 'SELECT count(*) AS n FROM rcp_a', hop => '10 s', size => '10 s');
CREATE TABLE rcp_log (who name, op text);
CREATE FUNCTION rcp_note() RETURNS trigger LANGUAGE plpgsql AS
  $$BEGIN INSERT INTO public.rcp_log VALUES (current_user, TG_OP); RETURN NULL; END$$;
CREATE TRIGGER rcp_note AFTER INSERT OR UPDATE OR DELETE ON rcp_aq FOR EACH ROW EXECUTE FUNCTION rcp_note();
INSERT INTO rcp_a (sw_write_time, v) VALUES (to_timestamp(1), 1), (to_timestamp(2), 2), (to_timestamp(15), 3);
SELECT streamwm.process('rcp_a');
RESET ROLE;
DELETE FROM rcp_log;
SELECT streamwm.recompute('rcp_aq', '-infinity', 'infinity') AS rows;
SELECT who, op, count(*) FROM rcp_log GROUP BY 1, 2 ORDER BY 1, 2;
SET ROLE regress_rc_bob;
SELECT streamwm.recompute('rcp_aq', '-infinity', 'infinity');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;

DROP FUNCTION rcp_diff();
DROP VIEW rcp_model;
SELECT streamwm.drop_stream('rcp', cascade => true);
SELECT streamwm.drop_stream('rcr', cascade => true);
SELECT streamwm.drop_stream('rcp_a', cascade => true);
DROP TABLE rcp_pane, rcp_gen, rcr_q, rcp_aq, rcp_log;
DROP FUNCTION rcp_note();
REVOKE CREATE ON SCHEMA public FROM regress_rc_alice, regress_rc_bob;
DROP ROLE regress_rc_alice;
DROP ROLE regress_rc_bob;
