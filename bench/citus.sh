#!/usr/bin/env bash
# Nexmark q5 on a local Citus cluster beside a single node (issue 13, "Must
# show"): the same N bids into a local stream on the coordinator and into a
# distributed stream (create_stream(..., distributed => true)), ingest and
# processing timed for both, the two result tables compared, a dated section
# appended to bench/REPORT.md.  Never part of the tests.
#
#   PG_BIN=/path/to/pg/bin bash bench/citus.sh [N] [RUNS]
#        defaults:                             1000000 1
#   environment: CITUS_PORT (the coordinator's port, default 57650; the
#   workers take the next two), PARTITIONS (of both streams, default 4: 2 on
#   each worker), SPAN (seconds of event time the N bids span, default
#   1000), DELAY_MS (max out-of-orderness and watermark_delay, default 1000),
#   QUERY (the query, %s for the stream; default q5 below; e.g. "SELECT
#   sw_partition AS p, auction, count(*) AS n FROM %s GROUP BY sw_partition,
#   auction" gives the distributed stream a result table co-located with it).
#
# Without citus.so in PG_BIN's installation: prints "citus not installed:
# skipped" and exits 0.
#
# The cluster: a coordinator and two workers started here as test/citus/run.sh
# does (shared_preload_libraries = 'citus,streamwm', the workers registered),
# ALL THREE ON THIS ONE MACHINE, so they share its cores, memory and disk:
# what the figures can show is the cost of distribution, not a scale-out.
#
# Rows: bench/nexmark/gen.c (cc -O2), N Nexmark bids (auction, bidder, price,
# event time as sw_write_time), COPY text, plus sw_partition = row number mod
# PARTITIONS so that both streams get the same rows in the same partitions
# (one COPY session would otherwise put every row into its one claimed
# partition, on one worker).  Query q5: SELECT auction, count(*) AS n FROM
# bids GROUP BY auction, hop 2 s, size 10 s, created before the rows arrive.
# Each run (the order of the two sides alternating between runs):
#   ingest      one COPY ... FROM STDIN of the N rows, wall clock (CHECKPOINT
#               on every node before it)
#   2 clients   into a fresh stream again (not processed): two COPYs at once,
#               each of the rows of the partitions one worker holds (2 and
#               2), wall clock; into the local stream both through the
#               coordinator, into the distributed one each through the worker
#               that holds its partitions (Citus MX: the rows go straight to
#               that node's shards, the coordinator takes no part)
#   processing  VACUUM ANALYZE and CHECKPOINT on every node (untimed), then
#               streamwm.process(stream, now => W + 1 s) timed (psql \timing)
#               until streamwm.streams says every row was read
#               (events = N, unprocessed_events = 0)
#   pull        for information: the time to bring the distributed stream's N
#               rows to the coordinator once (INSERT INTO a local table SELECT
#               ... FROM it), which every distributed step does for the rows
#               it reads (DESIGN.md, "Citus")
# then the two result tables (both on the coordinator) compared, rows in one
# and not the other both ways: must be 0.  The load average of the machine
# before and after is reported (other work shares it).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
nbids=${1:-1000000}; runs=${2:-1}
parts=${PARTITIONS:-4}
span=${SPAN:-1000}
delay=${DELAY_MS:-1000}
rate=$(( (nbids * 50 / 46 + span - 1) / span ))
PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
pkglibdir=$("$PG_BIN/pg_config" --pkglibdir)
if [ ! -f "$pkglibdir/citus.so" ]; then
    echo "citus not installed: skipped (no citus.so in $pkglibdir)"
    exit 0
fi
. "$here/common.sh"
BENCH_ENV="CITUS_PORT PARTITIONS SPAN DELAY_MS" bench_as_postgres citus.sh "$nbids" "$runs"
report=$(bench_report)
export PATH="$PG_BIN:$PATH"
port=${CITUS_PORT:-57650}
ports="$port $((port + 1)) $((port + 2))"
db=bench
dir=$(mktemp -d /tmp/streamwm-bench-citus.XXXXXX)
chmod 755 "$dir"
stop_all() {
    for p in $ports; do pg_ctl -D "$dir/n$p" -m fast -w stop >/dev/null 2>&1 || true; done
}
trap 'stop_all; rm -rf "$dir"' EXIT
settings=("shared_buffers = '256MB'" "max_wal_size = '4GB'" "synchronous_commit = off" "autovacuum = off"
          "streamwm.query_timeout = 0" "streamwm.enabled = off")
for p in $ports; do
    initdb -D "$dir/n$p" -U postgres -A trust >"$dir/initdb$p.log" 2>&1 || { cat "$dir/initdb$p.log"; exit 1; }
    {
        echo "listen_addresses = 'localhost'"
        echo "port = $p"
        echo "unix_socket_directories = '$dir'"
        echo "fsync = off"
        echo "shared_preload_libraries = 'citus,streamwm'"
        echo "max_prepared_transactions = 20"
        echo "citus.shard_replication_factor = 1"
        for line in "${settings[@]}"; do echo "$line"; done
    } >>"$dir/n$p/postgresql.conf"
    pg_ctl -D "$dir/n$p" -l "$dir/n$p.log" -w start >/dev/null || { tail -20 "$dir/n$p.log"; exit 1; }
    psql -X -q -h "$dir" -p "$p" -U postgres -d postgres -v ON_ERROR_STOP=1 -c "CREATE DATABASE $db" >/dev/null
    psql -X -q -h "$dir" -p "$p" -U postgres -d "$db" -v ON_ERROR_STOP=1 \
        -c "SET client_min_messages = warning" -c "CREATE EXTENSION citus" -c "CREATE EXTENSION streamwm" >/dev/null
done
set -- $ports
PSQL="psql -X -q -At -v ON_ERROR_STOP=1 -h $dir -p $port -U postgres -d $db"
$PSQL -c "SELECT citus_set_coordinator_host('localhost', $1)" \
      -c "SELECT citus_add_node('localhost', $2)" -c "SELECT citus_add_node('localhost', $3)" >/dev/null

ms() {  # ms SQL: run SQL in its own session, print its milliseconds
    $PSQL -c "\\timing on" -c "$1" | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' | tail -1 | awk '{ printf "%.0f", $1 }'
}
now_ns() { date +%s%N; }
checkpoint_all() { $PSQL -c "CHECKPOINT" -c "SELECT count(*) FROM run_command_on_workers('CHECKPOINT')" >/dev/null; }

cc -O2 -o "$dir/gen" "$here/nexmark/gen.c" -lm
base=$($PSQL -c "SELECT extract(epoch FROM date_trunc('minute', now() - make_interval(secs => $span + 3600)))::int8")
"$dir/gen" -t bids -r "$rate" -d "$delay" -s 42 -b "$base" -n "$nbids" |
    awk -v p="$parts" 'BEGIN { OFS = "\t" } { print $0, (NR - 1) % p }' >"$dir/bids.tsv"
wm=$(awk -F'\t' '$4 > m { m = $4 } END { print m }' "$dir/bids.tsv")
q5=${QUERY:-"SELECT auction, count(*) AS n FROM %s GROUP BY auction"}

prepare() {   # prepare STREAM DISTRIBUTED: a fresh stream and its query q_STREAM
    $PSQL -c "SET client_min_messages = warning" \
          -c "SELECT streamwm.drop_stream(stream, cascade => true) FROM streamwm.stream_def WHERE stream = to_regclass('$1')" \
          -c "DROP TABLE IF EXISTS q_$1" >/dev/null
    $PSQL -c "SET client_min_messages = warning" \
          -c "SELECT streamwm.create_stream('$1', 'auction int8, bidder int8, price int8', partitions => $parts,
                                            watermark_delay => make_interval(secs => $delay / 1000.0),
                                            distributed => $2)" \
          -c "SELECT streamwm.create_query('q_$1', \$q\$$(printf "$q5" "$1")\$q\$, hop => '2 s', size => '10 s')" >/dev/null
}
ingest2() {   # ingest2 STREAM PORT1 PORT2: two COPYs at once, prints ms
    local s e
    checkpoint_all
    s=$(now_ns)
    psql -X -q -v ON_ERROR_STOP=1 -h "$dir" -p "$2" -U postgres -d "$db" \
        -c "COPY $1 (auction, bidder, price, sw_write_time, sw_partition) FROM STDIN" <"$dir/bids.1.tsv" &
    local p1=$!
    psql -X -q -v ON_ERROR_STOP=1 -h "$dir" -p "$3" -U postgres -d "$db" \
        -c "COPY $1 (auction, bidder, price, sw_write_time, sw_partition) FROM STDIN" <"$dir/bids.2.tsv" &
    local p2=$!
    wait "$p1"; wait "$p2"
    e=$(now_ns)
    [ "$($PSQL -c "SELECT count(*) FROM $1")" = "$nbids" ] || { echo "2 clients: not every row stored" >&2; exit 1; }
    echo $(( (e - s) / 1000000 ))
}
ingest() {   # ingest STREAM: prints ms
    local s e
    checkpoint_all
    s=$(now_ns)
    $PSQL -c "COPY $1 (auction, bidder, price, sw_write_time, sw_partition) FROM STDIN" <"$dir/bids.tsv"
    e=$(now_ns)
    echo $(( (e - s) / 1000000 ))
}
process() {   # process STREAM: prints total ms and calls
    local total=0 calls=0 t done
    $PSQL -c "VACUUM ANALYZE $1" >/dev/null
    checkpoint_all
    while :; do
        t=$(ms "SELECT streamwm.process('$1', now => '$wm'::timestamptz + interval '1 s')")
        total=$((total + t)); calls=$((calls + 1))
        done=$($PSQL -c "SELECT events = $nbids AND unprocessed_events = 0 FROM streamwm.streams WHERE stream = '$1'::regclass")
        [ "$done" = t ] && break
        [ "$calls" -ge 100 ] && { echo "process() does not drain $1" >&2; exit 1; }
    done
    echo "$total $calls"
}

# the partitions of each worker, as the distributed stream places them
prepare bd true
mapfile -t nodes < <($PSQL -F ' ' -c "SELECT nodeport, string_agg(p::text, ',' ORDER BY p)
                                        FROM generate_series(0, $parts - 1) p
                                        JOIN citus_shards ON shardid = get_shard_id_for_distribution_column('bd', p)
                                       GROUP BY nodeport ORDER BY nodeport")
[ "${#nodes[@]}" = 2 ] || { echo "the partitions are not on both workers: ${nodes[*]}" >&2; exit 1; }
read -r w1 set1 <<<"${nodes[0]}"; read -r w2 set2 <<<"${nodes[1]}"
for i in 1 2; do
    set=$([ "$i" = 1 ] && echo "$set1" || echo "$set2")
    awk -F'\t' -v set=",$set," 'index(set, "," $5 ",")' "$dir/bids.tsv" >"$dir/bids.$i.tsv"
done
load0=$(cut -d' ' -f1-3 /proc/loadavg)
echo "== $nbids bids, $parts partitions, $runs run(s); partitions $set1 on port $w1 ($(wc -l <"$dir/bids.1.tsv") rows), $set2 on port $w2 ($(wc -l <"$dir/bids.2.tsv") rows)"
: >"$dir/times.txt"
for ((run = 1; run <= runs; run++)); do
    prepare bl false; prepare bd true
    if [ $((run % 2)) = 1 ]; then
        il=$(ingest bl); read -r pl cl <<<"$(process bl)"
        id=$(ingest bd); read -r pd cd <<<"$(process bd)"
    else
        id=$(ingest bd); read -r pd cd <<<"$(process bd)"
        il=$(ingest bl); read -r pl cl <<<"$(process bl)"
    fi
    $PSQL -c "SET client_min_messages = warning" -c "DROP TABLE IF EXISTS pull" \
          -c "CREATE TABLE pull (LIKE bd)" -c "CHECKPOINT" >/dev/null
    pu=$(ms "INSERT INTO pull SELECT * FROM bd")
    # the result tables, before the 2-client loads replace the streams
    $PSQL -c "SET client_min_messages = warning" -c "DROP TABLE IF EXISTS r_bl, r_bd" -c "CREATE TABLE r_bl AS TABLE q_bl" -c "CREATE TABLE r_bd AS TABLE q_bd" >/dev/null
    diff=$($PSQL -c "SELECT (SELECT count(*) FROM (TABLE r_bl EXCEPT ALL TABLE r_bd) a)
                          + (SELECT count(*) FROM (TABLE r_bd EXCEPT ALL TABLE r_bl) b)")
    late=$($PSQL -c "SELECT string_agg(late_events::text, '/' ORDER BY stream::text) FROM streamwm.streams
                      WHERE stream IN ('bl'::regclass, 'bd'::regclass)")
    if [ "$diff" != 0 ]; then echo "the result tables differ" >&2; exit 1; fi
    prepare bl false; prepare bd true
    if [ $((run % 2)) = 1 ]; then
        i2l=$(ingest2 bl "$port" "$port"); i2d=$(ingest2 bd "$w1" "$w2")
    else
        i2d=$(ingest2 bd "$w1" "$w2"); i2l=$(ingest2 bl "$port" "$port")
    fi
    echo "run $run: local ingest $il ms, processing $pl ms ($cl calls); distributed ingest $id ms, processing $pd ms ($cd calls); differing result rows $diff; late (bd/bl) $late; 2 clients: local $i2l ms, distributed $i2d ms; pull $pu ms"
    echo "$il $pl $id $pd $cl $cd $i2l $i2d $pu" >>"$dir/times.txt"
done
res=$($PSQL -c "SELECT count(*) || ' result rows, ' || count(DISTINCT window_start) || ' windows' FROM r_bl")
layout=$($PSQL -c "SELECT string_agg(n || ' on port ' || nodeport, ', ' ORDER BY nodeport)
                     FROM (SELECT nodeport, count(*) AS n FROM citus_shards
                            WHERE shardid IN (SELECT get_shard_id_for_distribution_column('bd', p)
                                                FROM generate_series(0, $parts - 1) p)
                            GROUP BY nodeport) x")
ver=$($PSQL -c "SHOW server_version")
citusver=$($PSQL -c "SELECT extversion FROM pg_extension WHERE extname = 'citus'")
col() { awk -v c="$1" '{ print $c }' "$dir/times.txt" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
all() { awk -v c="$1" '{ printf "%s%s", (NR > 1 ? ", " : ""), $c }' "$dir/times.txt"; }
il=$(col 1); pl=$(col 2); id=$(col 3); pd=$(col 4); i2l=$(col 7); i2d=$(col 8); pu=$(col 9)
load1=$(cut -d' ' -f1-3 /proc/loadavg)
rps() { awk -v n="$nbids" -v ms="$1" 'BEGIN { printf "%.0f", n * 1000 / ms }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
out=$(cat <<EOF
$nbids Nexmark bids (bench/nexmark/gen.c, seed 42) over $span s of event time, max disorder $delay ms (= watermark_delay: no row late), $parts partitions (sw_partition = row number mod $parts, the same in both streams); query: \`$(printf "$q5" bids)\`, hop 2 s, size 10 s; $res
machine: $(nproc) cores shared with other work, PostgreSQL $ver, Citus $citusver; THREE NODES ON THIS ONE MACHINE (coordinator + 2 workers, each $(IFS=';'; echo "${settings[*]}"), fsync off): they share the $(nproc) cores, so this measures what distribution costs, not what it scales to; load average (1, 5, 15 min) $load0 before, $load1 after
local: a stream on the coordinator; distributed: \`distributed => true\`, its partitions' shards: $layout
ingest: one COPY of the N rows (wall clock; CHECKPOINT on every node first); 2 clients: two COPYs at once, each of the rows of one worker's partitions, into the local stream through the coordinator, into the distributed one through that worker (a fresh stream, not processed); processing: \`streamwm.process(stream, now => W + 1 s)\` until every row is read (VACUUM ANALYZE, CHECKPOINT untimed first); median of $runs run(s)
differing rows between the two result tables: 0 in each run

| | local stream | distributed stream | distributed : local |
|---|---:|---:|---:|
| ingest, ms (runs) | $il ($(all 1)) | $id ($(all 3)) | $(ratio "$id" "$il")x |
| ingest, rows/s | $(rps "$il") | $(rps "$id") | $(ratio "$(rps "$id")" "$(rps "$il")") |
| ingest, 2 clients, ms (runs) | $i2l ($(all 7)) | $i2d ($(all 8)) | $(ratio "$i2d" "$i2l")x |
| ingest, 2 clients, rows/s | $(rps "$i2l") | $(rps "$i2d") | $(ratio "$(rps "$i2d")" "$(rps "$i2l")") |
| processing, ms (runs) | $pl ($(all 2)) | $pd ($(all 4)) | $(ratio "$pd" "$pl")x |
| processing, events/s | $(rps "$pl") | $(rps "$pd") | $(ratio "$(rps "$pd")" "$(rps "$pl")") |
| process() calls | $(all 5) | $(all 6) | |
| for information: the N rows pulled to the coordinator once, ms (runs) | | $pu ($(all 9)) | |
| ingest + processing, events/s | $(rps $((il + pl))) | $(rps $((id + pd))) | $(ratio "$(rps $((id + pd)))" "$(rps $((il + pl)))") |
EOF
)
echo "$out"
{
    echo
    title="q5"; [ -n "${QUERY:-}" ] && title="a query of your own over q5's rows"
    echo "## $title on Citus beside one node, $(date -u '+%Y-%m-%d %H:%M UTC') (\`${QUERY:+QUERY=\"$QUERY\" }bash bench/citus.sh $nbids $runs\`, commit ${COMMIT:-$(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo '?')})"
    echo
    echo "$out"
} >>"$report"
