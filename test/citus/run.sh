#!/usr/bin/env bash
# streamwm on Citus (opt-in; neither test/run_tests.sh nor `make installcheck`
# runs it).  Starts a Citus coordinator and two workers on localhost ports,
# each with shared_preload_libraries = 'citus,streamwm' and both extensions
# created in database streamwm_citus, registers the workers, runs the
# pg_regress tests of test/citus/sql against the coordinator, stops
# everything and ends with "N passed, N failed".
#
# Citus is not packaged by Debian: build and install it yourself into the
# PostgreSQL of PG_BIN (README, "Scaling out with Citus").  Without
# citus.so in that installation's pkglibdir this prints
# "citus not installed: skipped" and exits 0.
#
#   PG_BIN=/path/to/pg/bin bash test/citus/run.sh
#   CITUS_PORT=57630 (default) is the coordinator's port; the workers take
#   the next two.  CITUS_TESTS="local refusals" runs only those tests.
set -u
here=$(cd "$(dirname "$0")/../.." && pwd)
PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
pkglibdir=$("$PG_BIN/pg_config" --pkglibdir)
if [ ! -f "$pkglibdir/citus.so" ]; then
    echo "citus not installed: skipped (no citus.so in $pkglibdir)"
    exit 0
fi
if [ ! -f "$pkglibdir/streamwm.so" ]; then
    echo "streamwm is not installed in $pkglibdir: make PG_CONFIG=$PG_BIN/pg_config install"
    echo "0 passed, 1 failed"
    exit 1
fi

# PostgreSQL refuses to run as root: run as postgres, in a copy of the tests
if [ "$(id -u)" = 0 ]; then
    tmp=$(mktemp -d /tmp/streamwm-citus-tests.XXXXXX)
    mkdir -p "$tmp/test"
    cp -r "$here/test/citus" "$tmp/test/"
    rm -rf "$tmp/test/citus/results"
    chown -R postgres "$tmp"
    runuser -u postgres -- env PG_BIN="$PG_BIN" CITUS_PORT="${CITUS_PORT:-57630}" \
        CITUS_TESTS="${CITUS_TESTS:-}" bash "$tmp/test/citus/run.sh" </dev/null
    rc=$?
    rm -rf "$here/test/citus/results"
    cp -r "$tmp/test/citus/results" "$here/test/citus/results" 2>/dev/null || true
    rm -rf "$tmp"
    exit $rc
fi

cd "$here/test/citus"
export PATH="$PG_BIN:$PATH"
port=${CITUS_PORT:-57630}
ports="$port $((port + 1)) $((port + 2))"
db=streamwm_citus
dir=$(mktemp -d /tmp/streamwm-citus.XXXXXX)
rm -rf results
mkdir -p results

stop_all() {
    for p in $ports; do
        pg_ctl -D "$dir/n$p" -m fast -w stop >/dev/null 2>&1 || true
    done
}
trap 'stop_all; rm -rf "$dir"' EXIT

fail_setup() {
    echo "$1"
    for p in $ports; do
        [ -f "$dir/n$p.log" ] && tail -20 "$dir/n$p.log"
    done
    echo "0 passed, 1 failed"
    exit 1
}

for p in $ports; do
    initdb -D "$dir/n$p" -U postgres -A trust >"$dir/initdb$p.log" 2>&1 ||
        { cat "$dir/initdb$p.log"; fail_setup "initdb failed"; }
    {
        echo "listen_addresses = 'localhost'"
        echo "port = $p"
        echo "unix_socket_directories = '$dir'"
        echo "fsync = off"
        echo "shared_preload_libraries = 'citus,streamwm'"
        echo "max_prepared_transactions = 20"
        # the tests drive processing with streamwm.process(now => ...)
        echo "streamwm.enabled = off"
        echo "citus.shard_replication_factor = 1"
        # shard moves by logical replication (move_ingest.sql: force_logical)
        echo "wal_level = logical"
    } >>"$dir/n$p/postgresql.conf"
    pg_ctl -D "$dir/n$p" -l "$dir/n$p.log" -w start >/dev/null || fail_setup "node on port $p did not start"
    psql -X -q -h "$dir" -p "$p" -U postgres -d postgres -v ON_ERROR_STOP=1 \
        -c "CREATE DATABASE $db" >/dev/null || fail_setup "CREATE DATABASE failed on $p"
    psql -X -q -h "$dir" -p "$p" -U postgres -d "$db" -v ON_ERROR_STOP=1 \
        -c "CREATE EXTENSION citus" -c "CREATE EXTENSION streamwm" >/dev/null ||
        fail_setup "CREATE EXTENSION failed on $p"
done

set -- $ports
psql -X -q -h "$dir" -p "$1" -U postgres -d "$db" -v ON_ERROR_STOP=1 \
    -c "SELECT citus_set_coordinator_host('localhost', $1)" \
    -c "SELECT citus_add_node('localhost', $2)" \
    -c "SELECT citus_add_node('localhost', $3)" >/dev/null || fail_setup "registering the workers failed"

tests=${CITUS_TESTS:-$(ls sql/*.sql | sed 's|sql/||; s|\.sql$||' | sort | tr '\n' ' ')}
pg_regress=$("$PG_BIN/pg_config" --pgxs | sed 's|/src/makefiles/pgxs.mk$||')/src/test/regress/pg_regress
# the tests talk to the workers through psql's \connect with these
export PGHOST=localhost CITUS_COORDINATOR=$1 CITUS_W1=$2 CITUS_W2=$3 CITUS_DIR=$dir
"$pg_regress" --use-existing --bindir="$PG_BIN" --host=localhost --port="$1" --user=postgres \
    --dbname="$db" --inputdir=. --outputdir=results $tests 2>&1 | tee results/regress.log

passed=$(grep -cE '\.\.\. ok' results/regress.log)
failed=$(grep -cE '\.\.\. (FAILED|failed)' results/regress.log)
[ "$failed" = 0 ] || echo "diffs in test/citus/results/regression.diffs"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ] && [ "$passed" -gt 0 ]
