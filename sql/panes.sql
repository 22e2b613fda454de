-- Pane state (the pane plan's partial aggregates per pane and group) is a
-- cache of the retained rows: emptied or dropped in the middle of a
-- stream, it is rebuilt, and the results are the same as a twin query's
-- whose state was never touched.
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
-- streams here are stepped by the tests themselves (streamwm.process(now => ...)): no background worker steps in
DO $$BEGIN EXECUTE format('ALTER DATABASE %I SET streamwm.enabled = off', current_database()); END$$;
CREATE EXTENSION IF NOT EXISTS streamwm;

SELECT streamwm.create_stream('pr', 'k int, v int', partitions => 2, idle_timeout => '1 hour') IS NOT NULL AS created;
SELECT streamwm.create_query(q, 'SELECT k, count(*) AS n, sum(v) AS s, min(v) AS lo, max(v) AS hi, avg(v) AS a FROM pr GROUP BY k',
                             hop => '1 s', size => '5 s') IS NOT NULL AS created
  FROM unnest(ARRAY['pr_a', 'pr_b', 'pr_c']) q;
SELECT query, plan FROM streamwm.queries WHERE query LIKE 'pr\_%' ORDER BY 1;
SELECT count(*) AS pane_tables FROM pg_class WHERE relname IN ('pr_a_panes', 'pr_b_panes', 'pr_c_panes');

-- a procedure: rows arrive when their transaction commits
CREATE PROCEDURE pr_round(lo int, hi int) LANGUAGE plpgsql AS $$
BEGIN
  PERFORM streamwm.ingest('pr', jsonb_agg(jsonb_build_object('k', i % 3, 'v', i)), partition => p,
                         write_time => to_timestamp(i::float8 / 2))
    FROM generate_series(lo, hi) i, LATERAL (SELECT i % 2 AS p) x GROUP BY i, p ORDER BY i;
  COMMIT;
  PERFORM streamwm.process('pr', now => to_timestamp(1000));
END $$;
CALL pr_round(0, 19);
-- open windows are partly folded now; empty one state and drop the other
SELECT (SELECT count(*) FROM pr_b_panes) > 0 AS had_state;
TRUNCATE pr_b_panes;
DROP TABLE pr_c_panes;
CALL pr_round(20, 39);
CALL pr_round(40, 59);
SELECT query, windows_emitted, last_error FROM streamwm.queries WHERE query LIKE 'pr\_%' ORDER BY 1;
SELECT count(*) AS windows, count(DISTINCT window_start) AS starts FROM pr_a;
SELECT count(*) AS differences FROM (
  (SELECT * FROM pr_a EXCEPT SELECT * FROM pr_b) UNION ALL (SELECT * FROM pr_b EXCEPT SELECT * FROM pr_a) UNION ALL
  (SELECT * FROM pr_a EXCEPT SELECT * FROM pr_c) UNION ALL (SELECT * FROM pr_c EXCEPT SELECT * FROM pr_a)) d;
-- and all three equal a recomputation from the rows (late ones left out)
SELECT count(*) AS wrong FROM (
  SELECT w.ws AS window_start, s.k, count(*) AS n, sum(s.v) AS s
    FROM pr s, generate_series(streamwm.window_start(s.sw_event_time, '1 s') - interval '4 s',
                               streamwm.window_start(s.sw_event_time, '1 s'), '1 s') w(ws)
   WHERE w.ws + interval '5 s' <= (SELECT watermark FROM streamwm.streams WHERE stream = 'pr'::regclass)
     AND w.ws > (SELECT min(window_start) - interval '1 s' FROM pr_a)
     AND NOT EXISTS (SELECT 1 FROM streamwm.late_events l WHERE l.stream = 'pr'::regclass
                        AND l.partition = s.sw_partition AND l.sw_offset = s.sw_offset)
   GROUP BY 1, 2
  EXCEPT SELECT window_start, k, n, s FROM pr_a) d;
-- panes no open window needs are gone: what is left is within the open windows
SELECT count(*) FILTER (WHERE sw_pane + interval '5 s' <= (SELECT watermark FROM streamwm.streams WHERE stream = 'pr'::regclass)
                              - interval '4 s') AS stale_panes
  FROM pr_a_panes;
-- drop_query takes its pane state along
SELECT streamwm.drop_query('pr_c');
SELECT to_regclass('pr_c_panes') IS NULL AS pane_state_dropped;
SELECT streamwm.drop_stream('pr', cascade => true);
SELECT count(*) AS pane_tables_left FROM pg_class WHERE relname LIKE 'pr\__\_panes';
DROP TABLE pr_a, pr_b, pr_c;
DROP PROCEDURE pr_round(int, int);

-- a step's statements run without JIT (a kept plan's JIT code would be
-- compiled anew at every step): its query sees jit off, whatever the
-- session that runs the step says
SET jit = on;
SELECT streamwm.create_stream('pj', 'v int', watermark_delay => '0 s', idle_timeout => '1 hour') IS NOT NULL AS created;
SELECT streamwm.create_query('pj_q', $$SELECT count(*) AS n, min(current_setting('jit')) AS jit FROM pj$$,
                             hop => '1 s', size => '1 s') IS NOT NULL AS created;
INSERT INTO pj (v, sw_write_time) VALUES (1, '2020-01-01 00:00:00'), (2, '2020-01-01 00:00:05');
SELECT streamwm.process('pj', now => now());
SELECT window_start, n, jit FROM pj_q ORDER BY 1;
SHOW jit;
RESET jit;
SELECT streamwm.drop_stream('pj', cascade => true);
DROP TABLE pj_q;
