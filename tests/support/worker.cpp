// dlock_test_worker — the other processes of the multi-process tests.
//
//   hammer URL NAME COUNT RESOURCE WORK_US [nolock|semaphore|permits=N]
//       COUNT critical sections: lock, fenced enter, read counter, pause
//       WORK_US, write counter + 1, leave, unlock. "nolock" skips the lock
//       (the control run that shows the oracle can see violations);
//       "semaphore" takes a permit of a one-permit Semaphore instead of the Mutex;
//       "async" takes the Mutex through async_lock() (a Hold of its own).
//       Permits and barrier members are leased for 1 s (watchdog): on stores
//       that lease them, a killed worker's share comes back within the
//       tests' bounds, as on stores that end it with the session.
//       "permits=N" takes one of N permits and, holding it, occupies the
//       resource (which records the most holders in at once) for WORK_US.
//   hold URL NAME LEASE_MS watchdog|fixed RESOURCE [mutex|read|write|permit|leader [MAX_BARGING_MS]]
//       Locks (a Mutex; or a SharedMutex shared or exclusively, a permit of
//       a one-permit Semaphore, leadership of an Election with the id
//       "worker-<pid>"; waiting with that max_barging_wait, else the
//       default), prints "acquired <token>", then obeys stdin lines:
//       "write"  → a fenced write with its token; prints
//                  "write accepted|rejected lost=0|1"
//       "unlock" → prints "unlock ok" or "unlock <error code>"
//       EOF      → exits (without unlocking)
//   nemesis URL NAME RESOURCE HISTORY RUN_MS LEASE_MS OP_TIMEOUT_MS WAIT_MS SEED lock|nolock [NETNS]
//       For RUN_MS, loops: try_lock_for(WAIT_MS) on a Mutex leased LEASE_MS
//       (watchdog) with calls bounded by OP_TIMEOUT_MS; holding, 1 to 4
//       ordered fenced writes 5 to 60 ms apart (one hold in ten, and every
//       hold with NETNS: a write every 50 ms for 1.25 leases), polling
//       lost(); unlock.
//       Every step goes to the HISTORY file (history.h). "nolock": no lock
//       and token 0 (the control run). NETNS: the network namespace
//       (/var/run/netns/NETNS) it joins before connecting.
//   barrier URL NAME PARTIES
//       One member of a Barrier: prints "arriving", enters (blocks),
//       prints "entered", then obeys stdin lines:
//       "leave"  → leaves (blocks) and prints "left"
//       EOF      → exits (a member still in leaves with its session)
#include "fenced_resource.h"
#include "history.h"

#include <dlock/dlock.h>

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <optional>
#include <iostream>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>

namespace {

// `lock`: a Mutex or a Semaphore; nullptr for the control run.
template <class Lock>
int hammer(Lock* lock, const std::string& resource_path, int count, int work_us) {
  dlock::test::FencedResource resource(resource_path, false);
  const std::int64_t me = ::getpid();
  int unavailable = 0;
  for (int i = 0; i < count; ++i) {
    std::uint64_t token = 0;
    if (lock) {
      const auto asked = std::chrono::steady_clock::now();
      for (;;) try {
          lock->lock();
          break;
        } catch (const dlock::Error& e) {
          // A loaded machine can delay a store's answer past its timeout
          // (a quorum node's is 200 ms) while the servers start: asked
          // again, a few times in the whole run (what is tested is who
          // holds the lock, not how fast the store answers).
          if (e.kind() != dlock::errc::unavailable || ++unavailable > 10) throw;
          std::fprintf(stderr, "worker: %s (asking again)\n", e.what());
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
      resource.waited(std::chrono::steady_clock::now() - asked);
      token = lock->token();
    }
    resource.enter(token, me);
    auto value = resource.read_counter();
    std::this_thread::sleep_for(std::chrono::microseconds(work_us));
    resource.write_counter(value + 1);
    resource.leave(me);
    if (lock) lock->unlock();
  }
  return 0;
}

constexpr std::chrono::milliseconds short_lease{1'000};

// A Mutex taken asynchronously, shaped for hammer(): each lock() is an
// async_lock() waited for, its Hold kept until unlock().
struct AsyncLock {
  dlock::Mutex& mutex;
  dlock::Hold hold;
  void lock() { hold = mutex.async_lock().get(); }
  std::uint64_t token() const { return hold.token(); }
  void unlock() { hold.unlock(); }
};

int hammer(const std::string& url, const std::string& name, int count, const std::string& resource_path,
           int work_us, const std::string& how) {
  auto client = dlock::connect(url);
  if (how.starts_with("permits=")) {
    auto semaphore = client->semaphore(name, std::stoi(how.substr(8)), {.lease = short_lease});
    dlock::test::FencedResource resource(resource_path, false);
    for (int i = 0; i < count; ++i) {
      semaphore.acquire();
      resource.occupy();
      std::this_thread::sleep_for(std::chrono::microseconds(work_us));
      resource.vacate();
      semaphore.release();
    }
    return 0;
  }
  if (how == "semaphore") {
    auto semaphore = client->semaphore(name, 1, {.lease = short_lease});
    return hammer(&semaphore, resource_path, count, work_us);
  }
  auto mutex = client->mutex(name);
  if (how == "async") {
    AsyncLock lock{mutex, {}};
    return hammer(&lock, resource_path, count, work_us);
  }
  return hammer(how == "nolock" ? nullptr : &mutex, resource_path, count, work_us);
}

// What `hold` holds, whatever the primitive.
struct Held {
  std::function<std::uint64_t()> token;
  std::function<bool()> lost;
  std::function<dlock::Status()> release;
};

int hold(const std::string& url, const std::string& name, long lease_ms, const std::string& mode,
         const std::string& resource_path, const std::string& kind, std::optional<long> max_barging_ms) {
  dlock::test::FencedResource resource(resource_path, false);
  auto client = dlock::connect(url);
  dlock::MutexOptions options{.lease = std::chrono::milliseconds(lease_ms),
                              .lease_mode = mode == "fixed" ? dlock::LeaseMode::fixed : dlock::LeaseMode::watchdog};
  if (max_barging_ms) options.max_barging_wait = std::chrono::milliseconds(*max_barging_ms);
  std::optional<dlock::Mutex> mutex;
  std::optional<dlock::SharedMutex> shared;
  std::optional<dlock::Semaphore> semaphore;
  std::optional<dlock::Election> election;
  Held held;
  if (kind == "read" || kind == "write") {
    shared.emplace(client->shared_mutex(name, options));
    kind == "read" ? shared->lock_shared() : shared->lock();
    held = {[&] { return shared->token(); }, [&] { return shared->lost(); },
            [&] { return kind == "read" ? shared->unlock_shared_checked() : shared->unlock_checked(); }};
  } else if (kind == "permit") {
    semaphore.emplace(client->semaphore(name, 1, options));
    semaphore->acquire();
    held = {[&] { return semaphore->token(); }, [&] { return semaphore->lost(); },
            [&] { return semaphore->release_checked(1); }};
  } else if (kind == "leader") {
    election.emplace(client->election(name, options));
    election->campaign("worker-" + std::to_string(::getpid()));
    held = {[&] { return election->token(); }, [&] { return election->lost(); },
            [&] { return election->resign_checked(); }};
  } else {
    mutex.emplace(client->mutex(name, options));
    mutex->lock();
    held = {[&] { return mutex->token(); }, [&] { return mutex->lost(); }, [&] { return mutex->unlock_checked(); }};
  }
  const auto token = held.token();
  std::cout << "acquired " << token << std::endl;
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line == "write") {
      bool ok = resource.write(token, ::getpid());
      std::cout << "write " << (ok ? "accepted" : "rejected") << " lost=" << held.lost() << std::endl;
    } else if (line == "unlock") {
      auto s = held.release();
      std::cout << "unlock " << (s.ok() ? "ok" : dlock::to_string(s.code())) << std::endl;
    }
  }
  return 0;
}

int nemesis_worker(char** argv, int argc) {
  using namespace std::chrono;
  using dlock::test::Event;
  const std::string url = argv[2], name = argv[3];
  const milliseconds run{std::stol(argv[6])}, lease{std::stol(argv[7])}, op_timeout{std::stol(argv[8])},
      wait{std::stol(argv[9])};
  std::mt19937 rng(static_cast<std::uint32_t>(std::stoul(argv[10])));
  const bool locking = std::string(argv[11]) == "lock";
  const bool isolated = argc > 12;
  if (isolated) {
    const int ns = ::open((std::string("/var/run/netns/") + argv[12]).c_str(), O_RDONLY | O_CLOEXEC);
    if (ns < 0 || ::setns(ns, CLONE_NEWNET) != 0) throw std::runtime_error("cannot join network namespace");
    ::close(ns);
  }
  dlock::test::FencedResource resource(argv[4], false);
  dlock::test::HistoryWriter history(argv[5]);
  const std::int64_t me = ::getpid();
  auto record = [&](const char* op, const char* type, std::uint64_t token = 0, std::uint64_t seq = 0,
                    std::string detail = "-") { history.append({0, me, op, type, token, seq, std::move(detail)}); };
  const auto end = steady_clock::now() + run;
  std::shared_ptr<dlock::Client> client;
  while (!client && steady_clock::now() < end) {
    try {
      client = dlock::connect(url, {.op_timeout = op_timeout});
    } catch (const dlock::Error&) {
      std::this_thread::sleep_for(100ms);  // the store is down or cut off: the nemesis heals it
    }
  }
  if (!client) return 0;
  auto mutex = client->mutex(name, {.lease = lease, .lease_mode = dlock::LeaseMode::watchdog});
  auto between = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  while (steady_clock::now() < end) {
    record("acquire", "invoke");
    std::uint64_t token = 0;
    if (locking) {
      try {
        if (!mutex.try_lock_for(wait)) {
          record("acquire", "fail", 0, 0, "timeout");
          continue;
        }
      } catch (const dlock::Error& e) {
        record("acquire", "fail", 0, 0, std::string(dlock::to_string(e.kind())));
        std::this_thread::sleep_for(50ms);
        continue;
      }
      token = mutex.token();
    }
    record("acquire", "ok", token);
    bool lost = false;
    // One hold in ten outlasts the lease (the watchdog must renew it, and a
    // fault in its middle must end in `lost` before anyone else writes);
    // every hold of the worker in a namespace (the one a partition cuts off).
    const bool long_hold = isolated || between(1, 10) == 1;
    const int writes = long_hold ? 1000 : between(1, 4);
    const auto hold_end = steady_clock::now() + (long_hold ? lease + lease / 4 : 10 * lease);
    for (int i = 0; i < writes && !lost && steady_clock::now() < hold_end; ++i) {
      if (locking && mutex.lost()) {
        lost = true;
        break;
      }
      const auto written = resource.write_ordered(token, me);
      record("write", written.accepted ? "ok" : "fail", token, written.seq);
      if (!written.accepted) break;
      const auto until = steady_clock::now() + milliseconds(long_hold ? 50 : between(5, 60));
      while (steady_clock::now() < until && !(lost = locking && mutex.lost())) std::this_thread::sleep_for(5ms);
    }
    if (lost) record("lost", "info", token);
    record("release", "invoke", token);
    if (locking) {
      const auto released = mutex.unlock_checked();
      record("release", released.ok() ? "ok" : "fail", token, 0,
             released.ok() ? "-" : std::string(dlock::to_string(released.code())));
      if (!lost && released.code() == dlock::errc::lock_lost) record("lost", "info", token);
    } else {
      record("release", "ok", token);
    }
    std::this_thread::sleep_for(milliseconds(between(0, 20)));
  }
  return 0;
}

int barrier_member(const std::string& url, const std::string& name, int parties) {
  auto client = dlock::connect(url);
  auto barrier = client->barrier(name, parties, {.lease = short_lease});
  std::cout << "arriving" << std::endl;
  barrier.arrive_and_wait();
  std::cout << "entered" << std::endl;
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line == "leave") {
      barrier.leave();
      std::cout << "left" << std::endl;
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::string cmd = argc > 1 ? argv[1] : "";
    if (cmd == "hammer" && argc >= 7)
      return hammer(argv[2], argv[3], std::stoi(argv[4]), argv[5], std::stoi(argv[6]), argc > 7 ? argv[7] : "");
    if (cmd == "nemesis" && (argc == 12 || argc == 13)) return nemesis_worker(argv, argc);
    if (cmd == "barrier" && argc == 5) return barrier_member(argv[2], argv[3], std::stoi(argv[4]));
    if (cmd == "hold" && argc >= 7 && argc <= 9)
      return hold(argv[2], argv[3], std::stol(argv[4]), argv[5], argv[6], argc >= 8 ? argv[7] : "mutex",
                  argc == 9 ? std::optional<long>(std::stol(argv[8])) : std::nullopt);
    std::cerr << "usage: see the comment at the top of worker.cpp\n";
    return 64;
  } catch (const std::exception& e) {
    std::cerr << "worker: " << e.what() << "\n";
    return 70;
  }
}
