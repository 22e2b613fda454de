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
    # the copy has no history: 008_upgrade.pl builds 0.1 from this repository's
    export STREAMWM_GIT_DIR=${STREAMWM_GIT_DIR:-$(git -C "$here" rev-parse --path-format=absolute --git-common-dir 2>/dev/null)}
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

# run_suite NAME DRIVER INPUTDIR OUTPUTDIR DBNAME TESTS...: one pg_regress-style
# run against the cluster, counted from its "... ok" / "... FAILED" lines
# (and as one failure if it exits non-zero without saying which test failed)
run_suite() {
    local name=$1 driver=$2 inputdir=$3 outputdir=$4 dbname=$5 log="test/results/$1.log"
    shift 5
    [ $# -gt 0 ] || return 0
    echo "== $name"
    mkdir -p "$outputdir"
    "$driver" --inputdir="$inputdir" --outputdir="$outputdir" --bindir="$PG_BIN" \
        --host="$PGHOST" --port="$PGPORT" --user=postgres --dbname="$dbname" "$@" 2>&1 | tee "$log"
    local rc=${PIPESTATUS[0]} ok bad
    ok=$(grep -cE '\.\.\. ok' "$log")
    bad=$(grep -cE '\.\.\. (FAILED|failed)' "$log")
    passed=$((passed + ok))
    failed=$((failed + bad))
    [ "$bad" = 0 ] || failures="$failures $(grep -E '\.\.\. (FAILED|failed)' "$log" | awk '{print $2}' | tr '\n' ' ')"
    if [ "$rc" != 0 ] && [ "$bad" = 0 ]; then
        failed=$((failed + 1)); failures="$failures $name(exit $rc)"
    fi
}

dir=$(mktemp -d /tmp/streamwm-pg.XXXXXX)
trap 'cluster_stop "$dir"; rm -rf "$dir"' EXIT
if ! cluster_start "$dir"; then
    echo "could not start the test cluster"
    echo "0 passed, 1 failed"
    exit 1
fi

run_suite regress "$PGXS_DIR/src/test/regress/pg_regress" . test/results \
    contrib_regression $(sed -n 's/^REGRESS = //p' Makefile)
run_suite isolation "$PGXS_DIR/src/test/isolation/pg_isolation_regress" test test/results/isolation \
    isolation_regression $(sed -n 's/^ISOLATION = //p' Makefile)

# 200 fixed-seed hostile inputs to every function (test/fuzz/README.md):
# no crash, no leaked-resource warning, the same postmaster throughout
echo "== fuzz smoke"
if python3 test/fuzz/fuzz.py --smoke --pg-bin "$PG_BIN" --watch-log "$dir/server.log" \
        --findings test/results/fuzz_findings.txt >test/results/fuzz_smoke.log 2>&1; then
    passed=$((passed + 1)); echo "test fuzz_smoke ... ok"
else
    failed=$((failed + 1)); failures="$failures fuzz_smoke"; echo "test fuzz_smoke ... FAILED"
    tail -n 20 test/results/fuzz_smoke.log
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
