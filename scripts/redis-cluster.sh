#!/usr/bin/env bash
# A throw-away Redis Cluster on 127.0.0.1 for tests and benchmarks: three
# masters (the 16384 slots split evenly) and, with REPLICAS=1, one replica
# each (redis-server --cluster-enabled yes, no persistence). Each node's
# cluster bus port is picked free too (cluster-port), never port + 10000.
#
#   scripts/redis-cluster.sh start DIR          picks free ports, starts the nodes, joins them
#                                               (redis-cli --cluster create), waits until every node
#                                               says cluster_state:ok and knows every other; writes
#                                               DIR/url (redis+cluster://127.0.0.1:M1,...) and DIR/env
#                                               (NODE_PORTS, MASTER_PORTS), and prints both
#   scripts/redis-cluster.sh stop DIR           stops every process it started (by the pids in DIR)
#   scripts/redis-cluster.sh master-of DIR SLOT prints the port of the master serving SLOT
#   scripts/redis-cluster.sh pid DIR PORT       prints the pid of node PORT (to kill or stop it)
#   scripts/redis-cluster.sh failover DIR PORT  CLUSTER FAILOVER on a replica of master PORT; waits
#                                               until the replica is master and every node agrees,
#                                               and prints its port
#   scripts/redis-cluster.sh restart-node DIR PORT
#                                               starts the node of PORT again (after a crash) on its
#                                               ports and cluster config, without data: it rejoins,
#                                               as a replica if its slots were failed over meanwhile;
#                                               waits until every node says cluster_state:ok
#   scripts/redis-cluster.sh migrate DIR SLOT PORT
#                                               moves SLOT to master PORT the way redis-cli --cluster
#                                               reshard does: SETSLOT IMPORTING on the target,
#                                               MIGRATING on the source, MIGRATE of its keys in
#                                               batches, SETSLOT NODE on every master
#
# REPLICAS (0 or 1, default 0); CLUSTER_NODE_TIMEOUT_MS (default 5000: a node stalled
# that long is taken for failed). A replica that lost an election (or whose master did
# not take part in a manual failover yet) may stand again only after about
# 4 x node timeout: setups that fail over set less (the fault tests 3000).
# Never assumes a port is free and stops only the processes it started (by their pids).
set -euo pipefail

cmd="${1:-}"
dir="${2:-}"
[[ -n "$cmd" && -n "$dir" ]] || { echo "usage: $0 start|stop|master-of|pid|failover|restart-node|migrate DIR [ARGS]" >&2; exit 64; }

source "$(dirname "$0")/ports.sh"

# Absolute: each node runs in its own dir, and its log and pid paths must not depend on that.
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"

# How long a failover or the cluster's start may take before the script gives up (s).
limit=30

cli() { timeout 5 redis-cli -h 127.0.0.1 -p "$@" 2>/dev/null; }

stop_all() { stop_pid_files "$dir"/node-*.pid; }

# start_node PORT BUS_PORT: 0 once it answers PING.
start_node() {
  local port="$1" bus="$2"
  mkdir -p "$dir/node-$port"
  redis-server --port "$port" --cluster-port "$bus" --bind 127.0.0.1 --dir "$dir/node-$port" \
    --cluster-enabled yes --cluster-config-file nodes.conf \
    --cluster-node-timeout "${CLUSTER_NODE_TIMEOUT_MS:-5000}" --cluster-announce-ip 127.0.0.1 \
    --save '' --appendonly no --daemonize yes --pidfile "$dir/node-$port.pid" \
    --logfile "$dir/node-$port/redis.log" --enable-debug-command local \
    --repl-diskless-sync yes --repl-diskless-sync-delay 0 >/dev/null || return 1
  wait_for_pong "$port"
}

# Whether every node of NODE_PORTS says the cluster is ok and knows all of them.
settled() {
  local p n
  n="$(wc -w <<<"$NODE_PORTS")"
  for p in $NODE_PORTS; do
    local info
    info="$(cli "$p" cluster info | tr -d '\r')"
    grep -q '^cluster_state:ok$' <<<"$info" || return 1
    grep -q "^cluster_known_nodes:$n\$" <<<"$info" || return 1
    grep -q '^cluster_slots_ok:16384$' <<<"$info" || return 1
  done
}

load_env() {
  [[ -f "$dir/env" ]] || { echo "redis-cluster.sh: nothing started in $dir" >&2; exit 1; }
  # shellcheck disable=SC1091
  source "$dir/env"
}

# The port of the master serving slot $1, as node $2 sees it.
master_of() {
  local slot="$1" via="$2"
  cli "$via" --no-raw eval 'for _, r in ipairs(redis.call("CLUSTER", "SLOTS")) do
      if tonumber(ARGV[1]) >= r[1] and tonumber(ARGV[1]) <= r[2] then return r[3][2] end end return -1' 0 "$slot" |
    sed -n 's/^(integer) //p'
}

node_id() { cli "$1" cluster myid; }

case "$cmd" in
  start)
    replicas="${REPLICAS:-0}"
    [[ "$replicas" == 0 || "$replicas" == 1 ]] || { echo "redis-cluster.sh: REPLICAS must be 0 or 1" >&2; exit 64; }
    count=$((3 * (1 + replicas)))
    mkdir -p "$dir"
    for attempt in 1 2 3 4 5; do
      mapfile -t ports < <(free_ports $((2 * count)))
      NODE_PORTS="${ports[*]:0:count}"
      MASTER_PORTS="${ports[*]:0:3}"
      ok=1
      for i in $(seq 0 $((count - 1))); do
        ((ok)) && { start_node "${ports[$i]}" "${ports[$((count + i))]}" || ok=0; }
      done
      if ((ok)); then
        addresses=()
        for p in $NODE_PORTS; do addresses+=("127.0.0.1:$p"); done
        # (the first three become the masters)
        timeout 60 redis-cli --cluster create "${addresses[@]}" --cluster-replicas "$replicas" --cluster-yes \
          >"$dir/create.log" 2>&1 || ok=0
      fi
      if ((ok)); then
        ok=0
        for _ in $(seq 1 $((limit * 20))); do
          if settled; then ok=1; break; fi
          sleep 0.05
        done
      fi
      if ((ok)); then
        url="redis+cluster://127.0.0.1:${ports[0]},127.0.0.1:${ports[1]},127.0.0.1:${ports[2]}"
        echo "$url" > "$dir/url"
        {
          echo "NODE_PORTS=\"$NODE_PORTS\""
          echo "MASTER_PORTS=\"$MASTER_PORTS\""
        } > "$dir/env"
        echo "redis-cluster.sh: $url (nodes $NODE_PORTS)"
        cat "$dir/env"
        exit 0
      fi
      stop_all
      rm -rf "$dir"/node-*
    done
    echo "redis-cluster.sh: could not start the cluster (logs in $dir)" >&2
    exit 1
    ;;
  stop)
    stop_all
    rm -rf "$dir/url" "$dir/env" "$dir"/node-* "$dir/create.log"
    ;;
  master-of)
    load_env
    slot="${3:-}"
    [[ "$slot" =~ ^[0-9]+$ ]] || { echo "usage: $0 master-of DIR SLOT" >&2; exit 64; }
    for p in $NODE_PORTS; do
      out="$(master_of "$slot" "$p" || true)"
      if [[ -n "$out" && "$out" != -1 ]]; then echo "$out"; exit 0; fi
    done
    exit 1
    ;;
  pid)
    load_env
    port="${3:-}"
    [[ " $NODE_PORTS " == *" $port "* ]] || { echo "usage: $0 pid DIR PORT (a node of the cluster)" >&2; exit 64; }
    cat "$dir/node-$port.pid"
    ;;
  failover)
    load_env
    old="${3:-}"
    [[ -n "$old" ]] || { echo "usage: $0 failover DIR PORT" >&2; exit 64; }
    old_id="$(node_id "$old")"
    replica=""
    for p in $NODE_PORTS; do
      if cli "$p" role | sed -n 1p | grep -q slave && [[ "$(cli "$p" role | sed -n 3p)" == "$old" ]]; then
        replica="$p"
        break
      fi
    done
    [[ -n "$replica" ]] || { echo "redis-cluster.sh: master $old has no replica (start with REPLICAS=1)" >&2; exit 1; }
    # The replica waits until it has the master's replication stream, then takes over.
    for _ in $(seq 1 $((limit * 20))); do
      if [[ "$(cli "$replica" role | sed -n 4p)" == connected ]]; then break; fi
      sleep 0.05
    done
    # A manual failover times out (5 s) if the master does not take part yet
    # (just after the start, before it has heard of its replica): asked again then.
    deadline=$((SECONDS + limit))
    ask_at=0
    while ((SECONDS < deadline)); do
      role="$(cli "$replica" role | head -1)"
      if [[ "$role" == master ]]; then
        agreed=1
        for p in $NODE_PORTS; do
          cli "$p" cluster nodes | grep -q "^$old_id .*slave" || agreed=0
        done
        if ((agreed)); then echo "$replica"; exit 0; fi
      elif ((SECONDS >= ask_at)); then
        cli "$replica" cluster failover | grep -q OK || { echo "redis-cluster.sh: CLUSTER FAILOVER refused on $replica" >&2; exit 1; }
        ask_at=$((SECONDS + 6))
      fi
      sleep 0.05
    done
    echo "redis-cluster.sh: no failover from $old to $replica within ${limit}s (logs in $dir)" >&2
    exit 1
    ;;
  restart-node)
    load_env
    port="${3:-}"
    [[ "$port" =~ ^[0-9]+$ && -f "$dir/node-$port/nodes.conf" ]] || { echo "usage: $0 restart-node DIR PORT (a node of DIR)" >&2; exit 64; }
    # Its bus port, from its own line of its cluster config.
    bus="$(sed -n "s/^[0-9a-f]* 127\.0\.0\.1:$port@\([0-9]*\).*myself.*/\1/p" "$dir/node-$port/nodes.conf")"
    [[ -n "$bus" ]] || { echo "redis-cluster.sh: no bus port for $port in its nodes.conf" >&2; exit 1; }
    stop_pid_files "$dir/node-$port.pid"
    start_node "$port" "$bus"
    # Until every node, the restarted one too, says the cluster is ok again.
    for _ in $(seq 1 $((limit * 20))); do
      if settled; then exit 0; fi
      sleep 0.05
    done
    echo "redis-cluster.sh: the cluster did not settle within ${limit}s after restarting $port (logs in $dir)" >&2
    exit 1
    ;;
  migrate)
    load_env
    slot="${3:-}"
    to="${4:-}"
    [[ "$slot" =~ ^[0-9]+$ && -n "$to" ]] || { echo "usage: $0 migrate DIR SLOT PORT" >&2; exit 64; }
    from="$(master_of "$slot" "$to")"
    [[ -n "$from" && "$from" != -1 ]] || { echo "redis-cluster.sh: no master serves slot $slot" >&2; exit 1; }
    [[ "$from" != "$to" ]] || { echo "redis-cluster.sh: slot $slot is on $to already" >&2; exit 1; }
    to_id="$(node_id "$to")"
    from_id="$(node_id "$from")"
    cli "$to" cluster setslot "$slot" importing "$from_id" | grep -q OK
    cli "$from" cluster setslot "$slot" migrating "$to_id" | grep -q OK
    for _ in $(seq 1 10000); do
      mapfile -t keys < <(cli "$from" --raw cluster getkeysinslot "$slot" 100)
      ((${#keys[@]})) && [[ -n "${keys[0]}" ]] || break
      cli "$from" migrate 127.0.0.1 "$to" "" 0 5000 keys "${keys[@]}" >/dev/null
    done
    # The target first, then the source, then the others (as redis-cli does).
    cli "$to" cluster setslot "$slot" node "$to_id" | grep -q OK
    cli "$from" cluster setslot "$slot" node "$to_id" | grep -q OK
    for p in $MASTER_PORTS; do cli "$p" cluster setslot "$slot" node "$to_id" >/dev/null || true; done
    echo "$from"
    ;;
  *)
    echo "usage: $0 start|stop|master-of|failover|restart-node|migrate DIR [ARGS]" >&2
    exit 64
    ;;
esac
