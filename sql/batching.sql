-- A step reads a partition's rows in bounded offset ranges of at most
-- streamwm.batch_size offsets (process.c read_batch): the rows of one
-- transaction in a partition may lie far apart (other partitions' rows,
-- rolled-back writes and other streams take offsets between them), so a
-- range may hold fewer rows than the batch, or none.  The same rows,
-- processed in batches of 1, 2 and 5 rows and in one batch, give the same
-- results, watermarks, late events and counts.
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
DO $$BEGIN EXECUTE format('ALTER DATABASE %I SET streamwm.enabled = off', current_database()); END$$;
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS streamwm;
RESET client_min_messages;

DO $$
DECLARE
    s text;
BEGIN
    FOREACH s IN ARRAY ARRAY['bt_ref', 'bt_b1', 'bt_b2', 'bt_b5'] LOOP
        PERFORM streamwm.create_stream(s, 'k int, v int', partitions => 3,
                                       watermark_delay => '2 seconds', idle_timeout => '1 hour');
        PERFORM streamwm.create_query(s || '_sum',
            format('SELECT k, count(*) AS n, sum(v) AS total FROM %I GROUP BY k', s),
            hop => '2 seconds', size => '6 seconds');
        PERFORM streamwm.create_query(s || '_list',
            format('SELECT array_agg(v ORDER BY v) AS vs FROM %I', s),
            hop => '4 seconds', size => '4 seconds');
    END LOOP;
END $$;
SELECT query, plan FROM streamwm.queries WHERE query::text LIKE 'bt\_ref\_%' ORDER BY 1;

-- Rounds of writes, the same into every stream: one transaction over the
-- three partitions, interleaved (each partition's offsets a third apart),
-- a transaction that rolls back (a run of offsets no row has), a big one
-- into partition 2 alone, and rows of another stream in between; event
-- times out of order, some of them late.
CREATE PROCEDURE bt_round(r int) LANGUAGE plpgsql AS $$
DECLARE
    s text;
BEGIN
    FOREACH s IN ARRAY ARRAY['bt_ref', 'bt_b1', 'bt_b2', 'bt_b5'] LOOP
        EXECUTE format($q$INSERT INTO %I (sw_partition, sw_write_time, k, v)
            SELECT g %% 3, to_timestamp(100 + %s * 5 + (g * 7919 %% 13) * 0.5), g %% 4, g
              FROM generate_series(1, 30) g$q$, s, r);
        COMMIT;
        BEGIN
            EXECUTE format('INSERT INTO %I (sw_partition, sw_write_time, k, v)
                SELECT 0, to_timestamp(100), 9, g FROM generate_series(1, 7) g', s);
            RAISE EXCEPTION 'rolled back';
        EXCEPTION WHEN raise_exception THEN NULL;
        END;
        EXECUTE format($q$INSERT INTO %I (sw_partition, sw_write_time, k, v)
            SELECT 2, to_timestamp(101 + %s * 5 + (g %% 5)), g %% 2, -g
              FROM generate_series(1, 12) g$q$, s, r);
        COMMIT;
    END LOOP;
END $$;

CREATE PROCEDURE bt_process(r int) LANGUAGE plpgsql AS $$
BEGIN
    PERFORM streamwm.process('bt_ref', now => to_timestamp(200 + r));
    SET streamwm.batch_size = 1;
    PERFORM streamwm.process('bt_b1', now => to_timestamp(200 + r));
    SET streamwm.batch_size = 2;
    PERFORM streamwm.process('bt_b2', now => to_timestamp(200 + r));
    SET streamwm.batch_size = 5;
    PERFORM streamwm.process('bt_b5', now => to_timestamp(200 + r));
    RESET streamwm.batch_size;
END $$;

CALL bt_round(1);
CALL bt_process(1);
CALL bt_round(2);
CALL bt_round(3);
CALL bt_process(3);
CALL bt_round(4);
CALL bt_process(4);
CALL bt_round(5);
CALL bt_round(6);
CALL bt_process(6);

-- every row read once, some late, windows closed
SELECT stream, events, late_events, watermark FROM streamwm.streams
 WHERE stream::text LIKE 'bt\_%' ORDER BY stream::text;
SELECT count(*) AS rows_written FROM bt_ref;
SELECT (SELECT count(*) FROM bt_ref_sum) > 10 AS sums, (SELECT count(*) FROM bt_ref_list) > 3 AS lists;

-- the same results as one batch, window for window
CREATE FUNCTION bt_diff(a regclass, b regclass) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    n bigint;
BEGIN
    EXECUTE format('SELECT count(*) FROM ((TABLE %s EXCEPT ALL TABLE %s) UNION ALL (TABLE %s EXCEPT ALL TABLE %s)) d',
                   a, b, b, a) INTO n;
    RETURN n;
END $$;
SELECT s AS stream,
       bt_diff('bt_ref_sum', (s || '_sum')::regclass) AS sum_diff,
       bt_diff('bt_ref_list', (s || '_list')::regclass) AS list_diff,
       (SELECT array_agg(ARRAY[partition::int8, sw_offset] ORDER BY partition, sw_offset)
          FROM streamwm.late_events WHERE stream = s::regclass)
       IS NOT DISTINCT FROM
       (SELECT array_agg(ARRAY[partition::int8, sw_offset] ORDER BY partition, sw_offset)
          FROM streamwm.late_events WHERE stream = 'bt_ref'::regclass) AS same_late_rows,
       (SELECT array_agg(processed_offset ORDER BY partition) FROM streamwm.partitions WHERE stream = s::regclass)
       = (SELECT array_agg(processed_offset ORDER BY partition) FROM streamwm.partitions WHERE stream = 'bt_ref'::regclass)
         AS same_offsets
  FROM unnest(ARRAY['bt_b1', 'bt_b2', 'bt_b5']) s
 ORDER BY 1;

-- A gap far wider than a batch inside one transaction's range (on Citus,
-- each node's offsets come from a range of its own, 2^48 apart): the batch
-- skips to the partition's next row instead of walking the gap.
SELECT streamwm.create_stream('bt_gap', 'v int', partitions => 2, idle_timeout => '1 hour');
BEGIN;
INSERT INTO bt_gap (sw_partition, sw_write_time, v) VALUES (0, to_timestamp(10), 1);
SELECT setval(pg_get_serial_sequence('bt_gap', 'sw_offset'), 1000000000000) > 0 AS jumped;
-- (the session hands out what is left of its chunk of 64 offsets first)
INSERT INTO bt_gap (sw_partition, sw_write_time, v)
  SELECT g % 2, to_timestamp(11), g FROM generate_series(2, 101) g;
COMMIT;
SET statement_timeout = '60s';
SET streamwm.batch_size = 2;
SELECT streamwm.process('bt_gap', now => to_timestamp(20));
RESET streamwm.batch_size;
RESET statement_timeout;
SELECT partition, processed_offset FROM streamwm.partitions WHERE stream = 'bt_gap'::regclass ORDER BY 1;
SELECT events, late_events FROM streamwm.streams WHERE stream = 'bt_gap'::regclass;
SELECT streamwm.drop_stream('bt_gap');

DROP FUNCTION bt_diff(regclass, regclass);
DROP PROCEDURE bt_round(int);
DROP PROCEDURE bt_process(int);
SELECT streamwm.drop_stream(s, cascade => true) FROM unnest(ARRAY['bt_ref', 'bt_b1', 'bt_b2', 'bt_b5']) s;
