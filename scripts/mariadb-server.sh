#!/usr/bin/env bash
# Starts or stops a throw-away MariaDB server on 127.0.0.1 for tests and benchmarks.
#
#   scripts/mariadb-server.sh start DIR    mariadb-install-db in a fresh temp dir, picks a free port,
#                                          starts the server, makes the user `dlock` (password `dlock`,
#                                          all rights on the database `dlock` and on databases named
#                                          dlock_*), writes DIR/url (mysql://dlock:dlock@127.0.0.1:PORT/dlock)
#                                          and DIR/pid
#   scripts/mariadb-server.sh stop DIR     stops it (SIGKILL: nothing to keep) and deletes its data
#   scripts/mariadb-server.sh restart DIR  SIGKILLs it (a crash to its clients) and starts it again on
#                                          the same port and data
#   scripts/mariadb-server.sh kill DIR     SIGKILLs the server (its sessions end with it)
#   scripts/mariadb-server.sh pause DIR    SIGSTOPs the server; resume DIR: SIGCONT
#
# Environment: MARIADB_TLS=CADIR serves TLS too, with the certificates scripts/test-ca.sh makes in
# CADIR (made there if missing): --ssl-cert/--ssl-key server.pem/.key, --ssl-ca ca.pem.
# MARIADB_TLS_REQUIRED=1 with it adds --require-secure-transport (TCP without TLS is refused; the
# script's own socket connections are not).
#
# Never assumes a port is free; stops only the server it started (by its PID).
set -euo pipefail

cmd="${1:-}"
dir="${2:-}"
[[ -n "$cmd" && -n "$dir" ]] || { echo "usage: $0 start|stop|restart|kill|pause|resume DIR" >&2; exit 64; }

for tool in mariadbd mariadb-install-db mariadb; do
  command -v "$tool" >/dev/null || [[ -x "/usr/sbin/$tool" ]] ||
    { echo "mariadb-server.sh: no $tool (apt-get install mariadb-server)" >&2; exit 1; }
done
server="$(command -v mariadbd || echo /usr/sbin/mariadbd)"

as_root=()
if [[ "$(id -u)" == 0 ]]; then as_root=(--user=root); fi

source "$(dirname "$0")/ports.sh"

data_dir() { cat "$dir/datadir"; }

admin() { mariadb --no-defaults -uroot --socket="$(data_dir)/sock" "$@"; }

# start_server PORT: 0 once it answers.
start_server() {
  local port="$1" data pid tls=()
  data="$(data_dir)"
  [[ -f "$dir/tls_args" ]] && mapfile -t tls < "$dir/tls_args"
  "$server" --no-defaults --datadir="$data/data" "${as_root[@]}" "${tls[@]}" --bind-address=127.0.0.1 --port="$port" \
    --socket="$data/sock" --pid-file="$data/pid" --log-error="$data/err.log" --tmpdir="$data/tmp" --skip-name-resolve \
    --innodb-buffer-pool-size=64M --innodb-flush-log-at-trx-commit=2 --max-connections=500 \
    >/dev/null 2>&1 </dev/null &
  pid=$!
  echo "$pid" > "$dir/pid"
  for _ in $(seq 1 300); do
    kill -0 "$pid" 2>/dev/null || return 1
    if timeout 2 mariadb --no-defaults -uroot --socket="$data/sock" -e "SELECT 1" >/dev/null 2>&1; then
      echo "$port" > "$dir/port"
      return 0
    fi
    sleep 0.05
  done
  return 1
}

stop_server() {
  [[ -f "$dir/pid" ]] || return 0
  local pid
  pid="$(cat "$dir/pid")"
  kill -CONT "$pid" 2>/dev/null || true
  kill -9 "$pid" 2>/dev/null || true
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
  rm -f "$dir/pid"
}

case "$cmd" in
  start)
    mkdir -p "$dir"
    data="$(mktemp -d /tmp/dlock-mariadb.XXXXXX)"
    echo "$data" > "$dir/datadir"
    # Temp files of its own: servers started side by side (tests run in
    # parallel) have been seen to trip over each other's in /tmp.
    mkdir -p "$data/tmp"
    rm -f "$dir/tls_args"
    if [[ -n "${MARIADB_TLS:-}" ]]; then
      "$(dirname "$0")/test-ca.sh" "$MARIADB_TLS"
      ca_dir="$(cd "$MARIADB_TLS" && pwd)"
      printf '%s\n' "--ssl-ca=$ca_dir/ca.pem" "--ssl-cert=$ca_dir/server.pem" "--ssl-key=$ca_dir/server.key" > "$dir/tls_args"
      if [[ "${MARIADB_TLS_REQUIRED:-0}" == 1 ]]; then echo "--require-secure-transport=ON" >> "$dir/tls_args"; fi
    fi
    mariadb-install-db --no-defaults --datadir="$data/data" --tmpdir="$data/tmp" "${as_root[@]}" \
      --auth-root-authentication-method=normal \
      --skip-test-db >"$data/install.log" 2>&1 ||
      { echo "mariadb-server.sh: mariadb-install-db failed:" >&2; grep -m5 -iE "error|fail" "$data/install.log" >&2; exit 1; }
    for attempt in 1 2 3 4 5; do
      port="$(free_port)"
      if start_server "$port"; then
        admin -e "CREATE DATABASE dlock CHARACTER SET utf8mb4;
                  CREATE USER 'dlock'@'127.0.0.1' IDENTIFIED BY 'dlock';
                  GRANT ALL ON \`dlock\`.* TO 'dlock'@'127.0.0.1';
                  GRANT ALL ON \`dlock\\_%\`.* TO 'dlock'@'127.0.0.1';"
        echo "mysql://dlock:dlock@127.0.0.1:$port/dlock" > "$dir/url"
        echo "mariadb-server.sh: serving on 127.0.0.1:$port (pid $(cat "$dir/pid"))"
        exit 0
      fi
      # Lost the port to someone else, or failed: stop what we started and retry.
      stop_server
    done
    echo "mariadb-server.sh: could not start MariaDB (see $data/err.log)" >&2
    exit 1
    ;;
  restart)
    stop_server
    start_server "$(cat "$dir/port")" || { echo "mariadb-server.sh: could not restart" >&2; exit 1; }
    ;;
  kill)
    kill -9 "$(cat "$dir/pid")"
    ;;
  pause|resume)
    sig=STOP; [[ "$cmd" == resume ]] && sig=CONT
    kill -"$sig" "$(cat "$dir/pid")"
    ;;
  stop)
    stop_server
    if [[ -f "$dir/datadir" ]]; then rm -rf "$(data_dir)"; rm -f "$dir/datadir"; fi
    rm -f "$dir/url" "$dir/port" "$dir/tls_args"
    ;;
  *)
    echo "usage: $0 start|stop|restart|kill|pause|resume DIR" >&2
    exit 64
    ;;
esac
