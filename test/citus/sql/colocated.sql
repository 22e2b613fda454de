-- Result tables co-located with their distributed stream: a query that
-- groups by the stream's sw_partition gets a result table that create_query
-- distributes by that output column, co-located with the stream, so each
-- result row lives on the node of its partition.  Any other query's result
-- table stays local on the coordinator.  Results are checked against a
-- recomputation from the stream's rows, over more steps than the plan
-- cache's five custom plans (a statement writing a Citus table is planned
-- at every step), with late rows, recompute(), alter_query(),
-- result_retention, a shard move, and an ordinary role's stream.  Session
-- and count queries keep local result tables.
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
SET client_min_messages = warning;
\getenv w1 CITUS_W1
\getenv w2 CITUS_W2

SELECT streamwm.create_stream('cr', 'k int, v int', partitions => 4, distributed => true,
                              partition_key => 'k', watermark_delay => '0 s',
                              allowed_lateness => '0 s');
-- co-located: pane plan, general plan (DISTINCT)
SELECT streamwm.create_query('cr_pane',
  'SELECT sw_partition AS p, k, count(*) AS n, sum(v) AS s FROM cr GROUP BY sw_partition, k',
  hop => '10 s', size => '20 s', start_from => 'earliest');
SELECT streamwm.create_query('cr_general',
  'SELECT k, sw_partition AS p, count(DISTINCT v % 7) AS d FROM cr GROUP BY k, sw_partition',
  hop => '10 s', size => '20 s', start_from => 'earliest');
SELECT streamwm.create_session_query('cr_session',
  'SELECT sw_partition AS p, count(*) AS n FROM cr GROUP BY sw_partition',
  gap => '5 s', start_from => 'earliest');
SELECT streamwm.create_count_query('cr_count',
  'SELECT sw_partition AS p, sum(v) AS s FROM cr GROUP BY sw_partition',
  size => 10, start_from => 'earliest');
-- local: sessions and count windows (their steps update state rows by
-- ctid), no sw_partition in GROUP BY, or an expression of it
SELECT streamwm.create_query('cr_local', 'SELECT k, count(*) AS n FROM cr GROUP BY k',
  hop => '10 s', size => '20 s', start_from => 'earliest');
SELECT streamwm.create_query('cr_expr',
  'SELECT sw_partition + 0 AS p, count(*) AS n FROM cr GROUP BY sw_partition + 0',
  hop => '10 s', size => '20 s', start_from => 'earliest');
-- a local table the user gives stays local
CREATE TABLE cr_given (window_start timestamptz, window_end timestamptz, p int, n bigint,
                       PRIMARY KEY (window_start, p));
SELECT streamwm.create_query('cr_given',
  'SELECT sw_partition AS p, count(*) AS n FROM cr GROUP BY sw_partition',
  hop => '10 s', size => '10 s', result_table => 'cr_given', start_from => 'earliest');

SELECT q.name AS query, q.plan,
       coalesce(column_to_column_name(d.logicalrelid, d.partkey), 'local') AS distributed_by,
       d.colocationid IS NOT DISTINCT FROM (SELECT colocationid FROM pg_dist_partition
                                             WHERE logicalrelid = 'cr'::regclass) AS with_stream
  FROM streamwm.query_def q LEFT JOIN pg_dist_partition d ON d.logicalrelid = q.result_table
 WHERE q.stream = 'cr'::regclass ORDER BY 1;

-- a Citus table given as the result table must be distributed so, by the
-- query's sw_partition output
CREATE TABLE cr_other (window_start timestamptz, window_end timestamptz, p int, n bigint,
                       PRIMARY KEY (window_start, p));
SELECT create_distributed_table('cr_other', 'p', colocate_with => 'none');
SELECT streamwm.create_query('cr_other',
  'SELECT sw_partition AS p, count(*) AS n FROM cr GROUP BY sw_partition',
  hop => '10 s', size => '10 s', result_table => 'cr_other', start_from => 'earliest');
CREATE TABLE cr_bykey (window_start timestamptz, window_end timestamptz, p int, k int, n bigint,
                       UNIQUE NULLS NOT DISTINCT (window_start, p, k));
SELECT create_distributed_table('cr_bykey', 'k', colocate_with => 'cr');
SELECT streamwm.create_query('cr_bykey',
  'SELECT sw_partition AS p, k, count(*) AS n FROM cr GROUP BY sw_partition, k',
  hop => '10 s', size => '10 s', result_table => 'cr_bykey', start_from => 'earliest');
-- one made like create_query's is accepted
CREATE TABLE cr_made (window_start timestamptz, window_end timestamptz, p int, n bigint,
                      PRIMARY KEY (window_start, p));
SELECT create_distributed_table('cr_made', 'p', colocate_with => 'cr');
SELECT streamwm.create_query('cr_made',
  'SELECT sw_partition AS p, count(*) AS n FROM cr GROUP BY sw_partition',
  hop => '10 s', size => '10 s', result_table => 'cr_made', start_from => 'earliest');
-- not for a session query, even so
CREATE TABLE cr_sess_dist (window_start timestamptz, window_end timestamptz, p int, n bigint,
                           PRIMARY KEY (window_start, p));
SELECT create_distributed_table('cr_sess_dist', 'p', colocate_with => 'cr');
SELECT streamwm.create_session_query('cr_sess_dist',
  'SELECT sw_partition AS p, count(*) AS n FROM cr GROUP BY sw_partition',
  gap => '5 s', result_table => 'cr_sess_dist', start_from => 'earliest');
DROP TABLE cr_sess_dist;
-- and a local result table still cannot be distributed afterwards
SELECT create_distributed_table('cr_local', 'k');

-- eight steps of 200 rows each (20 s of event time), two late rows in each
-- step after the first
CREATE PROCEDURE cr_load(step int) LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO cr (k, v, sw_write_time)
  SELECT i % 50, i, '2026-01-01 00:00:00+00'::timestamptz + i * interval '100 ms'
    FROM generate_series(step * 200 + 1, step * 200 + 200) i;
  IF step > 0 THEN
    INSERT INTO cr (k, v, sw_write_time)
    VALUES (step, -step, '2026-01-01 00:00:00+00'::timestamptz + (step * 20 - 25) * interval '1 s'),
           (step + 1, -step, '2026-01-01 00:00:00+00'::timestamptz + (step * 20 - 30) * interval '1 s');
  END IF;
END $$;
SELECT format('CALL cr_load(%s)', step),
       'SELECT streamwm.process(''cr'', now => ''2026-01-01 00:10:00+00'')'
  FROM generate_series(0, 7) step \gexec
SELECT events, late_events, watermark FROM streamwm.streams WHERE stream = 'cr'::regclass;
SELECT query, windows_emitted > 0 AS emitted, last_error FROM streamwm.queries
 WHERE stream = 'cr'::regclass ORDER BY 1;

-- the recomputation: every accepted row, in each of its two windows that
-- closed
CREATE TEMP TABLE cr_rows AS
SELECT d.k, d.v, d.sw_partition AS p, d.sw_event_time AS t FROM cr d
 WHERE d.sw_offset NOT IN (SELECT sw_offset FROM streamwm.late_events);
CREATE FUNCTION cr_model(wm timestamptz)
RETURNS TABLE (ws timestamptz, p int, k int, n bigint, s bigint, d bigint)
LANGUAGE sql AS $$
  SELECT w.ws, r.p, r.k, count(*), sum(r.v), count(DISTINCT r.v % 7)
    FROM cr_rows r, LATERAL (VALUES (streamwm.window_start(r.t, '10 s')),
                                    (streamwm.window_start(r.t, '10 s') - interval '10 s')) w(ws)
   WHERE w.ws + interval '20 s' <= wm
   GROUP BY 1, 2, 3 $$;
CREATE TEMP TABLE cr_want AS
SELECT * FROM cr_model((SELECT watermark FROM streamwm.streams WHERE stream = 'cr'::regclass));
CREATE FUNCTION cr_check() RETURNS TABLE (windows bigint, pane_differing bigint,
                                          general_differing bigint, local_differing bigint)
LANGUAGE sql AS $$
  SELECT (SELECT count(*) FROM cr_want),
         (SELECT count(*) FROM ((SELECT window_start, p, k, n, s FROM cr_pane
                                 EXCEPT SELECT ws, p, k, n, s FROM cr_want)
                                UNION ALL (SELECT ws, p, k, n, s FROM cr_want
                                 EXCEPT SELECT window_start, p, k, n, s FROM cr_pane)) x),
         (SELECT count(*) FROM ((SELECT window_start, p, k, d FROM cr_general
                                 EXCEPT SELECT ws, p, k, d FROM cr_want)
                                UNION ALL (SELECT ws, p, k, d FROM cr_want
                                 EXCEPT SELECT window_start, p, k, d FROM cr_general)) x),
         (SELECT count(*) FROM ((SELECT window_start, k, n FROM cr_local
                                 EXCEPT SELECT ws, k, sum(n) FROM cr_want GROUP BY 1, 2)
                                UNION ALL (SELECT ws, k, sum(n) FROM cr_want GROUP BY 1, 2
                                 EXCEPT SELECT window_start, k, n FROM cr_local)) x) $$;
SELECT * FROM cr_check();
-- the partitions' rows, the tumbling windows' and the count windows' sums
SELECT (SELECT count(*) FROM cr_rows) AS accepted,
       (SELECT sum(n) FROM cr_given) AS given, (SELECT sum(n) FROM cr_made) AS made,
       (SELECT sum(n) FROM cr_expr) / 2 AS expr_halved,
       (SELECT count(*) FROM cr_count) AS count_windows,
       (SELECT count(*) FROM cr_count c
         WHERE c.s <> (SELECT sum(v) FROM (SELECT v FROM cr_rows r WHERE r.p = c.p
                                            ORDER BY t, v LIMIT 10 OFFSET c.window_seq * 10) x))
         AS count_differing;

-- each result row lives on the node that holds its partition's rows
SELECT count(*) AS result_rows,
       count(*) FILTER (WHERE rn.nodeport <> sn.nodeport) AS elsewhere
  FROM cr_pane r,
       LATERAL (SELECT nodeport FROM pg_dist_shard_placement
                 WHERE shardid = get_shard_id_for_distribution_column('cr_pane', r.p)) rn,
       LATERAL (SELECT nodeport FROM pg_dist_shard_placement
                 WHERE shardid = get_shard_id_for_distribution_column('cr', r.p)) sn;

-- recompute() and alter_query() on a co-located result table
UPDATE cr_pane SET n = 0, s = 0;
SELECT streamwm.recompute('cr_pane', '2025-12-31', '2026-01-02');
SELECT pane_differing FROM cr_check();
SELECT streamwm.alter_query('cr_pane',
  'SELECT sw_partition AS p, k, count(*) AS n, sum(v) AS s, max(v) AS m FROM cr GROUP BY sw_partition, k');
-- a new text whose p is no longer the partition would spread the rows
-- over the wrong nodes: refused
SELECT streamwm.alter_query('cr_pane',
  'SELECT k AS p, sw_partition AS k, count(*) AS n, sum(v) AS s, max(v) AS m FROM cr GROUP BY k, sw_partition');
SELECT streamwm.alter_query('cr_pane',
  'SELECT sw_partition + 0 AS p, k, count(*) AS n, sum(v) AS s, max(v) AS m FROM cr GROUP BY sw_partition + 0, k');
-- a shard move takes the result shards with the stream's; steps go on
SELECT get_shard_id_for_distribution_column('cr', 1) AS shard,
       (SELECT nodeport FROM pg_dist_shard_placement
         WHERE shardid = get_shard_id_for_distribution_column('cr', 1)) AS port \gset
SELECT citus_move_shard_placement(:shard, 'localhost', :port, 'localhost',
                                  CASE WHEN :port = :w1 THEN :w2 ELSE :w1 END,
                                  shard_transfer_mode => 'block_writes');
SELECT (SELECT nodeport FROM pg_dist_shard_placement
         WHERE shardid = get_shard_id_for_distribution_column('cr_pane', 1))
     = (SELECT nodeport FROM pg_dist_shard_placement
         WHERE shardid = get_shard_id_for_distribution_column('cr', 1)) AS moved_together,
       (SELECT nodeport FROM pg_dist_shard_placement
         WHERE shardid = get_shard_id_for_distribution_column('cr', 1)) <> :port AS moved;
SELECT format('CALL cr_load(%s)', step),
       'SELECT streamwm.process(''cr'', now => ''2026-01-01 00:10:00+00'')'
  FROM generate_series(8, 9) step \gexec
TRUNCATE cr_rows;
INSERT INTO cr_rows SELECT d.k, d.v, d.sw_partition, d.sw_event_time FROM cr d
 WHERE d.sw_offset NOT IN (SELECT sw_offset FROM streamwm.late_events);
TRUNCATE cr_want;
INSERT INTO cr_want
SELECT * FROM cr_model((SELECT watermark FROM streamwm.streams WHERE stream = 'cr'::regclass));
SELECT * FROM cr_check();
CREATE TEMP TABLE cr_pane_now AS SELECT * FROM cr_pane;
SELECT count(*) AS windows_with_max,
       count(*) FILTER (WHERE m <> (SELECT max(v) FROM cr_rows r
                                     WHERE r.p = q.p AND r.k = q.k AND r.t >= q.window_start
                                       AND r.t < q.window_end)) AS max_differing
  FROM cr_pane_now q WHERE m IS NOT NULL;

-- result_retention deletes from the co-located table
SELECT streamwm.drop_query('cr_made');
SELECT streamwm.create_query('cr_made',
  'SELECT sw_partition AS p, count(*) AS n FROM cr GROUP BY sw_partition',
  hop => '10 s', size => '10 s', result_table => 'cr_made', start_from => 'earliest',
  result_retention => '30 s');
CALL cr_load(10);
SELECT streamwm.process('cr', now => '2026-01-01 00:10:00+00');
SELECT watermark FROM streamwm.streams WHERE stream = 'cr'::regclass \gset
SELECT min(window_end) >= :'watermark'::timestamptz - interval '30 s' AS old_windows_gone,
       count(*) > 0 AS kept
  FROM cr_made;

-- nor can its distribution be changed afterwards
SELECT update_distributed_table_colocation('cr_pane', colocate_with => 'none');
SELECT alter_distributed_table('cr_pane', distribution_column => 'k');
SELECT undistribute_table('cr_pane');
-- a result table replaced by name with a Citus table is checked at the
-- next step as create_query checks it: the step fails, saying why
CREATE TABLE cr_session_new (LIKE cr_session INCLUDING ALL);
DROP TABLE cr_session;
ALTER TABLE cr_session_new RENAME TO cr_session;
SELECT create_distributed_table('cr_session', 'p', colocate_with => 'cr');
CALL cr_load(11);
SELECT streamwm.process('cr', now => '2026-01-01 00:10:00+00');
SELECT query, last_error FROM streamwm.queries WHERE query = 'cr_session';
-- (back to a local table: the step goes on)
SELECT undistribute_table('cr_session');
SELECT streamwm.process('cr', now => '2026-01-01 00:10:00+00');
SELECT query, last_error IS NULL AS ok FROM streamwm.queries WHERE query = 'cr_session';

SELECT streamwm.drop_stream('cr', cascade => true);

-- the first steps write with a plain INSERT; a row already there (written
-- by hand) makes it fail on its shard with unique_violation, and the step
-- runs again as the upsert
SELECT streamwm.create_stream('cf', 'k int, v int', partitions => 2, distributed => true,
                              watermark_delay => '0 s');
SELECT streamwm.create_query('cf_q', 'SELECT sw_partition AS p, count(*) AS n FROM cf GROUP BY sw_partition',
  hop => '10 s', size => '10 s', start_from => 'earliest');
INSERT INTO cf (k, v, sw_partition, sw_write_time)
SELECT i, i, i % 2, '2026-01-01'::timestamptz + i * interval '1 s' FROM generate_series(1, 30) i;
SELECT streamwm.process('cf', now => '2026-01-01 00:10:00');
INSERT INTO cf_q VALUES ('2026-01-01 00:00:30+00', '2026-01-01 00:00:40+00', 0, -1);
INSERT INTO cf (k, v, sw_partition, sw_write_time)
SELECT i, i, i % 2, '2026-01-01'::timestamptz + i * interval '1 s' FROM generate_series(31, 60) i;
SELECT streamwm.process('cf', now => '2026-01-01 00:10:00');
SELECT * FROM cf_q WHERE window_start >= '2026-01-01 00:00:20+00' ORDER BY 1, 3;
SELECT query, last_error FROM streamwm.queries WHERE stream = 'cf'::regclass;
SELECT streamwm.drop_stream('cf', cascade => true);
DROP TABLE cf_q;

-- an ordinary role's stream and query: its result table is its own,
-- distributed with its stream
CREATE ROLE regress_col_alice LOGIN;
GRANT CREATE ON SCHEMA public TO regress_col_alice;
SET ROLE regress_col_alice;
SELECT streamwm.create_stream('ca', 'k int, v int', partitions => 2, distributed => true,
                              watermark_delay => '0 s');
SELECT streamwm.create_query('ca_q',
  'SELECT sw_partition AS p, count(*) AS n, sum(v) AS s FROM ca GROUP BY sw_partition',
  hop => '10 s', size => '10 s', start_from => 'earliest');
INSERT INTO ca (k, v, sw_partition, sw_write_time)
SELECT i, i, i % 2, '2026-01-01 00:00:00+00'::timestamptz + i * interval '1 s'
  FROM generate_series(1, 100) i;
SELECT streamwm.process('ca', now => '2026-01-01 00:10:00+00');
SELECT p, sum(n) AS n, sum(s) AS s FROM ca_q GROUP BY p ORDER BY p;
RESET ROLE;
SELECT c.relowner::regrole AS owner, column_to_column_name(d.logicalrelid, d.partkey) AS distributed_by,
       d.colocationid = (SELECT colocationid FROM pg_dist_partition
                          WHERE logicalrelid = 'ca'::regclass) AS with_stream
  FROM pg_class c JOIN pg_dist_partition d ON d.logicalrelid = c.oid
 WHERE c.oid = 'ca_q'::regclass;
SET ROLE regress_col_alice;
SELECT streamwm.drop_stream('ca', cascade => true);
DROP TABLE ca_q;
RESET ROLE;
REVOKE CREATE ON SCHEMA public FROM regress_col_alice;
DROP ROLE regress_col_alice;
DROP TABLE cr_pane, cr_general, cr_session, cr_count, cr_local, cr_expr, cr_given, cr_other,
           cr_bykey, cr_made;
DROP FUNCTION cr_check(), cr_model(timestamptz);
DROP PROCEDURE cr_load(int);
