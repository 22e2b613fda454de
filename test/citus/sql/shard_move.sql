-- A shard move (citus_move_shard_placement) takes a partition's rows and
-- its commit log entries to another node, whose range of the offset
-- sequence may be lower (each node has its own): offsets stay increasing in
-- the partition, and processing skips nothing and repeats nothing.
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
SET client_min_messages = warning;
SELECT streamwm.create_stream('mv', 'k int', partitions => 4, watermark_delay => '1 s',
                              distributed => true);
SELECT streamwm.create_query('mvq', 'SELECT count(*) AS n, sum(k) AS s FROM mv', hop => '1 h', size => '1 h');
-- a DISTINCT aggregate does not fold on the nodes (fold.sql): the steps
-- copy the rows to the coordinator, checked below
SELECT streamwm.create_query('mvq8', 'SELECT count(DISTINCT k) AS d FROM mv', hop => '1 h', size => '1 h');
CREATE TABLE mv_sent (seq serial, k int, part int);

-- ingest into every partition, in transactions of one and of several rows
CREATE PROCEDURE mv_ingest(first int, last int) LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN first .. last LOOP
        INSERT INTO mv (k, sw_partition, sw_write_time)
        VALUES (i, i % 4, '1970-01-01 00:00:00Z'::timestamptz + make_interval(secs => i));
        INSERT INTO mv_sent (k, part) VALUES (i, i % 4);
        COMMIT;
        IF i % 5 = 0 THEN
            PERFORM streamwm.ingest('mv', pg_catalog.jsonb_build_array(
                         jsonb_build_object('k', -i), jsonb_build_object('k', -i - 1000)),
                     partition => 2, write_time => '1970-01-01 00:00:00Z'::timestamptz + make_interval(secs => i));
            INSERT INTO mv_sent (k, part) VALUES (-i, 2), (-i - 1000, 2);
            COMMIT;
        END IF;
        IF i % 7 = 0 THEN
            PERFORM streamwm.process('mv');
            COMMIT;
        END IF;
    END LOOP;
END $$;

-- partition 2's shard (and its commit log's) to the other worker, and back
SELECT get_shard_id_for_distribution_column('mv', 2) AS moved \gset
SELECT nodeport AS home FROM citus_shards WHERE shardid = :moved \gset
SELECT nodeport AS away FROM pg_dist_node WHERE nodeport NOT IN (:home) AND shouldhaveshards \gset
CALL mv_ingest(1, 20);
SELECT citus_move_shard_placement(:moved, 'localhost', :home, 'localhost', :away,
                                  shard_transfer_mode => 'block_writes');
SELECT count(DISTINCT nodeport) AS log_moved_along FROM citus_shards
 WHERE shardid IN (:moved, get_shard_id_for_distribution_column('mv_sw_log', 2)) AND nodeport = :away;
CALL mv_ingest(21, 40);
SELECT citus_move_shard_placement(:moved, 'localhost', :away, 'localhost', :home,
                                  shard_transfer_mode => 'block_writes');
CALL mv_ingest(41, 60);
SELECT streamwm.process('mv');

-- in each partition, offsets increase in the order the rows were sent
SELECT part, bool_and(ordered) AS offsets_increase
  FROM (SELECT s.part, m.sw_offset > lag(m.sw_offset) OVER w OR lag(m.sw_offset) OVER w IS NULL AS ordered
          FROM mv_sent s JOIN mv m ON m.k = s.k
        WINDOW w AS (PARTITION BY s.part ORDER BY s.seq)) x
 GROUP BY part ORDER BY part;
-- every row stored once, read once
SELECT (SELECT count(*) FROM mv_sent) AS sent, (SELECT count(*) FROM mv) AS stored,
       (SELECT count(DISTINCT k) FROM mv) AS distinct_stored;
SELECT events AS processed, (SELECT count(*) FROM mv_sw_rows) AS copied
  FROM streamwm.streams WHERE stream = 'mv'::regclass;
SELECT count(*) AS differ FROM (SELECT * FROM mv EXCEPT SELECT * FROM mv_sw_rows) d;
SELECT partition, processed_offset = last_offset AS caught_up FROM streamwm.partitions
 WHERE stream = 'mv'::regclass ORDER BY 1;
-- windows closed by a last row in every partition count every row once
INSERT INTO mv (k, sw_partition, sw_write_time)
SELECT 0, p, '1970-01-01 02:00:00Z' FROM generate_series(0, 3) p;
SELECT streamwm.process('mv');
SELECT window_start, n, s, (SELECT count(*) FROM mv_sent) AS sent, (SELECT sum(k) FROM mv_sent) AS sent_sum
  FROM mvq ORDER BY 1;
SELECT window_start, d FROM mvq8 ORDER BY 1;

SELECT streamwm.drop_stream('mv', cascade => true);
DROP TABLE mvq, mvq8, mv_sent;
DROP PROCEDURE mv_ingest(int, int);
