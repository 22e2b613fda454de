-- A distributed stream with a partition_key: Citus routes a row by its
-- partition, so an INSERT that gives none gets it from the key before
-- routing (citus_route.c), on the coordinator and on a worker, in every
-- form (one row, a VALUES list, INSERT ... SELECT, prepared, ingest(),
-- ingest_lines()). Each row lands in the partition a local stream with the
-- same key gives it (the twin below is written by the same statements),
-- COPY too (through a temporary table). A value the key needs that is
-- volatile is refused; a hostile function planted in public changes
-- nothing.
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
SET client_min_messages = warning;
SELECT streamwm.create_stream('pk', 'k int, v text', partitions => 4,
                              partition_key => 'lower(v) || (k % 7)::text', distributed => true);
SELECT streamwm.create_stream('pk_local', 'k int, v text', partitions => 4,
                              partition_key => 'lower(v) || (k % 7)::text');
SELECT streamwm.create_query('pkq', 'SELECT sw_partition AS p, count(*) AS n, sum(k) AS s FROM pk GROUP BY sw_partition',
                             hop => '10 s', size => '10 s');
-- keys that routing cannot compute are refused at create_stream
SELECT streamwm.create_stream('pk_bad', 'k int', partition_key => 'pk_bad', distributed => true);
SELECT streamwm.create_stream('pk_bad', 'k int', partition_key => 'sw_partition + k', distributed => true);
SELECT to_regclass('pk_bad') AS not_made;
-- the same statements into both streams
CREATE FUNCTION pk_both(sql text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format(sql, 'pk');
    EXECUTE format(sql, 'pk_local');
END $$;
SELECT pk_both($$INSERT INTO %I (k, v, sw_write_time) VALUES (1, 'A', '1970-01-01 00:00:01Z')$$);
SELECT pk_both($$INSERT INTO %I (k, v, sw_write_time) VALUES (2, 'b', '1970-01-01 00:00:01Z'),
                  (3, 'C', '1970-01-01 00:00:02Z'), (4, DEFAULT, '1970-01-01 00:00:02Z')$$);
SELECT pk_both($$INSERT INTO %I (v, k, sw_write_time)
                 SELECT 'v' || mod(x, 3), x, '1970-01-01 00:00:03Z' FROM generate_series(5, 40) x$$);
SELECT pk_both($$INSERT INTO %I (k, v, sw_write_time)
                 SELECT 41, 'u', '1970-01-01 00:00:04Z'::timestamptz UNION ALL SELECT 42, 'U', '1970-01-01 00:00:04Z'$$);
SELECT pk_both($$WITH x AS (SELECT 66 AS k, 'with' AS v)
                 INSERT INTO %I (k, v, sw_write_time) SELECT k, v, '1970-01-01 00:00:04Z' FROM x$$);
SELECT pk_both($$SELECT streamwm.ingest(%L, '[{"k": 43, "v": "i"}, {"k": 44, "v": "I"}, {"k": 45}]',
                                        write_time => '1970-01-01 00:00:05Z')$$);
SELECT pk_both($$SELECT streamwm.ingest_lines(%L, E'{"k": 46, "v": "l"}\n{"k": 47, "v": "L"}',
                                              write_time => '1970-01-01 00:00:05Z')$$);
PREPARE pk_one(int, text) AS INSERT INTO pk (k, v, sw_write_time) VALUES ($1, $2, '1970-01-01 00:00:06Z');
PREPARE pk_one_local(int, text) AS INSERT INTO pk_local (k, v, sw_write_time) VALUES ($1, $2, '1970-01-01 00:00:06Z');
-- more than five executions: the generic plan too
EXECUTE pk_one(48, 'p'); EXECUTE pk_one(49, 'p'); EXECUTE pk_one(50, 'p'); EXECUTE pk_one(51, 'p');
EXECUTE pk_one(52, 'p'); EXECUTE pk_one(53, 'p'); EXECUTE pk_one(54, 'p'); EXECUTE pk_one(55, 'p');
EXECUTE pk_one_local(48, 'p'); EXECUTE pk_one_local(49, 'p'); EXECUTE pk_one_local(50, 'p'); EXECUTE pk_one_local(51, 'p');
EXECUTE pk_one_local(52, 'p'); EXECUTE pk_one_local(53, 'p'); EXECUTE pk_one_local(54, 'p'); EXECUTE pk_one_local(55, 'p');
-- a partition given wins over the key
INSERT INTO pk (k, v, sw_partition, sw_write_time) VALUES (56, 'x', 3, '1970-01-01 00:00:07Z');
INSERT INTO pk_local (k, v, sw_partition, sw_write_time) VALUES (56, 'x', 3, '1970-01-01 00:00:07Z');
-- spellings Citus plans on its own: INSERT ... SELECT from a distributed
-- table with an aggregate, ORDER BY and LIMIT, a join with a local table;
-- an INSERT in the WITH of another statement; a NULL sw_partition (the
-- key's, as on a local stream), also from ingest() and an empty object
CREATE TABLE pk_src (k int, v text);
SELECT create_distributed_table('pk_src', 'k');
INSERT INTO pk_src SELECT g, 's' FROM generate_series(100, 120) g;
CREATE TABLE pk_loc (k int);
INSERT INTO pk_loc SELECT generate_series(100, 105);
SELECT pk_both($$INSERT INTO %I (k, v, sw_write_time) SELECT max(k), 'agg', '1970-01-01 00:00:07Z' FROM pk_src$$);
SELECT pk_both($$INSERT INTO %I (k, v, sw_write_time)
                 SELECT k, 'lim', '1970-01-01 00:00:07Z' FROM pk_src ORDER BY k LIMIT 3$$);
SELECT pk_both($$INSERT INTO %I (k, v, sw_write_time)
                 SELECT s.k, 'join', '1970-01-01 00:00:07Z' FROM pk_src s JOIN pk_loc l USING (k) WHERE s.k > 103$$);
SELECT pk_both($$WITH x AS (INSERT INTO %I (k, v, sw_write_time)
                            VALUES (130, 'cte', '1970-01-01 00:00:07Z'), (131, 'cte', '1970-01-01 00:00:07Z')
                            RETURNING k)
                 SELECT count(*) FROM x$$);
SELECT pk_both($$INSERT INTO %I (k, v, sw_partition, sw_write_time) VALUES (132, 'null', NULL, '1970-01-01 00:00:07Z')$$);
SELECT pk_both($$SELECT streamwm.ingest(%L, '[{"k": 133, "v": "n", "sw_partition": null}, {}]',
                                        write_time => '1970-01-01 00:00:07Z')$$);
-- a BEGIN ATOMIC body is analyzed without streamwm: refused, never given another partition
CREATE FUNCTION pk_atomic(int) RETURNS void LANGUAGE sql
BEGIN ATOMIC INSERT INTO pk (k, v) VALUES ($1, 'atomic'); END;
SELECT pk_atomic(134);
DROP FUNCTION pk_atomic(int);
-- a key whose function inserts into its own stream: the nested INSERT's
-- partition is computed while the outer one's key is being evaluated
CREATE FUNCTION pk_self(k int, s text) RETURNS int LANGUAGE plpgsql AS $$
BEGIN
    IF k > 0 THEN
        EXECUTE format('INSERT INTO %I (k) VALUES ($1)', s) USING k - 1;
    END IF;
    RETURN k;
END $$;
SELECT streamwm.create_stream('pks', 'k int', partitions => 4, partition_key => 'pk_self(k, ''pks'')',
                              distributed => true);
SELECT streamwm.create_stream('pks_local', 'k int', partitions => 4,
                              partition_key => 'pk_self(k, ''pks_local'')');
INSERT INTO pks (k) VALUES (3), (5);
INSERT INTO pks_local (k) VALUES (3), (5);
SELECT count(*) AS rows, count(*) FILTER (WHERE (k, sw_partition) NOT IN (SELECT k, sw_partition FROM pks_local))
       AS differ FROM pks;
SELECT streamwm.drop_stream('pks');
SELECT streamwm.drop_stream('pks_local');
DROP FUNCTION pk_self(int, text);
-- a co-located INSERT ... SELECT that gives the partition of another stream
-- (never NULL) is left as it is: Citus still runs it on the workers
SELECT streamwm.create_stream('pk_a', 'k int', partitions => 4, distributed => true);
SELECT streamwm.create_stream('pk_b', 'k int', partitions => 4, distributed => true);
SELECT update_distributed_table_colocation('pk_b', colocate_with => 'pk_a');
SELECT update_distributed_table_colocation('pk_b_sw_log', colocate_with => 'pk_a');
INSERT INTO pk_a (k, sw_partition) SELECT g, g % 4 FROM generate_series(1, 8) g;
CREATE FUNCTION pk_plan(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE l text; r text := '';
BEGIN
    FOR l IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q LOOP r := r || l || E'\n'; END LOOP;
    RETURN r;
END $$;
SELECT pk_plan('INSERT INTO pk_b (k, sw_partition) SELECT k, sw_partition FROM pk_a')
       NOT LIKE '%INSERT/SELECT method%' AS pushed_down;
INSERT INTO pk_b (k, sw_partition) SELECT k, sw_partition FROM pk_a;
SELECT count(*) AS differ FROM (SELECT k, sw_partition FROM pk_a EXCEPT SELECT k, sw_partition FROM pk_b) d;
DROP FUNCTION pk_plan(text);
SELECT streamwm.drop_stream('pk_b');
SELECT streamwm.drop_stream('pk_a');
-- a COPY by key whose WHERE names the stream with its schema
COPY public.pk (k, v, sw_write_time) FROM STDIN WHERE public.pk.k > 0 AND pk.k < 1000;
136	where	1970-01-01 00:00:07Z
0	skipped	1970-01-01 00:00:07Z
\.
COPY pk_local (k, v, sw_write_time) FROM STDIN;
136	where	1970-01-01 00:00:07Z
\.
-- a COPY by key while the session has a temporary table of the stream's name
CREATE TEMPORARY TABLE pk (a int);
COPY public.pk (k, v, sw_write_time) FROM STDIN WHERE public.pk.k > 0;
135	temp	1970-01-01 00:00:07Z
\.
DROP TABLE pg_temp.pk;
COPY pk_local (k, v, sw_write_time) FROM STDIN;
135	temp	1970-01-01 00:00:07Z
\.
-- the key's collation, not the value's: a nondeterministic one puts
-- equal keys into one partition, from VALUES, COPY and a COLLATE clause
CREATE COLLATION pk_ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
SELECT streamwm.create_stream('pkc', 't text COLLATE pk_ci', partitions => 8, partition_key => 't',
                              distributed => true);
SELECT streamwm.create_stream('pkc_local', 't text COLLATE pk_ci', partitions => 8, partition_key => 't');
INSERT INTO pkc (t) VALUES ('Abc'), ('aBC');
INSERT INTO pkc_local (t) VALUES ('Abc'), ('aBC');
INSERT INTO pkc (t) VALUES ('ABC' COLLATE "C");
INSERT INTO pkc_local (t) VALUES ('ABC' COLLATE "C");
COPY pkc (t) FROM STDIN;
abc
\.
COPY pkc_local (t) FROM STDIN;
abc
\.
-- ... and from a SELECT that Citus runs on the workers (repartition): the
-- key is evaluated there on the row, never with collations derived again
-- from the statement's text (Citus drops COLLATE "default" and nested
-- ones): keys under Turkish rules, a stream column of the default
-- collation fed from a Turkish or nondeterministic source, two columns of
-- different collations concatenated
CREATE TABLE pkc_src (k int, t text, tr text COLLATE "tr-x-icu", ci text COLLATE pk_ci);
SELECT create_distributed_table('pkc_src', 'k');
INSERT INTO pkc_src
SELECT g, CASE WHEN g % 2 = 0 THEN 'ABC' ELSE 'aBc' END || (g % 3),
       CASE g % 3 WHEN 0 THEN 'i' WHEN 1 THEN 'xi' ELSE 'I' END, CASE g % 2 WHEN 0 THEN 'abc' ELSE 'ABC' END
  FROM generate_series(1, 24) g;
INSERT INTO pkc (t) SELECT t FROM pkc_src;
INSERT INTO pkc_local (t) SELECT t FROM pkc_src;
-- (a procedure: a distributed stream is written in a transaction after the
-- one that created it, as README says)
CREATE PROCEDURE pk_twins(cols text, key text, sel text, INOUT differ bigint DEFAULT NULL)
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM streamwm.create_stream('pkx', cols, partitions => 16, partition_key => key, distributed => true);
    PERFORM streamwm.create_stream('pkx_local', cols, partitions => 16, partition_key => key);
    COMMIT;
    EXECUTE format(sel, 'pkx');
    EXECUTE format(sel, 'pkx_local');
    SELECT count(*) INTO differ FROM (
      (SELECT k, sw_partition FROM pkx EXCEPT SELECT k, sw_partition FROM pkx_local)
      UNION ALL
      (SELECT k, sw_partition FROM pkx_local EXCEPT SELECT k, sw_partition FROM pkx)) d;
    COMMIT;
    PERFORM streamwm.drop_stream('pkx');
    PERFORM streamwm.drop_stream('pkx_local');
END $$;
CALL pk_twins('k int, v text COLLATE "tr-x-icu"', 'upper(v)',
                'INSERT INTO %I (k, v) SELECT k, t FROM pkc_src');
CALL pk_twins('k int, v text', 'upper(v)', 'INSERT INTO %I (k, v) SELECT k, tr FROM pkc_src');
CALL pk_twins('k int, v text', 'v', 'INSERT INTO %I (k, v) SELECT k, ci FROM pkc_src');
CALL pk_twins('k int, v text COLLATE pk_ci', 'v', 'INSERT INTO %I (k, v) SELECT k, tr FROM pkc_src');
CALL pk_twins('k int, a text, b text COLLATE pk_ci', 'a || b',
                'INSERT INTO %I (k, a, b) SELECT k, tr, ci FROM pkc_src');
CALL pk_twins('k int, v text COLLATE "tr-x-icu"', 'upper(v) COLLATE pk_ci',
                'INSERT INTO %I (k, v) SELECT k, t COLLATE "C" FROM pkc_src');
-- a column the key does not use, of a NOT NULL domain: only the key's
-- columns travel to the workers
CREATE DOMAIN pk_nn AS int NOT NULL;
CALL pk_twins('k int, d pk_nn', 'k', 'INSERT INTO %I (k, d) SELECT k, k FROM pkc_src');
DROP DOMAIN pk_nn;
DROP PROCEDURE pk_twins(text, text, text, bigint);
DROP TABLE pkc_src;
SELECT t, sw_partition FROM pkc WHERE length(t) = 3 ORDER BY t COLLATE "C";
SELECT count(*) AS differ FROM (
  (SELECT t::text, sw_partition FROM pkc EXCEPT SELECT t::text, sw_partition FROM pkc_local)
  UNION ALL
  (SELECT t::text, sw_partition FROM pkc_local EXCEPT SELECT t::text, sw_partition FROM pkc)) d;
SELECT streamwm.drop_stream('pkc');
SELECT streamwm.drop_stream('pkc_local');
-- on a worker, and by an ordinary role, with a hostile function in public
-- that a name left unqualified would find
CREATE ROLE regress_pk_writer LOGIN;
GRANT USAGE ON SCHEMA streamwm TO regress_pk_writer;
GRANT INSERT, SELECT ON pk, pk_local TO regress_pk_writer;
CREATE TABLE pk_hostile_calls (n int);
GRANT INSERT ON pk_hostile_calls TO PUBLIC;
CREATE FUNCTION public._key_partition(regclass, record) RETURNS int
    LANGUAGE plpgsql AS $$ BEGIN INSERT INTO public.pk_hostile_calls VALUES (1); RETURN 0; END $$;
CREATE FUNCTION public.lower(text) RETURNS text
    LANGUAGE sql AS $$ INSERT INTO public.pk_hostile_calls VALUES (2); SELECT 'x' $$;
\getenv w1 CITUS_W1
\getenv coordinator CITUS_COORDINATOR
\connect - regress_pk_writer - :w1
SET search_path = public, streamwm, streamwm_internal, pg_catalog;
INSERT INTO pk (k, v, sw_write_time) VALUES (57, 'w', '1970-01-01 00:00:08Z'), (58, 'W', '1970-01-01 00:00:08Z');
INSERT INTO pk (k, v, sw_write_time) SELECT x, 'w', '1970-01-01 00:00:08Z' FROM generate_series(59, 62) x;
SELECT streamwm.ingest('pk', '{"k": 63, "v": "wi"}', write_time => '1970-01-01 00:00:08Z');
-- a COPY without sw_partition: through a temporary table and an INSERT
COPY pk (v, k, sw_write_time) FROM STDIN WITH (FORMAT csv) WHERE k < 70;
"co,py",68,1970-01-01 00:00:09Z
COPY,69,1970-01-01 00:00:09Z
skipped,70,1970-01-01 00:00:09Z
\.
-- refused, and nothing stored: a volatile value the key uses, a bad value
-- in a COPY (named as the user wrote it), a column the stream lacks
\set VERBOSITY terse
INSERT INTO pk (k, v) VALUES (64, random()::text);
COPY pk (k, v) FROM STDIN;
67	refused
x	refused
\.
COPY pk (k, nope) FROM STDIN;
67	refused
\.
COPY pk (k, v) FROM STDIN WHERE nosuch.k > 0;
67	refused
\.
\set VERBOSITY default
SELECT count(*) AS temporary_tables FROM pg_class WHERE relpersistence = 't';
-- a volatile value the key does not use, and a COPY that gives the partition
INSERT INTO pk (k, v, sw_write_time) VALUES (64, 'z', '1970-01-01 00:00:09Z'::timestamptz + 0 * random() * interval '1 s');
COPY pk (k, v, sw_partition, sw_write_time) FROM STDIN;
65	c	1	1970-01-01 00:00:09Z
\.
\connect - postgres - :coordinator
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
SET client_min_messages = warning;
SELECT count(*) AS hostile_calls FROM pk_hostile_calls;
-- the worker's rows into the local twin
INSERT INTO pk_local (k, v, sw_write_time) VALUES (57, 'w', '1970-01-01 00:00:08Z'), (58, 'W', '1970-01-01 00:00:08Z');
INSERT INTO pk_local (k, v, sw_write_time) SELECT x, 'w', '1970-01-01 00:00:08Z' FROM generate_series(59, 62) x;
SELECT streamwm.ingest('pk_local', '{"k": 63, "v": "wi"}', write_time => '1970-01-01 00:00:08Z');
INSERT INTO pk_local (k, v, sw_write_time) VALUES (64, 'z', '1970-01-01 00:00:09Z');
INSERT INTO pk_local (k, v, sw_partition, sw_write_time) VALUES (65, 'c', 1, '1970-01-01 00:00:09Z');
COPY pk_local (v, k, sw_write_time) FROM STDIN WITH (FORMAT csv) WHERE k < 70;
"co,py",68,1970-01-01 00:00:09Z
COPY,69,1970-01-01 00:00:09Z
skipped,70,1970-01-01 00:00:09Z
\.
-- the same rows in the same partitions, spread over all four
SELECT count(*) AS rows, count(DISTINCT sw_partition) AS partitions, count(*) FILTER (WHERE k = 67) AS refused FROM pk;
SELECT count(*) AS differ FROM (
  (SELECT k, v, sw_partition, sw_write_time FROM pk EXCEPT SELECT k, v, sw_partition, sw_write_time FROM pk_local)
  UNION ALL
  (SELECT k, v, sw_partition, sw_write_time FROM pk_local EXCEPT SELECT k, v, sw_partition, sw_write_time FROM pk)) d;
-- steps read them; a later row in every partition closes [0 s, 10 s)
INSERT INTO pk (k, v, sw_partition, sw_write_time) SELECT 0, 'end', p, '1970-01-01 00:00:30Z' FROM generate_series(0, 3) p;
SELECT streamwm.process('pk');
SELECT p, n, s FROM pkq ORDER BY p;
SELECT count(*) AS differ FROM (
  (SELECT p, n, s FROM pkq
   EXCEPT SELECT sw_partition, count(*), sum(k) FROM pk_local
           WHERE sw_event_time < '1970-01-01 00:00:10Z' GROUP BY 1)
  UNION ALL
  (SELECT sw_partition, count(*), sum(k) FROM pk_local
    WHERE sw_event_time < '1970-01-01 00:00:10Z' GROUP BY 1
   EXCEPT SELECT p, n, s FROM pkq)) d;
SELECT stream, events, late_events FROM streamwm.streams WHERE stream = 'pk'::regclass;
DROP FUNCTION public._key_partition(regclass, record);
DROP FUNCTION public.lower(text);
DROP TABLE pk_hostile_calls;
DROP FUNCTION pk_both(text);
DROP TABLE pk_src, pk_loc;
DROP COLLATION pk_ci;
SELECT streamwm.drop_stream('pk', cascade => true);
DROP TABLE pkq;
SELECT streamwm.drop_stream('pk_local');
REVOKE USAGE ON SCHEMA streamwm FROM regress_pk_writer;
DROP ROLE regress_pk_writer;
