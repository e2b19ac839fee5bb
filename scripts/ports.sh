# ports.sh — sourced by the server scripts: picking ports on 127.0.0.1,
# waiting for a Redis server to answer, and stopping the processes they started.
# A port free a moment ago may be taken by the time a server binds it: the
# scripts retry their start with a fresh pick.

# free_ports N: N distinct ports that were free a moment ago, one per line.
# They are picked outside the kernel's ephemeral range (where it picks the
# local port of every outgoing connection): a server stopped and started
# again on its port (the fault tests) would otherwise find it taken, now
# and then, by some process's connection made meanwhile.
free_ports() {
  python3 - "$1" <<'PY'
import random, socket, sys
try:
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        lo, hi = (int(x) for x in f.read().split())
except OSError:
    lo, hi = 32768, 60999
pool = [p for p in range(10000, 65536) if not lo <= p <= hi]
random.shuffle(pool)
held = []
for _ in range(int(sys.argv[1])):
    while True:
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", pool.pop() if pool else 0))
            break
        except OSError:
            s.close()  # taken: the next one
    held.append(s)  # keep it bound so the next pick differs
for s in held:
    print(s.getsockname()[1])
PY
}

free_port() { free_ports 1; }

# wait_for_pong PORT [REDIS-CLI ARGS...]: waits up to 5 s until the redis-server
# or sentinel on 127.0.0.1:PORT answers PING; 1 if it never does.
wait_for_pong() {
  local port="$1"
  shift
  for _ in $(seq 1 100); do
    if timeout 2 redis-cli -h 127.0.0.1 -p "$port" "$@" ping 2>/dev/null | grep -q PONG; then return 0; fi
    sleep 0.05
  done
  return 1
}

# stop_pid_files FILE...: stops the processes whose pids the FILEs hold (all
# at once: each may take a second or two to exit on SIGTERM; what is left
# after 2 s is killed) and removes the files. Missing files are skipped.
stop_pid_files() {
  local f pids=()
  for f in "$@"; do
    [[ -e "$f" ]] || continue
    pids+=("$(cat "$f")")
    rm -f "$f"
  done
  ((${#pids[@]})) || return 0
  kill -CONT "${pids[@]}" 2>/dev/null || true
  kill "${pids[@]}" 2>/dev/null || true
  local p alive
  for _ in $(seq 1 40); do
    alive=0
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    ((alive)) || break
    sleep 0.05
  done
  kill -9 "${pids[@]}" 2>/dev/null || true
  return 0
}
