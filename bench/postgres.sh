#!/usr/bin/env bash
# bench/postgres.sh — dlock's postgres:// (table mode) against PostgreSQL's own limit and tooz, in one run.
#
#   bench/postgres.sh [DIR]
#
# Starts a throw-away PostgreSQL on 127.0.0.1 with scripts/postgres-server.sh in DIR (default: a
# temp dir; DIR must not hold a server already) and stops it on exit, also on a failure or Ctrl-C.
# Then, against it:
#   (a) the raw limit, dlock_bench_pg_raw on one kept connection: SELECT 1 round trips,
#       pg_advisory_lock+unlock pairs, and dlock's table-mode lock+unlock statements sent in
#       dlock's three pipelined batches with no decision logic — run before and after (b), since
#       the machine's load moves it;
#   (b) dlock bench --workload uncontended: lock+unlock/s, and its ratio to (a)'s table pairs
#       (the mean of the two passes; target >= 0.7); the same in mode=session, against (a)'s
#       advisory pairs;
#   (c) dlock bench --workload contended, 4 processes x 1 thread and x 2 on one lock, with the
#       default options, with --fair and in mode=session: ops/s, acquire p50/p99, owner changes/s, wake-ups per
#       owner change, Jain, lost updates (must be 0);
#   (d) bench/peers/tooz_peer.py --url: tooz's postgresql driver (a session advisory lock on a new
#       connection per acquisition), the same 4 x 1 and 4 x 2; dlock's ratio to it (target >= 2);
#   (e) a summary table.
# Every JSON line gets "who" (raw, dlock or tooz), "run_started" (UTC) and "server_transactions"
# (the server's transaction count over that measurement, from pg_stat_database, if psql is there);
# passwords in it are replaced by ***. Figures are only comparable within one run (the machines
# are noisy). About 21 x BENCH_SECONDS.
#
# Environment:
#   DLOCK_BIN      the dlock binary (default: build/release, then build/dev, then dlock on PATH)
#   PG_RAW_BIN     dlock_bench_pg_raw (default: build/release/bench, then build/dev/bench)
#   BENCH_SECONDS  seconds per measurement (default 3)
#   BENCH_JSON     if set, a file the JSON lines are also written to
#   PYTHON         a python3 that can `import tooz.drivers.pgsql` (default: python3, else
#                  /usr/bin/python3; Debian: python3-tooz python3-psycopg2)
#
# Exit status: 0; 1 if a measurement failed or mutual exclusion failed (lost updates);
# 64 on bad usage or a missing tool. No tooz is not a failure: its rows are skipped.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
seconds="${BENCH_SECONDS:-3}"
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || { echo "postgres.sh: BENCH_SECONDS must be a whole number of seconds" >&2; exit 64; }
limit=$((seconds * 4 + 60))  # per measurement, whatever happens
server_dir="${1:-}"
if [[ -n "$server_dir" ]]; then
  [[ "$server_dir" == /* ]] || { echo "postgres.sh: DIR must be an absolute path" >&2; exit 64; }
  [[ ! -e "$server_dir/url" ]] || { echo "postgres.sh: $server_dir already holds a server (its url file)" >&2; exit 64; }
fi

first_executable() { for f in "$@"; do if [[ -x "$f" ]]; then echo "$f"; return; fi; done; }
dlock_bin="${DLOCK_BIN:-$(first_executable "$root/build/release/tools/dlock/dlock" "$root/build/dev/tools/dlock/dlock" \
                                          "$(command -v dlock || true)")}"
raw_bin="${PG_RAW_BIN:-$(first_executable "$root/build/release/bench/dlock_bench_pg_raw" \
                                          "$root/build/dev/bench/dlock_bench_pg_raw")}"
[[ -n "$dlock_bin" ]] || { echo "postgres.sh: no dlock binary (set DLOCK_BIN or build dlock_tool)" >&2; exit 64; }
[[ -n "$raw_bin" ]] || { echo "postgres.sh: no dlock_bench_pg_raw (set PG_RAW_BIN or build it)" >&2; exit 64; }
command -v python3 >/dev/null || { echo "postgres.sh: python3 is needed for the summary" >&2; exit 64; }
# shellcheck source=bench/lib.sh
source "$here/lib.sh"
py="$(python_with tooz.drivers.pgsql)"

url=""
with_server postgres postgres-server.sh "$server_dir"
started="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
status=0
notes=()

# transactions: the server's transactions (committed or rolled back) in this database so far;
# empty without psql. A finished run's connections have flushed their counts once they are gone.
transactions() {
  sleep 0.3
  if command -v psql >/dev/null; then
    psql -XAtq "$url" -c "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()" \
      2>/dev/null || true
  fi
}

# tag WHO BEFORE AFTER: adds "who", "run_started" and "server_transactions" (AFTER - BEFORE, if both
# are known) to every JSON line from stdin, passwords redacted, into $out.
tag() {
  python3 -c 'import json, re, sys
who, started, before, after = sys.argv[1:5]
for line in sys.stdin:
    if line.strip():
        row = json.loads(line)
        if "backend" in row:
            row["backend"] = re.sub(r"^([a-z]+://[^:/@]*):[^@]*@", r"\1:***@", row["backend"])
        row.update(who=who, run_started=started)
        if before and after:
            row["server_transactions"] = int(after) - int(before)
        print(json.dumps(row))' "$1" "$started" "$2" "$3" >>"$out"
}

# measure WHO WHAT CMD...: runs CMD bounded in time, tags its JSON lines; a failure is reported and counted.
measure() {
  local who="$1" what="$2" before after
  shift 2
  echo "running $what (${seconds}s)..." >&2
  before="$(transactions)"
  if ! timeout "$limit" "$@" >"$work/last.jsonl"; then
    echo "postgres.sh: $what failed" >&2
    status=1
  fi
  after="$(transactions)"
  tag "$who" "$before" "$after" <"$work/last.jsonl"
}

# --- (a) + (b): the raw limit around dlock uncontended --------------------------------------
measure raw "the raw limit, pass 1" "$raw_bin" --seconds "$seconds" "$url"
measure dlock "dlock bench uncontended" "$dlock_bin" bench --backend "$url" --workload uncontended \
  --seconds "${seconds}s" --json
measure dlock "dlock bench uncontended, session mode" "$dlock_bin" bench --backend "$url?mode=session" \
  --workload uncontended --seconds "${seconds}s" --json
measure raw "the raw limit, pass 2" "$raw_bin" --seconds "$seconds" "$url"

# --- (c) dlock under contention -------------------------------------------------------------
for threads in 1 2; do
  for options in "" "--fair"; do
    # shellcheck disable=SC2086  # options: zero or one word
    measure dlock "dlock bench contended 4x$threads ${options:-default}" "$dlock_bin" bench --backend "$url" \
      --workload contended --processes 4 --threads "$threads" --seconds "${seconds}s" $options --json
  done
  measure dlock "dlock bench contended 4x$threads session mode" "$dlock_bin" bench --backend "$url?mode=session" \
    --workload contended --processes 4 --threads "$threads" --seconds "${seconds}s" --json
done

# --- (d) tooz --------------------------------------------------------------------------------
if [[ -n "$py" ]]; then
  for threads in 1 2; do
    measure tooz "tooz postgresql 4x$threads" "$py" "$here/peers/tooz_peer.py" --url "$url" --processes 4 \
      --threads "$threads" --seconds "$seconds"
  done
else
  notes+=("tooz: no python3 with tooz's postgresql driver (Debian: python3-tooz python3-psycopg2; or set PYTHON)")
fi
[[ -n "${BENCH_JSON:-}" ]] && cp "$out" "$BENCH_JSON"

# --- (e) summary -----------------------------------------------------------------------------
python3 - "$out" "$seconds" "${notes[@]}" <<'PY' || status=1
import json, sys
path, seconds = sys.argv[1:3]
notes = sys.argv[3:]
rows = [json.loads(l) for l in open(path) if l.strip()]
raw = [r for r in rows if r["who"] == "raw"]
def raw_mean(name, field="ops_per_s"):
    xs = [r[field] for r in raw if r["raw_limit"] == name]
    return sum(xs) / len(xs) if xs else None
def passes(name):
    return " / ".join("%.0f" % r["ops_per_s"] for r in raw if r["raw_limit"] == name) or "-"
version = next((r["server_version"] for r in raw), None)
server = next((r["server"] for r in raw), "?")
print("\ndlock postgres:// (table mode) vs PostgreSQL's raw limit and tooz, %s s per measurement" % seconds)
print("server: PostgreSQL %s on %s" % ("%d.%d" % (version // 10000, version % 10000) if version else "?", server))
print("raw limit, one libpq connection (pass 1 / pass 2): SELECT 1 %s/s; pg_advisory_lock+unlock %s pairs/s; "
      "dlock's table-mode statements %s lock+unlock/s" % (passes("select-1"), passes("advisory-pairs"),
                                                         passes("table-pairs")))
for n in notes:
    print(n)

hdr = "%-11s %-6s %-4s %-8s %9s %10s %10s %10s %9s %9s %6s %5s %7s %9s"
print("\n" + hdr % ("workload", "who", "P×T", "options", "ops/s", "acq p50us", "acq p99us", "owners/s",
                    "wake/hoff", "rel p50us", "Jain", "lost", "xact/op", "ratio"))
def xacts_per_op(r):
    # dlock's run also has its reference loop of Client::ping(), one transaction each.
    n = r.get("server_transactions")
    if n is None or r["who"] != "dlock" or not r["ops"]:
        return "-"
    return "%.2f" % ((n - r.get("raw", {}).get("pings", 0)) / r["ops"])
table = raw_mean("table-pairs")
def same(a, b):
    return a["processes"] == b["processes"] and a["threads"] == b["threads"]
tooz = [r for r in rows if r["who"] == "tooz"]
failed = False
for r in (r for r in rows if r["who"] != "raw"):
    if r["who"] == "tooz":
        options, ratio = "advisory", ""
    else:
        session = "mode=session" in r.get("backend", "")
        options = "session" if session else "fair" if r.get("fair") else "default"
        if r["workload"] == "uncontended":
            # Session mode's raw limit: advisory lock+unlock pairs on one connection.
            limit = raw_mean("advisory-pairs") if session else table
            ratio = "%.2f raw" % (r["ops_per_s"] / limit) if limit else ""
        else:
            peer = next((t for t in tooz if same(t, r)), None)
            ratio = "%.2f× tooz" % (r["ops_per_s"] / peer["ops_per_s"]) if peer and peer["ops_per_s"] else ""
    contended = r["workload"] == "contended"
    wake = r.get("wakeups_per_handoff")
    print(hdr % (r["workload"], r["who"], "%dx%d" % (r["processes"], r["threads"]), options, "%.0f" % r["ops_per_s"],
                 "%.0f" % r["acquire_p50_us"], "%.0f" % r["acquire_p99_us"],
                 "%.0f" % r["owner_changes_per_s"] if contended else "-",
                 "%.3f" % wake if contended and wake is not None else "-", "%.0f" % r["release_p50_us"],
                 "%.3f" % r["jain"] if contended else "-", r["lost_updates"], xacts_per_op(r), ratio))
    failed = failed or r["lost_updates"] != 0
u = next((r for r in rows if r["who"] == "dlock" and r["workload"] == "uncontended"
          and "mode=session" not in r.get("backend", "")), None)
if u and table:
    look, take, rel = (raw_mean("table-pairs", f) for f in ("look_p50_us", "take_p50_us", "release_p50_us"))
    print("\nuncontended: dlock %.0f lock+unlock/s = %.2f × the raw table-mode pairs (target 0.7); lock() p50 %.0f us "
          "against the raw acquire batches' %.0f + %.0f us, unlock() p50 %.0f us against the raw release batch's "
          "%.0f us" % (u["ops_per_s"], u["ops_per_s"] / table, u["acquire_p50_us"], look, take,
                       u["release_p50_us"], rel))
print("""
ops/s: lock+unlock per second (contended: with a non-atomic read+write of a counter in shared memory
inside). owners/s: acquisitions by another process than the last holder (real handoffs). wake/hoff:
dlock's waits a notification ended, per owner change (1.0 = one waiter woken per handoff). ratio:
uncontended ÷ the raw table-mode pairs (mean of both passes); contended ÷ tooz with the same P×T
(target 2). tooz's acquire includes its new connection per lock. xact/op: the server's transactions per
lock+unlock (pg_stat_database; 2 = one acquire, one release; each try that found the lock taken adds one,
and each NOTIFY one per listening client).""")
if failed:
    print("MUTUAL EXCLUSION FAILED: lost updates in a row above")
sys.exit(1 if failed else 0)
PY
exit $status
