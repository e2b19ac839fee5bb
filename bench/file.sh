#!/usr/bin/env bash
# bench/file.sh — dlock's file:// Mutex under contention against tooz's file lock, in one run.
#
#   bench/file.sh [DIR]
#
# In DIR (default: a temp dir, removed on exit), 4 processes x 2 threads on one lock,
# once with nothing inside the lock but a shared-memory counter and once with 200 us of
# sleep inside too:
#   (a) dlock bench --workload contended with the default options, with --fair, and with
#       --max-barging-wait 1h (barging without a bound);
#   (b) the default options again with DLOCK_BASELINE_BIN, if set (another dlock build:
#       main's before a change, say), so before and after are measured in the same run;
#   (c) bench/peers/tooz_peer.py: tooz's file driver (fasteners' record lock, retried
#       after a sleep) on the same two workloads;
#   (d) a summary: ops/s, acquire p50/p99, owner changes/s, wake-ups per handoff, Jain,
#       and each row's ops/s against tooz's.
# Every JSON line gets "build" (this, baseline or tooz) and "work_us". Figures are only
# comparable within one run (the machines are noisy). About 10 x BENCH_SECONDS.
#
# Environment:
#   DLOCK_BIN           the dlock binary (default: build/release, then build/dev, then dlock on PATH)
#   DLOCK_BASELINE_BIN  another dlock binary measured with the default options too (optional)
#   BENCH_SECONDS       seconds per measurement (default 3)
#   BENCH_JSON          if set, a file the JSON lines are also written to
#   PYTHON              a python3 that can `import tooz` (default: python3, else /usr/bin/python3)
#
# Exit status: 0; 1 if a measurement failed or mutual exclusion failed (lost updates);
# 64 on bad usage or a missing tool. No tooz is not a failure: its rows are skipped.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
seconds="${BENCH_SECONDS:-3}"
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || { echo "file.sh: BENCH_SECONDS must be a whole number of seconds" >&2; exit 64; }
bin="${DLOCK_BIN:-}"
if [[ -z "$bin" ]]; then
  for candidate in "$root/build/release/tools/dlock/dlock" "$root/build/dev/tools/dlock/dlock"; do
    if [[ -x "$candidate" ]]; then bin="$candidate"; break; fi
  done
  if [[ -z "$bin" ]] && command -v dlock >/dev/null 2>&1; then bin="$(command -v dlock)"; fi
fi
[[ -x "$bin" ]] || { echo "file.sh: no dlock binary at '$bin' (set DLOCK_BIN)" >&2; exit 64; }
baseline="${DLOCK_BASELINE_BIN:-}"
[[ -z "$baseline" || -x "$baseline" ]] || { echo "file.sh: DLOCK_BASELINE_BIN '$baseline' is not executable" >&2; exit 64; }
command -v python3 >/dev/null || { echo "file.sh: python3 is needed for the summary" >&2; exit 64; }
# shellcheck source=bench/lib.sh
source "$here/lib.sh"
py="$(python_with tooz)"

work="$(mktemp -d -t dlock-file-bench-XXXXXX)"
trap 'rm -rf "$work"' EXIT
dir="${1:-$work}"
[[ "$dir" == /* ]] || { echo "file.sh: DIR must be an absolute path" >&2; exit 64; }
out="$work/results.jsonl"
: >"$out"
status=0

# tag BUILD WORK_US: adds both to every JSON line from stdin, into $out.
tag() {
  python3 -c 'import json, sys
for line in sys.stdin:
    if line.strip():
        row = json.loads(line)
        row.update(build=sys.argv[1], work_us=float(sys.argv[2]))
        print(json.dumps(row))' "$1" "$2" >>"$out"
}

run=0
for work_us in 0 200; do
  for variant in "this:" "this:--fair" "this:--max-barging-wait 1h" "baseline:"; do
    build="${variant%%:*}"
    read -r -a extra <<<"${variant#*:}"
    exe="$bin"
    if [[ "$build" == baseline ]]; then
      [[ -n "$baseline" ]] || continue
      exe="$baseline"
    fi
    run=$((run + 1))
    echo "running dlock ($build ${variant#*:}) with ${work_us}us inside (${seconds}s + reference)..." >&2
    # A fresh lock directory each time; timeout: a hang is a bug to report, not a reason to wait.
    if ! timeout $((seconds * 4 + 60)) "$exe" bench --backend "file://$dir/locks-$run" --workload contended \
          --processes 4 --threads 2 --work "${work_us}us" --seconds "${seconds}s" "${extra[@]}" --json |
        tag "$build" "$work_us"; then
      echo "file.sh: dlock bench ($build ${variant#*:}, ${work_us}us) failed" >&2
      status=1
    fi
  done
  if [[ -n "$py" ]]; then
    echo "running tooz's file lock with ${work_us}us inside (${seconds}s)..." >&2
    if ! timeout $((seconds * 4 + 60)) "$py" "$here/peers/tooz_peer.py" --processes 4 --threads 2 \
          --work-us "$work_us" --seconds "$seconds" --dir "$dir" | tag tooz "$work_us"; then
      echo "file.sh: tooz_peer.py (${work_us}us) failed" >&2
      status=1
    fi
  else
    echo "file.sh: no python3 with tooz (Debian: python3-tooz; or set PYTHON), skipping the peer" >&2
  fi
done
[[ -n "${BENCH_JSON:-}" ]] && cp "$out" "$BENCH_JSON"

python3 - "$out" <<'PY' || status=1
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print("\nfile:// contended, 4 processes x 2 threads on one lock")
print("%-10s %-22s %6s %10s %9s %9s %10s %9s %6s %8s" % (
    "build", "options", "work", "ops/s", "p50 us", "p99 us", "owners/s", "wake/hoff", "Jain", "vs tooz"))
failed = False
for work_us in sorted({r["work_us"] for r in rows}):
    group = [r for r in rows if r["work_us"] == work_us]
    tooz = next((r for r in group if r["build"] == "tooz"), None)
    for r in group:
        if r["build"] == "tooz":
            options = "tooz file driver"
        elif r.get("fair"):
            options = "fair"
        else:
            options = "max_barging_wait %s" % ("1h" if r["max_barging_wait_ms"] >= 3600000 else
                                                "%d ms" % r["max_barging_wait_ms"])
        vs = "%8.2f" % (r["ops_per_s"] / tooz["ops_per_s"]) if tooz and tooz["ops_per_s"] else "%8s" % "-"
        wake = r.get("wakeups_per_handoff")
        print("%-10s %-22s %4.0fus %10.0f %9.1f %9.1f %10.0f %9s %6.3f %s" % (
            r["build"], options, work_us, r["ops_per_s"], r["acquire_p50_us"], r["acquire_p99_us"],
            r["owner_changes_per_s"], "-" if wake is None else "%.3f" % wake, r["jain"], vs))
        failed = failed or r["lost_updates"] != 0
if failed:
    print("MUTUAL EXCLUSION FAILED: lost updates in a row above")
sys.exit(1 if failed else 0)
PY
exit $status
