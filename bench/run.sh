#!/usr/bin/env bash
# Benchmarks (never part of the tests): ingest against a plain table, and
# window processing against one set-based GROUP BY pass, for growing
# size/hop.  Prints a table; bench/REPORT.md records a run.
#   bash bench/run.sh [ROWS]       (default 200000; run test/setup.sh first)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
rows=${1:-200000}
. "$here/common.sh"
bench_as_postgres run.sh "$rows"
bench_cluster "shared_buffers = '512MB'" "max_wal_size = '4GB'" "synchronous_commit = off"

ms() {  # ms SETUP SQL: run SETUP then SQL, print SQL's milliseconds (best of 3)
    local best=""
    for i in 1 2 3; do
        [ -n "$1" ] && $PSQL -c "$1"
        local t
        t=$($PSQL -c "\\timing on" -c "$2" | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' | tail -1)
        if [ -z "$best" ] || awk "BEGIN{exit !($t < $best)}"; then best=$t; fi
    done
    echo "$best"
}

echo "rows: $rows"
echo
echo "== ingest: INSERT ... SELECT of $rows rows (best of 3)"
$PSQL -c "CREATE TABLE plain (k int, v int, payload text)"
$PSQL -c "SELECT streamwm.create_stream('s1', 'k int, v int, payload text', retention => '10 days')" >/dev/null
$PSQL -c "SELECT streamwm.create_stream('s4', 'k int, v int, payload text', partitions => 4, partition_key => 'k')" >/dev/null
src="SELECT i % 100, i, 'payload ' || i FROM generate_series(1, $rows) i"
p=$(ms "TRUNCATE plain" "INSERT INTO plain (k, v, payload) $src")
s=$(ms "TRUNCATE s1" "INSERT INTO s1 (k, v, payload) $src")
k=$(ms "TRUNCATE s4" "INSERT INTO s4 (k, v, payload) $src")
$PSQL -c "CREATE TABLE plain_idx (LIKE s1)"
$PSQL -c "ALTER TABLE plain_idx ADD PRIMARY KEY (sw_partition, sw_offset)"
$PSQL -c "CREATE INDEX ON plain_idx (sw_event_time)"
x=$(ms "TRUNCATE plain_idx" "INSERT INTO plain_idx SELECT i % 100, i, 'payload ' || i, 0, i, now(), now() FROM generate_series(1, $rows) i")
printf "%-46s %10s ms  %6s rows/s\n" "plain table, same columns" "$p" "$(awk "BEGIN{printf \"%d\", $rows/($p/1000)}")"
printf "%-46s %10s ms  %6s rows/s\n" "plain table with the stream's columns and indexes" "$x" "$(awk "BEGIN{printf \"%d\", $rows/($x/1000)}")"
printf "%-46s %10s ms  %6s rows/s  (%s%% of plain)\n" "stream, 1 partition (sticky)" "$s" "$(awk "BEGIN{printf \"%d\", $rows/($s/1000)}")" "$(awk "BEGIN{printf \"%d\", 100*$p/$s}")"
printf "%-46s %10s ms  %6s rows/s  (%s%% of plain)\n" "stream, 4 partitions by partition_key" "$k" "$(awk "BEGIN{printf \"%d\", $rows/($k/1000)}")" "$(awk "BEGIN{printf \"%d\", 100*$p/$k}")"
$PSQL -c "CREATE TABLE src AS SELECT jsonb_agg(jsonb_build_object('k', i % 100, 'v', i, 'payload', 'payload ' || i)) AS j FROM generate_series(1, $rows) i"
j=$(ms "TRUNCATE s1" "SELECT streamwm.ingest('s1', j) FROM src")
printf "%-46s %10s ms  %6s rows/s\n" "streamwm.ingest() of one jsonb array" "$j" "$(awk "BEGIN{printf \"%d\", $rows/($j/1000)}")"
e=$(ms "TRUNCATE s1" "INSERT INTO s1 (k, v, payload) SELECT (e->>'k')::int, (e->>'v')::int, e->>'payload' FROM src, jsonb_array_elements(j) e")
printf "%-46s %10s ms  %6s rows/s\n" "the same jsonb by INSERT ... jsonb_array_elements" "$e" "$(awk "BEGIN{printf \"%d\", $rows/($e/1000)}")"

echo
echo "== windows: process() over $rows rows (1 s apart) vs one GROUP BY pass"
$PSQL -c "TRUNCATE s1"
$PSQL -c "INSERT INTO s1 (k, v, payload, sw_write_time) SELECT i % 100, i, 'x', to_timestamp(i) FROM generate_series(1, $rows) i"
g=$(ms "" "SELECT count(*) FROM (SELECT streamwm.window_start(sw_event_time, '10 s'), count(*), sum(v) FROM s1 GROUP BY 1) x")
printf "%-46s %10s ms\n" "GROUP BY pane (reference)" "$g"
for ratio in 1 2 5 10; do
    size=$((10 * ratio))
    $PSQL -c "SELECT streamwm.create_query('w$ratio', 'SELECT count(*) AS n, sum(v) AS s FROM s1', hop => '10 s', size => '$size s', start_from => 'earliest')" >/dev/null
    t=$(ms "UPDATE streamwm.query_def SET closed_until = '-infinity', windows_emitted = 0 WHERE name = 'w$ratio'; TRUNCATE w$ratio; UPDATE streamwm.query_def SET closed_until = 'infinity' WHERE name <> 'w$ratio' AND stream = 's1'::regclass" "SELECT streamwm.process('s1')")
    printf "%-46s %10s ms  (%sx the GROUP BY)\n" "process(), pane plan, size/hop = $ratio" "$t" "$(awk "BEGIN{printf \"%.1f\", $t/$g}")"
    t=$(ms "UPDATE streamwm.query_def SET closed_until = '-infinity', windows_emitted = 0, plan = 'general' WHERE name = 'w$ratio'; TRUNCATE w$ratio; UPDATE streamwm.query_def SET closed_until = 'infinity' WHERE name <> 'w$ratio' AND stream = 's1'::regclass" "SELECT streamwm.process('s1')")
    printf "%-46s %10s ms  (%sx the GROUP BY)\n" "process(), general plan, size/hop = $ratio" "$t" "$(awk "BEGIN{printf \"%.1f\", $t/$g}")"
done
$PSQL -c "SELECT query, windows_emitted, rows_upserted, last_error FROM streamwm.queries"
$PSQL -c "SELECT stream, watermark, events, late_events FROM streamwm.streams"; $PSQL -c "select count(*), min(sw_event_time), max(sw_event_time) from s1"
