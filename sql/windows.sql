-- SPEC section 5: epoch-aligned hopping windows, any aggregate, result
-- tables, replay.  Results are compared with a model computed by plain SQL.
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
-- streams here are stepped by the tests themselves (streamwm.process(now => ...)): no background worker steps in
DO $$BEGIN EXECUTE format('ALTER DATABASE %I SET streamwm.enabled = off', current_database()); END$$;
CREATE EXTENSION IF NOT EXISTS streamwm;

-- Events in order (none late), some before the epoch, at odd fractions.
SELECT streamwm.create_stream('ws', 'v int');
-- the model: window starts of t for a hop and size, computed independently
CREATE FUNCTION model_starts(t timestamptz, hop_s int, k int) RETURNS SETOF timestamptz
LANGUAGE sql IMMUTABLE AS $$
    SELECT to_timestamp(0) + make_interval(secs => (floor(extract(epoch FROM t) / hop_s) - j) * hop_s)
      FROM generate_series(0, k - 1) j
$$;

-- queries for hop 3 s and 7 s with size/hop = 1, 2, 5
SELECT streamwm.create_query(format('ws_h%s_k%s', h, k),
           'SELECT count(*) AS n, sum(v) AS s FROM ws',
           hop => make_interval(secs => h), size => make_interval(secs => h * k))
  FROM (VALUES (3), (7)) hs(h), (VALUES (1), (2), (5)) ks(k)
 ORDER BY h, k;

SELECT sum(streamwm.ingest('ws', jsonb_build_object('v', i),
                           write_time => to_timestamp(-30.25 + i * 1.7)))
  FROM generate_series(0, 120) i;
SELECT streamwm.process('ws');
SELECT watermark FROM streamwm.streams WHERE stream = 'ws'::regclass;

-- every result table equals the model, window for window
CREATE FUNCTION check_query(qname text, hop_s int, k int) RETURNS TABLE (query text, windows bigint, missing bigint, extra bigint)
LANGUAGE plpgsql AS $$
DECLARE
    w timestamptz := (SELECT watermark FROM streamwm.streams WHERE stream = 'ws'::regclass);
BEGIN
    CREATE TEMP TABLE model ON COMMIT DROP AS
    SELECT ws AS window_start, ws + make_interval(secs => hop_s * k) AS window_end,
           count(*) AS n, sum(v) AS s
      FROM ws e, model_starts(e.sw_event_time, hop_s, k) ws
     GROUP BY ws
    HAVING ws + make_interval(secs => hop_s * k) <= w;
    EXECUTE format('CREATE TEMP TABLE got ON COMMIT DROP AS SELECT window_start, window_end, n, s FROM %I', qname);
    RETURN QUERY SELECT qname, (SELECT count(*) FROM got),
        (SELECT count(*) FROM (SELECT * FROM model EXCEPT SELECT * FROM got) x),
        (SELECT count(*) FROM (SELECT * FROM got EXCEPT SELECT * FROM model) x);
    DROP TABLE model, got;
END $$;
SELECT c.* FROM (VALUES (3), (7)) hs(h), (VALUES (1), (2), (5)) ks(k),
       check_query(format('ws_h%s_k%s', h, k), h, k) c ORDER BY h, k;

-- an event belongs to exactly size/hop windows (inside the closed range)
SELECT h, k, count(*) AS windows_of_event
  FROM (VALUES (3), (7)) hs(h), (VALUES (1), (2), (5)) ks(k),
       LATERAL (SELECT 1 FROM ws_h3_k5 WHERE h = 3 AND k = 5 AND window_start <= to_timestamp(50) AND to_timestamp(50) < window_end
                UNION ALL SELECT 1 FROM ws_h3_k2 WHERE h = 3 AND k = 2 AND window_start <= to_timestamp(50) AND to_timestamp(50) < window_end
                UNION ALL SELECT 1 FROM ws_h3_k1 WHERE h = 3 AND k = 1 AND window_start <= to_timestamp(50) AND to_timestamp(50) < window_end
                UNION ALL SELECT 1 FROM ws_h7_k5 WHERE h = 7 AND k = 5 AND window_start <= to_timestamp(50) AND to_timestamp(50) < window_end
                UNION ALL SELECT 1 FROM ws_h7_k2 WHERE h = 7 AND k = 2 AND window_start <= to_timestamp(50) AND to_timestamp(50) < window_end
                UNION ALL SELECT 1 FROM ws_h7_k1 WHERE h = 7 AND k = 1 AND window_start <= to_timestamp(50) AND to_timestamp(50) < window_end) x
 GROUP BY h, k ORDER BY h, k;
-- window bounds are aligned to the epoch, including before it
SELECT DISTINCT extract(epoch FROM window_start)::numeric % 7 = 0 AS aligned,
       window_end - window_start AS size
  FROM ws_h7_k5;
SELECT window_start, window_end, n FROM ws_h7_k2 ORDER BY window_start LIMIT 3;

-- Replay: moving a query back upserts the same rows again, no duplicates --
-- and the general plan gives what the pane plan gave.
SELECT plan = 'pane' AS uses_panes FROM streamwm.queries WHERE query = 'ws_h3_k5';
CREATE TEMP TABLE before_replay AS SELECT * FROM ws_h3_k5;
UPDATE streamwm.query_def SET closed_until = '-infinity', plan = 'general' WHERE name = 'ws_h3_k5';
SELECT plan = 'pane' AS uses_panes FROM streamwm.queries WHERE query = 'ws_h3_k5';
SELECT streamwm.process('ws');
SELECT (SELECT count(*) FROM ws_h3_k5) AS rows_now, (SELECT count(*) FROM before_replay) AS rows_before,
       (SELECT count(*) FROM (SELECT * FROM ws_h3_k5 EXCEPT SELECT * FROM before_replay) d) AS changed;

-- Any aggregate, expressions, WHERE, GROUP BY several keys, HAVING.
CREATE FUNCTION prod_step(numeric, int) RETURNS numeric LANGUAGE sql IMMUTABLE
    AS 'SELECT coalesce($1, 1) * $2';
CREATE AGGREGATE product(int) (sfunc = prod_step, stype = numeric);
SELECT streamwm.create_stream('sales', 'shop text, item text, qty int, price numeric',
                              partitions => 2, watermark_delay => '2 s');
SELECT streamwm.create_query('sales_stats', $$
    SELECT shop, upper(item) AS item, count(*) AS n, sum(qty) AS qty, avg(price)::numeric(10,2) AS avg_price,
           min(price) AS min_price, max(price) AS max_price,
           array_agg(qty ORDER BY qty DESC) AS qtys,
           string_agg(item, ',' ORDER BY item) AS items,
           jsonb_agg(qty ORDER BY qty) AS qty_json,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY price) AS median_price,
           product(qty) AS qty_product,
           sum(qty * price) AS revenue,
           count(*) FILTER (WHERE qty > 1) AS multi
      FROM sales
     WHERE shop <> 'closed'
     GROUP BY shop, upper(item)
    HAVING count(*) >= 1$$,
    hop => '10 s', size => '20 s', start_from => 'earliest');
\d sales_stats
SELECT streamwm.ingest('sales', jsonb_build_object('shop', shop, 'item', item, 'qty', qty, 'price', price),
                       partition => p, write_time => to_timestamp(t))
  FROM (VALUES ('a', 'pen', 1, 1.5, 0, 101), ('a', 'Pen', 3, 1.25, 1, 103), ('b', 'ink', 2, 7, 0, 104),
               ('a', 'pen', 2, 1.75, 1, 112), ('closed', 'pen', 9, 1, 0, 113), ('b', 'ink', 1, 6.5, 0, 118),
               ('b', 'cap', 5, 0.5, 1, 121), ('a', 'pen', 4, 2, 0, 133), ('a', 'pen', 1, 2, 1, 135)) v(shop, item, qty, price, p, t);
SELECT streamwm.process('sales');
SELECT * FROM sales_stats ORDER BY window_start, shop, item;
-- the same by plain SQL over the stream's rows
SELECT count(*) AS differences FROM (
  (SELECT * FROM sales_stats
   EXCEPT
   SELECT ws, ws + interval '20 s', shop, upper(item), count(*), sum(qty), avg(price)::numeric(10,2),
          min(price), max(price), array_agg(qty ORDER BY qty DESC), string_agg(item, ',' ORDER BY item),
          jsonb_agg(qty ORDER BY qty), percentile_cont(0.5) WITHIN GROUP (ORDER BY price),
          product(qty), sum(qty * price), count(*) FILTER (WHERE qty > 1)
     FROM sales, model_starts(sw_event_time, 10, 2) ws
    WHERE shop <> 'closed' AND ws + interval '20 s' <= (SELECT watermark FROM streamwm.streams WHERE stream = 'sales'::regclass)
    GROUP BY ws, shop, upper(item))
) d;

-- avg of integers and numeric by panes equals avg over the rows, to the digit
SELECT streamwm.create_query('sales_avg', 'SELECT shop, avg(qty) AS aq, avg(price) AS ap, count(*) AS n FROM sales GROUP BY shop',
                             hop => '10 s', size => '20 s', start_from => 'earliest');
SELECT plan = 'pane' AS uses_panes FROM streamwm.queries WHERE query = 'sales_avg';
SELECT streamwm.process('sales');
SELECT window_start, shop, aq, ap, n FROM sales_avg ORDER BY 1, 2;
SELECT count(*) AS differences FROM (
  SELECT window_start, shop, aq::text, ap::text, n FROM sales_avg
  EXCEPT
  SELECT ws, shop, avg(qty)::text, avg(price)::text, count(*) FROM sales, model_starts(sw_event_time, 10, 2) ws
   WHERE ws + interval '20 s' <= (SELECT watermark FROM streamwm.streams WHERE stream = 'sales'::regclass)
   GROUP BY ws, shop) d;

-- GROUP BY by position and by output name; ORDER BY is harmless
SELECT streamwm.create_query('sales_by_pos', 'SELECT shop, count(*) AS n FROM sales GROUP BY 1 ORDER BY 1',
                             hop => '10 s', size => '10 s', start_from => 'earliest');
SELECT streamwm.create_query('sales_by_name', 'SELECT s.shop AS who, sum(qty) AS q FROM sales AS s GROUP BY who',
                             hop => '10 s', size => '10 s', start_from => 'earliest');
SELECT streamwm.process('sales');
SELECT window_start, shop, n FROM sales_by_pos ORDER BY 1, 2;
SELECT window_start, who, q FROM sales_by_name ORDER BY 1, 2;

-- An existing result table with a matching unique index is accepted ...
CREATE TABLE my_results (window_start timestamptz, window_end timestamptz, shop text, n bigint, note text);
CREATE UNIQUE INDEX ON my_results (shop, window_start) NULLS NOT DISTINCT;
SELECT streamwm.create_query('into_mine', 'SELECT shop, count(*) AS n FROM sales GROUP BY shop',
                             hop => '10 s', size => '10 s', result_table => 'my_results', start_from => 'earliest');
SELECT streamwm.process('sales');
SELECT window_start, shop, n, note FROM my_results ORDER BY 1, 2;
-- ... one without is refused, and nothing is stored
CREATE TABLE no_key (window_start timestamptz, window_end timestamptz, shop text, n bigint);
SELECT streamwm.create_query('into_nokey', 'SELECT shop, count(*) AS n FROM sales GROUP BY shop',
                             hop => '10 s', size => '10 s', result_table => 'no_key');
CREATE TABLE wrong_cols (window_start timestamptz, window_end timestamptz, n bigint);
SELECT streamwm.create_query('into_wrong', 'SELECT shop, count(*) AS n FROM sales GROUP BY shop',
                             hop => '10 s', size => '10 s', result_table => 'wrong_cols');
SELECT count(*) FROM streamwm.queries WHERE query IN ('into_nokey', 'into_wrong');

-- A query without GROUP BY emits no row for a window with no event passing WHERE.
SELECT streamwm.create_query('empty_windows', $$SELECT count(*) AS n FROM sales WHERE shop = 'b'$$,
                             hop => '10 s', size => '10 s', start_from => 'earliest');
SELECT streamwm.process('sales');
SELECT window_start, n FROM empty_windows ORDER BY 1;
