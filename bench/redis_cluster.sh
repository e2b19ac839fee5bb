#!/usr/bin/env bash
# bench/redis_cluster.sh — redis+cluster:// against one redis-server, and its failover time.
#
#   bench/redis_cluster.sh [SECONDS] [ROUNDS]
#
# Starts a throw-away cluster (scripts/redis-cluster.sh, REPLICAS=1: 3 masters, 1 replica
# each) and one redis-server (scripts/redis-server.sh) in a temp dir, then
#   - runs `dlock bench --workload many-keys --threads 64` (one key per thread, every
#     thread locking and unlocking its own) for SECONDS (default 3) on each, and prints
#     both throughputs and their ratio;
#   - runs dlock_bench_failover_probe (one client locking and unlocking one name as fast
#     as it can) while a CLUSTER FAILOVER moves that name's master to its replica, ROUNDS
#     times (default 3), and prints the time from the last successful acquisition before
#     to the first after, per round and the median.
# On one 2-core machine the cluster's three masters share the cores with the clients, so
# the ratio says what routing costs more than what three machines would give.
# Not part of CI: it takes about 2 x SECONDS + ROUNDS x 15 s.
#
# Environment:
#   DLOCK_BIN    the dlock binary (default: build/release, then build/dev)
#   PROBE        the dlock_bench_failover_probe binary (likewise)
#   BENCH_JSON   if set, a file the JSON lines are also written to
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
seconds="${1:-3}"
rounds="${2:-3}"
[[ "$seconds" =~ ^[1-9][0-9]?$ ]] || { echo "redis_cluster.sh: SECONDS must be 1..99" >&2; exit 64; }
[[ "$rounds" =~ ^[1-9][0-9]?$ ]] || { echo "redis_cluster.sh: ROUNDS must be 1..99" >&2; exit 64; }

# shellcheck source=bench/lib.sh
source "$here/lib.sh"
dlock="${DLOCK_BIN:-$(first_executable "$root/build/release/tools/dlock/dlock" "$root/build/dev/tools/dlock/dlock")}"
probe="${PROBE:-$(first_executable "$root/build/release/bench/dlock_bench_failover_probe" \
                                   "$root/build/dev/bench/dlock_bench_failover_probe")}"
[[ -x "$dlock" ]] || { echo "redis_cluster.sh: build the dlock tool first (or set DLOCK_BIN)" >&2; exit 64; }
[[ -x "$probe" ]] || { echo "redis_cluster.sh: build dlock_bench_failover_probe first (or set PROBE)" >&2; exit 64; }
command -v redis-server >/dev/null || { echo "redis_cluster.sh: redis-server is needed" >&2; exit 64; }

dir="$(mktemp -d)"
probe_pid=""
cleanup() {
  [[ -n "$probe_pid" ]] && kill "$probe_pid" 2>/dev/null || true
  "$root/scripts/redis-cluster.sh" stop "$dir/cluster" >/dev/null 2>&1 || true
  "$root/scripts/redis-server.sh" stop "$dir/single" >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT
CLUSTER_NODE_TIMEOUT_MS=3000 REPLICAS=1 "$root/scripts/redis-cluster.sh" start "$dir/cluster" >/dev/null
mkdir -p "$dir/single"
"$root/scripts/redis-server.sh" start "$dir/single" >/dev/null
cluster_url="$(cat "$dir/cluster/url")"
single_url="$(cat "$dir/single/url")"
echo "redis_cluster.sh: $cluster_url vs $single_url"

# many_keys URL: the many-keys workload's ops/s.
many_keys() {
  local out
  out="$(timeout $((seconds * 4 + 60)) "$dlock" bench --backend "$1" --workload many-keys --threads 64 \
           --seconds "${seconds}s" --json)"
  [[ -n "${BENCH_JSON:-}" ]] && echo "$out" >> "$BENCH_JSON"
  python3 -c 'import json, sys; d = json.loads(sys.stdin.read()); print(int(d.get("ops_per_s") or d.get("throughput") or 0))' <<<"$out"
}
single="$(many_keys "$single_url")"
cluster="$(many_keys "$cluster_url")"
echo "  many-keys, 64 threads: one server ${single} ops/s, 3-master cluster ${cluster} ops/s" \
     "(ratio $(python3 -c "print(round($cluster / max($single, 1), 2))"))"

median() { sort -n | awk '{ a[NR] = $1 } END { print (NR % 2 ? a[(NR + 1) / 2] : int((a[NR / 2] + a[NR / 2 + 1]) / 2)) }'; }

slot="$(redis-cli -h 127.0.0.1 -p "$(sed 's/.*:\([0-9]*\)$/\1/' <<<"$cluster_url")" cluster keyslot failover-probe)"
gaps=""
for round in $(seq 1 "$rounds"); do
  out="$dir/probe.out"
  "$probe" "$cluster_url" 10 > "$out" &
  probe_pid=$!
  sleep 2
  master="$("$root/scripts/redis-cluster.sh" master-of "$dir/cluster" "$slot")"
  "$root/scripts/redis-cluster.sh" failover "$dir/cluster" "$master" >/dev/null
  wait "$probe_pid"
  probe_pid=""
  [[ -n "${BENCH_JSON:-}" ]] && sed 's/^{/{"event": "cluster-failover", /' "$out" >> "$BENCH_JSON"
  gap="$(sed -n 's/.*"longest_gap_ms": \([0-9]*\).*/\1/p' "$out")"
  echo "  CLUSTER FAILOVER round $round: last acquisition before -> first after: ${gap} ms"
  gaps+="$gap"$'\n'
done
echo "  CLUSTER FAILOVER: median $(printf '%s' "$gaps" | median) ms over $rounds rounds"
