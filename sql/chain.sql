-- SPEC section 10, chaining: create_query(..., result_stream => s) writes
-- each closed window's rows into the stream s, with window_start as their
-- write time (their event time there), so that a query over s computes
-- windows of windows (the Flink draft's sequences of windows: the result
-- of [t, t+5) lands in [t, t+5) downstream).  The first stage's progress
-- is a promise about the rows to come, so the second stage's windows close
-- when the first stage's do.  Compared with the direct computation.
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
-- streams here are stepped by the tests themselves (streamwm.process(now => ...)): no background worker steps in
DO $$BEGIN EXECUTE format('ALTER DATABASE %I SET streamwm.enabled = off', current_database()); END$$;
CREATE EXTENSION IF NOT EXISTS streamwm;

SELECT streamwm.create_stream('ch_bids', 'auction int, price int', idle_timeout => '1 hour',
                              partitions => 2);
SELECT streamwm.create_stream('ch_per5', 'auction int, n bigint, top int, window_start timestamptz',
                              idle_timeout => '1 hour');
SELECT streamwm.create_query('ch_stage1',
  'SELECT auction, count(*) AS n, max(price) AS top FROM ch_bids GROUP BY auction',
  hop => '5 s', size => '5 s', result_stream => 'ch_per5');
-- windows of windows: 10 s tumbling and 20 s hopping by 10 s over the 5 s ones
SELECT streamwm.create_query('ch_stage2',
  'SELECT auction, sum(n) AS total, max(top) AS top FROM ch_per5 GROUP BY auction',
  hop => '10 s', size => '10 s');
SELECT streamwm.create_query('ch_stage2h',
  'SELECT auction, sum(n) AS total FROM ch_per5 GROUP BY auction', hop => '10 s', size => '20 s');
SELECT streamwm.create_query('ch_direct',
  'SELECT auction, count(*) AS total, max(price) AS top FROM ch_bids GROUP BY auction',
  hop => '10 s', size => '10 s');
SELECT streamwm.create_query('ch_directh',
  'SELECT auction, count(*) AS total FROM ch_bids GROUP BY auction', hop => '10 s', size => '20 s');
SELECT query, result_table FROM streamwm.queries WHERE query LIKE 'ch\_%' ORDER BY 1;

-- refused: a result stream that lacks a column, that has an event_time,
-- that already has a writer, the stream the query reads, both targets, and
-- a stream given as result_table
SELECT streamwm.create_stream('ch_narrow', 'auction int', idle_timeout => '1 hour');
SELECT streamwm.create_query('ch_bad', 'SELECT auction, count(*) AS n FROM ch_bids GROUP BY auction',
  hop => '5 s', size => '5 s', result_stream => 'ch_narrow');
SELECT streamwm.create_stream('ch_timed', 'ts timestamptz, auction int, n bigint', event_time => 'ts');
SELECT streamwm.create_query('ch_bad', 'SELECT auction, count(*) AS n FROM ch_bids GROUP BY auction',
  hop => '5 s', size => '5 s', result_stream => 'ch_timed');
SELECT streamwm.create_query('ch_bad', 'SELECT auction, count(*) AS n, max(price) AS top FROM ch_bids GROUP BY auction',
  hop => '5 s', size => '5 s', result_stream => 'ch_per5');
SELECT streamwm.create_query('ch_bad', 'SELECT auction, max(price) AS price FROM ch_bids GROUP BY auction',
  hop => '5 s', size => '5 s', result_stream => 'ch_bids');
SELECT streamwm.create_query('ch_bad', 'SELECT auction, count(*) AS n FROM ch_bids GROUP BY auction',
  hop => '5 s', size => '5 s', result_stream => 'ch_narrow', result_table => 'x');
SELECT streamwm.create_query('ch_bad', 'SELECT auction, count(*) AS n FROM ch_bids GROUP BY auction',
  hop => '5 s', size => '5 s', result_table => 'ch_narrow');
SELECT count(*) AS bad_queries FROM streamwm.queries WHERE query = 'ch_bad';

-- 500 bids over 50 s into two partitions, in three committed batches, each
-- followed by a step of each stage
CREATE PROCEDURE ch_load(lo int, hi int) LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO ch_bids (sw_partition, sw_write_time, auction, price)
    SELECT i % 2, to_timestamp(i / 10.0), i % 3, (i * 7919) % 1000 FROM generate_series(lo, hi) i;
  COMMIT;
  PERFORM streamwm.process('ch_bids', now => now());
  COMMIT;
  PERFORM streamwm.process('ch_per5', now => now());
END $$;
CALL ch_load(1, 123);
CALL ch_load(124, 345);
CALL ch_load(346, 500);

-- the first stage's rows: one per window and auction, in window order, the
-- window start as event time
SELECT window_start, count(*) AS auctions, sum(n) AS bids,
       bool_and(sw_event_time = window_start) AS event_time_is_window_start
  FROM ch_per5 GROUP BY 1 ORDER BY 1;
SELECT count(*) AS out_of_order FROM ch_per5 a JOIN ch_per5 b
    ON a.sw_partition = b.sw_partition AND a.sw_offset < b.sw_offset AND a.window_start > b.window_start;
SELECT stream, watermark, late_events FROM streamwm.streams
 WHERE stream IN ('ch_bids'::regclass, 'ch_per5'::regclass) ORDER BY 1;
SELECT query, closed_until, windows_emitted FROM streamwm.queries WHERE query LIKE 'ch\_%' ORDER BY 1;

-- windows of windows equal the direct computation, window by window
SELECT count(*) AS differences FROM (
  (SELECT window_start, window_end, auction, total, top FROM ch_stage2
   EXCEPT SELECT window_start, window_end, auction, total, top FROM ch_direct)
  UNION ALL
  (SELECT window_start, window_end, auction, total, top FROM ch_direct
   EXCEPT SELECT window_start, window_end, auction, total, top FROM ch_stage2)) d;
SELECT count(*) AS differences FROM (
  (SELECT window_start, window_end, auction, total FROM ch_stage2h
   EXCEPT SELECT window_start, window_end, auction, total FROM ch_directh)
  UNION ALL
  (SELECT window_start, window_end, auction, total FROM ch_directh
   EXCEPT SELECT window_start, window_end, auction, total FROM ch_stage2h)) d;
SELECT count(*) AS windows, sum(total) AS bids FROM ch_stage2;

-- a chained query's windows were appended to a stream: no recompute; a new
-- text must fit the stream's columns
SELECT streamwm.recompute('ch_stage1', '-infinity', 'infinity');
SELECT streamwm.alter_query('ch_stage1',
  'SELECT auction, count(*) AS n, min(price) AS lowest FROM ch_bids GROUP BY auction');
SELECT streamwm.alter_query('ch_stage1',
  'SELECT auction, count(*) AS n, min(price) AS top FROM ch_bids GROUP BY auction');
SELECT definition FROM streamwm.queries WHERE query = 'ch_stage1';

-- a stream a query writes into cannot be dropped from under it
SELECT streamwm.drop_stream('ch_per5');
DROP TABLE ch_per5;
SELECT count(*) AS still_there FROM streamwm.streams WHERE stream = 'ch_per5'::regclass;

SELECT streamwm.drop_query(q, drop_result => true)
  FROM unnest('{ch_stage2,ch_stage2h,ch_direct,ch_directh}'::text[]) q;
SELECT streamwm.drop_query('ch_stage1');
DROP PROCEDURE ch_load(int, int);
SELECT streamwm.drop_stream(s)
  FROM unnest('{ch_bids,ch_per5,ch_narrow,ch_timed}'::regclass[]) s;
