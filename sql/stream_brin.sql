-- A local stream's own index is streamwm_brin (src/stream_brin.c): BRIN,
-- but its writers skip the per-row summary update and, as they commit, take
-- the summaries of the block ranges they wrote into away.  Rows that land
-- in a summarised range (space freed by a DELETE and VACUUM) are found by
-- index scans: by their own transaction before it commits, by everyone
-- after; and a step processes them.
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
DO $$BEGIN EXECUTE format('ALTER DATABASE %I SET streamwm.enabled = off', current_database()); END$$;
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS streamwm;
RESET client_min_messages;

SELECT streamwm.create_stream('sb', 'v int8, pad text', idle_timeout => '1 hour');
SELECT a.amname, pg_catalog.pg_get_indexdef(i.indexrelid) ~ 'USING streamwm_brin \(sw_partition, sw_offset, sw_event_time\)' AS def
  FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam
 WHERE i.indrelid = 'sb'::regclass;
SELECT streamwm.create_query('sb_n', 'SELECT count(*) AS n, sum(v) AS s FROM sb',
                             hop => '1 hour', size => '1 hour') IS NOT NULL AS created;
CREATE TEMP TABLE sb_seen (phase text, n bigint);

-- 40 full block ranges of rows, all summarised by VACUUM
INSERT INTO sb (sw_write_time, v, pad)
SELECT to_timestamp(1000 + i / 1000.0), i, repeat('x', 200) FROM generate_series(1, 40000) i;
VACUUM sb;
SELECT pg_relation_size('sb') / 8192 >= 32 * 30 AS blocks;

-- free the space of the old rows: new rows go into summarised ranges
DELETE FROM sb WHERE v <= 39000;
VACUUM sb;
SELECT max(sw_offset) AS old_max FROM sb \gset

SET enable_seqscan = off;
SET enable_indexscan = off;
EXPLAIN (COSTS OFF) SELECT count(*) FROM sb WHERE sw_partition = 0 AND sw_offset > 0;

BEGIN;
INSERT INTO sb (sw_write_time, v, pad)
SELECT to_timestamp(2000 + i / 1000.0), 100000 + i, repeat('y', 200) FROM generate_series(1, 5000) i;
-- the new rows went into the old ranges (below the table's end)
SELECT min((ctid::text::point)[0]) < 32 * 30 AS reused FROM sb WHERE v > 100000;
-- its own transaction finds them through the index
INSERT INTO sb_seen SELECT 'own', count(*) FROM sb WHERE sw_partition = 0 AND sw_offset > :old_max;
COMMIT;
-- and so does everyone after the commit
INSERT INTO sb_seen SELECT 'after', count(*) FROM sb WHERE sw_partition = 0 AND sw_offset > :old_max;
-- also after the ranges were summarised again
VACUUM sb;
INSERT INTO sb_seen SELECT 'summarised', count(*) FROM sb WHERE sw_partition = 0 AND sw_offset > :old_max;
-- a rolled-back transaction's rows are not found
BEGIN;
INSERT INTO sb (sw_write_time, v, pad) SELECT to_timestamp(3000), 200000 + i, 'z' FROM generate_series(1, 100) i;
ROLLBACK;
INSERT INTO sb_seen SELECT 'rolled back', count(*) FROM sb WHERE v > 200000;
RESET enable_seqscan;
RESET enable_indexscan;
-- the model: a sequential scan
SELECT s.phase, s.n, s.n = CASE s.phase WHEN 'rolled back' THEN (SELECT count(*) FROM sb WHERE v > 200000)
                                        ELSE (SELECT count(*) FROM sb WHERE sw_offset > :old_max) END AS as_seq_scan
  FROM sb_seen s ORDER BY s.phase;

-- a step reads them (the deleted rows are counted as purged)
-- (a row at 9000 s closes the windows of all the others)
INSERT INTO sb (sw_write_time, v) VALUES (to_timestamp(9000), 0);
SELECT streamwm.process('sb', now => to_timestamp(9000));
SELECT sum(n) AS n, sum(s) = (SELECT sum(v) FROM sb) AS sums, (SELECT count(*) FROM sb WHERE v > 0) AS rows FROM sb_n;
SELECT events, purged_rows FROM streamwm.streams WHERE stream = 'sb'::regclass;

SELECT streamwm.drop_stream('sb', cascade => true);
