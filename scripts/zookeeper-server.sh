#!/usr/bin/env bash
# Starts or stops a throw-away ZooKeeper (one server or an ensemble) on 127.0.0.1 for
# tests and benchmarks.
#
#   scripts/zookeeper-server.sh start DIR [NODES]  NODES servers (default 1; 3 = an ensemble) on
#                                       free client/quorum/election ports, each with its
#                                       zoo.cfg, data, log and pid in DIR/node<I> (I = 1..NODES);
#                                       waits until every one answers `srvr` with a Mode
#                                       (standalone, leader or follower), writes DIR/url
#                                       (zk://127.0.0.1:P1[,127.0.0.1:P2,...]) and DIR/connect
#                                       (the same without zk://, for Curator and kazoo)
#   scripts/zookeeper-server.sh stop DIR            stops every node (SIGTERM, SIGKILL after 15 s)
#   scripts/zookeeper-server.sh leader DIR          prints the index I of the node that leads
#                                       (1 for a single server); exit 1 if none does
#   scripts/zookeeper-server.sh kill-node DIR I     SIGKILLs node I (a crash: no clean shutdown)
#   scripts/zookeeper-server.sh start-node DIR I    starts node I again on its old ports and data;
#                                       waits until it serves (exit 1 if it cannot within the
#                                       bound, e.g. without a quorum; it is left running then)
#   scripts/zookeeper-server.sh pause-node DIR I    SIGSTOP (a node that hangs: a GC pause, a VM stall)
#   scripts/zookeeper-server.sh resume-node DIR I   SIGCONT
#
# Environment:
#   ZK_TICK_MS        tickTime (default 500). Session timeouts ZK_MIN_SESSION_MS..ZK_MAX_SESSION_MS
#                     (default 1000..10000) are granted as asked; initLimit/syncLimit are 20/10 ticks
#   ZK_HEAP           the JVM's -Xmx (default 128m)
#   ZK_EXTRA_CFG      lines added to every zoo.cfg (e.g. "forceSync=no", separated by newlines)
#   ZK_START_TIMEOUT  seconds to wait for every node to serve (default 60)
#   JAVA              the java binary (default: java)
#
# Measured here (2 shared, noisy cores, OpenJDK 17, ZooKeeper 3.8.0; `start` until it returns):
# one server 1.3 to 2.3 s, a 3-node ensemble 2.8 to 3.0 s (3 JVMs start at once on 2 cores,
# then elect); `stop` 0.4 to 0.5 s for either; `start-node` of a killed leader rejoining as a
# follower about 1 s.
#
# Never assumes a port is free (retries with fresh ports if one was taken meanwhile) and signals
# only the processes it started: a pid is used only while its command line still names that
# node's zoo.cfg. The servers run in their own session (setsid), with no terminal or pipe of the
# caller, so a CTest fixture that started them can exit and the servers stay up.
set -euo pipefail

cmd="${1:-}"
dir="${2:-}"
usage="usage: $0 start DIR [NODES] | stop DIR | leader DIR | kill-node|start-node|pause-node|resume-node DIR I"
[[ -n "$cmd" && -n "$dir" ]] || { echo "$usage" >&2; exit 64; }
tick="${ZK_TICK_MS:-500}"
min_session="${ZK_MIN_SESSION_MS:-1000}"
max_session="${ZK_MAX_SESSION_MS:-10000}"
start_timeout="${ZK_START_TIMEOUT:-60}"
java="${JAVA:-java}"
for n in "$tick" "$min_session" "$max_session" "$start_timeout"; do
  [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "zookeeper-server.sh: ZK_TICK_MS, ZK_*_SESSION_MS, ZK_START_TIMEOUT must be whole numbers" >&2; exit 64; }
done

source "$(dirname "$0")/ports.sh"

classpath() {
  local cp="${ZK_JAR:-/usr/share/java/zookeeper.jar}"
  # Without an slf4j binding the server runs but logs nothing.
  if [[ -f /usr/share/java/slf4j-simple.jar ]]; then cp="$cp:/usr/share/java/slf4j-simple.jar"; fi
  echo "$cp"
}

node_count() { cat "$dir/nodes" 2>/dev/null || echo 0; }
client_port() { sed -n 's/^clientPort=//p' "$dir/node$1/zoo.cfg"; }

# node_pid I: the pid of node I if that process is alive and is ours; nothing otherwise.
node_pid() {
  local f="$dir/node$1/zk.pid" pid state
  [[ -f "$f" ]] || return 0
  pid="$(cat "$f")"
  [[ "$pid" =~ ^[0-9]+$ && -r "/proc/$pid/cmdline" ]] || return 0
  # A zombie (nobody reaped it yet) has exited.
  state="$(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' "/proc/$pid/status" 2>/dev/null || true)"
  [[ "$state" != "Z" && -n "$state" ]] || return 0
  # The pid may have been reused by now: only a process running this node's zoo.cfg is ours.
  tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep -qxF "$dir/node$1/zoo.cfg" || return 0
  echo "$pid"
}

# mode I: "standalone", "leader" or "follower" once node I serves; nothing before.
mode() {
  local port
  port="$(client_port "$1")"
  # A 4lw probe can hang forever without the timeout.
  # shellcheck disable=SC2016  # $0 is expanded by the inner bash
  timeout 1 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$0" && echo srvr >&3 && cat <&3' "$port" 2>/dev/null \
    | sed -n 's/^Mode: \([a-z]*\).*/\1/p' || true
}

# write_cfg I PORTS...: node I's zoo.cfg; PORTS are client,quorum,election for every node in turn.
write_cfg() {
  local i="$1" nodes=$(( ($# - 1) / 3 )) d="$dir/node$1" j
  shift
  local ports=("$@")
  mkdir -p "$d/data"
  {
    echo "tickTime=$tick"
    echo "initLimit=20"
    echo "syncLimit=10"
    echo "dataDir=$d/data"
    echo "clientPort=${ports[$(( (i - 1) * 3 ))]}"
    echo "clientPortAddress=127.0.0.1"
    echo "minSessionTimeout=$min_session"
    echo "maxSessionTimeout=$max_session"
    echo "maxClientCnxns=0"  # benchmarks open more than the default 60 connections from 127.0.0.1
    echo "admin.enableServer=false"
    echo "4lw.commands.whitelist=srvr,ruok,mntr,stat,cons"
    if ((nodes > 1)); then
      for ((j = 1; j <= nodes; j++)); do
        echo "server.$j=127.0.0.1:${ports[$(( (j - 1) * 3 + 1 ))]}:${ports[$(( (j - 1) * 3 + 2 ))]}"
      done
    fi
    if [[ -n "${ZK_EXTRA_CFG:-}" ]]; then printf '%s\n' "$ZK_EXTRA_CFG"; fi
  } >"$d/zoo.cfg"
  if ((nodes > 1)); then echo "$i" >"$d/data/myid"; fi
}

# launch I: starts node I from its zoo.cfg, detached; its pid goes to node<I>/zk.pid.
launch() {
  local d="$dir/node$1"
  rm -f "$d/zk.pid"
  echo "--- zookeeper-server.sh: starting node $1 at $(date '+%F %T')" >>"$d/zk.log"
  # setsid: a session of its own, so the caller's process group and terminal signals miss it;
  # the shell writes its own pid, then becomes java (exec), so the pid is the JVM's.
  # shellcheck disable=SC2016  # expanded by the inner bash
  setsid bash -c 'echo $$ >"$1/zk.pid"; shift; exec "$@"' launch "$d" \
    "$java" -Xms32m -Xmx"${ZK_HEAP:-128m}" -XX:+UseSerialGC -Djava.net.preferIPv4Stack=true \
    -Dorg.slf4j.simpleLogger.showDateTime=true \
    -Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS -Dzookeeper.admin.enableServer=false \
    -cp "$(classpath)" org.apache.zookeeper.server.quorum.QuorumPeerMain "$d/zoo.cfg" \
    </dev/null >>"$d/zk.log" 2>&1 &
  for _ in $(seq 1 100); do [[ -s "$d/zk.pid" ]] && return 0; sleep 0.01; done
  return 1
}

# wait_serving I...: 0 once every node I answers with a Mode; 1 if one died or the time is up.
wait_serving() {
  local deadline=$((SECONDS + start_timeout)) i waiting
  while ((SECONDS < deadline)); do
    waiting=0
    for i in "$@"; do
      [[ -n "$(node_pid "$i")" ]] || return 1  # exited: e.g. a port was taken meanwhile
      [[ -n "$(mode "$i")" ]] || waiting=1
    done
    ((waiting)) || return 0
    sleep 0.1
  done
  return 1
}

# stop_nodes I...: SIGTERM (after SIGCONT, in case one is paused), then SIGKILL after 15 s.
stop_nodes() {
  local i pid
  for i in "$@"; do
    pid="$(node_pid "$i")"
    if [[ -n "$pid" ]]; then
      kill -CONT "$pid" 2>/dev/null || true
      kill -TERM "$pid" 2>/dev/null || true
    fi
  done
  for _ in $(seq 1 150); do  # the JVM needs over a second to shut down
    local alive=0
    for i in "$@"; do [[ -n "$(node_pid "$i")" ]] && alive=1; done
    ((alive)) || break
    sleep 0.1
  done
  for i in "$@"; do
    pid="$(node_pid "$i")"
    if [[ -n "$pid" ]]; then
      echo "zookeeper-server.sh: node $i (pid $pid) ignored SIGTERM for 15 s: SIGKILL" >&2
      kill -KILL "$pid" 2>/dev/null || true
      for _ in $(seq 1 50); do [[ -n "$(node_pid "$i")" ]] || break; sleep 0.05; done
    fi
    rm -f "$dir/node$i/zk.pid"
  done
}

elapsed_since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }

all_nodes() { seq 1 "$(node_count)"; }
stop_all() {
  local ids
  mapfile -t ids < <(all_nodes)
  if ((${#ids[@]})); then stop_nodes "${ids[@]}"; fi
}

node_arg() {
  local i="${1:-}"
  [[ "$i" =~ ^[1-9][0-9]*$ && -f "$dir/node$i/zoo.cfg" ]] || {
    echo "zookeeper-server.sh: no node '$i' in $dir (nodes: 1..$(node_count))" >&2; exit 64; }
  echo "$i"
}

case "$cmd" in
  start)
    nodes="${3:-1}"
    [[ "$nodes" =~ ^[1-9]$ ]] || { echo "zookeeper-server.sh: NODES must be 1..9" >&2; exit 64; }
    command -v "$java" >/dev/null || { echo "zookeeper-server.sh: no java (set JAVA)" >&2; exit 64; }
    [[ -f "${ZK_JAR:-/usr/share/java/zookeeper.jar}" ]] || {
      echo "zookeeper-server.sh: no ${ZK_JAR:-/usr/share/java/zookeeper.jar} (Debian: zookeeper)" >&2; exit 64; }
    mkdir -p "$dir"
    dir="$(cd "$dir" && pwd)"
    stop_all  # a previous run in the same DIR
    began=$EPOCHREALTIME
    for attempt in 1 2 3; do
      mapfile -t ports < <(free_ports $((nodes * 3)))
      echo "$nodes" >"$dir/nodes"
      for ((i = 1; i <= nodes; i++)); do
        rm -rf "$dir/node$i/data"
        write_cfg "$i" "${ports[@]}"
        launch "$i" || true
      done
      if wait_serving $(seq 1 "$nodes"); then
        hosts=""
        for ((i = 1; i <= nodes; i++)); do hosts+="${hosts:+,}127.0.0.1:$(client_port "$i")"; done
        echo "$hosts" >"$dir/connect"
        echo "zk://$hosts" >"$dir/url"
        echo "zookeeper-server.sh: $nodes node(s) serving on $hosts after $(elapsed_since "$began") s" \
             "(pids $(for i in $(seq 1 "$nodes"); do printf '%s ' "$(node_pid "$i")"; done | sed 's/ $//'))"
        exit 0
      fi
      # Lost a port to someone else, or too slow: stop what we started and retry on fresh ports.
      echo "zookeeper-server.sh: attempt $attempt failed (see $dir/node*/zk.log), retrying" >&2
      stop_nodes $(seq 1 "$nodes")
    done
    echo "zookeeper-server.sh: could not start $nodes node(s) (see $dir/node*/zk.log)" >&2
    exit 1
    ;;
  stop)
    [[ -d "$dir" ]] || exit 0
    stop_all
    rm -f "$dir/url" "$dir/connect"
    ;;
  leader)
    for i in $(all_nodes); do
      case "$(mode "$i")" in leader|standalone) echo "$i"; exit 0 ;; esac
    done
    echo "zookeeper-server.sh: no node leads now" >&2
    exit 1
    ;;
  kill-node)
    i="$(node_arg "${3:-}")"
    pid="$(node_pid "$i")"
    [[ -n "$pid" ]] || { echo "zookeeper-server.sh: node $i is not running" >&2; exit 1; }
    kill -KILL "$pid"
    for _ in $(seq 1 100); do [[ -n "$(node_pid "$i")" ]] || break; sleep 0.02; done
    rm -f "$dir/node$i/zk.pid"
    echo "zookeeper-server.sh: killed node $i (pid $pid)"
    ;;
  start-node)
    i="$(node_arg "${3:-}")"
    [[ -z "$(node_pid "$i")" ]] || { echo "zookeeper-server.sh: node $i is already running" >&2; exit 1; }
    began=$SECONDS
    # Its ports may still be in TIME_WAIT or taken for a moment: the JVM exits if it cannot
    # bind, so relaunch for a while.
    while ((SECONDS - began < start_timeout)); do
      launch "$i" || true
      if wait_serving "$i"; then
        echo "zookeeper-server.sh: node $i serving again on 127.0.0.1:$(client_port "$i") as $(mode "$i") (pid $(node_pid "$i"))"
        exit 0
      fi
      [[ -n "$(node_pid "$i")" ]] && break  # alive but not serving: no quorum, most likely
      sleep 0.2
    done
    echo "zookeeper-server.sh: node $i does not serve after $((SECONDS - began)) s (no quorum?); it is left running (see $dir/node$i/zk.log)" >&2
    exit 1
    ;;
  pause-node|resume-node)
    i="$(node_arg "${3:-}")"
    pid="$(node_pid "$i")"
    [[ -n "$pid" ]] || { echo "zookeeper-server.sh: node $i is not running" >&2; exit 1; }
    if [[ "$cmd" == pause-node ]]; then kill -STOP "$pid"; else kill -CONT "$pid"; fi
    ;;
  *)
    echo "$usage" >&2
    exit 64
    ;;
esac
