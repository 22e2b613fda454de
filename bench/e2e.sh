#!/usr/bin/env bash
# End to end with the background worker (issue 9, "The benchmark", parts 3
# and 4, and the burst target): never part of the tests.
#
#   bash bench/e2e.sh [BURST_ROWS] [STEP_SECONDS] [RATES]
#        defaults:    2000000      20             "20000 50000 100000 200000"
#   (run test/setup.sh first, or set PG_BIN to the bin directory of the
#    PostgreSQL installation streamwm was installed into)
#
# A throwaway cluster with shared_preload_libraries = 'streamwm' (one
# worker), synchronous_commit = off.  Query q5 (count of bids per auction,
# hop 2 s, size 10 s) on a stream of Nexmark bids (auction, bidder, price).
#
# 1. Burst: BURST_ROWS bids (bench/nexmark/gen.c, 50,000 bids a second of
#    event time, given as sw_write_time) loaded with one COPY while
#    the worker runs; events/s = rows / (time from the start of the load
#    until streamwm.streams.unprocessed_events is 0 and W has passed the
#    newest event minus the delay); then the result table against one
#    set-based recomputation of every closed window (differences must be 0).
# 2. Sustained: for each offered rate R (rows/s), 2 pgbench clients insert
#    batches of 100 bids (event time = the write time, the server's clock)
#    at R / 100 transactions/s (pgbench -R) for STEP_SECONDS, while a
#    procedure polls the result table every 100 ms and records when each
#    window first appears.  Reported per rate: rows/s achieved, the largest
#    backlog (rows inserted by the statistics, flushed about every second,
#    minus rows processed; sampled every 0.5 s), whether the worker kept up
#    (backlog gone within 8 s of the end), and the latency from a
#    window's end (its event time = wall clock) to its row being visible,
#    median and 99th percentile.  The target: keeping up at 200,000 rows/s
#    with p99 under watermark_granularity + 0.5 s.
# 3. Memory and disk, after each rate: the worker's peak RSS (VmHWM), the
#    stream table's and the pane state's size.
# Writes bench/e2e.md, and bench/e2e.png (gnuplot, if installed): latency
# against offered rate; appends the same section to bench/REPORT.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
burst=${1:-2000000}; step_s=${2:-20}; rates=${3:-"20000 50000 100000 200000"}
. "$here/common.sh"
bench_as_postgres e2e.sh "$burst" "$step_s" "$rates"
out=${BENCH_OUT:-$here}
commit=${COMMIT:-$(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo '?')}
settings=("shared_preload_libraries = 'streamwm'" "shared_buffers = '1GB'" "max_wal_size = '8GB'"
          "synchronous_commit = off" "streamwm.query_timeout = 0")
bench_cluster "${settings[@]}"
now_ns() { date +%s%N; }

cc -O2 -o "$dir/gen" "$here/nexmark/gen.c" -lm
worker_pid() { $PSQL -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'streamwm worker' LIMIT 1"; }
# the worker's peak resident set (shared buffers it touched included) and
# its private memory now
vmhwm() { local p; p=$(worker_pid); [ -n "$p" ] && awk '/VmHWM/ { h = $2 } /RssAnon/ { a = $2 } END { print h "/" a }' "/proc/$p/status" 2>/dev/null || echo '?'; }

fresh_stream() {   # fresh_stream: bids + q5, the worker serving it
    $PSQL -c "SET client_min_messages = warning" \
          -c "SELECT streamwm.drop_stream(stream, cascade => true) FROM streamwm.stream_def WHERE stream = to_regclass('bids')" \
          -c "DROP TABLE IF EXISTS q5r" >/dev/null
    $PSQL -c "SELECT streamwm.create_stream('bids', 'auction int8, bidder int8, price int8',
                                            watermark_delay => '1 s', watermark_granularity => '1 s')" >/dev/null
    $PSQL -c "SELECT streamwm.create_query('q5r', 'SELECT auction, count(*) AS n FROM bids GROUP BY auction',
                                           hop => '2 s', size => '10 s')" >/dev/null
}
caught_up() {   # caught_up ROWS W_TARGET: ROWS rows read and W at least W_TARGET
    # (the catalog's counters: the streams view counts the backlog row by
    # row, which would compete with the worker for the CPU)
    $PSQL -c "SELECT d.events >= $1 AND d.watermark >= '$2'::timestamptz
                FROM streamwm.stream_def d WHERE d.stream = 'bids'::regclass"
}

########################################################################
# 1. Burst
########################################################################
echo "== burst: $burst bids in one COPY while the worker runs"
fresh_stream
# the launcher starts the database's worker within its naptime: wait for it
until [ -n "$(worker_pid)" ]; do sleep 0.2; done
sleep 1
span=$(( burst / 50000 )); [ "$span" -lt 10 ] && span=10
base=$($PSQL -c "SELECT extract(epoch FROM date_trunc('minute', now() - interval '2 hours'))::int8")
# 50,000 bids a second of event time (54,348 events of all kinds), up to
# 1 s out of order: the stream's watermark_delay, so none is late
"$dir/gen" -t bids -r 54348 -d 1000 -s 42 -b "$base" -n "$burst" >"$dir/burst.tsv"
s=$(now_ns)
$PSQL -c "COPY bids (auction, bidder, price, sw_write_time) FROM STDIN" <"$dir/burst.tsv"
loaded=$(now_ns)
wtarget=$($PSQL -c "SELECT max(sw_event_time) - interval '1 s' FROM bids")
until [ "$(caught_up "$burst" "$wtarget")" = t ]; do sleep 0.05; done
e=$(now_ns)
load_s=$(awk -v a="$s" -v b="$loaded" 'BEGIN { printf "%.2f", (b - a) / 1e9 }')
total_s=$(awk -v a="$s" -v b="$e" 'BEGIN { printf "%.2f", (b - a) / 1e9 }')
burst_eps=$(awk -v n="$burst" -v t="$total_s" 'BEGIN { printf "%d", n / t }')
# the closed windows, recomputed in one pass from the stream's rows
diffs=$($PSQL -c "
    WITH w AS (SELECT watermark FROM streamwm.streams WHERE stream = 'bids'::regclass),
    model AS (
      SELECT ws AS window_start, ws + interval '10 s' AS window_end, b.auction, count(*) AS n
        FROM bids b, w, generate_series(date_bin('2 s', b.sw_event_time, 'epoch') - interval '8 s',
                                       date_bin('2 s', b.sw_event_time, 'epoch'), interval '2 s') ws
       WHERE ws + interval '10 s' <= w.watermark
         AND NOT EXISTS (SELECT 1 FROM streamwm.late_events l WHERE l.stream = 'bids'::regclass
                            AND l.partition = b.sw_partition AND l.sw_offset = b.sw_offset)
       GROUP BY 1, 2, 3)
    SELECT count(*) FROM ((TABLE model EXCEPT SELECT window_start, window_end, auction, n FROM q5r)
                          UNION ALL (SELECT window_start, window_end, auction, n FROM q5r EXCEPT TABLE model)) d")
late=$($PSQL -c "SELECT late_events FROM streamwm.streams WHERE stream = 'bids'::regclass")
echo "  load ${load_s} s, processed ${total_s} s after the load began: $burst_eps events/s; $diffs differences, $late late"

########################################################################
# 2. and 3. Sustained ingest at stepped rates
########################################################################
cat >"$dir/bids.sql" <<'EOF'
INSERT INTO bids (auction, bidder, price)
SELECT CASE WHEN random() < 0.5 THEN 1 ELSE 1 + floor(random() * 1000)::int8 END,
       CASE WHEN random() < 0.75 THEN 1 + floor(random() * 100)::int8 ELSE 1 + floor(random() * 10000)::int8 END,
       1 + floor(random() * 1000)::int8
  FROM generate_series(1, 100);
EOF
$PSQL <<'EOF'
CREATE TABLE seen (window_start timestamptz PRIMARY KEY, window_end timestamptz, seen_at timestamptz);
CREATE TABLE backlog (at timestamptz, events bigint);
CREATE PROCEDURE watch(seconds float8) LANGUAGE plpgsql AS $$
DECLARE
    stop timestamptz := clock_timestamp() + make_interval(secs => seconds);
    last_backlog timestamptz := '-infinity';
BEGIN
    WHILE clock_timestamp() < stop LOOP
        INSERT INTO seen
        SELECT DISTINCT r.window_start, r.window_end, clock_timestamp() FROM q5r r
         WHERE r.window_start > coalesce((SELECT max(window_start) FROM seen), '-infinity')
        ON CONFLICT DO NOTHING;
        IF clock_timestamp() >= last_backlog + interval '0.5 s' THEN
            -- rows inserted (the statistics, flushed about every second)
            -- minus rows processed: cheap, unlike counting the backlog
            INSERT INTO backlog SELECT clock_timestamp(),
                   greatest((SELECT n_tup_ins FROM pg_stat_user_tables WHERE relid = 'bids'::regclass)
                            - d.events, 0)
              FROM streamwm.stream_def d WHERE d.stream = 'bids'::regclass;
            last_backlog := clock_timestamp();
        END IF;
        COMMIT;
        PERFORM pg_sleep(0.1);
    END LOOP;
END $$;
EOF
: >"$dir/rates.txt"
for rate in $rates; do
    echo "== sustained: $rate rows/s offered, 2 clients, $step_s s"
    fresh_stream
    $PSQL -c "TRUNCATE seen, backlog"
    sleep 2
    t0=$($PSQL -c "SELECT clock_timestamp()")
    $PSQL -c "CALL watch($step_s + 8)" &
    watcher=$!
    tps=$(awk -v r="$rate" 'BEGIN { printf "%.1f", r / 100 }')
    pgbench -n -c 2 -j 2 -R "$tps" -T "$step_s" -f "$dir/bids.sql" postgres >"$dir/pgbench.$rate.log" 2>&1 || true
    t1=$($PSQL -c "SELECT clock_timestamp()")
    wait "$watcher"
    rows=$($PSQL -c "SELECT count(*) FROM bids")
    endb=$($PSQL -c "SELECT $rows - events FROM streamwm.stream_def WHERE stream = 'bids'::regclass")
    got=$(awk -v n="$rows" -v s="$step_s" 'BEGIN { printf "%d", n / s }')
    maxb=$($PSQL -c "SELECT coalesce(max(events), 0) FROM backlog")
    # windows that ended while rows were offered (and a granularity later)
    read -r p50 p99 nwin <<<"$($PSQL -F ' ' -c "
        SELECT coalesce(round(extract(epoch FROM percentile_cont(0.5) WITHIN GROUP (ORDER BY seen_at - window_end))::numeric, 2)::text, '-'),
               coalesce(round(extract(epoch FROM percentile_cont(0.99) WITHIN GROUP (ORDER BY seen_at - window_end))::numeric, 2)::text, '-'),
               count(*)
          FROM seen WHERE window_end > '$t0'::timestamptz + interval '10 s' AND window_end <= '$t1'")"
    kept=no; [ "${endb:-1}" = 0 ] && kept=yes
    rss=$(vmhwm)
    read -r stream_mb pane_mb <<<"$($PSQL -F ' ' -c "
        SELECT round(pg_total_relation_size('bids') / 1048576.0, 1),
               round(coalesce(sum(pg_total_relation_size(q.pane_table)), 0) / 1048576.0, 1)
          FROM streamwm.query_def q WHERE q.stream = 'bids'::regclass")"
    echo "  $got rows/s achieved, backlog max $maxb end $endb (kept up: $kept), latency p50 ${p50}s p99 ${p99}s over $nwin windows, worker peak RSS ${rss} kB, stream ${stream_mb} MB, panes ${pane_mb} MB"
    echo "$rate $got $maxb $endb $kept $p50 $p99 $nwin $rss $stream_mb $pane_mb" >>"$dir/rates.txt"
done

########################################################################
# Report
########################################################################
ver=$($PSQL -c "SHOW server_version")
{
echo "# streamwm end to end (bench/e2e.sh)"
echo
echo "$(date -u '+%Y-%m-%d %H:%M UTC'), commit $commit, \`bash bench/e2e.sh $burst $step_s \"$rates\"\`"
echo
echo "- Machine: $(nproc) cores, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo) RAM; PostgreSQL $ver, a throwaway cluster: $(IFS=';'; echo "${settings[*]}" | sed 's/;/, /g'), fsync = off"
echo "- Query q5r: \`SELECT auction, count(*) AS n FROM bids GROUP BY auction\`, hop 2 s, size 10 s; stream: watermark_delay 1 s, watermark_granularity 1 s, 1 partition"
echo
echo "## Burst"
echo
echo "$burst bids in one COPY (event times over $span s) while the worker runs: load $load_s s, every row processed and W past the newest event $total_s s after the load began: **$burst_eps events/s** (target: 200,000). Results against a one-pass recomputation of every closed window: $diffs differences ($late late events)."
echo
echo "## Sustained ingest, 2 clients (pgbench -R, 100 rows a transaction)"
echo
echo "| offered rows/s | achieved rows/s | max backlog | backlog at end | kept up | latency p50 (s) | latency p99 (s) | windows | worker peak RSS / private now (kB) | stream (MB) | pane state (MB) |"
echo "|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|"
while read -r rate got maxb endb kept p50 p99 nwin rss smb pmb; do
    echo "| $rate | $got | $maxb | $endb | $kept | $p50 | $p99 | $nwin | $rss | $smb | $pmb |"
done <"$dir/rates.txt"
echo
echo "Latency: from a window's end (event time = the write time, the server's clock) to the moment a poller (every 100 ms) first saw its row. A window cannot close before W passes its end, i.e. before watermark_delay (1 s) after it; the target (p99 < watermark_granularity + 0.5 s) applies to what comes after that: p99 minus 1 s. Windows: those that ended at least 10 s after the clients started and before they stopped. Peak RSS counts the shared buffers the worker touched (1 GB at most); private is its own memory (RssAnon) after the step."
} >"$out/e2e.md"
cat "$out/e2e.md" >>"$(bench_report)"
if command -v gnuplot >/dev/null; then
    gnuplot <<EOF || true
set terminal png size 800,500
set output "$out/e2e.png"
set title "streamwm q5 end to end: window end to result visible"
set xlabel "offered rows/s (2 clients)"
set ylabel "latency (s)"
set key left top
plot "$dir/rates.txt" using 1:6 with linespoints title "p50", "$dir/rates.txt" using 1:7 with linespoints title "p99"
EOF
fi
cat "$out/e2e.md"
