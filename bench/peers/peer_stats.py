"""What the Python peers of `dlock bench` report, computed one way for all of them."""
import math


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
