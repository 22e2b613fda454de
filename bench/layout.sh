#!/bin/bash
# Where a COPY into a stream spends its time (issue 9: ingest at 0.8 of a
# plain table): the same COPY of Nexmark bids into
#   plain      a table with the stream's user columns and sw_write_time
#   stream     a stream as create_stream makes it (key btree + BRIN)
#   no_key     the stream without its key btree (sw_partition, sw_offset)
#   one_brin   neither index, one BRIN on (sw_offset, sw_event_time)
#   no_index   no index at all
# and the four streams again with their offset sequence cached (CACHE 64:
# what taking offsets a chunk at a time would save; the guard refuses
# ALTER SEQUENCE, so it is done under session_replication_role = replica).
# Only plain and stream are what streamwm makes today; the others are what
# the stream table's layout could be (DESIGN.md, "The stream table's
# indexes and access paths").  Rounds alternate the tables; the median
# of each is reported with its ratio to plain.
#
#   bash bench/layout.sh [ROWS [ROUNDS]]      (default 1000000 rows, 3 rounds)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
rows=${1:-1000000}; rounds=${2:-3}
. "$here/common.sh"
bench_as_postgres layout.sh "$rows" "$rounds"
commit=${COMMIT:-$(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo '?')}
settings=("shared_buffers = '512MB'" "max_wal_size = '4GB'" "synchronous_commit = off" "autovacuum = off" "fsync = off")
bench_cluster "${settings[@]}"
cc -O2 -o "$dir/gen" "$here/nexmark/gen.c" -lm
"$dir/gen" -t bids -r 2174 -d 1000 -s 42 -n "$rows" >"$dir/bids.tsv"
cols="auction int8, bidder int8, price int8"
kinds="stream no_key one_brin no_index"
$PSQL -c "CREATE TABLE plain ($cols, sw_write_time timestamptz)"
for k in $kinds; do
    for c in "" _c64; do
        t=$k$c
        $PSQL -c "SELECT streamwm.create_stream('$t', '$cols')" >/dev/null
        key=$($PSQL -c "SELECT conname FROM pg_constraint WHERE conrelid = '$t'::regclass AND contype = 'u'")
        brin=$($PSQL -c "SELECT indexrelid::regclass FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam WHERE indrelid = '$t'::regclass AND amname = 'brin'")
        case $k in
            no_key) $PSQL -c "ALTER TABLE $t DROP CONSTRAINT $key" ;;
            one_brin) $PSQL -c "ALTER TABLE $t DROP CONSTRAINT $key" -c "DROP INDEX $brin" \
                -c "CREATE INDEX ON $t USING brin (sw_offset, sw_event_time) WITH (pages_per_range = 32, autosummarize = off)" ;;
            no_index) $PSQL -c "ALTER TABLE $t DROP CONSTRAINT $key" -c "DROP INDEX $brin" ;;
        esac
        if [ -n "$c" ]; then
            $PSQL -c "SET session_replication_role = replica" -c "ALTER SEQUENCE ${t}_sw_offset_seq CACHE 64"
        fi
    done
done
tables="plain"
for k in $kinds; do tables="$tables $k ${k}_c64"; done
for r in $(seq "$rounds"); do
    for t in $tables; do
        cl="(auction, bidder, price, sw_write_time)"
        $PSQL -c "TRUNCATE $t" -c "CHECKPOINT"
        ms=$($PSQL -c '\timing on' -c "COPY $t $cl FROM '$dir/bids.tsv'" | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p')
        echo "$t $ms" | tee -a "$dir/times.txt"
    done
done
med() { awk -v t="$1" '$1 == t { print $2 }' "$dir/times.txt" | sort -g | awk '{ a[NR] = $1 } END { printf "%.0f", a[int((NR + 1) / 2)] }'; }
plain=$(med plain)
{
    echo
    echo "## Stream table layouts: COPY of $rows Nexmark bids (bench/layout.sh)"
    echo
    echo "$(date -u '+%Y-%m-%d %H:%M') UTC, commit $commit, \`bash bench/layout.sh $rows $rounds\`; $(nproc) cores, $(psql -X -At -d postgres -c 'SELECT version()' | cut -d, -f1); ${settings[*]}. Median of $rounds rounds, tables alternating; a TRUNCATE and CHECKPOINT before each COPY."
    echo
    echo "| table | ms | rows/s | : plain | ms, sequence CACHE 64 | : plain |"
    echo "|---|---:|---:|---:|---:|---:|"
    echo "| plain | $plain | $(awk -v n="$rows" -v ms="$plain" 'BEGIN { printf "%.0f", n * 1000 / ms }') | 1.00 | - | - |"
    for k in $kinds; do
        a=$(med "$k"); b=$(med "${k}_c64")
        echo "| $k | $a | $(awk -v n="$rows" -v ms="$a" 'BEGIN { printf "%.0f", n * 1000 / ms }') | $(awk -v a="$plain" -v b="$a" 'BEGIN { printf "%.2f", a / b }') | $b | $(awk -v a="$plain" -v b="$b" 'BEGIN { printf "%.2f", a / b }') |"
    done
} >>"$(bench_report)"
echo "done: $(bench_report)"
