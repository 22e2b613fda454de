-- SPEC sections 10 and 11: streamwm.alter_query(name, query) gives a query a
-- new text from its next window that has not closed, keeping its position
-- (closed_until, offsets), its result table and its counters: no event is
-- lost or counted twice across the change.
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
-- streams here are stepped by the tests themselves (streamwm.process(now => ...)): no background worker steps in
DO $$BEGIN EXECUTE format('ALTER DATABASE %I SET streamwm.enabled = off', current_database()); END$$;
CREATE EXTENSION IF NOT EXISTS streamwm;

-- 1. A change in the middle of a stream, for both plans and across them.
SELECT streamwm.create_stream('aq', 'k int, v int', partitions => 2, idle_timeout => '1 hour');
SELECT streamwm.create_query('aq_pane', 'SELECT k, count(*) AS n, sum(v) AS s FROM aq GROUP BY k',
                             hop => '5 s', size => '15 s');
SELECT streamwm.create_query('aq_gen', $$SELECT k, count(*) AS n, string_agg(v::text, ',' ORDER BY v) AS s
                                          FROM aq GROUP BY k$$,
                             hop => '5 s', size => '15 s');
SELECT streamwm.create_query('aq_p2g', 'SELECT k, count(*) AS n, sum(v) AS s FROM aq GROUP BY k',
                             hop => '5 s', size => '15 s');
SELECT streamwm.create_query('aq_g2p', $$SELECT k, count(*) AS n, sum(v) AS s, string_agg(v::text, ',' ORDER BY v) AS l
                                          FROM aq GROUP BY k$$,
                             hop => '5 s', size => '15 s');
SELECT query, plan FROM streamwm.queries WHERE stream = 'aq'::regclass ORDER BY 1;

-- 200 events, 0.7 s apart, alternating partitions; ten batches of 20, each
-- committed, then processed
CREATE TABLE aq_src AS
SELECT i, i % 2 AS p, i % 3 AS k, i AS v, to_timestamp(i * 0.7) AS t FROM generate_series(1, 200) i;
CREATE PROCEDURE feed(b int) LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO aq (sw_partition, sw_write_time, k, v)
    SELECT p, t, k, v FROM aq_src WHERE i > b * 20 AND i <= (b + 1) * 20 ORDER BY i;
    COMMIT;
    PERFORM streamwm.process('aq');
END $$;
CALL feed(0);
CALL feed(1);
CALL feed(2);
CALL feed(3);
CALL feed(4);

-- where the queries stand when their texts change
CREATE TABLE before_change AS
SELECT query, closed_until, windows_emitted, rows_upserted FROM streamwm.queries WHERE stream = 'aq'::regclass;
SELECT query, closed_until, windows_emitted FROM before_change ORDER BY 1;
-- the open windows (starting at 55, 60 and 65 s) already hold rows the
-- queries read, and the pane plan's partials of them
SELECT count(*) AS rows_read_in_open_windows FROM aq_src
 WHERE i <= 100 AND t >= '1970-01-01 00:00:55+00';
SELECT count(*) AS panes_kept FROM aq_pane_panes;

-- new texts: a filter, another separator and order, a new output column
SELECT streamwm.alter_query('aq_pane',
    'SELECT k, count(*) AS n, sum(v) AS s, max(v) AS m FROM aq WHERE v % 4 <> 0 GROUP BY k');
SELECT streamwm.alter_query('aq_gen',
    $$SELECT k, count(*) AS n, string_agg(v::text, ';' ORDER BY v DESC) AS s FROM aq WHERE v % 4 <> 0 GROUP BY k$$);
SELECT streamwm.alter_query('aq_p2g',
    $$SELECT k, count(*) AS n, sum(v) AS s, string_agg(v::text, ',' ORDER BY v) AS l
        FROM aq WHERE v % 4 <> 0 GROUP BY k$$);
SELECT streamwm.alter_query('aq_g2p',
    'SELECT k, count(*) AS n, sum(v) AS s FROM aq WHERE v % 4 <> 0 GROUP BY k');

-- position, result table and counters kept; the plan decided again
SELECT q.query, q.plan, q.closed_until = b.closed_until AS same_position,
       q.windows_emitted = b.windows_emitted AND q.rows_upserted = b.rows_upserted AS same_counters,
       q.result_table, q.definition
  FROM streamwm.queries q JOIN before_change b USING (query) ORDER BY 1;
SELECT name, pane_table IS NOT NULL AS has_panes, pane_stamp IS NULL AS panes_to_rebuild,
       folded_offsets IS NULL AS refold
  FROM streamwm.query_def WHERE stream = 'aq'::regclass ORDER BY 1;
SELECT count(*) AS pane_tables FROM pg_class WHERE relname LIKE 'aq\_%\_panes';
-- new output columns were added to the result tables (NULL in earlier windows)
SELECT attrelid::regclass AS result_table, string_agg(attname || ' ' || format_type(atttypid, atttypmod), ', ' ORDER BY attnum)
  FROM pg_attribute WHERE attrelid IN ('aq_pane'::regclass, 'aq_gen'::regclass, 'aq_p2g'::regclass, 'aq_g2p'::regclass)
   AND attnum > 0 AND NOT attisdropped GROUP BY attrelid ORDER BY 1::text;

CALL feed(5);
CALL feed(6);
CALL feed(7);
CALL feed(8);
CALL feed(9);
-- a last row in each partition closes every window of the data
INSERT INTO aq (sw_partition, sw_write_time, k, v) VALUES (0, to_timestamp(1000), 0, 0), (1, to_timestamp(1000), 0, 0);
SELECT streamwm.process('aq');
SELECT q.query, q.last_error, q.windows_emitted - b.windows_emitted AS windows_after_change
  FROM streamwm.queries q JOIN before_change b USING (query) ORDER BY 1;

-- The model, in plain SQL: a window that closed before the change (end <=
-- closed_until then) has the old text's rows, every later one the new
-- text's over ALL its rows, those read before the change included.
CREATE FUNCTION model_starts(t timestamptz) RETURNS SETOF timestamptz
LANGUAGE sql IMMUTABLE AS $$
    SELECT to_timestamp(0) + make_interval(secs => (floor(extract(epoch FROM t) / 5) - j) * 5)
      FROM generate_series(0, 2) j
$$;
CREATE VIEW src_windows AS
SELECT ws AS window_start, ws + interval '15 s' AS window_end, s.*,
       ws + interval '15 s' <= (SELECT closed_until FROM before_change WHERE query = 'aq_pane') AS old_text
  FROM aq_src s, model_starts(s.t) ws
 WHERE ws + interval '15 s' <= to_timestamp(1000);
-- the switch point is the same for all four queries
SELECT count(DISTINCT closed_until) AS switch_points FROM before_change;
CREATE TABLE model AS
SELECT window_start, window_end, k, count(*) AS n, sum(v)::text AS s,
       CASE WHEN old_text THEN NULL ELSE max(v) END AS m, 'aq_pane' AS q
  FROM src_windows WHERE old_text OR v % 4 <> 0 GROUP BY 1, 2, 3, old_text
UNION ALL
SELECT window_start, window_end, k, count(*),
       CASE WHEN old_text THEN string_agg(v::text, ',' ORDER BY v)
            ELSE string_agg(v::text, ';' ORDER BY v DESC) END, NULL, 'aq_gen'
  FROM src_windows WHERE old_text OR v % 4 <> 0 GROUP BY 1, 2, 3, old_text
UNION ALL
SELECT window_start, window_end, k, count(*), sum(v)::text, NULL, 'aq_p2g'
  FROM src_windows WHERE old_text OR v % 4 <> 0 GROUP BY 1, 2, 3, old_text
UNION ALL
SELECT window_start, window_end, k, count(*), sum(v)::text, NULL, 'aq_g2p'
  FROM src_windows WHERE old_text OR v % 4 <> 0 GROUP BY 1, 2, 3, old_text;
CREATE VIEW got AS
SELECT window_start, window_end, k, n, s::text, m, 'aq_pane' AS q FROM aq_pane
UNION ALL SELECT window_start, window_end, k, n, s, NULL, 'aq_gen' FROM aq_gen
UNION ALL SELECT window_start, window_end, k, n, s::text, NULL, 'aq_p2g' FROM aq_p2g
UNION ALL SELECT window_start, window_end, k, n, s::text, NULL, 'aq_g2p' FROM aq_g2p;
SELECT q, count(*) AS windows_x_groups,
       count(*) FILTER (WHERE NOT old_text) AS with_new_text
  FROM (SELECT *, window_end <= (SELECT closed_until FROM before_change WHERE query = 'aq_pane') AS old_text FROM model) m
 GROUP BY q ORDER BY q;
SELECT (SELECT count(*) FROM (SELECT * FROM model EXCEPT ALL SELECT * FROM got) x) AS missing,
       (SELECT count(*) FROM (SELECT * FROM got EXCEPT ALL SELECT * FROM model) x) AS extra;
-- the new columns: l kept its old values and is NULL in new windows; the
-- column aq_g2p no longer outputs (l) is NULL from the change on
SELECT count(*) FILTER (WHERE l IS NOT NULL) AS old_windows_with_l,
       count(*) FILTER (WHERE l IS NOT NULL AND window_end > (SELECT closed_until FROM before_change WHERE query = 'aq_g2p')) AS new_windows_with_l
  FROM aq_g2p;
SELECT count(*) FILTER (WHERE window_end > (SELECT closed_until FROM before_change WHERE query = 'aq_p2g')
                          AND l IS DISTINCT FROM (SELECT string_agg(v::text, ',' ORDER BY v) FROM aq_src
                                                   WHERE t >= window_start AND t < window_end
                                                     AND aq_src.k = aq_p2g.k AND v % 4 <> 0)) AS wrong_l,
       count(*) FILTER (WHERE l IS NOT NULL) AS windows_with_l
  FROM aq_p2g;
SELECT events, late_events FROM streamwm.streams WHERE stream = 'aq'::regclass;

-- 2. Incompatible changes are refused, and nothing changes.
\set VERBOSITY default
CREATE TABLE def_before AS SELECT name, query, query_text, plan, reads, closed_until, pane_stamp, folded_offsets
  FROM streamwm.query_def WHERE stream = 'aq'::regclass;
SELECT streamwm.create_stream('aq_other', 'k int, v int');
-- another key
SELECT streamwm.alter_query('aq_pane', 'SELECT k % 2 AS k2, count(*) AS n, sum(v) AS s FROM aq GROUP BY 1');
\echo :LAST_ERROR_SQLSTATE
SELECT streamwm.alter_query('aq_pane', 'SELECT count(*) AS n, sum(v) AS s FROM aq');
\echo :LAST_ERROR_SQLSTATE
-- the same key name, another type
SELECT streamwm.alter_query('aq_pane', 'SELECT k::bigint AS k, count(*) AS n, sum(v) AS s FROM aq GROUP BY 1');
\echo :LAST_ERROR_SQLSTATE
-- an output column of another type than the result table's
SELECT streamwm.alter_query('aq_pane', 'SELECT k, count(*)::int AS n, sum(v) AS s FROM aq GROUP BY k');
\echo :LAST_ERROR_SQLSTATE
-- another stream
SELECT streamwm.alter_query('aq_pane', 'SELECT k, count(*) AS n, sum(v) AS s FROM aq_other GROUP BY k');
\echo :LAST_ERROR_SQLSTATE
-- what create_query refuses, alter_query refuses
SELECT streamwm.alter_query('aq_pane', 'SELECT k, v FROM aq');
\echo :LAST_ERROR_SQLSTATE
SELECT streamwm.alter_query('aq_pane', 'SELEC k FROM aq');
\echo :LAST_ERROR_SQLSTATE
SELECT streamwm.alter_query('aq_pane', 'SELECT k, count(*) AS n FROM aq GROUP BY k; DROP TABLE aq_src');
\echo :LAST_ERROR_SQLSTATE
SELECT streamwm.alter_query('aq_pane', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT streamwm.alter_query('no_such_query', 'SELECT k, count(*) AS n FROM aq GROUP BY k');
\echo :LAST_ERROR_SQLSTATE
-- a result column that is NOT NULL cannot be left unfilled
ALTER TABLE aq_pane ADD COLUMN z int NOT NULL DEFAULT 0;
ALTER TABLE aq_pane ALTER COLUMN z DROP DEFAULT;
SELECT streamwm.alter_query('aq_pane', 'SELECT k, count(*) AS n, sum(v) AS s, max(v) AS m FROM aq GROUP BY k');
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE aq_pane DROP COLUMN z;
-- a text that its owner may not run fails when it is planned: rolled back
CREATE ROLE regress_aq_owner;
GRANT CREATE ON SCHEMA public TO regress_aq_owner;
CREATE TABLE aq_secret (x int);
SET ROLE regress_aq_owner;
SELECT streamwm.create_stream('aq_own', 'k int, v int');
SELECT streamwm.create_query('aq_own_q', 'SELECT k, count(*) AS n FROM aq_own GROUP BY k', hop => '1 s', size => '1 s');
SELECT streamwm.alter_query('aq_own_q', 'SELECT k, count(*) AS n FROM aq_own WHERE EXISTS (SELECT FROM aq_secret) GROUP BY k');
\echo :LAST_ERROR_SQLSTATE
SELECT query, definition FROM streamwm.queries WHERE query = 'aq_own_q';
RESET ROLE;
SELECT count(*) AS unchanged FROM def_before b JOIN streamwm.query_def q USING (name)
 WHERE (b.query, b.query_text, b.plan, b.reads, b.closed_until, b.pane_stamp, b.folded_offsets)
       IS NOT DISTINCT FROM (q.query, q.query_text, q.plan, q.reads, q.closed_until, q.pane_stamp, q.folded_offsets);
SELECT attname FROM pg_attribute WHERE attrelid = 'aq_pane'::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum;

-- 3. What a query reads follows its text: the DDL guard protects the new
-- text's relations and lets go of what only the old text used.
CREATE TABLE aq_dim (k int, label text);
INSERT INTO aq_dim VALUES (0, 'zero'), (1, 'one'), (2, 'two');
SELECT streamwm.create_stream('aq_dd', 'k int, v int, w int');
SELECT streamwm.create_query('aq_dq', 'SELECT k, sum(w) AS s FROM aq_dd GROUP BY k', hop => '10 s', size => '10 s');
ALTER TABLE aq_dd DROP COLUMN w;
SELECT streamwm.alter_query('aq_dq', $$SELECT aq_dd.k, sum(aq_dd.v) AS s FROM aq_dd JOIN aq_dim USING (k) WHERE aq_dim.label <> 'one' GROUP BY aq_dd.k$$);
SELECT name, plan, reads FROM streamwm.query_def WHERE name = 'aq_dq';
ALTER TABLE aq_dd DROP COLUMN w;
ALTER TABLE aq_dim DROP COLUMN label;
DROP TABLE aq_dim;
ALTER TABLE aq_dim RENAME COLUMN label TO name;
SELECT v.definition, d.query FROM streamwm.queries v JOIN streamwm.query_def d ON d.name = v.query
 WHERE v.query = 'aq_dq';
INSERT INTO aq_dd (sw_write_time, k, v) VALUES (to_timestamp(1), 0, 5), (to_timestamp(2), 1, 6), (to_timestamp(3), 2, 7),
                                          (to_timestamp(30), 0, 0);
SELECT streamwm.process('aq_dd');
SELECT window_start, k, s FROM aq_dq ORDER BY 1, 2;

-- 4. Only the query's owner (or a member) may change it; the text is bound
-- as its author meant it; nothing a hostile role plants ever runs.
CREATE ROLE regress_aq_alice;
CREATE ROLE regress_aq_bob;
GRANT CREATE ON SCHEMA public TO regress_aq_alice, regress_aq_bob;
SET ROLE regress_aq_bob;
CREATE TABLE public.aq_pwned (who name, what text);
GRANT INSERT, SELECT ON public.aq_pwned TO PUBLIC;
CREATE FUNCTION public.aq_trap_eq(regclass, oid) RETURNS boolean LANGUAGE plpgsql AS
  $$BEGIN INSERT INTO public.aq_pwned VALUES (current_user, 'regclass = oid'); RETURN $1::oid OPERATOR(pg_catalog.=) $2; END$$;
CREATE OPERATOR public.= (LEFTARG = regclass, RIGHTARG = oid, FUNCTION = public.aq_trap_eq);
CREATE FUNCTION public.aq_trap_eq2(text, text) RETURNS boolean LANGUAGE plpgsql AS
  $$BEGIN INSERT INTO public.aq_pwned VALUES (current_user, 'text = text'); RETURN $1 OPERATOR(pg_catalog.=) $2; END$$;
CREATE OPERATOR public.= (LEFTARG = text, RIGHTARG = text, FUNCTION = public.aq_trap_eq2);
CREATE FUNCTION public.unnest(bigint[]) RETURNS SETOF bigint LANGUAGE plpgsql AS
  $$BEGIN INSERT INTO public.aq_pwned VALUES (current_user, 'unnest'); RETURN QUERY SELECT pg_catalog.unnest($1); END$$;
CREATE FUNCTION public.aq_trap_imm(int) RETURNS int LANGUAGE plpgsql IMMUTABLE AS
  $$BEGIN INSERT INTO public.aq_pwned VALUES (current_user, 'immutable'); RETURN $1; END$$;
RESET ROLE;

SET ROLE regress_aq_alice;
SELECT streamwm.create_stream('aq_a', 'k int, price numeric');
SELECT streamwm.create_query('aq_aq', 'SELECT k, count(*) AS n FROM aq_a GROUP BY k', hop => '10 s', size => '10 s');
SELECT streamwm.ingest('aq_a', '[{"k": 1, "price": 5}, {"k": 1, "price": 50}, {"k": 2, "price": 20}]',
                       write_time => '1970-01-01 00:00:01+00');
SELECT streamwm.process('aq_a');
RESET ROLE;

-- bob may neither change nor recompute alice's query, by any door; his
-- text is never read, planned or run
SET ROLE regress_aq_bob;
SELECT streamwm.alter_query('aq_aq', 'SELECT k, count(*) AS n FROM aq_a WHERE k > public.aq_trap_imm(0) GROUP BY k');
\echo :LAST_ERROR_SQLSTATE
SELECT streamwm_internal._alter_query('aq_aq', 'SELECT k, count(*) AS n FROM aq_a WHERE k > public.aq_trap_imm(0) GROUP BY k', 'public');
\echo :LAST_ERROR_SQLSTATE
SELECT streamwm.recompute('aq_aq', '-infinity', 'infinity');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;

-- alice changes her query; then bob plants an exact-match operator for
-- her "price > 10": her stored text keeps meaning pg_catalog's
SET ROLE regress_aq_alice;
SELECT streamwm.alter_query('aq_aq', 'SELECT k, count(*) AS n FROM aq_a WHERE price > 10 GROUP BY k');
RESET ROLE;
SET ROLE regress_aq_bob;
CREATE FUNCTION public.aq_trap_gt(numeric, integer) RETURNS boolean LANGUAGE plpgsql AS
  $$BEGIN INSERT INTO public.aq_pwned VALUES (current_user, 'numeric > integer'); RETURN true; END$$;
CREATE OPERATOR public.> (LEFTARG = numeric, RIGHTARG = integer, FUNCTION = public.aq_trap_gt);
RESET ROLE;
SELECT query, definition FROM streamwm.queries WHERE query = 'aq_aq';

-- the superuser's step and recompute, under a search_path with public first
SET search_path = public, pg_catalog;
SELECT streamwm.ingest('aq_a', '[{"k": 1, "price": 7}, {"k": 1, "price": 70}]', write_time => '1970-01-01 00:00:02+00');
SELECT streamwm.ingest('aq_a', '{"k": 3, "price": 30}', write_time => '1970-01-01 00:00:31+00');
SELECT streamwm.process('aq_a');
SELECT streamwm.recompute('aq_aq', '-infinity', 'infinity');
RESET search_path;
SELECT window_start, k, n FROM aq_aq ORDER BY 1, 2;   -- price > 10 as alice meant it: 50, 20, 70
SELECT who, what FROM aq_pwned;   -- nothing of bob's ever ran

-- a member of alice's role may change her query
CREATE ROLE regress_aq_carol IN ROLE regress_aq_alice;
SET ROLE regress_aq_carol;
SELECT streamwm.alter_query('aq_aq', 'SELECT k, count(*) AS n FROM aq_a WHERE price > 5 GROUP BY k');
RESET ROLE;
SELECT query, owner, definition FROM streamwm.queries WHERE query = 'aq_aq';

-- 5. With allowed_lateness L, the windows that closed but may still
-- change (window_end > closed_until - L: a row accepted later may fall
-- into them and re-fire them) are not final: the next step computes them
-- again with the new text, from their rows, whether or not a late row
-- comes.  Windows that ended at or before closed_until - L are final and
-- keep the old text's rows.  (DESIGN.md, "Changing a query")
SELECT streamwm.create_stream('al', 'k int, v int', allowed_lateness => '10 s', idle_timeout => '1 hour');
SELECT streamwm.create_query('al_pane', 'SELECT k, count(*) AS n, sum(v) AS s FROM al GROUP BY k',
                             hop => '5 s', size => '5 s');
SELECT streamwm.create_query('al_gen', $$SELECT k, count(*) AS n, string_agg(v::text, ',' ORDER BY v) AS s
                                         FROM al GROUP BY k$$, hop => '5 s', size => '5 s');
CREATE TABLE al_src AS SELECT i, i % 2 AS k, i AS v, to_timestamp(i) AS t FROM generate_series(1, 40) i;
INSERT INTO al (sw_write_time, k, v) SELECT t, k, v FROM al_src ORDER BY i;
SELECT streamwm.process('al');
CREATE TABLE al_change AS SELECT closed_until, closed_until - interval '10 s' AS final_until
  FROM streamwm.queries WHERE query = 'al_pane';
SELECT * FROM al_change;
SELECT streamwm.alter_query('al_pane', 'SELECT k, count(*) AS n, sum(v) * 10 AS s FROM al GROUP BY k');
SELECT streamwm.alter_query('al_gen', $$SELECT k, count(*) AS n, string_agg(v::text, ';' ORDER BY v DESC) AS s
                                        FROM al GROUP BY k$$);
-- a step with no new row: the windows ending in (30 s, 40 s] get the new text
SELECT streamwm.process('al');
SELECT query, windows_emitted, windows_refired, last_error FROM streamwm.queries WHERE query LIKE 'al\_%' ORDER BY 1;
SELECT window_start, k, n, s FROM al_pane WHERE window_end > (SELECT final_until - interval '5 s' FROM al_change)
 ORDER BY 1, 2;
-- then a row accepted within L (33 s), one late (29 s < W - L), and one
-- that closes two more windows (50 s)
INSERT INTO al (sw_write_time, k, v) VALUES (to_timestamp(33), 1, 1000), (to_timestamp(29), 1, 2000);
INSERT INTO al_src VALUES (41, 1, 1000, to_timestamp(33));
SELECT streamwm.process('al');
INSERT INTO al (sw_write_time, k, v) VALUES (to_timestamp(50), 0, 0);
SELECT streamwm.process('al');
SELECT late_events FROM streamwm.streams WHERE stream = 'al'::regclass;
-- the model: every window of the accepted rows that has closed (end <= W);
-- the old text where window_end <= closed_until - L at the change, the new
-- text elsewhere
CREATE TABLE al_model AS
SELECT ws AS window_start, ws + interval '5 s' AS window_end, k, count(*) AS n,
       CASE WHEN ws + interval '5 s' <= (SELECT final_until FROM al_change)
            THEN sum(v) ELSE sum(v) * 10 END AS s,
       CASE WHEN ws + interval '5 s' <= (SELECT final_until FROM al_change)
            THEN string_agg(v::text, ',' ORDER BY v) ELSE string_agg(v::text, ';' ORDER BY v DESC) END AS l
  FROM al_src, streamwm.window_start(t, '5 s') ws
 WHERE ws + interval '5 s' <= (SELECT watermark FROM streamwm.streams WHERE stream = 'al'::regclass)
 GROUP BY 1, 2, 3;
SELECT count(*) AS windows_x_groups,
       count(*) FILTER (WHERE window_end > (SELECT final_until FROM al_change)) AS with_new_text
  FROM al_model;
SELECT (SELECT count(*) FROM (SELECT window_start, window_end, k, n, s FROM al_model
                              EXCEPT ALL SELECT window_start, window_end, k, n, s FROM al_pane) x) AS pane_missing,
       (SELECT count(*) FROM (SELECT window_start, window_end, k, n, s FROM al_pane
                              EXCEPT ALL SELECT window_start, window_end, k, n, s FROM al_model) x) AS pane_extra,
       (SELECT count(*) FROM (SELECT window_start, window_end, k, n, l FROM al_model
                              EXCEPT ALL SELECT window_start, window_end, k, n, s FROM al_gen) x) AS gen_missing,
       (SELECT count(*) FROM (SELECT window_start, window_end, k, n, s FROM al_gen
                              EXCEPT ALL SELECT window_start, window_end, k, n, l FROM al_model) x) AS gen_extra;
SELECT streamwm.drop_stream('al', cascade => true);
DROP TABLE al_pane, al_gen, al_src, al_change, al_model;

SELECT streamwm.drop_stream('aq', cascade => true);
SELECT streamwm.drop_stream('aq_other');
SELECT streamwm.drop_stream('aq_dd', cascade => true);
SELECT streamwm.drop_stream('aq_a', cascade => true);
SELECT streamwm.drop_stream('aq_own', cascade => true);
DROP TABLE aq_pane, aq_gen, aq_p2g, aq_g2p, aq_dq, aq_aq, aq_own_q, aq_src, before_change, def_before, model, aq_dim,
    aq_secret, aq_pwned CASCADE;
DROP FUNCTION model_starts(timestamptz);
DROP PROCEDURE feed(int);
DROP OPERATOR public.= (regclass, oid);
DROP OPERATOR public.= (text, text);
DROP OPERATOR public.> (numeric, integer);
DROP FUNCTION public.aq_trap_eq(regclass, oid), public.aq_trap_eq2(text, text), public.unnest(bigint[]),
    public.aq_trap_imm(int), public.aq_trap_gt(numeric, integer);
REVOKE CREATE ON SCHEMA public FROM regress_aq_alice, regress_aq_bob, regress_aq_owner;
DROP ROLE regress_aq_carol;
DROP ROLE regress_aq_alice;
DROP ROLE regress_aq_bob;
DROP ROLE regress_aq_owner;
