#!/usr/bin/env bash
# The whole streamwm test suite: builds and installs the extension
# (test/setup.sh), starts a throwaway cluster, runs the pg_regress tests
# (sql/ -> expected/), the isolation specs (test/specs/) and the TAP tests
# (test/t/), and ends with the line "N passed, N failed".
#
# As root it runs the tests as the postgres user (PostgreSQL refuses root),
# in a copy of the test files.  TAP tests that take a length knob read
# STREAMWM_TEST_SCALE (default 1; the README says how to run the long ones).
set -u
here=$(cd "$(dirname "$0")/.." && pwd)

if [ -z "${SKIP_SETUP:-}" ]; then
    if ! bash "$here/test/setup.sh"; then
        echo "setup failed"
        echo "0 passed, 1 failed"
        exit 1
    fi
fi

if [ "$(id -u)" = 0 ]; then
    tmp=$(mktemp -d /tmp/streamwm-tests.XXXXXX)
    cp -r "$here/sql" "$here/expected" "$here/test" "$here/Makefile" "$tmp/"
    rm -rf "$tmp/test/results"
    chown -R postgres "$tmp"
    runuser -u postgres -- env SKIP_SETUP=1 bash "$tmp/test/run_tests.sh" </dev/null
    rc=$?
    rm -rf "$here/test/results"
    cp -r "$tmp/test/results" "$here/test/results" 2>/dev/null || true
    rm -rf "$tmp"
    exit $rc
fi

cd "$here"
. test/cluster.sh
PGXS_DIR=$(dirname "$(pg_config --pgxs)")/../..
mkdir -p test/results
passed=0
failed=0
failures=""

count_pg_regress() {    # count_pg_regress LOGFILE
    local ok bad
    ok=$(grep -cE '\.\.\. ok|^ok [0-9]+' "$1")
    bad=$(grep -cE '\.\.\. FAILED|\.\.\. failed|^not ok [0-9]+' "$1")
    passed=$((passed + ok))
    failed=$((failed + bad))
    [ "$bad" = 0 ] || failures="$failures $(grep -E '\.\.\. (FAILED|failed)|^not ok' "$1" | awk '{print $2}' | tr '\n' ' ')"
}

dir=$(mktemp -d /tmp/streamwm-pg.XXXXXX)
trap 'cluster_stop "$dir"; rm -rf "$dir"' EXIT
if ! cluster_start "$dir"; then
    echo "could not start the test cluster"
    echo "0 passed, 1 failed"
    exit 1
fi

echo "== pg_regress"
regress_tests=$(sed -n 's/^REGRESS = //p' Makefile)
"$PGXS_DIR/src/test/regress/pg_regress" --inputdir=. --outputdir=test/results \
    --bindir="$PG_BIN" --host="$PGHOST" --port="$PGPORT" --user=postgres \
    --dbname=contrib_regression $regress_tests 2>&1 | tee test/results/regress.log
rc=${PIPESTATUS[0]}
count_pg_regress test/results/regress.log
if [ "$rc" != 0 ] && ! grep -qE '\.\.\. (FAILED|failed)' test/results/regress.log; then
    failed=$((failed + 1)); failures="$failures pg_regress(exit $rc)"
fi

echo "== isolation"
iso_tests=$(sed -n 's/^ISOLATION = //p' Makefile)
if [ -n "$iso_tests" ]; then
    mkdir -p test/results/isolation
    "$PGXS_DIR/src/test/isolation/pg_isolation_regress" --inputdir=test \
        --outputdir=test/results/isolation \
        --bindir="$PG_BIN" --host="$PGHOST" --port="$PGPORT" --user=postgres \
        --dbname=isolation_regression $iso_tests 2>&1 | tee test/results/isolation.log
    rc=${PIPESTATUS[0]}
    count_pg_regress test/results/isolation.log
    if [ "$rc" != 0 ] && ! grep -qE '\.\.\. (FAILED|failed)' test/results/isolation.log; then
        failed=$((failed + 1)); failures="$failures pg_isolation_regress(exit $rc)"
    fi
fi
cluster_stop "$dir"

echo "== TAP"
export TESTDIR="$here/test/results/tap" PG_REGRESS="$PGXS_DIR/src/test/regress/pg_regress"
mkdir -p "$TESTDIR"
for t in test/t/*.pl; do
    [ -e "$t" ] || continue
    prove -I "$PGXS_DIR/src/test/perl" -I test "$t" 2>&1 | tee -a test/results/tap.log
    if [ "${PIPESTATUS[0]}" = 0 ]; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        failures="$failures $t"
    fi
done

[ -z "$failures" ] || echo "failed:$failures (diffs in test/results/)"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ] && [ "$passed" -gt 0 ]
