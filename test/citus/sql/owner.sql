-- A distributed stream owned by an ordinary role.  Its commit log, which
-- commits and steps write with streamwm's catalog's rights, belongs to the
-- catalog on every node: its owner can attach nothing to it (an attacker's
-- review once made an ordinary owner superuser on every worker with a
-- trigger on the log), and _distribute makes the log itself, so it cannot
-- be handed a table of the caller's.  A second role writes with INSERT
-- only.  A lock held on a log shard on a worker makes a step fail after
-- streamwm.query_timeout instead of stalling it.
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
SET client_min_messages = warning;
\getenv coordinator CITUS_COORDINATOR
\getenv w1 CITUS_W1
CREATE EXTENSION IF NOT EXISTS dblink;
CREATE ROLE regress_own_alice LOGIN;
CREATE ROLE regress_own_bob LOGIN;
GRANT CREATE ON SCHEMA public TO regress_own_alice;

SET ROLE regress_own_alice;
SELECT streamwm.create_stream('so', 'k int, v int', partitions => 4, distributed => true,
                              watermark_delay => '0 s');
SELECT streamwm.create_query('soq', 'SELECT k, count(*) AS n, sum(v) AS s FROM so GROUP BY k',
                             hop => '10 s', size => '10 s', start_from => 'earliest');
GRANT INSERT ON so TO regress_own_bob;
RESET ROLE;

-- the log belongs to the catalog's owner, here and on every worker
SELECT (SELECT log_table FROM streamwm.stream_def WHERE stream = 'so'::regclass) AS log \gset
SELECT relowner = (SELECT relowner FROM pg_class WHERE oid = 'streamwm.stream_def'::regclass)
       AS log_is_catalogs,
       (SELECT relowner::regrole FROM pg_class WHERE oid = 'so'::regclass) AS stream_owner
  FROM pg_class WHERE oid = :'log'::regclass;
SELECT rank() OVER (ORDER BY nodeport) AS worker, result AS log_shard_owners FROM run_command_on_workers($$
    SELECT string_agg(DISTINCT relowner::regrole::text, ', ') || ' (catalog: ' ||
           (SELECT relowner::regrole::text FROM pg_class
             WHERE oid = 'streamwm.stream_def'::regclass) || ')'
      FROM pg_class WHERE relname LIKE 'so\_sw\_log\_%' AND relkind = 'r'$$) ORDER BY nodeport;

-- its owner can attach nothing to it, nor take it
SET ROLE regress_own_alice;
\set VERBOSITY terse
SET citus.enable_unsafe_triggers = on;
CREATE FUNCTION public.so_grab() RETURNS trigger LANGUAGE plpgsql AS
$$BEGIN ALTER ROLE regress_own_alice SUPERUSER; RETURN NEW; END$$;
CREATE TRIGGER grab BEFORE INSERT ON so_sw_log FOR EACH ROW EXECUTE FUNCTION public.so_grab();
ALTER TABLE so_sw_log ALTER COLUMN arrival SET DEFAULT now();
ALTER TABLE so_sw_log ADD CHECK (public.so_grab() IS NULL);
ALTER TABLE so_sw_log OWNER TO regress_own_alice;
CREATE RULE r AS ON INSERT TO so_sw_log DO ALSO SELECT 1;
DROP TABLE so_sw_log;
-- nor have it make a log of her choosing, or distribute a stream twice
CREATE TABLE so_mine (partition int, lo bigint, hi bigint, arrival timestamptz, held_from timestamptz);
SELECT streamwm_internal._distribute('so', 'so_sw_rows');
SELECT streamwm.create_stream('sl', 'k int');
SELECT streamwm_internal._distribute('sl', 'so_sw_rows');
\set VERBOSITY default
RESET citus.enable_unsafe_triggers;
RESET ROLE;

-- bob writes (INSERT, ingest), alice processes
SET ROLE regress_own_bob;
INSERT INTO so (k, v, sw_partition, sw_write_time)
SELECT i % 3, i, i % 4, '2026-01-01 00:00:00+00'::timestamptz + i * interval '1 s'
  FROM generate_series(1, 40) i;
SELECT streamwm.ingest('so', '[{"k": 1, "v": 100, "sw_write_time": "2026-01-01 00:00:40+00"}]');
RESET ROLE;
SET ROLE regress_own_alice;
SELECT streamwm.process('so', now => '2026-01-01 00:01:00+00');
SELECT * FROM soq WHERE window_end <= '2026-01-01 00:00:30+00' ORDER BY window_start, k;
-- the same from the rows, for the windows closed whatever the idle
-- partitions (W is at least 37 s: every partition has rows up to there)
WITH model AS (
  SELECT k, count(*) AS n, sum(v) AS s,
         to_timestamp(floor(extract(epoch FROM sw_event_time) / 10) * 10) AS ws
    FROM so GROUP BY 1, 4),
closed AS (SELECT * FROM model WHERE ws < '2026-01-01 00:00:30+00'),
got AS (SELECT k, n, s, window_start AS ws FROM soq WHERE window_start < '2026-01-01 00:00:30+00')
SELECT (SELECT count(*) FROM closed) AS windows,
       (SELECT count(*) FROM (SELECT * FROM closed EXCEPT SELECT * FROM got) a) +
       (SELECT count(*) FROM (SELECT * FROM got EXCEPT SELECT * FROM closed) b) AS differing;
SELECT rolsuper FROM pg_roles WHERE rolname = 'regress_own_alice';
RESET ROLE;

-- a lock held on a log shard on a worker: the step fails after
-- streamwm.query_timeout, changes nothing, and runs once the lock is gone
SELECT nodeport AS holder FROM citus_shards
 WHERE shardid = get_shard_id_for_distribution_column('so_sw_log', 0) \gset
SELECT 'so_sw_log_' || get_shard_id_for_distribution_column('so_sw_log', 0) AS logshard \gset
SELECT dblink_connect('hold', format('host=%s port=%s dbname=%s user=postgres',
                                     current_setting('unix_socket_directories'), :holder,
                                     current_database()));
SELECT dblink_exec('hold', 'SET citus.enable_manual_changes_to_shards = on');
SELECT dblink_exec('hold', 'BEGIN');
SELECT dblink_exec('hold', format('LOCK TABLE %I IN ACCESS EXCLUSIVE MODE', :'logshard'));
SET ROLE regress_own_bob;
INSERT INTO so (k, v, sw_partition, sw_write_time) VALUES (2, 7, 1, '2026-01-01 00:01:05+00');
RESET ROLE;
SELECT events AS events_before FROM streamwm.streams WHERE stream = 'so'::regclass \gset
SET streamwm.query_timeout = '1s';
\set VERBOSITY terse
SELECT streamwm.process('so', now => '2026-01-01 00:02:00+00');
\set VERBOSITY default
SELECT events = :events_before AS unchanged FROM streamwm.streams WHERE stream = 'so'::regclass;
SELECT dblink_exec('hold', 'ROLLBACK');
SELECT dblink_disconnect('hold');
SELECT streamwm.process('so', now => '2026-01-01 00:02:00+00');
SELECT events - :events_before AS read_after FROM streamwm.streams WHERE stream = 'so'::regclass;
RESET streamwm.query_timeout;

-- A stream of an ordinary role whose steps remove rows by retention, and a
-- query on it that folds on the nodes (fold.sql): every write a step makes
-- on the nodes (retention, the log's pruning) is the stream owner's, after
-- the queries' reads.  Citus refuses a second user on placements co-located
-- with ones a first modified in the transaction: with the log pruned as the
-- catalog's owner before retention, every such step failed.  The query
-- uses query_to_xml, which runs SQL: the fold runs as the query's owner,
-- never as the catalog's.
SET ROLE regress_own_alice;
SELECT streamwm.create_stream('sr', 'k int, v int', partitions => 2, distributed => true,
                              retention => '10 s');
-- (a row counts only if the SQL that query_to_xml runs sees alice)
SELECT streamwm.create_query('srq',
  $$SELECT k, count(*) AS n FROM sr
     WHERE pg_catalog.strpos(pg_catalog.query_to_xml('SELECT current_user AS u', false, true, '')::text,
                             '>regress_own_alice<') > 0 GROUP BY k$$,
  hop => '10 s', size => '10 s');
SELECT plan FROM streamwm.queries WHERE query = 'srq';
INSERT INTO sr (k, v, sw_partition, sw_write_time)
SELECT i % 2, i, i % 2, '2026-01-01 00:00:00+00'::timestamptz + i * interval '1 s'
  FROM generate_series(1, 60) i;
SELECT streamwm.process('sr', now => '2026-01-01 00:10:00+00');
INSERT INTO sr (k, v, sw_partition, sw_write_time)
SELECT i % 2, i, i % 2, '2026-01-01 00:00:00+00'::timestamptz + i * interval '1 s'
  FROM generate_series(61, 120) i;
SELECT streamwm.process('sr', now => '2026-01-01 00:10:00+00');
SELECT events, expired_rows > 0 AS expired FROM streamwm.streams WHERE stream = 'sr'::regclass;
SELECT min(sw_event_time) >= '2026-01-01 00:01:40+00' AS retained FROM sr;
-- every row of the closed windows [0 s, 110 s) counted (W is 120 s)
SELECT sum(n) AS counted, count(DISTINCT window_start) AS windows FROM srq;
SELECT count(*) AS copied FROM sr_sw_rows;
RESET ROLE;
-- A query of another role (here a superuser) on alice's stream does not
-- fold on the nodes: the shards are alice's tables, which she can change
-- on a worker (a view in a shard's place), and a read of them there would
-- run her code as the query's owner.  It folds the coordinator's copy,
-- which the steps make again.
SELECT streamwm.create_query('srq_admin', 'SELECT k, count(*) AS n FROM sr GROUP BY k',
                             hop => '10 s', size => '10 s', start_from => 'earliest');
INSERT INTO sr (k, v, sw_partition, sw_write_time)
SELECT i % 2, i, i % 2, '2026-01-01 00:00:00+00'::timestamptz + i * interval '1 s'
  FROM generate_series(121, 130) i;
SET ROLE regress_own_alice;
SELECT streamwm.process('sr', now => '2026-01-01 00:10:00+00');
RESET ROLE;
SELECT count(*) > 0 AS copied FROM sr_sw_rows;
SELECT sum(n) AS counted FROM srq_admin WHERE window_start >= '2026-01-01 00:01:50+00';
SELECT streamwm.drop_query('srq_admin', drop_result => true);
-- Given to another role (here a superuser, as when a departing user's
-- objects are taken over), the stream's shards are still alice's tables on
-- the workers, which she could have changed there (a view in a shard's
-- place, calling her function): steps refuse to read them as the new
-- owner, and the views show nothing of them, until the stream is hers again.
ALTER TABLE sr OWNER TO CURRENT_USER;
\set VERBOSITY terse
SELECT streamwm.process('sr', now => '2026-01-01 00:10:00+00');
-- and a query on it is refused at once, not at its first step
SELECT streamwm.create_query('srq_late', 'SELECT count(*) AS n FROM sr', hop => '10 s', size => '10 s',
                             start_from => 'earliest');
\set VERBOSITY default
SELECT count(*) AS created FROM streamwm.queries WHERE query = 'srq_late';
-- (the newest row on the nodes is not read: the processed offset is shown)
INSERT INTO sr (k, v, sw_partition, sw_write_time) VALUES (0, 0, 0, '2026-01-01 00:03:00+00');
SELECT partition, last_offset = processed_offset AS shows_processed FROM streamwm.partitions
 WHERE stream = 'sr'::regclass ORDER BY 1;
ALTER TABLE sr OWNER TO regress_own_alice;
SET ROLE regress_own_alice;
SELECT streamwm.process('sr', now => '2026-01-01 00:10:00+00');
SELECT streamwm.drop_stream('sr', cascade => true);
DROP TABLE srq;
RESET ROLE;

-- dropped by its owner, the log with it (the catalog's, dropped as the catalog)
SET ROLE regress_own_alice;
SELECT streamwm.drop_stream('so', cascade => true);
SELECT streamwm.drop_stream('sl');
DROP TABLE soq, so_mine;
DROP FUNCTION public.so_grab();
RESET ROLE;
SELECT count(*) AS left_over FROM pg_class
 WHERE relname IN ('so', 'sl', 'soq', 'so_mine') OR relname LIKE 'so\_sw%' OR relname LIKE 'sl\_%';
SELECT result AS left_over_on_workers FROM run_command_on_workers($$
    SELECT count(*) FROM pg_class WHERE relname LIKE 'so\_%'$$) ORDER BY nodeport;
REVOKE CREATE ON SCHEMA public FROM regress_own_alice;
DROP ROLE regress_own_alice;
DROP ROLE regress_own_bob;
