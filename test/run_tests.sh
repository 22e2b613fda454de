#!/usr/bin/env bash
# The whole streamwm test suite: builds and installs the extension
# (test/setup.sh), starts a throwaway cluster with streamwm preloaded, and
# runs `make installcheck` against it: the pg_regress tests (sql/ ->
# expected/), the isolation specs (test/specs/) and the TAP tests (test/t/,
# each in clusters of its own).  Ends with the line "N passed, N failed".
#
# As root it runs the tests as the postgres user (PostgreSQL refuses root),
# in a copy of the test files.  TAP tests that take a length knob read
# STREAMWM_TEST_SCALE (default 1; the README says how to run the long ones).
# PRELOAD=0 runs against a cluster without streamwm preloaded.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
# the upgrade test (008_upgrade.pl) builds release 0.1 from this repository's history
export STREAMWM_GIT_DIR=${STREAMWM_GIT_DIR:-$(git -C "$here" rev-parse --path-format=absolute --git-common-dir 2>/dev/null)}

if [ -z "${SKIP_SETUP:-}" ]; then
    if ! bash "$here/test/setup.sh"; then
        echo "setup failed"
        echo "0 passed, 1 failed"
        exit 1
    fi
fi

if [ "$(id -u)" = 0 ]; then
    tmp=$(mktemp -d /tmp/streamwm-tests.XXXXXX)
    cp -r "$here/sql" "$here/expected" "$here/test" "$here/Makefile" "$here/META.json" "$here/streamwm.control" "$here/doc" "$tmp/"
    rm -rf "$tmp/test/results"
    # the history for 008_upgrade.pl, where the postgres user can read it
    # (the checkout may be in a directory only root may enter)
    if [ -n "$STREAMWM_GIT_DIR" ] &&
       git clone -q --bare --no-hardlinks "$STREAMWM_GIT_DIR" "$tmp/history.git" 2>/dev/null; then
        STREAMWM_GIT_DIR="$tmp/history.git"
    fi
    chown -R postgres "$tmp"
    runuser -u postgres -- env SKIP_SETUP=1 PG_BIN="$PG_BIN" STREAMWM_GIT_DIR="$STREAMWM_GIT_DIR" \
        bash "$tmp/test/run_tests.sh" </dev/null
    rc=$?
    rm -rf "$here/test/results"
    cp -r "$tmp/test/results" "$here/test/results" 2>/dev/null || true
    rm -rf "$tmp"
    exit $rc
fi

cd "$here"
. test/cluster.sh
rm -rf test/results tmp_check
mkdir -p test/results

dir=$(mktemp -d /tmp/streamwm-pg.XXXXXX)
trap 'cluster_stop "$dir"; rm -rf "$dir"' EXIT
preload="shared_preload_libraries = 'streamwm'"
[ "${PRELOAD:-1}" = 1 ] || preload=""
# room for parallel workers beside streamwm's own (sql/stream_brin.sql scans
# a stream in a parallel worker)
if ! cluster_start "$dir" "$preload" "max_worker_processes = 16"; then
    echo "could not start the test cluster"
    echo "0 passed, 1 failed"
    exit 1
fi

# -i: a failing stage (regress, isolation, TAP) does not keep the next from running
make -i PG_CONFIG="$PG_BIN/pg_config" installcheck 2>&1 | tee test/results/installcheck.log
cluster_stop "$dir"
[ -d tmp_check ] && cp -r tmp_check test/results/tap

log=test/results/installcheck.log
# pg_regress and pg_isolation_regress: "test NAME ... ok|FAILED"
r_passed=$(grep -cE '^test [^ ]+ +\.\.\. ok' "$log")
r_failed=$(grep -cE '^test [^ ]+ +\.\.\. (FAILED|failed)' "$log")
# prove: "test/t/NAME.pl .... " starts each file; its summary lists the failed ones
t_files=$(grep -oE '^test/t/[^ ]+\.pl \.+' "$log" | awk '{print $1}' | sort -u | wc -l)
t_failed=$(grep -cE '^test/t/[^ ]+\.pl +\(Wstat' "$log")
skipped=$(grep -cE '^test/t/[^ ]+\.pl \.+ skipped' "$log")
passed=$((r_passed + t_files - t_failed - skipped))
failed=$((r_failed + t_failed))
failures=$( { grep -E '^test [^ ]+ +\.\.\. (FAILED|failed)' "$log" | awk '{print $2}';
              grep -E '^test/t/[^ ]+\.pl +\(Wstat' "$log" | awk '{print $1}'; } | tr '\n' ' ')
stages=$(grep -cE '^make: .*Error [0-9]+ \(ignored\)' "$log")
if [ "$stages" -gt 0 ] && [ "$failed" = 0 ]; then
    failed=$stages; failures="a stage of make installcheck (see test/results/installcheck.log)"
fi

[ -z "$failures" ] || echo "failed: $failures(diffs in test/results/)"
if [ "$skipped" -gt 0 ]; then
    echo "$passed passed, $failed failed, $skipped skipped"
else
    echo "$passed passed, $failed failed"
fi
[ "$failed" = 0 ] && [ "$passed" -gt 0 ]
