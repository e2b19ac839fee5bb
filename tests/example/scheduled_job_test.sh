#!/usr/bin/env bash
# examples/scheduled_job.cpp as cron would run it on several hosts: the first
# instance runs the job and keeps the lock for its hold-at-least window; the
# instances fired during the window skip; after the window the next one runs.
set -euo pipefail
bin="$1"
own="$(mktemp -d -t dlock-scheduled-job-XXXXXX)"
first=""
trap '[[ -z "$first" ]] || kill "$first" 2>/dev/null || true; rm -rf "$own"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
url="file://$own/locks"

stdbuf -oL "$bin" "$url" jobs/nightly 2 >"$own/first.out" 2>&1 &  # line-buffered: seen as it runs
first=$!
for _ in $(seq 1 200); do grep -q "running" "$own/first.out" && break; sleep 0.02; done
grep -q "running" "$own/first.out" || fail "the first instance never ran the job: $(cat "$own/first.out")"
for _ in $(seq 1 100); do grep -q "step 2" "$own/first.out" && break; sleep 0.01; done
sleep 0.05  # its last 10 ms step is over
for host in 2 3 4; do  # its 30 ms job is over, the window is not
  out="$(timeout 10 "$bin" "$url" jobs/nightly 2 2>&1)" || fail "instance $host exited $?: $out"
  [[ "$out" == *"skipping this run"* && "$out" != *running* ]] || fail "instance $host ran the job inside the window: $out"
done
wait "$first" || fail "the first instance exited $?"
first=""
grep -q "done" "$own/first.out" || fail "the first instance did not finish: $(cat "$own/first.out")"
out="$(timeout 10 "$bin" "$url" jobs/nightly 0 2>&1)" || fail "after the window: exit $?: $out"
[[ "$out" == *running* ]] || fail "after the window the next instance should run the job: $out"
echo "scheduled job: ok"
