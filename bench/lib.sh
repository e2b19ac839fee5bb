# bench/lib.sh — what the bench runners share; source it after setting $root.
# shellcheck shell=bash disable=SC2154,SC2034  # $root, $seconds, ... are set by the runners

# python_with MODULE: prints a python3 that can import MODULE ($PYTHON if set,
# else python3 on PATH, else /usr/bin/python3), or nothing.
python_with() {
  if [[ -n "${PYTHON:-}" ]]; then echo "$PYTHON"; return; fi
  local candidate
  for candidate in python3 /usr/bin/python3; do
    if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c "import $1" 2>/dev/null; then
      echo "$candidate"; return
    fi
  done
}

# with_server NAME SCRIPT [SERVER_DIR]: makes $work (a temp dir, removed on
# exit) and $out (the results file in it); if $url is empty, starts a
# throw-away server with scripts/SCRIPT in SERVER_DIR (default:
# $work/server), stopped on exit (also on a failure or Ctrl-C), and sets $url.
with_server() {
  work="$(mktemp -d -t "dlock-$1-bench-XXXXXX")"
  out="$work/results.jsonl"
  bench_server_script="$root/scripts/$2"
  bench_server_dir="${3:-$work/server}"
  bench_server_started=""
  trap bench_cleanup EXIT
  trap 'exit 130' INT TERM
  if [[ -z "$url" ]]; then
    bench_server_started=1
    "$bench_server_script" start "$bench_server_dir" >&2
    url="$(cat "$bench_server_dir/url")"
  fi
  : >"$out"
}

# shellcheck disable=SC2317  # invoked by the trap
bench_cleanup() {
  if [[ -n "$bench_server_started" ]]; then "$bench_server_script" stop "$bench_server_dir" >&2 || true; fi
  rm -rf "$work"
}

# first_executable FILE...: prints the first FILE that is executable, or nothing.
first_executable() { for f in "$@"; do if [[ -x "$f" ]]; then echo "$f"; return; fi; done; }

# The SQL runners' measurements (postgres.sh, mysql.sh). They set $bench_name (for
# messages), $seconds, $limit (the bound of one measurement, in seconds),
# $started (the run's start, UTC), $counter_field (the JSON field for the
# server's counter, e.g. server_transactions) and define server_count (prints
# the server's counter so far, or nothing); `measure` sets $status to 1 when a
# measurement fails.

# shellcheck disable=SC2154,SC2034  # the variables above are the runner's
# tag WHO BEFORE AFTER: adds "who", "run_started" and $counter_field (AFTER -
# BEFORE, if both are known) to every JSON line from stdin, passwords
# redacted, into $out.
tag() {
  python3 -c 'import json, re, sys
who, started, field, before, after = sys.argv[1:6]
for line in sys.stdin:
    if line.strip():
        row = json.loads(line)
        if "backend" in row:
            row["backend"] = re.sub(r"^([a-z]+://[^:/@]*):[^@]*@", r"\1:***@", row["backend"])
        row.update(who=who, run_started=started)
        if before and after:
            row[field] = int(after) - int(before)
        print(json.dumps(row))' "$1" "$started" "$counter_field" "$2" "$3" >>"$out"
}

# measure WHO WHAT CMD...: runs CMD bounded in time, tags its JSON lines; a
# failure is reported and counted.
measure() {
  local who="$1" what="$2" before after
  shift 2
  echo "running $what (${seconds}s)..." >&2
  before="$(server_count)"
  if ! timeout "$limit" "$@" >"$work/last.jsonl"; then
    echo "$bench_name: $what failed" >&2
    status=1
  fi
  after="$(server_count)"
  tag "$who" "$before" "$after" <"$work/last.jsonl"
}
