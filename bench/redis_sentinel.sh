#!/usr/bin/env bash
# bench/redis_sentinel.sh — how long redis+sentinel:// clients cannot lock during a failover.
#
#   bench/redis_sentinel.sh [ROUNDS]
#
# Starts a throw-away Sentinel setup (scripts/redis-sentinel.sh: 1 master, 2 replicas,
# 3 sentinels, down-after-milliseconds 1000, failover-timeout 3000) in a temp dir, then
# runs dlock_bench_failover_probe (one client locking and unlocking as fast as it can)
# while it, ROUNDS times each (default 3):
#   - forces a failover (SENTINEL FAILOVER), and
#   - SIGKILLs the master (restarting the killed node as a replica afterwards),
# and prints, per event, the time from the last successful acquisition before it to the
# first after it (the probe's longest gap), and the median over the rounds.
# Not part of CI: it takes about ROUNDS x 25 s.
#
# Environment:
#   PROBE        the dlock_bench_failover_probe binary (default: build/release, then build/dev)
#   BENCH_JSON   if set, a file the JSON lines are also written to
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
rounds="${1:-3}"
[[ "$rounds" =~ ^[1-9][0-9]?$ ]] || { echo "redis_sentinel.sh: ROUNDS must be 1..99" >&2; exit 64; }

probe="${PROBE:-}"
if [[ -z "$probe" ]]; then
  for candidate in "$root/build/release/bench/dlock_bench_failover_probe" "$root/build/dev/bench/dlock_bench_failover_probe"; do
    [[ -x "$candidate" ]] && { probe="$candidate"; break; }
  done
fi
[[ -x "$probe" ]] || { echo "redis_sentinel.sh: build dlock_bench_failover_probe first (or set PROBE)" >&2; exit 64; }
command -v redis-server >/dev/null || { echo "redis_sentinel.sh: redis-server is needed" >&2; exit 64; }

dir="$(mktemp -d)"
probe_pid=""
cleanup() {
  [[ -n "$probe_pid" ]] && kill "$probe_pid" 2>/dev/null || true
  "$root/scripts/redis-sentinel.sh" stop "$dir" >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT
"$root/scripts/redis-sentinel.sh" start "$dir" >/dev/null
url="$(cat "$dir/url")"
echo "redis_sentinel.sh: $url"

# measure EVENT: runs the probe across one EVENT (failover | kill-master); prints the
# probe's longest gap in ms.
measure() {
  local event="$1" out="$dir/probe.out"
  "$probe" "$url" 12 > "$out" &
  probe_pid=$!
  sleep 2
  local old
  old="$("$root/scripts/redis-sentinel.sh" master "$dir")"
  "$root/scripts/redis-sentinel.sh" "$event" "$dir" >/dev/null
  wait "$probe_pid"
  probe_pid=""
  if [[ "$event" == kill-master ]]; then
    # Back to three nodes for the next round: the killed one as a replica of the new master.
    "$root/scripts/redis-sentinel.sh" restart-node "$dir" "$old" >/dev/null
    sleep 3
  else
    sleep 9  # the sentinels demote the old master about 8 s after a forced failover
  fi
  [[ -n "${BENCH_JSON:-}" ]] && sed "s/^{/{\"event\": \"$event\", /" "$out" >> "$BENCH_JSON"
  sed -n 's/.*"longest_gap_ms": \([0-9]*\).*/\1/p' "$out"
}

median() { sort -n | awk '{ a[NR] = $1 } END { print (NR % 2 ? a[(NR + 1) / 2] : int((a[NR / 2] + a[NR / 2 + 1]) / 2)) }'; }

declare -A gaps
for event in failover kill-master; do
  gaps[$event]=""
  for round in $(seq 1 "$rounds"); do
    gap="$(measure "$event")"
    echo "  $event round $round: last acquisition before -> first after: ${gap} ms"
    gaps[$event]+="$gap"$'\n'
  done
done
echo
echo "failover time (last successful acquire before -> first after), median of $rounds:"
for event in failover kill-master; do
  printf '  %-12s %s ms\n' "$event" "$(printf '%s' "${gaps[$event]}" | grep . | median)"
done
