#!/usr/bin/env bash
# The design documents' flash sale, as they ran it: several instances of the
# inventory service behind nginx, an HTTP load of orders for one product,
# and the stock at the end — once per protection mode.
#
#   examples/inventory-service/run.sh [--store redis|mariadb|postgres|URL] [--backend URL|redis|zk|mariadb|postgres]
#                                     [--modes "none local dlock ..."] [--stock N] [--requests N]
#                                     [--concurrency N] [--instances N] [--work-us N] [--sku NAME] [--json]
#
# Starts (on 127.0.0.1, free ports, everything in a temp dir): the server that
# holds the stock (--store: a Redis key, or the table `inventory` in MariaDB or
# PostgreSQL; default redis; a URL uses a server you run), the lock server
# --backend names (redis, zk, mariadb, postgres: the project's server script,
# or the stock's own server when it is the same kind; default: file:// in the
# temp dir; any other dlock URL is used as it is), and per mode N instances of
# inventory_service and nginx in front of them (its own config: an upstream
# of the instances). It sets the stock, fires the orders with ab (-k,
# concurrency C), and prints requests/s, latency p50/p99, orders accepted,
# stock left and oversold (orders accepted that the stock never lost: the same
# item sold twice), and the CPU each part used during the load (in cores:
# CPU seconds / wall seconds) — what a mode is limited by.
# Modes: none local dlock segmented atomic, and on SQL for-update optimistic
# (all of them by default); and "http": the same load on GET /stats, which
# touches no store — the ceiling of HTTP, nginx and ab on this machine. Everything it starts it stops, on success,
# failure or Ctrl-C.
#
# --sku: the product sold (default sku-1001); its stock row or key is overwritten.
# Needs: the built inventory_service (INVENTORY_BIN, else build/release or
# build/dev), nginx and ab (Debian nginx-light, apache2-utils), and the
# servers' packages (scripts/install-deps.sh).
# INVENTORY_PIDS_FILE: if set, the pid of every process it starts is added
# there (its test checks that none outlives it).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"

store=redis backend="" modes="" stock=5000 requests=5000 concurrency=100 instances=3 sku=sku-1001
work_us=200 json=0
while (($#)); do
  case "$1" in
    --store|--backend|--modes|--stock|--requests|--concurrency|--instances|--work-us|--sku)
      (($# >= 2)) || { echo "run.sh: $1 needs a value" >&2; exit 64; }
      v="${1#--}"; printf -v "${v//-/_}" '%s' "$2"; shift 2 ;;
    --json) json=1; shift ;;
    *) echo "run.sh: unknown argument '$1' (see the top of $0)" >&2; exit 64 ;;
  esac
done
for n in stock requests concurrency instances work_us; do
  [[ "${!n}" =~ ^[0-9]+$ ]] || { echo "run.sh: --${n//_/-} must be a whole number, not '${!n}'" >&2; exit 64; }
done
((instances >= 1 && concurrency >= 1 && requests >= 1)) || { echo "run.sh: --instances, --concurrency, --requests must be >= 1" >&2; exit 64; }
[[ "$sku" =~ ^[A-Za-z0-9_-]{1,40}$ ]] || { echo "run.sh: --sku must be 1 to 40 letters, digits, '-' or '_', not '$sku'" >&2; exit 64; }
case "$store" in
  redis|redis://*) sql=0 ;;
  mariadb|postgres|mysql://*|postgres://*|postgresql://*) sql=1 ;;
  *) echo "run.sh: --store must be redis, mariadb, postgres or a redis://, mysql://, postgres:// URL, not '$store'" >&2; exit 64 ;;
esac
all_modes="none local dlock segmented atomic"
((sql)) && all_modes="none local dlock segmented for-update optimistic atomic"
modes="${modes:-$all_modes}"
for mode in $modes; do
  [[ " $all_modes http " == *" $mode "* ]] || { echo "run.sh: --modes: '$mode' is not one of: $all_modes (for --store $store)" >&2; exit 64; }
done

bin="${INVENTORY_BIN:-}"
for candidate in "$root/build/release/examples/inventory_service" "$root/build/dev/examples/inventory_service"; do
  [[ -z "$bin" && -x "$candidate" ]] && bin="$candidate"
done
[[ -x "$bin" ]] || { echo "run.sh: no inventory_service binary (build the example_inventory_service target, or set INVENTORY_BIN)" >&2; exit 64; }
for tool in nginx ab curl python3; do
  command -v "$tool" >/dev/null || [[ -x "/usr/sbin/$tool" ]] || { echo "run.sh: needs $tool (scripts/install-deps.sh)" >&2; exit 64; }
done
nginx_bin="$(command -v nginx || echo /usr/sbin/nginx)"

work="$(mktemp -d -t dlock-inventory-XXXXXX)"
pids=() servers=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
    kill -9 "$pid" 2>/dev/null || true
  done
  pids=()
  for s in "${servers[@]}"; do "$root/scripts/${s%%:*}-server.sh" stop "${s#*:}" >/dev/null 2>&1 || true; done
  servers=()
}
trap 'cleanup; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

started() { [[ -z "${INVENTORY_PIDS_FILE:-}" ]] || echo "$1" >>"$INVENTORY_PIDS_FILE"; }
# start_server KIND: starts one with scripts/KIND-server.sh in the temp dir
# (once per kind); its URL in $server_url, its pid in $work/KIND.pid.
start_server() {
  local kind="$1" dir="$work/$1"
  if [[ ! -d "$dir" ]]; then
    servers+=("$kind:$dir")
    "$root/scripts/$kind-server.sh" start "$dir" >&2
    case "$kind" in
      redis) cp "$dir/redis.pid" "$work/$kind.pid" ;;
      zookeeper) cp "$dir/node1/zk.pid" "$work/$kind.pid" ;;
      *) cp "$dir/pid" "$work/$kind.pid" ;;
    esac
    started "$(cat "$work/$kind.pid")"
  fi
  server_url="$(cat "$dir/url")"
}
case "$store" in
  redis|mariadb|postgres) start_server "$store"; store_url="$server_url" store_server="$store" ;;
  *) store_url="$store" store_server="" ;;
esac
case "$backend" in
  "") mkdir -m 700 "$work/locks"; lock_url="file://$work/locks/d" lock_server="" ;;
  redis) start_server redis; lock_url="$server_url/0?prefix=inventory-locks:" lock_server=redis ;;
  zk|zookeeper) start_server zookeeper; lock_url="$server_url/inventory-locks" lock_server=zookeeper ;;
  mariadb|postgres) start_server "$backend"; lock_url="$server_url" lock_server="$backend" ;;
  *) lock_url="$backend" lock_server="" ;;
esac
# The stock's server is the lock server too: its CPU is counted once, as the store's.
[[ "$lock_server" == "$store_server" ]] && lock_server=""

source "$root/scripts/ports.sh"  # free_port
http() {  # METHOD URL -> body (exit 1 on an HTTP error)
  if [[ "$1" == GET ]]; then curl -sSf --max-time 10 "$2"; else curl -sSf --max-time 10 -X "$1" -d '' "$2"; fi
}
# cpu_seconds NAME=PID...: "NAME SECONDS" per argument: the CPU time (user +
# system) of the process and every process below it (PostgreSQL's backends,
# nginx's worker).
cpu_seconds() {
  python3 - "$@" <<'PY'
import os, sys
tick = os.sysconf("SC_CLK_TCK")
stat = {}
for p in os.listdir("/proc"):
    if p.isdigit():
        try:
            f = open("/proc/%s/stat" % p).read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        stat[int(p)] = (int(f[1]), int(f[11]) + int(f[12]))  # parent, utime + stime
def tree(pid):
    return stat.get(pid, (0, 0))[1] + sum(tree(c) for c, (parent, _) in stat.items() if parent == pid)
for arg in sys.argv[1:]:
    name, pid = arg.split("=")
    print(name, tree(int(pid)) / tick)
# The whole machine's busy CPU (everyone's: it is shared), for whether it was saturated.
busy = open("/proc/stat").readline().split()[1:]
print("machine", (sum(map(int, busy[:8])) - int(busy[3]) - int(busy[4])) / tick)
PY
}
wait_for() {  # URL: until it answers, at most 10 s
  for _ in $(seq 1 500); do http GET "$1" >/dev/null 2>&1 && return 0; sleep 0.02; done
  echo "run.sh: $1 never answered" >&2; return 1
}

# One mode: instances + nginx, the stock set, the load, the outcome.
run_mode() {
  local mode="$1" ports=() instance_pids=() i port log
  for ((i = 1; i <= instances; i++)); do  # all at once, then wait for each to listen
    "$bin" --port 0 --store "$store_url" --protect "${mode/#http/none}" --lock "$lock_url" --work-us "$work_us" \
      --instance "$mode-$i" >"$work/$mode-$i.log" 2>&1 &
    pids+=($!)
    instance_pids+=($!)
    started $!
  done
  for ((i = 1; i <= instances; i++)); do
    log="$work/$mode-$i.log"
    for _ in $(seq 1 500); do grep -q "listening on" "$log" && break; kill -0 "${instance_pids[i - 1]}" 2>/dev/null || break; sleep 0.02; done
    port="$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$log")"
    [[ -n "$port" ]] || { echo "run.sh: instance $mode-$i did not start: $(cat "$log")" >&2; return 1; }
    ports+=("$port")
  done
  local lb_port nginx_dir="$work/nginx-$mode"
  mkdir -p "$nginx_dir/logs" "$nginx_dir/tmp"
  for _ in 1 2 3 4 5; do
    lb_port="$(free_port)"
    {
      echo "worker_processes 1; pid $nginx_dir/nginx.pid; error_log $nginx_dir/logs/error.log warn;"
      echo "events { worker_connections 1024; }"
      echo "http { access_log off; client_body_temp_path $nginx_dir/tmp; proxy_temp_path $nginx_dir/tmp;"
      echo "  fastcgi_temp_path $nginx_dir/tmp; uwsgi_temp_path $nginx_dir/tmp; scgi_temp_path $nginx_dir/tmp;"
      echo "  upstream inventory {"
      for port in "${ports[@]}"; do echo "    server 127.0.0.1:$port;"; done
      # Kept connections to the instances (no more than their worker threads,
      # since each kept connection holds one).
      echo "    keepalive 64; }"
      echo "  server { listen 127.0.0.1:$lb_port; location / { proxy_pass http://inventory;"
      echo "    proxy_http_version 1.1; proxy_set_header Connection \"\"; } } }"
    } >"$nginx_dir/nginx.conf"
    "$nginx_bin" -p "$nginx_dir" -c "$nginx_dir/nginx.conf" -g "daemon off;" 2>"$nginx_dir/logs/start.log" &
    pids+=($!)
    started $!
    if wait_for "http://127.0.0.1:$lb_port/stats" 2>/dev/null; then break; fi
    lb_port=""  # the port was taken meanwhile: another one
  done
  [[ -n "$lb_port" ]] || { echo "run.sh: nginx did not start: $(cat "$nginx_dir/logs/start.log")" >&2; return 1; }

  http PUT "http://127.0.0.1:${ports[0]}/stock/$sku?count=$stock" >/dev/null
  # Warm up nginx's kept connections to the instances (not measured): a
  # burst of new connections overflows the instances' short listen backlog,
  # and a dropped connection attempt is retried only after a second.
  ab -k -q -n $((concurrency * 4)) -c "$concurrency" "http://127.0.0.1:$lb_port/stats" >/dev/null 2>&1 || true
  : >"$work/empty"  # an order has no body; ab sends a POST with -p
  # CPU seconds of each part, before and after the load (ab's own from `time`).
  local parts=("${instance_pids[@]/#/instance=}" "nginx=$(cat "$nginx_dir/nginx.pid")")
  [[ -n "$store_server" ]] && parts+=("store=$(cat "$work/$store_server.pid")")
  [[ -n "$lock_server" ]] && parts+=("locks=$(cat "$work/$lock_server.pid")")
  cpu_seconds "${parts[@]}" >"$work/$mode.cpu-before"
  local TIMEFORMAT="%U %S" status=0
  local load=(-p "$work/empty" -T application/json "http://127.0.0.1:$lb_port/orders/$sku")
  [[ "$mode" == http ]] && load=("http://127.0.0.1:$lb_port/stats")
  { time ab -k -q -s 30 -n "$requests" -c "$concurrency" "${load[@]}" >"$work/$mode.ab" 2>&1 || status=$?; } 2>"$work/$mode.ab-cpu"
  ((status == 0)) || { echo "run.sh: ab failed: $(tail -3 "$work/$mode.ab")" >&2; return 1; }
  cpu_seconds "${parts[@]}" >"$work/$mode.cpu-after"
  local left stats=()
  left="$(http GET "http://127.0.0.1:${ports[0]}/stock/$sku")"
  for port in "${ports[@]}"; do stats+=("$(http GET "http://127.0.0.1:$port/stats")"); done
  python3 - "$mode" "$stock" "$requests" "$left" "$work/$mode" "${stats[@]}" <<'PY' >>"$work/results.jsonl"
import collections, json, re, sys
mode, stock, requests, left, base = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
ab = open(base + ".ab").read()
stats = [json.loads(s) for s in sys.argv[6:]]
def grab(pattern, cast=float, default=None):
    m = re.search(pattern, ab, re.M)
    return cast(m.group(1)) if m else default
accepted = sum(s["accepted"] for s in stats)
# CPU used during the load, in cores (CPU seconds / wall seconds), per part.
def cpu_cores():
    wall = grab(r"^Time taken for tests:\s+([\d.]+)") or 1.0
    def read(name):
        parts = collections.defaultdict(list)
        for line in open(name):
            part, seconds = line.split()
            parts[part].append(float(seconds))
        return parts
    before, after = read(base + ".cpu-before"), read(base + ".cpu-after")
    used = {p: [a - b for a, b in zip(after[p], before[p])] for p in after}
    cores = {p: round(sum(v) / wall, 2) for p, v in used.items()}
    cores["instance_max"] = round(max(used["instance"]) / wall, 2)
    cores["ab"] = round(sum(map(float, open(base + ".ab-cpu").read().split()[-2:])) / wall, 2)
    return cores
# ab counts a reply whose length differs from the first one's as failed;
# only connection, receive and exception failures are failures here.
m = re.search(r"\(Connect: (\d+), Receive: (\d+), Length: \d+, Exceptions: (\d+)\)", ab)
failed = sum(map(int, m.groups())) if m else grab(r"^Failed requests:\s+(\d+)", int, 0)
print(json.dumps({
    "mode": mode, "stock": stock, "requests": requests,
    "requests_per_s": grab(r"^Requests per second:\s+([\d.]+)"),
    "p50_ms": grab(r"^\s+50%\s+(\d+)", int), "p99_ms": grab(r"^\s+99%\s+(\d+)", int),
    "failed": failed,
    "non_2xx": grab(r"^Non-2xx responses:\s+(\d+)", int, 0),
    "accepted": accepted, "stock_left": left, "oversold": accepted - (stock - left),
    "accepted_per_instance": [s["accepted"] for s in stats],
    "conflicts": sum(s["conflicts"] for s in stats),
    # Where the time went: the mean time an order spent inside a service
    # (lock wait included), and the share of the run some instance held a
    # dlock mutex (1.0: the lock was never free — orders are serialised on it).
    "service_ms": round(sum(s["order_us"] for s in stats) / max(1, accepted + sum(s["refused"] for s in stats)) / 1000, 2),
    "lock_busy": round(sum(s["held_us"] for s in stats) / 1e6 / (grab(r"^Time taken for tests:\s+([\d.]+)") or 1.0), 2),
    "cpu_cores": cpu_cores()}))
PY
  cleanup_mode
}
cleanup_mode() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  pids=()
}

: >"$work/results.jsonl"
for mode in $modes; do
  echo "run.sh: $mode — $instances instances behind nginx, $requests orders, $concurrency at a time..." >&2
  run_mode "$mode"
done

if ((json)); then cat "$work/results.jsonl"; exit 0; fi
store_line="$(sed -n 's/.*(protect=[^,]*, stock in \(.*\))$/\1/p' "$work"/*-1.log | head -1)"
python3 - "$work/results.jsonl" "$lock_url" "$stock" "$requests" "$concurrency" "$instances" "$store_line" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("\nflash sale: %s items, %s orders (%s at a time) through nginx to %s instances" % tuple(sys.argv[3:7]))
print("stock in %s; locks (dlock, segmented) on %s" % (sys.argv[7], sys.argv[2]))
print("%-10s %10s %6s %6s %8s %6s %8s  %-14s %6s %5s  %s" % ("protect", "requests/s", "p50 ms", "p99 ms", "accepted",
      "left", "oversold", "per instance", "svc ms", "lock", "CPU cores: instances (max one) nginx store locks ab / machine"))
for r in rows:
    c = r["cpu_cores"]
    print("%-10s %10.0f %6s %6s %8d %6d %8d  %-14s %6.2f %5.2f  %.2f (%.2f) %.2f %s %s %.2f / %.2f" % (
        r["mode"], r["requests_per_s"] or 0, r["p50_ms"], r["p99_ms"], r["accepted"], r["stock_left"], r["oversold"],
        "/".join(map(str, r["accepted_per_instance"])), r["service_ms"], r["lock_busy"], c["instance"], c["instance_max"], c["nginx"],
        "%.2f" % c["store"] if "store" in c else "-", "%.2f" % c["locks"] if "locks" in c else "-", c["ab"], c["machine"]))
print("oversold: orders accepted that the stock never lost (the same item sold twice).")
print("svc ms: mean time an order spent in a service (waiting for the lock included); lock: the share of the")
print("run a dlock mutex was held (summed over segments); CPU cores: CPU seconds each part used during the")
print("load / its wall time; machine: every process's, ours and others' (this machine has %d)."
      % __import__("os").cpu_count())
conflicts = [r for r in rows if r.get("conflicts")]
for r in conflicts:
    print("%s: %d writes lost to a concurrent one and were retried" % (r["mode"], r["conflicts"]))
PY
