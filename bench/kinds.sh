#!/usr/bin/env bash
# Steady steps of session and count queries beside a hopping one (issue 11:
# each kind "as fast as the hopping windows"):
#
#   bash bench/kinds.sh [EVENTS_PER_S] [SECONDS] [KEYS] [WARMUP_S]
#        defaults:      5000           60        100    40
#   (run test/setup.sh first, or set PG_BIN to the bin directory of the
#    PostgreSQL installation streamwm was installed into)
#
# Twin streams get the same rows, as in bench/live.sh: each second of event
# time, EVENTS_PER_S rows with explicit sw_write_time in that second, then
# one streamwm.process(stream, now => end of that second) per stream, timed
# on its own.  Keys come in two sets of KEYS that take turns every 20 s, so
# that sessions last 20 s and close 10 s after their set stops.  Every
# query is SELECT k, count(*) AS n, sum(v) AS s FROM <stream> GROUP BY k:
#   h  : hop 1 s, size 10 s (the pane plan: the reference)
#   x  : a session query, gap 10 s, keeping its open sessions as partial states
#   xr : the same session query stepped with streamwm.pane_engine off, so
#        that each step reads the rows of the open sessions again
#   c  : a count query, 1000 events a window every 100 (partial states per
#        chunk of 100 events)
#   cr : the same count query made with streamwm.pane_engine off: each step
#        reads the events of each group's incomplete window again
# The steps of a second run one after another, their order rotating; the
# first WARMUP_S seconds are untimed.  Prints the median (p10, p90) step
# time per stream, the ratios, and whether x = xr and c = cr (EXCEPT both
# ways); appends a dated section to bench/REPORT.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
eps=${1:-5000}; secs=${2:-60}; keys=${3:-100}; warm=${4:-40}
. "$here/common.sh"
bench_as_postgres kinds.sh "$eps" "$secs" "$keys" "$warm"
report=$(bench_report)
settings=("shared_buffers = '512MB'" "max_wal_size = '4GB'" "synchronous_commit = off")
bench_cluster "${settings[@]}"

streams="h x xr c cr"
for s in $streams; do
    q="SELECT k, count(*) AS n, sum(v) AS s FROM $s GROUP BY k"
    $PSQL -c "SELECT streamwm.create_stream('$s', 'k int, v int')" >/dev/null
    case $s in
        h) $PSQL -c "SELECT streamwm.create_query('q_$s', \$q\$$q\$q\$, hop => '1 s', size => '10 s')" >/dev/null ;;
        x|xr) $PSQL -c "SELECT streamwm.create_session_query('q_$s', \$q\$$q\$q\$, gap => '10 s')" >/dev/null ;;
        c) $PSQL -c "SELECT streamwm.create_count_query('q_$s', \$q\$$q\$q\$, 1000, 100)" >/dev/null ;;
        cr) $PSQL -c "SET streamwm.pane_engine = off" \
                  -c "SELECT streamwm.create_count_query('q_$s', \$q\$$q\$q\$, 1000, 100)" >/dev/null ;;
    esac
done
base=$($PSQL -c "SELECT date_trunc('minute', now() - interval '1 hour')")
ins() {   # ins SEC: the rows of event second SEC into every stream
    for s in $streams; do
        echo "INSERT INTO $s (k, v, sw_write_time) SELECT i % $keys + $keys * (($1 / 20) % 2), i, '$base'::timestamptz + make_interval(secs => $1 + (i - 1)::float8 / $eps) FROM generate_series(1, $eps) i;"
    done
}
step() {  # step SEC: one process() per stream, order rotating with SEC, each marked
    local arr=($streams) n=${#arr[@]} j
    for ((j = 0; j < n; j++)); do
        local s=${arr[$(( (j + $1) % n ))]}
        if [ "$s" = xr ]; then echo "SET streamwm.pane_engine = off;"; fi
        echo "\\echo @step $s $1"
        echo "SELECT streamwm.process('$s', now => '$base'::timestamptz + make_interval(secs => $1 + 1));"
        if [ "$s" = xr ]; then echo "RESET streamwm.pane_engine;"; fi
    done
}
t0=$(date +%s)
{
    echo "\\timing on"
    for ((sec = 0; sec < warm + secs; sec++)); do ins $sec; step $sec; done
} | $PSQL >"$dir/out.txt"
elapsed=$(( $(date +%s) - t0 ))
step_times "$dir/out.txt" "$warm"
declare -A med p10 p90 n
for s in $streams; do read -r "med[$s]" "p10[$s]" "p90[$s]" "n[$s]" <<<"$(step_stats $s)"; done
ratio() { awk "BEGIN{printf \"%.2f\", ${med[$1]} / ${med[$2]}}"; }
same() {  # same A B: rows of q_A not in q_B and the other way round
    $PSQL -c "SELECT (SELECT count(*) FROM (TABLE q_$1 EXCEPT TABLE q_$2) d) || ' + ' || (SELECT count(*) FROM (TABLE q_$2 EXCEPT TABLE q_$1) d) || ' differing rows, ' || (SELECT count(*) FROM q_$1) || ' rows'"
}
check=$($PSQL -c "SELECT string_agg(query || ': ' || windows_emitted || ' windows' || coalesce(', ERROR ' || last_error, ''), '; ' ORDER BY query) FROM streamwm.queries")
state=$($PSQL -c "SELECT string_agg(name || ' ' || pg_size_pretty(pg_total_relation_size(pane_table)), ', ' ORDER BY name) FROM streamwm.query_def WHERE pane_table IS NOT NULL")
ver=$($PSQL -c "SHOW server_version")

out=$(cat <<EOF
steady steps: $eps events/s into each stream, keys in 2 sets of $keys taking turns every 20 s, $warm s untimed, $secs timed steps each
machine: $(nproc) cores, PostgreSQL $ver, $(IFS=';'; echo "${settings[*]}"), no worker (process(now => ...) timed by psql \\timing)
queries: $check
state tables at the end: $state

| stream | query (count, sum by k) | median ms | p10 | p90 | steps |
|---|---|---:|---:|---:|---:|
| h  | hopping, hop 1 s, size 10 s                    | ${med[h]} | ${p10[h]} | ${p90[h]} | ${n[h]} |
| x  | session, gap 10 s, open sessions kept          | ${med[x]} | ${p10[x]} | ${p90[x]} | ${n[x]} |
| xr | session, gap 10 s, rows read again             | ${med[xr]} | ${p10[xr]} | ${p90[xr]} | ${n[xr]} |
| c  | count, 1000 every 100, chunks kept             | ${med[c]} | ${p10[c]} | ${p90[c]} | ${n[c]} |
| cr | count, 1000 every 100, events read again       | ${med[cr]} | ${p10[cr]} | ${p90[cr]} | ${n[cr]} |

median step: session kept : hopping $(ratio x h)x, read again : kept $(ratio xr x)x; count kept : hopping $(ratio c h)x, read again : kept $(ratio cr c)x
same results: sessions $(same x xr); counts $(same c cr)
total run time ${elapsed} s
EOF
)
echo "$out"
{
    echo
    echo "## Session and count steps, $(date -u '+%Y-%m-%d %H:%M UTC') (\`bash bench/kinds.sh $eps $secs $keys $warm\`, commit ${COMMIT:-$(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo '?')})"
    echo
    echo "$out"
} >>"$report"
