#!/usr/bin/env bash
# Live simulation (issue 8, "Must show"): is a step's cost flat in size/hop?
#
#   bash bench/live.sh [EVENTS_PER_S] [SECONDS] [KEYS] [WARMUP_S]
#        defaults:      5000           60        100    70
#   (run test/setup.sh first, or set PG_BIN to the bin directory of the
#    PostgreSQL installation streamwm was installed into)
#
# Twin streams get the same rows: each second of event time, EVENTS_PER_S
# rows with explicit sw_write_time in that second (keys 0..KEYS-1) are
# inserted into every stream, then each stream gets one
# streamwm.process(stream, now => end of that second), timed on its own
# (psql \timing, one autocommit transaction per step, as a worker's tick).
#   s1  / s60 : SELECT k, count(*) AS n, sum(v) AS s FROM <s> GROUP BY k
#               hop 1 s, size 1 s / size 60 s        (the pane plan on main)
#   g1  / g60 : SELECT k, count(*) AS n, string_agg(v::text, ',' ORDER BY v) AS vs
#               FROM <g> GROUP BY k, same hops/sizes  (the fallback / general plan)
# The four steps of a second run one after another, their order rotating each
# second.  WARMUP_S seconds of event time come first, so the 60 s windows are
# in steady state: the first WARMUP_S-10 in one bulk insert and one step, the
# last 10 one second at a time (untimed); then SECONDS timed seconds.
# Prints the median (and p10/p90) step time per stream and the ratios
# size/hop=60 : size/hop=1; appends a dated section to bench/REPORT.md.
# GENERAL=0 skips the g1/g60 pair.  RETENTION='30 s' creates the streams
# with that retention (default: create_stream's, 1 day, so nothing is
# deleted), so that steps also remove rows; every 10 s of event time each
# stream is VACUUMed (untimed), so that new rows reuse the space freed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
eps=${1:-5000}; secs=${2:-60}; keys=${3:-100}; warm=${4:-70}
general=${GENERAL:-1}
retention=${RETENTION:-}
. "$here/common.sh"
BENCH_ENV="GENERAL RETENTION" bench_as_postgres live.sh "$eps" "$secs" "$keys" "$warm"
report=$(bench_report)
settings=("shared_buffers = '512MB'" "max_wal_size = '4GB'" "synchronous_commit = off")
bench_cluster "${settings[@]}"

streams="s1 s60"; [ "$general" = 1 ] && streams="s1 s60 g1 g60"
for s in $streams; do
    $PSQL -c "SELECT streamwm.create_stream('$s', 'k int, v int'${retention:+, retention => '$retention'})" >/dev/null
    case $s in
        s*) q="SELECT k, count(*) AS n, sum(v) AS s FROM $s GROUP BY k" ;;
        g*) q="SELECT k, count(*) AS n, string_agg(v::text, ',' ORDER BY v) AS vs FROM $s GROUP BY k" ;;
    esac
    $PSQL -c "SELECT streamwm.create_query('q_$s', \$q\$$q\$q\$, hop => '1 s', size => '${s#?} s')" >/dev/null
done
# event time 0 = a minute-aligned instant an hour ago (before every row's arrival)
base=$($PSQL -c "SELECT date_trunc('minute', now() - interval '1 hour')")
ins() {   # ins FROM_S TO_S: the rows of event seconds [FROM_S, TO_S) into every stream
    for s in $streams; do
        echo "INSERT INTO $s (k, v, sw_write_time) SELECT i % $keys, i, '$base'::timestamptz + make_interval(secs => sec + (i - 1)::float8 / $eps) FROM generate_series($1, $2 - 1) sec, generate_series(1, $eps) i;"
    done
}
step() {  # step SEC: one process() per stream, order rotating with SEC, each marked
    local arr=($streams) n=${#arr[@]} j
    for ((j = 0; j < n; j++)); do
        local s=${arr[$(( (j + $1) % n ))]}
        echo "\\echo @step $s $1"
        echo "SELECT streamwm.process('$s', now => '$base'::timestamptz + make_interval(secs => $1 + 1));"
    done
}
t0=$(date +%s)
{
    echo "\\timing on"
    ins 0 $((warm - 10)); step $((warm - 11))
    for ((sec = warm - 10; sec < warm + secs; sec++)); do
        # with a retention, a VACUUM of every stream each 10 s (untimed), as
        # autovacuum would do in a run this long, so that freed space is reused
        if [ -n "$retention" ] && [ $((sec % 10)) = 0 ]; then
            for s in $streams; do echo "VACUUM $s;"; done
        fi
        ins $sec $((sec + 1)); step $sec
    done
} | $PSQL >"$dir/out.txt"
elapsed=$(( $(date +%s) - t0 ))
# step times: the Time line following each @step marker, for timed seconds only
step_times "$dir/out.txt" "$warm"
read -r m1 p1 P1 n1 <<<"$(step_stats s1)"; read -r m60 p60 P60 n60 <<<"$(step_stats s60)"
r=$(awk "BEGIN{printf \"%.2f\", $m60 / $m1}")
if [ "$general" = 1 ]; then
    read -r g1 gp1 gP1 gn1 <<<"$(step_stats g1)"; read -r g60 gp60 gP60 gn60 <<<"$(step_stats g60)"
    gr=$(awk "BEGIN{printf \"%.2f\", $g60 / $g1}")
fi
check=$($PSQL -c "SELECT string_agg(query || ': ' || windows_emitted || ' windows' || coalesce(', ERROR ' || last_error, ''), '; ' ORDER BY query) FROM streamwm.queries")
# every 60 s window that starts at or after event time 0 is complete: each key has 60 * eps / keys rows
groups=$($PSQL -c "SELECT count(DISTINCT window_start) || ' complete 60 s windows checked, ' || count(*) FILTER (WHERE n <> 60 * $eps / $keys) || ' wrong (key, window) counts (must be 0)' FROM q_s60 WHERE window_start >= '$base'")
ver=$($PSQL -c "SHOW server_version")
expired=$($PSQL -c "SELECT string_agg(stream || '=' || expired_rows, ', ' ORDER BY stream::text) FROM streamwm.streams")
plans=$($PSQL -c "SELECT string_agg(name || '=' || plan, ', ' ORDER BY name) FROM streamwm.query_def" 2>/dev/null || echo "?")

out=$(cat <<EOF
live simulation: $eps events/s into each stream, $keys keys, warm-up ${warm} s, $secs timed steps each
machine: $(nproc) cores, PostgreSQL $ver, $(IFS=';'; echo "${settings[*]}"), no worker (process(now => ...) timed by psql \\timing)
queries: $check
plans: $plans${retention:+
retention: $retention (expired rows: $expired)}
check: $groups

| stream | query | hop / size | median ms | p10 | p90 | steps |
|---|---|---|---:|---:|---:|---:|
| s1  | count, sum by k       | 1 s / 1 s  | $m1 | $p1 | $P1 | $n1 |
| s60 | count, sum by k       | 1 s / 60 s | $m60 | $p60 | $P60 | $n60 |
EOF
)
if [ "$general" = 1 ]; then
    out+=$'\n'"| g1  | count, string_agg by k | 1 s / 1 s  | $g1 | $gp1 | $gP1 | $gn1 |"
    out+=$'\n'"| g60 | count, string_agg by k | 1 s / 60 s | $g60 | $gp60 | $gP60 | $gn60 |"
fi
out+=$'\n\n'"ratio size/hop=60 : size/hop=1, median step: count/sum ${r}x"
[ "$general" = 1 ] && out+=", fallback (string_agg) ${gr}x"
out+=$'\n'"total run time ${elapsed} s"
echo "$out"
{
    echo
    echo "## Live simulation, $(date -u '+%Y-%m-%d %H:%M UTC') (\`${retention:+RETENTION='$retention' }bash bench/live.sh $eps $secs $keys $warm\`, commit ${COMMIT:-$(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo '?')})"
    echo
    echo "$out"
} >>"$report"
