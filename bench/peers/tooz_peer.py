#!/usr/bin/env python3
"""tooz's file, postgresql, mysql or etcd3 driver as a peer for `dlock bench` on
the file://, postgres://, mysql:// and etcd:// backends.

Runs the contended workload with tooz's own lock and prints ONE JSON line
with the field names of `dlock bench --json`, plus "peer": "tooz" and
"variant": "file", "postgresql", "mysql" or "etcd3".

  file        (default) `file://DIR`, DIR a fresh temp dir: coordinator.get_lock(name)
              is fasteners' InterProcessLock, a POSIX record lock taken
              non-blocking and retried after a sleep of 10 ms growing to
              100 ms, plus a per-process condition variable among the threads
              of one coordinator. Acquired with a timeout (the time left).
  postgresql  --url postgresql://USER:PASSWORD@HOST:PORT/DB (postgres:// is
              taken too): PostgresLock, a session advisory lock on a key of
              16 bits from the name, on a connection opened for each
              acquisition and closed by its release. Acquired blocking
              (`with lock:`, SELECT pg_advisory_lock: the server queues the
              waiters); tooz's timed form retries pg_try_advisory_lock after
              waits growing from 1 s, too slow to compare. The server ends a
              wait after --seconds + 30 s (lock_timeout, through PGOPTIONS).
  mysql       --url mysql://USER:PASSWORD@HOST:PORT/DB: MySQLLock (pymysql),
              GET_LOCK(name, 0) on a connection opened for each acquisition
              and closed by its release; a try that finds the lock taken is
              retried after a sleep (tooz's retry: 1 s), blocking or timed
              alike. Acquired with a timeout (the time left), which bounds
              the retries.
  etcd3       --url etcd://HOST:PORT[,...][/...] (or etcd3://HOST:PORT; the
              first member only): Etcd3Lock (python3-etcd3, gRPC), a key put
              if absent on a lease of its own; a try that finds the lock
              taken is retried after a short sleep (tooz's retry), blocking
              or timed alike. Acquired with a timeout (the time left).

  contended  P processes (default 4) x T threads (default 2), one
             coordinator per process, on one lock; inside it a non-atomic
             read -> (--work-us of sleep) -> write of a counter in shared
             memory (as dlock bench and its --work).
             lost updates = ops - final counter; owner changes =
             acquisitions by another process than the last holder.

Neither lock has a lease or a fencing token: they are what a Python
coordination library's lock costs, not like-for-like rivals.

Exit status: 0; 1 if mutual exclusion failed (lost updates); 70 if a worker
process failed or did not finish in time; 64 on bad usage. Every worker has
an alarm at --seconds x 2 + 30 s.
"""
import argparse
import json
import multiprocessing as mp
import os
import signal
import sys
import tempfile
import threading
import time

try:
    import tenacity
    import tooz
    from tooz import coordination
except ImportError:
    sys.stderr.write("tooz_peer.py: cannot import tooz (Debian: apt-get install python3-tooz; "
                     "run it with /usr/bin/python3 if another python3 comes first on PATH)\n")
    sys.exit(64)

from peer_common import gather, loop_fields

MARGIN_S = 15.0


def adapt_etcd3_waits():
    """Debian's python3-etcd3 0.12 gives tenacity a wait callback of the old form,
    wait(previous_attempt_number, delay_since_first_attempt); tenacity 8 calls
    wait(retry_state), so every contended acquire failed with a TypeError. This
    hands etcd3's lock module a tenacity whose retry() turns such a callback into
    the new form, as tenacity itself did before version 8 (nothing else changes:
    the lock still waits in watch_once and retries its transaction)."""
    import inspect
    import types
    import etcd3.locks

    def retry(*args, **kwargs):
        wait = kwargs.get("wait")
        if wait is not None and len(inspect.signature(wait).parameters) == 2:
            kwargs["wait"] = lambda state: wait(state.attempt_number, state.seconds_since_start)
        return tenacity.retry(*args, **kwargs)

    shim = types.ModuleType("tenacity")
    shim.__dict__.update(tenacity.__dict__)
    shim.retry = retry
    etcd3.locks.tenacity = shim


def process_main(cfg, index, shared, out):
    """One forked worker: one coordinator, cfg.threads threads on the lock; one result on `out`."""
    signal.alarm(int(cfg.seconds * 2 + 2 * MARGIN_S))
    me = os.getpid()
    work = cfg.work_us / 1e6
    threads = [{"ops": 0, "acquire": [], "release": [], "error": None} for _ in range(cfg.threads)]
    coordinator = coordination.get_coordinator(cfg.url, ("worker-%d" % index).encode())
    coordinator.start()

    def contend(slot):
        lock = coordinator.get_lock(b"lock")
        try:
            while slot["ops"] < cfg.max_ops:
                t0 = time.monotonic()
                if t0 >= deadline or not acquire(lock, True if cfg.server_waits else deadline - t0):
                    break
                t1 = time.monotonic()
                if shared["last_pid"].value != me:  # read, write: correct only if the lock excludes
                    if shared["last_pid"].value != 0:
                        shared["owner_changes"].value += 1
                    shared["last_pid"].value = me
                seen = shared["counter"].value
                if work > 0:
                    time.sleep(work)
                shared["counter"].value = seen + 1
                t2 = time.monotonic()
                lock.release()
                slot["acquire"].append(t1 - t0)
                slot["release"].append(time.monotonic() - t2)
                slot["ops"] += 1
        except Exception as e:  # reported; the run fails
            slot["error"] = "%s: %s" % (type(e).__name__, e)

    shared["start"].wait(timeout=30)
    deadline = time.monotonic() + cfg.seconds
    running = [threading.Thread(target=contend, args=(t,), daemon=True) for t in threads]
    for t in running:
        t.start()
    for t in running:
        t.join(timeout=cfg.seconds + MARGIN_S)
    coordinator.stop()
    errors = [t["error"] for t in threads if t["error"]]
    if any(t.is_alive() for t in running):
        errors.append("a thread still ran %.0f s past the limit" % MARGIN_S)
    out.put({"index": index, "end": time.monotonic(), "error": "; ".join(errors) or None,
             "ops": sum(t["ops"] for t in threads),
             "acquire": [x for t in threads for x in t["acquire"]],
             "release": [x for t in threads for x in t["release"]]})
    out.close()
    out.join_thread()
    os._exit(0 if not errors else 70)


def acquire(lock, blocking):
    """lock.acquire(blocking): True, or False if a timed acquire ran out of time (tooz's mysql driver
    says so by raising tenacity's RetryError)."""
    try:
        return lock.acquire(blocking=blocking)
    except tenacity.RetryError:
        return False


def contended(cfg):
    ctx = mp.get_context("fork")
    shared = {"counter": ctx.RawValue("q", 0), "last_pid": ctx.RawValue("q", 0),
              "owner_changes": ctx.RawValue("Q", 0), "start": ctx.Barrier(cfg.processes + 1)}
    out = ctx.Queue()
    procs = [ctx.Process(target=process_main, args=(cfg, i, shared, out), daemon=True)
             for i in range(cfg.processes)]
    results, start = gather(procs, shared["start"], out, cfg.seconds, MARGIN_S)
    elapsed = max(r["end"] for r in results) - start
    ops = sum(r["ops"] for r in results)
    shares = [r["ops"] for r in results]
    acquire = sorted(x for r in results for x in r["acquire"])
    release = sorted(x for r in results for x in r["release"])
    lost = ops - shared["counter"].value
    return {
        "peer": "tooz",
        "variant": cfg.variant,
        "workload": "contended",
        "backend": redacted(cfg.url),
        "processes": cfg.processes,
        "threads": cfg.threads,
        **loop_fields(elapsed, ops, acquire, release, lost, shared["owner_changes"].value, shares),
        "inside": "shared-memory read+write",
        "work_us": cfg.work_us,
        "tooz": getattr(tooz, "__version__", "?"),
        "python": sys.version.split()[0],
    }, lost == 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workload", "-w", choices=["contended"], default="contended")
    ap.add_argument("--processes", "-p", type=int, default=4)
    ap.add_argument("--threads", "-t", type=int, default=2)
    ap.add_argument("--seconds", "-s", type=float, default=3.0)
    ap.add_argument("--max-ops", type=int, default=1_000_000, help="per thread (default 1000000)")
    ap.add_argument("--work-us", type=float, default=0.0, help="sleep inside the lock, in us (default 0)")
    ap.add_argument("--dir", default=None, help="file: where the temp lock directory goes (default: the system's)")
    ap.add_argument("--url", default=None, help="postgresql://USER:PASSWORD@HOST:PORT/DB, mysql://... or etcd://HOST:PORT: "
                                               "tooz's postgresql, mysql or etcd3 driver on that server (default: the file "
                                               "driver)")
    cfg = ap.parse_args()
    if not 0 < cfg.seconds <= 600 or cfg.max_ops < 1 or cfg.work_us < 0:
        ap.error("--seconds must be in (0, 600], --max-ops >= 1 and --work-us >= 0")
    if not (1 <= cfg.processes <= 64 and 1 <= cfg.threads <= 64):
        ap.error("--processes and --threads must be in [1, 64]")
    if cfg.url is not None:
        scheme, sep, rest = cfg.url.partition("://")
        if sep and scheme in ("etcd", "etcd3"):
            cfg.url, cfg.variant, cfg.server_waits = "etcd3://" + rest.split("/")[0].split("?")[0].split(",")[0], "etcd3", False
            adapt_etcd3_waits()
            run(cfg)
            return
        if sep and scheme == "mysql":
            cfg.url, cfg.variant, cfg.server_waits = "mysql://" + rest.split("?")[0], "mysql", False
            run(cfg)
            return
        if not sep or scheme not in ("postgres", "postgresql"):
            ap.error("--url must be postgresql://USER:PASSWORD@HOST:PORT/DB, mysql://USER:PASSWORD@HOST:PORT/DB "
                     "or etcd://HOST:PORT")
        cfg.url, cfg.variant, cfg.server_waits = "postgresql://" + rest.split("?")[0], "postgresql", True
        # Bounds every server-side wait (libpq reads PGOPTIONS; tooz passes no options of its own).
        os.environ["PGOPTIONS"] = "-c lock_timeout=%d" % ((cfg.seconds + 2 * MARGIN_S) * 1000)
        run(cfg)
        return
    cfg.variant, cfg.server_waits = "file", False
    with tempfile.TemporaryDirectory(prefix="dlock-tooz-peer-", dir=cfg.dir) as d:
        cfg.url = "file://" + d
        run(cfg)


def redacted(url):
    """`url` with its password replaced by ***."""
    scheme, sep, rest = url.partition("://")
    creds, at, host = rest.rpartition("@")
    if not at or ":" not in creds:
        return url
    return scheme + sep + creds.split(":")[0] + ":***@" + host


def run(cfg):
    try:
        result, ok = contended(cfg)
    except RuntimeError as e:
        sys.stderr.write("tooz_peer.py: a worker process failed: %s\n" % e)
        sys.exit(70)
    print(json.dumps(result), flush=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
