#!/usr/bin/env bash
# Starts or stops a throw-away etcd (one member or a cluster) on 127.0.0.1 for tests and
# benchmarks.
#
#   scripts/etcd-server.sh start DIR [NODES]   NODES members (default 1; 3 = a cluster), each on
#                                       free client and peer ports with its data, log and pid in
#                                       DIR/node<I> (I = 1..NODES); waits until every member
#                                       answers /health, writes DIR/url
#                                       (etcd://127.0.0.1:C1[,127.0.0.1:C2,...]) and DIR/endpoints
#                                       (the same without etcd://, for etcdctl --endpoints)
#   scripts/etcd-server.sh stop DIR              stops every member (SIGTERM, SIGKILL after 10 s)
#   scripts/etcd-server.sh kill DIR [I]          SIGKILLs member I (default 1): a crash; returns once it has exited
#   scripts/etcd-server.sh pause DIR [I]         SIGSTOP (a member that hangs)
#   scripts/etcd-server.sh resume DIR [I]        SIGCONT
#   scripts/etcd-server.sh start-node DIR I      starts member I again on its old ports and data
#   scripts/etcd-server.sh leader DIR            prints the index I of the member that leads
#
# Environment: ETCD_EXTRA_ARGS adds member arguments (e.g. "--auto-compaction-retention 1").
# ETCD_TLS=CADIR serves clients over TLS only (https://), with the certificates scripts/test-ca.sh
# makes in CADIR (made there if missing): --cert-file/--key-file server.pem/.key; DIR/url is then
# etcds://... (a client adds ?ca=CADIR/ca.pem). ETCD_TLS_CLIENT_AUTH=1 with it adds
# --trusted-ca-file ca.pem --client-cert-auth: clients need a certificate signed by that CA
# (client.pem/.key).
# The members talk to each other in plain text either way.
#
# Never assumes a port is free (retries with fresh ports if one was taken meanwhile) and signals
# only the processes it started: a pid is used only while its command line still names that
# member's data directory. Members run in their own session (setsid) with no terminal or pipe
# of the caller, so a CTest fixture that started them can exit and the members stay up.
set -euo pipefail

cmd="${1:-}"
dir="${2:-}"
[[ -n "$cmd" && -n "$dir" ]] || { echo "usage: $0 start|stop|kill|pause|resume|start-node|leader DIR [I]" >&2; exit 64; }

source "$(dirname "$0")/ports.sh"

# pid_of I: the pid of member I if it is still that member (its command line names its data dir).
pid_of() {
  local node="$dir/node$1" pid
  [[ -f "$node/etcd.pid" ]] || return 1
  pid="$(cat "$node/etcd.pid")"
  grep -qsF -- "$node/data" "/proc/$pid/cmdline" || return 1
  echo "$pid"
}

# The TLS settings of DIR's members (written at start): CADIR and 0/1 for client auth; empty: none.
tls_dir() { if [[ -f "$dir/tls" ]]; then head -1 "$dir/tls"; fi; }
tls_client_auth() { [[ -f "$dir/tls" ]] && sed -n 2p "$dir/tls" | grep -qx 1; }
scheme() { [[ -n "$(tls_dir)" ]] && echo https || echo http; }

# healthy PORT: 0 once the member on PORT reports itself healthy.
healthy() {
  local ca opts=()
  ca="$(tls_dir)"
  if [[ -n "$ca" ]]; then
    opts=(--cacert "$ca/ca.pem")
    tls_client_auth && opts+=(--cert "$ca/client.pem" --key "$ca/client.key")
  fi
  timeout 2 curl -fsS "${opts[@]}" "$(scheme)://127.0.0.1:$1/health" 2>/dev/null | grep -q '"health":"true"'
}

# etcdctl's flags for DIR's members.
ctl_tls() {
  local ca
  ca="$(tls_dir)"
  [[ -n "$ca" ]] || return 0
  echo "--cacert $ca/ca.pem"
  tls_client_auth && echo "--cert $ca/client.pem --key $ca/client.key"
  return 0
}

# launch I CLUSTER STATE: starts member I with the ports in DIR/node<I>/ports.
launch() {
  local i="$1" cluster="$2" state="$3" node="$dir/node$1" client peer ca tls=()
  read -r client peer < "$node/ports"
  ca="$(tls_dir)"
  if [[ -n "$ca" ]]; then
    tls=(--cert-file "$ca/server.pem" --key-file "$ca/server.key")
    # etcd 3.4 asks every client for a certificate once it has a trusted CA.
    tls_client_auth && tls+=(--trusted-ca-file "$ca/ca.pem" --client-cert-auth)
  fi
  # shellcheck disable=SC2086
  setsid etcd --name "n$i" --data-dir "$node/data" "${tls[@]}" \
    --listen-client-urls "$(scheme)://127.0.0.1:$client" --advertise-client-urls "$(scheme)://127.0.0.1:$client" \
    --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
    --initial-cluster "$cluster" --initial-cluster-state "$state" --initial-cluster-token "dlock-$$" \
    --logger zap --log-level warn ${ETCD_EXTRA_ARGS:-} \
    </dev/null >>"$node/etcd.log" 2>&1 &
  echo $! > "$node/etcd.pid"
}

# wait_healthy I...: 0 once every given member is healthy (bounded: 30 s).
wait_healthy() {
  local deadline=$((SECONDS + 30)) i client peer
  for i in "$@"; do
    read -r client peer < "$dir/node$i/ports"
    until healthy "$client"; do
      pid_of "$i" >/dev/null || return 1
      ((SECONDS < deadline)) || return 1
      sleep 0.1
    done
  done
}

signal_node() {
  local pid
  pid="$(pid_of "$2")" || { echo "etcd-server.sh: member $2 is not running" >&2; return 1; }
  kill "-$1" "$pid"
}

stop_node() {
  local pid
  pid="$(pid_of "$1")" || { rm -f "$dir/node$1/etcd.pid"; return 0; }
  kill -CONT "$pid" 2>/dev/null || true
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$dir/node$1/etcd.pid"
}

nodes() { ls -d "$dir"/node* 2>/dev/null | sed 's|.*/node||' | sort -n; }

case "$cmd" in
  start)
    count="${3:-1}"
    mkdir -p "$dir"
    rm -f "$dir/tls"
    if [[ -n "${ETCD_TLS:-}" ]]; then
      "$(dirname "$0")/test-ca.sh" "$ETCD_TLS"
      ETCD_TLS="$(cd "$ETCD_TLS" && pwd)"
      printf '%s\n%s\n' "$ETCD_TLS" "${ETCD_TLS_CLIENT_AUTH:-0}" > "$dir/tls"
    fi
    for attempt in 1 2 3 4 5; do
      mapfile -t ports < <(free_ports $((2 * count)))
      cluster="" url="" endpoints=""
      for ((i = 1; i <= count; i++)); do
        node="$dir/node$i"
        rm -rf "$node"
        mkdir -p "$node"
        echo "${ports[2 * i - 2]} ${ports[2 * i - 1]}" > "$node/ports"
        cluster+="${cluster:+,}n$i=http://127.0.0.1:${ports[2 * i - 1]}"
        endpoints+="${endpoints:+,}127.0.0.1:${ports[2 * i - 2]}"
      done
      for ((i = 1; i <= count; i++)); do launch "$i" "$cluster" new; done
      if wait_healthy $(seq 1 "$count"); then
        echo "$cluster" > "$dir/cluster"
        echo "$endpoints" > "$dir/endpoints"
        echo "$([[ -n "$(tls_dir)" ]] && echo etcds || echo etcd)://$endpoints" > "$dir/url"
        echo "etcd-server.sh: serving on $endpoints"
        exit 0
      fi
      # A port taken meanwhile, or a failure: stop what we started and retry.
      for i in $(nodes); do stop_node "$i"; done
    done
    echo "etcd-server.sh: could not start etcd (see $dir/node*/etcd.log)" >&2
    exit 1
    ;;
  stop)
    for i in $(nodes); do stop_node "$i"; done
    rm -f "$dir/url" "$dir/endpoints"
    ;;
  kill)
    # Returns once the member has exited (its ports and data are free), so that start-node can
    # follow at once.
    pid="$(pid_of "${3:-1}")" || { echo "etcd-server.sh: member ${3:-1} is not running" >&2; exit 1; }
    kill -KILL "$pid"
    for _ in $(seq 1 500); do
      state="$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null || true)"
      [[ -z "$state" || "$state" == Z ]] && exit 0
      sleep 0.02
    done
    echo "etcd-server.sh: member ${3:-1} (pid $pid) still runs 10 s after SIGKILL" >&2
    exit 1
    ;;
  pause) signal_node STOP "${3:-1}" ;;
  resume) signal_node CONT "${3:-1}" ;;
  start-node)
    i="${3:?member index}"
    pid_of "$i" >/dev/null && { echo "etcd-server.sh: member $i is running" >&2; exit 1; }
    launch "$i" "$(cat "$dir/cluster")" existing
    wait_healthy "$i" || {
      echo "etcd-server.sh: member $i did not come back; the end of its log:" >&2
      tail -5 "$dir/node$i/etcd.log" >&2
      exit 1
    }
    ;;
  leader)
    for i in $(nodes); do
      read -r client peer < "$dir/node$i/ports"
      # shellcheck disable=SC2046
      if timeout 2 etcdctl --endpoints "127.0.0.1:$client" $(ctl_tls) --command-timeout 1s endpoint status -w json 2>/dev/null |
        python3 -c 'import json,sys; s=json.load(sys.stdin)[0]["Status"]; sys.exit(0 if s["leader"]==s["header"]["member_id"] else 1)'; then
        echo "$i"
        exit 0
      fi
    done
    exit 1
    ;;
  *)
    echo "usage: $0 start|stop|kill|pause|resume|start-node|leader DIR [I]" >&2
    exit 64
    ;;
esac
