#!/usr/bin/env bash
# Starts or stops a throw-away redis-server on 127.0.0.1 for tests and benchmarks.
#
#   scripts/redis-server.sh start DIR   picks a free port, starts redis-server with its data,
#                                       log and pid in DIR (no persistence), waits until it
#                                       answers PING, writes DIR/url (redis://127.0.0.1:PORT)
#   scripts/redis-server.sh stop DIR    stops the server whose pid is in DIR/redis.pid
#   scripts/redis-server.sh restart DIR stops it and starts a fresh one (empty data) on the same port
#
# REDIS_EXTRA_ARGS adds server arguments (e.g. "--requirepass secret"); REDIS_CLI_AUTH the
# redis-cli arguments the readiness check then needs (e.g. "-a secret --no-auth-warning").
#
# Never assumes a port is free and stops only the process it started (by its pid).
set -euo pipefail

cmd="${1:-}"
dir="${2:-}"
[[ -n "$cmd" && -n "$dir" ]] || { echo "usage: $0 start|stop DIR" >&2; exit 64; }

source "$(dirname "$0")/ports.sh"

stop_server() {
  if [[ -f "$dir/redis.pid" ]]; then
    pid="$(cat "$dir/redis.pid")"
    kill -CONT "$pid" 2>/dev/null || true
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$dir/redis.pid"
  fi
}

# start_server PORT: 0 once it answers PING.
start_server() {
  local port="$1"
  rm -f "$dir/redis.pid"
  # shellcheck disable=SC2086
  redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" --save '' --appendonly no \
    --daemonize yes --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" \
    --unixsocket "$dir/redis.sock" --unixsocketperm 700 ${REDIS_EXTRA_ARGS:-} >/dev/null || return 1
  # shellcheck disable=SC2086
  wait_for_pong "$port" ${REDIS_CLI_AUTH:-}
}

case "$cmd" in
  restart)
    port="$(sed -n 's|.*:\([0-9]*\)$|\1|p' "$dir/url")"
    stop_server
    for _ in $(seq 1 40); do
      if start_server "$port"; then echo "redis-server.sh: restarted on 127.0.0.1:$port"; exit 0; fi
      stop_server
      sleep 0.05  # the old socket may linger for a moment
    done
    echo "redis-server.sh: could not restart on port $port (see $dir/redis.log)" >&2
    exit 1
    ;;
  start)
    mkdir -p "$dir"
    for attempt in 1 2 3 4 5; do
      port="$(free_port)"
      if start_server "$port"; then
        echo "redis://127.0.0.1:$port" > "$dir/url"
        echo "redis-server.sh: serving on 127.0.0.1:$port (pid $(cat "$dir/redis.pid"))"
        exit 0
      fi
      # Lost the port to someone else, or failed: stop what we started and retry.
      stop_server
    done
    echo "redis-server.sh: could not start redis-server (see $dir/redis.log)" >&2
    exit 1
    ;;
  stop)
    stop_server
    rm -f "$dir/url"
    ;;
  *)
    echo "usage: $0 start|stop DIR" >&2
    exit 64
    ;;
esac
