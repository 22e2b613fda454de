#!/bin/bash
# Where a COPY into a stream spends its time (issue 9: ingest at 0.8 of a
# plain table): the same COPY of Nexmark bids into
#   plain      a table with the stream's user columns and sw_write_time
#   stream     a stream as create_stream makes it: one streamwm_brin index
#              on (sw_partition, sw_offset, sw_event_time) (BRIN brought up to
#              date at commit), offsets 64 to a nextval()
#   brin       the same with PostgreSQL's BRIN (a summary look-up a row), as
#              0.3 made it before streamwm_brin
#   step1      the same, its sequence stepping by 1 (one nextval() a row)
#   old        what 0.2 made: a unique key btree (sw_partition, sw_offset)
#              and a BRIN index on sw_event_time, sequence stepping by 1
#   no_index   a stream without any index
# (the guard refuses ALTER SEQUENCE on a stream's sequence: it is done
# under session_replication_role = replica).  Only plain and stream are
# what streamwm makes today; the others say what each part costs (DESIGN.md,
# "The stream table's indexes and access paths").  Rounds alternate the
# tables; the median of each is reported with its ratio to plain.
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
kinds="stream brin step1 old no_index"
$PSQL -c "CREATE TABLE plain ($cols, sw_write_time timestamptz)"
for t in $kinds; do
    $PSQL -c "SELECT streamwm.create_stream('$t', '$cols')" >/dev/null
    brin=$($PSQL -c "SELECT indexrelid::regclass FROM pg_index WHERE indrelid = '$t'::regclass")
    case $t in
        step1) $PSQL -c "SET session_replication_role = replica" -c "ALTER SEQUENCE ${t}_sw_offset_seq INCREMENT BY 1" ;;
        old) $PSQL -c "SET session_replication_role = replica" -c "ALTER SEQUENCE ${t}_sw_offset_seq INCREMENT BY 1" \
                 -c "DROP INDEX $brin" -c "ALTER TABLE $t ADD UNIQUE (sw_partition, sw_offset)" \
                 -c "CREATE INDEX ON $t USING brin (sw_event_time) WITH (pages_per_range = 32, autosummarize = off)" ;;
        brin) $PSQL -c "DROP INDEX $brin" \
                  -c "CREATE INDEX ON $t USING brin (sw_partition, sw_offset, sw_event_time) WITH (pages_per_range = 32, autosummarize = off)" ;;
        no_index) $PSQL -c "DROP INDEX $brin" ;;
    esac
done
tables="plain $kinds"
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
    echo "| table | ms | rows/s | : plain |"
    echo "|---|---:|---:|---:|"
    for t in $tables; do
        a=$(med "$t")
        echo "| $t | $a | $(awk -v n="$rows" -v ms="$a" 'BEGIN { printf "%.0f", n * 1000 / ms }') | $(awk -v a="$plain" -v b="$a" 'BEGIN { printf "%.2f", a / b }') |"
    done
} >>"$(bench_report)"
echo "done: $(bench_report)"
