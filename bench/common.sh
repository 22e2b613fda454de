# Sourced by the benchmark scripts (after they set `here`, their directory):
# what they all need around the measurement itself.
#
# bench_as_postgres SCRIPT ARG...
#   PostgreSQL refuses to run as root: as root, run bench/SCRIPT again as
#   postgres in a copy of bench/, passing on PG_BIN, COMMIT, BENCH_OUT (a
#   directory for its output) and the variables named in BENCH_ENV; bring
#   back what it wrote there (section.md appended to bench/REPORT.md, any
#   other file copied into bench/) and exit.  Returns at once otherwise.
# bench_cluster SETTING...
#   start a throwaway cluster with those postgresql.conf settings, stopped
#   and removed at exit, and create streamwm in its database postgres; sets
#   dir (the cluster's directory) and PSQL.
# bench_report
#   the file a script appends its dated report section to.
# step_times OUT FIRST
#   the time of each step marked "@step STREAM SEC" in psql output OUT
#   (\timing on), for SEC >= FIRST: lines "STREAM MS" in $dir/steps.txt.
# step_stats STREAM
#   "median p10 p90 count" of STREAM's step times in $dir/steps.txt.

bench_as_postgres() {
    [ "$(id -u)" = 0 ] || return 0
    local script=$1; shift
    local tmp name
    local -a pass=()
    for name in ${BENCH_ENV:-}; do pass+=("$name=${!name:-}"); done
    tmp=$(mktemp -d)
    cp -r "$here" "$tmp/bench"; cp "$here/../test/cluster.sh" "$tmp/bench/"
    mkdir "$tmp/out"; chown -R postgres "$tmp"
    runuser -u postgres -- env PG_BIN="${PG_BIN:-}" BENCH_OUT="$tmp/out" \
        COMMIT="$(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo '?')" \
        ${pass[@]+"${pass[@]}"} bash "$tmp/bench/$script" "$@"
    if [ -f "$tmp/out/section.md" ]; then
        cat "$tmp/out/section.md" >>"$here/REPORT.md"; rm "$tmp/out/section.md"
    fi
    if [ -n "$(ls -A "$tmp/out")" ]; then cp "$tmp/out/"* "$here/"; fi
    rm -rf "$tmp"
    exit 0
}

bench_cluster() {
    local cl="$here/cluster.sh"
    [ -f "$cl" ] || cl="$here/../test/cluster.sh"
    . "$cl"
    dir=$(mktemp -d /tmp/streamwm-bench.XXXXXX)
    chmod 755 "$dir"
    trap 'cluster_stop "$dir"; rm -rf "$dir"' EXIT
    cluster_start "$dir" "$@"
    PSQL="psql -X -q -At -v ON_ERROR_STOP=1 -d postgres"
    $PSQL -c "SET client_min_messages = warning" -c "CREATE EXTENSION streamwm" 2>/dev/null
}

bench_report() {
    if [ -n "${BENCH_OUT:-}" ]; then echo "$BENCH_OUT/section.md"; else echo "$here/REPORT.md"; fi
}

step_times() {
    awk -v first="$2" '/^@step/ { s = $2; sec = $3; next }
         /^Time:/ && s != "" { if (sec >= first) print s, $2; s = "" }' "$1" >"$dir/steps.txt"
}

step_stats() {
    awk -v s="$1" '$1 == s { print $2 }' "$dir/steps.txt" | sort -g |
        awk '{ a[NR] = $1 } END { printf "%.1f %.1f %.1f %d", a[int((NR + 1) / 2)], a[int(NR * 0.1) + 1], a[int(NR * 0.9)], NR }'
}
