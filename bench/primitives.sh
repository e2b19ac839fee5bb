#!/usr/bin/env bash
# bench/primitives.sh — the coordination primitives on one store, in one run.
#
#   bench/primitives.sh [URL]     (default: a throw-away redis-server)
#
# Against the same store:
#   (a) read-mostly: 4 processes × 2 threads, 90 % of sections only read, 200 µs
#       of work inside; once with a Mutex (every section exclusive), once with a
#       SharedMutex (reads shared) — the ratio is what readers sharing buys;
#   (b) Semaphore(4) with 8 contending processes: acquire+release/s and latency;
#   (c) election failover: the leader is SIGKILLed, the time until the queued
#       candidate leads (lease 1 s where the store leases it), 5 rounds;
#   (d) on redis://, the server time per script call of every operation
#       (dlock_bench_redis_script_time, INFO commandstats).
# Figures are comparable within one run only. About 6 × BENCH_SECONDS + 15 s.
#
# Environment: DLOCK_BIN (default build/release, then build/dev), BENCH_SECONDS
# (default 3), BENCH_JSON (also write the JSON lines there).
# Exit status: 0; 1 if a measurement failed or mutual exclusion failed.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
url="${1:-}"
seconds="${BENCH_SECONDS:-3}"
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || { echo "primitives.sh: BENCH_SECONDS must be a whole number of seconds" >&2; exit 64; }
bin="${DLOCK_BIN:-}"
if [[ -z "$bin" ]]; then
  for candidate in "$root/build/release/tools/dlock/dlock" "$root/build/dev/tools/dlock/dlock"; do
    [[ -x "$candidate" ]] && { bin="$candidate"; break; }
  done
fi
[[ -x "$bin" ]] || { echo "primitives.sh: no dlock binary (build it, or set DLOCK_BIN)" >&2; exit 64; }
script_time="$(dirname "$(dirname "$(dirname "$bin")")")/bench/dlock_bench_redis_script_time"

# shellcheck source=bench/lib.sh
source "$here/lib.sh"
with_server redis redis-server.sh
status=0
run() {  # run ARGS...: one JSON line into $out
  if ! "$bin" bench --backend "$url" --seconds "$seconds" --json "$@" >>"$out"; then
    echo "primitives.sh: dlock bench $* failed" >&2; status=1
  fi
}
echo "read-mostly: mutex, then shared mutex..." >&2
run --workload contended --processes 4 --threads 2 --work 200us --read-percent 90
run --workload contended --processes 4 --threads 2 --work 200us --primitive shared
echo "semaphore(4), 8 processes..." >&2
run --workload contended --processes 8 --primitive semaphore --permits 4
echo "election failover..." >&2
run --workload failover --rounds 5 --lease 1s
if [[ "$url" == redis://* && -x "$script_time" ]]; then
  echo "server time per script..." >&2
  "$script_time" "$url" 2000 --json >>"$out" || { echo "primitives.sh: script time failed" >&2; status=1; }
fi
[[ -n "${BENCH_JSON:-}" ]] && cp "$out" "$BENCH_JSON"

python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
loops = [r for r in rows if r.get("workload") == "contended"]
mutex = next((r for r in loops if r["primitive"] == "mutex"), None)
shared = next((r for r in loops if r["primitive"] == "shared"), None)
sem = next((r for r in loops if r["primitive"] == "semaphore"), None)
print(f"store: {rows[0]['backend'] if rows else '?'}")
if mutex and shared:
    print(f"read-mostly (4x2, 90% reads, 200us inside): mutex {mutex['ops_per_s']:.0f}/s, "
          f"shared mutex {shared['ops_per_s']:.0f}/s = {shared['ops_per_s'] / max(mutex['ops_per_s'], 1):.2f}x; "
          f"lost updates {mutex['lost_updates']} / {shared['lost_updates']}")
if sem:
    print(f"semaphore(4), 8 processes: {sem['ops_per_s']:.0f} acquire+release/s, acquire p50 "
          f"{sem['acquire_p50_us']:.0f} us, p99 {sem['acquire_p99_us']:.0f} us, {sem['ratio_vs_raw']:.2f} of raw")
for r in rows:
    if r.get("workload") == "failover":
        print(f"election failover (lease {r['lease_ms']} ms): p50 {r['failover_ms_p50']:.1f} ms, "
              f"max {r['failover_ms_max']:.1f} ms over {r['rounds']} rounds")
    if r.get("workload") == "redis-script-time":
        print("server time per EVALSHA (us/call):")
        for op in r["operations"]:
            print(f"  {op['operation']:<34} {op['server_us_per_call']:6.2f}")
bad = [r for r in loops if r.get("lost_updates", 0) != 0]
sys.exit(1 if bad else 0)
PY
exit "$status"
