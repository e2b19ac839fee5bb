#!/usr/bin/env bash
# Long random nemesis schedules, outside CI: every fault each backend claims
# (tests/fault/nemesis/nemesis.h), for N minutes per backend, one table.
#
#   tests/fault/soak.sh [--minutes N] [--backend NAME|URL]... [--seed S] [--all-faults] [--build DIR]
#
# Default: 2 minutes on every backend of the build (build/dev). Each run
# starts a store of its own. Columns: operations (acquire calls), holds,
# accepted fenced writes, faults by kind (pause-client, kill-client,
# pause-server, restart-server, partition, lossy-network, failover), violations (must be
# 0), double grants a replicated topology may make by design (the fence
# refused the stale holder; docs/reliability.md), the longest time without
# an accepted write, lost locks reported. Exit 1 if a
# run found a violation (its lines follow the row). --all-faults adds the
# faults a backend is known to fail under (left out of CI).
set -euo pipefail
cd "$(dirname "$0")/../.."

minutes=2
seed=""
build=build/dev
backends=()
extra=()
while (($#)); do
  case "$1" in
    --minutes) minutes="$2"; shift 2 ;;
    --backend) backends+=("$2"); shift 2 ;;
    --seed) seed="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    --all-faults) extra+=(--all-faults); shift ;;
    *) sed -n '2,15p' "$0" >&2; exit 64 ;;
  esac
done
soak="$build/tests/fault/nemesis/dlock_nemesis_soak"
[[ -x "$soak" ]] || { echo "soak.sh: build it first: cmake --build --preset dev --target dlock_nemesis_soak dlock_test_worker" >&2; exit 1; }
if ((${#backends[@]} == 0)); then
  backends=(file sqlite redis redis_aof redis_sentinel redis_cluster redlock zookeeper etcd postgres
            postgres_session mysql mysql_session)
fi

status=0
header=--header
for b in "${backends[@]}"; do
  args=(--backend "$b" --minutes "$minutes" $header)
  [[ -n "$seed" ]] && args+=(--seed "$seed")
  args+=("${extra[@]}")
  "$soak" "${args[@]}" || status=1
  header=""
done
exit $status
