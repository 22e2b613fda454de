-- Issue 7 / SPEC section 3: DDL never silently breaks a window query.
-- Renaming the stream, a column, a joined table or their schema keeps every
-- query working; dropping or retyping a column a query uses, or dropping a
-- table it reads, is refused with an error naming the query.  Queries are
-- owned by alice; the DDL is run by alice, by bob (who owns a table her
-- query joins) and by a superuser.
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
SET client_min_messages = warning;
-- streams here are stepped by the tests themselves (streamwm.process(now => ...)): no background worker steps in
DO $$BEGIN EXECUTE format('ALTER DATABASE %I SET streamwm.enabled = off', current_database()); END$$;
CREATE EXTENSION IF NOT EXISTS streamwm;
RESET client_min_messages;

CREATE ROLE regress_qd_alice;
CREATE ROLE regress_qd_bob;
CREATE SCHEMA qd AUTHORIZATION regress_qd_alice;
CREATE SCHEMA qd_bob AUTHORIZATION regress_qd_bob;
CREATE SCHEMA qd2;
GRANT USAGE, CREATE ON SCHEMA qd2 TO regress_qd_alice;

SET ROLE regress_qd_bob;
CREATE TABLE qd_bob.tags (memo text, k text, tag text);
INSERT INTO qd_bob.tags VALUES ('-', 'a', 't1'), ('-', 'b', 't2');
GRANT USAGE ON SCHEMA qd_bob TO regress_qd_alice;
GRANT SELECT ON qd_bob.tags TO regress_qd_alice;
RESET ROLE;

SET ROLE regress_qd_alice;
SET search_path = qd;
SELECT streamwm.create_stream('ev', 'k text, v int, extra int');
CREATE TABLE dim (k text, label text);
INSERT INTO dim VALUES ('a', 'A'), ('b', 'B');
-- the stream's columns; a joined table's column; one used only in a
-- subquery; a JOIN ... USING the other role's table
SELECT streamwm.create_query('qd_a', 'SELECT k, count(*) AS n, sum(v) AS total FROM ev GROUP BY k',
                             hop => '10 s', size => '10 s');
SELECT streamwm.create_query('qd_b', 'SELECT d.label, count(*) AS n FROM ev e JOIN dim d ON d.k = e.k GROUP BY d.label',
                             hop => '10 s', size => '10 s');
SELECT streamwm.create_query('qd_c', $$SELECT count(*) AS n FROM ev
                                       WHERE EXISTS (SELECT 1 FROM dim WHERE dim.k = ev.k AND dim.label = 'A')$$,
                             hop => '10 s', size => '10 s');
SELECT streamwm.create_query('qd_t', 'SELECT t.tag, sum(e.v) AS total FROM ev e JOIN qd_bob.tags t USING (k) GROUP BY t.tag',
                             hop => '10 s', size => '10 s');
RESET search_path;
RESET ROLE;
-- what each query reads is recorded
SELECT name, reads FROM streamwm.query_def WHERE name LIKE 'qd\_%' ORDER BY name;

-- the window [0 s, 10 s) closes at W = 12 s
SELECT streamwm.ingest('qd.ev', '[{"k": "a", "v": 1}, {"k": "b", "v": 2}, {"k": "a", "v": 3}]',
                       write_time => '2024-01-01 00:00:01+00');
SELECT streamwm.ingest('qd.ev', '{"k": "a", "v": 10}', write_time => '2024-01-01 00:00:12+00');
SELECT streamwm.process('qd.ev', now => '2024-01-01 00:00:13+00');

------------------------------------------------------------------------
-- 1. Renames keep the queries working, whoever runs them
------------------------------------------------------------------------
-- a superuser renames alice's stream, a used column and an unused one
ALTER TABLE qd.ev RENAME TO events;
ALTER TABLE qd.events RENAME COLUMN v TO amount;
ALTER TABLE qd.events RENAME COLUMN extra TO spare;
-- alice renames her dimension table and its used column
SET ROLE regress_qd_alice;
ALTER TABLE qd.dim RENAME TO dims;
ALTER TABLE qd.dims RENAME COLUMN label TO name;
RESET ROLE;
-- bob renames his table, and the USING column of it
SET ROLE regress_qd_bob;
ALTER TABLE qd_bob.tags RENAME TO labels;
ALTER TABLE qd_bob.labels RENAME COLUMN tag TO lab;
ALTER TABLE qd_bob.labels RENAME COLUMN k TO key;
RESET ROLE;
-- the superuser moves the stream to another schema, and renames that
ALTER TABLE qd.events SET SCHEMA qd2;
ALTER SCHEMA qd2 RENAME TO qd3;
-- the stored texts carry the new names; the output names stay
SELECT name, query FROM streamwm.query_def WHERE name LIKE 'qd\_%' ORDER BY name;
SELECT name, reads FROM streamwm.query_def WHERE name LIKE 'qd\_%' ORDER BY name;

-- the window [10 s, 20 s) closes at W = 25 s: rows a 10, a 5, b 6
SELECT streamwm.ingest('qd3.events', '[{"k": "a", "amount": 5}, {"k": "b", "amount": 6}]',
                       write_time => '2024-01-01 00:00:15+00');
SELECT streamwm.ingest('qd3.events', '{"k": "a", "amount": 7}', write_time => '2024-01-01 00:00:25+00');
SELECT streamwm.process('qd3.events', now => '2024-01-01 00:00:26+00');
SELECT name, last_error, errors FROM streamwm.query_def WHERE name LIKE 'qd\_%' ORDER BY name;
SELECT * FROM qd.qd_a ORDER BY window_start, k;
SELECT * FROM qd.qd_b ORDER BY window_start, label;
SELECT * FROM qd.qd_c ORDER BY window_start;
SELECT * FROM qd.qd_t ORDER BY window_start, tag;

------------------------------------------------------------------------
-- 2. Dropping or retyping what a query uses is refused, naming the query
------------------------------------------------------------------------
SET ROLE regress_qd_alice;
ALTER TABLE qd3.events DROP COLUMN amount;
ALTER TABLE qd.dims DROP COLUMN name;
ALTER TABLE qd.dims ALTER COLUMN k TYPE varchar;
DROP TABLE qd.dims;
DROP TABLE qd.dims CASCADE;
RESET ROLE;
-- by a superuser, in one ALTER TABLE with an allowed subcommand
ALTER TABLE qd3.events ALTER COLUMN k TYPE varchar;
ALTER TABLE qd3.events ADD COLUMN note text, DROP COLUMN amount;
-- by the owner of a joined table
SET ROLE regress_qd_bob;
ALTER TABLE qd_bob.labels DROP COLUMN lab;
ALTER TABLE qd_bob.labels DROP COLUMN key;
DROP TABLE qd_bob.labels;
DROP SCHEMA qd_bob CASCADE;
-- a column no query uses may go, even one the stored text lists in a
-- column alias list (written there for the renamed USING column): the
-- text is written again without it
ALTER TABLE qd_bob.labels DROP COLUMN memo;
RESET ROLE;
SELECT query FROM streamwm.query_def WHERE name = 'qd_t';
-- a whole-row reference uses every column
SET ROLE regress_qd_alice;
ALTER TABLE qd.dims ADD COLUMN note text;
SELECT streamwm.create_query('qd_w', 'SELECT count(DISTINCT d) AS n FROM qd3.events e JOIN qd.dims d ON d.k = e.k',
                             hop => '10 s', size => '10 s', result_table => 'qd.qd_w');
ALTER TABLE qd.dims DROP COLUMN note;
SELECT streamwm.drop_query('qd_w', drop_result => true);
-- a column no query uses may go
ALTER TABLE qd.dims DROP COLUMN note;
RESET ROLE;
ALTER TABLE qd3.events DROP COLUMN spare;
-- nothing was changed by the refused commands: [20 s, 30 s) closes at W = 35 s
SELECT streamwm.ingest('qd3.events', '{"k": "b", "amount": 8}', write_time => '2024-01-01 00:00:35+00');
SELECT streamwm.process('qd3.events', now => '2024-01-01 00:00:36+00');
SELECT name, last_error, errors FROM streamwm.query_def WHERE name LIKE 'qd\_%' ORDER BY name;
SELECT * FROM qd.qd_a WHERE window_start >= '2024-01-01 00:00:20+00' ORDER BY window_start, k;
SELECT * FROM qd.qd_b WHERE window_start >= '2024-01-01 00:00:20+00' ORDER BY window_start, label;
SELECT * FROM qd.qd_c WHERE window_start >= '2024-01-01 00:00:20+00' ORDER BY window_start;
SELECT * FROM qd.qd_t WHERE window_start >= '2024-01-01 00:00:20+00' ORDER BY window_start, tag;

------------------------------------------------------------------------
-- 3. Transactions: a rolled back rename leaves the text alone; a rename
--    that failed in a savepoint does not leak into the next command
------------------------------------------------------------------------
BEGIN;
ALTER TABLE qd3.events RENAME TO gone;
ROLLBACK;
BEGIN;
SAVEPOINT s;
ALTER TABLE qd3.events RENAME COLUMN amount TO k;   -- fails: k exists
ROLLBACK TO SAVEPOINT s;
ALTER TABLE qd3.events RENAME COLUMN amount TO amt;
COMMIT;
SELECT query FROM streamwm.query_def WHERE name = 'qd_a';
-- [30 s, 40 s) closes at W = 45 s: b 8, a 9
SELECT streamwm.ingest('qd3.events', '{"k": "a", "amt": 9}', write_time => '2024-01-01 00:00:39+00');
SELECT streamwm.ingest('qd3.events', '{"k": "a", "amt": 1}', write_time => '2024-01-01 00:00:45+00');
SELECT streamwm.process('qd3.events', now => '2024-01-01 00:00:46+00');
SELECT name, last_error, errors FROM streamwm.query_def WHERE name LIKE 'qd\_%' ORDER BY name;
SELECT * FROM qd.qd_a WHERE window_start >= '2024-01-01 00:00:30+00' ORDER BY window_start, k;

------------------------------------------------------------------------
-- 4. A query that no longer analyzes (broken by something else) never
--    blocks DDL: bob takes away alice's access to his schema
------------------------------------------------------------------------
SET ROLE regress_qd_bob;
REVOKE USAGE ON SCHEMA qd_bob FROM regress_qd_alice;
ALTER TABLE qd_bob.labels RENAME TO labels2;
DROP TABLE qd_bob.labels2;
RESET ROLE;

SELECT streamwm.drop_stream('qd3.events', cascade => true);
DROP SCHEMA qd CASCADE;
DROP SCHEMA qd_bob CASCADE;
DROP SCHEMA qd3 CASCADE;
DROP ROLE regress_qd_alice;
DROP ROLE regress_qd_bob;
