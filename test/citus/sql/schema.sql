-- A distributed stream's commit log is named by text in its shards'
-- trigger, and sw_partition's default names the stream: renaming its
-- schema, or moving it to another, broke it for good (every INSERT then
-- failed with 'schema "sc" does not exist').  Both are refused; dropping
-- the schema takes the stream, its log and its rows copy along.
SET TimeZone = 'UTC';
SET client_min_messages = warning;
CREATE SCHEMA sc;
SELECT streamwm.create_stream('sc.ds', 'v int', partitions => 2, distributed => true);
INSERT INTO sc.ds (v, sw_write_time) VALUES (1, '2024-01-01 00:00:01+00');
ALTER SCHEMA sc RENAME TO sc2;
CREATE SCHEMA sd;
ALTER TABLE sc.ds SET SCHEMA sd;
-- (a local stream's schema may be renamed and the stream moved)
SELECT streamwm.create_stream('sd.ls', 'v int');
ALTER SCHEMA sd RENAME TO sd2;
ALTER TABLE sd2.ls SET SCHEMA public;
INSERT INTO public.ls (v) VALUES (1);
SELECT count(*) FROM public.ls;
SELECT streamwm.drop_stream('public.ls');
-- the stream still works
INSERT INTO sc.ds (v, sw_write_time) VALUES (2, '2024-01-01 00:00:02+00');
SELECT streamwm.process('sc.ds', now => '2024-01-01 00:01:00+00');
SELECT events FROM streamwm.streams WHERE stream = 'sc.ds'::regclass;
-- dropping the schema drops all of it
DROP SCHEMA sc CASCADE;
SELECT count(*) AS streams_left FROM streamwm.stream_def;
SELECT count(*) AS distributed_left FROM pg_dist_partition;
DROP SCHEMA sd2;
