#!/usr/bin/env bash
# The design documents' flash sale, as they ran it: several instances of the
# inventory service behind nginx, an HTTP load of orders for one product,
# and the stock at the end — once per protection mode.
#
#   examples/inventory-service/run.sh [--backend URL|redis] [--modes "none local dlock segmented atomic"]
#                                     [--stock N] [--requests N] [--concurrency N] [--instances N]
#                                     [--work-us N] [--json]
#
# Starts (on 127.0.0.1, free ports, everything in a temp dir): a Redis for the
# stock (scripts/redis-server.sh), per mode N instances of inventory_service
# and nginx in front of them (its own config: an upstream of the instances);
# sets the stock, fires the orders with ab (-k, concurrency C), and prints
# requests/s, latency p50/p99, orders accepted, stock left and oversold
# (orders accepted that the stock never lost: the same item sold twice).
# --backend: where the dlock modes keep their locks (default: file:// in the
# temp dir; "redis": the stock's Redis; any dlock URL). Everything it starts
# it stops, on success, failure or Ctrl-C.
#
# Needs: the built inventory_service (INVENTORY_BIN, else build/release or
# build/dev), nginx and ab (Debian nginx-light, apache2-utils), redis-server.
# INVENTORY_PIDS_FILE: if set, the pid of every process it starts is added
# there (its test checks that none outlives it).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"

backend="" modes="none local dlock segmented atomic" stock=5000 requests=5000 concurrency=100 instances=3
work_us=200 json=0
while (($#)); do
  case "$1" in
    --backend) backend="$2"; shift 2 ;;
    --modes) modes="$2"; shift 2 ;;
    --stock) stock="$2"; shift 2 ;;
    --requests) requests="$2"; shift 2 ;;
    --concurrency) concurrency="$2"; shift 2 ;;
    --instances) instances="$2"; shift 2 ;;
    --work-us) work_us="$2"; shift 2 ;;
    --json) json=1; shift ;;
    *) echo "run.sh: unknown argument '$1' (see the top of $0)" >&2; exit 64 ;;
  esac
done
for n in stock requests concurrency instances work_us; do
  [[ "${!n}" =~ ^[0-9]+$ ]] || { echo "run.sh: --${n//_/-} must be a whole number, not '${!n}'" >&2; exit 64; }
done
((instances >= 1 && concurrency >= 1 && requests >= 1)) || { echo "run.sh: --instances, --concurrency, --requests must be >= 1" >&2; exit 64; }

bin="${INVENTORY_BIN:-}"
for candidate in "$root/build/release/examples/inventory_service" "$root/build/dev/examples/inventory_service"; do
  [[ -z "$bin" && -x "$candidate" ]] && bin="$candidate"
done
[[ -x "$bin" ]] || { echo "run.sh: no inventory_service binary (build the example_inventory_service target, or set INVENTORY_BIN)" >&2; exit 64; }
for tool in nginx ab redis-server python3; do
  command -v "$tool" >/dev/null || [[ -x "/usr/sbin/$tool" ]] || { echo "run.sh: needs $tool (scripts/install-deps.sh)" >&2; exit 64; }
done
nginx_bin="$(command -v nginx || echo /usr/sbin/nginx)"

work="$(mktemp -d -t dlock-inventory-XXXXXX)"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
    kill -9 "$pid" 2>/dev/null || true
  done
  pids=()
  "$root/scripts/redis-server.sh" stop "$work/redis" >/dev/null 2>&1 || true
}
trap 'cleanup; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

started() { [[ -z "${INVENTORY_PIDS_FILE:-}" ]] || echo "$1" >>"$INVENTORY_PIDS_FILE"; }
"$root/scripts/redis-server.sh" start "$work/redis" >&2
started "$(cat "$work/redis/redis.pid")"
redis_url="$(cat "$work/redis/url")"
redis_addr="${redis_url#redis://}"
case "$backend" in
  "") mkdir -m 700 "$work/locks"; lock_url="file://$work/locks/d" ;;
  redis) lock_url="$redis_url/0?prefix=inventory-locks:" ;;
  *) lock_url="$backend" ;;
esac

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
http() {  # METHOD URL -> body (exit 1 on an HTTP error)
  python3 - "$1" "$2" <<'PY'
import sys, urllib.request
req = urllib.request.Request(sys.argv[2], method=sys.argv[1], data=b"" if sys.argv[1] != "GET" else None)
print(urllib.request.urlopen(req, timeout=10).read().decode())
PY
}
wait_for() {  # URL: until it answers, at most 10 s
  for _ in $(seq 1 200); do http GET "$1" >/dev/null 2>&1 && return 0; sleep 0.05; done
  echo "run.sh: $1 never answered" >&2; return 1
}

# One mode: instances + nginx, the stock set, the load, the outcome.
run_mode() {
  local mode="$1" ports=() i port log
  for ((i = 1; i <= instances; i++)); do
    log="$work/$mode-$i.log"
    "$bin" --port 0 --redis "$redis_addr" --protect "$mode" --lock "$lock_url" --work-us "$work_us" \
      --instance "$mode-$i" >"$log" 2>&1 &
    pids+=($!)
    started $!
    for _ in $(seq 1 200); do grep -q "listening on" "$log" && break; sleep 0.05; done
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

  http PUT "http://127.0.0.1:${ports[0]}/stock/sku-1001?count=$stock" >/dev/null
  # Warm up nginx's kept connections to the instances (not measured): a
  # burst of new connections overflows the instances' short listen backlog,
  # and a dropped connection attempt is retried only after a second.
  ab -k -q -n $((concurrency * 4)) -c "$concurrency" "http://127.0.0.1:$lb_port/stats" >/dev/null 2>&1 || true
  : >"$work/empty"  # an order has no body; ab sends a POST with -p
  ab -k -q -s 30 -n "$requests" -c "$concurrency" -p "$work/empty" -T application/json \
    "http://127.0.0.1:$lb_port/orders/sku-1001" >"$work/$mode.ab" 2>&1 \
    || { echo "run.sh: ab failed: $(tail -3 "$work/$mode.ab")" >&2; return 1; }
  local left stats=()
  left="$(http GET "http://127.0.0.1:${ports[0]}/stock/sku-1001")"
  for port in "${ports[@]}"; do stats+=("$(http GET "http://127.0.0.1:$port/stats")"); done
  python3 - "$mode" "$stock" "$requests" "$left" "$work/$mode.ab" "${stats[@]}" <<'PY' >>"$work/results.jsonl"
import json, re, sys
mode, stock, requests, left, ab = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), open(sys.argv[5]).read()
stats = [json.loads(s) for s in sys.argv[6:]]
def grab(pattern, cast=float, default=None):
    m = re.search(pattern, ab, re.M)
    return cast(m.group(1)) if m else default
accepted = sum(s["accepted"] for s in stats)
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
    "accepted_per_instance": [s["accepted"] for s in stats]}))
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
python3 - "$work/results.jsonl" "$lock_url" "$stock" "$requests" "$concurrency" "$instances" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("\nflash sale: %s items, %s orders (%s at a time) through nginx to %s instances; stock in Redis; locks on %s"
      % (sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6], sys.argv[2]))
print("%-10s %10s %8s %8s %9s %11s %9s  %s" % ("protect", "requests/s", "p50 ms", "p99 ms", "accepted", "stock left",
                                                "oversold", "per instance"))
for r in rows:
    print("%-10s %10.0f %8s %8s %9d %11d %9d  %s" % (r["mode"], r["requests_per_s"] or 0, r["p50_ms"], r["p99_ms"],
          r["accepted"], r["stock_left"], r["oversold"], "/".join(map(str, r["accepted_per_instance"]))))
print("oversold: orders accepted that the stock never lost (the same item sold twice).")
PY
