-- Local streams on a Citus coordinator work exactly as without Citus:
-- create_stream, INSERT / ingest() / COPY, process(), and results equal a
-- recomputation from the stream's rows.  (test/citus/run.sh: coordinator
-- and two workers, citus and streamwm preloaded and created on each.)
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
SELECT extname FROM pg_extension WHERE extname IN ('citus', 'streamwm') ORDER BY 1;
SELECT count(*) AS workers FROM pg_dist_node WHERE groupid <> 0;

-- SPEC section 9, the YDB example
SELECT streamwm.create_stream('input', 'pass int8, payload text',
                              watermark_delay => 'PT5S');
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
SELECT partition, sw_offset, sw_event_time, watermark FROM streamwm.late_events;
SELECT stream, partitions, watermark, events, late_events FROM streamwm.streams;
SELECT citus_table_type FROM citus_tables WHERE table_name IN ('input'::regclass, 'example'::regclass);

-- Three partitions, every way of ingesting, a reference table joined
CREATE TABLE names (k int PRIMARY KEY, name text);
SELECT create_reference_table('names');
INSERT INTO names VALUES (1, 'one'), (2, 'two'), (3, 'three');
SELECT streamwm.create_stream('ev', 'k int, v int', partitions => 3, watermark_delay => '2s');
SELECT streamwm.create_query('per_k', 'SELECT k, count(*) AS n, sum(v) AS total FROM ev GROUP BY k',
                             hop => '5s', size => '10s');
SELECT streamwm.create_query('per_name',
  'SELECT n.name, count(*) AS n FROM ev JOIN names n USING (k) GROUP BY n.name',
  hop => '5s', size => '10s');
SELECT query, plan FROM streamwm.queries ORDER BY 1;
INSERT INTO ev (sw_partition, sw_write_time, k, v) VALUES
  (0, '1970-01-01 00:00:01Z', 1, 10), (1, '1970-01-01 00:00:02Z', 2, 20),
  (2, '1970-01-01 00:00:03Z', 3, 30);
SELECT streamwm.ingest('ev', '[{"k": 1, "v": 1}, {"k": 2, "v": 2}]', partition => 1,
                       write_time => '1970-01-01 00:00:07Z');
SELECT streamwm.process('ev');
COPY ev (sw_partition, sw_write_time, k, v) FROM STDIN;
0	1970-01-01 00:00:12+00	1	5
2	1970-01-01 00:00:13+00	3	6
1	1970-01-01 00:00:04+00	2	7
\.
SELECT streamwm.ingest_lines('ev', E'{"k": 2, "v": 8}\n{"k": 3, "v": 9}', partition => 0,
                             write_time => '1970-01-01 00:00:16Z');
SELECT streamwm.process('ev');
-- every partition moves on: windows up to 25 s close
INSERT INTO ev (sw_partition, sw_write_time, k, v) VALUES
  (0, '1970-01-01 00:00:27Z', 1, 0), (1, '1970-01-01 00:00:27Z', 1, 0),
  (2, '1970-01-01 00:00:27Z', 1, 0);
SELECT streamwm.process('ev');
SELECT watermark, events, late_events FROM streamwm.streams WHERE stream = 'ev'::regclass;
SELECT partition, sw_offset, sw_event_time, watermark FROM streamwm.late_events
 WHERE stream = 'ev'::regclass ORDER BY 1, 2;
SELECT * FROM per_k ORDER BY window_start, k;
SELECT * FROM per_name ORDER BY window_start, name;

-- the results equal a recomputation from the stream's accepted rows
SET client_min_messages = error;   -- Citus: a temporary view stays local
CREATE TEMP VIEW recomputed AS
SELECT w.ws AS window_start, w.ws + interval '10s' AS window_end, e.k,
       count(*) AS n, sum(e.v) AS total
  FROM generate_series(timestamptz '1970-01-01 00:00:00Z' - interval '5s',
                       timestamptz '1970-01-01 00:01:00Z', interval '5s') AS w(ws)
  JOIN ev e ON e.sw_event_time >= w.ws AND e.sw_event_time < w.ws + interval '10s'
 WHERE w.ws + interval '10s' <= (SELECT watermark FROM streamwm.streams WHERE stream = 'ev'::regclass)
   AND NOT EXISTS (SELECT 1 FROM streamwm.late_events l
                    WHERE l.stream = 'ev'::regclass AND l.partition = e.sw_partition
                      AND l.sw_offset = e.sw_offset)
 GROUP BY w.ws, e.k;
RESET client_min_messages;
SELECT count(*) AS recomputed_rows FROM recomputed;
(SELECT * FROM per_k EXCEPT SELECT * FROM recomputed)
UNION ALL
(SELECT * FROM recomputed EXCEPT SELECT * FROM per_k);

-- the stream and its results stay local tables
SELECT count(*) AS citus_tables FROM citus_tables
 WHERE table_name IN ('ev'::regclass, 'per_k'::regclass, 'per_name'::regclass);
DROP VIEW recomputed;
SELECT streamwm.drop_query('per_name', drop_result => true);
SELECT streamwm.drop_query('per_k', drop_result => true);
SELECT streamwm.drop_stream('ev');
SELECT streamwm.drop_query('example', drop_result => true);
SELECT streamwm.drop_stream('input');
DROP TABLE names;
