-- The YDB example live: the background worker processes the stream while
-- events arrive with their real write time (scaled to seconds: delay 1 s,
-- hop 1 s, size 2 s).  Run by test/demo.sh, which then prints the results
-- as their windows close.
SELECT streamwm.create_stream('input_live', 'pass int8, payload text',
                              watermark_delay => 'PT1S',
                              watermark_granularity => '200 milliseconds');
SELECT streamwm.create_query('example_live',
  $$SELECT array_agg(payload ORDER BY payload) AS result
      FROM input_live WHERE pass > 0$$,
  hop => 'PT1S', size => 'PT2S');
