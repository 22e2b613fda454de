# Sourced by the test scripts: a throwaway PostgreSQL cluster on a Unix
# socket in a temporary directory, run by the current user (never root).
PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}   # override to test against another installation
export PATH="$PG_BIN:$PATH"

cluster_start() {   # cluster_start DIR [extra postgresql.conf lines]
    local dir=$1; shift
    mkdir -p "$dir"
    initdb -D "$dir/data" -U postgres -A trust >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log"; return 1; }
    {
        echo "listen_addresses = ''"
        echo "unix_socket_directories = '$dir'"
        echo "port = 5432"
        echo "fsync = off"
        for line in "$@"; do echo "$line"; done
    } >>"$dir/data/postgresql.conf"
    pg_ctl -D "$dir/data" -l "$dir/server.log" -w start >/dev/null || { cat "$dir/server.log"; return 1; }
    export PGHOST="$dir" PGPORT=5432 PGUSER=postgres
}

cluster_stop() {    # cluster_stop DIR
    pg_ctl -D "$1/data" -m fast -w stop >/dev/null 2>&1 || true
}
