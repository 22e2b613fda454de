#!/usr/bin/env bash
# The YDB example of SPEC section 9, end to end, in a throwaway cluster.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ "$(id -u)" = 0 ]; then
    # PostgreSQL refuses to run as root: run the demo as the postgres user.
    tmp=$(mktemp -d); cp "$here"/cluster.sh "$here"/demo.sh "$here"/../sql/ydb_example_demo.sql "$tmp"/
    chown -R postgres "$tmp"
    exec runuser -u postgres -- env DEMO_SQL="$tmp/ydb_example_demo.sql" bash "$tmp/demo.sh"
fi
. "$here/cluster.sh"
dir=$(mktemp -d /tmp/streamwm-demo.XXXXXX)
trap 'cluster_stop "$dir"; rm -rf "$dir"' EXIT
cluster_start "$dir"
psql -X -q -v ON_ERROR_STOP=1 -d postgres -f "${DEMO_SQL:-$here/../sql/ydb_example_demo.sql}"
