#!/usr/bin/env bash
# bench/redis.sh — dlock on Redis against redis-py's Lock and Redis's own limits, in one run.
#
#   bench/redis.sh [REDIS_URL]
#
# Without a URL it starts a throw-away redis-server (scripts/redis-server.sh, in a temp
# dir) and stops it on exit. Then, against the same server:
#   (a) the raw limit: redis-benchmark PING (the RESP form clients send) over 1 connection,
#       1 connection pipelined 16 deep, and 64 connections;
#   (b) dlock bench --backend REDIS_URL: uncontended, contended (4 processes, and again
#       with --fair), many-keys (--threads 64), flash-sale, async (1,000 async_lock() in flight
#       from one thread) — skipped, and said so, if this dlock has no redis backend yet; the
#       async run between two passes of its own raw limit (dlock_bench_redis_raw, next to the
#       dlock binary's build: 1,000 PINGs, and dlock's acquire and release scripts on 1,000
#       names, in flight on one connection with no client logic);
#   (c) bench/peers/redis_py_peer.py for the same workloads (contended and flash-sale with
#       redis-py's default sleep=0.1 and with sleep=0.001, contended also with the counter
#       in shared memory as dlock bench keeps it);
#   (d) a summary: per workload dlock vs redis-py, and dlock as a fraction of the raw limit.
# Figures are only comparable within one run (the machines are noisy). About 20 x BENCH_SECONDS.
#
# Environment:
#   DLOCK_BIN       the dlock binary (default: the first of build/release, build/dev, dlock on PATH
#                   that has the redis backend)
#   BENCH_SECONDS   seconds per measurement (default 3; the whole run takes about 1 minute)
#   BENCH_JSON      if set, a file the raw JSON lines are also written to
#   PYTHON          a python3 that can `import redis` (default: python3, else /usr/bin/python3)
#
# Exit status: 0; 1 if a measurement failed or mutual exclusion failed (lost updates,
# oversold); 64 on bad usage or a missing tool. dlock without a redis backend is not a failure.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
url="${1:-}"
seconds="${BENCH_SECONDS:-3}"
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || { echo "redis.sh: BENCH_SECONDS must be a whole number of seconds" >&2; exit 64; }

# dlock binaries to try, in run.sh's order; without DLOCK_BIN one lacking the redis backend
# (a stale build/release, say) is passed over for the next.
bins=()
if [[ -n "${DLOCK_BIN:-}" ]]; then
  bins=("$DLOCK_BIN")
else
  for candidate in "$root/build/release/tools/dlock/dlock" "$root/build/dev/tools/dlock/dlock"; do
    [[ -x "$candidate" ]] && bins+=("$candidate")
  done
  if command -v dlock >/dev/null 2>&1; then bins+=("$(command -v dlock)"); fi
fi

# A python3 with redis-py (a pyenv python3 first on PATH usually has none; Debian's has python3-redis).
# shellcheck source=bench/lib.sh
source "$here/lib.sh"
py="$(python_with redis)"
summary_py="$(command -v python3 || true)"
[[ -n "$summary_py" ]] || summary_py="$py"
[[ -n "$summary_py" ]] || { echo "redis.sh: python3 is needed for the summary" >&2; exit 64; }

if [[ -z "$url" ]] && ! command -v redis-server >/dev/null; then
  echo "redis.sh: no URL given and no redis-server to start" >&2; exit 64
fi
with_server redis redis-server.sh
status=0

# --- (a) the raw limit -----------------------------------------------------------------
# host, port, user, password of a redis:// URL, one per line (empty when absent).
mapfile -t parts < <("$summary_py" - "$url" <<'PY'
import sys, urllib.parse
u = urllib.parse.urlsplit(sys.argv[1])
ok = u.scheme == "redis"
print((u.hostname or "") if ok else "")
print((u.port or 6379) if ok else "")
print(urllib.parse.unquote(u.username or "") if ok else "")
print(urllib.parse.unquote(u.password or "") if ok else "")
PY
)
host="${parts[0]:-}" port="${parts[1]:-}" user="${parts[2]:-}" pass="${parts[3]:-}"
bench_ping() {  # bench_ping CONNECTIONS PIPELINE REQUESTS: PING/s, or nothing
  local auth=()
  [[ -n "$user" ]] && auth+=(--user "$user")
  [[ -n "$pass" ]] && auth+=(-a "$pass")
  timeout 60 redis-benchmark -h "$host" -p "$port" "${auth[@]}" -c "$1" -P "$2" -n "$3" -t ping_mbulk --csv \
    2>/dev/null | awk -F, '$1 == "\"PING_MBULK\"" { gsub(/"/, "", $2); print $2 }' || true
}
raw() {  # raw NAME CONNECTIONS PIPELINE: a short pass to size them, then 3 passes of ~BENCH_SECONDS/4; the best counts
  local name="$1" c="$2" p="$3" n rps all=() best
  rps="$(bench_ping "$c" "$p" $((c * p * 100)))"
  if [[ -n "$rps" ]]; then
    n="$("$summary_py" -c "print(max($c * $p * 100, min(50_000_000, int($rps * $seconds / 4))))")"
    for _ in 1 2 3; do
      rps="$(bench_ping "$c" "$p" "$n")"
      [[ -n "$rps" ]] && all+=("$rps")
    done
  fi
  if [[ ${#all[@]} -eq 0 ]]; then
    echo "redis.sh: redis-benchmark $name failed" >&2; status=1; return
  fi
  best="$(printf '%s\n' "${all[@]}" | sort -g | tail -1)"
  printf '{"raw_limit": "%s", "tool": "redis-benchmark -t ping_mbulk", "connections": %d, "pipeline": %d, "requests": %d, "ping_per_s": %s, "passes": [%s]}\n' \
    "$name" "$c" "$p" "$n" "$best" "$(IFS=,; echo "${all[*]}")" >>"$out"
}
if [[ -z "$host" ]]; then
  echo "redis.sh: not a redis://HOST:PORT URL, skipping redis-benchmark: $url" >&2
elif ! command -v redis-benchmark >/dev/null; then
  echo "redis.sh: no redis-benchmark (Debian: redis-tools), skipping the raw limit" >&2
else
  echo "running redis-benchmark PING: 1 connection, 1 pipelined x16, 64 connections..." >&2
  raw single 1 1
  raw pipelined 1 16
  raw conns64 64 1
fi

# --- (b) dlock bench -------------------------------------------------------------------
script_raw() {  # script_raw DLOCK_BIN PASS: the async workload's raw limit, if built and the URL has no credentials
  local tool
  tool="$(dirname "$1")/../../bench/dlock_bench_redis_raw"
  if [[ ! -x "$tool" ]]; then
    echo "redis.sh: no $tool (build the target dlock_bench_redis_raw): no raw limit for async" >&2; return 0
  fi
  if [[ -z "$host" || -n "$user$pass" ]]; then
    echo "redis.sh: dlock_bench_redis_raw takes no credentials: no raw limit for async" >&2; return 0
  fi
  echo "running dlock_bench_redis_raw, pass $2 (2 x ${seconds}s)..." >&2
  timeout $((seconds * 2 + 60)) "$tool" --seconds "$seconds" --max-ops 1000000000 --in-flight 1000 "$host:$port" \
    | sed "s/}\$/,\"pass\":$2}/" >>"$out" || { echo "redis.sh: dlock_bench_redis_raw failed" >&2; status=1; }
}
dlock_note="" bin=""
if [[ ${#bins[@]} -eq 0 ]]; then
  dlock_note="no dlock binary (set DLOCK_BIN or build it)"
fi
for candidate in "${bins[@]}"; do
  [[ -n "$bin" ]] && break
  if [[ ! -x "$candidate" ]]; then dlock_note="no dlock binary at '$candidate'"; continue; fi
  for spec in "uncontended" "contended --processes 4" "contended --processes 4 --fair" \
              "contended --processes 4 --counter-in redis" "contended --processes 4 --fair --counter-in redis" \
              "many-keys --threads 64" "flash-sale" "async --in-flight 1000"; do
    read -r workload _ <<<"$spec"
    [[ "$workload" == async ]] && script_raw "$candidate" 1
    echo "running $candidate bench $spec (${seconds}s + reference)..." >&2
    # shellcheck disable=SC2086
    if timeout $((seconds * 4 + 60)) "$candidate" bench --backend "$url" --workload $spec --seconds "${seconds}s" \
          --json >>"$out" 2>"$work/dlock.err"; then
      cat "$work/dlock.err" >&2
      bin="$candidate"
    elif [[ -z "$bin" ]] && grep -q "unknown scheme" "$work/dlock.err"; then
      dlock_note="${dlock_note:+$dlock_note; }$candidate has no redis backend: $(grep -o "unknown scheme.*" "$work/dlock.err" | head -1)"
      break
    else
      cat "$work/dlock.err" >&2
      echo "redis.sh: dlock bench --workload $workload failed" >&2
      bin="$candidate"
      status=1
    fi
    [[ "$workload" == async ]] && script_raw "$candidate" 2
  done
done
if [[ -n "$bin" ]]; then
  dlock_note=""
  echo "redis.sh: dlock rows from $bin" >&2
else
  echo "redis.sh: NOT BUILT — skipping dlock's rows: $dlock_note" >&2
fi

# --- (c) the redis-py peer -------------------------------------------------------------
if [[ -z "$py" ]]; then
  echo "redis.sh: no python3 with redis-py (Debian: python3-redis; or set PYTHON), skipping the peer" >&2
  status=1
else
  for spec in "uncontended" "contended --sleep 0.1" "contended --sleep 0.001" "contended --sleep 0.1 --inside memory" \
              "many-keys --threads 64" "flash-sale --sleep 0.1" "flash-sale --sleep 0.001"; do
    echo "running redis-py peer $spec (${seconds}s + reference)..." >&2
    # shellcheck disable=SC2086
    if ! timeout $((seconds * 4 + 60)) "$py" "$here/peers/redis_py_peer.py" --url "$url" --seconds "$seconds" \
          --workload $spec >>"$out"; then
      echo "redis.sh: redis_py_peer.py --workload $spec failed" >&2
      status=1
    fi
  done
fi
[[ -n "${BENCH_JSON:-}" ]] && cp "$out" "$BENCH_JSON"

# --- (d) summary -----------------------------------------------------------------------
server_version="$( (redis-cli -h "$host" -p "$port" ${pass:+-a "$pass" --no-auth-warning} info server 2>/dev/null || true) \
                   | sed -n 's/^redis_version:\([^[:space:]]*\).*/\1/p')"
"$summary_py" - "$out" "$url" "$seconds" "${server_version:-?}" "$dlock_note" <<'PY'
import json, sys
path, url, seconds, version, note = sys.argv[1:6]
rows = [json.loads(l) for l in open(path) if l.strip()]
raw = {r["raw_limit"]: r for r in rows if "raw_limit" in r}
dl = {r["workload"] + (" fair" if r.get("fair") else "") + (" get+set" if r.get("counter_in") == "redis" else ""): r
      for r in rows if "workload" in r and "peer" not in r}
peers = [r for r in rows if r.get("peer") == "redis-py"]

def label(p):
    if p["workload"] in ("uncontended", "many-keys"):
        return "redis-py"  # never waits for another holder: sleep plays no part
    s = "redis-py " + p["variant"]
    return s + (" shm" if p.get("inside", "").startswith("shared") else "")

def fmt(x, spec):
    return spec % x if x is not None else "-"

print("\ndlock vs redis-py's Lock on Redis %s (%s), %s s per measurement" % (version, url, seconds))
def raw_fmt(k):
    r = raw.get(k)
    if not r:
        return "-"
    ps = sorted(r["passes"])
    return "%.0f/s (passes %s)" % (r["ping_per_s"], "..".join("%.0f" % x for x in (ps[0], ps[-1])) if len(ps) > 1 else "1")
print("raw limit, redis-benchmark PING, best of 3 passes:")
print("  1 conn %s   1 conn pipelined x16 %s   64 conns %s" % tuple(raw_fmt(k) for k in ("single", "pipelined", "conns64")))
if note:
    print("dlock: NOT BUILT — %s" % note)

hdr = "%-12s %-24s %6s %11s %10s %10s %6s %11s %9s %6s %9s %12s"
print("\n" + hdr % ("workload", "who", "P×T", "ops/s", "acq p50us", "acq p99us", "lost", "handoffs/s",
                    "wake/hoff", "Jain", "vs ownraw", "dlock/this"))
def lock_row(workload, who, r, base):
    ratio = "%.2f×" % (base["ops_per_s"] / r["ops_per_s"]) if base and r is not base and r["ops_per_s"] else ""
    print(hdr % (workload, who, "%dx%d" % (r["processes"], r["threads"]), "%.0f" % r["ops_per_s"],
                 "%.1f" % r["acquire_p50_us"], "%.1f" % r["acquire_p99_us"], r["lost_updates"],
                 "%.1f" % r["owner_changes_per_s"], fmt(r.get("wakeups_per_handoff"), "%.3f"), "%.3f" % r["jain"],
                 fmt(r.get("ratio_vs_raw"), "%.3f"), ratio))
fair_vs = []
get_set_vs = []
for w in ("uncontended", "contended", "many-keys"):
    d = dl.get(w)
    if d:
        lock_row(w, "dlock", d, d)
    else:
        print(hdr % (w, "dlock", "", "(not built)" if note else "(failed)", "", "", "", "", "", "", "", ""))
    if dl.get(w + " fair"):
        f = dl[w + " fair"]
        lock_row("", "dlock fair", f, f)
        fair_vs = ["%s %.2f×" % (label(p), f["ops_per_s"] / p["ops_per_s"])
                   for p in peers if p["workload"] == w and p["ops_per_s"]]
    ps = [p for p in peers if p["workload"] == w]
    for p in ps:
        lock_row(w, label(p), p, d)
    if not ps:
        print(hdr % (w, "redis-py", "", "(failed)", "", "", "", "", "", "", "", ""))
    # Like for like with redis-py's default rows: the counter read (GET) and written (SET) in Redis.
    gs = [dl.get(w + " get+set"), dl.get(w + " fair get+set")]
    py_gs = next((p for p in ps if p.get("variant") == "sleep=0.1" and not p.get("inside", "").startswith("shared")), None)
    for who, r in zip(("dlock GET+SET", "dlock fair GET+SET"), gs):
        if r:
            lock_row(w, who, r, r)
            if py_gs and py_gs["ops_per_s"]:
                get_set_vs.append("%s %.2f×" % (who, r["ops_per_s"] / py_gs["ops_per_s"]))

fhdr = "%-12s %-24s %6s %11s %10s %10s %8s %6s %8s %12s"
print("\n" + fhdr % ("flash-sale", "who", "P×T", "orders/s", "p50 ms", "p99 ms", "oversold", "Jain", "orders",
                     "dlock/this"))
fs = dl.get("flash-sale")
base = next((m for m in fs["modes"] if m["mode"] == "dlock"), None) if fs else None
def sale_row(who, r, m):
    ratio = "%.2f×" % (base["orders_per_s"] / m["orders_per_s"]) if base and m is not base and m["orders_per_s"] else ""
    print(fhdr % ("", who, "%dx%d" % (r["processes"], r["threads"]), "%.0f" % m["orders_per_s"],
                  "%.2f" % (m["p50_us"] / 1e3), "%.2f" % (m["p99_us"] / 1e3), m["oversold"], "%.3f" % m["jain"],
                  "%d%s" % (m["orders"], "" if m["time_limit_hit"] else "*"), ratio))
if fs:
    for m in fs["modes"]:
        sale_row("dlock" if m["mode"] == "dlock" else "dlock " + m["mode"], fs, m)
else:
    print(fhdr % ("", "dlock", "", "(not built)" if note else "(failed)", "", "", "", "", "", ""))
for p in peers:
    if p["workload"] == "flash-sale":
        for m in p["modes"]:
            sale_row(label(p), p, m)

if fair_vs:
    print("dlock fair / redis-py contended: " + ", ".join(fair_vs))
single = raw.get("single", {}).get("ping_per_s")
if get_set_vs:
    bound = " (bound for any lock: 4 round trips per critical section in series = 1-conn ping/s ÷ 4 = %.0f/s)" % (
        single / 4) if single else ""
    print("contended with GET+SET inside, / redis-py sleep=0.1: " + ", ".join(get_set_vs) + bound)
piped = raw.get("pipelined", {}).get("ping_per_s")
print()
def peer_row(w):
    return next((p for p in peers if p["workload"] == w), None)
for who, u, mk in (("dlock", dl.get("uncontended"), dl.get("many-keys")),
                   ("redis-py", peer_row("uncontended"), peer_row("many-keys"))):
    parts = []
    if u and single:
        parts.append("uncontended lock+unlock/s = %.3f of (1-conn ping/s ÷ 2)" % (u["ops_per_s"] / (single / 2)))
    if mk and piped:
        parts.append("many-keys = %.3f of (pipelined ping/s ÷ 2)" % (mk["ops_per_s"] / (piped / 2)))
    if parts:
        print("%-9s %s" % (who, "; ".join(parts)))
a = dl.get("async")
if a:
    print("dlock     async: %d async_lock() in flight from one thread, %.0f acquired/s (%.0f lock+unlock/s)%s" % (
        a["in_flight"], a["acquired_per_s"], a["ops_per_s"],
        " = %.3f of pipelined ping/s" % (a["acquired_per_s"] / piped) if piped else ""))
    own = [r for r in rows if r.get("workload") == "redis_raw"]
    if own:
        mean = lambda k: sum(r[k] for r in own) / len(own)
        print("          raw, 1,000 in flight on one connection (mean of %d passes around it): PING %.0f/s; dlock's acquire"
              " script %.0f acquired/s (%.0f lock+unlock/s)\n          async acquired/s = %.3f of its scripts' raw rate,"
              " %.3f of 1,000-deep PING; lock+unlock/s = %.3f of the scripts' raw" % (
                  len(own), mean("ping_per_s"), mean("script_acquired_per_s"), mean("script_lock_unlock_per_s"),
                  a["acquired_per_s"] / mean("script_acquired_per_s"), a["acquired_per_s"] / mean("ping_per_s"),
                  a["ops_per_s"] / mean("script_lock_unlock_per_s")))
print("""
ops/s: lock+unlock per second (contended: with the read-modify-write inside). vs ownraw: ops/s ÷ (the
client's own ping/s with the same P×T ÷ round trips per op) — dlock: Client::ping(), 2 per op; redis-py:
redis.Redis.ping(), 2 per op, 4 when the counter or the stock is read and written in Redis.
redis-py contended/flash-sale keep the counter/stock in Redis (GET+SET inside the lock, 2 more round trips
per op than dlock bench, which keeps them in shared memory); "shm" is the like-for-like contended row.
wake/hoff: waits a notification ended per handoff (the lock went to another process; dlock's ClientStats::wakeups,
measured; 1.0 = one waiter woken per handoff; without --fair a woken waiter may lose to the releaser re-taking it).
sleep=S: redis-py's Lock polls (SET NX, then sleep S) while another holder has the key; its default is 0.1.
flash-sale orders marked * sold out before the time limit.""")
lost = [r for r in rows if r.get("lost_updates", 0) != 0 or any(m.get("oversold", 0) for m in r.get("modes", []))]
if lost:
    print("MUTUAL EXCLUSION FAILED in: %s" % ", ".join("%s %s" % (r.get("peer", "dlock"), r["workload"]) for r in lost))
PY
exit $status
