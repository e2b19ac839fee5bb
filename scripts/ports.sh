# ports.sh — sourced by the server scripts: picking ports on 127.0.0.1.
# A port free a moment ago may be taken by the time a server binds it: the
# scripts retry their start with a fresh pick.

# free_ports N: N distinct ports that were free a moment ago, one per line.
free_ports() {
  python3 - "$1" <<'PY'
import socket, sys
held = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    held.append(s)  # keep it bound so the next pick differs
for s in held:
    print(s.getsockname()[1])
PY
}

free_port() { free_ports 1; }
