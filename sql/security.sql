-- SPEC section 7: work runs as the owner of the stream or query, never as a
-- superuser on someone else's behalf -- also when a superuser runs process().
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
-- streams here are stepped by the tests themselves (streamwm.process(now => ...)): no background worker steps in
DO $$BEGIN EXECUTE format('ALTER DATABASE %I SET streamwm.enabled = off', current_database()); END$$;
CREATE EXTENSION IF NOT EXISTS streamwm;

CREATE ROLE regress_sw_alice;
CREATE ROLE regress_sw_bob;
GRANT CREATE ON SCHEMA public TO regress_sw_alice, regress_sw_bob;
CREATE TABLE secret (v int);
INSERT INTO secret VALUES (42);
CREATE TABLE shared_dim (v int);
INSERT INTO shared_dim VALUES (1);
GRANT SELECT ON shared_dim TO regress_sw_alice;

SET ROLE regress_sw_alice;
SELECT streamwm.create_stream('alice_s', 'v int');
-- alice cannot read secret through a query
SELECT streamwm.create_query('alice_peek', 'SELECT sum(v) AS s, (SELECT max(v) FROM secret) AS peek FROM alice_s',
                             hop => '10 s', size => '10 s');
SELECT streamwm.create_query('alice_q', 'SELECT sum(v) AS s FROM alice_s WHERE EXISTS (SELECT 1 FROM shared_dim)',
                             hop => '10 s', size => '10 s');
SELECT streamwm.ingest('alice_s', '[{"v": 1}, {"v": 2}]', write_time => to_timestamp(1));
SELECT streamwm.ingest('alice_s', '{"v": 3}', write_time => to_timestamp(20));
RESET ROLE;

-- the superuser revokes alice's access; a step run by the superuser still
-- runs alice's query as alice, so it fails and is recorded
REVOKE SELECT ON shared_dim FROM regress_sw_alice;
SELECT streamwm.process('alice_s');
SELECT query, windows_emitted, last_error FROM streamwm.queries WHERE query = 'alice_q';
GRANT SELECT ON shared_dim TO regress_sw_alice;
SELECT streamwm.process('alice_s');
SELECT query, windows_emitted, last_error FROM streamwm.queries WHERE query = 'alice_q';
SELECT window_start, s FROM alice_q;
SELECT tableowner FROM pg_tables WHERE tablename IN ('alice_s', 'alice_q') ORDER BY 1;

-- the stream is read and retention runs as its owner too: a trigger alice
-- put on her stream table never runs as the superuser
SET ROLE regress_sw_alice;
-- only CREATE EXTENSION may ask the launcher for a worker at will (each
-- call made it start one: an ordinary role could make it fork without end)
SELECT streamwm_internal._launch();
CREATE TABLE alice_log (who name);
CREATE FUNCTION alice_note() RETURNS trigger LANGUAGE plpgsql AS
  $$BEGIN INSERT INTO public.alice_log VALUES (current_user); RETURN OLD; END$$;
CREATE TRIGGER alice_note BEFORE DELETE ON alice_s FOR EACH ROW EXECUTE FUNCTION alice_note();
SELECT streamwm.ingest('alice_s', '{"v": 1}', write_time => to_timestamp(200000));
RESET ROLE;
SELECT streamwm.process('alice_s');
SELECT who, count(*) FROM alice_log GROUP BY who;

-- bob sees neither alice's catalog rows nor can he change them
SET ROLE regress_sw_bob;
SELECT count(*) FROM streamwm.query_def;
SELECT count(*) FROM streamwm.stream_def;
UPDATE streamwm.query_def SET closed_until = '-infinity';
SELECT streamwm.drop_query('alice_q');
SELECT streamwm.ingest('alice_s', '{"v": 5}');
RESET ROLE;

-- The helpers the create_* functions call are callable by every role (the
-- wrappers run as the caller).  Each checks what the wrappers check, so
-- calling one directly gets no further than the wrapper would: the
-- stream's allowed_lateness, chains, the kind of query it may turn.
SET ROLE regress_sw_alice;
SELECT streamwm.create_stream('alice_late', 'v int', allowed_lateness => '5 s');
SELECT streamwm.create_stream('alice_out', 's bigint');
SELECT streamwm.create_stream('alice_timed', 's bigint, t timestamptz', event_time => 't');
CREATE TABLE alice_res (window_start timestamptz, window_end timestamptz, s bigint, PRIMARY KEY (window_start));
-- a chain from a stream with allowed_lateness; into a stream with event_time
SELECT streamwm_internal._register_query('alice_x', 'alice_late', streamwm_internal._bind_query('SELECT sum(v) AS s FROM alice_late'),
  'x', '5 s', '5 s', 'alice_out', 'latest', 0, '-infinity', 'epoch', 'event');
SELECT streamwm_internal._register_query('alice_x', 'alice_s', streamwm_internal._bind_query('SELECT sum(v) AS s FROM alice_s'),
  'x', '5 s', '5 s', 'alice_timed', 'latest', 0, '-infinity', 'epoch', 'event');
-- an ordered query over a stream with allowed_lateness, or aggregating
SELECT streamwm_internal._register_query('alice_x', 'alice_late', streamwm_internal._bind_query('SELECT v FROM alice_late'),
  'x', '0', '0', 'alice_res', 'latest', 0, '-infinity', 'epoch', 'event');
SELECT streamwm_internal._register_query('alice_x', 'alice_s', streamwm_internal._bind_query('SELECT sum(v) AS s FROM alice_s'),
  'x', '0', '0', 'alice_res', 'latest', 0, '-infinity', 'epoch', 'event');
-- processing time without panes; bad hop, size, start_from, time_domain
SELECT streamwm_internal._register_query('alice_x', 'alice_s',
  streamwm_internal._bind_query('SELECT string_agg(v::text, '','') AS s FROM alice_s'),
  'x', '5 s', '5 s', 'alice_res', 'latest', 0, '-infinity', 'epoch', 'processing');
SELECT streamwm_internal._register_query('alice_x', 'alice_s', streamwm_internal._bind_query('SELECT sum(v) AS s FROM alice_s'),
  'x', '0', '5 s', 'alice_res', 'latest', 0, '-infinity', 'epoch', 'event');
SELECT streamwm_internal._register_query('alice_x', 'alice_s', streamwm_internal._bind_query('SELECT sum(v) AS s FROM alice_s'),
  'x', '3 s', '5 s', 'alice_res', 'latest', 0, '-infinity', 'epoch', 'event');
SELECT streamwm_internal._register_query('alice_x', 'alice_s', streamwm_internal._bind_query('SELECT sum(v) AS s FROM alice_s'),
  'x', '1 mon', '1 mon', 'alice_res', 'latest', 0, '-infinity', 'epoch', 'event');
SELECT streamwm_internal._register_query('alice_x', 'alice_s', streamwm_internal._bind_query('SELECT sum(v) AS s FROM alice_s'),
  'x', '5 s', '5 s', 'alice_res', 'now', 0, '-infinity', 'epoch', 'event');
SELECT streamwm_internal._register_query('alice_x', 'alice_s', streamwm_internal._bind_query('SELECT sum(v) AS s FROM alice_s'),
  'x', '5 s', '5 s', 'alice_res', 'latest', 0, '-infinity', 'epoch', 'wall');
-- a hopping query over the lateness stream may be recorded; it cannot be
-- turned into a session or count query there
SELECT streamwm_internal._register_query('alice_x', 'alice_late', streamwm_internal._bind_query('SELECT sum(v) AS s FROM alice_late'),
  'x', '10 s', '10 s', 'alice_res', 'latest', 0, '-infinity', 'epoch', 'event');
SELECT streamwm_internal._register_session('alice_x', '10 s');
SELECT streamwm_internal._set_count_windows('alice_x', 2, 2);
-- nor is a chain, nor a query that has run, in one transaction or not
BEGIN;
SELECT streamwm_internal._register_query('alice_c', 'alice_s', streamwm_internal._bind_query('SELECT sum(v) AS s FROM alice_s'),
  'x', '10 s', '10 s', 'alice_out', 'latest', 0, '-infinity', 'epoch', 'event');
SELECT streamwm_internal._register_session('alice_c', '10 s');
ROLLBACK;
SELECT streamwm_internal._register_session('alice_q', '10 s');
SELECT plan FROM streamwm.query_def WHERE name IN ('alice_x', 'alice_q') ORDER BY name;
-- _check_query on a query that runs and keeps state (a pane-plan query, a
-- session query with partial states) leaves its state as it is: the next
-- step does not fold the rows of its open window or session a second time
SELECT streamwm.create_query('alice_p', 'SELECT count(*) AS n, sum(v) AS s FROM alice_s', hop => '10 s', size => '10 s');
SELECT streamwm.create_session_query('alice_ps', 'SELECT count(*) AS n, sum(v) AS s FROM alice_s', gap => '5 s');
SELECT streamwm.ingest('alice_s', '[{"v": 10}, {"v": 20}]', write_time => to_timestamp(200001));
SELECT streamwm.process('alice_s');
SELECT streamwm_internal._check_query('alice_p');
SELECT streamwm_internal._check_query('alice_ps');
SELECT streamwm.ingest('alice_s', '{"v": 1}', write_time => to_timestamp(200020));
SELECT streamwm.process('alice_s');
SELECT q.plan, r.window_start, r.n, r.s FROM alice_p r, streamwm.queries q WHERE q.query = 'alice_p'
UNION ALL
SELECT q.plan, r.window_start, r.n, r.s FROM alice_ps r, streamwm.queries q WHERE q.query = 'alice_ps' ORDER BY 1, 2;
SELECT (SELECT count(*) FROM pg_class WHERE oid = q.pane_table) AS state_tables FROM streamwm.query_def q
 WHERE q.name = 'alice_ps';
RESET ROLE;
-- bob reaches alice's queries and streams through none of them
SET ROLE regress_sw_bob;
SELECT streamwm_internal._register_session('alice_x', '10 s');
SELECT streamwm_internal._set_count_windows('alice_x', 2, 2);
SELECT streamwm_internal._check_count_query('alice_x');
SELECT streamwm_internal._check_query('alice_x');
SELECT streamwm_internal._register_query('bob_x', 'alice_s', streamwm_internal._bind_query('SELECT sum(v) AS s FROM alice_s'),
  'x', '5 s', '5 s', 'alice_res', 'latest', 0, '-infinity', 'epoch', 'event');
RESET ROLE;
SELECT streamwm.drop_stream('alice_late', cascade => true);
SELECT streamwm.drop_stream('alice_out');
SELECT streamwm.drop_stream('alice_timed');
DROP TABLE alice_res;
SELECT streamwm.drop_query('alice_p', drop_result => true);
SELECT streamwm.drop_query('alice_ps', drop_result => true);

SELECT streamwm.drop_stream('alice_s', cascade => true);
DROP TABLE alice_q, secret, shared_dim, alice_log;
DROP FUNCTION alice_note();
REVOKE CREATE ON SCHEMA public FROM regress_sw_alice, regress_sw_bob;
DROP ROLE regress_sw_alice;
DROP ROLE regress_sw_bob;
