#!/usr/bin/env bash
# Starts or stops a throw-away PostgreSQL server on 127.0.0.1 for tests and benchmarks.
#
#   scripts/postgres-server.sh start DIR    initdb in a fresh temp dir, picks a free port, starts
#                                           the server (no fsync), makes the role and database
#                                           `dlock` (password `dlock`), writes DIR/url
#                                           (postgres://dlock:dlock@127.0.0.1:PORT/dlock),
#                                           DIR/admin_url (the superuser's) and DIR/pid
#   scripts/postgres-server.sh stop DIR     stops it (immediate shutdown) and deletes its data
#   scripts/postgres-server.sh restart DIR  stops it (immediate: a crash to its clients) and starts
#                                           it again on the same port and data
#   scripts/postgres-server.sh kill DIR     SIGKILLs the postmaster (its sessions end with it)
#   scripts/postgres-server.sh pause DIR    SIGSTOPs the server's processes; resume DIR: SIGCONT
#
# Environment: POSTGRES_TLS=CADIR serves TLS too (ssl=on), with the certificates scripts/test-ca.sh
# makes in CADIR (made there if missing): ssl_cert_file/ssl_key_file server.pem/.key, ssl_ca_file
# ca.pem (client certificates signed by it are checked). POSTGRES_TLS_REQUIRED=1 with it refuses
# connections over TCP without TLS (pg_hba.conf: hostssl only). POSTGRES_TLS_CLIENT_CERT=1 with it
# lets the role dlock in only with a client certificate signed by that CA whose CN is dlock
# (pg_hba.conf: hostssl ... cert, first), and over TLS only; other roles as before.
#
# fsync=off (tests only: an OS crash is not simulated) but synchronous_commit stays on: a
# server crash (restart, kill) must not forget committed fencing tokens.
# PostgreSQL refuses to run as root: as root, the server runs as the `postgres` user (its data
# dir is then theirs). Never assumes a port is free; stops only the server it started.
set -euo pipefail

cmd="${1:-}"
dir="${2:-}"
[[ -n "$cmd" && -n "$dir" ]] || { echo "usage: $0 start|stop|restart|kill|pause|resume DIR" >&2; exit 64; }

bin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)"
[[ -x "$bin/postgres" ]] || { echo "postgres-server.sh: no PostgreSQL server (apt-get install postgresql)" >&2; exit 1; }

as_server() {
  if [[ "$(id -u)" == 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi
}

source "$(dirname "$0")/ports.sh"

data_dir() { cat "$dir/pgdata"; }

# start_server PORT: 0 once it accepts connections.
start_server() {
  local port="$1" data
  data="$(data_dir)"
  as_server "$bin/pg_ctl" -D "$data/data" -l "$data/log" -w -t 30 \
    -o "-p $port -k $data -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=400" \
    start >/dev/null 2>&1 || return 1
  head -1 "$data/data/postmaster.pid" > "$dir/pid"
  echo "$port" > "$dir/port"
}

stop_server() {
  [[ -f "$dir/pgdata" ]] || return 0
  local data
  data="$(data_dir)"
  if [[ -f "$dir/pid" ]]; then
    pkill -CONT -P "$(cat "$dir/pid")" 2>/dev/null || true
    kill -CONT "$(cat "$dir/pid")" 2>/dev/null || true
  fi
  as_server "$bin/pg_ctl" -D "$data/data" -m immediate -w -t 30 stop >/dev/null 2>&1 || true
  if [[ -f "$dir/pid" ]]; then
    pid="$(cat "$dir/pid")"
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$dir/pid"
  fi
}

case "$cmd" in
  start)
    mkdir -p "$dir"
    data="$(mktemp -d /tmp/dlock-postgres.XXXXXX)"
    echo "$data" > "$dir/pgdata"
    if [[ "$(id -u)" == 0 ]]; then chown postgres:postgres "$data"; fi
    as_server "$bin/initdb" -D "$data/data" -U postgres -A trust --no-sync -E UTF8 >"$data/initdb.log" 2>&1 ||
      { echo "postgres-server.sh: initdb failed (see $data/initdb.log)" >&2; exit 1; }
    if [[ -n "${POSTGRES_TLS:-}" ]]; then
      "$(dirname "$0")/test-ca.sh" "$POSTGRES_TLS"
      # The server's own copies: it refuses a key that others (or nobody it runs as) can read.
      mkdir -p "$data/tls"
      cp "$POSTGRES_TLS/server.pem" "$POSTGRES_TLS/server.key" "$POSTGRES_TLS/ca.pem" "$data/tls/"
      chmod 600 "$data/tls/server.key"
      if [[ "$(id -u)" == 0 ]]; then chown -R postgres:postgres "$data/tls"; fi
      printf "ssl = on\nssl_cert_file = '%s'\nssl_key_file = '%s'\nssl_ca_file = '%s'\n" \
        "$data/tls/server.pem" "$data/tls/server.key" "$data/tls/ca.pem" >> "$data/data/postgresql.conf"
      if [[ "${POSTGRES_TLS_REQUIRED:-0}" == 1 ]]; then
        sed -i -E 's/^host(\s)/hostssl\1/' "$data/data/pg_hba.conf"
        echo "hostnossl all all 0.0.0.0/0 reject" >> "$data/data/pg_hba.conf"
      fi
      if [[ "${POSTGRES_TLS_CLIENT_CERT:-0}" == 1 ]]; then
        sed -i '1i hostnossl all dlock 0.0.0.0/0 reject\nhostssl all dlock 0.0.0.0/0 cert' "$data/data/pg_hba.conf"
      fi
    fi
    for attempt in 1 2 3 4 5; do
      port="$(free_port)"
      if start_server "$port"; then
        as_server "$bin/psql" -q -h 127.0.0.1 -p "$port" -U postgres -d postgres -v ON_ERROR_STOP=1 \
          -c "CREATE ROLE dlock LOGIN PASSWORD 'dlock'" -c "CREATE DATABASE dlock OWNER dlock" >/dev/null
        echo "postgres://dlock:dlock@127.0.0.1:$port/dlock" > "$dir/url"
        echo "postgres://postgres@127.0.0.1:$port/dlock" > "$dir/admin_url"
        echo "postgres-server.sh: serving on 127.0.0.1:$port (pid $(cat "$dir/pid"))"
        exit 0
      fi
      # Lost the port to someone else, or failed: stop what we started and retry.
      stop_server
    done
    echo "postgres-server.sh: could not start PostgreSQL (see $data/log)" >&2
    exit 1
    ;;
  restart)
    stop_server
    start_server "$(cat "$dir/port")" || { echo "postgres-server.sh: could not restart" >&2; exit 1; }
    ;;
  kill)
    kill -9 "$(cat "$dir/pid")"
    ;;
  pause|resume)
    sig=STOP; [[ "$cmd" == resume ]] && sig=CONT
    pkill -"$sig" -P "$(cat "$dir/pid")" || true
    kill -"$sig" "$(cat "$dir/pid")"
    ;;
  stop)
    stop_server
    if [[ -f "$dir/pgdata" ]]; then rm -rf "$(data_dir)"; rm -f "$dir/pgdata"; fi
    rm -f "$dir/url" "$dir/admin_url" "$dir/port"
    ;;
  *)
    echo "usage: $0 start|stop|restart|kill|pause|resume DIR" >&2
    exit 64
    ;;
esac
