// nemesis.h — the nemesis harness, written once for every backend.
//
// A run starts a store of its own (scripts/<server>.sh in a temp dir, so
// it may stop, kill and restart it; file and sqlite need none) and three
// worker processes (dlock_test_worker nemesis: lock → fenced writes →
// unlock, in a loop, each step appended to one history). Meanwhile the
// nemesis injects one fault at a time, chosen and timed by a seeded random
// schedule (each kind once in a random order, then again), on the current
// holder where there is one:
//   pause-client    SIGSTOP past the lease, then SIGCONT
//   kill-client     SIGKILL, and a fresh worker in its place
//   pause-server    SIGSTOP the store for up to the lease + 1 s, then SIGCONT
//   restart-server  SIGKILL the store and start it again on its data
//   partition       DROP every packet between worker 0 (in a network
//                   namespace of the run's own) and the store, past the lease
//   lossy-network   worker 0's link to the store loses 10-40 % of its
//                   packets each way and its outgoing traffic is shaped to
//                   32-256 kbit/s, for up to the lease + 1 s (latency and
//                   loss: TCP's retransmissions and the shaper's queue)
//   failover        hand the master over to a replica: SENTINEL FAILOVER,
//                   or CLUSTER FAILOVER on the replica of the lock's slot's
//                   master; on a ZooKeeper ensemble or etcd cluster, SIGKILL
//                   the leader and start it again once another member leads
// On a topology "the store" is the node that serves the lock: Sentinel's
// current master, the master of the lock's slot on a Cluster, the leader
// of a ZooKeeper ensemble or etcd cluster; on a quorum
// (redlock://) the server faults hit one or two of its five nodes (a
// minority), never more.
// After the run the harness takes the lock itself (no hold may leak), and
// check_history() reads the whole history.
#pragma once

#include "history.h"

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace dlock::test {

enum class Fault { pause_client, kill_client, pause_server, restart_server, partition, lossy_network, failover };
const char* to_string(Fault f);

// A backend as the harness runs it.
struct NemesisBackend {
  std::string name;
  std::string script;  // scripts/<server>.sh; empty: an embedded store (file, sqlite)
  // The faults its guarantees cover (docs/reliability.md says why others are left out).
  std::vector<Fault> faults;
  // Faults under which the suite has caught it breaking a guarantee, not
  // yet fixed: left out of CI, run by the soak with --all-faults.
  std::vector<Fault> failing = {};
  // Faults under which the topology may grant the lock twice by design (an
  // asynchronously replicated master replaced before it passed on the last
  // grant; docs/backends.md). Within such a fault, and `double_grant_grace`
  // after it, the checker counts an overtaken holder not yet told lost, or a
  // refused write, as a double grant instead of a violation, and checks what
  // still holds: accepted writes in token order, the overtaken holder told
  // lost by the end of its hold, bounded calls, no leak.
  std::vector<Fault> double_grant = {};
  std::chrono::milliseconds double_grant_grace{0};
  std::string url_options = {};  // appended to the store's URL ("?mode=session")
  // CI runs one case of every fault mixed (one store start), not one per
  // group of faults: for stores slow to start, or modes of a backend whose
  // other mode has the cases per group.
  bool mixed_case = false;
};

// Every backend of this build, from the CMake options.
std::vector<NemesisBackend> nemesis_backends();
const NemesisBackend* find_nemesis_backend(const std::string& name);

struct NemesisOptions {
  std::vector<Fault> faults;  // drawn from at random; empty: no faults
  std::chrono::milliseconds run{6'000};
  std::uint64_t seed = 1;
  bool lock = true;  // false: the control run, no lock at all
  int workers = 3;
  std::chrono::milliseconds lease{2'000};
  std::chrono::milliseconds op_timeout{500};
  std::chrono::milliseconds wait{1'000};  // each worker's try_lock_for
};

struct NemesisReport {
  CheckResult check;
  std::string history;  // the history's lines, for a failure message
  std::string error;    // the run itself could not be made (no store, ...): empty if it ran
};

// Runs one schedule against `backend` and checks its history.
NemesisReport run_nemesis(const NemesisBackend& backend, const NemesisOptions& options);

}  // namespace dlock::test
