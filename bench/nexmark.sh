#!/usr/bin/env bash
# Nexmark benchmark (issue 9, "The benchmark", parts 1 and 2): every
# comparison side by side in one invocation, on the same rows, with ratios.
# Writes bench/results.md (and bench/nexmark.png when gnuplot is there).
#
#   bash bench/nexmark.sh [N] [INGEST_ROWS] [RUNS]
#        defaults:        10000000 1000000 3
#   environment: RATE (events per second of event time, all kinds; default
#   so that the N bids span SPAN = 1000 s, 500 panes of 2 s), DELAY_MS (max
#   out-of-orderness, default 1000; the streams get watermark_delay =
#   DELAY_MS so no row is late), NAIVE_SAMPLE (windows the naive approach
#   times per configuration, default 25), PROC_RUNS (runs of each processing
#   configuration, default RUNS), PGBENCH_S (seconds of each
#   pgbench run, default 10), PG_BIN (the bin directory of the PostgreSQL
#   streamwm was installed into).
#
# Rows: bench/nexmark/gen.c (built here with cc -O2), Nexmark bids
# (auction, bidder, price, event time), COPY text.  Event time 0 is a
# minute-aligned instant SPAN + 1 h before the run, so every row is within
# the stream's retention (1 day) and process() deletes nothing.
#
# 1. Ingest, rows/s, 1 and 2 clients, each into a fresh stream
#    (create_stream('x', 'auction int8, bidder int8, price int8'), defaults:
#    1 partition) and a fresh plain table x (auction int8, bidder int8,
#    price int8, sw_write_time timestamptz): the time column has the
#    stream's name so every statement is the same text for both.
#    INGEST_ROWS rows; with 2 clients each loads half, concurrently.
#      copy    COPY x (...) FROM STDIN, one per client
#      multi   INSERT INTO x (...) VALUES (...), 1,000 rows a statement,
#              each statement its own transaction
#      ingest  stream: SELECT streamwm.ingest('x', '[{...}, ...]') of 1,000
#              rows; plain: INSERT INTO x SELECT * FROM
#              jsonb_populate_recordset(NULL::x, '[...]') of the same text
#      pgbench single-row INSERT, pgbench -M prepared, PGBENCH_S seconds,
#              --random-seed fixed, so both tables get the same rows
#    CHECKPOINT before each timed load; the table order alternates per run.
# 2. Processing, events/s, N bids.  Configurations (query, hop, size):
#      q5  SELECT auction, count(*) AS n FROM bids GROUP BY auction,
#          hop 2 s, size 2 / 10 / 20 / 120 s (size/hop 1, 5, 10, 60)
#      q7  SELECT max(price) AS p FROM bids, tumbling 10 s
#      q11 SELECT bidder, count(*) AS n FROM bids GROUP BY bidder, session
#          windows with gap 10 s (create_session_query; written "q11 10 10"):
#          its one-pass is gaps-and-islands with window functions over the
#          plain table; no naive (sessions are not fixed windows)
#    For each, RUNS times: a fresh stream and query, the N rows COPYed in,
#    VACUUM ANALYZE, CHECKPOINT (untimed); then streamwm.process('bids',
#    now => ...) called until streamwm.streams.unprocessed_events is 0,
#    each call timed.  Beside it, on a plain table with the same N rows:
#      one-pass  one INSERT ... SELECT ... GROUP BY window, key ... ON
#                CONFLICT DO UPDATE over every window W has closed
#      naive     per window, INSERT ... SELECT ... WHERE event_time in the
#                window GROUP BY key ON CONFLICT DO UPDATE, each its own
#                transaction, as a cron job would (a btree on event_time);
#                NAIVE_SAMPLE windows spread evenly are timed and the time
#                extrapolated to all windows (once, not RUNS times)
#    streamwm's result table is compared with the one-pass one (rows in one
#    and not the other, both ways) and with the naive one on the sampled
#    windows: must be 0.
# Parts 3 and 4 of the issue (end to end with the worker, memory) are not
# here yet.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
nbids=${1:-10000000}; irows=${2:-1000000}; runs=${3:-3}
proc_runs=${PROC_RUNS:-$runs}
span=${SPAN:-1000}
rate=${RATE:-$(( (nbids * 50 / 46 + span - 1) / span ))}
delay=${DELAY_MS:-1000}
sample=${NAIVE_SAMPLE:-25}
pgbs=${PGBENCH_S:-10}
. "$here/common.sh"
BENCH_ENV="SPAN PROC_RUNS RATE DELAY_MS NAIVE_SAMPLE PGBENCH_S" bench_as_postgres nexmark.sh "$nbids" "$irows" "$runs"
out=${BENCH_OUT:-$here}
commit=${COMMIT:-$(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo '?')}
# streamwm.query_timeout = 0: one process() over millions of rows may take
# longer than the default 30 s a query gets per step
settings=("shared_buffers = '512MB'" "max_wal_size = '4GB'" "synchronous_commit = off" "autovacuum = off" "streamwm.query_timeout = 0")
bench_cluster "${settings[@]}"
t_start=$(date +%s)

cc -O2 -o "$dir/gen" "$here/nexmark/gen.c" -lm
base=$($PSQL -c "SELECT extract(epoch FROM date_trunc('minute', now() - make_interval(secs => $span + 3600)))::int8")
gen() { "$dir/gen" -t bids -r "$rate" -d "$delay" -s 42 -b "$base" "$@"; }
s=$(date +%s%N); gen -n 10000000 >/dev/null; e=$(date +%s%N)
gen_rps=$(( 10000000 * 1000000000 / (e - s) ))
echo "generator: $gen_rps bids/s (10,000,000 bids to /dev/null)"

ms() {  # ms SQL: run SQL in its own session, print its milliseconds
    $PSQL -c "\\timing on" -c "$1" | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' | tail -1 | awk '{ printf "%.0f", $1 }'
}
now_ns() { date +%s%N; }
med() { sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
rate_of() { awk -v n="$1" -v ms="$2" 'BEGIN { printf "%.0f", n * 1000 / ms }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

########################################################################
# 1. Ingest
########################################################################
echo "== ingest: $irows rows"
gen -n "$irows" >"$dir/ingest.tsv"
half=$(( irows / 2 ))
head -n "$half" "$dir/ingest.tsv" >"$dir/ingest.1of2.tsv"
tail -n +"$((half + 1))" "$dir/ingest.tsv" >"$dir/ingest.2of2.tsv"
cols="auction, bidder, price, sw_write_time"
for part in ingest ingest.1of2 ingest.2of2; do
    awk -F'\t' -v cols="$cols" '
        { v = v (n ? "," : "") "(" $1 "," $2 "," $3 ",'\''" $4 "'\'')"; n++ }
        n == 1000 { print "INSERT INTO x (" cols ") VALUES " v ";"; v = ""; n = 0 }
        END { if (n) print "INSERT INTO x (" cols ") VALUES " v ";" }' "$dir/$part.tsv" >"$dir/$part.multi.sql"
    for kind in stream plain; do
        awk -F'\t' -v kind="$kind" '
            function flush() {
                if (kind == "stream") print "SELECT streamwm.ingest('\''x'\'', '\''[" v "]'\'');";
                else print "INSERT INTO x SELECT * FROM jsonb_populate_recordset(NULL::x, '\''[" v "]'\'');";
                v = ""; n = 0 }
            { v = v (n ? "," : "") "{\"auction\":" $1 ",\"bidder\":" $2 ",\"price\":" $3 ",\"sw_write_time\":\"" $4 "\"}"; n++ }
            n == 1000 { flush() }
            END { if (n) flush() }' "$dir/$part.tsv" >"$dir/$part.json.$kind.sql"
    done
done
cat >"$dir/pgbench.sql" <<EOF
\set a random(1000, 100000)
\set b random(1000, 10000)
\set p random(100, 100000000)
\set t random(0, $((span * 1000000)))
INSERT INTO x ($cols) VALUES (:a, :b, :p, to_timestamp($base) + :t * interval '1 microsecond');
EOF

make_x() {   # make_x KIND: a fresh table x of that kind
    $PSQL -c "SET client_min_messages = warning" \
          -c "SELECT streamwm.drop_stream(stream) FROM streamwm.stream_def WHERE stream = to_regclass('x')" \
          -c "DROP TABLE IF EXISTS x" >/dev/null
    case $1 in
        plain)  $PSQL -c "CREATE TABLE x (auction int8, bidder int8, price int8, sw_write_time timestamptz)" ;;
        stream) $PSQL -c "SELECT streamwm.create_stream('x', 'auction int8, bidder int8, price int8')" >/dev/null ;;
        stream2) $PSQL -c "SELECT streamwm.create_stream('x', 'auction int8, bidder int8, price int8', partitions => 2)" >/dev/null ;;
    esac
    $PSQL -c "CHECKPOINT"
}
load_client() {   # load_client KIND METHOD PART: one client's load
    case $2 in
        copy)   $PSQL -c "COPY x ($cols) FROM STDIN" <"$dir/$3.tsv" ;;
        multi)  $PSQL -f "$dir/$3.multi.sql" >/dev/null ;;
        ingest) $PSQL -f "$dir/$3.json.${1%2}.sql" >/dev/null ;;
    esac
}
: >"$dir/ingest_times.txt"
methods=(copy multi ingest pgbench)
for ((run = 0; run < runs; run++)); do
    for method in "${methods[@]}"; do
        for clients in 1 2; do
            kinds=(stream plain); [ $(( (run + clients) % 2 )) = 1 ] && kinds=(plain stream)
            # two writers: also a stream with a partition each (sessions spread over them)
            [ "$clients" = 2 ] && kinds+=(stream2)
            for kind in "${kinds[@]}"; do
                make_x "$kind"
                if [ "$method" = pgbench ]; then
                    r=$(pgbench -n -M prepared -c "$clients" -j "$clients" -T "$pgbs" --random-seed=42 \
                            -f "$dir/pgbench.sql" postgres 2>&1 |
                        sed -n 's/^tps = \([0-9.]*\) (without initial connection time).*/\1/p')
                    r=${r%.*}
                    got=$($PSQL -c "SELECT count(*) FROM x")
                else
                    s=$(now_ns)
                    if [ "$clients" = 1 ]; then
                        load_client "$kind" "$method" ingest
                    else
                        load_client "$kind" "$method" ingest.1of2 & p1=$!
                        load_client "$kind" "$method" ingest.2of2 & p2=$!
                        wait $p1; wait $p2
                    fi
                    e=$(now_ns)
                    got=$($PSQL -c "SELECT count(*) FROM x")
                    [ "$got" = "$irows" ] || { echo "$kind $method: $got rows, expected $irows" >&2; exit 1; }
                    r=$(( irows * 1000000000 / (e - s) ))
                fi
                echo "  run $((run + 1)) $method $clients client(s) $kind: $r rows/s ($got rows)"
                echo "$method $clients $kind $r" >>"$dir/ingest_times.txt"
            done
        done
    done
done
ingest_rps() {   # ingest_rps METHOD CLIENTS KIND: median rows/s and all runs
    awk -v m="$1" -v c="$2" -v k="$3" '$1 == m && $2 == c && $3 == k { print $4 }' "$dir/ingest_times.txt" |
        sort -g | awk '{ a[NR] = $1; r = r (NR > 1 ? ", " : "") $1 } END { print a[int((NR + 1) / 2)], r }'
}

########################################################################
# 2. Processing
########################################################################
echo "== processing: $nbids bids, $rate events/s of event time, up to $delay ms out of order"
gen -n "$nbids" >"$dir/bids.tsv"
$PSQL -c "CREATE TABLE plain (auction int8, bidder int8, price int8, event_time timestamptz)"
$PSQL -c "COPY plain FROM STDIN" <"$dir/bids.tsv"
$PSQL -c "CREATE INDEX plain_event_time ON plain (event_time)" -c "VACUUM ANALYZE plain"
# W after all rows: max event time - watermark_delay; the step's clock
# (idle detection) a second after it, before every row's arrival
wm=$($PSQL -c "SELECT max(event_time) - make_interval(secs => $delay / 1000.0) FROM plain")
read -r tmin tmax <<<"$($PSQL -F ' ' -c "SELECT extract(epoch FROM min(event_time))::int8, extract(epoch FROM max(event_time))::int8 FROM plain")"
read -r nauctions <<<"$($PSQL -c "SELECT count(DISTINCT auction) FROM plain")"

configs=("q5 2 2" "q5 2 10" "q5 2 20" "q5 2 120" "q7 10 10" "q11 10 10")
query_of() { case $1 in q5) echo "SELECT auction, count(*) AS n FROM bids GROUP BY auction" ;;
                        q7) echo "SELECT max(price) AS p FROM bids" ;;
                        q11) echo "SELECT bidder, count(*) AS n FROM bids GROUP BY bidder" ;; esac; }
onepass_sql() {   # onepass_SQL Q HOP SIZE
    local w="generate_series(date_bin('$2 s', event_time, 'epoch') - interval '$(( $3 - $2 )) s', date_bin('$2 s', event_time, 'epoch'), interval '$2 s') w"
    case $1 in
        q5) echo "INSERT INTO r (window_start, window_end, auction, n)
SELECT w, w + interval '$3 s', auction, count(*) FROM plain CROSS JOIN LATERAL $w
 WHERE w + interval '$3 s' <= '$wm' GROUP BY w, auction
ON CONFLICT (window_start, auction) DO UPDATE SET window_end = EXCLUDED.window_end, n = EXCLUDED.n" ;;
        q7) echo "INSERT INTO r (window_start, window_end, p)
SELECT w, w + interval '$3 s', max(price) FROM plain CROSS JOIN LATERAL $w
 WHERE w + interval '$3 s' <= '$wm' GROUP BY w
ON CONFLICT (window_start) DO UPDATE SET window_end = EXCLUDED.window_end, p = EXCLUDED.p" ;;
        q11) echo "INSERT INTO r (window_start, window_end, bidder, n)
SELECT min(event_time), max(event_time) + interval '$3 s', bidder, count(*) FROM (
  SELECT bidder, event_time, sum(new) OVER (PARTITION BY bidder ORDER BY event_time ROWS UNBOUNDED PRECEDING) AS sid
    FROM (SELECT bidder, event_time,
                 CASE WHEN event_time - lag(event_time) OVER (PARTITION BY bidder ORDER BY event_time)
                           < interval '$3 s' THEN 0 ELSE 1 END AS new FROM plain) a) b
 GROUP BY bidder, sid HAVING max(event_time) + interval '$3 s' <= '$wm'
ON CONFLICT (window_start, bidder) DO UPDATE SET window_end = EXCLUDED.window_end, n = EXCLUDED.n" ;;
    esac
}
naive_sql() {   # naive_sql Q SIZE WINDOW_START: one window's statement
    local a="'$3'::timestamptz" b="'$3'::timestamptz + interval '$2 s'"
    case $1 in
        q5) echo "INSERT INTO rn (window_start, window_end, auction, n) SELECT $a, $b, auction, count(*) FROM plain WHERE event_time >= $a AND event_time < $b GROUP BY auction ON CONFLICT (window_start, auction) DO UPDATE SET window_end = EXCLUDED.window_end, n = EXCLUDED.n;" ;;
        q7) echo "INSERT INTO rn (window_start, window_end, p) SELECT $a, $b, max(price) FROM plain WHERE event_time >= $a AND event_time < $b HAVING count(*) > 0 ON CONFLICT (window_start) DO UPDATE SET window_end = EXCLUDED.window_end, p = EXCLUDED.p;" ;;
    esac
}
diff_count() {   # diff_count A B [WHERE]: rows in one and not the other
    $PSQL -c "SELECT (SELECT count(*) FROM (SELECT * FROM $1 ${3:-} EXCEPT ALL SELECT * FROM $2 ${3:-}) a)
                   + (SELECT count(*) FROM (SELECT * FROM $2 ${3:-} EXCEPT ALL SELECT * FROM $1 ${3:-}) b)"
}
prepare_stream() {   # prepare_stream Q HOP SIZE: fresh stream bids, its query, the rows
    $PSQL -c "SET client_min_messages = warning" \
          -c "SELECT streamwm.drop_query(name, true) FROM streamwm.query_def" \
          -c "SELECT streamwm.drop_stream(stream) FROM streamwm.stream_def WHERE stream = to_regclass('bids')" \
          -c "DROP TABLE IF EXISTS bids" >/dev/null
    $PSQL -c "SELECT streamwm.create_stream('bids', 'auction int8, bidder int8, price int8',
                                            watermark_delay => make_interval(secs => $delay / 1000.0))" \
          -c "$(if [ "$1" = q11 ]; then
                    echo "SELECT streamwm.create_session_query('$1', \$q\$$(query_of "$1")\$q\$, gap => '$3 s')"
                else
                    echo "SELECT streamwm.create_query('$1', \$q\$$(query_of "$1")\$q\$, hop => '$2 s', size => '$3 s')"
                fi)" >/dev/null
    $PSQL -c "COPY bids (auction, bidder, price, sw_write_time) FROM STDIN" <"$dir/bids.tsv"
    $PSQL -c "VACUUM ANALYZE bids" -c "CHECKPOINT"
}
run_stream() {   # process() until nothing is unprocessed; prints total ms and calls
    local total=0 calls=0 left t
    while :; do
        t=$(ms "SELECT streamwm.process('bids', now => '$wm'::timestamptz + interval '1 s')")
        total=$((total + t)); calls=$((calls + 1))
        left=$($PSQL -c "SELECT unprocessed_events FROM streamwm.streams WHERE stream = 'bids'::regclass")
        [ "$left" = 0 ] && break
        [ "$calls" -ge 100 ] && { echo "process() does not drain the stream" >&2; exit 1; }
    done
    echo "$total $calls"
}
: >"$dir/proc_times.txt"
for cfg in "${configs[@]}"; do
    read -r q hop size <<<"$cfg"; k=$((size / hop))
    for ((run = 1; run <= proc_runs; run++)); do
        prepare_stream "$q" "$hop" "$size"
        $PSQL -c "SET client_min_messages = warning" -c "DROP TABLE IF EXISTS r" -c "CREATE TABLE r (LIKE $q INCLUDING ALL)" -c "CHECKPOINT"
        if [ $((run % 2)) = 1 ]; then
            read -r st calls <<<"$(run_stream)"; $PSQL -c "CHECKPOINT"; op=$(ms "$(onepass_sql "$q" "$hop" "$size")")
        else
            op=$(ms "$(onepass_sql "$q" "$hop" "$size")"); $PSQL -c "CHECKPOINT"; read -r st calls <<<"$(run_stream)"
        fi
        d=$(diff_count "$q" r)
        read -r ev late plan rows wins err <<<"$($PSQL -F ' ' -c "SELECT s.events, s.late_events, d.plan,
                (SELECT count(*) FROM $q), (SELECT count(DISTINCT window_start) FROM $q), coalesce(nullif(q.last_error, ''), '-')
              FROM streamwm.streams s, streamwm.query_def d JOIN streamwm.queries q ON q.query = d.name
             WHERE s.stream = 'bids'::regclass AND d.name = '$q'")"
        echo "  $q hop $hop size $size run $run: process() $st ms in $calls call(s), one-pass $op ms; $rows result rows, $wins windows, plan $plan; events $ev, late $late; differing rows $d; error $err"
        [ "$d" = 0 ] && [ "$late" = 0 ] && [ "$ev" = "$nbids" ] && [ "$err" = - ] ||
            { echo "streamwm's result differs from the one-pass one, or rows were late or lost" >&2; exit 1; }
        echo "$q $hop $size $st $op $calls $rows $wins $plan" >>"$dir/proc_times.txt"
    done
    # naive: a sample of the windows W has closed, timed, extrapolated
    # (sessions are not fixed windows: none for q11)
    if [ "$q" = q11 ]; then echo "$q $hop $size - - - -" >>"$dir/naive_times.txt"; continue; fi
    $PSQL -c "SET client_min_messages = warning" -c "DROP TABLE IF EXISTS rn" -c "CREATE TABLE rn (LIKE $q INCLUDING ALL)" -c "CHECKPOINT"
    $PSQL -c "SELECT w FROM generate_series(date_bin('$hop s', to_timestamp($tmin), 'epoch') - interval '$((size - hop)) s',
                                           '$wm'::timestamptz - interval '$size s', interval '$hop s') w" >"$dir/windows.txt"
    nw=$(wc -l <"$dir/windows.txt")
    ns=$(( nw < sample ? nw : sample ))
    awk -v nw="$nw" -v ns="$ns" '{ a[NR - 1] = $0 } END { for (i = 0; i < ns; i++) print a[int((i + 0.5) * nw / ns)] }' \
        "$dir/windows.txt" >"$dir/sample.txt"
    while read -r w; do naive_sql "$q" "$size" "$w"; done <"$dir/sample.txt" >"$dir/naive.sql"
    nms=$($PSQL -c "\\timing on" -f "$dir/naive.sql" | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' |
          awk '{ t += $1 } END { printf "%.0f", t }')
    inlist=$(awk '{ printf "%s'\''%s'\''", (NR > 1 ? "," : ""), $0 }' "$dir/sample.txt")
    nd=$(diff_count "$q" rn "WHERE window_start IN ($inlist)")
    nest=$(awk -v t="$nms" -v nw="$nw" -v ns="$ns" 'BEGIN { printf "%.0f", t * nw / ns }')
    echo "  $q hop $hop size $size naive: $ns of $nw windows in $nms ms, all windows ~$nest ms; differing rows in the sample $nd"
    [ "$nd" = 0 ] || { echo "the naive result differs from streamwm's" >&2; exit 1; }
    echo "$q $hop $size $nms $ns $nw $nest" >>"$dir/naive_times.txt"
done
elapsed=$(( $(date +%s) - t_start ))

########################################################################
# results.md (and the chart)
########################################################################
ver=$($PSQL -c "SHOW server_version")
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
mem=$(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)
{
echo "# Nexmark benchmark results"
echo
echo "\`bash bench/nexmark.sh $nbids $irows $runs\` (PROC_RUNS=$proc_runs RATE=$rate DELAY_MS=$delay NAIVE_SAMPLE=$sample PGBENCH_S=$pgbs),"
echo "$(date -u '+%Y-%m-%d %H:%M UTC'), commit $commit, total run time $elapsed s."
echo
echo "- machine: $(nproc) cores ($cpu), $mem, $(. /etc/os-release; echo "$PRETTY_NAME"); shared with other work, so figures are noisy: ratios are of runs side by side"
echo "- PostgreSQL $ver, a throwaway cluster: $(IFS=';'; echo "${settings[*]}" | sed 's/;/, /g'), fsync = off; no background worker (no shared_preload_libraries)"
echo "- rows: bench/nexmark/gen.c (Nexmark bids: persons, auctions, bids 1:3:46; half of the bids on the hot auction, the newest one, which moves on as auctions are created; 3/4 from hot bidders), seed 42, $rate events/s of event time (all kinds), up to $delay ms out of order, event times given as sw_write_time (the plain tables: a timestamptz column); the generator writes $gen_rps bids/s"
echo
echo "## 1. Ingest, rows/s"
echo
echo "$irows rows (Nexmark bids) per load; with 2 clients each loads half at the same time. Stream: \`create_stream('x', 'auction int8, bidder int8, price int8')\` (defaults: 1 partition, each session sticky to it; with 2 clients also a stream with \`partitions => 2\`, where the two sessions stick to different partitions); plain: \`CREATE TABLE x (auction int8, bidder int8, price int8, sw_write_time timestamptz)\`, no index. multi: INSERT of 1,000 rows a statement, one transaction each. ingest: \`streamwm.ingest('x', jsonb array of 1,000 objects)\` against \`INSERT INTO x SELECT * FROM jsonb_populate_recordset(NULL::x, the same array)\`. pgbench: single-row INSERT, -M prepared, $pgbs s, same --random-seed. Median of $runs runs; a fresh table and CHECKPOINT before each."
echo
echo "| method | clients | stream rows/s | plain rows/s | stream : plain | stream, 2 partitions : plain | stream runs | plain runs |"
echo "|---|---:|---:|---:|---:|---:|---|---|"
for method in "${methods[@]}"; do
    for clients in 1 2; do
        read -r sm sall <<<"$(ingest_rps "$method" "$clients" stream)"
        read -r pm pall <<<"$(ingest_rps "$method" "$clients" plain)"
        two=-
        if [ "$clients" = 2 ]; then
            read -r s2 s2all <<<"$(ingest_rps "$method" "$clients" stream2)"
            two="$(ratio "$s2" "$pm") ($s2)"
        fi
        echo "| $method | $clients | $sm | $pm | $(ratio "$sm" "$pm") | $two | $sall | $pall |"
    done
done
echo
echo "Target (issue 9): stream : plain >= 0.80 for copy, multi and ingest with 1 and 2 clients."
echo
echo "## 2. Processing, events/s"
echo
echo "$nbids bids over $((tmax - tmin)) s of event time ($(( (tmax - tmin) / 2 )) panes of 2 s), $nauctions distinct auctions. Stream: \`create_stream('bids', ..., watermark_delay => '$delay ms')\`, the query created before the rows were COPYed in (untimed), VACUUM ANALYZE, CHECKPOINT; then \`streamwm.process('bids', now => W + 1 s)\` timed until \`streamwm.streams.unprocessed_events\` is 0. One-pass: one \`INSERT ... SELECT ... FROM plain CROSS JOIN LATERAL generate_series(pane - (size - hop), pane, hop) w GROUP BY w[, auction] ON CONFLICT DO UPDATE\` over the windows W has closed. Naive: one \`INSERT ... SELECT ... FROM plain WHERE event_time >= a AND event_time < b GROUP BY auction ON CONFLICT DO UPDATE\` per window (btree on plain.event_time), $sample windows spread evenly over the run timed in one session and extrapolated to all windows (so the naive figure is an estimate). streamwm and one-pass: median of $proc_runs run(s) (alternating which goes first); naive once, each statement timed (psql \\timing) and summed."
echo
echo "| query | hop | size | size/hop | plan | result rows | streamwm ms | one-pass ms | naive ms (est.) | streamwm ev/s | one-pass ev/s | naive ev/s | streamwm : one-pass | streamwm : naive | differing rows |"
echo "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
: >"$dir/chart.dat"
for cfg in "${configs[@]}"; do
    read -r q hop size <<<"$cfg"; k=$((size / hop))
    stm=$(awk -v q="$q" -v s="$size" '$1 == q && $3 == s { print $4 }' "$dir/proc_times.txt" | med)
    opm=$(awk -v q="$q" -v s="$size" '$1 == q && $3 == s { print $5 }' "$dir/proc_times.txt" | med)
    read -r _ _ _ _ _ calls rows wins plan <<<"$(awk -v q="$q" -v s="$size" '$1 == q && $3 == s' "$dir/proc_times.txt" | tail -1)"
    read -r _ _ _ nms ns nw nest <<<"$(awk -v q="$q" -v s="$size" '$1 == q && $3 == s' "$dir/naive_times.txt")"
    sr=$(rate_of "$nbids" "$stm"); orr=$(rate_of "$nbids" "$opm")
    if [ "$q" = q11 ]; then
        echo "| $q (session, gap $size s) | - | - | - | $plan | $rows | $stm | $opm | - | $sr | $orr | - | $(ratio "$sr" "$orr") | - | 0 |"
        continue
    fi
    nr=$(rate_of "$nbids" "$nest")
    echo "| $q | $hop s | $size s | $k | $plan | $rows | $stm | $opm | $nest | $sr | $orr | $nr | $(ratio "$sr" "$orr") | $(ratio "$sr" "$nr") | 0 |"
    [ "$q" = q5 ] && echo "$k $sr $orr $nr" >>"$dir/chart.dat"
done
echo
echo "Every run: streamwm's result table equal to the one-pass one (0 differing rows), no late rows, all $nbids events read; the naive result equal to streamwm's on the sampled windows. Per run (streamwm ms, one-pass ms):"
echo
for cfg in "${configs[@]}"; do
    read -r q hop size <<<"$cfg"
    echo "- $q hop $hop s size $size s: $(awk -v q="$q" -v s="$size" '$1 == q && $3 == s { printf "%s%s / %s (%s call%s)", (n++ ? ", " : ""), $4, $5, $6, ($6 > 1 ? "s" : "") }' "$dir/proc_times.txt"); naive: $(awk -v q="$q" -v s="$size" '$1 == q && $3 == s { printf "%s of %s windows in %s ms", $5, $6, $4 }' "$dir/naive_times.txt")"
done
echo
echo "Targets (issue 9): streamwm : one-pass >= 0.80 at every size/hop; streamwm : naive >= 10 at size/hop = 60."
echo
if command -v gnuplot >/dev/null; then
    gnuplot <<EOF
set terminal pngcairo size 900,560 noenhanced
set output '$out/nexmark.png'
set title 'Nexmark q5 (count per auction, hop 2 s), $nbids bids: events/s against size/hop'
set xlabel 'size / hop'
set ylabel 'events/s'
set logscale xy
set xtics (1, 5, 10, 60)
set key top right
set grid
plot '$dir/chart.dat' using 1:2 with linespoints lw 2 title 'streamwm process()', \
     '' using 1:3 with linespoints lw 2 title 'one-pass INSERT ... GROUP BY window (limit)', \
     '' using 1:4 with linespoints lw 2 title 'naive: one INSERT per window (est.)'
EOF
    echo "![q5 events/s against size/hop](nexmark.png)"
else
    echo "No chart: gnuplot is not installed (apt-get install gnuplot-nox)."
fi
echo
echo "## 3. End to end with the background worker; 4. memory and disk"
echo
echo "Not in this script: issue 9's parts 3 (sustained ingest from 2 clients at stepped offered rates while the worker processes; lag and window-end-to-result latency, median and p99) and 4 (the worker's peak RSS, stream and pane-state size) need a server that preloads streamwm: \`bash bench/e2e.sh\` runs them and writes bench/results-e2e.md and bench/e2e.png."
} >"$out/results.md"
cat "$out/results.md"
