-- Distributed streams (create_stream(..., distributed => true)): the stream
-- and its commit log distributed by partition over the workers, rows routed
-- by the partition chosen on the coordinator, ordered where they land, and
-- processed on the coordinator exactly as a local stream.
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';

-- SPEC section 9, the YDB example, on a distributed stream
SELECT streamwm.create_stream('input', 'pass int8, payload text',
                              watermark_delay => 'PT5S', distributed => true);
SELECT streamwm.create_query('example',
  $$SELECT array_agg(payload ORDER BY payload) AS result
      FROM input WHERE pass > 0$$,
  hop => 'PT5S', size => 'PT10S');
SELECT streamwm.ingest('input', '{"pass": 1, "payload": "a"}', write_time => '1970-01-01T00:00:40Z');
SELECT streamwm.ingest('input', '{"pass": 1, "payload": "b"}', write_time => '1970-01-01T00:00:42Z');
SELECT streamwm.ingest('input', '{"pass": 0, "payload": "c"}', write_time => '1970-01-01T00:00:50Z');
SELECT streamwm.ingest('input', '{"pass": 1, "payload": "d"}', write_time => '1970-01-01T00:00:40Z');
SELECT streamwm.process('input');
SELECT window_end, result FROM example;
-- d is late: 40 s < W = 45 s
SELECT partition, sw_event_time, watermark FROM streamwm.late_events;
-- (by its offset alone: a regclass in a query Citus sends to a worker names
-- the worker's table there)
SELECT sw_offset AS late_offset FROM streamwm.late_events \gset
SELECT payload FROM input WHERE sw_offset = :late_offset;
SELECT stream, partitions, watermark, events, late_events FROM streamwm.streams;
-- window [40, 50) stays open
SELECT query, closed_until, windows_emitted, last_error FROM streamwm.queries;

-- What Citus made of it: the stream and its commit log, co-located, one
-- shard per partition; the coordinator's copy of the rows read is local.
SELECT logicalrelid::regclass AS relation, partmethod,
       column_to_column_name(logicalrelid, partkey) AS routed_by
  FROM pg_dist_partition WHERE logicalrelid::text LIKE 'input%' ORDER BY 1;
SELECT count(DISTINCT colocationid) AS colocation_groups FROM pg_dist_partition
 WHERE logicalrelid IN ('input'::regclass, 'input_sw_log'::regclass);
SELECT shard_count FROM citus_tables WHERE table_name = 'input'::regclass;
SELECT rows_table, log_table FROM streamwm.stream_def WHERE stream = 'input'::regclass;
SELECT count(*) AS citus_rows_tables FROM citus_tables WHERE table_name = 'input_sw_rows'::regclass;
SELECT streamwm.drop_stream('input', cascade => true);
SELECT count(*) AS left_over FROM pg_class WHERE relname LIKE 'input%';
SELECT count(*) AS left_over_citus FROM pg_dist_partition WHERE logicalrelid::text LIKE 'input%';
DROP TABLE example;

-- Every way in, on the coordinator, across partitions on both workers.
SELECT streamwm.create_stream('ev', 'k int, v text', partitions => 4,
                              watermark_delay => '1 s', distributed => true);
SELECT count(DISTINCT nodeport) AS worker_nodes FROM citus_shards WHERE table_name = 'ev'::regclass;
-- the partitions, not just the shards, spread evenly over the workers, each
-- in a shard of its own (the shard count is chosen for it)
SELECT array_agg(n ORDER BY n) AS partitions_per_worker, sum(shards) AS shards_used
  FROM (SELECT s.nodeport, count(*) AS n, count(DISTINCT s.shardid) AS shards
          FROM generate_series(0, 3) p
          JOIN citus_shards s ON s.table_name = 'ev'::regclass
           AND s.shardid = get_shard_id_for_distribution_column('ev', p)
         GROUP BY 1) x;
SELECT streamwm.create_query('evq', 'SELECT k, count(*) AS n FROM ev GROUP BY k',
                             hop => '10 s', size => '10 s');
-- no partition given: this session's partition, chosen on the coordinator
INSERT INTO ev (k, v, sw_write_time) VALUES (1, 'a', '1970-01-01 00:00:01Z');
INSERT INTO ev (k, v, sw_write_time) VALUES (1, 'b', '1970-01-01 00:00:02Z'), (2, 'c', '1970-01-01 00:00:03Z');
SELECT count(DISTINCT sw_partition) AS sticky FROM ev;
-- explicit partitions, one transaction per partition
INSERT INTO ev (k, v, sw_partition, sw_write_time) VALUES (1, 'd', 0, '1970-01-01 00:00:04Z');
INSERT INTO ev (k, v, sw_partition, sw_write_time) VALUES (2, 'e', 1, '1970-01-01 00:00:05Z');
COPY ev (k, v, sw_partition, sw_write_time) FROM STDIN;
3	f	2	1970-01-01 00:00:06Z
3	g	2	1970-01-01 00:00:07Z
\.
SELECT streamwm.ingest('ev', '[{"k": 4, "v": "h"}, {"k": 4, "v": "i"}]', partition => 3,
                       write_time => '1970-01-01 00:00:08Z');
SELECT streamwm.ingest_lines('ev', E'{"k": 5, "v": "j"}\n{"k": 5, "v": "k"}', partition => 1,
                             write_time => '1970-01-01 00:00:09Z');
-- one transaction writing partitions on both workers: Citus commits it with
-- two-phase commit, and each shard orders its rows at PREPARE
SELECT count(DISTINCT nodeport) AS nodes_written FROM citus_shards s
 WHERE s.table_name = 'ev'::regclass
   AND s.shardid IN (SELECT get_shard_id_for_distribution_column('ev', p) FROM generate_series(0, 3) p);
INSERT INTO ev (k, v, sw_partition, sw_write_time)
SELECT 6, 'l' || p, p, '1970-01-01 00:00:10Z' FROM generate_series(0, 3) p;
BEGIN;
SELECT streamwm.ingest('ev', '{"k": 7, "v": "m"}', partition => 0, write_time => '1970-01-01 00:00:11Z');
SELECT streamwm.ingest('ev', '{"k": 7, "v": "n"}', partition => 1, write_time => '1970-01-01 00:00:11Z');
SELECT streamwm.ingest('ev', '{"k": 7, "v": "o"}', partition => 2, write_time => '1970-01-01 00:00:11Z');
SELECT streamwm.ingest('ev', '{"k": 7, "v": "p"}', partition => 3, write_time => '1970-01-01 00:00:11Z');
COMMIT;
-- a rolled back one leaves nothing
BEGIN;
INSERT INTO ev (k, v, sw_partition) VALUES (99, 'x', 0), (99, 'y', 1);
ROLLBACK;
-- what a user may not set is refused on the shard, and nothing is stored
-- (terse: the worker's address is in the context)
\set VERBOSITY terse
INSERT INTO ev (k, sw_offset) VALUES (98, 1);
INSERT INTO ev (k, sw_partition) VALUES (98, 4);
UPDATE ev SET v = 'z' WHERE k = 1;
\set VERBOSITY default
SELECT count(*) AS rows, count(DISTINCT sw_partition) AS partitions FROM ev;
-- each partition's commit log entries cover its offsets, in arrival order
SELECT l.partition, bool_and(l.lo < l.hi) AS ranges,
       bool_and(l.hi > coalesce(l.prev_hi, -1) AND l.arrival >= coalesce(l.prev_arrival, '-infinity')) AS ordered,
       (SELECT count(*) FROM ev e WHERE e.sw_partition = l.partition) =
       (SELECT count(*) FROM ev e WHERE e.sw_partition = l.partition AND e.sw_offset <= max(l.hi)) AS covered
  FROM (SELECT *, lag(hi) OVER w AS prev_hi, lag(arrival) OVER w AS prev_arrival
          FROM ev_sw_log WINDOW w AS (PARTITION BY partition ORDER BY hi)) l
 GROUP BY l.partition ORDER BY 1;
SELECT streamwm.process('ev');
SELECT stream, events, late_events, watermark FROM streamwm.streams;
SELECT partition, processed_offset = last_offset AS caught_up FROM streamwm.partitions ORDER BY 1;
SELECT window_start, k, n FROM evq ORDER BY 1, 2;
-- the step read every row once: the coordinator's copy holds them all
-- evq folds on the nodes (fold.sql), the only query: the rows are read
-- where they are, and no copy of them is made on the coordinator
SELECT count(*) AS copied FROM ev_sw_rows;
-- the commit log keeps each partition's newest entry only
SELECT partition, count(*) AS entries FROM ev_sw_log GROUP BY 1 ORDER BY 1;
-- steps with nothing new change nothing
SELECT streamwm.process('ev');
SELECT stream, events, late_events, watermark FROM streamwm.streams;
-- a later row in every partition closes [10 s, 20 s)
INSERT INTO ev (k, v, sw_partition, sw_write_time)
SELECT 8, 'q' || p, p, '1970-01-01 00:00:25Z' FROM generate_series(0, 3) p;
SELECT streamwm.process('ev');
SELECT window_start, k, n FROM evq ORDER BY 1, 2;

-- a step in the transaction that wrote into the stream is refused, on the
-- coordinator (it saw the INSERT), whichever connections Citus uses: with
-- one connection per shard the shards' own check saw only the fence's, and
-- a row the commit then renumbered was read twice (review)
BEGIN;
INSERT INTO ev (k, v, sw_partition, sw_write_time) VALUES (9, 'r', 0, '1970-01-01 00:00:26Z');
\set VERBOSITY terse
SELECT streamwm.process('ev');
\set VERBOSITY default
ROLLBACK;
BEGIN;
SET LOCAL citus.force_max_query_parallelization = on;
SELECT count(*) > 0 AS some_rows FROM ev;
INSERT INTO ev (k, v, sw_partition, sw_write_time) VALUES (9, 'r', 2, '1970-01-01 00:00:26Z');
\set VERBOSITY terse
SELECT streamwm.process('ev');
\set VERBOSITY default
ROLLBACK;
BEGIN;
COPY ev (k, v, sw_partition, sw_write_time) FROM STDIN;
9	r	1	1970-01-01 00:00:26Z
\.
\set VERBOSITY terse
SELECT streamwm.process('ev');
\set VERBOSITY default
ROLLBACK;

-- Retention (10 s behind W): what it removes from the coordinator's copy it
-- removes from the shards; late rows stay while they are evidence.
SELECT streamwm.create_stream('evr', 'k int', partitions => 2, retention => '10 s',
                              distributed => true);
SELECT streamwm.create_query('evrq', 'SELECT count(*) AS n FROM evr', hop => '5 s', size => '5 s');
INSERT INTO evr (k, sw_partition, sw_write_time)
SELECT i, i % 2, '1970-01-01 00:00:00Z'::timestamptz + make_interval(secs => i) FROM generate_series(1, 30) i;
INSERT INTO evr (k, sw_partition, sw_write_time) VALUES (100, 0, '1970-01-01 00:00:01Z');
SELECT streamwm.process('evr');
SELECT watermark, events, late_events, expired_rows FROM streamwm.streams WHERE stream = 'evr'::regclass;
SELECT min(k) FILTER (WHERE k < 100) AS oldest_kept, count(*) AS rows FROM evr;
SELECT count(*) AS copied FROM evr_sw_rows;
SELECT window_start, n FROM evrq ORDER BY 1;
SELECT streamwm.drop_stream('evr', cascade => true);
DROP TABLE evrq;

-- What is refused, and where.
-- the columns and the name of a distributed stream stay
ALTER TABLE ev ADD COLUMN w int;
ALTER TABLE ev RENAME COLUMN v TO vv;
ALTER TABLE ev RENAME TO ev_renamed;
-- 'latest' cannot be told apart across the nodes' offset ranges once there are rows
SELECT streamwm.create_query('evq2', 'SELECT k, count(*) AS n FROM ev GROUP BY k',
                             hop => '10 s', size => '10 s');
SELECT streamwm.create_query('evq2', 'SELECT k, count(*) AS n FROM ev GROUP BY k',
                             hop => '10 s', size => '10 s', start_from => 'earliest');
SELECT streamwm.process('ev');
SELECT (SELECT array_agg(t ORDER BY t) FROM (SELECT * FROM evq) t) =
       (SELECT array_agg(t ORDER BY t) FROM (SELECT * FROM evq2) t) AS earliest_same;
-- on a worker
\getenv w1 CITUS_W1
\getenv coordinator CITUS_COORDINATOR
\connect - - - :w1
SELECT streamwm.create_stream('evw', 'k int', distributed => true);
SELECT to_regclass('evw');
\connect - - - :coordinator
-- a name whose commit log's shards Citus would shorten is refused;
-- _pick_partition only for those who may insert (ordinary owners of
-- distributed streams: owner.sql)
CREATE ROLE regress_dist_mallory;
GRANT CREATE ON SCHEMA public TO regress_dist_mallory;
SET ROLE regress_dist_mallory;
SELECT streamwm_internal._pick_partition('public.ev');
SELECT streamwm_internal._pick_partition('pg_catalog.pg_authid');
RESET ROLE;
SELECT streamwm.create_stream(repeat('e', 48), 'k int', distributed => true);
SELECT to_regclass(repeat('e', 48));
SELECT streamwm.create_stream(repeat('e', 47), 'k int', distributed => true);
SELECT streamwm.ingest(repeat('e', 47)::regclass, '[{"k": 1}, {"k": 2}]');
SELECT streamwm.drop_stream(repeat('e', 47));
REVOKE CREATE ON SCHEMA public FROM regress_dist_mallory;
DROP ROLE regress_dist_mallory;
-- TRUNCATE: offsets are never reused
SELECT max(sw_offset) AS ev_max FROM ev WHERE sw_partition = 0 \gset
TRUNCATE ev RESTART IDENTITY;
TRUNCATE ev;
INSERT INTO ev (k, v, sw_partition, sw_write_time) VALUES (1, 'after', 0, '1970-01-01 00:10:00Z');
SELECT sw_offset > :ev_max AS offset_not_reused FROM ev WHERE v = 'after';
SELECT streamwm.process('ev');
SET client_min_messages = warning;
SELECT streamwm.drop_stream('ev', cascade => true);
DROP TABLE evq, evq2;
SELECT count(*) AS left_over FROM pg_class WHERE relname LIKE 'ev%';
