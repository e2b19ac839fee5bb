#!/usr/bin/env bash
# The API reference (docs/doxygen/Doxyfile over include/dlock/) builds with
# no warning: an undocumentable construct or a broken reference fails it.
set -euo pipefail
src="$1" out="$2"
command -v doxygen >/dev/null || { echo "FAIL: doxygen is not installed (scripts/install-deps.sh installs it)" >&2; exit 1; }
rm -rf "$out"
mkdir -p "$out"
cd "$src"
# Same settings, output in the build tree; any warning is an error (WARN_AS_ERROR).
if ! { cat docs/doxygen/Doxyfile; echo "OUTPUT_DIRECTORY = $out"; } | doxygen - 2>"$out/warnings" \
   || [[ -s "$out/warnings" ]]; then
  echo "FAIL: doxygen warned:" >&2
  cat "$out/warnings" >&2
  exit 1
fi
for page in index.html classdlock_1_1Mutex.html structdlock_1_1ClientOptions.html metrics_8h.html; do
  [[ -s "$out/html/$page" ]] || { echo "FAIL: $page missing from the reference" >&2; exit 1; }
done
grep -q "fencing token" "$out/html/classdlock_1_1Mutex.html" || { echo "FAIL: Mutex's header comments are not in its page" >&2; exit 1; }
# The version CMake's project() gives (DLOCK_VERSION), as the tool and the packages have it.
[[ -n "${DLOCK_VERSION:-}" ]] || { echo "FAIL: DLOCK_VERSION is not set" >&2; exit 1; }
grep -q "$DLOCK_VERSION" "$out/html/index.html" || { echo "FAIL: the reference does not show version $DLOCK_VERSION" >&2; exit 1; }
echo "doxygen: ok"
