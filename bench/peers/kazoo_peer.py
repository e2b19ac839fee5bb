#!/usr/bin/env python3
"""kazoo's Lock as a peer for `dlock bench` on the zk:// backend.

Runs one workload with kazoo's own Lock recipe (client.Lock(path): an
ephemeral sequential znode per waiter, a watch on the next lower one) and
prints ONE JSON line with the field names of `dlock bench --json` and
bench/peers/redis_py_peer.py, plus "peer": "kazoo" and "variant".

Workloads (each stops after --seconds or --max-ops acquisitions per process):
  uncontended  1 process: acquire + release of one lock.
  contended    P processes (default 4), each its own session, on one lock;
               inside it a non-atomic read -> write of a counter, either in
               shared memory (--inside memory, the default, as dlock bench)
               or in a znode (--inside zk: get + set, 2 more round trips).
               lost updates = ops - final counter; owner changes =
               acquisitions by another process than the last holder.

Exit status: 0; 1 if mutual exclusion failed (lost updates); 70 if a worker
process failed or did not finish in time; 64 on bad usage. Every worker has an
alarm at --seconds x 2 + 30 s. The znodes are created under a path unique to
the run and deleted at the end.
"""
import argparse
import json
import multiprocessing as mp
import os
import signal
import sys
import threading
import time

try:
    import kazoo
    from kazoo.client import KazooClient
    from kazoo.exceptions import KazooException, LockTimeout
except ImportError:
    sys.stderr.write("kazoo_peer.py: cannot import kazoo (Debian: apt-get install python3-kazoo; "
                     "run it with /usr/bin/python3 if another python3 comes first on PATH)\n")
    sys.exit(64)

from peer_common import gather, loop_fields

MARGIN_S = 15.0


def hosts_of(url):
    """zk://h:p,h:p/chroot?q or a plain connect string -> what KazooClient takes."""
    if url.startswith("zk://"):
        url = url[len("zk://"):]
    return url.split("?", 1)[0]


def contender(cfg, index, state, out):
    """A forked worker process: one session, one Lock; sends one result dict."""
    signal.alarm(int(cfg.seconds * 2 + 2 * MARGIN_S))
    result = {"index": index, "ops": 0, "acquire": [], "release": [], "timeouts": 0, "stopped": "time_up",
              "error": None}
    zk = None
    try:
        zk = KazooClient(hosts=cfg.hosts, timeout=cfg.session_timeout)
        zk.start(timeout=10)
        lock = zk.Lock(cfg.base + "/lock", "pid-%d" % os.getpid())
        counter_path = cfg.base + "/counter"
        me = os.getpid()
        state["start"].wait(timeout=30)
        deadline = time.monotonic() + cfg.seconds
        while True:
            if result["ops"] >= cfg.max_ops:
                result["stopped"] = "max_ops"
                break
            t0 = time.monotonic()
            if t0 >= deadline:
                break
            try:
                got = lock.acquire(timeout=deadline - t0)
            except LockTimeout:  # kazoo raises where a False would do
                got = False
            if not got:
                result["timeouts"] += 1
                break
            t1 = time.monotonic()
            if cfg.workload == "contended":
                # Read, write: correct only if the lock excludes.
                if state["last_pid"].value != me:
                    if state["last_pid"].value != 0:
                        state["owner_changes"].value += 1
                    state["last_pid"].value = me
                if cfg.inside == "zk":
                    data, _ = zk.get(counter_path)
                    zk.set(counter_path, str(int(data or b"0") + 1).encode())
                else:
                    state["counter"].value = state["counter"].value + 1
            t2 = time.monotonic()
            lock.release()
            result["acquire"].append(t1 - t0)
            result["release"].append(time.monotonic() - t2)
            result["ops"] += 1
    except BaseException as e:  # reported; the run fails
        result["error"] = "%s: %s" % (type(e).__name__, e)
        try:
            state["start"].abort()
        except threading.BrokenBarrierError:
            pass
    result["end"] = time.monotonic()
    out.put(result)
    out.close()
    out.join_thread()
    if zk is not None:
        zk.stop()
        zk.close()
    os._exit(0 if result["error"] is None else 70)


def run(cfg):
    ctx = mp.get_context("fork")
    state = {"counter": ctx.RawValue("q", 0), "last_pid": ctx.RawValue("q", 0),
             "owner_changes": ctx.RawValue("Q", 0), "start": ctx.Barrier(cfg.processes + 1)}
    out = ctx.Queue()
    procs = [ctx.Process(target=contender, args=(cfg, i, state, out), daemon=True) for i in range(cfg.processes)]
    results, start = gather(procs, state["start"], out, cfg.seconds, MARGIN_S)
    elapsed = max(r["end"] for r in results) - start
    ops = sum(r["ops"] for r in results)
    shares = [r["ops"] for r in results]
    acquire = sorted(x for r in results for x in r["acquire"])
    release = sorted(x for r in results for x in r["release"])
    lost = 0
    if cfg.workload == "contended":
        if cfg.inside == "zk":
            zk = KazooClient(hosts=cfg.hosts, timeout=cfg.session_timeout)
            zk.start(timeout=10)
            final = int(zk.get(cfg.base + "/counter")[0] or b"0")
            zk.stop()
            zk.close()
        else:
            final = state["counter"].value
        lost = ops - final
    changes = state["owner_changes"].value
    return {
        "peer": "kazoo",
        "variant": "Lock",
        "workload": cfg.workload,
        "backend": cfg.url,
        "processes": cfg.processes,
        "threads": 1,
        **loop_fields(elapsed, ops, acquire, release, lost, changes, shares),
        "stopped": ",".join(sorted({r["stopped"] for r in results})),
        "inside": ("zk get+set" if cfg.inside == "zk" else "shared-memory read+write")
                  if cfg.workload == "contended" else "nothing",
        "acquire_timeouts": sum(r["timeouts"] for r in results),
        "failed_releases": 0,
        "session_timeout_s": cfg.session_timeout,
        "kazoo": getattr(kazoo, "__version__", "?"),
        "python": sys.version.split()[0],
    }, lost == 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", required=True, help="zk://HOST:PORT[,HOST:PORT...] or a connect string")
    ap.add_argument("--workload", "-w", required=True, choices=["uncontended", "contended"])
    ap.add_argument("--processes", "-p", type=int, default=0, help="contended: processes (default 4)")
    ap.add_argument("--seconds", "-s", type=float, default=3.0)
    ap.add_argument("--max-ops", type=int, default=1_000_000, help="per process (default 1000000)")
    ap.add_argument("--inside", choices=["memory", "zk"], default="memory",
                    help="contended: the counter in shared memory (default, as dlock bench) or in a znode")
    ap.add_argument("--session-timeout", type=float, default=5.0, help="seconds (default 5)")
    cfg = ap.parse_args()
    if not 0 < cfg.seconds <= 600 or cfg.max_ops < 1 or cfg.session_timeout <= 0:
        ap.error("--seconds must be in (0, 600], --max-ops >= 1, --session-timeout > 0")
    if cfg.workload == "uncontended" and cfg.processes not in (0, 1):
        ap.error("--workload uncontended is one process by definition")
    cfg.processes = cfg.processes or (4 if cfg.workload == "contended" else 1)
    if not 1 <= cfg.processes <= 64:
        ap.error("--processes must be in [1, 64]")
    cfg.hosts = hosts_of(cfg.url)
    cfg.base = "/dlock-peer-kazoo-%d-%d" % (os.getpid(), int(time.time() * 1000))

    status = 0
    admin = KazooClient(hosts=cfg.hosts, timeout=cfg.session_timeout)
    try:
        admin.start(timeout=10)
        admin.ensure_path(cfg.base)
        if cfg.workload == "contended" and cfg.inside == "zk":
            admin.create(cfg.base + "/counter", b"0")
        out, ok = run(cfg)
        print(json.dumps(out), flush=True)
        status = 0 if ok else 1
    except RuntimeError as e:
        sys.stderr.write("kazoo_peer.py: a worker process failed: %s\n" % e)
        status = 70
    except (KazooException, kazoo.handlers.threading.KazooTimeoutError) as e:
        sys.stderr.write("kazoo_peer.py: %s: %s\n" % (type(e).__name__, e))
        status = 70
    finally:
        try:
            if admin.connected:
                admin.delete(cfg.base, recursive=True)
            admin.stop()
            admin.close()
        except KazooException:
            pass
    sys.exit(status)


if __name__ == "__main__":
    main()
