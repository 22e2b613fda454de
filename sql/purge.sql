-- SPEC sections 3 and 8: DELETE and TRUNCATE purge rows; a purged row that
-- processing had not read yet is counted (streamwm.streams.purged_rows),
-- like a row removed by retention, and 'earliest' never starts with a
-- window that a purge made partial.
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
-- streams here are stepped by the tests themselves (streamwm.process(now => ...)): no background worker steps in
DO $$BEGIN EXECUTE format('ALTER DATABASE %I SET streamwm.enabled = off', current_database()); END$$;
CREATE EXTENSION IF NOT EXISTS streamwm;

SELECT streamwm.create_stream('pg', 'v int', partitions => 2, idle_timeout => '1 hour');
SELECT streamwm.create_query('pg_q', 'SELECT count(*) AS n, sum(v) AS s FROM pg',
                             hop => '10 s', size => '10 s');
-- v = second of event time; even seconds in partition 0, odd in 1
INSERT INTO pg (sw_partition, sw_write_time, v)
SELECT i % 2, to_timestamp(i), i FROM generate_series(1, 20) i;
SELECT streamwm.process('pg', now => to_timestamp(100));
INSERT INTO pg (sw_partition, sw_write_time, v)
SELECT i % 2, to_timestamp(i), i FROM generate_series(21, 30) i;
SELECT purged_rows, events, expired_rows FROM streamwm.streams WHERE stream = 'pg'::regclass;

-- rows processing has read: purged, not counted
DELETE FROM pg WHERE v <= 3;
SELECT purged_rows FROM streamwm.streams WHERE stream = 'pg'::regclass;

-- unread rows are counted, read ones in the same statement are not
DELETE FROM pg WHERE v BETWEEN 18 AND 23;
SELECT purged_rows FROM streamwm.streams WHERE stream = 'pg'::regclass;

-- a rolled back DELETE counts nothing
BEGIN;
DELETE FROM pg WHERE v = 24;
SELECT purged_rows FROM streamwm.streams WHERE stream = 'pg'::regclass;
ROLLBACK;
SELECT purged_rows FROM streamwm.streams WHERE stream = 'pg'::regclass;

-- a DELETE that finds nothing counts nothing
DELETE FROM pg WHERE v > 1000;

-- processing reads what is left: 24..30, seven events
SELECT streamwm.process('pg', now => to_timestamp(100));
SELECT purged_rows, events FROM streamwm.streams WHERE stream = 'pg'::regclass;
-- (pane plan: rows 18 and 19 were read, and so folded into window [10, 20),
-- before they were purged; a read row counts in its windows)
SELECT window_start, n, s FROM pg_q ORDER BY window_start;

-- a role that may only delete is counted too (the count is streamwm's)
CREATE ROLE regress_purger;
GRANT SELECT, DELETE ON pg TO regress_purger;
INSERT INTO pg (sw_partition, sw_write_time, v) VALUES (0, to_timestamp(40), 40), (1, to_timestamp(41), 41);
SET ROLE regress_purger;
DELETE FROM pg WHERE v = 41;
RESET ROLE;
SELECT purged_rows FROM streamwm.streams WHERE stream = 'pg'::regclass;

-- TRUNCATE counts the unread rows it removes (40 and 42), not the read ones
INSERT INTO pg (sw_partition, sw_write_time, v) VALUES (0, to_timestamp(42), 42);
SELECT count(*) AS rows_before_truncate FROM pg;
TRUNCATE pg;
SELECT purged_rows, events FROM streamwm.streams WHERE stream = 'pg'::regclass;
-- nothing unread: nothing counted; offsets go on
INSERT INTO pg (sw_partition, sw_write_time, v) VALUES (0, to_timestamp(50), 50);
SELECT streamwm.process('pg', now => to_timestamp(100));
TRUNCATE pg;
SELECT purged_rows, events FROM streamwm.streams WHERE stream = 'pg'::regclass;
SELECT partition, processed_offset > 0 AS moved FROM streamwm.partitions
 WHERE stream = 'pg'::regclass ORDER BY partition;

-- the purge triggers are the stream's own, like sw_ingest
DROP TRIGGER sw_purge ON pg;
ALTER TABLE pg DISABLE TRIGGER sw_purge_start;
ALTER TRIGGER sw_purge ON pg RENAME TO mine;

-- 'earliest' after a purge: it starts at the first window all of whose
-- rows are still there.  A purge of accepted rows moves retained_from past
-- them; a purge of a late row (in no window) does not.
SELECT streamwm.create_stream('pe', 'v int', idle_timeout => '1 hour');
INSERT INTO pe (sw_write_time, v) SELECT to_timestamp(i), i FROM generate_series(1, 60) i;
INSERT INTO pe (sw_write_time, v) VALUES (to_timestamp(35), -1);  -- late
SELECT streamwm.process('pe', now => to_timestamp(100));
SELECT late_events FROM streamwm.streams WHERE stream = 'pe'::regclass;
DELETE FROM pe WHERE v = -1;
SELECT retained_from FROM streamwm.stream_def WHERE stream = 'pe'::regclass;
DELETE FROM pe WHERE v < 25;
SELECT retained_from, purged_rows FROM streamwm.stream_def WHERE stream = 'pe'::regclass;
SELECT streamwm.create_query('pe_earliest', 'SELECT count(*) AS n, min(v) AS lo FROM pe',
                             hop => '10 s', size => '20 s', start_from => 'earliest');
INSERT INTO pe (sw_write_time, v) VALUES (to_timestamp(90), 90);
SELECT streamwm.process('pe', now => to_timestamp(100));
-- [20, 40) lost 20..24: the first window is [30, 50), complete
SELECT window_start, window_end, n, lo FROM pe_earliest ORDER BY window_start;

-- unread rows purged: counted, and their windows are not computed by a new
-- 'earliest' query either
INSERT INTO pe (sw_write_time, v) SELECT to_timestamp(i), i FROM generate_series(91, 99) i;
DELETE FROM pe WHERE v BETWEEN 91 AND 94;
SELECT retained_from, purged_rows FROM streamwm.stream_def WHERE stream = 'pe'::regclass;
SELECT streamwm.create_query('pe_earliest2', 'SELECT count(*) AS n FROM pe',
                             hop => '10 s', size => '10 s', start_from => 'earliest');
SELECT closed_until FROM streamwm.queries WHERE query = 'pe_earliest2';

-- retention's own DELETE is not a purge: counted in expired_rows only
SELECT streamwm.create_stream('pr', 'v int', retention => '10 s', idle_timeout => '1 hour');
INSERT INTO pr (sw_write_time, v) SELECT to_timestamp(i), i FROM generate_series(1, 30) i;
SELECT streamwm.process('pr', now => to_timestamp(100));
SELECT expired_rows, purged_rows, retained_from FROM streamwm.stream_def
 WHERE stream = 'pr'::regclass;

SELECT streamwm.drop_stream('pg', cascade => true);
SELECT streamwm.drop_stream('pe', cascade => true);
SELECT streamwm.drop_stream('pr');
DROP TABLE pg_q, pe_earliest, pe_earliest2;
DROP ROLE regress_purger;
