#!/usr/bin/env bash
# Ingest throughput (issue 8 item 4): what does a stream table cost per row,
# and what did dropping the btree on sw_event_time gain?
#
#   bash bench/ingest.sh [ROWS] [BATCHES] [RUNS]
#        defaults:       1000000 500      3
#   (run test/setup.sh first, or set PG_BIN to the bin directory of the
#    PostgreSQL installation streamwm was installed into)
#
# Tables, each fresh for every timed load (user columns k int, v int):
#   stream    : streamwm.create_stream('s', 'k int, v int'), as this build
#               makes it (primary key (sw_partition, sw_offset) plus whatever
#               index create_stream puts on sw_event_time)
#   btree     : the same stream with its sw_event_time index replaced by a
#               btree (what create_stream made before the BRIN change)
#   noindex   : the same stream with no index on sw_event_time, for
#               information (primary key and trigger only)
#   plain     : CREATE TABLE plain (k int, v int, t timestamptz), no index,
#               no trigger: the floor
# Loads (event times: EPS = 5000 rows per second of event time, each row up
# to 2 s out of order, given as sw_write_time; t for the plain table):
#   insert-select : one INSERT ... SELECT ... FROM generate_series, ROWS rows
#   copy          : one COPY ... FROM a server-side file, ROWS rows
#   multi-insert  : BATCHES INSERT ... VALUES statements of 1,000 rows, each
#                   its own transaction, from one psql session
# Each (table, load) runs RUNS times, the table order rotating per run, with
# CHECKPOINT before each timed load; reports the median rows/s, and appends
# a dated section to bench/REPORT.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
rows=${1:-1000000}; batches=${2:-500}; runs=${3:-3}
. "$here/common.sh"
bench_as_postgres ingest.sh "$rows" "$batches" "$runs"
report=$(bench_report)
settings=("shared_buffers = '512MB'" "max_wal_size = '4GB'" "synchronous_commit = off" "autovacuum = off")
bench_cluster "${settings[@]}"

eps=5000
base=$($PSQL -c "SELECT date_trunc('minute', now() - interval '1 day')")
# row i: key, value, event time (bounded disorder: up to 2 s late)
gen() {   # gen N: the SELECT list of N rows
    echo "SELECT i % 100 AS k, i AS v,
            '$base'::timestamptz + make_interval(secs => (i - 1)::float8 / $eps - (hashint4(i) & 1023) / 512.0) AS t
       FROM generate_series(1, $1) i"
}
$PSQL -c "COPY ($(gen "$rows")) TO '$dir/rows.csv' (FORMAT csv)"
# BATCHES statements of 1,000 rows; TABLE and COLS substituted per table
$PSQL -c "SELECT 'INSERT INTO TABLE (k, v, COLS) VALUES '
                 || string_agg(format('(%s,%s,%L)', k, v, t), ',') || ';'
            FROM ($(gen $((batches * 1000)))) r GROUP BY (v - 1) / 1000 ORDER BY (v - 1) / 1000" \
    >"$dir/multi.sql"

make_table() {  # make_table KIND: a fresh table "x" of that kind
    $PSQL -c "SET client_min_messages = warning" -c "DROP TABLE IF EXISTS x CASCADE" >/dev/null
    case $1 in
        plain) $PSQL -c "CREATE TABLE x (k int, v int, t timestamptz)" ;;
        *)  $PSQL -c "SELECT streamwm.create_stream('x', 'k int, v int')" >/dev/null
            # the indexes on sw_event_time create_stream made (any method)
            local evidx
            evidx=$($PSQL -c "SELECT string_agg(i.indexrelid::regclass::text, ', ')
                                FROM pg_index i JOIN pg_attribute a
                                  ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey::int2[])
                               WHERE i.indrelid = 'x'::regclass AND a.attname = 'sw_event_time'")
            case $1 in
                btree)   [ -n "$evidx" ] && $PSQL -c "DROP INDEX $evidx"
                         $PSQL -c "CREATE INDEX ON x USING btree (sw_event_time)" ;;
                noindex) [ -n "$evidx" ] && $PSQL -c "DROP INDEX $evidx" ;;
            esac ;;
    esac
    $PSQL -c "CHECKPOINT"
}
load_sql() {   # load_sql KIND LOAD: the statement(s) of that load
    local cols=sw_write_time; [ "$1" = plain ] && cols=t
    case $2 in
        insert-select) echo "INSERT INTO x (k, v, $cols) SELECT k, v, t FROM ($(gen "$rows")) r;" ;;
        copy)          echo "COPY x (k, v, $cols) FROM '$dir/rows.csv' (FORMAT csv);" ;;
        multi-insert)  sed -e "s/^INSERT INTO TABLE (k, v, COLS)/INSERT INTO x (k, v, $cols)/" "$dir/multi.sql" ;;
    esac
}
kinds=(stream btree noindex plain); loads=(insert-select copy multi-insert)
evdesc=$($PSQL -c "SELECT streamwm.create_stream('probe', 'k int, v int')" >/dev/null;
         $PSQL -c "SELECT coalesce(string_agg(pg_get_indexdef(i.indexrelid), '; '), 'none')
                     FROM pg_index i WHERE i.indrelid = 'probe'::regclass AND NOT i.indisprimary";
         $PSQL -c "SELECT streamwm.drop_stream('probe')" >/dev/null)
: >"$dir/times.txt"
t0=$(date +%s)
for ((run = 0; run < runs; run++)); do
    for load in "${loads[@]}"; do
        for ((j = 0; j < ${#kinds[@]}; j++)); do
            kind=${kinds[$(( (j + run) % ${#kinds[@]} ))]}
            make_table "$kind"
            load_sql "$kind" "$load" >"$dir/load.sql"
            n=$rows; [ "$load" = multi-insert ] && n=$((batches * 1000))
            s=$(date +%s%N)
            $PSQL -f "$dir/load.sql" >/dev/null
            e=$(date +%s%N)
            got=$($PSQL -c "SELECT count(*) FROM x")
            [ "$got" = "$n" ] || { echo "$kind $load: $got rows, expected $n" >&2; exit 1; }
            echo "$kind $load $(( (e - s) / 1000000 )) $n" >>"$dir/times.txt"
        done
    done
done
elapsed=$(( $(date +%s) - t0 ))
med() {   # med KIND LOAD: median ms, rows/s, all runs
    awk -v k="$1" -v l="$2" '$1 == k && $2 == l { print $3, $4 }' "$dir/times.txt" | sort -g |
        awk '{ a[NR] = $1; n = $2; r = r (NR > 1 ? ", " : "") $1 } END { m = a[int((NR + 1) / 2)]; printf "%d %.0f %s", m, n * 1000 / m, r }'
}
ver=$($PSQL -c "SHOW server_version")
out="ingest: $rows rows (insert-select, copy), $batches x 1,000-row INSERTs (multi-insert); k int, v int + event time; $eps rows per event-time second, up to 2 s out of order
machine: $(nproc) cores, PostgreSQL $ver, $(IFS=';'; echo "${settings[*]}"); CHECKPOINT before each timed load, each table fresh
stream's index on sw_event_time as create_stream makes it: $evdesc

| table | load | median ms | rows/s | runs (ms) |
|---|---|---:|---:|---|"
for load in "${loads[@]}"; do
    for kind in "${kinds[@]}"; do
        read -r m rps all <<<"$(med "$kind" "$load")"
        out+=$'\n'"| $kind | $load | $m | $rps | $all |"
    done
done
out+=$'\n\n'"ratios of the medians (time of btree / time of stream = speed-up over the old btree; time of stream / time of plain = cost of a stream over a plain table):"
for load in "${loads[@]}"; do
    read -r ms _ <<<"$(med stream "$load")"; read -r mb _ <<<"$(med btree "$load")"
    read -r mp _ <<<"$(med plain "$load")"
    out+=$'\n'"- $load: btree / stream $(awk "BEGIN{printf \"%.2f\", $mb / $ms}")x, stream / plain $(awk "BEGIN{printf \"%.2f\", $ms / $mp}")x"
done
out+=$'\n'"total run time ${elapsed} s"
echo "$out"
{
    echo
    echo "## Ingest, $(date -u '+%Y-%m-%d %H:%M UTC') (\`bash bench/ingest.sh $rows $batches $runs\`, commit ${COMMIT:-$(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo '?')})"
    echo
    echo "$out"
} >>"$report"
