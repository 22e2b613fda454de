-- The table access method of local streams (src/stream_am.c): each row gets
-- its partition, offset, write and event time as the heap stores it, so
-- COPY keeps its multi-row inserts; everything else is the heap's.
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
-- streams here are stepped by the tests themselves (streamwm.process(now => ...)): no background worker steps in
DO $$BEGIN EXECUTE format('ALTER DATABASE %I SET streamwm.enabled = off', current_database()); END$$;
CREATE EXTENSION IF NOT EXISTS streamwm;

SELECT streamwm.create_stream('am_s', 'k int8, note text',
                              event_time => 'to_timestamp(k)', partitions => 2);
SELECT a.amname FROM pg_class c JOIN pg_am a ON a.oid = c.relam WHERE c.oid = 'am_s'::regclass;

-- COPY inserts a thousand rows at a time; an error in filling one names
-- that row of the data (COPY's own context would name the last line read),
-- and nothing of the statement is stored
\copy am_s (k) FROM PROGRAM 'awk ''BEGIN { for (i = 1; i <= 2500; i++) print (i == 1500 ? "\\N" : i) }'''
SELECT count(*) FROM am_s;
\copy am_s (k, sw_partition) FROM PROGRAM 'awk ''BEGIN { for (i = 1; i <= 2500; i++) print i "\t" (i == 2001 ? 7 : 1) }'''
SELECT count(*) FROM am_s;

-- a load of 2,500 rows: every row filled, offsets unique, one commit log
-- entry covering them, all read by a step in order (none late)
\copy am_s (k) FROM PROGRAM 'seq 1 2500'
SELECT count(*) AS n, count(DISTINCT sw_offset) AS offsets, count(DISTINCT sw_partition) AS partitions,
       bool_and(sw_event_time = to_timestamp(k)) AS event_times,
       bool_and(sw_write_time IS NOT NULL AND sw_partition IS NOT NULL) AS filled
  FROM am_s;
SELECT count(*) AS entries, sum(hi - lo) >= 2500 AS covers
  FROM streamwm.commit_log WHERE stream = 'am_s'::regclass;
SELECT streamwm.process('am_s', now => to_timestamp(3000));
SELECT events, late_events, unprocessed_events FROM streamwm.streams WHERE stream = 'am_s'::regclass;

-- INSERT, ON CONFLICT (a speculative insert) and RETURNING see the filled row
INSERT INTO am_s (k) VALUES (2600) ON CONFLICT DO NOTHING
RETURNING sw_partition IS NOT NULL AS partition, sw_offset > 0 AS offset,
          sw_event_time = to_timestamp(2600) AS event_time;
INSERT INTO am_s (k, sw_partition, sw_write_time) VALUES (2601, 1, to_timestamp(5))
RETURNING sw_partition, sw_write_time, sw_event_time;
-- a user still never gives sw_offset or sw_event_time
INSERT INTO am_s (k, sw_offset) VALUES (1, 1);
INSERT INTO am_s (k, sw_event_time) VALUES (1, now());
-- a user's BEFORE ROW trigger makes COPY insert row by row: then COPY's own
-- context names the line
CREATE FUNCTION am_noop() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
CREATE TRIGGER am_noop BEFORE INSERT ON am_s FOR EACH ROW EXECUTE FUNCTION am_noop();
COPY am_s (k) FROM STDIN;
7
\N
\.
DROP TRIGGER am_noop ON am_s;
DROP FUNCTION am_noop();

-- what the heap does for it: index builds (plain and concurrent), VACUUM
-- FULL, CLUSTER and a rewrite keep every row and offset as it was
CREATE TEMP TABLE am_before AS SELECT sw_partition, sw_offset, k FROM am_s;
CREATE INDEX am_s_k ON am_s (k);
CREATE INDEX CONCURRENTLY am_s_note ON am_s (note);
VACUUM FULL am_s;
CLUSTER am_s USING am_s_k;
ALTER TABLE am_s ALTER COLUMN note TYPE varchar;
SELECT count(*) FROM ((TABLE am_before EXCEPT SELECT sw_partition, sw_offset, k FROM am_s)
                      UNION ALL (SELECT sw_partition, sw_offset, k FROM am_s EXCEPT TABLE am_before)) d;
SET enable_seqscan = off;
SELECT count(*) FROM am_s WHERE k = 1234;
RESET enable_seqscan;
-- the rows stay a stream's: the next load continues after them
INSERT INTO am_s (k) VALUES (2700);
SELECT count(*) FROM am_s WHERE sw_offset > (SELECT max(sw_offset) FROM am_before);
-- as with a trigger, rows are stored as given under session_replication_role
-- = replica (a logical replication apply worker, pg_restore --disable-triggers)
SET session_replication_role = replica;
INSERT INTO am_s (k, sw_partition, sw_offset, sw_write_time, sw_event_time)
VALUES (2800, 1, 999999, to_timestamp(1), to_timestamp(2800));
RESET session_replication_role;
SELECT sw_partition, sw_offset, sw_write_time FROM am_s WHERE k = 2800;
-- ... but never without what a step reads it by
SET session_replication_role = replica;
INSERT INTO am_s (k, sw_partition, sw_write_time, sw_event_time) VALUES (2801, 1, to_timestamp(1), to_timestamp(1));
RESET session_replication_role;
-- COPY ... WHERE: the row that failed is counted among those kept
\copy am_s (k, sw_partition) FROM PROGRAM 'awk ''BEGIN { for (i = 1; i <= 30; i++) print i "\t" (i == 25 ? 7 : 1) }''' WHERE k > 20
-- owner code in an index expression runs while the heap's routine builds
-- the index: what it inserts into the stream would not be filled, and is
-- refused
CREATE FUNCTION am_ins(k int8) RETURNS int8 VOLATILE LANGUAGE plpgsql AS
  $$ BEGIN INSERT INTO am_s (k) VALUES (k + 100000); RETURN k; END $$;
CREATE FUNCTION am_ix(k int8) RETURNS int8 IMMUTABLE LANGUAGE plpgsql AS $$ BEGIN RETURN am_ins(k); END $$;
CREATE INDEX am_s_ix ON am_s (am_ix(k)) WHERE k < 10;
SELECT count(*) FROM am_s WHERE k > 100000 OR sw_offset IS NULL;
DROP FUNCTION am_ix(int8);
DROP FUNCTION am_ins(int8);
-- nor can a stream change its access method
ALTER TABLE am_s SET ACCESS METHOD heap;

-- a stored generated column is computed before the row is filled: over a
-- system column it would see NULL, and is refused
SELECT streamwm.create_stream('am_g', 'k int, o2 bigint GENERATED ALWAYS AS (sw_offset * 2) STORED');
SELECT streamwm.create_stream('am_g', 'k int, k2 int GENERATED ALWAYS AS (k * 2) STORED');
ALTER TABLE am_g ADD COLUMN p2 int GENERATED ALWAYS AS (sw_partition + 1) STORED;
INSERT INTO am_g (k) VALUES (21) RETURNING k2, sw_offset IS NOT NULL AS filled;
SELECT streamwm.drop_stream('am_g');

-- a table of that access method that is no stream is the heap
CREATE TABLE am_plain (a int, sw_offset bigint) USING streamwm_stream;
INSERT INTO am_plain VALUES (1, 42);
COPY am_plain FROM STDIN;
2	\N
\.
TABLE am_plain;
-- ... also with a trigger of its own named sw_ingest
CREATE FUNCTION am_own() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
CREATE TRIGGER sw_ingest BEFORE UPDATE ON am_plain FOR EACH ROW EXECUTE FUNCTION am_own();
INSERT INTO am_plain VALUES (3, NULL);
SELECT count(*) FROM am_plain;
DROP TABLE am_plain;
DROP FUNCTION am_own();
SELECT streamwm.drop_stream('am_s');

-- the key cannot identify rows to logical replication (nullable columns):
-- the whole row does, so that with a publication of the stream's deletes
-- (and of renumbering's updates, test/specs/renumber.spec) retention still
-- removes rows
SELECT streamwm.create_stream('am_p', 'v int', retention => '1 minute');
SELECT relreplident FROM pg_class WHERE oid = 'am_p'::regclass;
SET client_min_messages = error;   -- "wal_level is insufficient" on some clusters
CREATE PUBLICATION am_pub FOR TABLE am_p;
RESET client_min_messages;
INSERT INTO am_p (v, sw_write_time) SELECT i, to_timestamp(i) FROM generate_series(1, 600) i;
SELECT streamwm.process('am_p', now => to_timestamp(1000));
SELECT streamwm.process('am_p', now => to_timestamp(1000));
SELECT count(*) < 600 AS removed, min(sw_write_time) >= to_timestamp(600 - 120) AS kept_recent FROM am_p;
DROP PUBLICATION am_pub;
SELECT streamwm.drop_stream('am_p');

-- a partition_key that changes the stream (a GRANT invalidates its cached
-- state) and inserts into it while a fill uses that state: the outer fill
-- keeps the state it began with (this once freed it under it and crashed)
CREATE FUNCTION am_pk(v int) RETURNS int LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE 'GRANT SELECT ON am_k TO public';
  IF v > 0 THEN INSERT INTO am_k (v) VALUES (-v); END IF;
  RETURN v;
END $$;
SELECT streamwm.create_stream('am_k', 'v int', partitions => 4, partition_key => 'am_pk(v)');
INSERT INTO am_k (v) VALUES (1), (2), (3);
COPY am_k (v) FROM STDIN;
5
6
\.
SELECT count(*) AS n, count(DISTINCT sw_offset) AS offsets,
       bool_and(sw_partition = (hashint4extended(v, 0)::numeric + CASE WHEN hashint4extended(v, 0) < 0 THEN 2::numeric ^ 64 ELSE 0 END) % 4)
         AS partition_by_key
  FROM am_k;
SELECT streamwm.drop_stream('am_k');
DROP FUNCTION am_pk(int);

-- the same with a state that stays valid: the nested fill evaluates the
-- partition_key on a context of its own, and the outer evaluation keeps its
-- argument (a megabyte of text) after the function inserted (this once
-- reset the outer context under it and crashed); also with ON CONFLICT
-- outside and inside (not both: PostgreSQL keeps one speculative insertion
-- token a backend, and warns when nested ones release it twice)
CREATE FUNCTION am_pk2(t text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  IF left(t, 1) = '7' THEN INSERT INTO am_n (v) VALUES (8); END IF;
  IF left(t, 1) = '5' THEN INSERT INTO am_n (v) VALUES (6) ON CONFLICT DO NOTHING; END IF;
  RETURN left(t, 1) || ':' || length(t) || ':' || md5(t);
END $$;
SELECT streamwm.create_stream('am_n', 'v int', partitions => 4,
                              partition_key => 'am_pk2(repeat(v::text, 1000000))');
INSERT INTO am_n (v) VALUES (7) ON CONFLICT DO NOTHING;
INSERT INTO am_n (v) VALUES (5);
SELECT v, sw_partition = (h::numeric + CASE WHEN h < 0 THEN 2::numeric ^ 64 ELSE 0 END) % 4 AS partition_by_key
  FROM (SELECT v, sw_partition,
               hashtextextended(left(v::text, 1) || ':' || 1000000 || ':' || md5(repeat(v::text, 1000000)), 0) AS h
          FROM am_n) r
 ORDER BY v;
SELECT streamwm.drop_stream('am_n');
DROP FUNCTION am_pk2(text);

-- an ExprState is not reentrant: a nested fill evaluates the expression
-- built again (once the nested run overwrote the outer one's intermediate
-- values, and a SQL function's cached plan, and crashed the server)
CREATE FUNCTION am_pk3(v int) RETURNS text LANGUAGE plpgsql AS $$
BEGIN IF v > 0 THEN INSERT INTO am_n3 (v) VALUES (v - 1); END IF; RETURN v::text; END $$;
SELECT streamwm.create_stream('am_n3', 'v int', partitions => 4,
                              partition_key => 'md5(repeat(v::text, 1000000) || am_pk3(v))');
INSERT INTO am_n3 (v) VALUES (3);
SELECT v, sw_partition = (h::numeric + CASE WHEN h < 0 THEN 2::numeric ^ 64 ELSE 0 END) % 4 AS partition_by_key
  FROM (SELECT v, sw_partition, hashtextextended(md5(repeat(v::text, 1000000) || v::text), 0) AS h
          FROM am_n3) r
 ORDER BY v;
SELECT streamwm.drop_stream('am_n3');
DROP FUNCTION am_pk3(int);
SET check_function_bodies = off;
CREATE FUNCTION am_pk4(v int) RETURNS int LANGUAGE sql AS
  $$ INSERT INTO am_n4 (v) SELECT v - 1 WHERE v > 0; SELECT v; $$;
RESET check_function_bodies;
SELECT streamwm.create_stream('am_n4', 'v int', partitions => 4, partition_key => 'am_pk4(v)');
INSERT INTO am_n4 (v) VALUES (2);
SELECT v, sw_partition = (h::numeric + CASE WHEN h < 0 THEN 2::numeric ^ 64 ELSE 0 END) % 4 AS partition_by_key
  FROM (SELECT v, sw_partition, hashint4extended(v, 0) AS h FROM am_n4) r
 ORDER BY v;
SELECT streamwm.drop_stream('am_n4');
DROP FUNCTION am_pk4(int);

-- COPY into a stream without expressions fills each row from the tail of
-- the tuple COPY formed (its other columns' bytes are copied, not deformed):
-- every column as a plain table given the same lines stores it, with NULLs,
-- text, numeric, narrow types and a dropped column in front of the tail
SELECT streamwm.create_stream('am_c', 'a int2, gone int4, b text, c int8, d numeric, e bool', partitions => 3);
ALTER TABLE am_c DROP COLUMN gone;
CREATE TABLE am_c_model (a int2, b text, c int8, d numeric, e bool, p int, w timestamptz);
\copy am_c (a, b, c, d, e, sw_partition, sw_write_time) FROM PROGRAM 'awk ''BEGIN { for (i = 1; i <= 2300; i++) print (i % 7 == 0 ? "\\N" : i % 30000) "\t" (i % 5 == 0 ? "\\N" : sprintf("%0*d", i % 300, 0)) "\t" (i % 3 == 0 ? "\\N" : i * 1003) "\t" (i % 11 == 0 ? "\\N" : i / 7) "\t" (i % 2 == 0 ? "t" : "\\N") "\t" (i % 3) "\t" (i % 13 == 0 ? "\\N" : "2026-01-01 00:00:00+00") }'''
\copy am_c_model (a, b, c, d, e, p, w) FROM PROGRAM 'awk ''BEGIN { for (i = 1; i <= 2300; i++) print (i % 7 == 0 ? "\\N" : i % 30000) "\t" (i % 5 == 0 ? "\\N" : sprintf("%0*d", i % 300, 0)) "\t" (i % 3 == 0 ? "\\N" : i * 1003) "\t" (i % 11 == 0 ? "\\N" : i / 7) "\t" (i % 2 == 0 ? "t" : "\\N") "\t" (i % 3) "\t" (i % 13 == 0 ? "\\N" : "2026-01-01 00:00:00+00") }'''
SELECT (SELECT count(*) FROM am_c) AS rows,
       (SELECT count(*) FROM (SELECT a, b, c, d, e, sw_partition FROM am_c
                              EXCEPT ALL SELECT a, b, c, d, e, p FROM am_c_model) x) AS not_in_model,
       (SELECT count(*) FROM (SELECT a, b, c, d, e, p FROM am_c_model
                              EXCEPT ALL SELECT a, b, c, d, e, sw_partition FROM am_c) x) AS missing,
       (SELECT count(*) FROM am_c WHERE sw_write_time = '2026-01-01 00:00:00+00') AS given_times,
       (SELECT count(DISTINCT sw_offset) FROM am_c) AS offsets,
       (SELECT bool_and(sw_event_time = sw_write_time) FROM am_c) AS event_times;
-- ... and with a user column after the system columns, the same rows
ALTER TABLE am_c ADD COLUMN f text;
TRUNCATE am_c;
\copy am_c (a, b, c, d, e, sw_partition, sw_write_time) FROM PROGRAM 'awk ''BEGIN { for (i = 1; i <= 2300; i++) print (i % 7 == 0 ? "\\N" : i % 30000) "\t" (i % 5 == 0 ? "\\N" : sprintf("%0*d", i % 300, 0)) "\t" (i % 3 == 0 ? "\\N" : i * 1003) "\t" (i % 11 == 0 ? "\\N" : i / 7) "\t" (i % 2 == 0 ? "t" : "\\N") "\t" (i % 3) "\t" (i % 13 == 0 ? "\\N" : "2026-01-01 00:00:00+00") }'''
SELECT (SELECT count(*) FROM (SELECT a, b, c, d, e, sw_partition FROM am_c
                              EXCEPT ALL SELECT a, b, c, d, e, p FROM am_c_model) x) AS not_in_model,
       (SELECT count(*) FROM (SELECT a, b, c, d, e, p FROM am_c_model
                              EXCEPT ALL SELECT a, b, c, d, e, sw_partition FROM am_c) x) AS missing,
       (SELECT count(DISTINCT sw_offset) FROM am_c) AS offsets;
SELECT streamwm.drop_stream('am_c');
DROP TABLE am_c_model;
-- ... and byte for byte as forming the row from its values stores it
-- (pageinspect; a plain table given the stream's rows in the same order):
-- eleven attributes, so a row without NULLs among its own columns has a
-- shorter header than the row COPY formed with its system columns NULL
CREATE EXTENSION IF NOT EXISTS pageinspect;
SELECT streamwm.create_stream('am_w', 'a int2, b int2, c text, d int2, e int8, f int2, g int8', partitions => 2);
\copy am_w (a, b, c, d, e, f, g, sw_partition) FROM PROGRAM 'awk ''BEGIN { for (i = 1; i <= 3000; i++) print i % 300 "\t" i % 7 "\t" (i % 4 == 0 ? "\\N" : sprintf("%0*d", i % 40, 0)) "\t" i % 5 "\t" i * 3 "\t" i % 9 "\t" (i % 6 == 0 ? "\\N" : i) "\t" (i % 2 == 0 ? "\\N" : 1) }'''
CREATE TABLE am_w_model (LIKE am_w);
INSERT INTO am_w_model SELECT * FROM am_w ORDER BY ctid;
CREATE FUNCTION pg_temp.am_tuples(r regclass) RETURNS TABLE (n bigint, hoff int, mask int, mask2 int, bits text, data bytea)
LANGUAGE sql AS $$
  SELECT row_number() OVER (ORDER BY b, t.lp), t.t_hoff, t.t_infomask & 15, t.t_infomask2, t.t_bits, t.t_data
    FROM generate_series(0, pg_relation_size(r) / 8192 - 1) b,
         heap_page_items(get_raw_page(r::text, b::int)) t
   WHERE t.lp_flags = 1 $$;
SELECT count(*) AS rows,
       count(*) FILTER (WHERE (s.hoff, s.mask, s.mask2, s.bits, s.data)
                              IS DISTINCT FROM (m.hoff, m.mask, m.mask2, m.bits, m.data)) AS differing,
       count(DISTINCT s.hoff) AS header_lengths
  FROM pg_temp.am_tuples('am_w') s FULL JOIN pg_temp.am_tuples('am_w_model') m USING (n);
SELECT streamwm.drop_stream('am_w');
DROP TABLE am_w_model;
DROP EXTENSION pageinspect;
