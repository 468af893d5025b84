# A throwaway PostgreSQL for scripts that need one: sourced, not run.
#
#   start_throwaway_postgres DIR PORT   # initdb DIR/pg, start it on 127.0.0.1:PORT, create the database
#                                       # `ringrelay`; exports RINGRELAY_DATABASE_URL (random password)
#   stop_throwaway_postgres DIR         # stop it (the caller removes DIR)
#
# initdb and postgres refuse to run as root: as root, they run as the `postgres` user Debian's
# package creates, and DIR is handed to it. Needs pg_bindir's programs (install `postgresql`).

pg_bindir() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1; }

if [ "$(id -u)" -eq 0 ]; then
    as_pg() { runuser -u postgres -- "$@"; }
else
    as_pg() { "$@"; }
fi

start_throwaway_postgres() {
    local dir=$1 port=$2 pg password
    pg=$(pg_bindir)
    [ "$(id -u)" -eq 0 ] && chown postgres "$dir"
    password=$(head -c 18 /dev/urandom | base64 | tr -d '/+=')
    printf '%s\n' "$password" >"$dir/pwfile"
    chmod 644 "$dir/pwfile"
    as_pg "$pg/initdb" -D "$dir/pg" -U ringrelay --auth=scram-sha-256 --pwfile="$dir/pwfile" >"$dir/initdb.log" 2>&1
    rm -f "$dir/pwfile"
    as_pg "$pg/pg_ctl" -D "$dir/pg" -l "$dir/pg/server.log" -w -t 120 \
        -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=300 ${PG_OPTIONS:-}" start >/dev/null
    PGPASSWORD=$password as_pg "$pg/psql" -h 127.0.0.1 -p "$port" -U ringrelay -d postgres -qc "CREATE DATABASE ringrelay" >/dev/null
    export RINGRELAY_DATABASE_URL="postgres://ringrelay:$password@127.0.0.1:$port/ringrelay?sslmode=disable"
}

stop_throwaway_postgres() {
    as_pg "$(pg_bindir)/pg_ctl" -D "$1/pg" -m fast stop >/dev/null 2>&1 || true
}
