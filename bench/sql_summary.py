#!/usr/bin/env python3
"""The summary table of bench/postgres.sh and bench/mysql.sh, from one run's JSON lines.

  sql_summary.py postgres|mysql RESULTS.jsonl SECONDS [NOTE...]

Rows: who is "raw" (the raw-limit tool), "dlock" or "tooz". Exit status 1 if
a row has lost updates (mutual exclusion failed), else 0.
"""
import json
import sys

# What differs between the databases: names of the raw limits, the server's counter, labels.
DATABASES = {
    "postgres": {
        "title": "dlock postgres:// vs PostgreSQL's raw limit and tooz",
        "server": lambda v: "PostgreSQL %d.%d" % (v // 10000, v % 10000),
        "raw": [("select-1", "SELECT 1 %s/s"), ("advisory-pairs", "pg_advisory_lock+unlock %s pairs/s"),
                ("session-pairs", "dlock's session-mode statements %s lock+unlock/s"),
                ("session-pairs-unprepared", "the same, unprepared %s lock+unlock/s"),
                ("table-pairs", "dlock's table-mode statements %s lock+unlock/s")],
        "client": "one libpq connection",
        "session_raw": "advisory-pairs",
        "session_statements": "session-pairs",
        "counter": ("server_transactions", "xact/op"),
        "tooz": "advisory",
        "explain": """tooz's acquire includes its new connection per lock. xact/op: the server's transactions per
lock+unlock (pg_stat_database; 2 = one acquire, one release; each try that found the lock taken adds one,
and each NOTIFY one per listening client).""",
    },
    "mysql": {
        "title": "dlock mysql:// vs the server's raw limit and tooz",
        "server": lambda v: v,
        "raw": [("select-1", "SELECT 1 %s/s"), ("get-lock-pairs", "GET_LOCK+RELEASE_LOCK %s pairs/s"),
                ("session-pairs", "dlock's session-mode statements %s lock+unlock/s"),
                ("table-pairs", "dlock's table-mode statements %s lock+unlock/s")],
        "client": "one Connector/C connection",
        "session_raw": "get-lock-pairs",
        "session_statements": "session-pairs",
        "counter": ("server_statements", "stmt/op"),
        "tooz": "GET_LOCK",
        "explain": """tooz's acquire includes its new connection per lock, and a waiter retries GET_LOCK(name, 0)
after a 1 s sleep. stmt/op: the server's statements per lock+unlock (the Questions status counter;
table mode 18 = one acquire, one release; mode=session 6; each try that found the lock taken adds some).""",
    },
}


def main():
    db, path, seconds = sys.argv[1:4]
    notes = sys.argv[4:]
    d = DATABASES[db]
    rows = [json.loads(line) for line in open(path) if line.strip()]
    raw = [r for r in rows if r["who"] == "raw"]

    def raw_mean(name, field="ops_per_s"):
        xs = [r[field] for r in raw if r["raw_limit"] == name]
        return sum(xs) / len(xs) if xs else None

    # The yardstick for a ratio: the better pass. A pass disturbed by the machine's other load
    # would otherwise flatter dlock's figure (the mean was used before 2026-11-29).
    def raw_best(name):
        xs = [r["ops_per_s"] for r in raw if r["raw_limit"] == name]
        return max(xs) if xs else None

    def passes(name):
        return " / ".join("%.0f" % r["ops_per_s"] for r in raw if r["raw_limit"] == name) or "-"

    version = next((r["server_version"] for r in raw), None)
    server = next((r["server"] for r in raw), "?")
    print("\n%s, %s s per measurement" % (d["title"], seconds))
    print("server: %s on %s" % (d["server"](version) if version else "?", server))
    print("raw limit, %s (pass 1 / pass 2): %s" % (d["client"], "; ".join(f % passes(n) for n, f in d["raw"])))
    for n in notes:
        print(n)

    field, label = d["counter"]
    hdr = "%-11s %-6s %-4s %-8s %9s %10s %10s %10s %9s %9s %6s %5s %7s %s"
    print("\n" + hdr % ("workload", "who", "P×T", "options", "ops/s", "acq p50us", "acq p99us", "owners/s",
                        "wake/hoff", "rel p50us", "Jain", "lost", label, "ratio"))

    def per_op(r):
        # dlock's run also has its reference loop of Client::ping(), one transaction or statement each.
        n = r.get(field)
        if n is None or r["who"] != "dlock" or not r["ops"]:
            return "-"
        return "%.2f" % ((n - r.get("raw", {}).get("pings", 0)) / r["ops"])

    table = raw_best("table-pairs")

    def same(a, b):
        return a["processes"] == b["processes"] and a["threads"] == b["threads"]

    tooz = [r for r in rows if r["who"] == "tooz"]
    failed = False
    for r in (r for r in rows if r["who"] != "raw"):
        if r["who"] == "tooz":
            options, ratio = d["tooz"], ""
        else:
            session = "mode=session" in r.get("backend", "")
            options = "session" if session else "fair" if r.get("fair") else "default"
            if r["workload"] == "uncontended":
                # Session mode's raw limit: the database's own lock+unlock pairs on one connection.
                limit = raw_best(d["session_raw"]) if session else table
                ratio = "%.2f raw" % (r["ops_per_s"] / limit) if limit else ""
                statements = raw_best(d["session_statements"]) if session and d["session_statements"] else None
                if statements:
                    ratio += " (%.2f its statements)" % (r["ops_per_s"] / statements)
            else:
                peer = next((t for t in tooz if same(t, r)), None)
                ratio = "%.2f× tooz" % (r["ops_per_s"] / peer["ops_per_s"]) if peer and peer["ops_per_s"] else ""
        contended = r["workload"] == "contended"
        wake = r.get("wakeups_per_handoff")
        print(hdr % (r["workload"], r["who"], "%dx%d" % (r["processes"], r["threads"]), options,
                     "%.0f" % r["ops_per_s"], "%.0f" % r["acquire_p50_us"], "%.0f" % r["acquire_p99_us"],
                     "%.0f" % r["owner_changes_per_s"] if contended else "-",
                     "%.3f" % wake if contended and wake is not None else "-", "%.0f" % r["release_p50_us"],
                     "%.3f" % r["jain"] if contended else "-", r["lost_updates"], per_op(r), ratio))
        failed = failed or r["lost_updates"] != 0
    u = next((r for r in rows if r["who"] == "dlock" and r["workload"] == "uncontended"
              and "mode=session" not in r.get("backend", "")), None)
    if u and table:
        look, take, rel = (raw_mean("table-pairs", f) for f in ("look_p50_us", "take_p50_us", "release_p50_us"))
        print("\nuncontended: dlock %.0f lock+unlock/s = %.2f × the raw table-mode pairs (target 0.7); lock() p50 %.0f "
              "us against the raw acquire batches' %.0f + %.0f us, unlock() p50 %.0f us against the raw release "
              "batch's %.0f us" % (u["ops_per_s"], u["ops_per_s"] / table, u["acquire_p50_us"], look, take,
                                  u["release_p50_us"], rel))
    print("""
ops/s: lock+unlock per second (contended: with a non-atomic read+write of a counter in shared memory
inside). owners/s: acquisitions by another process than the last holder (real handoffs). wake/hoff:
dlock's waits a notification ended, per owner change (1.0 = one waiter woken per handoff). ratio:
uncontended ÷ the raw pairs of its mode (the better pass; targets: table mode 0.7, session mode 0.9);
contended ÷ tooz with the same P×T (target 2).\n""" + d["explain"])
    if failed:
        print("MUTUAL EXCLUSION FAILED: lost updates in a row above")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
