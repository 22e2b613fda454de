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

SELECT streamwm.drop_stream('alice_s', cascade => true);
DROP TABLE alice_q, secret, shared_dim, alice_log;
DROP FUNCTION alice_note();
REVOKE CREATE ON SCHEMA public FROM regress_sw_alice, regress_sw_bob;
DROP ROLE regress_sw_alice;
DROP ROLE regress_sw_bob;
