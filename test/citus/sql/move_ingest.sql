-- A shard move (citus_move_shard_placement) *while* writers insert into the
-- moving partition (issue 13, "Must show"): two writers on their own
-- connections (dblink, asynchronous), one writing only the moving partition
-- (one-row INSERTs and two-row ingest() calls), the other the three other
-- partitions and stepping the stream as it goes.  Partition 2's shard moves
-- away and back with logical replication (shard_transfer_mode
-- 'force_logical': writes go on during the copy and the catch-up, then are
-- blocked for the switch), then away again with 'block_writes', each time
-- while both writers run.  One of the two directions goes to the node whose
-- range of the offset sequence is lower (DESIGN.md, "Shard moves": the rows
-- written there take provisional offsets and are renumbered at commit).
-- Nothing here depends on timing: each writer writes a known set of rows;
-- at a given row it waits until the move is running (writer 1 with that
-- row of the moving partition written and not committed, so the move
-- cannot end before it: every move has a write into the partition inside
-- it), at a later one until no move is running; the writers' sessions live
-- through all the moves; the test waits for both writers to finish and
-- checks the final state: every
-- row stored once, offsets increasing per partition in commit order, every
-- row read by steps once, the window equal to a recomputation.
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS dblink;
SELECT streamwm.create_stream('mm', 'k int', partitions => 4, watermark_delay => '1 s',
                              idle_timeout => '1 day', distributed => true);
SELECT streamwm.create_query('mmq', 'SELECT count(*) AS n, sum(k) AS s FROM mm', hop => '1 h', size => '1 h');
-- what the writers sent, in the order each committed it (one writer per
-- partition, so seq orders each partition's commits; moving: a shard move
-- was running when the row was written)
CREATE TABLE mm_sent (seq serial, k int, part int, moving boolean);

-- is a shard move running in another session?
CREATE FUNCTION mm_moving() RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_stat_clear_snapshot();  -- else one snapshot a transaction
    RETURN EXISTS (SELECT FROM pg_stat_activity
                    WHERE pid <> pg_backend_pid() AND state = 'active'
                      AND query LIKE '%citus\_move\_shard\_placement%');
END $$;
-- wait (at most 120 s) until a shard move is running (true), or until
-- partition 2 is no longer on node from_port without one having been seen
-- (false); or, running false, until none is running
CREATE FUNCTION mm_wait_move(running boolean, from_port int) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    FOR n IN 1 .. 6000 LOOP
        IF mm_moving() = running THEN
            RETURN true;
        END IF;
        IF running AND (SELECT nodeport FROM citus_shards
                         WHERE shardid = get_shard_id_for_distribution_column('mm', 2)) <> from_port THEN
            RETURN false;
        END IF;
        PERFORM pg_sleep(0.02);
    END LOOP;
    RAISE EXCEPTION 'mm_wait_move(%): timed out', running;
END $$;

-- writer w, rows first .. last, each its own transaction; at row resume_at
-- it waits for the move to be over.  At row pause_at writer 2 waits for
-- the move to be running; writer 1 writes row pause_at into partition 2,
-- then, its transaction still open, says so (application_name mm_holding,
-- for mm_start) and waits for the move to be running (the move cannot end
-- before that transaction: it must wait for it, or copy it), then commits.
-- w = 1: partition 2, one-row INSERTs, and every 5th row an ingest() of two
-- more; w = 2: partitions 0, 1, 3 in turn, a step every 10 rows.  Event
-- times increase with i (no row is late).
CREATE PROCEDURE mm_write(w int, first int, last int, pause_at int, resume_at int)
LANGUAGE plpgsql AS $$
DECLARE
    part int;
    t timestamptz;
    mov boolean;
    from_port int;
BEGIN
    SELECT nodeport INTO from_port FROM citus_shards
     WHERE shardid = get_shard_id_for_distribution_column('mm', 2);
    FOR i IN first .. last LOOP
        IF i = pause_at AND w = 2 THEN PERFORM mm_wait_move(true, from_port); END IF;
        IF i = resume_at THEN PERFORM mm_wait_move(false, from_port); END IF;
        part := CASE WHEN w = 1 THEN 2 ELSE (ARRAY[0, 1, 3])[1 + i % 3] END;
        t := '1970-01-01 00:00:00Z'::timestamptz + make_interval(secs => i);
        mov := mm_moving();
        INSERT INTO mm (k, sw_partition, sw_write_time) VALUES (w * 300000 - 200000 + i, part, t);
        IF i = pause_at AND w = 1 THEN
            PERFORM set_config('application_name', 'mm_holding', true);
            mov := mm_wait_move(true, from_port);
        END IF;
        INSERT INTO mm_sent (k, part, moving) VALUES (w * 300000 - 200000 + i, part, mov);
        COMMIT;
        IF w = 1 AND i % 5 = 0 THEN
            PERFORM streamwm.ingest('mm', jsonb_build_array(jsonb_build_object('k', 200000 + i),
                                                            jsonb_build_object('k', 300000 + i)),
                                    partition => 2, write_time => t);
            INSERT INTO mm_sent (k, part, moving) VALUES (200000 + i, 2, mov), (300000 + i, 2, mov);
            COMMIT;
        END IF;
        IF w = 2 AND i % 10 = 0 THEN
            PERFORM streamwm.process('mm');
            COMMIT;
        END IF;
    END LOOP;
END $$;

-- start both writers for rows first .. last (on the same two connections
-- every time: their sessions, and Citus's connections to the workers, live
-- through the moves); wait until writer 2 has committed row pause_at - 1
-- and writer 1 holds row pause_at uncommitted
CREATE FUNCTION mm_start(first int, last int, pause_at int, resume_at int) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    conn text := format('host=localhost port=%s dbname=%s user=postgres',
                        current_setting('port'), current_database());
BEGIN
    FOR w IN 1 .. 2 LOOP
        IF NOT coalesce('mm_w' || w = ANY (dblink_get_connections()), false) THEN
            PERFORM dblink_connect('mm_w' || w, conn);
        END IF;
        IF dblink_send_query('mm_w' || w, format('CALL mm_write(%s, %s, %s, %s, %s)',
                                                 w, first, last, pause_at, resume_at)) <> 1 THEN
            RAISE EXCEPTION 'mm_start: writer % not started: %', w, dblink_error_message('mm_w' || w);
        END IF;
    END LOOP;
    FOR n IN 1 .. 6000 LOOP
        PERFORM pg_stat_clear_snapshot();
        IF EXISTS (SELECT FROM mm_sent WHERE k = 400000 + pause_at - 1)
           AND EXISTS (SELECT FROM pg_stat_activity WHERE application_name = 'mm_holding') THEN
            RETURN;
        END IF;
        PERFORM pg_sleep(0.02);
    END LOOP;
    RAISE EXCEPTION 'mm_start: the writers did not reach row %', pause_at;
END $$;
-- wait for both writers to finish (their errors are raised here), reading
-- each connection's results to the end
CREATE FUNCTION mm_finish() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    res text := '';
    r text;
    n int;
BEGIN
    FOR w IN 1 .. 2 LOOP
        LOOP
            n := 0;
            FOR r IN SELECT status FROM dblink_get_result('mm_w' || w) AS x(status text) LOOP
                res := res || 'writer ' || w || ': ' || r || '; ';
                n := n + 1;
            END LOOP;
            EXIT WHEN n = 0;
        END LOOP;
    END LOOP;
    RETURN res;
END $$;

SELECT get_shard_id_for_distribution_column('mm', 2) AS moved \gset
SELECT nodeport AS home FROM citus_shards WHERE shardid = :moved \gset
SELECT nodeport AS away FROM pg_dist_node WHERE nodeport NOT IN (:home) AND shouldhaveshards \gset

-- 1. away, by logical replication, while both writers write rows 1 .. 400
-- (rows 101 .. 299 start during the move or after it)
SELECT mm_start(1, 400, 101, 300);
SELECT citus_move_shard_placement(:moved, 'localhost', :home, 'localhost', :away,
                                  shard_transfer_mode => 'force_logical');
SELECT mm_finish();
SELECT count(DISTINCT nodeport) AS log_moved_along FROM citus_shards
 WHERE shardid IN (:moved, get_shard_id_for_distribution_column('mm_sw_log', 2)) AND nodeport = :away;
-- 2. back, by logical replication, while both writers write rows 401 .. 800
SELECT mm_start(401, 800, 501, 700);
SELECT citus_move_shard_placement(:moved, 'localhost', :away, 'localhost', :home,
                                  shard_transfer_mode => 'force_logical');
SELECT mm_finish();
-- 3. away again, blocking writes, while both writers write rows 801 .. 1200
SELECT mm_start(801, 1200, 901, 1100);
SELECT citus_move_shard_placement(:moved, 'localhost', :home, 'localhost', :away,
                                  shard_transfer_mode => 'block_writes');
SELECT mm_finish();
SELECT streamwm.process('mm');
-- rows into the moving partition were written during each move: rows 101,
-- 501 and 901 by construction (how many others depends on timing)
SELECT k, moving FROM mm_sent WHERE k IN (100101, 100501, 100901) ORDER BY k;

-- in each partition, offsets increase in the order the rows were committed
SELECT part, count(*) AS rows, bool_and(ordered) AS offsets_increase
  FROM (SELECT s.part, m.sw_offset > lag(m.sw_offset) OVER w OR lag(m.sw_offset) OVER w IS NULL AS ordered
          FROM mm_sent s JOIN mm m ON m.k = s.k AND m.sw_partition = s.part
        WINDOW w AS (PARTITION BY s.part ORDER BY s.seq)) x
 GROUP BY part ORDER BY part;
-- every row stored once, in its partition
SELECT (SELECT count(*) FROM mm_sent) AS sent, (SELECT count(*) FROM mm) AS stored,
       (SELECT count(DISTINCT k) FROM mm) AS distinct_stored,
       (SELECT count(*) FROM mm_sent s JOIN mm m ON m.k = s.k AND m.sw_partition = s.part) AS matched;
SELECT sw_partition, count(*) = count(DISTINCT sw_offset) AS unique_offsets FROM mm GROUP BY 1 ORDER BY 1;
-- every row read by steps once (two statements: Citus 13.2 crashes on a
-- statement that reads a distributed table and this view, DESIGN.md)
SELECT count(*) AS stored FROM mm \gset
SELECT events = :stored AS all_read, late_events FROM streamwm.streams WHERE stream = 'mm'::regclass;
-- (mmq folds on the nodes, fold.sql: the steps read the shards, no copy)
SELECT count(*) AS copied FROM mm_sw_rows;
SELECT partition, processed_offset = last_offset AS caught_up FROM streamwm.partitions
 WHERE stream = 'mm'::regclass ORDER BY 1;
-- a last row in every partition closes the window: it counts every row once
INSERT INTO mm (k, sw_partition, sw_write_time)
SELECT 0, p, '1970-01-01 02:00:00Z' FROM generate_series(0, 3) p;
SELECT streamwm.process('mm');
SELECT q.window_start, q.n = s.n AS count_equal, q.s = s.s AS sum_equal, q.n
  FROM mmq q, (SELECT count(*) AS n, sum(k) AS s FROM mm_sent) s ORDER BY 1;

SELECT streamwm.drop_stream('mm', cascade => true);
SELECT dblink_disconnect('mm_w1'), dblink_disconnect('mm_w2');
DROP TABLE mmq, mm_sent;
DROP PROCEDURE mm_write(int, int, int, int, int);
DROP FUNCTION mm_moving(), mm_wait_move(boolean, int), mm_start(int, int, int, int), mm_finish();
DROP EXTENSION dblink;
