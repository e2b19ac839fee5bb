#!/usr/bin/env bash
# bench/quorum.sh — a quorum lock over 5 redis-servers against one of them, in one run.
#
#   bench/quorum.sh [REDLOCK_URL]
#
# Without a URL it starts five throw-away redis-servers (scripts/redlock-servers.sh, in a
# temp dir) and stops them on exit. Then, alternating three times so that both see the
# same machine load: dlock bench --workload uncontended on redis://<first node> and on
# the redlock:// URL (one thread, acquire + release of one name). Prints each run, the
# medians, and the ratio quorum / one node of the acquire + release latency (p50) and of
# the throughput. The issue's target is a latency ratio <= 1.5 (parallel requests), not 5.
# Then the floor for that ratio on this machine (dlock_bench_fanout_raw, next to the dlock
# binary's build: PING to every node at once from one thread, against PING to one): with
# the nodes sharing the client's cores, a parallel round costs each server's work anyway.
# About 6 x BENCH_SECONDS.
#
# Environment:
#   DLOCK_BIN       the dlock binary (default: build/release, else build/dev, else dlock on PATH)
#   BENCH_SECONDS   seconds per measurement (default 3)
#   BENCH_JSON      if set, a file the raw JSON lines are also written to
#
# Exit status: 0; 1 if a measurement failed; 64 on bad usage or a missing tool.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
url="${1:-}"
seconds="${BENCH_SECONDS:-3}"
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || { echo "quorum.sh: BENCH_SECONDS must be a whole number of seconds" >&2; exit 64; }
bin="${DLOCK_BIN:-}"
if [[ -z "$bin" ]]; then
  for candidate in "$root/build/release/tools/dlock/dlock" "$root/build/dev/tools/dlock/dlock" "$(command -v dlock || true)"; do
    if [[ -n "$candidate" && -x "$candidate" ]] && "$candidate" bench --help >/dev/null 2>&1; then bin="$candidate"; break; fi
  done
fi
[[ -n "$bin" ]] || { echo "quorum.sh: no dlock binary (build one, or set DLOCK_BIN)" >&2; exit 64; }
command -v python3 >/dev/null || { echo "quorum.sh: python3 is needed for the summary" >&2; exit 64; }

# shellcheck source=bench/lib.sh
source "$here/lib.sh"
if [[ -z "$url" ]] && ! command -v redis-server >/dev/null; then
  echo "quorum.sh: no URL given and no redis-server to start" >&2; exit 64
fi
with_server quorum redlock-servers.sh
[[ "$url" == redlock://* ]] || { echo "quorum.sh: expected a redlock:// URL, got $url" >&2; exit 64; }
hosts="${url#redlock://}"
hosts="${hosts%%\?*}"
hosts="${hosts%%/*}"
single="redis://${hosts%%,*}"
echo "binary: $bin" >&2
echo "one node: $single" >&2
echo "quorum:   $url" >&2

status=0
for round in 1 2 3; do
  for backend in "$single" "$url"; do
    if ! "$bin" bench --backend "$backend" --workload uncontended --seconds "${seconds}s" --json >>"$out"; then
      echo "quorum.sh: the measurement on $backend failed (round $round)" >&2
      status=1
    fi
  done
done
# The floor on this machine: PING to every node at once from one thread, against PING to one.
raw="$(dirname "$bin")/../../bench/dlock_bench_fanout_raw"
if [[ -x "$raw" ]]; then
  "$raw" "$hosts" 20000 >>"$out" || { echo "quorum.sh: dlock_bench_fanout_raw failed" >&2; status=1; }
else
  echo "quorum.sh: no $raw (build the target dlock_bench_fanout_raw): no floor measured" >&2
fi
[[ -n "${BENCH_JSON:-}" ]] && cat "$out" >>"$BENCH_JSON"

python3 - "$out" <<'PY'
import json, statistics, sys
lines = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
runs = [r for r in lines if r.get("workload") == "uncontended"]
floor = [r for r in lines if r.get("workload") == "fanout_raw"]
one = [r for r in runs if r["backend"].startswith("redis://")]
quorum = [r for r in runs if r["backend"].startswith("redlock://")]
if not one or not quorum:
    sys.exit("quorum.sh: no measurement to compare")
def row(name, rs):
    latency = statistics.median(r["acquire_p50_us"] + r["release_p50_us"] for r in rs)
    ops = statistics.median(r["ops_per_s"] for r in rs)
    print(f"{name:<10} acquire p50 {statistics.median(r['acquire_p50_us'] for r in rs):8.1f} us"
          f"  release p50 {statistics.median(r['release_p50_us'] for r in rs):7.1f} us"
          f"  acquire+release {latency:8.1f} us  {ops:9.1f} ops/s  (median of {len(rs)})")
    return latency, ops
for r in runs:
    print(f"  {r['backend'][:12]:<12} acquire p50 {r['acquire_p50_us']:8.1f} us  release p50 {r['release_p50_us']:7.1f} us"
          f"  {r['ops_per_s']:9.1f} ops/s")
l1, o1 = row("one node", one)
lq, oq = row("quorum/5", quorum)
print(f"ratio quorum/one node: latency {lq / l1:.2f}x (target <= 1.5x), throughput {oq / o1:.2f}x")
for f in floor:
    print(f"floor on this machine: PING to {f['nodes']} nodes at once from one thread {f['fanout_p50_us']:.1f} us,"
          f" to one {f['one_p50_us']:.1f} us: {f['ratio']:.2f}x (p50 of {f['rounds']})")
PY
exit "$status"
