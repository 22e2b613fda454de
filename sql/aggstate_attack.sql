-- Attacks by ordinary roles on running aggregates in pieces (src/aggstate.c:
-- streamwm_internal.partial, merge and combine, callable by anyone) and on the pane
-- plan's state (src/pane.c: the pane table its query's owner owns).  Each
-- ends in a clear error or the aggregate's own result: never a crash, a
-- state read as another's, or an effect on another role's query.
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
SET extra_float_digits = 0;
-- streams here are stepped by the tests themselves (streamwm.process(now => ...)): no background worker steps in
DO $$BEGIN EXECUTE format('ALTER DATABASE %I SET streamwm.enabled = off', current_database()); END$$;
CREATE EXTENSION IF NOT EXISTS streamwm;

CREATE ROLE regress_swx_alice;
CREATE ROLE regress_swx_bob;
GRANT CREATE ON SCHEMA public TO regress_swx_alice, regress_swx_bob;

SET ROLE regress_swx_alice;

-- 1. aggregates that cannot run in pieces, and what is no aggregate
SELECT streamwm_internal.partial('int4pl(int4,int4)'::regprocedure, 1, 2);
SELECT streamwm_internal.partial('percentile_disc(float8,anyelement)'::regprocedure, 0.5::float8, 1);
SELECT streamwm_internal.partial('max(anyarray)'::regprocedure, ARRAY[1]);
SELECT streamwm_internal.partial('array_agg(anyelement)'::regprocedure, 1);
SELECT streamwm_internal.partial('string_agg(text,text)'::regprocedure, 'a'::text, ','::text);
SELECT streamwm_internal.merge('\x00'::bytea, 'int4pl(int4,int4)'::regprocedure);
SELECT streamwm_internal.combine('\x00'::bytea, 0::oid, NULL::int);
SELECT streamwm_internal.partial(NULL::oid, 1);
SELECT streamwm_internal.combine('\x00'::bytea, NULL::oid, NULL::int);

-- 2. arguments other than the aggregate's
SELECT streamwm_internal.partial('sum(int4)'::regprocedure, 1::int8);
SELECT streamwm_internal.partial('sum(int4)'::regprocedure, 'text');
SELECT streamwm_internal.partial('sum(int4)'::regprocedure, NULL);
SELECT streamwm_internal.partial('sum(int4)'::regprocedure, 1, 2);
SELECT streamwm_internal.partial('sum(int4)'::regprocedure);
SELECT streamwm_internal.partial('count()'::regprocedure, 1);
SELECT streamwm_internal.partial('sum(int4)'::regprocedure, VARIADIC ARRAY[1]);
SELECT streamwm_internal.partial('sum(int4)'::regprocedure, NULL::int4) IS NOT NULL AS null_state_has_header;

-- 3. a result type other than the aggregate's
SELECT streamwm_internal.combine(s, 'count()'::regprocedure, NULL::text)
  FROM (SELECT streamwm_internal.partial('count()'::regprocedure) AS s) x;
SELECT streamwm_internal.combine(s, 'sum(int4)'::regprocedure, NULL::int4)
  FROM (SELECT streamwm_internal.partial('sum(int4)'::regprocedure, 1) AS s) x;
SELECT streamwm_internal.combine(s, 'avg(int8)'::regprocedure, NULL::float8)
  FROM (SELECT streamwm_internal.partial('avg(int8)'::regprocedure, 1::int8) AS s) x;

-- 4. forged, truncated and patched states.  The one of old format is
-- numeric avg state with one digit at weight INT_MIN: read by
-- numeric_avg_deserialize it wrote 8 GB before its buffer and crashed the
-- server; no state is read now that this server did not write.
CREATE TABLE alice_states AS
SELECT streamwm_internal.partial('avg(numeric)'::regprocedure, n) AS avg_n,
       streamwm_internal.partial('sum(numeric)'::regprocedure, n) AS sum_n,
       streamwm_internal.partial('avg(int8)'::regprocedure, i) AS avg_i,
       streamwm_internal.partial('sum(int8)'::regprocedure, i) AS sum_i,
       streamwm_internal.partial('count()'::regprocedure) AS cnt
  FROM (VALUES (1.5, 1::int8), (2.5, 2)) t(n, i);
CREATE FUNCTION alice_avg(s bytea) RETURNS numeric LANGUAGE sql AS
  $$SELECT streamwm_internal.combine(x, 'avg(numeric)'::regprocedure, NULL::numeric) FROM (VALUES (s)) v(x)$$;
SELECT alice_avg(avg_n) AS honest FROM alice_states;
SELECT alice_avg('\x'::bytea);
SELECT alice_avg('\x00'::bytea);
SELECT alice_avg('\x0100000037080000e9080000000000000000000200000001800000000000000000000000000100000001000000000000000100000000000000000000000000000000000000000000000000000000'::bytea);
SELECT alice_avg(substr(avg_n, 1, 32) || '\x000000000000000200000001800000000000000000000000000100000001000000000000000100000000000000000000000000000000000000000000000000000000'::bytea) FROM alice_states;
SELECT alice_avg(overlay(avg_n PLACING '\x80000000' FROM 45)) FROM alice_states;  -- the weight of sumX
SELECT alice_avg(substr(avg_n, 1, 20)) FROM alice_states;
SELECT alice_avg(substr(avg_n, 1, 40)) FROM alice_states;
SELECT alice_avg(avg_n || '\xffffffff'::bytea) FROM alice_states;
SELECT alice_avg(overlay(avg_n PLACING '\x01000000' FROM 13)) FROM alice_states;  -- "a NULL state"
-- another aggregate's state, as is and with the header naming ours
SELECT alice_avg(sum_n) FROM alice_states;
SELECT alice_avg(overlay(sum_n PLACING substr(avg_n, 5, 4) FROM 5)) FROM alice_states;
SELECT streamwm_internal.combine(avg_i, 'sum(int8)'::regprocedure, NULL::numeric) FROM alice_states;
SELECT streamwm_internal.combine(overlay(avg_i PLACING substr(sum_i, 5, 4) FROM 5), 'sum(int8)'::regprocedure, NULL::numeric)
  FROM alice_states;
-- a by-value state whose header claims transtype internal
SELECT streamwm_internal.combine(overlay(cnt PLACING substr(avg_i, 9, 4) FROM 9), 'count()'::regprocedure, NULL::int8)
  FROM alice_states;
-- a patched by-value state is just another value (no MAC: nothing deserializes it)
SELECT streamwm_internal.merge(overlay(cnt PLACING '\x07' FROM 29), 'count()'::regprocedure) FROM alice_states;

-- 5. states combined equal the aggregate over all rows: groups stand for
-- panes, merge for a pane filled in two steps
CREATE TABLE alice_rows AS
SELECT i % 5 AS g, i AS v, i::int8 * 1000000007 AS i8, (i / 7.0)::numeric AS n, i / 3.0::float8 AS f,
       CASE WHEN i % 4 > 0 THEN 'w' || i END AS t, i % 3 > 0 AS b
  FROM generate_series(1, 60) i;
CREATE FUNCTION alice_same(agg regprocedure, direct anyelement, args text) RETURNS bool LANGUAGE plpgsql AS $$
DECLARE r bool;
BEGIN
  EXECUTE format('SELECT streamwm_internal.combine(s, %L::pg_catalog.regprocedure, NULL::%s) IS NOT DISTINCT FROM $1'
                 ' FROM (SELECT streamwm_internal.merge(s, %L::pg_catalog.regprocedure) AS s FROM ('
                 '   SELECT g, g2, streamwm_internal.partial(%L::pg_catalog.regprocedure%s) AS s'
                 '     FROM (SELECT *, v %% 2 AS g2 FROM alice_rows) r GROUP BY g, g2) p GROUP BY g) m',
                 agg, pg_typeof(direct), agg, agg, args) INTO r USING direct;
  RETURN r;
END $$;
SELECT alice_same('count()', (SELECT count(*) FROM alice_rows), '') AS count_star,
       alice_same('count("any")', (SELECT count(t) FROM alice_rows), ', t') AS count_t,
       alice_same('sum(int4)', (SELECT sum(v) FROM alice_rows), ', v') AS sum_int4,
       alice_same('sum(int8)', (SELECT sum(i8) FROM alice_rows), ', i8') AS sum_int8,
       alice_same('avg(int8)', (SELECT avg(i8) FROM alice_rows), ', i8') AS avg_int8,
       alice_same('avg(numeric)', (SELECT avg(n) FROM alice_rows), ', n') AS avg_numeric,
       alice_same('stddev(numeric)', (SELECT stddev(n) FROM alice_rows), ', n') AS stddev_numeric,
       alice_same('var_samp(int8)', (SELECT var_samp(i8) FROM alice_rows), ', i8') AS var_int8,
       alice_same('max(text)', (SELECT max(t) FROM alice_rows), ', t') AS max_text,
       alice_same('min(int4)', (SELECT min(v) FROM alice_rows), ', v') AS min_int4,
       alice_same('bool_and(bool)', (SELECT bool_and(b) FROM alice_rows), ', b') AS bool_and;
-- merge has no collatable argument: it combines under the states' collation
SELECT streamwm_internal.combine(s, 'max(text)'::regprocedure, NULL::text COLLATE "en-x-icu") AS icu_max,
       (SELECT max(t COLLATE "en-x-icu") FROM (VALUES ('a'), ('B'), ('b')) t(t)) AS direct
  FROM (SELECT streamwm_internal.merge(s, 'max(text)'::regprocedure) AS s FROM (
          SELECT p, streamwm_internal.partial('max(text)'::regprocedure, t COLLATE "en-x-icu") AS s
            FROM (VALUES (1, 'a'), (2, 'B'), (3, 'b')) t(p, t) GROUP BY p) x) y;
SELECT round(streamwm_internal.combine(s, 'stddev(float8)'::regprocedure, NULL::float8)::numeric, 9) =
       round((SELECT stddev(f) FROM alice_rows)::numeric, 9) AS stddev_float8
  FROM (SELECT streamwm_internal.partial('stddev(float8)'::regprocedure, f) AS s FROM alice_rows GROUP BY g) p;
-- FILTER, and groups whose every row it drops (no state) or whose state is NULL
SELECT streamwm_internal.combine(s, 'count("any")'::regprocedure, NULL::int8) AS count_filtered,
       (SELECT count(v) FILTER (WHERE g = 1) FROM alice_rows) AS direct
  FROM (SELECT streamwm_internal.partial('count("any")'::regprocedure, v) FILTER (WHERE g = 1) AS s FROM alice_rows GROUP BY g) p;
SELECT streamwm_internal.combine(s, 'max(int4)'::regprocedure, NULL::int4) AS max_of_nulls
  FROM (SELECT streamwm_internal.partial('max(int4)'::regprocedure, NULL::int4) AS s FROM alice_rows GROUP BY g) p;

-- 6. aggregates in SQL and PL/pgSQL: a non-strict combine function that
-- propagates NULL must not see a group without rows as a NULL state (it
-- used to: NULL instead of 2), a final function made STRICT later gets no
-- NULL extra argument (it used to be called: 2 instead of NULL), and a
-- combine function that fails or returns NULL is the aggregate's own
CREATE FUNCTION cnt_sf(int8, int) RETURNS int8 LANGUAGE sql AS 'SELECT $1 + 1';
CREATE FUNCTION cnt_cf(int8, int8) RETURNS int8 LANGUAGE sql AS 'SELECT $1 + $2';
CREATE AGGREGATE cnt(int) (SFUNC = cnt_sf, STYPE = int8, INITCOND = '0', COMBINEFUNC = cnt_cf);
SELECT (SELECT cnt(v) FILTER (WHERE v > 1) FROM (VALUES (1), (2), (2)) t(v)) AS direct,
       streamwm_internal.combine(s, 'cnt(int)'::regprocedure, NULL::int8) AS panes
  FROM (SELECT streamwm_internal.partial('cnt(int)'::regprocedure, v) FILTER (WHERE v > 1) AS s
          FROM (VALUES (1, 1), (2, 2), (3, 2)) t(p, v) GROUP BY p) x;
CREATE FUNCTION fx_final(int8, int) RETURNS int8 LANGUAGE sql AS 'SELECT coalesce($1, -1)';
CREATE AGGREGATE fx(int) (SFUNC = cnt_sf, STYPE = int8, INITCOND = '0', COMBINEFUNC = cnt_cf,
                          FINALFUNC = fx_final, FINALFUNC_EXTRA);
ALTER FUNCTION fx_final(int8, int) STRICT;
SELECT (SELECT fx(v) FROM (VALUES (1), (2)) t(v)) AS direct,
       streamwm_internal.combine(s, 'fx(int)'::regprocedure, NULL::int8) AS panes
  FROM (SELECT streamwm_internal.partial('fx(int)'::regprocedure, v) AS s FROM (VALUES (1), (2)) t(v)) x;
CREATE FUNCTION bad_cf(int8, int8) RETURNS int8 LANGUAGE plpgsql AS
  $$BEGIN IF $1 > 1 THEN RAISE EXCEPTION 'bad_cf refuses %', $1; END IF; RETURN NULL; END$$;
CREATE AGGREGATE bad(int) (SFUNC = cnt_sf, STYPE = int8, INITCOND = '0', COMBINEFUNC = bad_cf);
SELECT streamwm_internal.combine(s, 'bad(int)'::regprocedure, NULL::int8) AS null_combine
  FROM (SELECT streamwm_internal.partial('bad(int)'::regprocedure, v) AS s FROM (VALUES (1)) t(v)) x;
SELECT streamwm_internal.combine(s, 'bad(int)'::regprocedure, NULL::int8)
  FROM (SELECT streamwm_internal.partial('bad(int)'::regprocedure, v) AS s FROM (VALUES (1), (2)) t(v) GROUP BY v) x;
RESET ROLE;

-- 7. privileges, as nodeAgg.c checks them: the caller EXECUTE on the
-- aggregate, its owner on the support functions
SET ROLE regress_swx_bob;
CREATE FUNCTION bob_sf(int8, int) RETURNS int8 LANGUAGE sql AS 'SELECT $1 + $2';
CREATE FUNCTION bob_cf(int8, int8) RETURNS int8 LANGUAGE sql AS 'SELECT $1 + $2';
CREATE AGGREGATE bob_sum(int) (SFUNC = bob_sf, STYPE = int8, INITCOND = '0', COMBINEFUNC = bob_cf);
CREATE TABLE bob_states AS SELECT streamwm_internal.partial('bob_sum(int)'::regprocedure, 5) AS s;
GRANT SELECT ON bob_states TO regress_swx_alice;
REVOKE EXECUTE ON FUNCTION bob_sum(int) FROM PUBLIC;
SET ROLE regress_swx_alice;
SELECT streamwm_internal.partial('bob_sum(int)'::regprocedure, 1);
SELECT streamwm_internal.combine(s, 'bob_sum(int)'::regprocedure, NULL::int8) FROM bob_states;
SELECT streamwm_internal.merge(s, 'bob_sum(int)'::regprocedure) FROM bob_states;
SET ROLE regress_swx_bob;
GRANT EXECUTE ON FUNCTION bob_sum(int) TO PUBLIC;
REVOKE EXECUTE ON FUNCTION bob_cf(int8, int8) FROM PUBLIC, regress_swx_bob;
SET ROLE regress_swx_alice;
SELECT streamwm_internal.combine(s, 'bob_sum(int)'::regprocedure, NULL::int8) FROM bob_states;
SET ROLE regress_swx_bob;
GRANT EXECUTE ON FUNCTION bob_cf(int8, int8) TO PUBLIC;
SET ROLE regress_swx_alice;
SELECT streamwm_internal.combine(s, 'bob_sum(int)'::regprocedure, NULL::int8) AS bobs_state FROM bob_states;
RESET ROLE;

-- 8. through the engine: alice and bob run the same query over the same
-- rows; whatever alice does to her pane table ends in an error recorded
-- for her query or in a rebuild, and bob's query never notices
SET ROLE regress_swx_bob;
-- bob plants operators our statements would pick under a path with public
CREATE TABLE bob_log (who name, what text);
GRANT INSERT ON bob_log TO PUBLIC;
CREATE FUNCTION bob_eq(regclass, oid) RETURNS bool LANGUAGE plpgsql AS
  $$BEGIN INSERT INTO public.bob_log VALUES (current_user, 'regclass = oid'); RETURN $1::oid OPERATOR(pg_catalog.=) $2; END$$;
CREATE OPERATOR public.= (LEFTARG = regclass, RIGHTARG = oid, FUNCTION = bob_eq);
CREATE FUNCTION bob_gt(timestamptz, timestamptz) RETURNS bool LANGUAGE plpgsql AS
  $$BEGIN INSERT INTO public.bob_log VALUES (current_user, 'timestamptz > timestamptz'); RETURN $1 OPERATOR(pg_catalog.>) $2; END$$;
CREATE OPERATOR public.> (LEFTARG = timestamptz, RIGHTARG = timestamptz, FUNCTION = bob_gt);
CREATE FUNCTION bob_merge(bytea, bytea, oid) RETURNS bytea LANGUAGE plpgsql AS
  $$BEGIN INSERT INTO public.bob_log VALUES (current_user, 'merge'); RETURN $2; END$$;
CREATE AGGREGATE public.merge(bytea, oid) (SFUNC = bob_merge, STYPE = bytea);
SELECT streamwm.create_stream('bob_s', 'k int, v int', idle_timeout => '1 hour') IS NOT NULL AS created;
SELECT streamwm.create_query('bob_q', 'SELECT k, sum(v) AS s, avg(v::numeric) AS a, count(*) AS n FROM bob_s GROUP BY k',
                             hop => '1 s', size => '3 s') IS NOT NULL AS created;
SET ROLE regress_swx_alice;
SELECT streamwm.create_stream('alice_s', 'k int, v int', idle_timeout => '1 hour') IS NOT NULL AS created;
SELECT streamwm.create_query('alice_q', 'SELECT k, sum(v) AS s, avg(v::numeric) AS a, count(*) AS n FROM alice_s GROUP BY k',
                             hop => '1 s', size => '3 s') IS NOT NULL AS created;
SELECT query, plan FROM streamwm.queries WHERE query = 'alice_q';
RESET ROLE;

-- rows i/4 s apart: each step adds rows to panes of windows still open
CREATE PROCEDURE swx_round(lo int, hi int) LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN lo..hi LOOP
    PERFORM streamwm.ingest('alice_s', jsonb_build_object('k', i % 3, 'v', i), write_time => to_timestamp(i::float8 / 4));
    PERFORM streamwm.ingest('bob_s', jsonb_build_object('k', i % 3, 'v', i), write_time => to_timestamp(i::float8 / 4));
  END LOOP;
  COMMIT;     -- rows arrive when their transaction commits
  PERFORM streamwm.process('alice_s', now => to_timestamp(1000));
  PERFORM streamwm.process('bob_s', now => to_timestamp(1000));
END $$;
CREATE FUNCTION swx_state() RETURNS TABLE (query text, windows bigint, last_error text, differences bigint)
LANGUAGE sql AS $$
  SELECT q.query, q.windows_emitted, q.last_error,
         (SELECT count(*) FROM ((TABLE alice_q EXCEPT TABLE bob_q) UNION ALL (TABLE bob_q EXCEPT TABLE alice_q)) d)
    FROM streamwm.queries q WHERE q.query IN ('alice_q', 'bob_q') ORDER BY 1;
$$;
CALL swx_round(0, 19);
CALL swx_round(20, 23);
SELECT * FROM swx_state();

-- bob cannot touch alice's pane table
SET ROLE regress_swx_bob;
UPDATE alice_q_panes SET sw_a1 = NULL;
SET ROLE regress_swx_alice;
-- a forged state (the weight of avg's sum) and another aggregate's state
UPDATE alice_q_panes SET sw_a2 = overlay(sw_a2 PLACING '\x80000000' FROM 37);
RESET ROLE;
CALL swx_round(24, 27);
SELECT * FROM swx_state();
-- state that does not read back is a cache gone bad: the next step rebuilds it
SELECT streamwm.process('alice_s', now => to_timestamp(1000));
SELECT * FROM swx_state();
SET ROLE regress_swx_alice;
TRUNCATE alice_q_panes;
RESET ROLE;
CALL swx_round(28, 31);
SELECT * FROM swx_state();
SET ROLE regress_swx_alice;
UPDATE alice_q_panes SET sw_a1 = sw_a3;
RESET ROLE;
CALL swx_round(32, 35);
SELECT * FROM swx_state();
-- a trigger of alice's that forges what a step writes
SET ROLE regress_swx_alice;
TRUNCATE alice_q_panes;
CREATE FUNCTION alice_forge() RETURNS trigger LANGUAGE plpgsql AS
  $$BEGIN NEW.sw_a2 := overlay(NEW.sw_a2 PLACING '\x80000000' FROM 45); RETURN NEW; END$$;
CREATE TRIGGER alice_forge BEFORE INSERT ON alice_q_panes FOR EACH ROW EXECUTE FUNCTION alice_forge();
RESET ROLE;
CALL swx_round(36, 39);
CALL swx_round(40, 43);
SELECT * FROM swx_state();
SET ROLE regress_swx_alice;
DROP TRIGGER alice_forge ON alice_q_panes;
TRUNCATE alice_q_panes;
RESET ROLE;
CALL swx_round(44, 47);
SELECT * FROM swx_state();
-- another layout, name or persistence: rebuilt
SET ROLE regress_swx_alice;
ALTER TABLE alice_q_panes ALTER sw_a1 TYPE text;
RESET ROLE;
CALL swx_round(48, 51);
SELECT * FROM swx_state();
SET ROLE regress_swx_alice;
ALTER TABLE alice_q_panes DROP COLUMN sw_a3;
RESET ROLE;
CALL swx_round(52, 55);
SELECT * FROM swx_state();
SET ROLE regress_swx_alice;
ALTER TABLE alice_q_panes RENAME TO alice_renamed;
ALTER TABLE alice_renamed SET UNLOGGED;
RESET ROLE;
CALL swx_round(56, 59);
SELECT * FROM swx_state();
SELECT count(*) AS bobs_operators_ran FROM bob_log;
SELECT c.relname, c.relowner::regrole, c.relpersistence FROM streamwm.query_def d JOIN pg_class c ON c.oid = d.pane_table
 WHERE d.name IN ('alice_q', 'bob_q')
 ORDER BY 1;

-- 9. a pane that gets rows in two steps is merged under the aggregate
-- call's collation (the step failed: no collation for string comparison)
SELECT streamwm.create_stream('swx_t', 'k int, t text COLLATE "C", tu text COLLATE "en-x-icu"', idle_timeout => '1 hour') IS NOT NULL AS created;
SELECT streamwm.create_query('swx_tq', 'SELECT k, max(t) AS mt, max(tu) AS mu, min(tu) AS lu FROM swx_t GROUP BY k',
                             hop => '1 s', size => '4 s') IS NOT NULL AS created;
SELECT streamwm.ingest('swx_t', '{"k": 1, "t": "b", "tu": "b"}', write_time => to_timestamp(1));
SELECT streamwm.process('swx_t', now => to_timestamp(1000));
SELECT streamwm.ingest('swx_t', '[{"k": 1, "t": "a", "tu": "B"}, {"k": 1, "t": "B", "tu": "a"}]', write_time => to_timestamp(1.5));
SELECT streamwm.process('swx_t', now => to_timestamp(1000));
SELECT query, last_error FROM streamwm.queries WHERE query = 'swx_tq';
SELECT streamwm.ingest('swx_t', '{"k": 1, "t": "z"}', write_time => to_timestamp(30));
SELECT streamwm.process('swx_t', now => to_timestamp(1000));
SELECT window_start, k, mt, mu, lu FROM swx_tq ORDER BY 1;

SELECT streamwm.drop_stream(s, cascade => true) FROM unnest(ARRAY['alice_s', 'bob_s', 'swx_t']) s;
DROP TABLE alice_q, bob_q, swx_tq;
DROP PROCEDURE swx_round(int, int);
DROP FUNCTION swx_state();
DROP OWNED BY regress_swx_alice, regress_swx_bob;
DROP ROLE regress_swx_alice;
DROP ROLE regress_swx_bob;
