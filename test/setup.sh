#!/usr/bin/env bash
# Installs what streamwm needs on Debian 12 (PostgreSQL 15 server and
# headers, a compiler, the TAP test modules), then builds and installs the
# extension.  Works as root and as an ordinary user with sudo.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || { echo "setup: run as root or install sudo" >&2; exit 1; }
    SUDO="sudo"
fi

PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}   # override to test against another installation
need=""
[ -x "$PG_BIN/postgres" ] || need="$need postgresql-15"
[ -f /usr/include/postgresql/15/server/postgres.h ] || need="$need postgresql-server-dev-15"
[ -d /usr/share/perl5/IPC/Run ] || [ -f /usr/share/perl5/IPC/Run.pm ] || need="$need libipc-run-perl"
command -v make >/dev/null || need="$need make"
command -v gcc >/dev/null || need="$need gcc"
command -v pgbench >/dev/null || [ -x "$PG_BIN/pgbench" ] || need="$need postgresql-contrib-15"
if [ -n "$need" ]; then
    echo "setup: installing$need"
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $need >/dev/null
fi

# Optional: extensions whose aggregates the extension_aggs test runs in
# window queries (hll, tdigest).  Without them that test checks nothing
# (expected/extension_aggs_1.out), so failing to install them (no network,
# sudo that wants a password) is only a note, never a setup failure.
optional=""
[ -f /usr/share/postgresql/15/extension/hll.control ] || optional="$optional postgresql-15-hll"
[ -f /usr/share/postgresql/15/extension/tdigest.control ] || optional="$optional postgresql-15-tdigest"
if [ -n "$optional" ]; then
    echo "setup: installing (optional)$optional"
    if [ -n "$SUDO" ] && ! sudo -n true 2>/dev/null; then
        echo "setup: no password-less sudo: skipped$optional (the extension_aggs test will check nothing)"
    elif ! { $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $optional >/dev/null 2>&1 ||
             { $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null 2>&1 &&
               $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $optional >/dev/null 2>&1; }; }; then
        echo "setup: could not install$optional (the extension_aggs test will check nothing)"
    fi
fi

make -s PG_CONFIG="$PG_BIN/pg_config" 2>&1
$SUDO make -s PG_CONFIG="$PG_BIN/pg_config" install >/dev/null
echo "setup: streamwm built and installed into $("$PG_BIN/pg_config" --pkglibdir)"
