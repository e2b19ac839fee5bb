#!/usr/bin/env bash
# Installs what is needed, builds, and runs every test:
#   1. the dev build (warnings as errors): unit, conformance, backend, fault, interop, CLI,
#      install, docs and example tests (the API reference builds without warnings;
#      bench/plot draws; the inventory service behind nginx sells exactly its stock);
#   2. the unit, conformance, backend and fault tests (every backend, worker processes
#      and killed/stopped/restarted servers included) under AddressSanitizer +
#      UndefinedBehaviorSanitizer, but for the 10,000-lock and -permit renewal
#      tests (their bound on batches per period assumes an uninstrumented client;
#      step 1 runs them) and the conformance runs on Sentinel, the
#      quorum and MySQL's table mode (CMakePresets.json), to keep the whole
#      run within its time: their code is redis://'s, core's quorum and the
#      SQL table recipe, which ASan checks through redis://, their fault
#      tests, postgres:// and sqlite://;
#      the nemesis suite (dlock_nemesis_tests: every backend and topology
#      under its faults, its workers instrumented too, its bounds doubled
#      as every test's) runs here and in step 3 as in step 1;
#   3. the same under ThreadSanitizer, also without the host-name lookup test
#      (glibc's getaddrinfo_a runs lookups on a thread it starts itself, which
#      TSan's runtime does not know and crashes in), and without the
#      conformance runs on Sentinel, Cluster, the quorum and MySQL's table
#      mode (CMakePresets.json), to keep the whole run within its time: their
#      code's threads are those of redis:// and of the SQL table recipe,
#      which TSan checks through redis://, postgres:// and sqlite://, and
#      their fault tests still run here (step 2 runs Cluster's conformance);
#   4. the fuzzers (libFuzzer, clang, ASan + UBSan): URL, duration and name
#      parsing, and each networked backend's reading of its URL (redis,
#      sentinel, zk, etcd), 20 s each; what the redis backend reads out of
#      Redis's replies, the zk backend's reading of a lock node's children,
#      the dlock tool's command line and the file backend on lock files of
#      any content, 15 s each; all from the committed seed corpus, two at a
#      time (about 95 s).
# Steps 2-4 are built behind step 1's tests, at the lowest CPU priority
# (below), so the whole run fits its time on two cores.
# Usage: scripts/test.sh [--quick]   (--quick: only step 1)
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
[[ "${1:-}" == "--quick" ]] && quick=1
jobs=$(nproc 2>/dev/null || echo 2)
# Tests mostly wait (on servers, leases, other processes): the dev stage's
# tests kept about half a core busy at (cores + 1) at a time, so it runs
# 2 × cores + 2 (on 2 cores: 7 min of tests instead of 10); instrumented
# tests use more CPU, so the sanitizer stages run cores + 2. The few that
# hold a wait or a wake-up to a bound of a few hundred ms run alone (SERIAL
# in their CMakeLists: RUN_SERIAL); under the sanitizers every bound is
# doubled (DLOCK_TEST_TIME_SCALE in CMakePresets.json).
dev_test_jobs=$((2 * jobs + 2))
test_jobs=$((jobs + 2))

./scripts/install-deps.sh

# Each step says when it started, so a slow stage shows in the log.
step() { printf '\n== %s (at %dm%02ds)\n' "$*" $((SECONDS / 60)) $((SECONDS % 60)); }

# A test that fails is run once more (--repeat until-pass:2): the machines
# these run on are shared and a timing bound can lose to a load spike. A
# test that fails twice fails the run; one that passed only on its second
# attempt is listed at the end (its first attempt's output is in the log
# above it), so an intermittent fault is seen, not hidden.
retried=()
run_tests() {  # <preset> <jobs>
  local log="build/$1-ctest.log"
  ctest --preset "$1" -j "$2" --timeout 300 --repeat until-pass:2 | tee "$log"
  local name
  while read -r name; do retried+=("$1: $name"); done < <(
    sed -nE 's/.*Test +#[0-9]+: ([^ ]+) .*\*\*\*(Failed|Timeout|Exception).*/\1/p' "$log")
}

step "dev build: every test"
cmake --preset dev >/dev/null
cmake --build --preset dev -j "$jobs"

# The sanitizer and fuzz builds run behind the tests, one after the other
# and at the lowest CPU priority: the tests mostly wait (on servers, leases,
# other processes) and leave more than half of the cores idle, which the
# builds take without taking it from the tests (any test's or server's
# process wins the CPU over an idle-class compiler at once). Each stage's tests start once its
# build is done; a build's output is shown only if it fails.
sanitized_targets=(dlock_unit_tests dlock_conformance_tests dlock_backend_tests dlock_file_fault_tests
  dlock_redis_fault_tests dlock_zookeeper_fault_tests dlock_postgres_fault_tests dlock_mysql_fault_tests
  dlock_redis_sentinel_fault_tests dlock_redis_cluster_fault_tests dlock_quorum_fault_tests dlock_etcd_fault_tests
  dlock_redis_forgery_tests dlock_file_doorbell_tests dlock_history_checker_tests dlock_nemesis_tests)
fuzz_targets=(fuzz_url fuzz_duration fuzz_names fuzz_backend_config fuzz_redis_replies fuzz_zk_names fuzz_cli_args
  fuzz_file_state)
build_in_background() {  # <preset> <target>...: build, log to build/<preset>.log, mark build/<preset>.built
  local preset=$1
  shift
  local begun=$SECONDS
  rm -f "build/$preset.built"
  if cmake --preset "$preset" >"build/$preset.log" 2>&1 &&
    cmake --build --preset "$preset" -j "$jobs" --target "$@" >>"build/$preset.log" 2>&1; then
    echo "$((SECONDS - begun))" >"build/$preset.built"
  else
    return 1
  fi
}
wait_for_build() {  # <preset>: wait until it is built; its log and a failure if it did not build
  local preset=$1
  while [[ ! -e "build/$preset.built" ]]; do
    if ! kill -0 "$builder" 2>/dev/null; then
      [[ -e "build/$preset.built" ]] && break
      echo "the $preset build failed:"
      tail -n 60 "build/$preset.log"
      exit 1
    fi
    sleep 2
  done
  echo "($preset build done in the background: $(cat "build/$preset.built") s)"
}
if ((quick == 0)); then
  # Every test binary with the unit, conformance, backend or fault label is named: one
  # not built would be left out silently (gtest discovery finds nothing).
  set -m  # the builds get a process group of their own, ended with the script
  (
    # SCHED_IDLE: the builds run only on CPU time no test wants (nice 19
    # where the policy is refused); idle I/O class where the disk's
    # scheduler honours it.
    chrt --idle -p 0 "$BASHPID" 2>/dev/null || renice -n 19 -p "$BASHPID" >/dev/null
    ionice -c 3 -p "$BASHPID" 2>/dev/null || true
    build_in_background asan "${sanitized_targets[@]}" &&
      build_in_background tsan "${sanitized_targets[@]}" &&
      build_in_background fuzz "${fuzz_targets[@]}"
  ) </dev/null &
  builder=$!
  set +m
  trap 'kill -- -"$builder" 2>/dev/null || true' EXIT
fi

run_tests dev "$dev_test_jobs"

if ((quick == 0)); then
  for preset in asan tsan; do
    step "$preset: unit, conformance, backend and fault tests"
    wait_for_build "$preset"
    run_tests "$preset" "$test_jobs"
  done
  step "fuzz: the fuzzers, a bounded time each"
  wait_for_build fuzz
  run_tests fuzz "$jobs"
  wait "$builder"
fi
step "all tests passed"
if ((${#retried[@]} > 0)); then
  echo "passed only on a second attempt (intermittent: look into each):"
  printf '  %s\n' "${retried[@]}"
fi
