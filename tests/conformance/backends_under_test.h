// backends_under_test.h — every backend the conformance suite runs on, and
// what each claims. A backend joins the suite by adding one entry here
// (servers it needs are started by a CTest fixture and found through the
// environment).
#pragma once

#include "servers.h"

#include <chrono>
#include <ostream>
#include <string>
#include <vector>

namespace dlock::test {

struct BackendUnderTest {
  std::string name;
  // A URL for a fresh, empty store whose files (if any) live under `dir`.
  std::string (*url)(const std::string& dir);
  // Whether a dead holder's lock is free at once (kernel/session), rather
  // than after its lease.
  bool frees_at_once_on_death;
  // Whether waiters are woken by the store (else they poll with backoff).
  bool notifies;
  // Whether a release wakes one waiter, not every one that waits.
  bool wakes_one;
  // Whether list_locks() reports the lease left (else the lock lives as
  // long as its holder's session).
  bool reports_remaining = true;
  // Whether it has the read-write lock (Client::shared_mutex).
  bool shared = false;
  // Whether no waiter waits much longer than the holds queued before it
  // with the default options (a FIFO queue, or max_barging_wait honoured).
  bool bounded_wait = false;
  // Whether a SharedMutex's writer may take the read lock too (downgrade).
  bool downgrade = false;
  // Whether it has Counter and Latch (Client::counter, Client::latch).
  bool counters = false;
  // Whether it has elections (Client::election).
  bool election = false;
  // Whether it has Semaphore (Client::semaphore).
  bool semaphore = false;
  // Whether its Semaphore leases permits, so async_acquire works (else it
  // is refused with unsupported).
  bool async_semaphore = false;
  // Whether the async API's suite runs on it.
  bool async = true;
  // Whether it has the double barrier (Client::barrier).
  bool barrier = false;
  // If a release wakes one waiter, at most how many it wakes however many
  // wait: 1, or 2 where the one after the next is also told to move up
  // (ZooKeeper), so that its own turn costs one deletion and one
  // notification, with no read in between.
  int woken_per_release = 1;
};

// gtest prints the parameter by its name, not its bytes.
inline void PrintTo(const BackendUnderTest& backend, std::ostream* os) { *os << backend.name; }

// What a backend on the lock table recipe (sqlite, postgres, mysql) has.
inline void claim_table_recipe(BackendUnderTest& b) {
  b.shared = true;
  b.downgrade = true;
  b.election = true;
  b.semaphore = true;
  b.async_semaphore = true;
  b.counters = true;
  b.barrier = true;
}

inline std::vector<BackendUnderTest> backends_under_test() {
  std::vector<BackendUnderTest> all;
#ifdef DLOCK_WITH_FILE
  all.push_back({"file", [](const std::string& dir) { return "file://" + dir + "/locks"; }, true, true, true});
  all.back().shared = true;
  all.back().bounded_wait = true;
  all.back().woken_per_release = 1;
  all.back().counters = true;
  all.back().election = true;
  all.back().semaphore = true;
  all.back().async_semaphore = true;
  all.back().barrier = true;
#endif
#ifdef DLOCK_WITH_SQLITE
  all.push_back({"sqlite", [](const std::string& dir) { return "sqlite://" + dir + "/locks.db"; }, false, true, true});
  claim_table_recipe(all.back());
  all.back().bounded_wait = true;
#endif
#ifdef DLOCK_WITH_REDIS
  all.push_back({"redis", [](const std::string& dir) { return server_url("redis") + "/0?prefix=" + unique_prefix(dir); },
                 false, true, true});
  all.back().shared = true;
  all.back().bounded_wait = true;
  all.back().downgrade = true;
  all.back().counters = true;
  all.back().election = true;
  all.back().semaphore = true;
  all.back().async_semaphore = true;
  all.back().barrier = true;
  // The same backend, finding its master through the sentinels of the
  // redis_sentinel fixture (1 master, 2 replicas, 3 sentinels).
  all.push_back(all.back());
  all.back().name = "redis_sentinel";
  all.back().url = [](const std::string& dir) {
    return server_url("redis_sentinel") + "?prefix=" + unique_prefix(dir);
  };
  // The same backend on the redis_cluster fixture (3 masters): each name's
  // scripts on the master of its slot.
  all.push_back(all.back());
  all.back().name = "redis_cluster";
  all.back().url = [](const std::string& dir) {
    return server_url("redis_cluster") + "?prefix=" + unique_prefix(dir);
  };
#endif
#ifdef DLOCK_WITH_REDIS
  // A quorum of five redis-servers: Mutex and MultiLock only; waiters poll
  // (no notification across nodes), so no wake-one or bounded-wait claim.
  all.push_back({"redlock",
                 [](const std::string& dir) { return server_url("redlock") + "?prefix=" + unique_prefix(dir); },
                 false, false, false});
#endif
#ifdef DLOCK_WITH_ZOOKEEPER
  // A short session timeout, so that a dead or stopped holder's lock is
  // free within the suite's lease-based bounds.
  all.push_back({"zookeeper",
                 [](const std::string& dir) {
                   return server_url("zookeeper") + "/" + unique_name(dir) + "?session_timeout=2s";
                 },
                 false, true, true, false, true});
  all.back().counters = true;
  all.back().election = true;
  all.back().semaphore = true;
  all.back().barrier = true;
  all.back().bounded_wait = true;
  all.back().woken_per_release = 2;
#endif
#ifdef DLOCK_WITH_POSTGRES
  // A schema of its own per test (its tables made by the first client).
  all.push_back({"postgres",
                 [](const std::string& dir) { return server_url("postgres") + "?schema=" + sql_identifier(dir); },
                 false, true, true});
  claim_table_recipe(all.back());
  all.back().bounded_wait = true;
  // Session mode: advisory locks that die with their connection (the
  // server ends a holder's session idle past its lease). Mutex only.
  all.push_back({"postgres_session",
                 [](const std::string& dir) {
                   return server_url("postgres") + "?mode=session&schema=" + sql_identifier(dir);
                 },
                 true, true, true});
  all.back().reports_remaining = false;
#endif
#ifdef DLOCK_WITH_MYSQL
  // A database of its own per test (made by the first client). No NOTIFY:
  // waiters poll, keeping their place in the queue (FIFO, writers ahead of
  // later readers), but a handoff waits for the next one's poll, so the
  // wait behind a queue is not bounded as tightly as bounded_wait asks.
  all.push_back({"mysql",
                 [](const std::string& dir) { return server_url("mysql") + "_" + sql_identifier(dir).substr(0, 50); },
                 false, false, false});
  claim_table_recipe(all.back());
  // Session mode: GET_LOCK, whose wait the server queues and wakes.
  all.push_back({"mysql_session",
                 [](const std::string& dir) {
                   return server_url("mysql") + "_" + sql_identifier(dir).substr(0, 30) + "?mode=session";
                 },
                 true, true, true});
  all.back().reports_remaining = false;
#endif
#ifdef DLOCK_WITH_ETCD
  // A prefix of its own per test, and a short lease (etcd's minimum is
  // about 2 s), so that a dead or stopped holder's lock is free within the
  // suite's lease-based bounds.
  all.push_back({"etcd",
                 [](const std::string& dir) { return server_url("etcd") + "/" + unique_name(dir) + "?ttl=2s"; },
                 false, true, true});
  all.back().bounded_wait = true;
  all.back().election = true;
  all.back().shared = true;
  all.back().semaphore = true;
  all.back().async_semaphore = true;
  all.back().counters = true;
  all.back().barrier = true;
#endif
  return all;
}

// The backends whose claims are all true, e.g. backends_claiming(&BackendUnderTest::barrier).
template <class... Claims>
std::vector<BackendUnderTest> backends_claiming(Claims... claims) {
  auto all = backends_under_test();
  std::erase_if(all, [&](const BackendUnderTest& b) { return !((b.*claims) && ...); });
  return all;
}

}  // namespace dlock::test
