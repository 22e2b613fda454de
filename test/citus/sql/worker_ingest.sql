-- streamwm.ingest() and ingest_lines() called on a worker node: the
-- stream is known there from its table (streamwm's catalog is the
-- coordinator's), the INSERTs go through Citus, which routes each row to
-- its partition's shard on whichever node holds it, and bad input stores
-- nothing, with the same errors as on the coordinator.
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
SET client_min_messages = warning;
SELECT streamwm.create_stream('wi', 'k int, v text', partitions => 4, distributed => true);
SELECT streamwm.create_query('wiq', 'SELECT k, count(*) AS n, string_agg(v, '','' ORDER BY v) AS vs FROM wi GROUP BY k',
                             hop => '10 s', size => '10 s');
-- the partitions live on both workers
SELECT count(DISTINCT nodeport) AS nodes FROM citus_shards s
 WHERE s.table_name = 'wi'::regclass
   AND s.shardid IN (SELECT get_shard_id_for_distribution_column('wi', p) FROM generate_series(0, 3) p);
CREATE ROLE regress_wi_writer;
GRANT USAGE ON SCHEMA streamwm TO regress_wi_writer;
GRANT INSERT ON wi TO regress_wi_writer;
\getenv w1 CITUS_W1
\getenv w2 CITUS_W2
\getenv coordinator CITUS_COORDINATOR
\connect - - - :w1
SET client_min_messages = warning;
-- every partition from one worker: explicit ones, on both nodes
SELECT streamwm.ingest('wi', '[{"k": 1, "v": "a"}, {"k": 1, "v": "b"}]', partition => 0,
                       write_time => '1970-01-01 00:00:01Z');
SELECT streamwm.ingest('wi', '{"k": 2, "v": "c"}', partition => 1, write_time => '1970-01-01 00:00:02Z');
SELECT streamwm.ingest_lines('wi', E'{"k": 3, "v": "d"}\n{"k": 3, "v": "e"}', partition => 2,
                             write_time => '1970-01-01 00:00:03Z');
SELECT streamwm.ingest_lines('wi', E'{"k": 4, "v": "f"}', partition => 3,
                             write_time => '1970-01-01 00:00:04Z');
-- no partition: the session's own, chosen on this worker
SELECT streamwm.ingest('wi', '[{"k": 5, "v": "g", "sw_write_time": "1970-01-01 00:00:05Z"}]');
-- an ordinary role with INSERT on the stream only
SET ROLE regress_wi_writer;
SELECT streamwm.ingest('wi', '{"k": 6, "v": "h"}', partition => 1, write_time => '1970-01-01 00:00:06Z');
RESET ROLE;
-- bad input: nothing stored, the same errors as on the coordinator
\set VERBOSITY terse
SELECT streamwm.ingest('wi', '{"k": 9}', partition => 4);
SELECT streamwm.ingest('wi', '[{"k": 9, "v": "x"}, {"k": "nine"}]', partition => 0);
SELECT streamwm.ingest('wi', '{"k": 9, "nope": 1}', partition => 0);
SELECT streamwm.ingest_lines('wi', E'{"k": 9}\n{"k": ', partition => 0);
SELECT streamwm.ingest('wi', '{"k": 9, "sw_offset": 1}', partition => 0);
-- not a stream
CREATE TABLE wi_plain (k int);
SELECT streamwm.ingest('wi_plain', '{"k": 9}');
DROP TABLE wi_plain;
\set VERBOSITY default
-- from the other worker, in one transaction over partitions on both nodes
\connect - - - :w2
BEGIN;
SELECT streamwm.ingest('wi', '{"k": 7, "v": "i"}', partition => 0, write_time => '1970-01-01 00:00:07Z');
SELECT streamwm.ingest('wi', '{"k": 7, "v": "j"}', partition => 3, write_time => '1970-01-01 00:00:07Z');
COMMIT;
BEGIN;
SELECT streamwm.ingest('wi', '{"k": 8, "v": "rolled back"}', partition => 2, write_time => '1970-01-01 00:00:08Z');
ROLLBACK;
\connect - - - :coordinator
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
SET client_min_messages = warning;
SELECT sw_partition, k, v, sw_write_time FROM wi WHERE k <> 5 ORDER BY k, v;
SELECT k, v, sw_partition BETWEEN 0 AND 3 AS some_partition, sw_write_time FROM wi WHERE k = 5;
-- a later row closes [0 s, 10 s)
INSERT INTO wi (k, v, sw_partition, sw_write_time)
SELECT 0, 'late' || p, p, '1970-01-01 00:00:30Z' FROM generate_series(0, 3) p;
SELECT streamwm.process('wi');
SELECT window_start, k, n, vs FROM wiq ORDER BY 1, 2;
-- equal to a recomputation from the stream
SELECT count(*) AS differ FROM (
  (SELECT to_timestamp(0) AS window_start, k, count(*) AS n, string_agg(v, ',' ORDER BY v) AS vs
     FROM wi WHERE sw_event_time < to_timestamp(10) GROUP BY k
   EXCEPT SELECT window_start, k, n, vs FROM wiq)
  UNION ALL
  (SELECT window_start, k, n, vs FROM wiq
   EXCEPT SELECT to_timestamp(0), k, count(*), string_agg(v, ',' ORDER BY v)
            FROM wi WHERE sw_event_time < to_timestamp(10) GROUP BY k)) d;
SELECT stream, events, late_events FROM streamwm.streams WHERE stream = 'wi'::regclass;
SELECT streamwm.drop_stream('wi', cascade => true);
REVOKE USAGE ON SCHEMA streamwm FROM regress_wi_writer;
DROP ROLE regress_wi_writer;
