-- kill -9 of a worker node's postmaster in the middle of a step's
-- transaction, and while it is down: the step commits nothing (Citus
-- cannot prepare on the dead node), and once the node is back the next
-- steps read every row exactly once; the results equal a recomputation
-- from the rows.
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
SET client_min_messages = warning;
\getenv dir CITUS_DIR
\getenv w2 CITUS_W2
SELECT streamwm.create_stream('kc', 'k int', partitions => 4, watermark_delay => '1 s',
                              distributed => true);
SELECT streamwm.create_query('kcq', 'SELECT k, count(*) AS n FROM kc GROUP BY k',
                             hop => '10 s', size => '10 s');
CREATE PROCEDURE kc_ingest(first int, last int) LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN first .. last LOOP
        INSERT INTO kc (k, sw_partition, sw_write_time)
        VALUES (i % 3, i % 4, '1970-01-01 00:00:00Z'::timestamptz + make_interval(secs => i));
        COMMIT;
    END LOOP;
END $$;
CALL kc_ingest(1, 40);
SELECT streamwm.process('kc');
SELECT events, watermark FROM streamwm.streams WHERE stream = 'kc'::regclass;
CALL kc_ingest(41, 80);

-- the step's transaction has read the new rows when the node dies
BEGIN;
SELECT streamwm.process('kc');
SELECT events, watermark FROM streamwm.streams WHERE stream = 'kc'::regclass;
-- the whole node at once: its postmaster and every process it started
\! pm=$(head -1 "$CITUS_DIR/n$CITUS_W2/postmaster.pid"); pkill -9 -P "$pm"; kill -9 "$pm"
\set VERBOSITY terse
-- (how libpq words the lost connection varies: expected/worker_crash_1.out;
-- Citus may or may not warn about it as well)
SET LOCAL client_min_messages = error;
COMMIT;
\set VERBOSITY default
-- nothing of it was kept
SELECT events, watermark FROM streamwm.streams WHERE stream = 'kc'::regclass;
-- while the node is down, steps fail and change nothing
DO $$
BEGIN
    PERFORM streamwm.process('kc');
    RAISE NOTICE 'the step did not fail';
EXCEPTION WHEN OTHERS THEN
    RAISE WARNING 'the step failed while a node was down';
END $$;
SELECT events, watermark FROM streamwm.streams WHERE stream = 'kc'::regclass;
-- the node comes back (crash recovery)
\! for i in $(seq 30); do pg_ctl -D "$CITUS_DIR/n$CITUS_W2" -l "$CITUS_DIR/n$CITUS_W2.log" -w start >/dev/null 2>&1 && break; sleep 1; done
CALL kc_ingest(81, 120);
SELECT streamwm.process('kc');
-- a last row in every partition closes every window
INSERT INTO kc (k, sw_partition, sw_write_time)
SELECT 9, p, '1970-01-01 00:10:00Z' FROM generate_series(0, 3) p;
SELECT streamwm.process('kc');
SELECT events, late_events, watermark FROM streamwm.streams WHERE stream = 'kc'::regclass;
-- (kcq folds on the nodes, fold.sql: the steps read the shards, no copy)
SELECT count(*) AS copied FROM kc_sw_rows;
-- the windows equal a recomputation from the stream's rows
SELECT count(*) AS windows,
       count(*) FILTER (WHERE r.n IS DISTINCT FROM q.n) AS differ
  FROM kcq q FULL JOIN (SELECT date_bin('10 s', sw_event_time, 'epoch') AS ws, k, count(*) AS n
                          FROM kc WHERE sw_event_time < '1970-01-01 00:10:00Z'
                         GROUP BY 1, 2) r
    ON r.ws = q.window_start AND r.k = q.k
 WHERE coalesce(q.window_start, r.ws) < '1970-01-01 00:10:00Z';
SELECT sum(n) AS counted FROM kcq WHERE window_start < '1970-01-01 00:10:00Z';
SELECT streamwm.drop_stream('kc', cascade => true);
DROP TABLE kcq;
DROP PROCEDURE kc_ingest(int, int);
