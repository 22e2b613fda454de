-- What streamwm does not support on Citus is refused where the user acts,
-- with the cause named: never a Citus planner error at the first step.
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
SET client_min_messages = warning;
SELECT streamwm.create_stream('ev', 'k int, v int', partitions => 4);
-- distributing a stream, however Citus is asked
SELECT create_distributed_table('ev', 'sw_partition');
SELECT create_distributed_table('ev', 'k');
SET citus.enable_unsafe_triggers = on;
SELECT create_distributed_table('ev', 'sw_partition', shard_count => 4);
SELECT create_distributed_table_concurrently('ev', 'sw_partition');
SELECT create_reference_table('ev');
SELECT citus_add_local_table_to_metadata('ev');
DO $$BEGIN PERFORM create_distributed_table('ev', 'sw_partition'); END$$;
-- nothing happened to it
SELECT count(*) AS citus_tables FROM citus_tables WHERE table_name = 'ev'::regclass;
INSERT INTO ev (sw_partition, sw_write_time, k, v) VALUES (0, '1970-01-01 00:00:01Z', 1, 1);
SELECT count(*) FROM ev;

-- a result table
SELECT streamwm.create_query('q', 'SELECT k, count(*) AS n FROM ev GROUP BY k', hop => '5s', size => '10s');
SELECT create_distributed_table('q', 'k');
SELECT create_reference_table('q');
CREATE TABLE res_dist (window_start timestamptz NOT NULL, window_end timestamptz NOT NULL, k int, n bigint,
                       UNIQUE NULLS NOT DISTINCT (window_start, k));
SELECT create_distributed_table('res_dist', 'k');
SELECT streamwm.create_query('q2', 'SELECT k, count(*) AS n FROM ev GROUP BY k', hop => '5s', size => '10s',
                             result_table => 'res_dist');

-- a query reading a distributed table (reference tables are fine: local.sql)
CREATE TABLE dim (k int PRIMARY KEY, name text);
SELECT create_distributed_table('dim', 'k');
SELECT streamwm.create_query('q3', 'SELECT d.name, count(*) AS n FROM ev JOIN dim d USING (k) GROUP BY d.name',
                             hop => '5s', size => '10s');
SELECT streamwm.create_query('q3', 'SELECT k, count(*) AS n FROM ev WHERE k IN (SELECT k FROM dim) GROUP BY k',
                             hop => '5s', size => '10s');
SELECT streamwm.create_session_query('q4', 'SELECT d.name, count(*) AS n FROM ev JOIN dim d USING (k) GROUP BY d.name',
                                     gap => '5s');
SELECT streamwm.alter_query('q', 'SELECT k, count(*) AS n FROM ev WHERE k IN (SELECT k FROM dim) GROUP BY k');

-- A stream made a Citus table behind streamwm's back (an argument the
-- guard cannot see): every use of it names the cause.
SELECT streamwm.create_stream('ev5', 'k int, v int', partitions => 2);
SELECT create_distributed_table(r, 'sw_partition', shard_count => 2) FROM (SELECT 'ev5'::regclass AS r) s;
INSERT INTO ev5 (k, v) VALUES (1, 1);
COPY ev5 (k, v) FROM STDIN;
1	2
\.
SELECT streamwm.ingest('ev5', '{"k":1,"v":1}', partition => 1);
SELECT streamwm.process('ev5');
SELECT streamwm.create_query('q5', 'SELECT k, count(*) AS n FROM ev5 GROUP BY k', hop => '5s', size => '10s');
-- the shard's own trigger, were a row sent to it directly
SELECT success, result ~ '^ERROR:  "ev5_[0-9]+" is a shard of Citus table public.ev5: streamwm cannot ingest into a distributed stream$' AS refused
  FROM run_command_on_shards('ev5', $$INSERT INTO %s (k, v, sw_partition) VALUES (1, 1, 0)$$);
-- dropping it works as for any stream
SELECT streamwm.drop_stream('ev5');
SET citus.enable_unsafe_triggers = off;

-- the other queries and streams were left alone
SELECT query, last_error FROM streamwm.queries ORDER BY 1;
SELECT streamwm.process('ev');
SELECT streamwm.drop_query('q', drop_result => true);
SELECT streamwm.drop_stream('ev');
DROP TABLE dim, res_dist;
