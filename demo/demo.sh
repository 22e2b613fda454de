#!/usr/bin/env bash
# The README's first command ends here: a throwaway cluster with streamwm
# preloaded, the YDB example of SPEC section 9 synchronously (exact result),
# then live, processed by the background worker as events arrive.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ "$(id -u)" = 0 ]; then
    # PostgreSQL refuses to run as root: run the demo as the postgres user.
    tmp=$(mktemp -d)
    cp "$here"/../test/cluster.sh "$here"/demo.sh "$here"/ydb_example.sql "$here"/ydb_example_live.sql "$tmp"/
    chown -R postgres "$tmp"
    exec runuser -u postgres -- env DEMO_DIR="$tmp" bash "$tmp/demo.sh"
fi
sqldir=${DEMO_DIR:-$here}
if [ -n "${DEMO_DIR:-}" ]; then . "$sqldir/cluster.sh"; else . "$here/../test/cluster.sh"; fi
dir=$(mktemp -d /tmp/streamwm-demo.XXXXXX)
trap 'cluster_stop "$dir"; rm -rf "$dir"' EXIT
cluster_start "$dir" "shared_preload_libraries = 'streamwm'"
PSQL="psql -X -q -v ON_ERROR_STOP=1 -d postgres"

echo "== The YDB example (SPEC section 9), with explicit write times and streamwm.process()"
$PSQL -f "$sqldir/ydb_example.sql"

echo
echo "== The same example live: real write times, the background worker closes the windows"
$PSQL -f "$sqldir/ydb_example_live.sql" >/dev/null
last='-infinity'
show_new() {    # print the windows closed since the last call
    local rows
    rows=$($PSQL -At -F ' | ' -c "SELECT window_start, window_end, result FROM example_live
                                  WHERE window_start > '$last' ORDER BY window_start")
    [ -n "$rows" ] || return 0
    echo "$rows" | sed 's/^/  window closed: /'
    last=$(echo "$rows" | tail -1 | cut -d'|' -f1)
}
send() {    # send PASS PAYLOAD
    $PSQL -c "SELECT streamwm.ingest('input_live', jsonb_build_object('pass', $1, 'payload', '$2'))" >/dev/null
    echo "  $(date -u +%T.%N | cut -c1-12) ingested {\"pass\": $1, \"payload\": \"$2\"}"
}
send 1 a; sleep 0.4
send 1 b; sleep 0.4
send 0 c; sleep 0.4
send 1 d
for i in $(seq 1 8); do
    sleep 0.5
    send 0 tick        # filtered out, but still advances the watermark
    show_new
done
sleep 1; show_new
echo
$PSQL -c "SELECT stream, watermark, events, late_events FROM streamwm.streams WHERE stream = 'input_live'::regclass"
$PSQL -c "SELECT query, closed_until, windows_emitted, last_error FROM streamwm.queries WHERE query = 'example_live'"
