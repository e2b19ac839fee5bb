#!/usr/bin/env bash
# bench/mysql.sh — dlock's mysql:// (table mode and mode=session) against MariaDB's own limit and tooz,
# in one run.
#
#   bench/mysql.sh [DIR]
#
# Starts a throw-away MariaDB on 127.0.0.1 with scripts/mariadb-server.sh in DIR (default: a temp
# dir; DIR must not hold a server already) and stops it on exit, also on a failure or Ctrl-C.
# Then, against it:
#   (a) the raw limit, dlock_bench_mysql_raw on one kept connection: SELECT 1 round trips,
#       GET_LOCK+RELEASE_LOCK pairs, dlock's session-mode lock+unlock texts, and dlock's table-mode
#       lock+unlock statements in dlock's three multi-statement batches with no decision logic — run
#       before and after (b), since the machine's load moves it;
#   (b) dlock bench --workload uncontended in table mode, its ratio to (a)'s table pairs (the mean of
#       the two passes; target >= 0.7); the same in mode=session against (a)'s GET_LOCK pairs
#       (target >= 0.9), and against its own statements sent raw;
#   (c) dlock bench --workload contended, 4 processes x 1 thread and x 2 on one lock, with the
#       default options, with --fair and in mode=session: ops/s, acquire p50/p99, owner changes/s,
#       wake-ups per owner change, Jain, lost updates (must be 0);
#   (d) bench/peers/tooz_peer.py --url: tooz's mysql driver (GET_LOCK(name, 0) on a new connection
#       per acquisition, retried after 1 s), the same 4 x 1 and 4 x 2; dlock's ratio to it (target >= 2);
#   (e) a summary table (bench/sql_summary.py).
# Every JSON line gets "who" (raw, dlock or tooz), "run_started" (UTC) and "server_statements" (the
# server's Questions counter over that measurement: statements clients sent, each statement of a
# multi-statement text counted, if the mariadb client is there); passwords in it are replaced by ***.
# Figures are only comparable within one run (the machines are noisy). About 21 x BENCH_SECONDS.
#
# Environment:
#   DLOCK_BIN      the dlock binary (default: build/release, then build/dev, then dlock on PATH)
#   MYSQL_RAW_BIN  dlock_bench_mysql_raw (default: build/release/bench, then build/dev/bench)
#   BENCH_SECONDS  seconds per measurement (default 3)
#   BENCH_JSON     if set, a file the JSON lines are also written to
#   PYTHON         a python3 that can `import tooz.drivers.mysql` (default: python3, else
#                  /usr/bin/python3; Debian: python3-tooz python3-pymysql)
#
# Exit status: 0; 1 if a measurement failed or mutual exclusion failed (lost updates);
# 64 on bad usage or a missing tool. No tooz is not a failure: its rows are skipped.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
seconds="${BENCH_SECONDS:-3}"
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || { echo "mysql.sh: BENCH_SECONDS must be a whole number of seconds" >&2; exit 64; }
limit=$((seconds * 4 + 60))  # per measurement, whatever happens
server_dir="${1:-}"
if [[ -n "$server_dir" ]]; then
  [[ "$server_dir" == /* ]] || { echo "mysql.sh: DIR must be an absolute path" >&2; exit 64; }
  [[ ! -e "$server_dir/url" ]] || { echo "mysql.sh: $server_dir already holds a server (its url file)" >&2; exit 64; }
fi

# shellcheck source=bench/lib.sh
source "$here/lib.sh"
dlock_bin="${DLOCK_BIN:-$(first_executable "$root/build/release/tools/dlock/dlock" "$root/build/dev/tools/dlock/dlock" \
                                          "$(command -v dlock || true)")}"
raw_bin="${MYSQL_RAW_BIN:-$(first_executable "$root/build/release/bench/dlock_bench_mysql_raw" \
                                             "$root/build/dev/bench/dlock_bench_mysql_raw")}"
[[ -n "$dlock_bin" ]] || { echo "mysql.sh: no dlock binary (set DLOCK_BIN or build dlock_tool)" >&2; exit 64; }
[[ -n "$raw_bin" ]] || { echo "mysql.sh: no dlock_bench_mysql_raw (set MYSQL_RAW_BIN or build it)" >&2; exit 64; }
command -v python3 >/dev/null || { echo "mysql.sh: python3 is needed for the summary" >&2; exit 64; }
py="$(python_with tooz.drivers.mysql)"

url=""
with_server mysql mariadb-server.sh "$server_dir"
started="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
status=0
notes=()

bench_name=mysql.sh
counter_field=server_statements
# server_count: the statements clients have sent the server so far (its Questions counter; this
# client adds two of its own); empty without the mariadb client. The URL is the throw-away server's.
server_count() {
  command -v mariadb >/dev/null || return 0
  local rest="${url#mysql://}" creds host
  creds="${rest%%@*}"
  host="${rest#*@}"
  host="${host%%/*}"
  MYSQL_PWD="${creds#*:}" mariadb --no-defaults --protocol=tcp -h "${host%:*}" -P "${host##*:}" -u "${creds%%:*}" \
    -N -B -e "SHOW GLOBAL STATUS LIKE 'Questions'" 2>/dev/null | cut -f2 || true
}

# --- (a) + (b): the raw limit around dlock uncontended --------------------------------------
measure raw "the raw limit, pass 1" "$raw_bin" --seconds "$seconds" "$url"
measure dlock "dlock bench uncontended" "$dlock_bin" bench --backend "$url" --workload uncontended \
  --seconds "${seconds}s" --json
measure dlock "dlock bench uncontended, session mode" "$dlock_bin" bench --backend "$url?mode=session" \
  --workload uncontended --seconds "${seconds}s" --json
measure raw "the raw limit, pass 2" "$raw_bin" --seconds "$seconds" "$url"

# --- (c) dlock under contention -------------------------------------------------------------
for threads in 1 2; do
  for options in "" "--fair"; do
    # shellcheck disable=SC2086  # options: zero or one word
    measure dlock "dlock bench contended 4x$threads ${options:-default}" "$dlock_bin" bench --backend "$url" \
      --workload contended --processes 4 --threads "$threads" --seconds "${seconds}s" $options --json
  done
  measure dlock "dlock bench contended 4x$threads session mode" "$dlock_bin" bench --backend "$url?mode=session" \
    --workload contended --processes 4 --threads "$threads" --seconds "${seconds}s" --json
done

# --- (d) tooz --------------------------------------------------------------------------------
if [[ -n "$py" ]]; then
  for threads in 1 2; do
    measure tooz "tooz mysql 4x$threads" "$py" "$here/peers/tooz_peer.py" --url "$url" --processes 4 \
      --threads "$threads" --seconds "$seconds"
  done
else
  notes+=("tooz: no python3 with tooz's mysql driver (Debian: python3-tooz python3-pymysql; or set PYTHON)")
fi
[[ -n "${BENCH_JSON:-}" ]] && cp "$out" "$BENCH_JSON"

# --- (e) summary -----------------------------------------------------------------------------
python3 "$here/sql_summary.py" mysql "$out" "$seconds" "${notes[@]}" || status=1
exit $status
