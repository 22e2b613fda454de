-- SPEC section 3: every way in assigns offsets and fills what is missing;
-- bad input stores nothing from the statement and says why.
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
-- streams here are stepped by the tests themselves (streamwm.process(now => ...)): no background worker steps in
DO $$BEGIN EXECUTE format('ALTER DATABASE %I SET streamwm.enabled = off', current_database()); END$$;
CREATE EXTENSION IF NOT EXISTS streamwm;

SELECT streamwm.create_stream('clicks', 'pass int8, payload text, tags text[], doc jsonb',
                              partitions => 3);
\d clicks

-- plain INSERT, explicit partition and write time
INSERT INTO clicks (pass, payload) VALUES (1, 'a');
INSERT INTO clicks (sw_partition, sw_write_time, pass, payload)
       VALUES (2, '1970-01-01T00:00:40Z', 1, 'b');
-- COPY
COPY clicks (pass, payload) FROM STDIN;
7	c
8	d
\.
-- ingest: an object, an array, with partition and write_time
SELECT streamwm.ingest('clicks', '{"pass": 1, "payload": "e"}'::jsonb);
SELECT streamwm.ingest('clicks', '[{"pass":1,"payload":"f"},{"pass":2,"payload":"g","tags":["x","y z"],"doc":{"k":[1,2]}}]',
                       partition => 1, write_time => '1970-01-01T00:01:00Z');
-- ingest_lines: json_each_row, blank lines skipped
SELECT streamwm.ingest_lines('clicks', E'{"pass":1,"payload":"h"}\n\n{"pass":0,"payload":"i"}\r\n',
                             partition => 0, write_time => '1970-01-01T00:02:00Z');
-- empty input stores nothing
SELECT streamwm.ingest('clicks', '[]');
SELECT streamwm.ingest_lines('clicks', '');

-- every row has a partition, a unique offset, a write time and an event time
SELECT count(*) AS rows, count(DISTINCT sw_offset) AS offsets,
       bool_and(sw_partition BETWEEN 0 AND 2) AS partitions_ok,
       bool_and(sw_event_time = sw_write_time) AS event_time_is_write_time
  FROM clicks;
-- one session sticks to one partition when none is given
SELECT count(DISTINCT sw_partition) FROM clicks WHERE payload IN ('a', 'c', 'd', 'e');
SELECT payload, sw_partition, sw_write_time, tags, doc FROM clicks
 WHERE payload IN ('b', 'f', 'g', 'h', 'i') ORDER BY sw_offset;
-- offsets increase within a partition in insertion order
SELECT sw_partition, array_agg(payload ORDER BY sw_offset) FROM clicks
 WHERE payload IN ('b', 'f', 'g', 'h', 'i') GROUP BY 1 ORDER BY 1;
SELECT array_agg(payload ORDER BY sw_offset) AS sticky FROM clicks WHERE payload IN ('a', 'c', 'd', 'e');

-- Bad input: a clear error and nothing stored from that statement.
CREATE TEMP TABLE before AS SELECT count(*) AS n FROM clicks;
SELECT streamwm.ingest('no_such_stream', '{"pass": 1}');
CREATE TABLE plain_table (pass int8);
SELECT streamwm.ingest('plain_table', '{"pass": 1}');
SELECT streamwm.ingest('clicks', '{"pass": 1}', partition => 3);
SELECT streamwm.ingest('clicks', '{"pass": 1}', partition => -1);
INSERT INTO clicks (sw_partition, pass) VALUES (5, 1);
SELECT streamwm.ingest('clicks', '[{"pass": 1}, {"pass": 2, "nope": 3}]');
SELECT streamwm.ingest('clicks', '[{"pass": 1}, {"pass": 2}, {"pass": "x"}]');
SELECT streamwm.ingest('clicks', '[{"pass": 1}, 7]');
SELECT streamwm.ingest('clicks', '"just a string"');
SELECT streamwm.ingest('clicks', '{"pass": 1, "sw_offset": 5}');
SELECT streamwm.ingest('clicks', '{"pass": {"a": 1}}');
SELECT streamwm.ingest_lines('clicks', E'{"pass":1,"payload":"ok"}\n{"pass":2,"payload":"ok"}\n{"pass": 3,');
SELECT streamwm.ingest_lines('clicks', E'{"pass":1}\n[1,2]');
SELECT streamwm.ingest_lines('clicks', E'{"pass":1}\n{"pass":1e400000}');
INSERT INTO clicks (pass, sw_offset) VALUES (1, 42);
COPY clicks (pass, payload) FROM STDIN;
1	ok
x	bad
\.
SELECT (SELECT count(*) FROM clicks) = n AS nothing_stored FROM before;

-- A user never changes the system columns.
UPDATE clicks SET sw_offset = 0 WHERE payload = 'a';
UPDATE clicks SET payload = 'A' WHERE payload = 'a';

-- Event time from an expression; a NULL event time is refused.
SELECT streamwm.create_stream('orders', 'id int, created_at timestamptz, region text',
                              partitions => 4, event_time => 'created_at',
                              partition_key => 'region');
SELECT streamwm.ingest('orders', '[{"id":1,"created_at":"2024-01-01T10:00:00Z","region":"eu"},
                                    {"id":2,"created_at":"2024-01-01T10:00:05Z","region":"us"},
                                    {"id":3,"created_at":"2024-01-01T10:00:07Z","region":"eu"}]');
SELECT id, sw_event_time, sw_event_time = created_at AS from_expression FROM orders ORDER BY id;
-- the same key always lands in the same partition
SELECT region, count(DISTINCT sw_partition) FROM orders GROUP BY region ORDER BY region;
SELECT streamwm.ingest('orders', '[{"id":4,"created_at":"2024-01-01T10:00:00Z"},{"id":5,"region":"eu"}]');
INSERT INTO orders (id, region) VALUES (6, 'eu');
SELECT count(*) FROM orders;
-- an epoch-seconds field
SELECT streamwm.create_stream('sensor', 'ts_s float8, v int',
                              event_time => 'to_timestamp(ts_s)');
SELECT streamwm.ingest('sensor', '{"ts_s": 60.5, "v": 1}');
SELECT sw_event_time FROM sensor;

-- Bad stream definitions.
SELECT streamwm.create_stream('clicks', 'x int');
SELECT streamwm.create_stream('bad1', 'x int', partitions => 0);
SELECT streamwm.create_stream('bad2', 'x int', event_time => 'nope');
SELECT streamwm.create_stream('bad3', 'x int', event_time => 'x');
SELECT streamwm.create_stream('bad4', 'x int', watermark_delay => '-1 s');
SELECT streamwm.create_stream('bad5', 'x int', idle_timeout => '0');
SELECT streamwm.create_stream('bad6', 'x int, sw_mine int');
SELECT streamwm.create_stream('bad7', 'x int', partition_key => 'y');
-- a distributed stream needs Citus (test/citus has the rest): nothing is created
SELECT streamwm.create_stream('bad_dist', 'x int', distributed => true);
SELECT to_regclass('bad_dist');
SELECT streamwm.create_stream('bad8', 'x int', watermark_delay => '1 month');
SELECT count(*) FROM pg_class WHERE relname LIKE 'bad%';

-- Names that need quoting work everywhere.
CREATE SCHEMA "Odd Schema";
SELECT streamwm.create_stream('"Odd Schema"."My Stream"', '"Pass" int8, payload text');
SELECT streamwm.ingest('"Odd Schema"."My Stream"', '{"Pass": 1, "payload": "q"}');
INSERT INTO "Odd Schema"."My Stream" ("Pass", payload) VALUES (2, 'r');
SELECT "Pass", payload FROM "Odd Schema"."My Stream" ORDER BY sw_offset;
SELECT stream, partitions FROM streamwm.streams ORDER BY stream::text;

-- drop_stream
SELECT streamwm.drop_stream('sensor');
SELECT to_regclass('sensor');
SELECT streamwm.drop_stream('plain_table');
-- a stream table dropped with DROP TABLE leaves no catalog rows behind
DROP TABLE orders;
SELECT count(*) FROM streamwm.stream_def WHERE stream::text = 'orders';

-- ingest() inserts consecutive rows of one shape together; errors still name
-- the row, in any batch, and rows keep their order and defaults
SELECT streamwm.create_stream('bulk', 'id int, at timestamptz, note text DEFAULT ''none''',
                              event_time => 'at');
SELECT streamwm.ingest('bulk', (SELECT jsonb_agg(CASE WHEN i % 3 = 0
        THEN jsonb_build_object('id', i, 'at', to_timestamp(i), 'note', 'n' || i)
        ELSE jsonb_build_object('id', i, 'at', to_timestamp(i)) END ORDER BY i)
      FROM generate_series(1, 2500) i));
SELECT count(*), count(*) FILTER (WHERE note = 'none') AS defaults,
       bool_and(sw_offset > 0) AND count(DISTINCT sw_offset) = 2500 AS offsets_ok,
       (SELECT bool_and(ok) FROM (SELECT id > lag(id) OVER (ORDER BY sw_offset) AS ok FROM bulk) x
         WHERE ok IS NOT NULL) AS in_order
  FROM bulk;
SELECT streamwm.ingest('bulk', (SELECT jsonb_agg(jsonb_build_object('id', i, 'at',
        CASE WHEN i = 1700 THEN NULL ELSE to_timestamp(i) END) ORDER BY i)
      FROM generate_series(1, 2000) i));
SELECT streamwm.ingest_lines('bulk', (SELECT string_agg(jsonb_build_object('id', i, 'at',
        CASE WHEN i = 1234 THEN NULL ELSE to_timestamp(i) END)::text, E'\n' ORDER BY i)
      FROM generate_series(1, 1500) i));
SELECT count(*) FROM bulk;
-- Objects of other key sets between rows of one (ingest() reuses the last
-- object's columns while its keys repeat), {}, a refused or unknown key
-- after keys seen before (the row is named), numbers into numeric(5,2)
-- rounded and refused as numeric_in would
SELECT streamwm.create_stream('shapes', 'a int, b numeric(5,2), c text DEFAULT ''d''');
SELECT streamwm.ingest('shapes', '[{"a": 1, "b": 1.234}, {"a": 2, "b": 2}, {}, {"a": 3},
                                   {"b": 3.5, "a": 4, "c": "x"}, {"a": 5, "b": null}, {"a": 6, "b": 6}]');
SELECT a, b, c FROM shapes ORDER BY sw_offset;
SELECT streamwm.ingest('shapes', '[{"a": 7, "b": 1}, {"a": 8, "b": 1, "sw_offset": 9}]');
SELECT streamwm.ingest('shapes', '[{"a": 7, "b": 1}, {"a": 8, "bb": 1}]');
SELECT streamwm.ingest('shapes', '{"a": 10, "b": 123.456}');
SELECT streamwm.ingest('shapes', '{"a": 11, "b": 1e10}');
SELECT streamwm.ingest('shapes', '[{"a": 12, "b": 1}, {"a": 13.5, "b": 1}]');
SELECT a, b FROM shapes WHERE a >= 7 ORDER BY sw_offset;
SELECT streamwm.drop_stream('shapes');
-- A trigger that swaps two columns' names in the middle of a call: the rows
-- after it go to the columns of their keys' names, as the first rows did
-- (swap_xy(v): at the row whose x is v, its table's x and y swap names)
SELECT streamwm.create_stream('rn', 'x int, y text');
CREATE FUNCTION swap_xy() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE t text := format('%I.%I', TG_TABLE_SCHEMA, TG_TABLE_NAME);
BEGIN
  IF to_jsonb(NEW) ->> 'x' = TG_ARGV[0] THEN
    EXECUTE format('ALTER TABLE %s RENAME x TO tmp', t);
    EXECUTE format('ALTER TABLE %s RENAME y TO x', t);
    EXECUTE format('ALTER TABLE %s RENAME tmp TO y', t);
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER rn_swap AFTER INSERT ON rn FOR EACH ROW EXECUTE FUNCTION swap_xy('1000');
SELECT streamwm.ingest('rn', (SELECT jsonb_agg(jsonb_build_object('x', i, 'y', (i * 10)::text) ORDER BY i)
                             FROM generate_series(1, 1003) i));
SELECT x, y, pg_typeof(x) FROM rn ORDER BY sw_offset OFFSET 998;
SELECT streamwm.drop_stream('rn');
-- ... also when the row after the rename was read before it: its other
-- keys flushed the rows before it (firing the trigger), and it is read again
SELECT streamwm.create_stream('rc', 'x int, y text');
CREATE TRIGGER rc_swap AFTER INSERT ON rc FOR EACH ROW EXECUTE FUNCTION swap_xy('1');
SELECT streamwm.ingest('rc', '[{"x": 1, "y": "a"}, {"y": "30"}, {"x": "b", "y": 3}]');
SELECT x, y FROM rc ORDER BY sw_offset;
SELECT streamwm.drop_stream('rc');
DROP FUNCTION swap_xy();
-- ... but a stream changed by reading a row (a domain's CHECK that runs a
-- GRANT) does not make the row be read again and again
CREATE FUNCTION gi_check(int) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN EXECUTE 'GRANT SELECT ON public.gi TO PUBLIC'; RETURN true; END $$;
CREATE DOMAIN gi_int AS int CHECK (gi_check(VALUE));
SELECT streamwm.create_stream('gi', 'x gi_int, y text');
SET statement_timeout = '60s';
SELECT streamwm.ingest('gi', '[{"x": 1, "y": "a"}, {"y": "b"}, {"x": 3}]');
RESET statement_timeout;
SELECT x, y FROM gi ORDER BY sw_offset;
SELECT streamwm.drop_stream('gi');
DROP DOMAIN gi_int;
DROP FUNCTION gi_check(int);
-- A trigger's own ingest() into the stream does not move the count that
-- names the failing row of the call it fired in (row 4, not row 7)
SELECT streamwm.create_stream('ne', 'x int CHECK (x < 100), y text');
CREATE FUNCTION ne_trig() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.x = 2 AND NEW.y IS NULL THEN
    PERFORM streamwm.ingest('public.ne', '[{"x": 10, "y": "n"}, {"x": 11, "y": "n"}, {"x": 12, "y": "n"}]');
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER ne_trig BEFORE INSERT ON ne FOR EACH ROW EXECUTE FUNCTION ne_trig();
SELECT streamwm.ingest('ne', '[{"x": 1}, {"x": 2}, {"x": 3}, {"x": 400}, {"x": 5}, {"x": 6}]');
SELECT count(*) FROM ne;
SELECT streamwm.drop_stream('ne');
DROP FUNCTION ne_trig();
-- An error says where in its CONTEXT, and shows no frame of streamwm's own:
-- the user's trigger (one that fires after sw_ingest, which counts the rows)
-- keeps its line, the INSERT streamwm runs has none, and
-- the user's function that called streamwm keeps its lines.
SELECT streamwm.create_stream('ctx_s', 'v int');
CREATE FUNCTION ctx_trig() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.v < 0 THEN
        RAISE EXCEPTION 'negative v: %', NEW.v;
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER zz_ctx_check BEFORE INSERT ON ctx_s FOR EACH ROW EXECUTE FUNCTION ctx_trig();
SELECT streamwm.ingest('ctx_s', '[{"v": 1}, {"v": -2}]');
SELECT streamwm.ingest_lines('ctx_s', E'{"v": 1}\n\n{"v": -3}');
CREATE FUNCTION ctx_call() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM streamwm.create_stream('ctx_s', 'v int');
END $$;
SELECT ctx_call();
CREATE FUNCTION ctx_call2() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM streamwm.ingest('ctx_s', '{"v": "x"}');
END $$;
SELECT ctx_call2();
SELECT count(*) FROM ctx_s;
SELECT streamwm.drop_stream('ctx_s');
DROP FUNCTION ctx_call(), ctx_call2(), ctx_trig();
