-- Concurrent writers on the two worker nodes (Citus runs a command on both
-- at once), each writing every partition through its own node (the
-- partition given, or sw_partition's default, which works on a worker
-- too): no row is lost or stored twice, offsets stay unique in each
-- partition, and steps read every row once.
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
SET client_min_messages = warning;
SELECT streamwm.create_stream('cw', 'node int, i int', partitions => 4, watermark_delay => '1 s',
                              distributed => true);
SELECT streamwm.create_query('cwq', 'SELECT node, count(*) AS n, count(DISTINCT i) AS d FROM cw GROUP BY node',
                             hop => '1 h', size => '1 h');
-- 1. transactions of one partition each (one node: no two-phase commit),
-- 40 on each worker, all partitions in turn, committed one by one
SELECT success, result FROM run_command_on_workers($$
  DO $d$ BEGIN
    FOR t IN 1..40 LOOP
      INSERT INTO cw (node, i, sw_partition, sw_write_time)
      SELECT inet_server_port(), t * 1000 + g, t % 4, '1970-01-01 00:00:01Z'
        FROM generate_series(1, 25) g;
      COMMIT;
    END LOOP;
  END $d$ $$);
SELECT streamwm.process('cw');
-- 2. transactions over every partition, so on both nodes (two-phase
-- commit), from both workers at once: one that would wait for the other
-- across nodes fails with a serialization failure instead; what commits is
-- stored once
CREATE TABLE cw_attempts (t int, node int, ok boolean, result text);
DO $$
BEGIN
    FOR t IN 41 .. 55 LOOP
        INSERT INTO cw_attempts
        SELECT t, nodeport, success, result FROM run_command_on_workers(format(
            $c$INSERT INTO cw (node, i, sw_partition, sw_write_time)
               SELECT inet_server_port(), %s * 1000 + g, g %% 4, '1970-01-01 00:00:01Z'
                 FROM generate_series(1, 25) g$c$, t));
    END LOOP;
END $$;
SELECT count(*) FILTER (WHERE ok) > 0 AS some_committed,
       bool_and(ok OR result ~ 'could not (prepare|commit) the rows written into stream|deadlock')
           AS failures_are_conflicts
  FROM cw_attempts;
-- 3. the partition left to the default, on each worker
SELECT success, result FROM run_command_on_workers($$
  INSERT INTO cw (node, i, sw_write_time) VALUES (inet_server_port(), 0, '1970-01-01 00:00:02Z')$$);
SELECT (SELECT count(*) FROM cw) = 2 * 1001 + 25 * (SELECT count(*) FROM cw_attempts WHERE ok) AS all_stored,
       (SELECT count(*) FROM cw) = (SELECT count(DISTINCT (node, i)) FROM cw) AS each_once;
SELECT sw_partition, count(*) = count(DISTINCT sw_offset) AS unique_offsets FROM cw GROUP BY 1 ORDER BY 1;
SELECT streamwm.process('cw');
-- (two statements: Citus 13.2 crashes on a statement that reads a
-- distributed table and this view, DESIGN.md)
SELECT count(*) AS stored FROM cw \gset
SELECT events = :stored AS all_read, late_events FROM streamwm.streams
 WHERE stream = 'cw'::regclass;
SELECT count(*) AS differ FROM (SELECT * FROM cw EXCEPT SELECT * FROM cw_sw_rows) d;
SELECT partition, processed_offset = last_offset AS caught_up FROM streamwm.partitions
 WHERE stream = 'cw'::regclass ORDER BY 1;
-- the window counts each node's rows once
INSERT INTO cw (node, i, sw_partition, sw_write_time)
SELECT 0, 0, p, '1970-01-01 02:00:00Z' FROM generate_series(0, 3) p;
SELECT streamwm.process('cw');
SELECT count(*) AS groups,
       bool_and(n = d AND n = 1001 + 25 * (SELECT count(*) FROM cw_attempts a WHERE a.ok AND a.node = q.node))
           AS each_once
  FROM cwq q;
SELECT streamwm.drop_stream('cw', cascade => true);
DROP TABLE cwq, cw_attempts;
