-- A prepared transaction that wrote into a partition of a distributed
-- stream and is not finished (as a coordinator that died between the two
-- phases leaves one) holds the partition's commit lock on its node: a step
-- does not hang on it, it fails after a short wait, changing nothing, and
-- reads the rows once the transaction is committed; a writer into that
-- partition fails after a short wait, it does not hang.
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
SET client_min_messages = warning;
\getenv coordinator CITUS_COORDINATOR
SELECT streamwm.create_stream('pp', 'k int', partitions => 2, distributed => true);
INSERT INTO pp (k, sw_partition) VALUES (1, 0), (2, 1);
SELECT streamwm.process('pp');
SELECT events FROM streamwm.streams WHERE stream = 'pp'::regclass;
SELECT nodeport AS holder FROM citus_shards
 WHERE shardid = get_shard_id_for_distribution_column('pp', 1) \gset
SELECT 'pp_' || get_shard_id_for_distribution_column('pp', 1) AS shard \gset
-- on the node that holds partition 1, a transaction writes its shard and
-- is prepared, not committed
\connect - - - :holder
BEGIN;
INSERT INTO :shard (k, sw_partition) VALUES (3, 1);
PREPARE TRANSACTION 'streamwm_stray';
\connect - - - :coordinator
SET client_min_messages = warning;
\set VERBOSITY terse
SELECT streamwm.process('pp');
\set VERBOSITY default
SELECT events FROM streamwm.streams WHERE stream = 'pp'::regclass;
-- a writer into that partition does not hang either: it fails, retryable
\set VERBOSITY terse
INSERT INTO pp (k, sw_partition) VALUES (4, 1);
\set VERBOSITY default
-- the other partition takes rows as usual
INSERT INTO pp (k, sw_partition) VALUES (5, 0);
\connect - - - :holder
COMMIT PREPARED 'streamwm_stray';
\connect - - - :coordinator
SET client_min_messages = warning;
SELECT streamwm.process('pp');
SELECT events FROM streamwm.streams WHERE stream = 'pp'::regclass;
SELECT k, sw_partition FROM pp ORDER BY k;
SELECT streamwm.drop_stream('pp');
