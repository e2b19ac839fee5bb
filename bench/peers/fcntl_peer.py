#!/usr/bin/env python3
"""A Python file lock as a peer for `dlock bench` on the file:// backend.

Runs lock + unlock on one file for --seconds and prints one JSON object with
lock+unlock per second, so "dlock's file backend does X lock+unlock/s, a Python
file lock (fcntl) does Y on this machine" is measured in the same run.

Modes:
  open      what the popular `filelock` package does per acquire/release:
            os.open + fcntl.flock(LOCK_EX) ... fcntl.flock(LOCK_UN) + os.close
  held-fd   the cheapest possible: one descriptor kept open, flock/unflock only
  lockf     POSIX record lock (fcntl.lockf) on a kept descriptor
"""
import argparse
import fcntl
import json
import os
import sys
import tempfile
import time


def run(mode, path, seconds, max_ops):
    ops = 0
    start = time.perf_counter()
    end = start + seconds
    if mode == "open":
        while ops < max_ops:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX)
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
            ops += 1
            if (ops & 255) == 0 and time.perf_counter() >= end:
                break
    else:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            if mode == "held-fd":
                lock, unlock = (lambda: fcntl.flock(fd, fcntl.LOCK_EX)), (lambda: fcntl.flock(fd, fcntl.LOCK_UN))
            else:
                lock, unlock = (lambda: fcntl.lockf(fd, fcntl.LOCK_EX)), (lambda: fcntl.lockf(fd, fcntl.LOCK_UN))
            while ops < max_ops:
                lock()
                unlock()
                ops += 1
                if (ops & 255) == 0 and time.perf_counter() >= end:
                    break
        finally:
            os.close(fd)
    elapsed = time.perf_counter() - start
    return ops, elapsed


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--max-ops", type=int, default=10_000_000)
    ap.add_argument("--mode", choices=["open", "held-fd", "lockf", "all"], default="all")
    ap.add_argument("--dir", default=None, help="directory for the lock file (default: a fresh temp dir)")
    args = ap.parse_args()
    if args.seconds <= 0 or args.seconds > 600:
        ap.error("--seconds must be in (0, 600]")
    modes = ["open", "held-fd", "lockf"] if args.mode == "all" else [args.mode]
    with tempfile.TemporaryDirectory(prefix="dlock-peer-", dir=args.dir) as d:
        path = os.path.join(d, "peer.lock")
        for mode in modes:
            ops, elapsed = run(mode, path, args.seconds / len(modes), args.max_ops)
            print(json.dumps({
                "peer": "python-fcntl",
                "mode": mode,
                "python": sys.version.split()[0],
                "ops": ops,
                "seconds": round(elapsed, 3),
                "ops_per_s": round(ops / elapsed, 1) if elapsed > 0 else None,
            }), flush=True)


if __name__ == "__main__":
    main()
