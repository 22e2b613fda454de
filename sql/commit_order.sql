-- Rows arrive when their transaction commits (SPEC sections 3 and 4; see
-- src/commit_order.c): what a transaction that wrote into a stream may not
-- do, and the commit log that records arrivals.
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
-- streams here are stepped by the tests themselves (streamwm.process(now => ...)): no background worker steps in
DO $$BEGIN EXECUTE format('ALTER DATABASE %I SET streamwm.enabled = off', current_database()); END$$;
CREATE EXTENSION IF NOT EXISTS streamwm;
SELECT streamwm.create_stream('co', 'v int', partitions => 2) IS NOT NULL AS created;

-- processing the stream in the transaction that wrote into it: refused
BEGIN;
INSERT INTO co (sw_partition, sw_write_time, v) VALUES (0, to_timestamp(1), 1);
SELECT streamwm.process('co');
ROLLBACK;
-- processing every stream: that one is left out, with a notice
BEGIN;
INSERT INTO co (sw_partition, sw_write_time, v) VALUES (0, to_timestamp(1), 1);
SELECT streamwm.process();
COMMIT;
SELECT events FROM streamwm.streams WHERE stream = 'co'::regclass;
SELECT streamwm.process('co');
SELECT events FROM streamwm.streams WHERE stream = 'co'::regclass;

-- a step needs READ COMMITTED: its window statements read with their own snapshots
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT streamwm.process('co');
ROLLBACK;

-- a prepared transaction would keep the commit locks until COMMIT PREPARED
BEGIN;
INSERT INTO co (sw_partition, sw_write_time, v) VALUES (1, to_timestamp(2), 2);
PREPARE TRANSACTION 'co_prepared';
SELECT count(*) AS rows_of_failed_prepare FROM co WHERE v = 2;

-- one commit log entry per transaction and partition, arrival = the commit;
-- a step forgets what it read but each partition's newest entry
INSERT INTO co (sw_partition, sw_write_time, v) VALUES (0, to_timestamp(3), 3), (1, to_timestamp(3), 4);
INSERT INTO co (sw_partition, sw_write_time, v) VALUES (1, to_timestamp(4), 5);
SELECT partition, hi - lo >= 1 AS has_rows, arrival >= held_from AS held_before_arrival,
       arrival <= clock_timestamp() AS arrived
  FROM streamwm.commit_log WHERE stream = 'co'::regclass ORDER BY partition, hi;
SELECT count(DISTINCT arrival) AS arrivals FROM streamwm.commit_log WHERE stream = 'co'::regclass;
SELECT streamwm.process('co');
SELECT partition, count(*) AS entries_kept FROM streamwm.commit_log
 WHERE stream = 'co'::regclass GROUP BY 1 ORDER BY 1;
SELECT events, late_events FROM streamwm.streams WHERE stream = 'co'::regclass;

-- the insert trigger only serves streams: a table shaped like one cannot
-- make streamwm write its commit log
CREATE TABLE co_fake (v int, sw_partition int, sw_offset bigint,
                      sw_write_time timestamptz, sw_event_time timestamptz);
CREATE SEQUENCE co_fake_seq OWNED BY co_fake.sw_offset;
CREATE TRIGGER evil BEFORE INSERT ON co_fake FOR EACH ROW EXECUTE FUNCTION streamwm_internal._stream_insert('1');
INSERT INTO co_fake (v) VALUES (1);
SELECT count(*) AS foreign_entries FROM streamwm.commit_log WHERE stream = 'co_fake'::regclass;
DROP TABLE co_fake;

-- a query started at 'latest' leaves a start floor (a negative partition,
-- one per backend): the highest offset committed then; the same backend
-- adds none when its floor is that high already; a step forgets floors
-- every partition has reached or that no running transaction needs; only
-- a role that may add queries to the stream may set one, and only on a
-- stream
SELECT streamwm.create_query('co_q1', 'SELECT count(*) AS n FROM co', hop => '1 s', size => '1 s') IS NOT NULL AS created;
SELECT streamwm.create_query('co_q2', 'SELECT count(*) AS n FROM co', hop => '1 s', size => '1 s') IS NOT NULL AS created;
SELECT f.hi = (SELECT max(e.hi) FROM streamwm.commit_log e
                WHERE e.stream = 'co'::regclass AND e.partition >= 0) AS floor_is_highest,
       count(*) OVER () AS floor_rows
  FROM streamwm.commit_log f WHERE f.stream = 'co'::regclass AND f.partition < 0;
-- (both partitions then reach it: the next step forgets it)
INSERT INTO co (sw_partition, sw_write_time, v) VALUES (0, to_timestamp(5), 6), (1, to_timestamp(5), 6);
SELECT streamwm.process('co', now => to_timestamp(5));
SELECT count(*) AS floors_kept FROM streamwm.commit_log WHERE stream = 'co'::regclass AND partition < 0;
-- a transaction that set a floor cannot be prepared (a row committed
-- first, so that the floor this backend has is not high enough)
INSERT INTO co (sw_partition, sw_write_time, v) VALUES (0, to_timestamp(5), 6);
BEGIN;
SELECT streamwm.create_query('co_q3', 'SELECT count(*) AS n FROM co', hop => '1 s', size => '1 s') IS NOT NULL AS created;
PREPARE TRANSACTION 'co_floor';
SELECT streamwm.drop_query('co_q1');
SELECT streamwm.drop_query('co_q2');
-- commits insert into the commit log as into a catalog: one that is not
-- as the extension made it (here an index of its own) is refused
CREATE INDEX co_extra ON streamwm.commit_log (arrival);
INSERT INTO co (sw_partition, sw_write_time, v) VALUES (0, to_timestamp(7), 8);
DROP INDEX streamwm.co_extra;
CREATE ROLE co_reader;
GRANT SELECT ON co TO co_reader;
SET ROLE co_reader;
SELECT streamwm_internal._latest_offset('co');
RESET ROLE;
REVOKE SELECT ON co FROM co_reader;
CREATE TABLE co_plain (v int);
SELECT streamwm_internal._latest_offset('co_plain');
DROP TABLE co_plain;
DROP ROLE co_reader;

SELECT streamwm.drop_stream('co');
SELECT count(*) AS entries_left FROM streamwm.commit_log;
