#!/usr/bin/env bash
# examples/inventory-service/run.sh scaled down, with its locks on BACKEND
# (file, sqlite or redis): without a lock — or with a per-instance mutex —
# the stock is oversold (the race is real); with a dlock mutex, segmented
# stock or the store's atomic decrement exactly the stock is sold; nginx
# spread the orders over every instance; nothing is left running.
set -euo pipefail
src="$1" bin="$2" backend="$3"
own="$(mktemp -d -t dlock-inventory-test-XXXXXX)"
trap 'rm -rf "$own"' EXIT
fail() { echo "FAIL ($backend): $*" >&2; exit 1; }

# interrupt: Ctrl-C in the middle of a run stops everything it started.
if [[ "$backend" == interrupt ]]; then
  set -m  # its own process group, SIGINT not ignored: as a terminal's foreground job
  INVENTORY_PIDS_FILE="$own/pids" TMPDIR="$own" INVENTORY_BIN="$bin" \
    "$src/examples/inventory-service/run.sh" --stock 100000 --requests 100000 --concurrency 10 >/dev/null 2>&1 &
  run=$!
  for _ in $(seq 1 200); do [[ -f "$own/pids" && $(wc -l <"$own/pids") -ge 5 ]] && break; sleep 0.05; done
  [[ -f "$own/pids" && $(wc -l <"$own/pids") -ge 5 ]] || fail "run.sh never started its instances and nginx"
  sleep 0.5  # under load now
  kill -INT -- "-$run"  # Ctrl-C: the whole foreground group
  status=0
  wait "$run" || status=$?
  [[ $status -eq 130 ]] || fail "run.sh exited $status after Ctrl-C, expected 130"
  while read -r pid; do
    if kill -0 "$pid" 2>/dev/null; then fail "left running after Ctrl-C: $(ps -o pid=,args= -p "$pid")"; fi
  done <"$own/pids"
  [[ -z "$(ls "$own")" || "$(ls "$own")" == pids ]] || fail "left files behind: $(ls "$own")"
  echo "inventory (interrupted): ok"
  exit 0
fi

case "$backend" in
  file) url="" ;;                       # run.sh's default: file:// in its temp dir
  sqlite) url="sqlite://$own/locks.db" ;;
  redis) url="redis" ;;                 # the stock's own Redis
  *) fail "unknown backend" ;;
esac
INVENTORY_PIDS_FILE="$own/pids" TMPDIR="$own" INVENTORY_BIN="$bin" "$src/examples/inventory-service/run.sh" --json ${url:+--backend "$url"} \
  --stock 200 --requests 400 --concurrency 20 >"$own/results.jsonl" || fail "run.sh failed"

/usr/bin/python3 - "$own/results.jsonl" "$backend" <<'PY' || exit 1
import json, sys
rows = {r["mode"]: r for r in map(json.loads, open(sys.argv[1]))}
problems = []
if set(rows) != {"none", "local", "dlock", "segmented", "atomic"}:
    problems.append("modes run: %s" % sorted(rows))
for mode in ("none", "local"):
    if rows[mode]["oversold"] <= 0:
        problems.append("%s: expected the race to oversell, oversold %d" % (mode, rows[mode]["oversold"]))
for mode in ("dlock", "segmented", "atomic"):
    r = rows[mode]
    if r["oversold"] != 0 or r["accepted"] != r["stock"] or r["stock_left"] != 0:
        problems.append("%s: accepted %d of %d, left %d, oversold %d" % (mode, r["accepted"], r["stock"],
                                                                         r["stock_left"], r["oversold"]))
for mode, r in rows.items():
    if r["failed"] or min(r["accepted_per_instance"]) <= 0:
        problems.append("%s: failed requests %d, per instance %s" % (mode, r["failed"], r["accepted_per_instance"]))
if problems:
    sys.exit("FAIL (%s):\n  %s" % (sys.argv[2], "\n  ".join(problems)))
PY
# Every process run.sh started (Redis, instances, nginx) is gone.
[[ $(wc -l <"$own/pids") -ge 21 ]] || fail "run.sh reported only $(wc -l <"$own/pids") processes started"
while read -r pid; do
  if kill -0 "$pid" 2>/dev/null; then fail "left running: $(ps -o pid=,args= -p "$pid")"; fi
done <"$own/pids"
echo "inventory ($backend): ok"
