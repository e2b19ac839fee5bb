#!/usr/bin/env bash
# bench/plot on one run's results of every shape (dlock lock and flash-sale
# rows, peers, raw limits of two stores): three well-formed SVG charts with a
# panel per store, each bar and limit labelled; a file that is not a
# benchmark result is refused with its name and line, and writes nothing.
set -euo pipefail
src="$1"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$src/bench/plot" --out "$out" --title "fixture" "$src/tests/docs/bench_results.jsonl" >"$out/written"
for chart in throughput latency handoffs; do
  grep -qx "$out/$chart.svg" "$out/written" || fail "$chart.svg not reported as written"
  /usr/bin/python3 -c 'import sys, xml.dom.minidom; xml.dom.minidom.parse(sys.argv[1])' "$out/$chart.svg" \
    || fail "$chart.svg is not well-formed XML"
done
has() { grep -qF -- "$2" "$out/$1.svg" || fail "$1.svg lacks '$2'"; }
# Throughput: every store's panel, dlock, its peers and the raw limits.
for text in redis zookeeper file "uncontended — dlock" "contended 4×1 get+set in store — dlock fair" \
            "flash-sale 4×2 — dlock segmented" "contended 4×1 get+set in store — redis-py sleep=0.1" \
            "raw: PING single" "raw: sync-pairs" "python-fcntl held-fd" "(fixture)"; do
  has throughput "$text"
done
# Latency: p50 and p99 of lock and order rows; the fcntl peer has none.
has latency "flash-sale 4×2 stock in store — redis-py"
has latency "contended 4×1 — kazoo"
if grep -qF "python-fcntl" "$out/latency.svg"; then fail "latency.svg shows a peer that reported no latency"; fi
# Handoffs: contended rows only.
has handoffs "contended 4×1 — dlock"
if grep -qF "uncontended" "$out/handoffs.svg"; then fail "handoffs.svg shows an uncontended row"; fi

# Bad input: a clear error naming the file and line; no chart written.
bad="$out/bad.jsonl"
printf '{"workload":"contended"}\nnot json\n' >"$bad"
mkdir "$out/bad"
if "$src/bench/plot" --out "$out/bad" "$bad" 2>"$out/err"; then fail "a malformed file was plotted"; fi
grep -qF "$bad:2" "$out/err" || fail "the error does not name the file and line: $(cat "$out/err")"
[[ -z "$(ls "$out/bad")" ]] || fail "charts were written from a malformed file"
echo "plot: ok"
