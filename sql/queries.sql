-- SPEC section 5: create_query / drop_query contract and bad input.
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
-- streams here are stepped by the tests themselves (streamwm.process(now => ...)): no background worker steps in
DO $$BEGIN EXECUTE format('ALTER DATABASE %I SET streamwm.enabled = off', current_database()); END$$;
CREATE EXTENSION IF NOT EXISTS streamwm;

SELECT streamwm.create_stream('qs', 'k text, v int');
CREATE TABLE not_a_stream (k text, v int);

-- bad queries: a clear error, nothing stored
SELECT streamwm.create_query('q_bad1', 'SELECT count(*) AS n FROM not_a_stream', hop => '1 s', size => '1 s');
SELECT streamwm.create_query('q_bad2', 'SELECT count(*) AS n FROM nowhere', hop => '1 s', size => '1 s');
SELECT streamwm.create_query('q_bad3', 'SELEC count(*) FROM qs', hop => '1 s', size => '1 s');
SELECT streamwm.create_query('q_bad4', 'SELECT count(*) AS n FROM qs GROUP BY k', hop => '1 s', size => '1 s');
SELECT streamwm.create_query('q_bad5', 'SELECT count(*) AS n FROM qs', hop => '0 s', size => '1 s');
SELECT streamwm.create_query('q_bad6', 'SELECT count(*) AS n FROM qs', hop => '-1 s', size => '1 s');
SELECT streamwm.create_query('q_bad7', 'SELECT count(*) AS n FROM qs', hop => '1 s', size => '0 s');
SELECT streamwm.create_query('q_bad8', 'SELECT count(*) AS n FROM qs', hop => '2 s', size => '3 s');
SELECT streamwm.create_query('q_bad9', 'SELECT count(*) AS n FROM qs', hop => '1 s', size => NULL);
SELECT streamwm.create_query('q_bad10', 'SELECT count(*) AS n FROM qs', hop => '1 s', size => '1 s', start_from => 'middle');
SELECT streamwm.create_query('q_bad11', 'SELECT count(*) AS n FROM qs LIMIT 1', hop => '1 s', size => '1 s');
SELECT streamwm.create_query('q_bad12', 'SELECT count(*) AS n FROM qs UNION SELECT 1', hop => '1 s', size => '1 s');
-- (a self-join is no error: each reference reads the window's rows)
SELECT streamwm.create_query('q_bad13', 'SELECT count(*) AS n FROM qs a, qs b', hop => '1 s', size => '1 s');
SELECT streamwm.drop_query('q_bad13', drop_result => true);
SELECT streamwm.create_query('q_bad14', 'SELECT count(*) FROM qs WHERE nope > 1', hop => '1 s', size => '1 s');
SELECT streamwm.create_query('q_bad15', 'SELECT count(*) + 1 FROM qs', hop => '1 s', size => '1 s');
SELECT streamwm.create_query('q_bad16', 'SELECT count(*) AS window_start FROM qs', hop => '1 s', size => '1 s');
SELECT streamwm.create_query('q_bad17', 'SELECT k, v FROM qs', hop => '1 s', size => '1 s');
SELECT streamwm.create_query('q_bad18', 'SELECT count(*) AS n FROM qs; DROP TABLE qs', hop => '1 s', size => '1 s');
SELECT streamwm.create_query('q_bad19', 'SELECT 1/0 AS n FROM qs GROUP BY k, k', hop => '1 s', size => '1 s');
SELECT count(*) FROM streamwm.queries WHERE query LIKE 'q\_bad%';
SELECT relname FROM pg_class WHERE relname LIKE 'q\_bad%';

-- duplicate names
SELECT streamwm.create_query('q1', 'SELECT k, sum(v) AS s FROM qs GROUP BY k', hop => '1 s', size => '2 s');
SELECT streamwm.create_query('q1', 'SELECT k, sum(v) AS s FROM qs GROUP BY k', hop => '1 s', size => '2 s');
-- a trailing semicolon is fine
SELECT streamwm.create_query('q_semi', 'SELECT count(*) AS n FROM qs;', hop => '1 s', size => '1 s');

-- names that need quoting: a stream in a schema, a query name, a result table
CREATE SCHEMA "Shop Data";
SELECT streamwm.create_stream('"Shop Data"."Sales Feed"', '"Item Name" text, qty int');
SELECT streamwm.create_query('Sales Per Item',
    'SELECT "Item Name", sum(qty) AS "Total Qty" FROM "Shop Data"."Sales Feed" GROUP BY "Item Name"',
    hop => '10 s', size => '10 s', result_table => '"Shop Data"."Per Item"');
SELECT streamwm.create_query('Sales Per Item 2',
    'SELECT f."Item Name", count(*) AS n FROM "Shop Data"."Sales Feed" AS f GROUP BY f."Item Name"',
    hop => '10 s', size => '10 s');
SELECT streamwm.ingest('"Shop Data"."Sales Feed"',
    '[{"Item Name": "Big Box", "qty": 2}, {"Item Name": "Big Box", "qty": 3}]', write_time => to_timestamp(1));
SELECT streamwm.ingest('"Shop Data"."Sales Feed"', '{"Item Name": "x", "qty": 1}', write_time => to_timestamp(30));
SELECT streamwm.process('"Shop Data"."Sales Feed"');
SELECT * FROM "Shop Data"."Per Item";
SELECT * FROM "Sales Per Item 2";
SELECT query, stream, result_table FROM streamwm.queries WHERE query LIKE 'Sales%' ORDER BY 1;

-- start_from: 'latest' sees rows ingested after creation, 'earliest' every retained row
SELECT streamwm.create_stream('sf', 'v int');
SELECT streamwm.ingest('sf', '[{"v": 1}, {"v": 2}]', write_time => to_timestamp(100));
SELECT streamwm.create_query('sf_latest', 'SELECT sum(v) AS s, count(*) AS n FROM sf', hop => '10 s', size => '10 s');
SELECT streamwm.create_query('sf_earliest', 'SELECT sum(v) AS s, count(*) AS n FROM sf', hop => '10 s', size => '10 s',
                             start_from => 'earliest');
SELECT streamwm.ingest('sf', '[{"v": 10}, {"v": 20}]', write_time => to_timestamp(101));
SELECT streamwm.ingest('sf', '{"v": 0}', write_time => to_timestamp(200));
SELECT streamwm.process('sf');
SELECT 'latest' AS q, window_start, s, n FROM sf_latest UNION ALL
SELECT 'earliest', window_start, s, n FROM sf_earliest ORDER BY 1, 2;

-- a query created after windows closed, from 'earliest', still gets them
SELECT streamwm.create_query('sf_late_earliest', 'SELECT sum(v) AS s FROM sf', hop => '10 s', size => '10 s',
                             start_from => 'EARLIEST');
SELECT streamwm.process('sf');
SELECT window_start, s FROM sf_late_earliest ORDER BY 1;

-- drop_query keeps the result table unless asked
SELECT streamwm.drop_query('sf_latest');
SELECT count(*) FROM sf_latest;
SELECT streamwm.drop_query('sf_earliest', drop_result => true);
SELECT to_regclass('sf_earliest');
SELECT streamwm.drop_query('no_such_query');
-- drop_stream refuses while queries read it, unless cascade
SELECT streamwm.drop_stream('sf');
SELECT streamwm.drop_stream('sf', cascade => true);
SELECT count(*) FROM streamwm.queries WHERE stream::text = 'sf';
SELECT count(*) FROM sf_late_earliest;
SELECT streamwm.process('no_such_stream');
SELECT streamwm.process('not_a_stream');

-- a query whose SQL fails at run time: the error is recorded, the stream and
-- other queries go on, and the query catches up once fixed
SELECT streamwm.create_stream('errs', 'v int');
CREATE TABLE divisor (d int);
INSERT INTO divisor VALUES (0);
SELECT streamwm.create_query('errs_div', 'SELECT sum(v) / (SELECT d FROM divisor) AS r FROM errs',
                             hop => '10 s', size => '10 s');
SELECT streamwm.create_query('errs_ok', 'SELECT sum(v) AS s FROM errs', hop => '10 s', size => '10 s');
SELECT streamwm.ingest('errs', '[{"v": 4}, {"v": 6}]', write_time => to_timestamp(5));
SELECT streamwm.ingest('errs', '{"v": 1}', write_time => to_timestamp(25));
SELECT streamwm.process('errs');
SELECT query, closed_until, windows_emitted, last_error FROM streamwm.queries
 WHERE stream = 'errs'::regclass ORDER BY 1;
SELECT * FROM errs_ok;
UPDATE divisor SET d = 2;
SELECT streamwm.process('errs');
SELECT query, closed_until, windows_emitted, last_error FROM streamwm.queries
 WHERE stream = 'errs'::regclass ORDER BY 1;
SELECT window_start, r FROM errs_div;

-- a dropped result table: recorded; once re-created, the query catches up
SELECT streamwm.create_stream('rt', 'v int');
SELECT streamwm.create_query('rt_q', 'SELECT sum(v) AS s FROM rt', hop => '10 s', size => '10 s');
DROP TABLE rt_q;
SELECT streamwm.ingest('rt', '[{"v": 1}, {"v": 2}]', write_time => to_timestamp(1));
SELECT streamwm.ingest('rt', '{"v": 5}', write_time => to_timestamp(12));
SELECT streamwm.process('rt');
SELECT query, result_table, windows_emitted, last_error FROM streamwm.queries WHERE query = 'rt_q';
CREATE TABLE rt_q (window_start timestamptz PRIMARY KEY, window_end timestamptz, s bigint);
SELECT streamwm.process('rt');
SELECT query, result_table, windows_emitted, last_error FROM streamwm.queries WHERE query = 'rt_q';
SELECT window_start, s FROM rt_q;
SELECT streamwm.drop_query('rt_q', drop_result => true);
SELECT to_regclass('rt_q');

-- comments in the query text, also at its very end, do not swallow what the
-- rewrite adds
SELECT streamwm.create_stream('cm', 'v int');
SELECT streamwm.create_query('cm_q', E'SELECT count(*) AS n -- how many\n  FROM cm /* the stream */ -- trailing', hop => '10 s', size => '10 s');
SELECT streamwm.create_query('cm_q2', E'SELECT v % 2 AS odd, sum(v) AS s FROM cm GROUP BY 1 -- by parity', hop => '10 s', size => '10 s');
SELECT streamwm.ingest('cm', '[{"v": 1}, {"v": 2}, {"v": 3}]', write_time => to_timestamp(1));
SELECT streamwm.ingest('cm', '{"v": 4}', write_time => to_timestamp(11));
SELECT streamwm.process('cm');
SELECT window_start, n FROM cm_q;
SELECT window_start, odd, s FROM cm_q2 ORDER BY 2;
