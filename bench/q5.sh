#!/usr/bin/env bash
# Nexmark q5-style batch (issue 8, "Must show"): one streamwm.process() over
# ROWS bids against the one-pass set-based limit over the same rows.
#
#   bash bench/q5.sh [ROWS] [SECONDS] [AUCTIONS] [RUNS]
#        defaults:   1000000  1000     1000       3
#   (run test/setup.sh first, or set PG_BIN to the bin directory of the
#    PostgreSQL installation streamwm was installed into)
#
# Bids (auction, bidder, price) with explicit sw_write_time spread evenly over
# SECONDS of event time (500 panes of 2 s by default); half the bids go to one
# hot auction (0), the rest spread by hash over AUCTIONS others.
# Query: SELECT auction, count(*) AS n FROM bids GROUP BY auction,
#        hop 2 s, size 10 s.
# Each run (RUNS of them, the order of the two sides alternating):
#   streamwm : a fresh stream and query, the rows inserted (untimed),
#              VACUUM ANALYZE, CHECKPOINT, then one timed
#              SELECT streamwm.process('bids', now => ...)
#   limit    : the same rows in a plain table (VACUUM ANALYZEd once), then one
#              timed INSERT INTO r SELECT window, auction, count(*) FROM plain
#              CROSS JOIN generate_series(pane - 8 s, pane, 2 s) GROUP BY
#              window, auction ON CONFLICT DO UPDATE, for the windows the
#              watermark has closed (window_end <= max event time), into a
#              table shaped like streamwm's result table (same primary key)
#   two-level: for information only, the same windows set-based in two levels
#              (count per 2 s pane and auction, then panes summed into windows)
# and after each run the result tables are compared (rows in one and not
# the other, both ways: must be 0).  Prints medians and the ratio; appends a
# dated section to bench/REPORT.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
rows=${1:-1000000}; secs=${2:-1000}; auctions=${3:-1000}; runs=${4:-3}
. "$here/common.sh"
bench_as_postgres q5.sh "$rows" "$secs" "$auctions" "$runs"
report=$(bench_report)
settings=("shared_buffers = '512MB'" "max_wal_size = '4GB'" "synchronous_commit = off" "autovacuum = off")
bench_cluster "${settings[@]}"

ms() {  # ms SQL: run SQL in its own session, print its milliseconds
    $PSQL -c "\\timing on" -c "$1" | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' | tail -1 | awk '{ printf "%.0f", $1 }'
}
# event time 0 = a minute-aligned instant well before every row's arrival
base=$($PSQL -c "SELECT date_trunc('minute', now() - make_interval(secs => $secs + 3600))")
gen="SELECT CASE WHEN i % 2 = 0 THEN 0 ELSE 1 + (hashint4(i) & 2147483647) % $auctions END::int8 AS auction,
            (hashint4(-i) & 1048575)::int8 AS bidder, (100 + i % 9901)::int8 AS price,
            '$base'::timestamptz + make_interval(secs => (i - 1)::float8 * $secs / $rows) AS t
       FROM generate_series(1, $rows) i"
$PSQL -c "CREATE TABLE plain AS $gen" -c "VACUUM ANALYZE plain"
wm=$($PSQL -c "SELECT max(t) FROM plain")
limit_sql="INSERT INTO r (window_start, window_end, auction, n)
SELECT w, w + interval '10 s', auction, count(*)
  FROM plain CROSS JOIN LATERAL
       generate_series(date_bin('2 s', t, 'epoch') - interval '8 s', date_bin('2 s', t, 'epoch'), interval '2 s') w
 WHERE w + interval '10 s' <= '$wm'
 GROUP BY w, auction
ON CONFLICT (window_start, auction) DO UPDATE SET window_end = EXCLUDED.window_end, n = EXCLUDED.n"
# for information: the same windows set-based in two levels, as the pane plan
# does (count per pane and auction once, then each pane row summed into its
# size/hop windows); not the issue's limit
pane_sql="INSERT INTO r2 (window_start, window_end, auction, n)
SELECT w, w + interval '10 s', auction, sum(c)::int8
  FROM (SELECT date_bin('2 s', t, 'epoch') AS p, auction, count(*) AS c FROM plain GROUP BY 1, 2) panes
       CROSS JOIN LATERAL generate_series(p - interval '8 s', p, interval '2 s') w
 WHERE w + interval '10 s' <= '$wm'
 GROUP BY w, auction
ON CONFLICT (window_start, auction) DO UPDATE SET window_end = EXCLUDED.window_end, n = EXCLUDED.n"

prepare_stream() {   # a fresh stream 'bids' with its query 'q5' and the rows, untimed
    $PSQL -c "SET client_min_messages = warning" \
          -c "SELECT streamwm.drop_query(name, true) FROM streamwm.query_def WHERE name = 'q5'" \
          -c "SELECT streamwm.drop_stream(stream) FROM streamwm.stream_def WHERE stream = to_regclass('bids')" \
          -c "DROP TABLE IF EXISTS bids" >/dev/null
    $PSQL -c "SELECT streamwm.create_stream('bids', 'auction int8, bidder int8, price int8')" \
          -c "SELECT streamwm.create_query('q5', 'SELECT auction, count(*) AS n FROM bids GROUP BY auction', hop => '2 s', size => '10 s')" >/dev/null
    $PSQL -c "INSERT INTO bids (auction, bidder, price, sw_write_time) SELECT auction, bidder, price, t FROM ($gen) g" \
          -c "VACUUM ANALYZE bids" -c "CHECKPOINT"
}
prepare_limit() {
    $PSQL -c "SET client_min_messages = warning" -c "DROP TABLE IF EXISTS r, r2" \
          -c "CREATE TABLE r (LIKE q5 INCLUDING ALL)" -c "CREATE TABLE r2 (LIKE q5 INCLUDING ALL)" -c "CHECKPOINT"
}
run_stream() { ms "SELECT streamwm.process('bids', now => '$wm'::timestamptz + interval '1 s')"; }
run_limit() { ms "$limit_sql"; }
run_pane() { $PSQL -c "CHECKPOINT"; ms "$pane_sql"; }

: >"$dir/times.txt"
for ((run = 1; run <= runs; run++)); do
    prepare_stream
    if [ $((run % 2)) = 1 ]; then
        s=$(run_stream); prepare_limit; l=$(run_limit); p=$(run_pane)
    else
        prepare_limit; l=$(run_limit); p=$(run_pane); s=$(run_stream)
    fi
    diff=$($PSQL -c "SELECT (SELECT count(*) FROM (TABLE q5 EXCEPT ALL TABLE r) a) + (SELECT count(*) FROM (TABLE r EXCEPT ALL TABLE q5) b)")
    diff2=$($PSQL -c "SELECT (SELECT count(*) FROM (TABLE q5 EXCEPT ALL TABLE r2) a) + (SELECT count(*) FROM (TABLE r2 EXCEPT ALL TABLE q5) b)")
    n=$($PSQL -c "SELECT count(*) || ' result rows, ' || count(DISTINCT window_start) || ' windows' FROM q5")
    err=$($PSQL -c "SELECT coalesce(last_error, '') FROM streamwm.queries WHERE query = 'q5'")
    echo "run $run: process() $s ms, set-based limit $l ms, ratio $(awk "BEGIN{printf \"%.2f\", $s / $l}"); two-level set-based $p ms; $n; differing rows: $diff (two-level: $diff2)${err:+; ERROR $err}"
    echo "$s $l $p" >>"$dir/times.txt"
    if [ "$diff" != 0 ] || [ "$diff2" != 0 ]; then echo "the result tables differ" >&2; exit 1; fi
done
med() { awk -v c="$1" '{ print $c }' "$dir/times.txt" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
ms_s=$(med 1); ms_l=$(med 2); ms_p=$(med 3)
ratio=$(awk "BEGIN{printf \"%.2f\", $ms_s / $ms_l}")
ratios=$(awk '{ printf "%s%.2f", (NR > 1 ? ", " : ""), $1 / $2 }' "$dir/times.txt")
ratio_p=$(awk "BEGIN{printf \"%.2f\", $ms_s / $ms_p}")
ratios_p=$(awk '{ printf "%s%.2f", (NR > 1 ? ", " : ""), $1 / $3 }' "$dir/times.txt")
ver=$($PSQL -c "SHOW server_version")
plan=$($PSQL -c "SELECT plan FROM streamwm.query_def WHERE name = 'q5'" 2>/dev/null || echo "?")
hot=$($PSQL -c "SELECT round(100.0 * count(*) FILTER (WHERE auction = 0) / count(*)) FROM plain")
out=$(cat <<EOF
Nexmark q5-style: $rows bids over $secs s of event time ($((secs / 2)) panes of 2 s), ${hot}% on one hot auction, the rest over $auctions auctions
query: SELECT auction, count(*) AS n FROM bids GROUP BY auction, hop 2 s, size 10 s (plan: $plan); $n
machine: $(nproc) cores, PostgreSQL $ver, $(IFS=';'; echo "${settings[*]}"), no worker; tables VACUUM ANALYZEd and CHECKPOINTed before each timed statement
differing rows between streamwm's result table and each set-based one: 0 in each of $runs runs

| | median ms | runs (ms) |
|---|---:|---|
| one streamwm.process() over all rows | $ms_s | $(awk '{ printf "%s%s", (NR > 1 ? ", " : ""), $1 }' "$dir/times.txt") |
| one set-based INSERT ... GROUP BY window, auction ON CONFLICT (the limit) | $ms_l | $(awk '{ printf "%s%s", (NR > 1 ? ", " : ""), $2 }' "$dir/times.txt") |
| for information: two-level set-based (GROUP BY pane, auction, then windows) | $ms_p | $(awk '{ printf "%s%s", (NR > 1 ? ", " : ""), $3 }' "$dir/times.txt") |

ratio process() : limit, of the medians: ${ratio}x (per run: $ratios)
ratio process() : two-level set-based, of the medians: ${ratio_p}x (per run: $ratios_p)
EOF
)
echo "$out"
{
    echo
    echo "## Nexmark q5-style, $(date -u '+%Y-%m-%d %H:%M UTC') (\`bash bench/q5.sh $rows $secs $auctions $runs\`, commit ${COMMIT:-$(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo '?')})"
    echo
    echo "$out"
} >>"$report"
