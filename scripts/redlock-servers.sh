#!/usr/bin/env bash
# Starts or stops N independent throw-away redis-servers on 127.0.0.1 (a
# quorum's nodes) for tests and benchmarks, each through scripts/redis-server.sh
# (free port, data in its own dir, no persistence).
#
#   scripts/redlock-servers.sh start DIR [N]   starts N (default 5) servers in DIR/node1..N and
#                                              writes DIR/url (redlock://127.0.0.1:P1,...,127.0.0.1:PN)
#   scripts/redlock-servers.sh stop DIR        stops every server started in DIR
#
# One node is stopped, paused or restarted through its own dir:
#   kill -STOP "$(cat DIR/node3/redis.pid)";  scripts/redis-server.sh restart DIR/node3
set -euo pipefail

cmd="${1:-}"
dir="${2:-}"
count="${3:-5}"
[[ -n "$cmd" && -n "$dir" ]] || { echo "usage: $0 start|stop DIR [N]" >&2; exit 64; }
server="$(dirname "$0")/redis-server.sh"

case "$cmd" in
  start)
    mkdir -p "$dir"
    hosts=""
    for i in $(seq 1 "$count"); do
      if ! "$server" start "$dir/node$i" >/dev/null; then
        echo "redlock-servers.sh: node $i did not start" >&2
        "$0" stop "$dir"
        exit 1
      fi
      hosts+="${hosts:+,}$(sed 's|^redis://||' "$dir/node$i/url")"
    done
    echo "redlock://$hosts" > "$dir/url"
    echo "redlock-servers.sh: $count nodes serving: redlock://$hosts"
    ;;
  stop)
    # In parallel: each takes about 2 s to see its server gone.
    for node in "$dir"/node*; do
      if [[ -d "$node" ]]; then "$server" stop "$node" & fi
    done
    wait
    rm -f "$dir/url"
    ;;
  *)
    echo "usage: $0 start|stop DIR [N]" >&2
    exit 64
    ;;
esac
