#!/usr/bin/env bash
# bench/zookeeper.sh — dlock on ZooKeeper against ZooKeeper's own limit, kazoo and Curator, in one run.
#
#   bench/zookeeper.sh [ZK_URL]
#
# Without a URL it starts a throw-away single server (scripts/zookeeper-server.sh, in a temp
# dir) and stops it on exit. Then, against the same server:
#   (a) the raw limit: dlock_bench_zk_raw, run once unmeasured first to warm the server's JIT
#       up — create+delete pairs synchronous and 64 in flight,
#       create+getChildren+delete synchronous (skipped, and said so, if it is not built);
#   (b) dlock bench --backend ZK_URL: uncontended, contended (4 processes), many-keys
#       (--threads 64), flash-sale — skipped, and said so, if this dlock has no zk backend yet;
#   (c) bench/peers/kazoo_peer.py: uncontended, contended (counter in shared memory, and in a znode);
#   (d) Curator's InterProcessMutex (tests/interop/java/CuratorTool.java bench, compiled here
#       with javac): uncontended, contended;
#   (e) a summary: per workload every lock, and ratios to the raw limit and to the best peer;
#       for each contended run, the deletion notifications the server sent per handoff (its
#       `mntr` counter, read before and after: how many waiters a release woke, for every library).
# Figures are only comparable within one run (the machines are noisy). About 15 x BENCH_SECONDS.
#
# Environment:
#   DLOCK_BIN       the dlock binary (default: build/release, build/dev, then dlock on PATH)
#   ZK_RAW_BIN      dlock_bench_zk_raw (default: next to the dlock binary's build, build/*/bench)
#   BENCH_SECONDS   seconds per measurement (default 3)
#   BENCH_JSON      if set, a file the raw JSON lines are also written to
#   PYTHON          a python3 that can `import kazoo` (default: python3, else /usr/bin/python3)
#
# Exit status: 0; 1 if a measurement failed or mutual exclusion failed (lost updates,
# oversold); 64 on bad usage. A missing piece (no zk backend, raw tool, kazoo or JDK) is
# reported and skipped, not a failure.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
url="${1:-}"
seconds="${BENCH_SECONDS:-3}"
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || { echo "zookeeper.sh: BENCH_SECONDS must be a whole number of seconds" >&2; exit 64; }
limit=$((seconds * 4 + 60))  # per measurement, whatever happens

# shellcheck source=bench/lib.sh
source "$here/lib.sh"
dlock_bin="${DLOCK_BIN:-$(first_executable "$root/build/release/tools/dlock/dlock" "$root/build/dev/tools/dlock/dlock" \
                                          "$(command -v dlock || true)")}"
raw_bin="${ZK_RAW_BIN:-$(first_executable "$root"/build/release/bench/dlock_bench_zk_raw \
                                          "$root"/build/dev/bench/dlock_bench_zk_raw "$root"/build/*/bench/dlock_bench_zk_raw)}"
py="$(python_with kazoo)"
summary_py="$(command -v python3 || true)"
[[ -n "$summary_py" ]] || { echo "zookeeper.sh: python3 is needed for the summary" >&2; exit 64; }

with_server zk zookeeper-server.sh
status=0
notes=()

# run WHAT CMD...: appends CMD's JSON lines; a failure is reported and counted.
run() {
  local what="$1"
  shift
  echo "running $what (${seconds}s)..." >&2
  if ! timeout "$limit" "$@" >>"$out"; then
    echo "zookeeper.sh: $what failed" >&2
    status=1
  fi
}

# deleted_watch_notifications: watches the server has fired on deleted nodes so far (`mntr`
# of the first host); empty if it doesn't answer. The server is this run's alone unless a URL
# was given.
zk_first_host="$(echo "${url#zk://}" | cut -d, -f1 | cut -d/ -f1)"
deleted_watch_notifications() {
  # shellcheck disable=SC2016  # expanded by the inner bash: host and port
  timeout 1 bash -c 'exec 3<>"/dev/tcp/${0%%:*}/${0##*:}" && echo mntr >&3 && cat <&3' "$zk_first_host" \
    2>/dev/null | sed -n 's/^zk_sum_node_deleted_watch_count[[:space:]]*\([0-9]*\).*/\1/p' || true
}

# notifications WHO BEFORE: appends how many the server sent since BEFORE, for WHO's contended run.
notifications() {
  local after
  after="$(deleted_watch_notifications)"
  if [[ -n "$2" && -n "$after" ]]; then
    echo "{\"notifications_of\": \"$1\", \"deleted_watch_notifications\": $((after - $2))}" >>"$out"
  fi
}

# --- (a) the raw limit -----------------------------------------------------------------
if [[ -n "$raw_bin" ]]; then
  # A fresh server's JIT compiler is still at work: its first seconds run slower (here the
  # first sync create+delete run gave 590/s, the next three 770 to 890/s). Warm it up with
  # the raw load, not measured, so that the raw limit and every library meet the same server.
  echo "warming the server up (${seconds}s x 3, not measured)..." >&2
  timeout "$limit" "$raw_bin" --seconds "$seconds" "$url" >/dev/null || true
  run "raw limit ($raw_bin)" "$raw_bin" --seconds "$seconds" "$url"
else
  notes+=("raw limit: no dlock_bench_zk_raw (build with -DDLOCK_WITH_ZOOKEEPER=ON, or set ZK_RAW_BIN)")
fi

# --- (b) dlock bench -------------------------------------------------------------------
if [[ -z "$dlock_bin" ]]; then
  notes+=("dlock: no dlock binary (set DLOCK_BIN or build it)")
else
  for spec in "uncontended" "contended --processes 4" "many-keys --threads 64" "flash-sale"; do
    echo "running dlock bench $spec (${seconds}s + reference)..." >&2
    before="$(deleted_watch_notifications)"
    # shellcheck disable=SC2086
    if timeout "$limit" "$dlock_bin" bench --backend "$url" --workload $spec --seconds "${seconds}s" --json \
         >>"$out" 2>"$work/dlock.err"; then
      cat "$work/dlock.err" >&2
      if [[ "$spec" == contended* ]]; then notifications dlock "$before"; fi
    elif grep -q "unknown scheme" "$work/dlock.err"; then
      notes+=("dlock: NOT BUILT — $dlock_bin has no zk backend: $(grep -o "unknown scheme.*" "$work/dlock.err" | head -1)")
      break
    else
      cat "$work/dlock.err" >&2
      echo "zookeeper.sh: dlock bench --workload $spec failed" >&2
      status=1
    fi
  done
fi

# --- (c) kazoo -------------------------------------------------------------------------
if [[ -n "$py" ]]; then
  for spec in "uncontended" "contended --inside memory" "contended --inside zk"; do
    before="$(deleted_watch_notifications)"
    # shellcheck disable=SC2086
    run "kazoo $spec" "$py" "$here/peers/kazoo_peer.py" --url "$url" --seconds "$seconds" --workload $spec
    case "$spec" in
      *memory) notifications kazoo "$before" ;;
      *zk) notifications "kazoo (counter in zk)" "$before" ;;
    esac
  done
else
  notes+=("kazoo: no python3 with kazoo (Debian: python3-kazoo; or set PYTHON)")
fi

# --- (d) Curator -----------------------------------------------------------------------
curator_jar=/usr/share/java/curator-recipes.jar
if command -v javac >/dev/null && [[ -f "$curator_jar" ]] &&
   javac -nowarn -cp "$curator_jar" -d "$work/classes" "$root/tests/interop/java/CuratorTool.java" 2>"$work/javac.err"; then
  cp="$work/classes:$curator_jar"
  [[ -f /usr/share/java/slf4j-nop.jar ]] && cp="$cp:/usr/share/java/slf4j-nop.jar"
  for workload in uncontended contended; do
    before="$(deleted_watch_notifications)"
    run "Curator $workload" java -Xmx128m -XX:+UseSerialGC -cp "$cp" CuratorTool bench "$url" \
      "/dlock-peer-curator-$$-$workload" "$seconds" "$workload" </dev/null
    if [[ "$workload" == contended ]]; then notifications curator "$before"; fi
  done
else
  notes+=("Curator: no javac or $curator_jar (Debian: default-jdk-headless, libcurator-recipes-java) $(head -c 300 "$work/javac.err" 2>/dev/null || true)")
fi
[[ -n "${BENCH_JSON:-}" ]] && cp "$out" "$BENCH_JSON"

# --- (e) summary -----------------------------------------------------------------------
# shellcheck disable=SC2016  # expanded by the inner bash: host and port of the first server
server_version="$(timeout 1 bash -c 'exec 3<>"/dev/tcp/${0%%:*}/${0##*:}" && echo srvr >&3 && cat <&3' \
                    "$(echo "${url#zk://}" | cut -d, -f1 | cut -d/ -f1)" 2>/dev/null \
                  | sed -n 's/^Zookeeper version: \([^-,]*\).*/\1/p' || true)"
"$summary_py" - "$out" "$url" "$seconds" "${server_version:-?}" "${notes[@]}" <<'PY'
import json, sys
path, url, seconds, version = sys.argv[1:5]
notes = sys.argv[5:]
rows = [json.loads(l) for l in open(path) if l.strip()]
notified = {r["notifications_of"]: r["deleted_watch_notifications"] for r in rows if "notifications_of" in r}
rows = [r for r in rows if "notifications_of" not in r]
raw = {r["raw_limit"]: r for r in rows if "raw_limit" in r}
dlock = {r["workload"]: r for r in rows if "workload" in r and "peer" not in r}
peers = [r for r in rows if "peer" in r]

print("\ndlock vs kazoo and Curator on ZooKeeper %s (%s), %s s per measurement" % (version, url, seconds))
def raw_ops(k):
    return raw[k]["ops_per_s"] if k in raw else None
if raw:
    print("raw limit (C client, one session): create+delete %s/s synchronous, %s/s with %s in flight; "
          "create+getChildren+delete %s/s" % tuple(
              "%.0f" % x if x is not None else "-" for x in (raw_ops("sync-pairs"), raw_ops("async-pairs"),
                                                              raw.get("async-pairs", {}).get("in_flight"),
                                                              raw_ops("sync-triples"))))
for n in notes:
    print(n)

hdr = "%-12s %-22s %5s %9s %10s %10s %5s %11s %9s %10s %6s %10s %10s"
print("\n" + hdr % ("workload", "who", "P×T", "ops/s", "acq p50us", "acq p99us", "lost", "handoffs/s", "wake/hoff",
                    "notif/hoff", "Jain", "vs raw", "dlock/this"))
def who(r):
    if "peer" not in r:
        return "dlock"
    return r["peer"] + (" (counter in zk)" if r.get("inside", "").startswith("zk") else "")
def vs_raw(r):
    # uncontended: against one synchronous create+delete (what a lock+unlock needs at least);
    # many-keys: against the in-flight pairs (independent locks may overlap their requests).
    base = raw_ops("async-pairs") if r["workload"] == "many-keys" else raw_ops("sync-pairs")
    return "%.2f" % (r["ops_per_s"] / base) if base and r["workload"] != "flash-sale" else ""
def notif_per_handoff(r):
    n = notified.get(who(r)) if r["workload"] == "contended" else None
    return "%.3f" % (n / r["owner_changes"]) if n is not None and r.get("owner_changes") else "-"
for w in ("uncontended", "contended", "many-keys"):
    group = ([dlock[w]] if w in dlock else []) + [p for p in peers if p["workload"] == w]
    if w not in dlock:
        print(hdr % (w, "dlock", "", "(not run)", "", "", "", "", "", "", "", "", ""))
    base = dlock.get(w)
    for r in group:
        ratio = "%.2f×" % (base["ops_per_s"] / r["ops_per_s"]) if base and r is not base and r["ops_per_s"] else ""
        print(hdr % (w, who(r), "%dx%d" % (r["processes"], r["threads"]), "%.0f" % r["ops_per_s"],
                     "%.0f" % r["acquire_p50_us"], "%.0f" % r["acquire_p99_us"], r["lost_updates"],
                     "%.1f" % r["owner_changes_per_s"],
                     "%.3f" % r["wakeups_per_handoff"] if "wakeups_per_handoff" in r and r["owner_changes_per_s"] else "-",
                     notif_per_handoff(r), "%.3f" % r["jain"], vs_raw(r), ratio))
fs = dlock.get("flash-sale")
if fs:
    for m in fs.get("modes", []):
        print("flash-sale   dlock %-16s %.0f orders/s, oversold %d, Jain %.3f" % (
            m["mode"], m["orders_per_s"], m["oversold"], m["jain"]))
c = dlock.get("contended")
best = max((p for p in peers if p["workload"] == "contended" and not p.get("inside", "").startswith("zk")),
           key=lambda p: p["ops_per_s"], default=None)
if c and best:
    print("\ncontended: dlock = %.2f× the best peer (%s, %.0f/s)" % (c["ops_per_s"] / best["ops_per_s"], who(best),
                                                                   best["ops_per_s"]))
print("""
ops/s: lock+unlock per second (contended: with a non-atomic read+write of a counter inside, in shared
memory unless "counter in zk", where it is a get+set of a znode: 2 more round trips). handoffs/s:
acquisitions by another process than the last holder. wake/hoff: dlock waits a notification ended, per
handoff (ClientStats::wakeups; 1.0 = one waiter woken per handoff, no herd). notif/hoff: watches the
server fired on deleted nodes during the run, per handoff (its mntr zk_sum_node_deleted_watch_count;
every library; a herd would be about the number of waiters). vs raw: uncontended and contended ops/s ÷
synchronous create+delete pairs/s; many-keys ÷ pairs/s with requests in flight.""")
bad = [r for r in rows if r.get("lost_updates", 0) or any(m.get("oversold", 0) for m in r.get("modes", []))]
if bad:
    print("MUTUAL EXCLUSION FAILED in: %s" % ", ".join("%s %s" % (who(r), r["workload"]) for r in bad))
    sys.exit(1)
PY
exit $status
