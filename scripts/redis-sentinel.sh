#!/usr/bin/env bash
# A throw-away Redis Sentinel setup on 127.0.0.1 for tests and benchmarks:
# one master, two replicas (redis-server, no persistence) and three sentinels
# (redis-server --sentinel, quorum 2) watching the master "dlock". Failure
# detection is short (down-after-milliseconds 1000 unless SENTINEL_DOWN_AFTER_MS
# says otherwise, failover-timeout 3000),
# so a failover completes within a few seconds.
#
#   scripts/redis-sentinel.sh start DIR        picks free ports, starts the six processes with their
#                                              data, logs and pids in DIR, waits until every sentinel
#                                              knows the master, both replicas and the other sentinels;
#                                              writes DIR/url (redis+sentinel://127.0.0.1:S1,...,/dlock)
#                                              and DIR/env (shell lines: SENTINEL_PORTS, NODE_PORTS,
#                                              MASTER_NAME), and prints both
#   scripts/redis-sentinel.sh stop DIR         stops every process it started (by the pids in DIR)
#   scripts/redis-sentinel.sh master DIR       prints the master's port as the sentinels see it
#   scripts/redis-sentinel.sh failover DIR     SENTINEL FAILOVER; waits until another node is master
#                                              (ROLE says so) and prints its port
#   scripts/redis-sentinel.sh kill-master DIR  SIGKILLs the master; waits until the sentinels promote
#                                              a replica and prints its port
#   scripts/redis-sentinel.sh restart-node DIR PORT
#                                              starts the node of PORT again (empty data) as a
#                                              replica of the current master
#
# REDIS_EXTRA_ARGS adds arguments to every data node (not to the sentinels).
# SENTINEL_DOWN_AFTER_MS (default 1000) is down-after-milliseconds: a setup shared by
# tests that never fail it over (the redis_sentinel CTest fixture) sets more, so that a
# busy machine stalling a process for a second does not start a failover under them.
# Never assumes a port is free and stops only the processes it started (by their pids).
set -euo pipefail

cmd="${1:-}"
dir="${2:-}"
[[ -n "$cmd" && -n "$dir" ]] || { echo "usage: $0 start|stop|master|failover|kill-master|restart-node DIR [PORT]" >&2; exit 64; }

source "$(dirname "$0")/ports.sh"

name=dlock
# How long a failover may take before the script gives up (s).
failover_limit=30

cli() { timeout 2 redis-cli -h 127.0.0.1 -p "$@" 2>/dev/null; }

stop_pid_file() {
  local file="$1"
  [[ -f "$file" ]] || return 0
  local pid
  pid="$(cat "$file")"
  kill -CONT "$pid" 2>/dev/null || true
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$file"
}

# All at once (ports.sh).
stop_all() { stop_pid_files "$dir"/sentinel-*.pid "$dir"/node-*.pid; }

# start_node PORT [MASTER_PORT]: 0 once it answers PING.
start_node() {
  local port="$1" master="${2:-}"
  mkdir -p "$dir/node-$port"
  local args=(--port "$port" --bind 127.0.0.1 --dir "$dir/node-$port" --save '' --appendonly no
              --daemonize yes --pidfile "$dir/node-$port.pid" --logfile "$dir/node-$port/redis.log"
              --enable-debug-command local --repl-diskless-sync yes --repl-diskless-sync-delay 0)
  [[ -n "$master" ]] && args+=(--replicaof 127.0.0.1 "$master")
  # shellcheck disable=SC2086
  redis-server "${args[@]}" ${REDIS_EXTRA_ARGS:-} >/dev/null || return 1
  wait_for_pong "$port"
}

# start_sentinel PORT MASTER_PORT
start_sentinel() {
  local port="$1" master="$2"
  mkdir -p "$dir/sentinel-$port"
  # The sentinel rewrites its config file: each has its own, writable.
  cat > "$dir/sentinel-$port/sentinel.conf" <<EOF
port $port
bind 127.0.0.1
daemonize yes
pidfile $dir/sentinel-$port.pid
logfile $dir/sentinel-$port/sentinel.log
dir $dir/sentinel-$port
sentinel announce-ip 127.0.0.1
sentinel monitor $name 127.0.0.1 $master 2
sentinel down-after-milliseconds $name ${SENTINEL_DOWN_AFTER_MS:-1000}
sentinel failover-timeout $name 3000
sentinel parallel-syncs $name 2
EOF
  redis-server "$dir/sentinel-$port/sentinel.conf" --sentinel >/dev/null || return 1
  wait_for_pong "$port"
}

# The master's port as the first sentinel that answers sees it.
master_port() {
  local s
  for s in $SENTINEL_PORTS; do
    local out
    out="$(cli "$s" sentinel get-master-addr-by-name "$name" | sed -n 2p)"
    if [[ -n "$out" ]]; then echo "$out"; return 0; fi
  done
  return 1
}

# Whether every sentinel sees master PORT with 2 replicas and 2 other sentinels.
settled_on() {
  local port="$1" s
  for s in $SENTINEL_PORTS; do
    [[ "$(cli "$s" sentinel get-master-addr-by-name "$name" | sed -n 2p)" == "$port" ]] || return 1
    local info
    info="$(cli "$s" sentinel master "$name" | paste - - | tr '\t' ' ')"
    grep -q '^num-slaves 2$' <<<"$info" || return 1
    grep -q '^num-other-sentinels 2$' <<<"$info" || return 1
    grep -q '^flags master$' <<<"$info" || return 1
  done
  [[ "$(cli "$port" role | head -1)" == master ]] || return 1
}

# Waits (up to failover_limit s) until the sentinels name a master other
# than OLD that says it is one; prints its port.
await_new_master() {
  local old="$1"
  for _ in $(seq 1 $((failover_limit * 20))); do
    local now
    now="$(master_port || true)"
    if [[ -n "$now" && "$now" != "$old" && "$(cli "$now" role | head -1)" == master ]]; then
      echo "$now"
      return 0
    fi
    sleep 0.05
  done
  echo "redis-sentinel.sh: no new master within ${failover_limit}s (logs in $dir)" >&2
  return 1
}

load_env() {
  [[ -f "$dir/env" ]] || { echo "redis-sentinel.sh: nothing started in $dir" >&2; exit 1; }
  # shellcheck disable=SC1091
  source "$dir/env"
}

case "$cmd" in
  start)
    mkdir -p "$dir"
    for attempt in 1 2 3 4 5; do
      mapfile -t ports < <(free_ports 6)
      NODE_PORTS="${ports[*]:0:3}"
      SENTINEL_PORTS="${ports[*]:3:3}"
      ok=1
      start_node "${ports[0]}" || ok=0
      ((ok)) && { start_node "${ports[1]}" "${ports[0]}" || ok=0; }
      ((ok)) && { start_node "${ports[2]}" "${ports[0]}" || ok=0; }
      for s in $SENTINEL_PORTS; do ((ok)) && { start_sentinel "$s" "${ports[0]}" || ok=0; }; done
      if ((ok)); then
        # Until the sentinels have found the replicas and each other (hello messages every 2 s).
        ok=0
        for _ in $(seq 1 300); do
          if settled_on "${ports[0]}"; then ok=1; break; fi
          sleep 0.05
        done
      fi
      if ((ok)); then
        url="redis+sentinel://127.0.0.1:${ports[3]},127.0.0.1:${ports[4]},127.0.0.1:${ports[5]}/$name"
        echo "$url" > "$dir/url"
        {
          echo "SENTINEL_PORTS=\"$SENTINEL_PORTS\""
          echo "NODE_PORTS=\"$NODE_PORTS\""
          echo "MASTER_NAME=$name"
        } > "$dir/env"
        echo "redis-sentinel.sh: $url (master 127.0.0.1:${ports[0]}, replicas ${ports[1]} ${ports[2]})"
        cat "$dir/env"
        exit 0
      fi
      # A port was taken meanwhile, or something failed: stop what we started, retry.
      stop_all
    done
    echo "redis-sentinel.sh: could not start the sentinel setup (logs in $dir)" >&2
    exit 1
    ;;
  stop)
    stop_all
    # The data is thrown away (each start makes its own dirs, on fresh ports).
    rm -rf "$dir/url" "$dir/env" "$dir"/node-* "$dir"/sentinel-*
    ;;
  master)
    load_env
    master_port
    ;;
  failover)
    load_env
    old="$(master_port)"
    for s in $SENTINEL_PORTS; do
      if cli "$s" sentinel failover "$name" | grep -q OK; then break; fi
    done
    await_new_master "$old"
    ;;
  kill-master)
    load_env
    old="$(master_port)"
    [[ -f "$dir/node-$old.pid" ]] || { echo "redis-sentinel.sh: master $old is not ours" >&2; exit 1; }
    kill -9 "$(cat "$dir/node-$old.pid")"
    rm -f "$dir/node-$old.pid"
    await_new_master "$old"
    ;;
  restart-node)
    load_env
    port="${3:-}"
    [[ -n "$port" ]] || { echo "usage: $0 restart-node DIR PORT" >&2; exit 64; }
    stop_pid_file "$dir/node-$port.pid"
    start_node "$port" "$(master_port)"
    ;;
  *)
    echo "usage: $0 start|stop|master|failover|kill-master|restart-node DIR [PORT]" >&2
    exit 64
    ;;
esac
