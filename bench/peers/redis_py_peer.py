#!/usr/bin/env python3
"""redis-py's Lock as a peer for `dlock bench` on the redis:// backend.

Runs one `dlock bench` workload with redis-py's own Lock (`r.lock(name,
timeout=..., sleep=..., blocking_timeout=...)`: SET NX PX to acquire, a Lua
compare-and-delete to release, and between failed tries a plain
time.sleep(sleep), 0.1 s by default) and prints ONE JSON line with the same
field names as `dlock bench --json`, plus "peer": "redis-py" and "variant", so
"dlock on Redis does X, redis-py's Lock does Y" is measured in the same run.

Workloads (each stops after --seconds or --max-ops operations per thread):
  uncontended  1 process, 1 thread: acquire + release of one key.
  contended    P processes (default 4) x T threads (default 1) on one key;
               inside the lock a non-atomic GET counter -> SET counter+1 in
               Redis (--inside redis, the default: 4 round trips per op) or
               the same read-modify-write on a counter in shared memory, which
               is what dlock bench does (--inside memory: 2 round trips).
               lost updates = ops - final counter; owner changes = acquisitions
               by another process than the last holder (kept in shared memory).
  many-keys    T threads (default 64) of one process, each on its own key,
               all sharing one redis.Redis client (its connection pool).
  flash-sale   P processes (default 4) x T threads (default 2) buy from a stock
               of --stock items held in Redis: under one lock, GET stock,
               --work-us of work, SET stock-1 (per order: 4 round trips).

Lock workloads also measure "raw" like dlock bench: redis-py's ping() with the
same processes x threads and as many round trips as the locks made, and
ratio_vs_raw = ops/s / (ping/s / round_trips_per_op); --no-raw skips it.

Variant: "sleep=<s>" (redis-py's poll interval while another holder has the
key). A waiter does not queue: it sleeps, then tries SET NX again, so with the
default 0.1 s a process that releases and re-acquires at once keeps the key.

Exit status: 0; 1 if mutual exclusion failed (lost updates, oversold); 70 if
a worker process failed, crashed or did not finish in time; 64 on bad usage.
Every worker process also has an alarm at --seconds x 2 + 30 s and dies by
itself if it is still running then. Keys are created under a prefix unique to
the run and deleted at the end.
"""
import argparse
import json
import math
import multiprocessing as mp
import os
import queue
import signal
import sys
import threading
import time
import traceback

try:
    import redis
except ImportError:  # e.g. a pyenv python3 ahead of Debian's on PATH
    sys.stderr.write("redis_py_peer.py: cannot import redis (Debian: apt-get install python3-redis; "
                     "run it with /usr/bin/python3 if another python3 comes first on PATH)\n")
    sys.exit(64)

MARGIN_S = 15.0  # as dlock bench: a worker still running this long past its limit is a failure
SOCKET_TIMEOUT_S = 5.0


def percentile_us(sorted_samples, q):
    """Nearest-rank percentile of seconds, in microseconds (0 if no sample)."""
    if not sorted_samples:
        return 0.0
    i = max(0, min(len(sorted_samples) - 1, math.ceil(q * len(sorted_samples)) - 1))
    return round(sorted_samples[i] * 1e6, 1)


def jain(xs):
    """Jain's fairness index (sum x)^2 / (n * sum x^2): 1 = equal shares, 1/n = one takes all."""
    s2 = sum(x * x for x in xs)
    return round(sum(xs) ** 2 / (len(xs) * s2), 3) if xs and s2 else 0.0


def connect(url):
    return redis.Redis.from_url(url, socket_timeout=SOCKET_TIMEOUT_S, socket_connect_timeout=SOCKET_TIMEOUT_S)


class Shared:
    """What every process sees, in shared memory (inherited through fork)."""

    def __init__(self, ctx, processes):
        self.counter = ctx.RawValue("q", 0)        # --inside memory: incremented non-atomically under the key
        self.last_pid = ctx.RawValue("i", 0)       # the process that held the key last
        self.owner_changes = ctx.RawValue("Q", 0)  # acquisitions by another process than the last holder
        self.start = ctx.Barrier(processes + 1)    # workers connected; the parent starts the clock


# --------------------------------------------------------------------------- the loops

def lock_thread(cfg, r, key, deadline, slot, shared):
    """acquire -> (inside) -> release until the deadline or --max-ops; fills slot."""
    me = os.getpid()
    counter_key = cfg.prefix + "counter"
    lock = r.lock(key, timeout=cfg.lock_timeout, sleep=cfg.sleep)
    acq, rel = slot["acquire"], slot["release"]
    contended = cfg.workload == "contended"
    stopped = "time_up"
    while True:
        if slot["ops"] >= cfg.max_ops:
            stopped = "max_ops"
            break
        t0 = time.monotonic()
        if t0 >= deadline:
            break
        if not lock.acquire(blocking_timeout=deadline - t0):
            slot["acquire_timeouts"] += 1
            break
        t1 = time.monotonic()
        if contended:
            # Read, write: correct only if the lock excludes.
            last = shared.last_pid.value
            if last != me:
                if last != 0:
                    shared.owner_changes.value += 1
                shared.last_pid.value = me
            if cfg.inside == "redis":
                seen = int(r.get(counter_key) or 0)
                r.set(counter_key, seen + 1)
            else:
                seen = shared.counter.value
                shared.counter.value = seen + 1
        t2 = time.monotonic()
        try:
            lock.release()
        except redis.exceptions.LockNotOwnedError:  # the lease ran out while held
            slot["failed_releases"] += 1
        t3 = time.monotonic()
        acq.append(t1 - t0)
        rel.append(t3 - t2)
        slot["ops"] += 1
    slot["stopped"] = stopped


def ping_thread(cfg, r, deadline, slot, per_thread):
    n = 0
    while n < per_thread and time.monotonic() < deadline:
        r.ping()
        n += 1
    slot["ops"] = n


def sale_thread(cfg, r, deadline, slot):
    """One buyer: returns when sold out or at the time limit."""
    lock = r.lock(cfg.prefix + "sale-lock", timeout=cfg.lock_timeout, sleep=cfg.sleep)
    stock_key = cfg.prefix + "stock"
    work = cfg.work_us / 1e6
    lat = slot["order"]
    stopped = "done"
    while True:
        t0 = time.monotonic()
        if t0 >= deadline:
            stopped = "time_limit"
            break
        if not lock.acquire(blocking_timeout=deadline - t0):
            slot["acquire_timeouts"] += 1
            stopped = "time_limit"
            break
        sold = False
        try:
            left = int(r.get(stock_key) or 0)    # read
            if left > 0:
                if work > 0:
                    time.sleep(work)             # the order is being processed
                r.set(stock_key, left - 1)       # write back
                sold = True
        finally:
            try:
                lock.release()
            except redis.exceptions.LockNotOwnedError:
                slot["failed_releases"] += 1
        if not sold:
            break
        lat.append(time.monotonic() - t0)
        slot["ops"] += 1
    slot["stopped"] = stopped


def worker(cfg, kind, process, shared, results, per_thread):
    """One forked process: its own client, cfg.threads threads, one result on the queue."""
    signal.alarm(int(cfg.seconds * 2 + 2 * MARGIN_S))  # dies by itself whatever happens
    try:
        r = connect(cfg.url)
        r.ping()  # connected before the clock starts
        shared.start.wait(timeout=30)
        deadline = time.monotonic() + cfg.seconds
        slots = [{"ops": 0, "acquire": [], "release": [], "order": [], "acquire_timeouts": 0,
                  "failed_releases": 0, "stopped": "time_up", "error": None} for _ in range(cfg.threads)]

        def run(t):
            slot = slots[t]
            try:
                if kind == "raw":
                    ping_thread(cfg, r, deadline, slot, per_thread)
                elif cfg.workload == "flash-sale":
                    sale_thread(cfg, r, deadline, slot)
                else:
                    key = cfg.prefix + ("key:%d" % (process * cfg.threads + t)
                                        if cfg.workload == "many-keys" else "lock")
                    lock_thread(cfg, r, key, deadline, slot, shared)
            except Exception as e:  # reported, the run fails
                slot["error"] = "%s: %s" % (type(e).__name__, e)
            slot["end"] = time.monotonic()

        threads = [threading.Thread(target=run, args=(t,), daemon=True) for t in range(cfg.threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=max(0.0, deadline + MARGIN_S - time.monotonic()))
        hung = sum(t.is_alive() for t in threads)
        errors = [s["error"] for s in slots if s["error"]]
        if hung:
            errors.append("%d thread(s) still running %.0f s past the limit" % (hung, MARGIN_S))
        results.put({"process": process, "pid": os.getpid(), "threads": [
            {k: v for k, v in s.items()} for s in slots], "errors": errors})
        results.close()
        results.join_thread()
        os._exit(0)
    except BaseException:
        traceback.print_exc()
        shared.start.abort()  # the parent and the other workers stop waiting for this one
        try:
            results.put({"process": process, "pid": os.getpid(), "threads": [],
                         "errors": [traceback.format_exc().strip().splitlines()[-1]]})
            results.close()
            results.join_thread()
        finally:
            os._exit(70)


def run_group(cfg, kind, per_thread=0):
    """Forks cfg.processes workers; returns (per-process results, shared, elapsed s) or raises."""
    ctx = mp.get_context("fork")
    shared = Shared(ctx, cfg.processes)
    results = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(cfg, kind, p, shared, results, per_thread), daemon=True)
             for p in range(cfg.processes)]
    for p in procs:
        p.start()
    try:
        shared.start.wait(timeout=30)
    except threading.BrokenBarrierError:
        pass  # a worker failed to connect: its result says why
    start = time.monotonic()
    limit = start + cfg.seconds + 2 * MARGIN_S
    got, errors = [], []
    while len(got) < len(procs):
        try:
            got.append(results.get(timeout=max(0.1, limit - time.monotonic())))
        except queue.Empty:
            break
    for p in procs:
        p.join(timeout=max(0.1, limit - time.monotonic()))
    for i, p in enumerate(procs):
        if p.is_alive():
            errors.append("worker process %d (pid %d) did not finish in time: killed" % (i, p.pid))
            p.kill()  # our own child, by its pid
            p.join(5)
        elif p.exitcode != 0:
            errors.append("worker process %d (pid %d) exited with %s" % (
                i, p.pid, ("signal %d" % -p.exitcode) if p.exitcode < 0 else "status %d" % p.exitcode))
    for g in got:
        errors += ["worker process %d (pid %d): %s" % (g["process"], g["pid"], e) for e in dict.fromkeys(g["errors"])]
    if errors or len(got) != len(procs):
        raise RuntimeError("; ".join(dict.fromkeys(errors)) or "a worker process sent no result")
    got.sort(key=lambda g: g["process"])
    ends = [t["end"] for g in got for t in g["threads"] if "end" in t]
    return got, shared, (max(ends) - start) if ends else 0.0


# --------------------------------------------------------------------------- workloads

def run_lock_workload(cfg):
    got, shared, elapsed = run_group(cfg, "lock")
    per_thread = [t for g in got for t in g["threads"]]
    ops = sum(t["ops"] for t in per_thread)
    acq = sorted(x for t in per_thread for x in t["acquire"])
    rel = sorted(x for t in per_thread for x in t["release"])
    if cfg.workload == "many-keys":
        shares = [t["ops"] for t in per_thread]
    else:
        shares = [sum(t["ops"] for t in g["threads"]) for g in got]
    lost = 0
    if cfg.workload == "contended":
        if cfg.inside == "redis":
            final = int(connect(cfg.url).get(cfg.prefix + "counter") or 0)
        else:
            final = shared.counter.value
        lost = ops - final
    rt = 4 if (cfg.workload == "contended" and cfg.inside == "redis") else 2
    out = {
        "peer": "redis-py",
        "variant": "sleep=%g" % cfg.sleep,
        "workload": cfg.workload,
        "backend": cfg.url,
        "processes": cfg.processes,
        "threads": cfg.threads,
        "seconds": round(elapsed, 3),
        "ops": ops,
        "ops_per_s": round(ops / elapsed, 1) if elapsed > 0 else 0,
        "acquire_p50_us": percentile_us(acq, 0.5),
        "acquire_p99_us": percentile_us(acq, 0.99),
        "release_p50_us": percentile_us(rel, 0.5),
        "release_p99_us": percentile_us(rel, 0.99),
        "lost_updates": lost,
        "owner_changes": shared.owner_changes.value,
        "owner_changes_per_s": round(shared.owner_changes.value / elapsed, 1) if elapsed > 0 else 0,
        "shares": shares,
        "jain": jain(shares),
        "stopped": ",".join(sorted({t["stopped"] for t in per_thread})),
        "inside": ("redis GET+SET" if cfg.inside == "redis" else "shared-memory read+write")
                  if cfg.workload == "contended" else "nothing",
        "round_trips_per_op": rt,
        "acquire_timeouts": sum(t["acquire_timeouts"] for t in per_thread),
        "failed_releases": sum(t["failed_releases"] for t in per_thread),
        "sleep_s": cfg.sleep,
        "lock_timeout_s": cfg.lock_timeout,
        "redis_py": redis.__version__,
        "python": sys.version.split()[0],
    }
    if cfg.raw and ops > 0:
        workers = cfg.processes * cfg.threads
        per = -(-rt * ops // workers)
        rgot, _, relapsed = run_group(cfg, "raw", per)
        pings = sum(t["ops"] for g in rgot for t in g["threads"])
        ping_s = pings / relapsed if relapsed > 0 else 0
        out["raw"] = {"what": "redis-py ping() loop, same processes x threads", "pings": pings,
                      "seconds": round(relapsed, 3), "ping_per_s": round(ping_s, 1)}
        out["ratio_vs_raw"] = round(out["ops_per_s"] / (ping_s / rt), 3) if ping_s > 0 else 0
    return out, lost == 0


def run_flash_sale(cfg):
    r = connect(cfg.url)
    r.set(cfg.prefix + "stock", cfg.stock)
    got, _, elapsed = run_group(cfg, "sale")
    per_thread = [t for g in got for t in g["threads"]]
    lat = sorted(x for t in per_thread for x in t["order"])
    orders = sum(t["ops"] for t in per_thread)
    by_process = [sum(t["ops"] for t in g["threads"]) for g in got]
    left = int(r.get(cfg.prefix + "stock") or 0)
    time_limit_hit = any(t["stopped"] == "time_limit" for t in per_thread)
    oversold = max(0, orders - cfg.stock)
    mode = {
        "mode": "redis-py",
        "orders": orders,
        "oversold": oversold,
        "orders_per_s": round(orders / elapsed, 1) if elapsed > 0 else 0,
        "p50_us": percentile_us(lat, 0.5),
        "p99_us": percentile_us(lat, 0.99),
        "max_us": percentile_us(lat, 1.0),
        "stock_left": left,
        "seconds": round(elapsed, 3),
        "exact": (not time_limit_hit) and oversold == 0 and left == 0 and orders == cfg.stock,
        "time_limit_hit": time_limit_hit,
        "orders_by_process": by_process,
        "jain": jain(by_process),
        "acquire_timeouts": sum(t["acquire_timeouts"] for t in per_thread),
        "failed_releases": sum(t["failed_releases"] for t in per_thread),
    }
    out = {
        "peer": "redis-py",
        "variant": "sleep=%g" % cfg.sleep,
        "workload": "flash-sale",
        "backend": cfg.url,
        "processes": cfg.processes,
        "threads": cfg.threads,
        "stock": cfg.stock,
        "work_us": cfg.work_us,
        "inside": "redis GET stock, work, SET stock-1",
        "round_trips_per_op": 4,
        "sleep_s": cfg.sleep,
        "lock_timeout_s": cfg.lock_timeout,
        "redis_py": redis.__version__,
        "python": sys.version.split()[0],
        "modes": [mode],
    }
    # Lost updates show up as stock left over: sold + left should be the stock.
    ok = oversold == 0 and (time_limit_hit or (left == 0 and orders == cfg.stock))
    return out, ok


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", required=True, help="redis://HOST:PORT[/DB]")
    ap.add_argument("--workload", "-w", required=True, choices=["uncontended", "contended", "many-keys", "flash-sale"])
    ap.add_argument("--processes", "-p", type=int, default=0,
                    help="processes (contended, flash-sale: 4; others: 1)")
    ap.add_argument("--threads", "-t", type=int, default=0,
                    help="threads per process (many-keys: 64; flash-sale: 2; others: 1)")
    ap.add_argument("--seconds", "-s", type=float, default=3.0)
    ap.add_argument("--max-ops", type=int, default=1_000_000, help="per thread (default 1000000)")
    ap.add_argument("--stock", type=int, default=5000, help="flash-sale: items (default 5000)")
    ap.add_argument("--work-us", type=float, default=100.0, help="flash-sale: work per order in us (default 100)")
    ap.add_argument("--sleep", type=float, default=0.1,
                    help="redis-py Lock's sleep between tries while the key is held (its default: 0.1 s)")
    ap.add_argument("--lock-timeout", type=float, default=30.0,
                    help="the lock's lease, Lock(timeout=...) (default 30 s, dlock's default lease)")
    ap.add_argument("--inside", choices=["redis", "memory"], default="redis",
                    help="contended: the counter's GET+SET in Redis (default) or in shared memory as dlock bench")
    ap.add_argument("--no-raw", dest="raw", action="store_false", help="skip the raw ping() reference")
    cfg = ap.parse_args()
    if not 0 < cfg.seconds <= 600:
        ap.error("--seconds must be in (0, 600]")
    if cfg.sleep <= 0 or cfg.lock_timeout <= 0 or cfg.max_ops < 1 or cfg.stock < 1 or cfg.work_us < 0:
        ap.error("--sleep, --lock-timeout, --max-ops, --stock must be > 0 and --work-us >= 0")
    defaults = {"uncontended": (1, 1), "contended": (4, 1), "many-keys": (1, 64), "flash-sale": (4, 2)}
    dp, dt = defaults[cfg.workload]
    if cfg.workload == "uncontended" and (cfg.processes not in (0, 1) or cfg.threads not in (0, 1)):
        ap.error("--workload uncontended: is one process and one thread by definition")
    cfg.processes = cfg.processes or dp
    cfg.threads = cfg.threads or dt
    if not (1 <= cfg.processes <= 256 and 1 <= cfg.threads <= 256):
        ap.error("--processes and --threads must be in [1, 256]")
    cfg.prefix = "dlock-peer:%d:%d:%s:" % (os.getpid(), int(time.time() * 1000), cfg.workload)

    status = 0
    try:
        connect(cfg.url).ping()
        out, ok = run_flash_sale(cfg) if cfg.workload == "flash-sale" else run_lock_workload(cfg)
        print(json.dumps(out), flush=True)
        status = 0 if ok else 1
    except RuntimeError as e:
        sys.stderr.write("redis_py_peer.py: a worker process failed: %s\n" % e)
        status = 70
    except redis.exceptions.RedisError as e:
        sys.stderr.write("redis_py_peer.py: %s: %s\n" % (type(e).__name__, e))
        status = 70
    finally:
        try:
            r = connect(cfg.url)
            keys = list(r.scan_iter(match=cfg.prefix + "*", count=1000))
            for i in range(0, len(keys), 500):
                r.delete(*keys[i:i + 500])
        except redis.exceptions.RedisError:
            pass
    sys.exit(status)


if __name__ == "__main__":
    main()
