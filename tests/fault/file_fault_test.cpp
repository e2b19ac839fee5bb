// Fault tests of the file:// backend: a holder of each primitive killed
// (SIGKILL) or stopped (SIGSTOP) in another process. On one host the
// kernel is the session: a dead holder's OFD locks go with it, so its share
// is free at once, not after its lease; a stopped one keeps its locks but
// loses its share when its lease runs out, and the resource refuses its
// stale fencing token. Waiters in line stopped or killed, and waiters once
// the user's inotify instances are all taken. (The backend's behaviour
// without faults: tests/backends/file_test.cpp.)
#include "child_process.h"
#include "fenced_resource.h"
#include "file_wakeups.h"

#include <dlock/dlock.h>

#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace dlock::test {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

// A contender for what the worker holds as `kind`, in this process: one
// that the holder excludes.
struct Contender {
  std::function<bool(std::chrono::milliseconds)> take;  // try for that long
  std::function<std::uint64_t()> token;
  std::function<void()> give_back;
};

class FileFault : public ::testing::TestWithParam<std::string> {
 protected:
  std::string url() const { return "file://" + dir_.path() + "/locks"; }
  std::string resource_path() const { return dir_.path() + "/resource"; }
  std::string name() const { return "faults/" + GetParam(); }

  std::unique_ptr<ChildProcess> holder(long lease_ms, const std::string& mode) const {
    return std::make_unique<ChildProcess>(std::vector<std::string>{
        DLOCK_TEST_WORKER, "hold", url(), name(), std::to_string(lease_ms), mode, resource_path(), GetParam()});
  }

  // A permit and a leader wait for one of their own kind; a SharedMutex's
  // holder is contended by a writer, or (`reader`) by a reader.
  Contender contender(bool reader = false) {
    client_ = dlock::connect(url());
    const std::string kind = GetParam();
    if (kind == "read" || kind == "write") {
      auto rw = std::make_shared<SharedMutex>(client_->shared_mutex(name()));
      const bool reads = reader;
      return {[rw, reads](std::chrono::milliseconds t) { return reads ? rw->try_lock_shared_for(t) : rw->try_lock_for(t); },
              [rw] { return rw->token(); }, [rw, reads] { reads ? rw->unlock_shared() : rw->unlock(); }};
    }
    if (kind == "permit") {
      auto semaphore = std::make_shared<Semaphore>(client_->semaphore(name(), 1));
      return {[semaphore](std::chrono::milliseconds t) { return semaphore->try_acquire_for(t); },
              [semaphore] { return semaphore->token(); }, [semaphore] { semaphore->release(); }};
    }
    auto election = std::make_shared<Election>(client_->election(name()));
    return {[election](std::chrono::milliseconds t) { return election->campaign_for(t, "contender"); },
            [election] { return election->token(); }, [election] { election->resign(); }};
  }

  TempDir dir_;
  std::shared_ptr<Client> client_;
};

TEST_P(FileFault, AKilledHoldersShareIsFreeAtOnce) {
  FencedResource resource(resource_path(), true);
  auto held = holder(30'000, "watchdog");  // a lease far longer than the bound below
  auto line = held->read_line(scaled(10s));
  ASSERT_TRUE(line && line->starts_with("acquired ")) << line.value_or("<nothing>");
  const std::uint64_t dead_token = std::stoull(line->substr(9));
  // A dead writer lets a reader in; everything else, its own kind.
  auto other = contender(GetParam() == "write");
  ASSERT_FALSE(other.take(0ms)) << "the contender got in beside a live " << GetParam() << " holder";
  held->signal(SIGKILL);
  ASSERT_TRUE(held->wait(scaled(5s)));
  const auto start = steady::now();
  ASSERT_TRUE(other.take(scaled(10s))) << "a killed holder's share never came back";
  EXPECT_LT(steady::now() - start, scaled(300ms)) << "the kernel should free a dead holder's share at once";
  EXPECT_GT(other.token(), dead_token);
  other.give_back();
}

TEST_P(FileFault, AStoppedHolderLosesItsShareAtItsLeaseAndIsFencedOff) {
  FencedResource resource(resource_path(), true);
  auto held = holder(1000, "fixed");
  auto line = held->read_line(scaled(10s));
  ASSERT_TRUE(line && line->starts_with("acquired ")) << line.value_or("<nothing>");
  held->write_line("write");
  ASSERT_EQ(held->read_line(scaled(5s)), std::optional<std::string>("write accepted lost=0"));
  ASSERT_TRUE(stop_process(held->pid()));
  auto other = contender();
  const auto start = steady::now();
  ASSERT_TRUE(other.take(scaled(5s))) << "a stopped holder's fixed lease never ran out";
  EXPECT_GE(steady::now() - start, 500ms) << "the share was free long before the stopped holder's lease ran out";
  EXPECT_TRUE(resource.write(other.token(), 1)) << "the new holder's fenced write was refused";
  held->signal(SIGCONT);
  held->write_line("write");
  EXPECT_EQ(held->read_line(scaled(5s)), std::optional<std::string>("write rejected lost=1"));
  held->write_line("unlock");
  EXPECT_EQ(held->read_line(scaled(5s)), std::optional<std::string>("unlock lock_lost"));
  // The stale holder's release must not have freed the new holder's share.
  auto third = contender();
  EXPECT_FALSE(third.take(0ms));
  other.give_back();
  EXPECT_TRUE(third.take(scaled(2s)));
  third.give_back();
}

// Whether some open file description holds byte 0 of `file`: the guard a
// process holds for the microseconds in which it reads or rewrites it.
bool guard_held(const std::string& file) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct flock probe {};
  probe.l_type = F_WRLCK;
  probe.l_whence = SEEK_SET;
  probe.l_start = 0;
  probe.l_len = 1;
  const bool held = ::fcntl(fd, F_OFD_GETLK, &probe) == 0 && probe.l_type != F_UNLCK;
  ::close(fd);
  return held;
}

// Stops `child` at a moment it is outside the guard of `lock_file`. Stopped
// inside it, it would hold every other process up until their op_timeout
// (by design: it is then a writer stopped half way), which is not what the
// tests that stop a waiter are about; a waiter enters the guard at every
// retry, so a stop at a random moment sometimes lands there.
bool stop_outside_the_guard(ChildProcess& child, const std::string& lock_file) {
  for (int attempt = 0; attempt < 200; ++attempt) {
    if (!stop_process(child.pid())) return false;
    if (!guard_held(lock_file)) return true;
    child.signal(SIGCONT);
    std::this_thread::sleep_for(1ms);
  }
  return false;
}

// A waiter that is stopped keeps its byte locks (the kernel drops them only
// when it dies) but not its hold on others: a writer waiting holds later
// readers back, and a candidate in line holds back those behind it, only
// while they keep retrying.
class StoppedWaiter : public ::testing::Test {
 protected:
  std::string url() const { return "file://" + dir_.path() + "/locks"; }
  // The file of a primitive (its name needs no escaping) in the lock dir.
  std::string lock_file(const std::string& file_name) const { return dir_.path() + "/locks/" + file_name; }
  std::unique_ptr<ChildProcess> waiting(const std::string& name, const std::string& kind) const {
    return std::make_unique<ChildProcess>(std::vector<std::string>{
        DLOCK_TEST_WORKER, "hold", url(), name, "30000", "watchdog", dir_.path() + "/resource", kind});
  }
  TempDir dir_;
};

TEST_F(StoppedWaiter, AStoppedWaitingWriterStopsHoldingReadersBack) {
  FencedResource resource(dir_.path() + "/resource", true);
  auto a = dlock::connect(url()), b = dlock::connect(url());
  auto first = a->shared_mutex("rw");
  first.lock_shared();
  auto writer = waiting("rw", "write");
  auto late = b->shared_mutex("rw");
  ASSERT_TRUE(eventually(
      [&] {
        if (!late.try_lock_shared()) return true;
        late.unlock_shared();
        return false;
      },
      scaled(5s)))
      << "the waiting writer never held a later reader back";
  ASSERT_TRUE(stop_outside_the_guard(*writer, lock_file("rw.rw")));
  const auto stopped = steady::now();
  ASSERT_TRUE(late.try_lock_shared_for(scaled(10s))) << "a stopped waiting writer kept readers out for good";
  EXPECT_GE(steady::now() - stopped, 1s) << "readers got past a writer that was still waiting";
  late.unlock_shared();
  first.unlock_shared();
  writer->signal(SIGCONT);
  EXPECT_TRUE(writer->read_line(scaled(10s)).value_or("").starts_with("acquired ")) << "the writer never got in";
}

TEST_F(StoppedWaiter, AStoppedCandidateInLineStopsHoldingTheNextBack) {
  FencedResource resource(dir_.path() + "/resource", true);
  auto a = dlock::connect(url()), b = dlock::connect(url());
  auto leader = a->election("jobs");
  leader.campaign("first");
  auto queued = waiting("jobs", "leader");
  std::this_thread::sleep_for(scaled(500ms));  // it waits in line
  ASSERT_TRUE(stop_outside_the_guard(*queued, lock_file("jobs.elect")));
  leader.resign();
  // First in line now, but stopped: it does not lead, and once its place
  // lapses the next candidate does.
  auto next = b->election("jobs");
  const auto resigned = steady::now();
  ASSERT_TRUE(next.campaign_for(scaled(10s), "next")) << "a stopped candidate in line kept everyone behind it out";
  EXPECT_GE(steady::now() - resigned, 500ms) << "the candidate behind a live one in line overtook it";
  EXPECT_EQ(leader.leader(), "next");
  next.resign();
  queued->signal(SIGCONT);
  EXPECT_TRUE(queued->read_line(scaled(10s)).value_or("").starts_with("acquired ")) << "the candidate never led";
}

// A Mutex's waiters wait in line and a release rings only the first; one
// that dies or stops in line must not keep the lock from the next.
class MutexLine : public StoppedWaiter {
 protected:
  // Held here, and a worker process first in line for longer than
  // max_barging_wait.
  void SetUp() override {
    resource_.emplace(dir_.path() + "/resource", true);
    holder_ = dlock::connect(url());
    held_.emplace(holder_->mutex("m"));
    held_->lock();
    first_ = waiting("m", "mutex");
    std::this_thread::sleep_for(scaled(500ms));
  }

  // A thread of another client waits second in line; `meanwhile` runs, the
  // lock is released: how long after that the thread got it (-1: never).
  std::int64_t next_gets_it_after_us(const std::function<void()>& meanwhile) {
    auto other = dlock::connect(url());
    std::atomic<std::int64_t> after_us{-1}, released_at_us{0};
    auto now_us = [] {
      return std::chrono::duration_cast<std::chrono::microseconds>(steady::now().time_since_epoch()).count();
    };
    std::thread next([&] {
      auto m = other->mutex("m");
      if (!m.try_lock_for(scaled(10s))) return;
      after_us = now_us() - released_at_us.load();
      m.unlock();
    });
    std::this_thread::sleep_for(scaled(200ms));
    meanwhile();
    released_at_us = now_us();
    held_->unlock();
    next.join();
    return after_us;
  }

  std::optional<FencedResource> resource_;
  std::shared_ptr<Client> holder_;
  std::optional<Mutex> held_;
  std::unique_ptr<ChildProcess> first_;
};

TEST_F(MutexLine, AKilledWaiterDoesNotHoldUpTheNextHandoff) {
  const auto after_us = next_gets_it_after_us([&] {
    first_->signal(SIGKILL);
    EXPECT_TRUE(first_->wait(scaled(5s)));
    std::this_thread::sleep_for(50ms);
  });
  ASSERT_GE(after_us, 0) << "the waiter behind a killed one never got the lock";
  // Counted as first in line, the dead waiter would keep it reserved until
  // its place lapses (up to 2 s after it last retried).
  EXPECT_LT(after_us, std::chrono::duration_cast<std::chrono::microseconds>(scaled(250ms)).count())
      << "the handoff waited for a dead waiter";
}

TEST_F(MutexLine, AStoppedWaiterFirstInLineStopsHoldingTheNextBack) {
  const auto after_us =
      next_gets_it_after_us([&] { EXPECT_TRUE(stop_outside_the_guard(*first_, lock_file("m.lock"))); });
  ASSERT_GE(after_us, 0) << "a stopped waiter first in line kept everyone behind it out";
  // It has waited past max_barging_wait: the lock is its own until its place
  // lapses (it renewed it at most 500 ms before it was stopped).
  EXPECT_GE(after_us, 1'000'000) << "the waiter behind a live one first in line overtook it";
  first_->signal(SIGCONT);
  EXPECT_TRUE(first_->read_line(scaled(10s)).value_or("").starts_with("acquired "))
      << "the stopped waiter never got in";
}

// inotify instances are few and per user (fs.inotify.max_user_instances,
// 128 by default, shared by all of the user's processes): once others have
// them all, waiters in line still wake on their doorbells, one per
// handoff, and the client says which limit to raise. Runs alone: it takes
// every instance this user has left while it runs.
TEST(FileInotifyExhausted, WaitersInLineStillWakeOnTheirDoorbells) {
  std::ifstream limit_file("/proc/sys/fs/inotify/max_user_instances");
  long limit = 0;
  ASSERT_TRUE(limit_file >> limit);
  // Room for every instance and the clients' own descriptors, so that the
  // loop below stops at the user's inotify limit, not at this process's
  // descriptor limit (both say EMFILE).
  rlimit files{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &files), 0);
  const rlim_t needed = static_cast<rlim_t>(limit) + 1024;
  if (files.rlim_cur < needed) {
    ASSERT_GE(files.rlim_max, needed) << "taking fs.inotify.max_user_instances (" << limit
                                      << ") instances needs that many descriptors; the hard RLIMIT_NOFILE is "
                                      << files.rlim_max;
    const rlimit raised{needed, files.rlim_max};
    ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &raised), 0) << std::strerror(errno);
  }
  std::vector<int> taken;
  struct CloseAll {
    std::vector<int>& fds;
    ~CloseAll() {
      for (int fd : fds) ::close(fd);
    }
  } close_all{taken};
  for (long i = 0; i <= limit; ++i) {
    const int fd = ::inotify_init1(IN_CLOEXEC);
    if (fd < 0) {
      ASSERT_EQ(errno, EMFILE) << std::strerror(errno);
      break;
    }
    taken.push_back(fd);
  }
  ASSERT_EQ(::inotify_init1(IN_CLOEXEC), -1) << "the user's inotify instances were not all taken";
  std::mutex mu;
  std::vector<std::string> warnings;
  ClientOptions options;
  options.log = [&](LogLevel level, std::string_view message) {
    std::lock_guard lk(mu);
    if (level == LogLevel::warning) warnings.emplace_back(message);
  };
  expect_one_wakeup_per_handoff("semaphore without inotify", take_permit, options);
  std::lock_guard lk(mu);
  ASSERT_EQ(warnings.size(), 1u) << "one warning per client";
  EXPECT_NE(warnings[0].find("fs.inotify.max_user_instances"), std::string::npos) << warnings[0];
}

// Whether some waiter is in line for one of the lock files in `dir`: its
// doorbell (doorbell.h) is an abstract socket named after the file's device
// and inode, listed in /proc/net/unix while it waits.
bool a_doorbell_is_up(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    struct stat st {};
    if (::stat(entry.path().c_str(), &st) != 0) continue;
    char name[80];
    std::snprintf(name, sizeof name, "/.doorbell-%llx-%llx-", static_cast<unsigned long long>(st.st_dev),
                  static_cast<unsigned long long>(st.st_ino));
    names.emplace_back(name);
  }
  std::ifstream in("/proc/net/unix");
  for (std::string line; std::getline(in, line);)
    for (const auto& name : names)
      if (line.find(name) != std::string::npos) return true;
  return false;
}

// A Semaphore honours MutexOptions::max_barging_wait (it used to be left at
// its default). A waiter in line in another process is stopped (its place
// counts for 2 s more): with its bound at 0 the holder that releases and
// asks again cannot pass it; with an hour it can. Stopped, the waiter
// cannot race the holder's re-take, so the outcome is the rule's alone.
// Let go, the waiter gets the permit.
TEST_F(StoppedWaiter, ASemaphoreWaiterInLineHonoursItsMaxBargingWait) {
  FencedResource resource(dir_.path() + "/resource", true);
  auto holder = dlock::connect(url());
  for (const long bound_ms : {0L, 3'600'000L}) {
    const std::string name = "barging-" + std::to_string(bound_ms);
    auto held = holder->semaphore(name, 1);
    ASSERT_TRUE(held.try_acquire());
    ChildProcess waiter({DLOCK_TEST_WORKER, "hold", url(), name, "30000", "watchdog", dir_.path() + "/resource",
                         "permit", std::to_string(bound_ms)});
    ASSERT_TRUE(eventually([&] { return a_doorbell_is_up(dir_.path() + "/locks"); }, 10s))
        << "the waiter never got in line";
    ASSERT_TRUE(stop_outside_the_guard(waiter, lock_file(name + ".permits")));
    held.release();
    const bool retaken = held.try_acquire();
    if (bound_ms == 0)
      EXPECT_FALSE(retaken) << "the holder passed a waiter in line whose max_barging_wait is 0";
    else
      EXPECT_TRUE(retaken) << "a waiter that lets newcomers go first for an hour held the holder back";
    if (retaken) held.release();
    waiter.signal(SIGCONT);
    EXPECT_TRUE(waiter.read_line(scaled(10s)).value_or("").starts_with("acquired "))
        << "the waiter never got the permit (max_barging_wait " << bound_ms << " ms)";
    waiter.write_line("unlock");
    EXPECT_EQ(waiter.read_line(scaled(5s)), std::optional<std::string>("unlock ok"));
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, FileFault, ::testing::Values("read", "write", "permit", "leader"),
                         [](const auto& param_info) { return param_info.param; });

}  // namespace
}  // namespace dlock::test
