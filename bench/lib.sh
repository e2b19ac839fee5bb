# bench/lib.sh — what the bench runners share; source it after setting $root.

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
