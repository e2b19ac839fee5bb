#!/usr/bin/env bash
# bench/etcd.sh — dlock's etcd:// against etcd's own limit, tooz's etcd3 driver and `etcdctl lock`,
# in one run.
#
#   bench/etcd.sh [DIR]
#
# Starts a throw-away one-member etcd on 127.0.0.1 with scripts/etcd-server.sh in DIR (default: a
# temp dir; DIR must not hold a server already) and stops it on exit, also on a failure or Ctrl-C.
# Then, against it:
#   (a) the raw limit, dlock_bench_etcd_raw on one gRPC channel: put(lease)+delete pairs one at a
#       time, and from 8 threads at once — run before and after (b), since the machine's load
#       moves it;
#   (b) dlock bench --workload uncontended, its ratio to (a)'s one-at-a-time pairs (the mean of the
#       two passes; target >= 0.85);
#   (c) dlock bench --workload contended, 4 processes x 1 thread and x 2 on one lock: ops/s,
#       acquire p50/p99, owner changes/s, wake-ups per owner change, Jain, lost updates (must be 0);
#       and --workload many-keys from 8 threads (a lock each), its ratio to (a)'s 8 in flight
#       (target >= 0.5);
#   (d) bench/peers/tooz_peer.py --url: tooz's etcd3 driver (python3-etcd3's Lock), 1 x 1 (no
#       contention) and 4 x 1; dlock's ratio to it (target >= 1.5). A tooz run that fails is noted,
#       not counted as dlock's failure;
#   (e) `etcdctl lock NAME true` in a loop (a process per lock, as a shell job would use it);
#   (f) a summary table.
# Every JSON line gets "who" (raw, dlock, tooz or etcdctl), "run_started" (UTC) and
# "server_revisions" (how far the cluster's revision moved over that measurement: the writes it
# applied). Figures are only comparable within one run (the machines are noisy). About
# 10 x BENCH_SECONDS.
#
# Environment:
#   DLOCK_BIN      the dlock binary (default: build/release, then build/dev, then dlock on PATH)
#   ETCD_RAW_BIN   dlock_bench_etcd_raw (default: build/release/bench, then build/dev/bench)
#   BENCH_SECONDS  seconds per measurement (default 3)
#   BENCH_JSON     if set, a file the JSON lines are also written to
#   PYTHON         a python3 that can `import tooz.drivers.etcd3` (default: python3, else
#                  /usr/bin/python3; Debian: python3-tooz python3-etcd3)
#
# Exit status: 0; 1 if a dlock or raw measurement failed or mutual exclusion failed (lost
# updates); 64 on bad usage or a missing tool. No tooz or etcdctl is not a failure: their rows are
# skipped.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
seconds="${BENCH_SECONDS:-3}"
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || { echo "etcd.sh: BENCH_SECONDS must be a whole number of seconds" >&2; exit 64; }
limit=$((seconds * 4 + 60))  # per measurement, whatever happens
server_dir="${1:-}"
if [[ -n "$server_dir" ]]; then
  [[ "$server_dir" == /* ]] || { echo "etcd.sh: DIR must be an absolute path" >&2; exit 64; }
  [[ ! -e "$server_dir/url" ]] || { echo "etcd.sh: $server_dir already holds a server (its url file)" >&2; exit 64; }
fi

# shellcheck source=bench/lib.sh
source "$here/lib.sh"
dlock_bin="${DLOCK_BIN:-$(first_executable "$root/build/release/tools/dlock/dlock" "$root/build/dev/tools/dlock/dlock" \
                                          "$(command -v dlock || true)")}"
raw_bin="${ETCD_RAW_BIN:-$(first_executable "$root/build/release/bench/dlock_bench_etcd_raw" \
                                            "$root/build/dev/bench/dlock_bench_etcd_raw")}"
[[ -n "$dlock_bin" ]] || { echo "etcd.sh: no dlock binary (set DLOCK_BIN or build dlock_tool)" >&2; exit 64; }
[[ -n "$raw_bin" ]] || { echo "etcd.sh: no dlock_bench_etcd_raw (set ETCD_RAW_BIN or build it)" >&2; exit 64; }
command -v python3 >/dev/null || { echo "etcd.sh: python3 is needed for the summary" >&2; exit 64; }
py="$(python_with tooz.drivers.etcd3)"
etcdctl_bin="$(command -v etcdctl || true)"

url=""
with_server etcd etcd-server.sh "$server_dir"
endpoint="${url#etcd://}"
started="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
status=0
notes=()

bench_name=etcd.sh
counter_field=server_revisions
# server_count: the cluster's revision now (empty without etcdctl).
server_count() {
  [[ -n "$etcdctl_bin" ]] || return 0
  ETCDCTL_API=3 "$etcdctl_bin" --endpoints "$endpoint" endpoint status -w json 2>/dev/null |
    python3 -c 'import json, sys; print(json.load(sys.stdin)[0]["Status"]["header"]["revision"])' 2>/dev/null || true
}

# --- (a) + (b): the raw limit around dlock uncontended --------------------------------------
measure raw "the raw limit, pass 1" "$raw_bin" --seconds "$seconds" "$url"
measure dlock "dlock bench uncontended" "$dlock_bin" bench --backend "$url/bench" --workload uncontended \
  --seconds "${seconds}s" --json
measure raw "the raw limit, pass 2" "$raw_bin" --seconds "$seconds" "$url"

# --- (c) dlock under contention -------------------------------------------------------------
for threads in 1 2; do
  measure dlock "dlock bench contended 4x$threads" "$dlock_bin" bench --backend "$url/bench" --workload contended \
    --processes 4 --threads "$threads" --seconds "${seconds}s" --json
done

measure dlock "dlock bench many-keys 1x8" "$dlock_bin" bench --backend "$url/bench" --workload many-keys \
  --threads 8 --seconds "${seconds}s" --json

# --- (d) tooz --------------------------------------------------------------------------------
if [[ -n "$py" ]]; then
  for procs in 1 4; do
    echo "running tooz etcd3 ${procs}x1 (${seconds}s)..." >&2
    before="$(server_count)"
    if timeout "$limit" "$py" "$here/peers/tooz_peer.py" --url "$url" --processes "$procs" --threads 1 \
         --seconds "$seconds" >"$work/last.jsonl" 2>"$work/tooz.err"; then
      tag tooz "$before" "$(server_count)" <"$work/last.jsonl"
    else
      notes+=("tooz etcd3 ${procs}x1 failed: $(grep -v Warning "$work/tooz.err" | grep -v 'warnings.warn' | tail -1 | cut -c1-200)")
    fi
  done
else
  notes+=("tooz: no python3 with tooz's etcd3 driver (Debian: python3-tooz python3-etcd3; or set PYTHON)")
fi

# --- (e) etcdctl lock ------------------------------------------------------------------------
if [[ -n "$etcdctl_bin" ]]; then
  echo "running etcdctl lock in a loop (${seconds}s)..." >&2
  before="$(server_count)"
  python3 - "$etcdctl_bin" "$endpoint" "$seconds" >"$work/last.jsonl" <<'PY'
import json, os, subprocess, sys, time
etcdctl, endpoint, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
ops, start = 0, time.monotonic()
while time.monotonic() - start < seconds:
    subprocess.run([etcdctl, "--endpoints", endpoint, "lock", "bench-etcdctl/lock", "true"], check=True,
                   stdout=subprocess.DEVNULL, env={**os.environ, "ETCDCTL_API": "3"}, timeout=30)
    ops += 1
elapsed = time.monotonic() - start
print(json.dumps({"peer": "etcdctl", "workload": "uncontended", "processes": 1, "threads": 1, "ops": ops,
                  "seconds": round(elapsed, 3), "ops_per_s": round(ops / elapsed, 1)}))
PY
  tag etcdctl "$before" "$(server_count)" <"$work/last.jsonl"
else
  notes+=("etcdctl: not on PATH (Debian: etcd-client)")
fi
[[ -n "${BENCH_JSON:-}" ]] && cp "$out" "$BENCH_JSON"

# --- (f) summary -----------------------------------------------------------------------------
python3 - "$out" "${notes[@]}" <<'PY' || status=1
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
notes = sys.argv[2:]
def pick(who, **match):
    return [r for r in rows if r.get("who") == who and all(r.get(k) == v for k, v in match.items())]
raw_sync = [r["ops_per_s"] for r in pick("raw", raw_limit="sync-pairs")]
raw_pairs = [r["ops_per_s"] for r in pick("raw", raw_limit="pairs")]
mean = lambda xs: sum(xs) / len(xs) if xs else 0.0
print("\n%-40s %10s %9s %9s %8s %8s %6s %6s" % ("who / what", "ops/s", "p50 us", "p99 us", "wake/ho", "revs/op",
                                                   "jain", "lost"))
failed = False
for r in rows:
    what = r.get("raw_limit") or "%s %dx%d" % (r.get("workload", "?"), r.get("processes", 1), r.get("threads", 1))
    revs = r.get("server_revisions")
    # (the raw tool's two lines share one measurement's revisions)
    per_op = "%.2f" % (revs / r["ops"]) if revs is not None and r.get("ops") and r["who"] != "raw" else "-"
    p50 = r.get("acquire_p50_us", r.get("p50_us", 0))
    p99 = r.get("acquire_p99_us", r.get("p99_us", 0))
    print("%-40s %10.1f %9.0f %9.0f %8s %8s %6s %6s" % (
        r["who"] + " " + what + (" (%d in flight)" % r["in_flight"] if r.get("in_flight", 1) > 1 else ""),
        r["ops_per_s"], p50, p99, "%.2f" % r["wakeups_per_handoff"] if "wakeups_per_handoff" in r else "-", per_op,
        "%.3f" % r["jain"] if "jain" in r else "-", r.get("lost_updates", "-")))
    failed |= bool(r.get("lost_updates"))
dl = pick("dlock", workload="uncontended")
tz = pick("tooz", workload="contended", processes=1)
print()
if dl and raw_sync:
    print("dlock uncontended / raw put+delete pairs (mean of %d passes, %.1f/s): %.2f (target >= 0.85)"
          % (len(raw_sync), mean(raw_sync), dl[0]["ops_per_s"] / mean(raw_sync)))
if dl and tz:
    print("dlock uncontended / tooz etcd3 1x1: %.2f (target >= 1.5)" % (dl[0]["ops_per_s"] / tz[0]["ops_per_s"]))
dc = pick("dlock", workload="contended", processes=4, threads=1)
tc = pick("tooz", workload="contended", processes=4)
if dc and tc:
    print("dlock contended 4x1 / tooz etcd3 4x1: %.2f (target >= 1.5)" % (dc[0]["ops_per_s"] / tc[0]["ops_per_s"]))
mk = pick("dlock", workload="many-keys")
if mk and raw_pairs:
    print("dlock many-keys 1x8 / raw pairs 8 in flight (mean %.1f/s): %.2f (target >= 0.5)"
          % (mean(raw_pairs), mk[0]["ops_per_s"] / mean(raw_pairs)))
ec = pick("etcdctl")
if dl and ec:
    print("dlock uncontended / etcdctl lock: %.1f" % (dl[0]["ops_per_s"] / ec[0]["ops_per_s"]))
for n in notes:
    print("note: " + n)
if failed:
    print("FAIL: lost updates (mutual exclusion failed)")
sys.exit(1 if failed else 0)
PY
exit $status
