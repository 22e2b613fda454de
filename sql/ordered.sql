-- SPEC section 11, ordering by event time (the Flink draft's ordering
-- operator): create_query with hop and size NULL and a query that neither
-- aggregates nor groups emits each accepted row once, when W passes its
-- event time, in (sw_event_time, sw_partition, sw_offset) order, numbered
-- without gaps: a sorted, final log of the stream.  Compared with a model,
-- batched differently, never rewritten; refused shapes; two roles and a
-- hostile operator.
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
-- streams here are stepped by the tests themselves (streamwm.process(now => ...)): no background worker steps in
DO $$BEGIN EXECUTE format('ALTER DATABASE %I SET streamwm.enabled = off', current_database()); END$$;
CREATE EXTENSION IF NOT EXISTS streamwm;
CREATE ROLE regress_sw_ord_alice;
CREATE ROLE regress_sw_ord_bob;
GRANT CREATE ON SCHEMA public TO regress_sw_ord_alice, regress_sw_ord_bob;
-- a trap: an int > int in public, found before pg_catalog's by whoever
-- puts public first in search_path
CREATE FUNCTION public.ord_evil_gt(int, int) RETURNS boolean LANGUAGE sql AS
  $$SELECT (SELECT pg_catalog.set_config('ord.evil_ran', 'yes', false)) IS NOT NULL AND $1 OPERATOR(pg_catalog.>) $2$$;
CREATE OPERATOR public.> (LEFTARG = int, RIGHTARG = int, FUNCTION = public.ord_evil_gt);

SET ROLE regress_sw_ord_alice;
CREATE TABLE ord_dim (k int PRIMARY KEY, name text);
INSERT INTO ord_dim VALUES (1, 'one'), (2, 'two');
-- the same rows go into two streams: one processed after every batch, the
-- other once at the end
SELECT streamwm.create_stream('ord_a', 'ts timestamptz, k int, v text', event_time => 'ts',
                              partitions => 2, idle_timeout => '1 hour', watermark_delay => '3 s');
SELECT streamwm.create_stream('ord_b', 'ts timestamptz, k int, v text', event_time => 'ts',
                              partitions => 2, idle_timeout => '1 hour', watermark_delay => '3 s');
SELECT streamwm.create_query('ord_a_log',
  'SELECT e.k, d.name, upper(e.v) AS v FROM ord_a e JOIN ord_dim d USING (k) WHERE e.k > 0',
  hop => NULL, size => NULL);
SELECT streamwm.create_query('ord_b_log',
  'SELECT e.k, d.name, upper(e.v) AS v FROM ord_b e JOIN ord_dim d USING (k) WHERE e.k > 0',
  hop => NULL, size => NULL);
SELECT query, hop, size, plan FROM streamwm.queries WHERE query LIKE 'ord\_%' ORDER BY 1;
\d ord_a_log

-- refused: aggregates, a stream read twice, a reserved name, ORDER BY,
-- writing into a stream, alter and recompute
SELECT streamwm.create_query('ord_bad', 'SELECT count(*) AS n FROM ord_a', hop => NULL, size => NULL);
SELECT streamwm.create_query('ord_bad', 'SELECT x.k FROM ord_a x JOIN ord_a y USING (k)', hop => NULL, size => NULL);
SELECT streamwm.create_query('ord_bad', 'SELECT k AS seq FROM ord_a', hop => NULL, size => NULL);
SELECT streamwm.create_query('ord_bad', 'SELECT k FROM ord_a ORDER BY k', hop => NULL, size => NULL);
SELECT streamwm.create_query('ord_bad', 'SELECT k FROM ord_a', hop => NULL, size => NULL, result_stream => 'ord_b');
SELECT streamwm.alter_query('ord_a_log', 'SELECT e.k FROM ord_a e');
SELECT streamwm.recompute('ord_a_log', '-infinity', 'infinity');

CREATE PROCEDURE ord_load(lo int, hi int) LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO ord_a (sw_partition, ts, k, v)
    SELECT i % 2, to_timestamp(100 + i / 2 + (i * 7919) % 7), i % 4, 'r' || i FROM generate_series(lo, hi) i;
  INSERT INTO ord_b (sw_partition, ts, k, v)
    SELECT i % 2, to_timestamp(100 + i / 2 + (i * 7919) % 7), i % 4, 'r' || i FROM generate_series(lo, hi) i;
  COMMIT;
  PERFORM streamwm.process('ord_a', now => now());
END $$;
CALL ord_load(1, 40);
CREATE TEMP TABLE ord_first AS SELECT * FROM ord_a_log;
CALL ord_load(41, 75);
CALL ord_load(76, 120);
SELECT streamwm.process('ord_b', now => now());

-- the model: every accepted row before the query's closed_until, in order
CREATE TEMP VIEW ord_model AS
SELECT row_number() OVER (ORDER BY e.sw_event_time, e.sw_partition, e.sw_offset) AS seq,
       e.sw_event_time AS event_time, e.k, d.name, upper(e.v) AS v
  FROM ord_a e JOIN ord_dim d USING (k)
 WHERE e.k OPERATOR(pg_catalog.>) 0
   AND e.sw_event_time < (SELECT closed_until FROM streamwm.queries WHERE query = 'ord_a_log')
   AND NOT EXISTS (SELECT 1 FROM streamwm.late_events l WHERE l.stream = 'ord_a'::regclass
                      AND l.partition = e.sw_partition AND l.sw_offset = e.sw_offset);
SELECT (SELECT count(*) FROM ord_a_log) AS rows, (SELECT max(seq) FROM ord_a_log) AS max_seq,
       (SELECT late_events FROM streamwm.streams WHERE stream = 'ord_a'::regclass) AS late;
SELECT count(*) AS differences FROM (
  (SELECT * FROM ord_model EXCEPT SELECT * FROM ord_a_log)
  UNION ALL (SELECT * FROM ord_a_log EXCEPT SELECT * FROM ord_model)) d;
-- sorted by seq is sorted by event time
SELECT count(*) AS out_of_order FROM ord_a_log x JOIN ord_a_log y ON y.seq = x.seq + 1
 WHERE y.event_time < x.event_time;
-- never rewritten: what the first step wrote is still there, unchanged
SELECT count(*) AS rewritten FROM (SELECT * FROM ord_first EXCEPT SELECT * FROM ord_a_log) d;
-- the same whatever the batching (one step over everything)
SELECT count(*) AS batching_differences FROM (
  (SELECT seq, event_time, k, name, v FROM ord_a_log EXCEPT SELECT seq, event_time, k, name, v FROM ord_b_log)
  UNION ALL (SELECT seq, event_time, k, name, v FROM ord_b_log EXCEPT SELECT seq, event_time, k, name, v FROM ord_a_log)) d;
SELECT query, closed_until, windows_emitted, rows_upserted, state FROM streamwm.queries
 WHERE query LIKE 'ord\_%' ORDER BY 1;

-- Bob can neither read Alice's log nor create a query over her stream
SET ROLE regress_sw_ord_bob;
SELECT count(*) FROM ord_a_log;
SELECT streamwm.create_query('ord_bob', 'SELECT k FROM ord_a', hop => NULL, size => NULL);
RESET ROLE;
-- a superuser's step with public first in its search_path runs no trap
SET search_path = public, pg_catalog;
INSERT INTO ord_a (sw_partition, ts, k, v) VALUES (0, to_timestamp(500), 1, 'z'), (1, to_timestamp(500), 2, 'z');
SELECT streamwm.process('ord_a', now => now());
RESET search_path;
SELECT count(*) AS rows FROM ord_a_log;
SELECT current_setting('ord.evil_ran', true) AS evil_ran;

SET ROLE regress_sw_ord_alice;
DROP VIEW ord_model;
DROP TABLE ord_first;
SELECT streamwm.drop_query(q, drop_result => true) FROM unnest('{ord_a_log,ord_b_log}'::text[]) q;
SELECT streamwm.drop_stream('ord_a');
SELECT streamwm.drop_stream('ord_b');
DROP PROCEDURE ord_load(int, int);
DROP TABLE ord_dim;
RESET ROLE;
DROP OPERATOR public.> (int, int);
DROP FUNCTION public.ord_evil_gt(int, int);
REVOKE CREATE ON SCHEMA public FROM regress_sw_ord_alice, regress_sw_ord_bob;
DROP ROLE regress_sw_ord_alice;
DROP ROLE regress_sw_ord_bob;
