-- Issue 7: two ordinary roles and hostile objects planted in public.  No
-- role gets past its own rights through streamwm, and nothing bob plants is
-- ever run by streamwm on anyone else's behalf.
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
-- streams here are stepped by the tests themselves (streamwm.process(now => ...)): no background worker steps in
DO $$BEGIN EXECUTE format('ALTER DATABASE %I SET streamwm.enabled = off', current_database()); END$$;
CREATE EXTENSION IF NOT EXISTS streamwm;

CREATE ROLE regress_hs_alice;
CREATE ROLE regress_hs_bob;
CREATE ROLE regress_hs_carol IN ROLE pg_read_all_stats;
GRANT CREATE ON SCHEMA public TO regress_hs_alice, regress_hs_bob;

-- bob's trap: every call records who ran it
SET ROLE regress_hs_bob;
CREATE TABLE public.pwned (who name, what text);
GRANT INSERT, SELECT ON public.pwned TO PUBLIC;
CREATE FUNCTION public.trap_eq(regclass, oid) RETURNS boolean LANGUAGE plpgsql AS
  $$BEGIN INSERT INTO public.pwned VALUES (current_user, 'regclass = oid'); RETURN $1::oid OPERATOR(pg_catalog.=) $2; END$$;
CREATE OPERATOR public.= (LEFTARG = regclass, RIGHTARG = oid, FUNCTION = public.trap_eq);
CREATE FUNCTION public.trap_eq2(oid, regclass) RETURNS boolean LANGUAGE plpgsql AS
  $$BEGIN INSERT INTO public.pwned VALUES (current_user, 'oid = regclass'); RETURN $1 OPERATOR(pg_catalog.=) $2::oid; END$$;
CREATE OPERATOR public.= (LEFTARG = oid, RIGHTARG = regclass, FUNCTION = public.trap_eq2);
CREATE FUNCTION public.unnest(bigint[]) RETURNS SETOF bigint LANGUAGE plpgsql AS
  $$BEGIN INSERT INTO public.pwned VALUES (current_user, 'unnest'); RETURN QUERY SELECT pg_catalog.unnest($1); END$$;
RESET ROLE;

-- 1. alice's stream and query, made before bob's numeric trap exists
SET ROLE regress_hs_alice;
SELECT streamwm.create_stream('hs_a', 'k int, price numeric');
SELECT streamwm.create_query('hs_aq', 'SELECT k, count(*) AS n FROM hs_a WHERE price > 10 GROUP BY k',
                             hop => '10 s', size => '10 s');
RESET ROLE;
-- now bob plants an exact-match operator for alice's "price > 10"
SET ROLE regress_hs_bob;
CREATE FUNCTION public.trap_gt(numeric, integer) RETURNS boolean LANGUAGE plpgsql AS
  $$BEGIN INSERT INTO public.pwned VALUES (current_user, 'numeric > integer'); RETURN true; END$$;
CREATE OPERATOR public.> (LEFTARG = numeric, RIGHTARG = integer, FUNCTION = public.trap_gt);
RESET ROLE;

SET ROLE regress_hs_alice;
SELECT streamwm.ingest('hs_a', '[{"k": 1, "price": 5}, {"k": 1, "price": 50}, {"k": 2, "price": 20}]',
                       write_time => '1970-01-01 00:00:01+00');
SELECT streamwm.ingest('hs_a', '{"k": 1, "price": 1}', write_time => '1970-01-01 00:00:25+00');
SELECT streamwm.process('hs_a');
SELECT window_start, k, n FROM hs_aq ORDER BY 1, 2;   -- price > 10 as alice meant it
SELECT stream, partition, last_offset, processed_offset FROM streamwm.partitions;
SELECT query, pending_events, definition FROM streamwm.queries;
RESET ROLE;
-- the superuser's steps and views, under a search_path with public first
SET search_path = public, pg_catalog;
SELECT streamwm.ingest('hs_a', '{"k": 3, "price": 30}', write_time => '1970-01-01 00:00:31+00');
SELECT streamwm.process();
SELECT count(*) AS streams FROM streamwm.streams WHERE stream::text LIKE 'hs%';
SELECT count(*) AS partitions FROM streamwm.partitions WHERE stream::text LIKE 'hs%';
SELECT query, pending_events FROM streamwm.queries WHERE query LIKE 'hs%';
SELECT count(*) AS late FROM streamwm.late_events WHERE stream::text LIKE 'hs%';
RESET search_path;
SELECT who, what FROM pwned;   -- nothing of bob's ever ran

-- 2. the catalog is not writable, and the API checks ownership
SET ROLE regress_hs_bob;
INSERT INTO streamwm.stream_def (stream, partitions, watermark_delay, granularity, idle_timeout, retention)
VALUES ('hs_a', 1, '0', '1 s', '5 s', '1 s');
UPDATE streamwm.query_def SET result_table = 'pwned'::regclass;
DELETE FROM streamwm.partition_state;
CREATE TABLE bob_s (x int);
SELECT streamwm_internal._register_stream('hs_a', 1, '0', NULL, NULL, '1 s', '5 s', '1 s', NULL);   -- not his table
SELECT streamwm_internal._register_stream('bob_s', 1, '0', NULL, NULL, '1 s', '5 s', '1 s', NULL);  -- not a stream table
CREATE TABLE bob_fake (x int, sw_partition int, sw_offset bigint, sw_write_time timestamptz,
                       sw_event_time timestamptz);
SELECT streamwm_internal._register_stream('bob_fake', 1, '0', NULL, NULL, '1 s', '5 s', '1 s', NULL);  -- columns alone do not make a stream
CREATE VIEW bob_v AS SELECT 1 AS x;
SELECT streamwm_internal._register_stream('bob_v', 1, '0', NULL, NULL, '1 s', '5 s', '1 s', NULL);  -- a view is never a stream
SELECT streamwm.create_query('bob_q', 'SELECT count(*) AS n FROM hs_a', hop => '1 s', size => '1 s');
SELECT streamwm.drop_query('hs_aq');
SELECT streamwm.drop_stream('hs_a');
SELECT streamwm.process('hs_a');
SELECT streamwm.process();   -- bob's own streams only: none
SELECT streamwm_internal._check_query('hs_aq');
SELECT streamwm.ingest('hs_a', '{"k": 9}');   -- no INSERT privilege
-- 3. the views show bob nothing of alice's
SELECT count(*) FROM streamwm.streams;
SELECT count(*) FROM streamwm.partitions;
SELECT count(*) FROM streamwm.queries;
SELECT count(*) FROM streamwm.late_events;
SELECT count(*) FROM streamwm.stream_def;
SELECT count(*) FROM streamwm.query_def;
SELECT * FROM streamwm_internal._partition_stats('hs_a');
SELECT * FROM streamwm_internal._query_pending('hs_a', '-infinity');
RESET ROLE;

-- alice lets bob read and write her stream: he sees the stream and that a
-- query exists, never its text or error; ingest() works with INSERT alone
SET ROLE regress_hs_alice;
GRANT SELECT, INSERT ON hs_a TO regress_hs_bob;
RESET ROLE;
SET ROLE regress_hs_bob;
SELECT stream, events FROM streamwm.streams;
SELECT query, definition, last_error FROM streamwm.queries;
SELECT streamwm.ingest('hs_a', '{"k": 9, "price": 99}', write_time => '1970-01-01 00:00:32+00');
SELECT streamwm.create_query('bob_q', 'SELECT count(*) AS n FROM hs_a', hop => '1 s', size => '1 s');  -- not his stream
RESET ROLE;
-- pg_read_all_stats sees everything, as in pg_stat_statements
SET ROLE regress_hs_carol;
SELECT query, definition FROM streamwm.queries WHERE query LIKE 'hs%';
RESET ROLE;

-- 4. a column list is column definitions, nothing else
SET ROLE regress_hs_alice;
SELECT streamwm.create_stream('hs_inj', 'x int); CREATE TABLE hs_evil (y int');
SELECT streamwm.create_stream('hs_inj', 'x int) INHERITS (hs_a');
SELECT to_regclass('hs_evil') IS NULL AS no_evil, to_regclass('hs_inj') IS NULL AS no_stream;

-- 5. dropping a query never drops someone else's table of the same name
SELECT streamwm.create_query('hs_aq2', 'SELECT count(*) AS n FROM hs_a', hop => '10 s', size => '10 s');
DROP TABLE hs_aq2;
RESET ROLE;
SET ROLE regress_hs_bob;
CREATE TABLE public.hs_aq2 (window_start timestamptz PRIMARY KEY, window_end timestamptz, n bigint);
RESET ROLE;
SELECT streamwm.process('hs_a');
SELECT query, result_table, windows_emitted FROM streamwm.queries WHERE query = 'hs_aq2';
SELECT streamwm.drop_query('hs_aq2', drop_result => true);
SELECT to_regclass('public.hs_aq2') IS NOT NULL AS bobs_table_kept;

-- 6. a query started at 'latest' (its start floor in the commit log), the
-- commits that compare with it and the steps that prune it, with bob's
-- traps on the bigint and int comparisons, max/min and the snapshot
-- functions those statements use, under a search_path with public first
SET ROLE regress_hs_bob;
CREATE FUNCTION public.trap_i8(bigint, bigint) RETURNS boolean LANGUAGE plpgsql AS
  $$BEGIN INSERT INTO public.pwned VALUES (current_user, 'bigint comparison'); RETURN true; END$$;
CREATE OPERATOR public.<= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = public.trap_i8);
CREATE OPERATOR public.< (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = public.trap_i8);
CREATE OPERATOR public.> (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = public.trap_i8);
CREATE FUNCTION public.trap_i4(integer, integer) RETURNS boolean LANGUAGE plpgsql AS
  $$BEGIN INSERT INTO public.pwned VALUES (current_user, 'int comparison'); RETURN true; END$$;
CREATE OPERATOR public.= (LEFTARG = integer, RIGHTARG = integer, FUNCTION = public.trap_i4);
CREATE OPERATOR public.< (LEFTARG = integer, RIGHTARG = integer, FUNCTION = public.trap_i4);
CREATE FUNCTION public.trap_max_sfunc(bigint, bigint) RETURNS bigint LANGUAGE plpgsql AS
  $$BEGIN INSERT INTO public.pwned VALUES (current_user, 'max/min'); RETURN 0; END$$;
CREATE AGGREGATE public.max(bigint) (SFUNC = public.trap_max_sfunc, STYPE = bigint);
CREATE AGGREGATE public.min(bigint) (SFUNC = public.trap_max_sfunc, STYPE = bigint);
CREATE FUNCTION public.pg_current_snapshot() RETURNS pg_snapshot LANGUAGE plpgsql AS
  $$BEGIN INSERT INTO public.pwned VALUES (current_user, 'pg_current_snapshot'); RETURN pg_catalog.pg_current_snapshot(); END$$;
RESET ROLE;
SET ROLE regress_hs_alice;
SET search_path = public, pg_catalog;
SELECT streamwm.create_stream('hs_l', 'k int', partitions => 2);
INSERT INTO hs_l (k, sw_partition, sw_write_time) VALUES (1, 0, '1970-01-01 00:00:01+00'), (2, 1, '1970-01-01 00:00:01+00');
BEGIN;
SELECT streamwm.create_query('hs_lq', 'SELECT count(*) AS n, sum(k) AS s FROM hs_l',
                             hop => '10 s', size => '10 s', start_from => 'latest');
INSERT INTO hs_l (k, sw_partition, sw_write_time) VALUES (10, 0, '1970-01-01 00:00:02+00');
COMMIT;
INSERT INTO hs_l (k, sw_partition, sw_write_time) VALUES (20, 1, '1970-01-01 00:00:03+00'),
                                                         (0, 0, '1970-01-01 00:00:30+00');
INSERT INTO hs_l (k, sw_partition, sw_write_time) VALUES (0, 1, '1970-01-01 00:00:30+00');
SELECT streamwm.process('hs_l');
SELECT streamwm.process('hs_l');
SELECT window_start, n, s FROM hs_lq ORDER BY 1;   -- the rows after the start: 10 and 20
RESET search_path;
RESET ROLE;
SELECT count(*) AS floors_left FROM streamwm.commit_log
 WHERE stream OPERATOR(pg_catalog.=) 'hs_l'::regclass AND partition OPERATOR(pg_catalog.<) 0;
-- bob may not set a floor in alice's stream
SET ROLE regress_hs_bob;
SELECT streamwm_internal._latest_offset('hs_l');
RESET ROLE;

SELECT who, what FROM pwned;   -- still nothing

SELECT streamwm.drop_stream('hs_l', cascade => true);
DROP TABLE hs_lq;
SELECT streamwm.drop_stream('hs_a', cascade => true);
DROP TABLE hs_aq, public.hs_aq2, bob_s, bob_fake, pwned;
DROP VIEW bob_v;
DROP OPERATOR public.= (regclass, oid);
DROP OPERATOR public.= (oid, regclass);
DROP OPERATOR public.> (numeric, integer);
DROP OPERATOR public.<= (bigint, bigint);
DROP OPERATOR public.< (bigint, bigint);
DROP OPERATOR public.> (bigint, bigint);
DROP OPERATOR public.= (integer, integer);
DROP OPERATOR public.< (integer, integer);
DROP AGGREGATE public.max(bigint);
DROP AGGREGATE public.min(bigint);
DROP FUNCTION public.trap_eq(regclass, oid), public.trap_eq2(oid, regclass), public.trap_gt(numeric, integer),
    public.unnest(bigint[]), public.trap_i8(bigint, bigint), public.trap_i4(integer, integer),
    public.trap_max_sfunc(bigint, bigint), public.pg_current_snapshot();
REVOKE CREATE ON SCHEMA public FROM regress_hs_alice, regress_hs_bob;
DROP ROLE regress_hs_alice;
DROP ROLE regress_hs_bob;
DROP ROLE regress_hs_carol;
