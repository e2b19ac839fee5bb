#!/usr/bin/env bash
# bench/run.sh — every `dlock bench` workload plus the Python fcntl peer, in one run,
# and a summary. Figures are only comparable within one run (the machines are noisy).
#
#   bench/run.sh [BACKEND_URL]
#
# Environment:
#   DLOCK_BIN       the dlock binary (default: build/release, then build/dev, then dlock on PATH)
#   BENCH_SECONDS   seconds per measurement (default 3; the whole run takes about 10x that)
#   BENCH_JSON      if set, a file the raw JSON lines are also written to
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
backend="${1:-${DLOCK_BACKEND:-}}"
seconds="${BENCH_SECONDS:-3}"
bin="${DLOCK_BIN:-}"
if [[ -z "$bin" ]]; then
  for candidate in "$here/../build/release/tools/dlock/dlock" "$here/../build/dev/tools/dlock/dlock"; do
    if [[ -x "$candidate" ]]; then bin="$candidate"; break; fi
  done
  if [[ -z "$bin" ]] && command -v dlock >/dev/null 2>&1; then bin="$(command -v dlock)"; fi
fi
[[ -x "$bin" ]] || { echo "run.sh: no dlock binary at '$bin' (set DLOCK_BIN)" >&2; exit 64; }
command -v python3 >/dev/null || { echo "run.sh: python3 is needed for the peer and the summary" >&2; exit 64; }

out="$(mktemp -t dlock-bench-XXXXXX.jsonl)"
trap 'rm -f "$out"' EXIT
backend_args=()
[[ -n "$backend" ]] && backend_args=(--backend "$backend")

status=0
for workload in uncontended contended many-keys flash-sale; do
  echo "running $workload (${seconds}s + reference)..." >&2
  # timeout: a hang is a bug to report, not a reason to wait forever.
  if ! timeout $((seconds * 4 + 60)) "$bin" bench "${backend_args[@]}" --workload "$workload" \
        --seconds "${seconds}s" --json >>"$out"; then
    echo "run.sh: dlock bench --workload $workload failed" >&2
    status=1
  fi
done
echo "running the Python fcntl peer (${seconds}s)..." >&2
python3 "$here/peers/fcntl_peer.py" --seconds "$seconds" >>"$out" || status=1
[[ -n "${BENCH_JSON:-}" ]] && cp "$out" "$BENCH_JSON"

python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
bench = {r["workload"]: r for r in rows if "workload" in r}
peers = {r["mode"]: r for r in rows if r.get("peer") == "python-fcntl"}
any_run = next(iter(bench.values()), None)
print("\ndlock bench summary — backend %s" % (any_run["backend"] if any_run else "?"))
print("%-12s %6s %12s %10s %10s %8s %12s %10s %6s %9s" % (
    "workload", "P×T", "lock+unl/s", "acq p50us", "acq p99us", "lost", "handoffs/s", "ping/s", "Jain", "vs raw"))
for name in ("uncontended", "contended", "many-keys"):
    r = bench.get(name)
    if not r:
        print("%-12s  (failed)" % name); continue
    print("%-12s %6s %12.0f %10.1f %10.1f %8d %12.0f %10.0f %6.3f %9.3f" % (
        name, "%dx%d" % (r["processes"], r["threads"]), r["ops_per_s"], r["acquire_p50_us"], r["acquire_p99_us"],
        r["lost_updates"], r["owner_changes_per_s"], r["raw"]["ping_per_s"], r["jain"], r["ratio_vs_raw"]))
fs = bench.get("flash-sale")
if fs:
    for m in fs["modes"]:
        print("flash-sale %-10s %dx%d: %d orders of %d, oversold %d, %.0f orders/s, p50 %.2f ms, p99 %.2f ms, Jain %.3f%s" % (
            m["mode"], fs["processes"], fs["threads"], m["orders"], fs["stock"], m["oversold"], m["orders_per_s"],
            m["p50_us"] / 1e3, m["p99_us"] / 1e3, m["jain"], " (stopped by time)" if m["time_limit_hit"] else ""))
else:
    print("flash-sale   (failed)")
u = bench.get("uncontended")
for mode in ("open", "held-fd", "lockf"):
    p = peers.get(mode)
    if p:
        line = "python fcntl %-8s %12.0f lock+unlock/s" % (mode, p["ops_per_s"])
        if u and p["ops_per_s"]:
            line += "   dlock uncontended / this = %.3f" % (u["ops_per_s"] / p["ops_per_s"])
        print(line)
print("\nvs raw = lock+unlock/s ÷ (ping/s ÷ 2): 1.0 means a lock costs exactly its two store round trips.")
print("python 'open' is what the filelock package does per acquire (open+flock … unflock+close).")
PY
exit $status
