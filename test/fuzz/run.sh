#!/usr/bin/env bash
# Fuzz streamwm against a throwaway cluster (see test/fuzz/README.md).
#
#   bash test/fuzz/run.sh MODE [fuzz.py options...]
#
# MODE:
#   plain     the extension as installed in PG_BIN's installation
#   ubsan     the extension rebuilt with -fsanitize=undefined (signed
#             overflow, shifts, misaligned or null pointers, out-of-bounds
#             indexing of arrays of known size) into a private copy of the
#             PostgreSQL installation (FUZZ_PG_ROOT, default
#             /tmp/streamwm-fuzz-san); reports logged and checked
#   valgrind  the same instrumented build, the postmaster and every backend
#             under valgrind memcheck (--trace-children=yes, --leak-check=no;
#             suppressions from FUZZ_VALGRIND_SUPP, e.g. PostgreSQL's
#             src/tools/valgrind.supp)
#
# (AddressSanitizer by LD_PRELOAD of gcc 12's libasan into Debian 12's
# postgres hangs every process at exit, in a destructor of libp11-kit
# waiting on glibc's setlocale lock; memcheck is used instead.)
#   soak      plain, streamwm preloaded, N seconds (--soak N, default 180)
#             of committed fuzzed ingests while the worker runs; RSS sampled
#
# As root, the cluster and the driver run as the postgres user.  Findings are
# written to $FUZZ_OUT (default /tmp/streamwm-fuzz-out/MODE).
set -u
here=$(cd "$(dirname "$0")/../.." && pwd)
mode=${1:-plain}
shift || true
PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
out=${FUZZ_OUT:-/tmp/streamwm-fuzz-out/$mode}

if { [ "$mode" = ubsan ] || [ "$mode" = valgrind ]; } && [ -z "${FUZZ_SAN_READY:-}" ]; then
    # a private copy of the installation, with the instrumented library
    root=${FUZZ_PG_ROOT:-/tmp/streamwm-fuzz-san}
    src_lib=$("$PG_BIN/pg_config" --pkglibdir)
    src_share=$("$PG_BIN/pg_config" --sharedir)
    src_inc=$("$PG_BIN/pg_config" --includedir-server)
    prefix=$(cd "$PG_BIN/../../../../.." && pwd)    # PREFIX/usr/lib/postgresql/15/bin -> PREFIX
    if [ ! -x "$root/usr/lib/postgresql/15/bin/postgres" ]; then
        mkdir -p "$root/usr/lib/postgresql" "$root/usr/share/postgresql" "$root/usr/include/postgresql"
        cp -a "$prefix/usr/lib/postgresql/15" "$root/usr/lib/postgresql/" &&
        cp -a "$prefix/usr/share/postgresql/15" "$root/usr/share/postgresql/" &&
        cp -a "$prefix/usr/include/postgresql/15" "$root/usr/include/postgresql/" || exit 1
    fi
    bld=$(mktemp -d /tmp/streamwm-fuzz-build.XXXXXX)
    cp -r "$here/src" "$here/sql" "$here/Makefile" "$here/streamwm.control" "$bld/"
    rm -f "$bld"/src/*.o "$bld"/src/*.bc
    make -s -C "$bld" PG_CONFIG="$root/usr/lib/postgresql/15/bin/pg_config" with_llvm=no \
        COPT="-fsanitize=undefined -fno-omit-frame-pointer -g -O1" \
        install >"$bld/build.log" 2>&1 || { cat "$bld/build.log"; exit 1; }
    rm -rf "$bld"
    [ -e "$root/usr/lib/postgresql/15/lib/streamwm.so" ] && chmod -R a+rX "$root"
    export PG_BIN="$root/usr/lib/postgresql/15/bin" FUZZ_SAN_READY=1
fi

if [ "$(id -u)" = 0 ]; then
    mkdir -p "$out"; chown postgres "$out" "$(dirname "$out")"
    tmp=$(mktemp -d /tmp/streamwm-fuzz.XXXXXX)
    cp -r "$here/test" "$tmp/"
    chown -R postgres "$tmp"
    runuser -u postgres -- env PG_BIN="$PG_BIN" FUZZ_OUT="$out" FUZZ_SAN_READY="${FUZZ_SAN_READY:-}" \
        FUZZ_VALGRIND_SUPP="${FUZZ_VALGRIND_SUPP:-}" bash "$tmp/test/fuzz/run.sh" "$mode" "$@" </dev/null
    rc=$?
    rm -rf "$tmp"
    exit $rc
fi

. "$here/test/cluster.sh"
mkdir -p "$out"
dir=$(mktemp -d /tmp/streamwm-fuzz-pg.XXXXXX)
export PGHOST="$dir" PGPORT=5432 PGUSER=postgres
watch=(--watch-log "$dir/server.log")
timeout=10s

initdb -D "$dir/data" -U postgres -A trust >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log"; exit 1; }
{
    echo "listen_addresses = ''"
    echo "unix_socket_directories = '$dir'"
    echo "fsync = off"
    echo "shared_preload_libraries = 'streamwm'"
    echo "streamwm.launcher_naptime = 1"
    echo "log_min_messages = warning"
    echo "restart_after_crash = on"
} >>"$dir/data/postgresql.conf"

case "$mode" in
plain|soak)
    pg_ctl -D "$dir/data" -l "$dir/server.log" -w start >/dev/null || { cat "$dir/server.log"; exit 1; }
    ;;
ubsan)
    mkdir -p "$out/san"; rm -f "$out"/san/*
    watch+=(--watch-log "$out/san")
    UBSAN_OPTIONS="print_stacktrace=1:log_path=$out/san/ubsan" \
        pg_ctl -D "$dir/data" -l "$dir/server.log" -w start >/dev/null || { cat "$dir/server.log"; exit 1; }
    ;;
valgrind)
    mkdir -p "$out/valgrind" "$out/san"; rm -f "$out"/valgrind/* "$out"/san/*
    watch+=(--watch-log "$out/valgrind" --watch-log "$out/san")
    supp=()
    [ -n "${FUZZ_VALGRIND_SUPP:-}" ] && supp=(--suppressions="$FUZZ_VALGRIND_SUPP")
    timeout=120s
    UBSAN_OPTIONS="print_stacktrace=1:log_path=$out/san/ubsan" \
    valgrind --quiet --trace-children=yes --leak-check=no --track-origins=no \
        --read-var-info=no --num-callers=30 --error-limit=no "${supp[@]}" \
        --log-file="$out/valgrind/%p.log" \
        "$PG_BIN/postgres" -D "$dir/data" >"$dir/server.log" 2>&1 &
    for _ in $(seq 1 300); do
        pg_isready -q -h "$dir" && break
        sleep 1
    done
    pg_isready -q -h "$dir" || { cat "$dir/server.log"; exit 1; }
    ;;
*)
    echo "unknown mode $mode (plain, ubsan, valgrind, soak)"; exit 2 ;;
esac

extra=()
[ "$mode" = soak ] && extra=(--soak 180)
python3 "$here/test/fuzz/fuzz.py" --pg-bin "$PG_BIN" --statement-timeout "$timeout" \
    --findings "$out/findings.txt" "${watch[@]}" "${extra[@]}" "$@"
rc=$?
pg_ctl -D "$dir/data" -m fast -w -t 300 stop >/dev/null 2>&1 || true
cp "$dir/server.log" "$out/server.log" 2>/dev/null
rm -rf "$dir"
exit $rc
