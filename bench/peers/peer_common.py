"""What the Python peers of `dlock bench` share: how their worker processes
are run, and what they report, computed one way for all of them."""
import math
import queue
import threading
import time


def gather(procs, start_barrier, out, seconds, margin_s):
    """Starts the worker processes `procs`, lets them go together through
    `start_barrier` (theirs and ours) and takes one result each from the
    queue `out`: dicts with "index" and "error" (None if it went well).
    Returns (results by index, the time the clock started). Raises
    RuntimeError naming every worker that failed, sent nothing, or still ran
    `margin_s` x 2 past `seconds` (killed, as our own children)."""
    for p in procs:
        p.start()
    try:
        start_barrier.wait(timeout=30)
    except threading.BrokenBarrierError:
        pass  # a worker failed before the start: its result says why
    start = time.monotonic()
    limit = start + seconds + 2 * margin_s
    results, problems = [], []
    while len(results) < len(procs):
        try:
            results.append(out.get(timeout=max(0.1, limit - time.monotonic())))
        except queue.Empty:
            break
    for i, p in enumerate(procs):
        p.join(timeout=max(0.1, limit - time.monotonic()))
        if p.is_alive():
            problems.append("worker %d (pid %d) did not finish in time: killed" % (i, p.pid))
            p.kill()  # our own child, by its pid
            p.join(5)
    problems += ["worker %d: %s" % (r["index"], r["error"]) for r in results if r["error"]]
    if problems or len(results) != len(procs):
        raise RuntimeError("; ".join(problems) or "a worker sent no result")
    return sorted(results, key=lambda r: r["index"]), start


def nearest_rank_us(samples, q):
    """Nearest-rank percentile of sorted seconds, in microseconds (0 if none)."""
    if not samples:
        return 0.0
    k = min(len(samples) - 1, max(0, math.ceil(q * len(samples)) - 1))
    return round(samples[k] * 1e6, 1)


def fairness(shares):
    """Jain's index (sum x)^2 / (n * sum x^2): 1 = equal shares, 1/n = one takes all."""
    sq = sum(s * s for s in shares)
    return round(sum(shares) ** 2 / (len(shares) * sq), 3) if shares and sq else 0.0


def loop_fields(elapsed, ops, acquire, release, lost, owner_changes, shares):
    """The fields of a lock loop's JSON line that `dlock bench --json` has too.

    acquire, release: sorted seconds per call; shares: operations per process."""
    per_s = (lambda n: round(n / elapsed, 1) if elapsed > 0 else 0)
    return {
        "seconds": round(elapsed, 3),
        "ops": ops,
        "ops_per_s": per_s(ops),
        "acquire_p50_us": nearest_rank_us(acquire, 0.5),
        "acquire_p99_us": nearest_rank_us(acquire, 0.99),
        "release_p50_us": nearest_rank_us(release, 0.5),
        "release_p99_us": nearest_rank_us(release, 0.99),
        "lost_updates": lost,
        "owner_changes": owner_changes,
        "owner_changes_per_s": per_s(owner_changes),
        "shares": shares,
        "jain": fairness(shares),
    }
