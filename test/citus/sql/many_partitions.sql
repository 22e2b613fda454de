-- A distributed stream of 100 partitions (several shards per worker, and
-- partitions whose commit-lock stripes would collide: 1 and 33), written by
-- statements that Citus runs over one connection per shard: each
-- connection is a transaction of its own on its node, prepared before any
-- commits.  Commits on a node lock each partition they wrote, so two such
-- connections never wait for each other's prepared transaction (they did,
-- with locks per stripe of 32 partitions, until the 500 ms bound failed the
-- INSERT).  Then steps read the 100 partitions' ranges on the nodes, and the
-- windows equal a recomputation.
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
SET client_min_messages = warning;
SELECT streamwm.create_stream('mp', 'k int, v int', partitions => 100, distributed => true,
                              watermark_delay => '0 s');
SELECT streamwm.create_query('mp_q', 'SELECT k, count(*) AS n, sum(v) AS s FROM mp GROUP BY k',
  hop => '10 s', size => '20 s', start_from => 'earliest');
SELECT count(*) AS shards, count(DISTINCT nodeport) AS nodes
  FROM citus_shards WHERE table_name = 'mp'::regclass;

SET citus.force_max_query_parallelization = on;
INSERT INTO mp (k, v, sw_partition, sw_write_time)
SELECT i % 7, i, i % 100, '2026-01-01'::timestamptz + i * interval '10 ms'
  FROM generate_series(1, 20000) i;
RESET citus.force_max_query_parallelization;
SELECT count(*) AS stored, count(DISTINCT sw_partition) AS partitions FROM mp;
SELECT streamwm.process('mp', now => '2026-01-01 00:10:00');
-- the default: Citus chooses the connections
INSERT INTO mp (k, v, sw_partition, sw_write_time)
SELECT i % 7, i, i % 100, '2026-01-01'::timestamptz + i * interval '10 ms'
  FROM generate_series(20001, 40000) i;
SELECT streamwm.process('mp', now => '2026-01-01 00:10:00');
SELECT events, unprocessed_events, late_events FROM streamwm.streams WHERE stream = 'mp'::regclass;
SELECT query, last_error FROM streamwm.queries WHERE query = 'mp_q';

SELECT watermark FROM streamwm.streams WHERE stream = 'mp'::regclass \gset
CREATE TEMP TABLE mp_rows AS SELECT k, v, sw_event_time AS t FROM mp;
CREATE TEMP TABLE mp_want AS
SELECT w AS ws, k, count(*) AS n, sum(v) AS s
  FROM mp_rows, LATERAL (VALUES (streamwm.window_start(t, '10 s')),
                                (streamwm.window_start(t, '10 s') - interval '10 s')) x(w)
 WHERE w + interval '20 s' <= :'watermark' GROUP BY 1, 2;
SELECT (SELECT count(*) FROM mp_want) AS windows,
       (SELECT count(*) FROM ((SELECT window_start, k, n, s FROM mp_q EXCEPT SELECT * FROM mp_want)
                              UNION ALL (SELECT * FROM mp_want
                                         EXCEPT SELECT window_start, k, n, s FROM mp_q)) d) AS differ;

SELECT streamwm.drop_stream('mp', cascade => true);
DROP TABLE mp_q;
