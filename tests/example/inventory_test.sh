#!/usr/bin/env bash
# examples/inventory-service/run.sh scaled down, with its locks on BACKEND
# (file, sqlite or redis, stock in Redis that run.sh starts; or postgres:
# stock in a PostgreSQL table, locks on the same server, the fixtures' one): without a lock — or with a per-instance
# mutex — the stock is oversold (the race is real); with a dlock mutex,
# segmented stock, the store's atomic decrement, and on SQL SELECT ... FOR
# UPDATE and the optimistic version check, exactly the stock is sold; nginx
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

# Bad arguments are refused (exit 64, naming the argument) before anything
# starts; a store that does not answer is an error (exit 69) within its
# connect timeout, not a hang.
if [[ "$backend" == postgres ]]; then
  refused() {  # EXPECTED-TEXT ARGS...
    local want="$1" out status=0
    shift
    out="$(timeout 20 "$bin" --port 0 "$@" 2>&1)" || status=$?
    [[ $status -eq 64 && "$out" == *"$want"* ]] || fail "$* → exit $status, '$out' (expected 64 and '$want')"
  }
  refused "--store" --store ftp://127.0.0.1/x --protect none
  refused "--protect for-update needs a SQL store" --store redis://127.0.0.1:1 --protect for-update
  refused "--protect: one of" --store redis://127.0.0.1:1 --protect pessimistic
  refused "--port" --port 99999 --store redis://127.0.0.1:1 --protect none
  refused "--lock URL is needed" --store redis://127.0.0.1:1 --protect dlock
  refused "no database" --store mysql://u:p@127.0.0.1:1 --protect none
  status=0
  out="$(timeout 20 "$bin" --port 0 --store "postgres://u:p@127.0.0.1:$(source "$src/scripts/ports.sh"; free_port)/db" \
           --protect none 2>&1)" || status=$?
  [[ $status -eq 69 && "$out" == *PostgreSQL* ]] || fail "a store that does not answer: exit $status, '$out' (expected 69)"
  for bad in "--store foo" "--modes for-update" "--sku a/b" "--stock"; do  # run.sh too, before it starts anything
    status=0
    out="$(TMPDIR="$own" INVENTORY_BIN="$bin" "$src/examples/inventory-service/run.sh" $bad 2>&1)" || status=$?
    [[ $status -eq 64 && "$out" == *"${bad%% *}"* ]] || fail "run.sh $bad → exit $status, '$out' (expected 64)"
  done
  [[ -z "$(ls "$own")" ]] || fail "run.sh refused its arguments but left $(ls "$own")"
fi

modes="none local dlock segmented atomic" args=() load=(--stock 200 --requests 400 --concurrency 20)
case "$backend" in
  file) ;;                                # run.sh's default: file:// in its temp dir
  sqlite) args=(--backend "sqlite://$own/locks.db") ;;
  redis) args=(--backend redis) ;;        # the stock's own Redis
  # The SQL modes (the lean set: CI time), stock and locks on the PostgreSQL
  # the test fixtures started, a product of its own.
  postgres)
    pg="$(cat "${DLOCK_TEST_SERVERS:?run with ctest: it starts the servers}/postgres/url")"
    modes="none dlock for-update optimistic atomic" args=(--store "$pg" --backend "$pg" --sku "sku-$$-$RANDOM")
    load=(--stock 100 --requests 200 --concurrency 10) ;;
  *) fail "unknown backend" ;;
esac
INVENTORY_PIDS_FILE="$own/pids" TMPDIR="$own" INVENTORY_BIN="$bin" "$src/examples/inventory-service/run.sh" --json \
  "${args[@]}" --modes "$modes" "${load[@]}" >"$own/results.jsonl" || fail "run.sh failed"

/usr/bin/python3 - "$own/results.jsonl" "$backend" "$modes" <<'PY' || exit 1
import json, sys
rows = {r["mode"]: r for r in map(json.loads, open(sys.argv[1]))}
problems = []
if set(rows) != set(sys.argv[3].split()):
    problems.append("modes run: %s, expected %s" % (sorted(rows), sys.argv[3]))
for mode in set(rows) & {"none", "local"}:
    if rows[mode]["oversold"] <= 0:
        problems.append("%s: expected the race to oversell, oversold %d" % (mode, rows[mode]["oversold"]))
for mode in set(rows) - {"none", "local"}:
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
# Every process run.sh started (the store's server, instances, nginx) is gone.
expected=$(($(wc -w <<<"$modes") * 4))  # instances and nginx per mode
[[ "$backend" == postgres ]] || expected=$((expected + 1))  # and the Redis it started
[[ $(wc -l <"$own/pids") -ge $expected ]] || fail "run.sh reported only $(wc -l <"$own/pids") processes started"
while read -r pid; do
  if kill -0 "$pid" 2>/dev/null; then fail "left running: $(ps -o pid=,args= -p "$pid")"; fi
done <"$own/pids"
echo "inventory ($backend): ok"
