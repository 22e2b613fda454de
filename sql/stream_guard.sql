-- Issue 7: a stream table cannot be broken by its owner's DDL or DML
-- (SPEC sections 2 and 3), and user expressions are bound when created.
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
-- streams here are stepped by the tests themselves (streamwm.process(now => ...)): no background worker steps in
DO $$BEGIN EXECUTE format('ALTER DATABASE %I SET streamwm.enabled = off', current_database()); END$$;
CREATE EXTENSION IF NOT EXISTS streamwm;

CREATE ROLE regress_sw_alice;
CREATE ROLE regress_sw_bob;
GRANT CREATE ON SCHEMA public TO regress_sw_alice, regress_sw_bob;

------------------------------------------------------------------------
-- 1. event_time and partition_key are bound at create_stream, under the
--    creator's search_path; nobody's later search_path re-resolves them.
------------------------------------------------------------------------
SET ROLE regress_sw_alice;
-- ts is int8: the builtin to_timestamp(float8) needs a coercion, so a
-- to_timestamp(bigint) planted later would be an exact match
SELECT streamwm.create_stream('alice_ev', 'ts int8, k int4, v int',
                              partitions => 4, event_time => 'to_timestamp(ts)',
                              partition_key => 'k = 1');
GRANT INSERT, SELECT ON alice_ev TO regress_sw_bob;
RESET ROLE;

-- bob plants a to_timestamp(bigint) and an int4 = int4 in public that
-- record who runs them
SET ROLE regress_sw_bob;
CREATE TABLE public.bob_log (who name, what text);
GRANT INSERT ON public.bob_log TO PUBLIC;
CREATE FUNCTION public.to_timestamp(bigint) RETURNS timestamptz LANGUAGE plpgsql AS
  $$BEGIN INSERT INTO public.bob_log VALUES (current_user, 'to_timestamp');
          RETURN pg_catalog.to_timestamp(0); END$$;
CREATE FUNCTION public.bob_eq(int4, int4) RETURNS boolean LANGUAGE plpgsql AS
  $$BEGIN INSERT INTO public.bob_log VALUES (current_user, '='); RETURN $1 OPERATOR(pg_catalog.=) $2; END$$;
CREATE OPERATOR public.= (LEFTARG = int4, RIGHTARG = int4, FUNCTION = public.bob_eq);
-- bob's function would be picked by a fresh parse (exact match)
SELECT to_timestamp(60::int8);
SELECT who, what FROM bob_log;
DELETE FROM bob_log;
-- inserts by bob
SET search_path = public, pg_catalog;
INSERT INTO alice_ev (ts, k, v) VALUES (60, 1, 1);
INSERT INTO alice_ev (ts, k, v) SELECT 61, 2, 2;
RESET search_path;
RESET ROLE;
-- by alice
SET ROLE regress_sw_alice;
SET search_path = public, pg_catalog;
INSERT INTO alice_ev (ts, k, v) VALUES (62, 1, 3);
SELECT streamwm.ingest('alice_ev', '{"ts": 66, "k": 1, "v": 9}');
COPY alice_ev (ts, k, v) FROM STDIN;
63	2	4
\.
RESET search_path;
RESET ROLE;
-- by the superuser
SET search_path = public, pg_catalog;
INSERT INTO alice_ev (ts, k, v) VALUES (64, 1, 5);
SELECT streamwm.ingest_lines('alice_ev', '{"ts": 65, "k": 2, "v": 6}');
RESET search_path;
-- bob's function and operator never ran; the event times are the builtin's
SELECT count(*) AS bob_ran FROM bob_log;
SELECT v, sw_event_time, sw_event_time = pg_catalog.to_timestamp(ts) AS builtin
  FROM alice_ev ORDER BY v;
-- rows with the same key land in the same partition
SELECT k, count(DISTINCT sw_partition) AS partitions FROM alice_ev GROUP BY k ORDER BY k;
-- the trigger holds the bound expressions; pg_dump (search_path = '') sees
-- explicit casts, and would see anything outside pg_catalog qualified
SELECT pg_get_triggerdef(oid) FROM pg_trigger
 WHERE tgrelid = 'alice_ev'::regclass AND tgname = 'sw_ingest';
SET search_path = '';
SELECT pg_get_triggerdef(oid) FROM pg_trigger
 WHERE tgrelid = 'public.alice_ev'::regclass AND tgname = 'sw_ingest';
RESET search_path;

-- a column used by event_time: renaming it keeps ingest working; dropping
-- or retyping it is refused by PostgreSQL, naming the trigger
SET ROLE regress_sw_alice;
ALTER TABLE alice_ev RENAME COLUMN ts TO epoch_s;
INSERT INTO alice_ev (epoch_s, k, v) VALUES (70, 1, 7);
SELECT sw_event_time FROM alice_ev WHERE v = 7;
ALTER TABLE alice_ev DROP COLUMN epoch_s;
ALTER TABLE alice_ev ALTER COLUMN epoch_s TYPE text;
ALTER TABLE alice_ev DROP COLUMN k;
-- ... and CASCADE cannot take the trigger along
ALTER TABLE alice_ev DROP COLUMN epoch_s CASCADE;
-- a column nothing uses can still be dropped
ALTER TABLE alice_ev ADD COLUMN note text;
ALTER TABLE alice_ev DROP COLUMN note;
INSERT INTO alice_ev (epoch_s, k, v) VALUES (71, 1, 8);
RESET ROLE;

-- Expressions are checked: exactly timestamptz, one expression, nothing more.
SELECT streamwm.create_stream('bad_ts', 'at timestamp', event_time => 'at');
SELECT streamwm.create_stream('bad_ts', 'at timestamp', event_time => 'at AT TIME ZONE ''UTC''') IS NOT NULL AS ok;
SELECT streamwm.create_stream('bad_date', 'd date', event_time => 'd');
SELECT streamwm.create_stream('bad_txt', 't text', event_time => 't');
SELECT streamwm.create_stream('bad_sm1', 'x int8', event_time => 'to_timestamp(x)) FROM pg_class WHERE (true');
SELECT streamwm.create_stream('bad_sm2', 'x int8', event_time => 'to_timestamp(x)); DROP TABLE alice_ev; SELECT (1');
SELECT streamwm.create_stream('bad_sm3', 'x int8', event_time => E'to_timestamp(x::float8) --') IS NOT NULL AS comment_ok;
SELECT streamwm.create_stream('bad_sm4', 'x int8', partition_key => 'x) UNION SELECT (1');
SELECT streamwm.create_stream('bad_sm5', 'x int8', partition_key => '(SELECT 1)');
SELECT count(*) FROM pg_class WHERE relname LIKE 'bad\_s%';
SELECT streamwm.drop_stream('bad_sm3');
INSERT INTO bad_ts (at) VALUES ('2024-01-01 12:00');
SET TimeZone = 'Europe/Berlin';
INSERT INTO bad_ts (at) VALUES ('2024-01-01 12:00');
RESET TimeZone;
SET TimeZone = 'UTC';
SELECT at, sw_event_time FROM bad_ts ORDER BY sw_offset;
SELECT streamwm.drop_stream('bad_ts');

------------------------------------------------------------------------
-- 2. DDL on system columns, triggers, rules, inheritance is refused.
------------------------------------------------------------------------
SELECT streamwm.create_stream('gclicks', 'pass int8, payload text', partitions => 2);
INSERT INTO gclicks (sw_partition, sw_write_time, pass, payload)
       VALUES (0, '1970-01-01T00:00:40Z', 1, 'a');
ALTER TABLE gclicks ALTER COLUMN sw_offset TYPE text;
ALTER TABLE gclicks ALTER COLUMN sw_partition TYPE numeric;
ALTER TABLE gclicks DROP COLUMN sw_partition;
ALTER TABLE gclicks DROP COLUMN sw_write_time CASCADE;
ALTER TABLE gclicks RENAME COLUMN sw_event_time TO et;
ALTER TABLE gclicks RENAME sw_write_time TO wt;
ALTER TABLE gclicks RENAME COLUMN payload TO sw_payload;
ALTER TABLE gclicks ALTER COLUMN sw_write_time SET DEFAULT now();
ALTER TABLE gclicks ALTER COLUMN sw_event_time DROP NOT NULL;
ALTER TABLE gclicks ALTER COLUMN sw_offset ADD GENERATED ALWAYS AS IDENTITY;
ALTER TABLE gclicks ADD COLUMN sw_extra int;
ALTER TABLE gclicks ADD COLUMN note text, ALTER COLUMN sw_offset TYPE int4;
DROP TRIGGER sw_ingest ON gclicks;
DROP TRIGGER sw_no_update ON public.gclicks;
ALTER TRIGGER sw_ingest ON gclicks RENAME TO other;
ALTER TABLE gclicks DISABLE TRIGGER sw_ingest;
ALTER TABLE gclicks DISABLE TRIGGER ALL;
ALTER TABLE gclicks DISABLE TRIGGER USER;
ALTER TABLE gclicks ENABLE REPLICA TRIGGER sw_ingest;
CREATE OR REPLACE TRIGGER sw_ingest BEFORE INSERT ON gclicks FOR EACH ROW
  EXECUTE FUNCTION suppress_redundant_updates_trigger();
-- (an extension's object goes with the extension: DROP EXTENSION hll would drop it)
ALTER TRIGGER sw_ingest ON gclicks DEPENDS ON EXTENSION streamwm;
ALTER TRIGGER sw_no_update ON gclicks NO DEPENDS ON EXTENSION streamwm;
CREATE RULE "_RETURN" AS ON SELECT TO gclicks DO INSTEAD SELECT * FROM gclicks;
CREATE RULE no_insert AS ON INSERT TO gclicks DO INSTEAD NOTHING;
CREATE TABLE gclicks_child () INHERITS (gclicks);
CREATE TABLE other_parent (pass int8);
ALTER TABLE gclicks INHERIT other_parent;
CREATE TABLE gclicks_copy (LIKE gclicks);
ALTER TABLE gclicks_copy INHERIT gclicks;
CREATE TABLE parted (pass int8, payload text, sw_partition int, sw_offset bigint,
                     sw_write_time timestamptz, sw_event_time timestamptz)
                     PARTITION BY LIST (pass);
ALTER TABLE parted ATTACH PARTITION gclicks FOR VALUES IN (1);
ALTER SEQUENCE gclicks_sw_offset_seq RESTART;
DROP SEQUENCE gclicks_sw_offset_seq;
DROP TABLE gclicks_copy, other_parent, parted;
-- what does not break a stream is allowed
ALTER TABLE gclicks ADD COLUMN note text;
ALTER TABLE gclicks ALTER COLUMN note SET DEFAULT 'n';
ALTER TABLE gclicks RENAME COLUMN note TO remark;
ALTER TABLE gclicks DROP COLUMN remark;
CREATE TRIGGER my_trigger BEFORE INSERT ON gclicks FOR EACH ROW
  EXECUTE FUNCTION suppress_redundant_updates_trigger();
ALTER TABLE gclicks DISABLE TRIGGER my_trigger;
DROP TRIGGER my_trigger ON gclicks;
ALTER TABLE gclicks RENAME TO gclicks2;
ALTER TABLE gclicks2 RENAME TO gclicks;
-- the owner can do none of it either
ALTER TABLE gclicks OWNER TO regress_sw_alice;
SET ROLE regress_sw_alice;
ALTER TABLE gclicks ALTER COLUMN sw_offset TYPE text;
DROP TRIGGER sw_ingest ON gclicks;
RESET ROLE;
-- the stream still works
INSERT INTO gclicks (sw_partition, sw_write_time, pass, payload)
       VALUES (1, '1970-01-01T00:00:41Z', 2, 'b');
SELECT pass, payload, sw_partition, sw_offset > 0 AS has_offset FROM gclicks ORDER BY sw_offset;

-- Defence in depth: with the event trigger disabled by a superuser, a
-- retyped or dropped system column gives a clean error, never a crash.
SELECT streamwm.create_stream('broken', 'v int');
SELECT streamwm.create_query('broken_q', 'SELECT count(*) AS n FROM broken',
                             hop => '10 s', size => '10 s');
INSERT INTO broken (sw_write_time, v) VALUES ('1970-01-01T00:00:01Z', 1);
ALTER EVENT TRIGGER streamwm_guard_ddl DISABLE;
-- (the stream's own index has no operator class for text: it goes first)
DO $$BEGIN EXECUTE (SELECT format('DROP INDEX %s', indexrelid::regclass) FROM pg_index WHERE indrelid = 'broken'::regclass); END$$;
ALTER TABLE broken ALTER COLUMN sw_offset TYPE text;
INSERT INTO broken (v) VALUES (2);
SELECT streamwm.ingest('broken', '{"v": 3}');
SELECT streamwm.process('broken', now => '1970-01-01T00:01:00Z');
ALTER TABLE broken ALTER COLUMN sw_offset TYPE bigint USING sw_offset::bigint;
ALTER TABLE broken ALTER COLUMN sw_partition TYPE numeric;
INSERT INTO broken (v) VALUES (2);
SELECT streamwm.process('broken', now => '1970-01-01T00:01:00Z');
ALTER TABLE broken DROP COLUMN sw_partition;
INSERT INTO broken (v) VALUES (2);
SELECT streamwm.ingest('broken', '{"v": 3}');
SELECT streamwm.process('broken', now => '1970-01-01T00:01:00Z');
ALTER EVENT TRIGGER streamwm_guard_ddl ENABLE;
SELECT streamwm.drop_stream('broken', cascade => true);
DROP TABLE broken_q;

------------------------------------------------------------------------
-- 3. Append-only: no UPDATE, no explicit sw_offset / sw_event_time,
--    no TRUNCATE ... RESTART IDENTITY.
------------------------------------------------------------------------
UPDATE gclicks SET payload = 'x' WHERE false;
UPDATE gclicks SET payload = 'x';
INSERT INTO gclicks (pass, sw_event_time) VALUES (1, '2024-01-01T00:00:00Z');
INSERT INTO gclicks (pass, sw_offset) VALUES (1, 7);
COPY gclicks (pass, sw_event_time) FROM STDIN;
1	2024-01-01 00:00:00+00
\.
SELECT streamwm.ingest('gclicks', '{"pass": 1, "sw_event_time": "2024-01-01T00:00:00Z"}');
-- an explicit NULL is "not given"
INSERT INTO gclicks (pass, payload, sw_event_time, sw_offset) VALUES (3, 'c', NULL, NULL);
SELECT max(sw_offset) AS before_truncate FROM gclicks \gset
SELECT streamwm.process('gclicks', now => '1970-01-01T00:01:00Z');
TRUNCATE gclicks RESTART IDENTITY;
SELECT count(*) FROM gclicks;
-- plain TRUNCATE and DELETE are allowed, and offsets keep growing
TRUNCATE gclicks;
TRUNCATE gclicks CONTINUE IDENTITY;
INSERT INTO gclicks (pass, payload) VALUES (4, 'd');
SELECT sw_offset > :before_truncate AS offsets_grow FROM gclicks;
DELETE FROM gclicks;
SELECT count(*) FROM gclicks;

------------------------------------------------------------------------
-- 4. Smaller holes.
------------------------------------------------------------------------
-- two names sharing their first 40 (and more) characters get two sequences
SELECT streamwm.create_stream(repeat('s', 60) || '_one', 'v int');
SELECT streamwm.create_stream(repeat('s', 60) || '_two', 'v int');
SELECT streamwm.create_stream(repeat('é', 28) || '_one', 'v int');
SELECT streamwm.create_stream(repeat('é', 28) || '_two', 'v int');
SELECT c.relname, s.relname AS sequence, octet_length(s.relname) <= 63 AS fits
  FROM pg_class c JOIN pg_depend d ON d.refobjid = c.oid AND d.classid = 'pg_class'::regclass
  JOIN pg_class s ON s.oid = d.objid AND s.relkind = 'S'
 WHERE c.relname LIKE 'sss%' OR c.relname LIKE 'é%' ORDER BY 1;
INSERT INTO ssssssssssssssssssssssssssssssssssssssssssssssssssssssssssss_tw (v) VALUES (1);
SELECT streamwm.drop_stream(repeat('s', 60) || '_one');
SELECT streamwm.drop_stream(repeat('s', 60) || '_tw');
SELECT streamwm.drop_stream(s.stream)
  FROM streamwm.stream_def s WHERE s.stream::text LIKE '%é%';

-- window_start near the ends of the timestamp range
SELECT streamwm.window_start('294276-12-31 23:59:59+00', '1 hour');
SELECT streamwm.window_start('294276-12-31 23:59:59.999999+00', '7 days');
SELECT streamwm.window_start('4714-11-24 00:00:00+00 BC', '1 day');
SELECT streamwm.window_start('4714-11-24 00:00:00+00 BC', '7 days');
SELECT streamwm.window_start('1970-01-01 00:00:05+00', '10 s');
SELECT streamwm.window_start('1969-12-31 23:59:55+00', '10 s');
SELECT streamwm.window_start('2024-01-01', '100000000 days');
SELECT streamwm.window_start('2024-01-01', '200000000 days');
SELECT streamwm.window_start('infinity', '1 hour');

------------------------------------------------------------------------
SELECT streamwm.drop_stream('alice_ev');
SELECT streamwm.drop_stream('gclicks');
DROP OPERATOR public.= (int4, int4);
DROP FUNCTION public.bob_eq(int4, int4);
DROP FUNCTION public.to_timestamp(bigint);
DROP TABLE public.bob_log;
REVOKE CREATE ON SCHEMA public FROM regress_sw_alice, regress_sw_bob;
DROP ROLE regress_sw_alice;
DROP ROLE regress_sw_bob;
