-- The pane plan's fold on the nodes (src/citus_fold.c): on a distributed
-- stream, a pane-plan query whose functions, operators, aggregates and key
-- types are all built in, and whose aggregates have no internal state,
-- folds the step's new rows on the shards, grouped by partition too, and
-- the coordinator merges the partial states.  Any other query folds the
-- coordinator's copy of the rows, as before.  Results are checked against
-- a recomputation from the rows; which rows a fold read is shown by making
-- the coordinator's copy differ from the shards and rebuilding the panes.
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
SET client_min_messages = warning;

SELECT streamwm.create_stream('fd', 'k int, v int', partitions => 4, distributed => true,
                              watermark_delay => '0 s', allowed_lateness => '0 s');
-- on the nodes: count, sum of int4 (an int8 state), max, avg of float8 (a
-- float8[] state), sum and avg of int8 and numeric (internal states, which
-- the coordinator signs with its key: sw_state_vouch), a WHERE and a HAVING
SELECT streamwm.create_query('fq_nodes',
  'SELECT k, count(*) AS n, sum(v) AS s, max(v) AS m, avg(v::float8) AS a,
          sum(v::int8) AS s8, avg(v::int8) AS a8, sum(v::numeric / 3) AS sn
     FROM fd WHERE v > 0 GROUP BY k HAVING count(*) > 0',
  hop => '10 s', size => '20 s', start_from => 'earliest');
-- on the coordinator: an aggregate of the user's (its OID is this node's)
CREATE AGGREGATE fd_sum(int8) (sfunc = int8pl, stype = int8, combinefunc = int8pl);
SELECT streamwm.create_query('fq_local', 'SELECT k, fd_sum(v::int8) AS s FROM fd GROUP BY k',
  hop => '10 s', size => '20 s', start_from => 'earliest');
-- on the coordinator: a function of the user's
CREATE FUNCTION fd_double(int) RETURNS int LANGUAGE sql IMMUTABLE AS 'SELECT $1 * 2';
SELECT streamwm.create_query('fq_func', 'SELECT k, count(*) AS n FROM fd WHERE fd_double(v) > 0 GROUP BY k',
  hop => '10 s', size => '20 s', start_from => 'earliest');
SELECT query, plan FROM streamwm.queries WHERE query LIKE 'fq\_%' ORDER BY 1;

INSERT INTO fd (k, v, sw_partition, sw_write_time)
SELECT i % 5, i, i % 4, '2026-01-01 00:00:00+00'::timestamptz + i * interval '100 ms'
  FROM generate_series(1, 600) i;
SELECT streamwm.process('fd', now => '2026-01-01 00:10:00+00');
-- two late rows (W is 60 s) and more rows, in two steps
INSERT INTO fd (k, v, sw_partition, sw_write_time)
VALUES (1, 5000, 1, '2026-01-01 00:00:30+00'), (2, 6000, 2, '2026-01-01 00:00:31+00');
INSERT INTO fd (k, v, sw_partition, sw_write_time)
SELECT i % 5, i, i % 4, '2026-01-01 00:00:00+00'::timestamptz + i * interval '100 ms'
  FROM generate_series(601, 900) i;
SELECT streamwm.process('fd', now => '2026-01-01 00:10:00+00');
SELECT late_events, watermark FROM streamwm.streams WHERE stream = 'fd'::regclass;

-- the recomputation: every accepted row (not in the late log), in each of
-- its two windows that closed
CREATE TEMP TABLE fd_rows AS
SELECT d.k, d.v, d.sw_event_time FROM fd d
 WHERE d.sw_offset NOT IN (SELECT sw_offset FROM streamwm.late_events);
CREATE FUNCTION fd_model(src regclass) RETURNS TABLE (ws timestamptz, k int, n bigint, s bigint,
                                                      m int, a float8, a8 numeric, sn numeric)
LANGUAGE plpgsql AS $$
BEGIN
  RETURN QUERY EXECUTE format(
   'SELECT w.ws, r.k, count(*), sum(r.v), max(r.v), avg(r.v::float8), avg(r.v::int8),
           sum(r.v::numeric / 3)
      FROM %s r, LATERAL (VALUES (streamwm.window_start(r.sw_event_time, ''10 s'')),
                                 (streamwm.window_start(r.sw_event_time, ''10 s'') - interval ''10 s'')) w(ws)
     WHERE r.v > 0 AND w.ws + interval ''20 s'' <= (SELECT watermark FROM streamwm.streams WHERE stream = ''fd''::regclass)
     GROUP BY 1, 2', src);
END $$;
CREATE TEMP TABLE fd_want AS SELECT * FROM fd_model('fd_rows');
SELECT (SELECT count(*) FROM fd_want) AS windows,
       (SELECT count(*) FROM (SELECT window_start, k, n, s, m FROM fq_nodes
                              EXCEPT SELECT ws, k, n, s, m FROM fd_want) x) AS extra,
       (SELECT count(*) FROM (SELECT ws, k, n, s, m FROM fd_want
                              EXCEPT SELECT window_start, k, n, s, m FROM fq_nodes) x) AS missing,
       (SELECT count(*) FROM fq_nodes q JOIN fd_want w ON w.ws = q.window_start AND w.k = q.k
         WHERE abs(q.a - w.a) > 1e-9 OR q.s8 <> w.s OR q.a8 <> w.a8 OR q.sn <> w.sn) AS off;
SELECT (SELECT count(*) FROM (SELECT window_start, k, s FROM fq_local
                              EXCEPT SELECT ws, k, s FROM fd_want) x) AS local_differing,
       (SELECT count(*) FROM (SELECT window_start, k, n FROM fq_func
                              EXCEPT SELECT ws, k, n FROM fd_want) x) AS func_differing;

-- Which rows each fold reads: the coordinator's copy of the rows is made to
-- differ from the shards (v + 1000), the pane tables are emptied (a
-- rebuild folds every retained row of the open windows again), and rows
-- that close the open windows arrive.  The query folded on the nodes sees
-- the shards' values, the others the copy's.
UPDATE fd_sw_rows SET v = v + 1000;
SELECT format('TRUNCATE %s, %s', (SELECT pane_table FROM streamwm.query_def WHERE name = 'fq_nodes'),
              (SELECT pane_table FROM streamwm.query_def WHERE name = 'fq_local')) AS trunc \gset
:trunc;
INSERT INTO fd (k, v, sw_partition, sw_write_time)
SELECT i % 5, i, i % 4, '2026-01-01 00:00:00+00'::timestamptz + i * interval '100 ms'
  FROM generate_series(901, 1200) i;
SELECT streamwm.process('fd', now => '2026-01-01 00:10:00+00');
CREATE TEMP TABLE fd_rows2 AS
SELECT d.k, d.v, d.sw_event_time FROM fd d
 WHERE d.sw_offset NOT IN (SELECT sw_offset FROM streamwm.late_events);
CREATE TEMP TABLE fd_copy AS
SELECT d.k, d.v, d.sw_event_time FROM fd_sw_rows d
 WHERE d.sw_offset NOT IN (SELECT sw_offset FROM streamwm.late_events);
CREATE TEMP TABLE fd_shards AS SELECT * FROM fd_model('fd_rows2');
CREATE TEMP TABLE fd_copied AS SELECT * FROM fd_model('fd_copy');
-- the windows that closed in this step (after 80 s)
SELECT (SELECT count(*) FROM fq_nodes WHERE window_start > '2026-01-01 00:01:00+00') AS new_windows,
       (SELECT count(*) FROM (SELECT window_start, k, n, s, m FROM fq_nodes
                              EXCEPT SELECT ws, k, n, s, m FROM fd_shards) x) AS nodes_vs_shards,
       (SELECT count(*) FROM (SELECT window_start, k, s FROM fq_local
                              WHERE window_start > '2026-01-01 00:01:00+00'
                              EXCEPT SELECT ws, k, s FROM fd_copied) x) AS local_vs_copy,
       (SELECT count(*) FROM (SELECT window_start, k, s FROM fq_local
                              WHERE window_start > '2026-01-01 00:01:00+00'
                              EXCEPT SELECT ws, k, s FROM fd_shards) x) AS local_vs_shards;

-- processing time folds on the nodes too: every retained row into the
-- window of the step that read it (1,300 rows at 00:00:30, 50 at 00:01:30)
SELECT streamwm.create_query('fq_proc', 'SELECT k, count(*) AS n FROM fd GROUP BY k',
  hop => '1 min', size => '1 min', time_domain => 'processing', start_from => 'earliest');
INSERT INTO fd (k, v, sw_partition, sw_write_time)
SELECT i % 5, i, i % 4, '2026-01-01 00:00:00+00'::timestamptz + i * interval '100 ms'
  FROM generate_series(1201, 1300) i;
SELECT streamwm.process('fd', now => '2030-01-01 00:00:30+00');
INSERT INTO fd (k, v, sw_partition, sw_write_time)
SELECT i % 5, i, i % 4, '2026-01-01 00:00:00+00'::timestamptz + i * interval '100 ms'
  FROM generate_series(1301, 1350) i;
SELECT streamwm.process('fd', now => '2030-01-01 00:01:30+00');
SELECT streamwm.process('fd', now => '2030-01-01 00:02:30+00');
SELECT window_start, sum(n) AS rows FROM fq_proc GROUP BY 1 ORDER BY 1;

SELECT streamwm.drop_query(q, drop_result => true) FROM unnest(ARRAY['fq_nodes', 'fq_local', 'fq_func', 'fq_proc']) q;
SELECT streamwm.drop_stream('fd', cascade => true);

DROP FUNCTION fd_double(int), fd_model(regclass);
DROP AGGREGATE fd_sum(int8);

-- While every query of a stream folds on the nodes, steps make no copy of
-- the rows: they read the rows' event times from the shards, and retention
-- removes rows there.  A query that does not fold on the nodes makes the
-- next step copy every retained row; once it is gone, the next step empties
-- the copy.  recompute() makes the copy it reads.
SELECT streamwm.create_stream('fm', 'k int, v int', partitions => 2, distributed => true,
                              watermark_delay => '0 s', retention => '30 s');
SELECT streamwm.create_query('fm_nodes', 'SELECT k, count(*) AS n, sum(v) AS s FROM fm GROUP BY k',
  hop => '10 s', size => '10 s', start_from => 'earliest');
CREATE PROCEDURE fm_load(first int, last int) LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO fm (k, v, sw_partition, sw_write_time)
  SELECT i % 3, i, i % 2, '2026-01-01 00:00:00+00'::timestamptz + i * interval '100 ms'
    FROM generate_series(first, last) i;
  COMMIT;
  PERFORM streamwm.process('fm', now => '2026-01-01 00:10:00+00');
END $$;
CALL fm_load(1, 400);
SELECT count(*) AS stored FROM fm;
SELECT count(*) AS copied FROM fm_sw_rows;
-- count(DISTINCT) does not fold on the nodes
SELECT streamwm.create_query('fm_general', 'SELECT k, count(DISTINCT v % 7) AS d FROM fm GROUP BY k',
  hop => '10 s', size => '10 s', start_from => 'earliest');
CALL fm_load(401, 600);
SELECT (SELECT count(*) FROM fm) AS stored, count(*) AS copied,
       (SELECT count(*) FROM (SELECT k, v, sw_partition, sw_offset FROM fm
                              EXCEPT SELECT k, v, sw_partition, sw_offset FROM fm_sw_rows) d) AS differ
  FROM fm_sw_rows;
-- (the windows before 30 s were computed before retention removed rows)
CREATE TEMP TABLE fm_want AS
SELECT streamwm.window_start(sw_event_time, '10 s') AS ws, k, count(DISTINCT v % 7) AS d
  FROM fm GROUP BY 1, 2;
SELECT count(*) AS windows,
       count(*) FILTER (WHERE w.d IS DISTINCT FROM g.d) AS differ
  FROM fm_general g FULL JOIN fm_want w ON w.ws = g.window_start AND w.k = g.k
 WHERE coalesce(g.window_start, w.ws) >= '2026-01-01 00:00:30+00'
   AND coalesce(g.window_start, w.ws) < '2026-01-01 00:00:50+00';
SELECT streamwm.drop_query('fm_general', drop_result => true);
CALL fm_load(601, 800);
SELECT count(*) AS copied FROM fm_sw_rows;
-- retention removed the rows of the shards before W - 30 s (W is 80 s)
SELECT min(sw_event_time) AS oldest, count(*) AS stored FROM fm;
SELECT events, expired_rows FROM streamwm.streams WHERE stream = 'fm'::regclass;
-- the windows of fm_nodes, each counted once
SELECT window_start, sum(n) AS n, sum(s) AS s FROM fm_nodes GROUP BY 1 ORDER BY 1;
-- recompute: the same windows from a copy made for it
SELECT streamwm.recompute('fm_nodes', '2026-01-01 00:00:50+00', '2026-01-01 00:01:20+00') AS recomputed;
SELECT window_start, sum(n) AS n, sum(s) AS s FROM fm_nodes GROUP BY 1 ORDER BY 1;
SELECT count(*) AS copied FROM fm_sw_rows;
CALL fm_load(801, 810);
SELECT count(*) AS copied FROM fm_sw_rows;
SELECT streamwm.drop_stream('fm', cascade => true);
DROP TABLE fm_nodes;
DROP PROCEDURE fm_load(int, int);
