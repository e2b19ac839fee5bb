// dlock's zk:// mutex and Apache Curator's InterProcessMutex on the same znode path: they
// exclude each other in both orders, they share one queue served in sequence order (with
// fencing tokens that grow along it), and under load neither side ever holds the lock while
// the other does. Likewise dlock's SharedMutex and Curator's InterProcessReadWriteLock:
// readers of both share, a writer of either excludes everyone, and a reader that arrives
// after a waiting writer, of either library, queues behind it. dlock's Counter and Curator's
// SharedCount on one znode read and change the same value. dlock's Election and
// Curator's LeaderLatch: one election, each library seeing the other's leader. And dlock's
// Semaphore and Curator's InterProcessSemaphoreV2 (with one permit, its
// InterProcessSemaphoreMutex): one set of permits, each library waiting for the other's. And
// dlock's Barrier and Curator's DistributedDoubleBarrier: one barrier that opens, and empties,
// only when the members of both libraries together reach the count.
//
// Curator runs as CuratorTool child processes (curator_tool.h). The test also opens a plain
// ZooKeeper session of its own to look at the lock's children, so that it knows a waiter's
// node exists before it starts the next one, and which zxid created each node.
#include "child_process.h"
#include "curator_tool.h"
#include "servers.h"

#include <dlock/dlock.h>

#include <gtest/gtest.h>
#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <future>
#include <map>
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

// The lock under test: a znode path for Curator and (root URL, name) for dlock naming the
// same node, <root>/lock.
struct SharedLock {
  explicit SharedLock(const TempDir& dir)
      : root("/dlock-interop/" + unique_name(dir.path())), path(root + "/lock"),
        dlock_url(server_url("zookeeper") + root) {}
  std::string root;
  std::string path;       // Curator's lock path
  std::string dlock_url;  // dlock: this URL, lock name "lock"
  const std::string name = "lock";
};

// A plain ZooKeeper session (the C client's synchronous calls) to look at the lock's nodes
// without taking part in it.
class ZooKeeperPeek {
 public:
  explicit ZooKeeperPeek(const std::string& url) {
    zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
    std::string hosts = url.substr(url.find("://") + 3);
    hosts = hosts.substr(0, hosts.find_first_of("/?"));
    zh_ = zookeeper_init(hosts.c_str(), &ZooKeeperPeek::on_event, 10'000, nullptr, this, 0);
    if (!zh_) throw std::runtime_error("zookeeper_init refused " + hosts);
    std::unique_lock lk(mu_);
    if (!cv_.wait_for(lk, scaled(10s), [&] { return connected_; })) {
      zookeeper_close(zh_);
      throw std::runtime_error("no ZooKeeper session to " + hosts);
    }
  }
  ~ZooKeeperPeek() { zookeeper_close(zh_); }
  ZooKeeperPeek(const ZooKeeperPeek&) = delete;
  ZooKeeperPeek& operator=(const ZooKeeperPeek&) = delete;

  // The children of `path` in sequence order (the 10 digits at the end); none if it is missing.
  std::vector<std::string> children(const std::string& path) {
    String_vector list{};
    int rc = zoo_get_children(zh_, path.c_str(), 0, &list);
    if (rc == ZNONODE) return {};
    if (rc != ZOK) throw std::runtime_error("getChildren " + path + ": " + zerror(rc));
    std::vector<std::string> out(list.data, list.data + list.count);
    deallocate_String_vector(&list);
    std::sort(out.begin(), out.end(), [](const std::string& a, const std::string& b) {
      return a.substr(a.size() - std::min<std::size_t>(10, a.size())) <
             b.substr(b.size() - std::min<std::size_t>(10, b.size()));
    });
    return out;
  }

  // Polls until `path` has exactly `count` children, or the limit passes; the last listing.
  std::vector<std::string> wait_children(const std::string& path, std::size_t count,
                                         std::chrono::milliseconds limit) {
    const auto until = steady::now() + limit;
    auto now = children(path);
    while (now.size() != count && steady::now() < until) {
      std::this_thread::sleep_for(5ms);
      now = children(path);
    }
    return now;
  }

  // The zxid that created `path`; nullopt if it does not exist.
  std::optional<std::int64_t> czxid(const std::string& path) {
    Stat stat{};
    int rc = zoo_exists(zh_, path.c_str(), 0, &stat);
    if (rc == ZNONODE) return std::nullopt;
    if (rc != ZOK) throw std::runtime_error("exists " + path + ": " + zerror(rc));
    return stat.czxid;
  }

  // Whether `path` is an ephemeral node; nullopt if it does not exist.
  std::optional<bool> ephemeral(const std::string& path) {
    Stat stat{};
    int rc = zoo_exists(zh_, path.c_str(), 0, &stat);
    if (rc == ZNONODE) return std::nullopt;
    if (rc != ZOK) throw std::runtime_error("exists " + path + ": " + zerror(rc));
    return stat.ephemeralOwner != 0;
  }

 private:
  static void on_event(zhandle_t*, int type, int state, const char*, void* context) {
    if (type != ZOO_SESSION_EVENT) return;
    auto* self = static_cast<ZooKeeperPeek*>(context);
    {
      std::lock_guard lk(self->mu_);
      self->connected_ = state == ZOO_CONNECTED_STATE;
    }
    self->cv_.notify_all();
  }

  zhandle_t* zh_ = nullptr;
  std::mutex mu_;
  std::condition_variable cv_;
  bool connected_ = false;
};

// What a DlockWaiter takes: a Mutex, or a SharedMutex's write or read side.
enum class Take { mutex, write, read };

// A dlock lock taken by a thread of its own, so the test's thread stays free to drive the
// other contenders: the thread starts waiting at once (one try_lock_for or
// try_lock_shared_for, so it keeps one place in the queue, bounded so a failing test still
// ends), holds until release(), then unlocks. The destructor releases and joins.
class DlockWaiter {
 public:
  DlockWaiter(std::shared_ptr<Client> client, const std::string& name, std::chrono::milliseconds limit,
              Take take = Take::mutex)
      : client_(std::move(client)), take_(take),
        mutex_(take == Take::mutex ? std::optional<Mutex>(client_->mutex(name)) : std::nullopt),
        shared_(take != Take::mutex ? std::optional<SharedMutex>(client_->shared_mutex(name)) : std::nullopt),
        thread_([this, limit] { run(limit); }) {}
  ~DlockWaiter() {
    release();
    thread_.join();
  }
  DlockWaiter(const DlockWaiter&) = delete;
  DlockWaiter& operator=(const DlockWaiter&) = delete;

  // Its token once it holds the lock; nullopt if it doesn't by `limit` (or gave up).
  std::optional<std::uint64_t> acquired_within(std::chrono::milliseconds limit) {
    std::unique_lock lk(mu_);
    cv_.wait_for(lk, limit, [&] { return state_ != State::waiting; });
    if (state_ == State::waiting || state_ == State::gave_up) return std::nullopt;
    return token_;
  }
  bool holds_now() {
    std::lock_guard lk(mu_);
    return state_ == State::holding;
  }
  // When lock() returned.
  steady::time_point acquired_at() {
    std::lock_guard lk(mu_);
    return acquired_at_;
  }
  // Asks the thread to unlock (if it holds the lock) and waits until it did.
  bool release(std::chrono::milliseconds limit = scaled(10s)) {
    std::unique_lock lk(mu_);
    release_asked_ = true;
    cv_.notify_all();
    return cv_.wait_for(lk, limit, [&] { return state_ == State::released || state_ == State::gave_up; });
  }
  std::string error() {
    std::lock_guard lk(mu_);
    return error_;
  }

 private:
  enum class State { waiting, holding, released, gave_up };

  void run(std::chrono::milliseconds limit) {
    bool got = false;
    std::string error;
    try {
      switch (take_) {
        case Take::mutex: got = mutex_->try_lock_for(limit); break;
        case Take::write: got = shared_->try_lock_for(limit); break;
        case Take::read: got = shared_->try_lock_shared_for(limit); break;
      }
    } catch (const std::exception& e) {
      error = e.what();
    }
    std::unique_lock lk(mu_);
    error_ = error;
    if (!got) {
      state_ = State::gave_up;
      cv_.notify_all();
      return;
    }
    token_ = mutex_ ? mutex_->token() : shared_->token();
    acquired_at_ = steady::now();
    state_ = State::holding;
    cv_.notify_all();
    cv_.wait(lk, [&] { return release_asked_; });
    lk.unlock();
    if (take_ == Take::mutex) mutex_->unlock();
    else if (take_ == Take::write) shared_->unlock();
    else shared_->unlock_shared();
    lk.lock();
    state_ = State::released;
    cv_.notify_all();
  }

  std::shared_ptr<Client> client_;
  Take take_;
  std::optional<Mutex> mutex_;         // Take::mutex
  std::optional<SharedMutex> shared_;  // Take::write, Take::read
  std::mutex mu_;
  std::condition_variable cv_;
  State state_ = State::waiting;
  bool release_asked_ = false;
  std::uint64_t token_ = 0;
  steady::time_point acquired_at_;
  std::string error_;
  std::thread thread_;  // last: starts once everything above exists
};

// A CuratorTool on `path` in `mode` (mutex: InterProcessMutex; rwlock:
// InterProcessReadWriteLock), ready for commands.
std::unique_ptr<ChildProcess> start_curator(const std::string& path, const std::string& mode = "mutex") {
  auto java = std::make_unique<ChildProcess>(curator_tool_command({server_url("zookeeper"), mode, path}));
  auto ready = java->read_line(scaled(30s));
  if (ready != "ready") throw std::runtime_error("CuratorTool did not start: " + ready.value_or("(no line)"));
  return java;
}

// Sends one acquiring command (lock, read-lock, write-lock, try-read-lock 200, ...) and reads
// its answer: the node acquired, or nullopt for "timeout" (or no answer within `limit`).
std::optional<CuratorAcquired> curator_acquire(ChildProcess& java, const std::string& command,
                                               std::chrono::milliseconds limit) {
  java.write_line(command);
  return parse_curator_acquired(java.read_line(limit).value_or(""));
}

// A CuratorTool InterProcessSemaphoreV2 on `path` with `permits` leases, ready for commands.
std::unique_ptr<ChildProcess> start_curator_semaphore(const std::string& path, int permits) {
  auto java = std::make_unique<ChildProcess>(
      curator_tool_command({server_url("zookeeper"), "semaphore", path, std::to_string(permits)}));
  auto ready = java->read_line(scaled(30s));
  if (ready != "ready") throw std::runtime_error("CuratorTool did not start: " + ready.value_or("(no line)"));
  return java;
}

std::optional<CuratorAcquired> curator_lock(ChildProcess& java, std::chrono::milliseconds limit) {
  return curator_acquire(java, "lock", limit);
}

// steady_clock in nanoseconds: the clock of CuratorTool's interval lines.
std::int64_t since_boot_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(steady::now().time_since_epoch()).count();
}

std::uint64_t sequence_of(const std::string& node) { return std::stoull(node.substr(node.size() - 10)); }

TEST(ZooKeeperInterop, CuratorHoldsThenDlockWaitsAndGetsItOnRelease) {
  TempDir dir;
  SharedLock lock(dir);
  ZooKeeperPeek peek(lock.dlock_url);
  auto java = start_curator(lock.path);
  auto held = curator_lock(*java, scaled(10s));
  ASSERT_TRUE(held);
  EXPECT_NE(held->node.find("-lock-"), std::string::npos) << held->node;

  auto client = dlock::connect(lock.dlock_url);
  auto m = client->mutex(lock.name);
  EXPECT_FALSE(m.try_lock()) << "dlock took a lock Curator holds";
  EXPECT_FALSE(m.try_lock_for(200ms)) << "dlock took a lock Curator holds";
  // Neither attempt leaves a node behind, not even for a moment after it returned: only
  // Curator's stays (a waiter that gives up deletes its node before try_lock_for returns).
  EXPECT_EQ(peek.children(lock.path), std::vector<std::string>{held->node});

  // A blocking waiter queues behind Curator's node and gets the lock once it is deleted.
  DlockWaiter waiter(client, lock.name, scaled(30s));
  auto queue = peek.wait_children(lock.path, 2, scaled(10s));
  ASSERT_EQ(queue.size(), 2u) << "dlock's waiter never made its node";
  EXPECT_EQ(queue.front(), held->node);
  const std::string ours = queue.back();
  EXPECT_NE(ours.find("_c_"), std::string::npos) << ours;
  EXPECT_NE(ours.find("-lock-"), std::string::npos) << ours;
  EXPECT_FALSE(waiter.acquired_within(300ms)) << "dlock got the lock while Curator held it";

  java->write_line("unlock");
  ASSERT_EQ(java->read_line(scaled(10s)), "released");
  auto token = waiter.acquired_within(scaled(10s));
  ASSERT_TRUE(token) << "dlock did not get the lock Curator released " << waiter.error();
  EXPECT_EQ(*token, static_cast<std::uint64_t>(peek.czxid(lock.path + "/" + ours).value_or(-1)))
      << "the token is not the czxid of dlock's node";
  EXPECT_GT(*token, static_cast<std::uint64_t>(held->czxid));
  EXPECT_TRUE(waiter.release());
  // unlock() sends the delete and returns: another session sees it applied
  // a round trip later.
  EXPECT_TRUE(peek.wait_children(lock.path, 0, scaled(2s)).empty()) << "dlock's unlock left its node";

  java->write_line("quit");
  EXPECT_EQ(java->wait(scaled(10s)), 0);
}

TEST(ZooKeeperInterop, DlockHoldsThenCuratorWaitsAndGetsItOnUnlock) {
  TempDir dir;
  SharedLock lock(dir);
  ZooKeeperPeek peek(lock.dlock_url);
  auto java = start_curator(lock.path);

  auto client = dlock::connect(lock.dlock_url);
  auto m = client->mutex(lock.name);
  m.lock();
  const auto token = m.token();
  const auto ours = peek.children(lock.path);
  ASSERT_EQ(ours.size(), 1u);
  EXPECT_EQ(token, static_cast<std::uint64_t>(peek.czxid(lock.path + "/" + ours.front()).value_or(-1)));

  java->write_line("try-lock 0");
  EXPECT_EQ(java->read_line(scaled(10s)), "timeout") << "Curator took a lock dlock holds";
  java->write_line("try-lock 200");
  EXPECT_EQ(java->read_line(scaled(10s)), "timeout") << "Curator took a lock dlock holds";
  EXPECT_EQ(peek.children(lock.path), ours) << "Curator's failed attempts left a node";

  java->write_line("lock");
  auto queue = peek.wait_children(lock.path, 2, scaled(10s));
  ASSERT_EQ(queue.size(), 2u) << "Curator's waiter never made its node";
  EXPECT_EQ(queue.front(), ours.front());
  EXPECT_EQ(java->read_line(300ms), std::nullopt) << "Curator got the lock while dlock held it";

  m.unlock();
  auto got = parse_curator_acquired(java->read_line(scaled(10s)).value_or(""));
  ASSERT_TRUE(got) << "Curator did not get the lock dlock released";
  EXPECT_EQ(got->node, queue.back());
  EXPECT_GT(static_cast<std::uint64_t>(got->czxid), token);
  // And dlock is shut out again while Curator holds it.
  EXPECT_FALSE(m.try_lock_for(100ms));

  java->write_line("unlock");
  EXPECT_EQ(java->read_line(scaled(10s)), "released");
  EXPECT_TRUE(m.try_lock()) << "dlock cannot take the lock after Curator released it";
  m.unlock();
  java->write_line("quit");
  EXPECT_EQ(java->wait(scaled(10s)), 0);
}

// Curator holds; then a dlock waiter A, a Curator waiter B and a dlock waiter C queue, each
// only once the previous one's node exists. Releasing one at a time must hand the lock to A,
// B, C in that order, each only after the previous released, with tokens (czxids) growing.
TEST(ZooKeeperInterop, MixedQueueIsServedInSequenceOrder) {
  TempDir dir;
  SharedLock lock(dir);
  ZooKeeperPeek peek(lock.dlock_url);
  auto head = start_curator(lock.path);
  auto b = start_curator(lock.path);  // both JVMs up before the queue forms
  auto held = curator_lock(*head, scaled(10s));
  ASSERT_TRUE(held);

  auto client_a = dlock::connect(lock.dlock_url);
  auto client_c = dlock::connect(lock.dlock_url);
  DlockWaiter a(client_a, lock.name, scaled(60s));
  auto queue = peek.wait_children(lock.path, 2, scaled(10s));
  ASSERT_EQ(queue.size(), 2u) << "A never made its node";
  const std::string node_a = queue[1];

  b->write_line("lock");
  queue = peek.wait_children(lock.path, 3, scaled(10s));
  ASSERT_EQ(queue.size(), 3u) << "B never made its node";
  const std::string node_b = queue[2];

  DlockWaiter c(client_c, lock.name, scaled(60s));
  queue = peek.wait_children(lock.path, 4, scaled(10s));
  ASSERT_EQ(queue.size(), 4u) << "C never made its node";
  const std::string node_c = queue[3];
  ASSERT_EQ(queue, (std::vector<std::string>{held->node, node_a, node_b, node_c}));
  EXPECT_LT(sequence_of(held->node), sequence_of(node_a));
  EXPECT_LT(sequence_of(node_a), sequence_of(node_b));
  EXPECT_LT(sequence_of(node_b), sequence_of(node_c));
  const auto czxid_a = peek.czxid(lock.path + "/" + node_a).value_or(-1);
  const auto czxid_c = peek.czxid(lock.path + "/" + node_c).value_or(-1);

  // Nobody but the head holds it.
  EXPECT_FALSE(a.acquired_within(200ms));
  EXPECT_EQ(b->read_line(1ms), std::nullopt);
  EXPECT_FALSE(c.holds_now());

  // Head → A.
  const auto head_released = steady::now();
  head->write_line("unlock");
  ASSERT_EQ(head->read_line(scaled(10s)), "released");
  auto token_a = a.acquired_within(scaled(10s));
  ASSERT_TRUE(token_a) << "A was not served after the head released " << a.error();
  EXPECT_GT(a.acquired_at(), head_released);
  EXPECT_EQ(static_cast<std::int64_t>(*token_a), czxid_a) << "A's token is not its node's czxid";
  EXPECT_GT(static_cast<std::int64_t>(*token_a), held->czxid);
  EXPECT_EQ(b->read_line(300ms), std::nullopt) << "B got the lock while A held it";
  EXPECT_FALSE(c.holds_now()) << "C got the lock while A held it";

  // A → B.
  ASSERT_TRUE(a.release());
  auto got_b = parse_curator_acquired(b->read_line(scaled(10s)).value_or(""));
  ASSERT_TRUE(got_b) << "B (Curator) was not served after A (dlock) released";
  EXPECT_EQ(got_b->node, node_b);
  EXPECT_GT(got_b->czxid, static_cast<std::int64_t>(*token_a));
  EXPECT_FALSE(c.acquired_within(300ms)) << "C got the lock while B held it";

  // B → C.
  const auto b_released = steady::now();
  b->write_line("unlock");
  ASSERT_EQ(b->read_line(scaled(10s)), "released");
  auto token_c = c.acquired_within(scaled(10s));
  ASSERT_TRUE(token_c) << "C (dlock) was not served after B (Curator) released " << c.error();
  EXPECT_GT(c.acquired_at(), b_released);
  EXPECT_EQ(static_cast<std::int64_t>(*token_c), czxid_c) << "C's token is not its node's czxid";
  EXPECT_GT(static_cast<std::int64_t>(*token_c), got_b->czxid);
  ASSERT_TRUE(c.release());

  EXPECT_TRUE(peek.wait_children(lock.path, 0, scaled(5s)).empty()) << "nodes left after the queue drained";
  for (auto* java : {head.get(), b.get()}) {
    java->write_line("quit");
    EXPECT_EQ(java->wait(scaled(10s)), 0);
  }
}

// Two Curator processes and two dlock clients (threads, one session each) do their critical
// sections on one path, each a non-atomic read → sleep → write of a shared counter file, and
// log the section's bounds. No update may be lost and no two sections may overlap.
TEST(ZooKeeperInterop, CuratorAndDlockContendingLoseNoUpdateAndNeverOverlap) {
  TempDir dir;
  SharedLock lock(dir);
  const auto counter = dir.path() + "/counter";
  const auto log = dir.path() + "/intervals";
  constexpr int sections = 100;  // per contender; a section is ~0.5 ms of work plus a handoff
  constexpr int work_us = 500;

  std::vector<std::unique_ptr<ChildProcess>> javas;
  for (const char* tag : {"J1", "J2"}) {
    javas.push_back(std::make_unique<ChildProcess>(curator_tool_command(
        {"contend", server_url("zookeeper"), lock.path, std::to_string(sections), counter, log, "--tag", tag,
         "--work-us", std::to_string(work_us), "--wait-go"})));
  }
  for (auto& j : javas) ASSERT_EQ(j->read_line(scaled(30s)), "ready");
  std::vector<std::shared_ptr<Client>> clients;
  for (int i = 0; i < 2; ++i) clients.push_back(dlock::connect(lock.dlock_url));

  std::map<std::string, std::vector<std::pair<std::int64_t, std::uint64_t>>> tokens;  // tag → (start, token)
  std::mutex tokens_mu;
  std::atomic<int> failures{0};
  std::vector<std::thread> dlocks;
  for (auto& j : javas) j->write_line("go");
  for (int i = 0; i < 2; ++i) {
    dlocks.emplace_back([&, i] {
      const std::string tag = "D" + std::to_string(i + 1);
      auto m = clients[i]->mutex(lock.name);
      try {
        for (int k = 0; k < sections; ++k) {
          if (!m.try_lock_for(scaled(60s))) {
            ++failures;
            return;
          }
          const auto start = since_boot_ns();
          const auto value = read_counter_file(counter);
          std::this_thread::sleep_for(std::chrono::microseconds(work_us));
          write_counter_file(counter, value + 1);
          const auto end = since_boot_ns();
          const auto token = m.token();
          m.unlock();
          append_interval(log, {tag, start, end});
          std::lock_guard lk(tokens_mu);
          tokens[tag].emplace_back(start, token);
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << tag << ": " << e.what();
        ++failures;
      }
    });
  }
  for (auto& t : dlocks) t.join();
  for (auto& j : javas) EXPECT_EQ(j->read_line(scaled(120s)), "done " + std::to_string(sections));
  for (auto& j : javas) EXPECT_EQ(j->wait(scaled(10s)), 0);
  EXPECT_EQ(failures.load(), 0);

  constexpr int total = 4 * sections;
  EXPECT_EQ(read_counter_file(counter), total) << "lost updates: the lock let two holders in";
  const auto intervals = read_intervals(log);
  EXPECT_EQ(intervals.size(), static_cast<std::size_t>(total));
  const auto overlaps = overlapping_intervals(intervals);
  EXPECT_TRUE(overlaps.empty()) << overlaps.size() << " overlapping sections, e.g. " << overlaps.front().first.tag
                                << " and " << overlaps.front().second.tag;
  std::map<std::string, int> per_tag;
  for (const auto& i : intervals) ++per_tag[i.tag];
  for (const char* tag : {"J1", "J2", "D1", "D2"}) EXPECT_EQ(per_tag[tag], sections) << tag;

  // Both sides took turns: the lock passed between Java and C++ holders, not one side first.
  std::vector<Interval> sides = intervals;
  for (auto& i : sides) i.tag = i.tag.substr(0, 1);
  const auto alternations = tag_changes(sides);
  RecordProperty("java_dlock_alternations", static_cast<int>(alternations));
  EXPECT_GT(alternations, 1u) << "Curator and dlock never alternated";

  // dlock's tokens grow in the order its sections ran.
  std::vector<std::pair<std::int64_t, std::uint64_t>> all;
  for (auto& [tag, list] : tokens) all.insert(all.end(), list.begin(), list.end());
  std::sort(all.begin(), all.end());
  for (std::size_t k = 1; k < all.size(); ++k)
    EXPECT_LT(all[k - 1].second, all[k].second) << "a later section got a token no larger";
}

// ---------------------------------------------------------------------------------------
// SharedMutex and Curator's InterProcessReadWriteLock on the same path: __READ__ and
// __WRIT__ nodes in one sequence, readers share, a writer excludes everyone, and a reader
// that arrives after a waiting writer queues behind it, whichever library each one uses.

bool is_read_node(const std::string& node) { return node.find("__READ__") != std::string::npos; }
bool is_write_node(const std::string& node) { return node.find("__WRIT__") != std::string::npos; }

// The one node of `after` that `before` lacks (the node a new contender just made).
std::string new_node(const std::vector<std::string>& before, const std::vector<std::string>& after) {
  for (const auto& n : after)
    if (std::find(before.begin(), before.end(), n) == before.end()) return n;
  return "";
}

std::uint64_t czxid_of(ZooKeeperPeek& peek, const SharedLock& lock, const std::string& node) {
  return static_cast<std::uint64_t>(peek.czxid(lock.path + "/" + node).value_or(-1));
}

// A Curator reader and a dlock reader hold at once; a writer of either library is refused
// while they do; a dlock writer and then a Curator writer queue, and are served in that
// order only once both readers have released.
TEST(ZooKeeperInterop, CuratorAndDlockReadersShareAndShutOutBothWriters) {
  TempDir dir;
  SharedLock lock(dir);
  ZooKeeperPeek peek(lock.dlock_url);
  auto curator_reader = start_curator(lock.path, "rwlock");
  auto curator_writer = start_curator(lock.path, "rwlock");

  auto j_read = curator_acquire(*curator_reader, "read-lock", scaled(10s));
  ASSERT_TRUE(j_read);
  EXPECT_TRUE(is_read_node(j_read->node)) << j_read->node;

  auto reader_client = dlock::connect(lock.dlock_url);
  auto reader = reader_client->shared_mutex(lock.name);
  ASSERT_TRUE(reader.try_lock_shared_for(scaled(10s))) << "dlock's reader was refused beside Curator's";
  const auto d_read_token = reader.token();
  const auto readers = peek.children(lock.path);
  ASSERT_EQ(readers.size(), 2u);
  EXPECT_EQ(readers.front(), j_read->node);
  const std::string d_read = readers.back();
  EXPECT_TRUE(is_read_node(d_read)) << d_read;
  EXPECT_NE(d_read.find("_c_"), std::string::npos) << d_read;
  EXPECT_EQ(d_read_token, czxid_of(peek, lock, d_read)) << "the reader's token is not its node's czxid";
  EXPECT_EQ(static_cast<std::uint64_t>(j_read->czxid), czxid_of(peek, lock, j_read->node));

  // Writers of both libraries are shut out, and their failed tries leave no node.
  auto writer_client = dlock::connect(lock.dlock_url);
  auto writer = writer_client->shared_mutex(lock.name);
  EXPECT_FALSE(writer.try_lock()) << "dlock took the write lock while two readers held it";
  EXPECT_FALSE(writer.try_lock_for(200ms)) << "dlock took the write lock while two readers held it";
  curator_writer->write_line("try-write-lock 0");
  EXPECT_EQ(curator_writer->read_line(scaled(10s)), "timeout") << "Curator took the write lock over two readers";
  curator_writer->write_line("try-write-lock 200");
  EXPECT_EQ(curator_writer->read_line(scaled(10s)), "timeout") << "Curator took the write lock over two readers";
  EXPECT_EQ(peek.children(lock.path), readers) << "a refused writer left its node";

  // A dlock writer, then a Curator writer, queue behind the readers.
  DlockWaiter d_writer(writer_client, lock.name, scaled(60s), Take::write);
  auto queue = peek.wait_children(lock.path, 3, scaled(10s));
  ASSERT_EQ(queue.size(), 3u) << "dlock's writer never made its node";
  const std::string d_write = new_node(readers, queue);
  EXPECT_TRUE(is_write_node(d_write)) << d_write;
  curator_writer->write_line("write-lock");
  const auto before_j_write = queue;
  queue = peek.wait_children(lock.path, 4, scaled(10s));
  ASSERT_EQ(queue.size(), 4u) << "Curator's writer never made its node";
  const std::string j_write = new_node(before_j_write, queue);
  EXPECT_EQ(queue, (std::vector<std::string>{j_read->node, d_read, d_write, j_write}));
  EXPECT_FALSE(d_writer.acquired_within(300ms)) << "dlock's writer got the lock while two readers held it";

  // One reader gone is not enough.
  curator_reader->write_line("unlock");
  ASSERT_EQ(curator_reader->read_line(scaled(10s)), "released");
  EXPECT_FALSE(d_writer.acquired_within(300ms)) << "dlock's writer got the lock while dlock's reader held it";
  EXPECT_EQ(curator_writer->read_line(1ms), std::nullopt) << "Curator's writer got the lock over a reader";

  // Both gone: the first writer, dlock's.
  reader.unlock_shared();
  auto w_token = d_writer.acquired_within(scaled(10s));
  ASSERT_TRUE(w_token) << "dlock's writer was not served once both readers released " << d_writer.error();
  EXPECT_EQ(*w_token, czxid_of(peek, lock, d_write)) << "the writer's token is not its node's czxid";
  EXPECT_GT(*w_token, d_read_token);
  EXPECT_EQ(curator_writer->read_line(300ms), std::nullopt) << "Curator's writer got the lock while dlock's held it";

  // Then Curator's writer.
  ASSERT_TRUE(d_writer.release());
  auto j_got = parse_curator_acquired(curator_writer->read_line(scaled(10s)).value_or(""));
  ASSERT_TRUE(j_got) << "Curator's writer was not served after dlock's released";
  EXPECT_EQ(j_got->node, j_write);
  EXPECT_GT(static_cast<std::uint64_t>(j_got->czxid), *w_token);
  EXPECT_FALSE(reader.try_lock_shared()) << "dlock read while Curator's writer held the lock";
  curator_writer->write_line("unlock");
  EXPECT_EQ(curator_writer->read_line(scaled(10s)), "released");

  EXPECT_TRUE(peek.wait_children(lock.path, 0, scaled(5s)).empty()) << "nodes left after everyone released";
  for (auto* java : {curator_reader.get(), curator_writer.get()}) {
    java->write_line("quit");
    EXPECT_EQ(java->wait(scaled(10s)), 0);
  }
}

// Curator writes: dlock can neither read nor write; a queued dlock reader is served when
// Curator releases, beside a second dlock reader.
TEST(ZooKeeperInterop, CuratorWriterExcludesDlockReaders) {
  TempDir dir;
  SharedLock lock(dir);
  ZooKeeperPeek peek(lock.dlock_url);
  auto java = start_curator(lock.path, "rwlock");
  auto held = curator_acquire(*java, "write-lock", scaled(10s));
  ASSERT_TRUE(held);
  EXPECT_TRUE(is_write_node(held->node)) << held->node;

  auto client = dlock::connect(lock.dlock_url);
  auto m = client->shared_mutex(lock.name);
  EXPECT_FALSE(m.try_lock_shared()) << "dlock read while Curator wrote";
  EXPECT_FALSE(m.try_lock_shared_for(200ms)) << "dlock read while Curator wrote";
  EXPECT_FALSE(m.try_lock()) << "dlock wrote while Curator wrote";
  EXPECT_EQ(peek.children(lock.path), std::vector<std::string>{held->node}) << "a refused reader left its node";

  DlockWaiter waiter(client, lock.name, scaled(30s), Take::read);
  auto queue = peek.wait_children(lock.path, 2, scaled(10s));
  ASSERT_EQ(queue.size(), 2u) << "dlock's reader never made its node";
  EXPECT_EQ(queue.front(), held->node);
  EXPECT_TRUE(is_read_node(queue.back())) << queue.back();
  EXPECT_FALSE(waiter.acquired_within(300ms)) << "dlock read while Curator wrote";

  java->write_line("unlock");
  ASSERT_EQ(java->read_line(scaled(10s)), "released");
  auto token = waiter.acquired_within(scaled(10s));
  ASSERT_TRUE(token) << "dlock's reader was not served after Curator's writer released " << waiter.error();
  EXPECT_EQ(*token, czxid_of(peek, lock, queue.back())) << "the reader's token is not its node's czxid";
  EXPECT_GT(*token, static_cast<std::uint64_t>(held->czxid));
  // Readers share: another dlock client reads beside it; Curator can't write.
  auto other = dlock::connect(lock.dlock_url)->shared_mutex(lock.name);
  EXPECT_TRUE(other.try_lock_shared()) << "a second reader was refused beside the first";
  java->write_line("try-write-lock 100");
  EXPECT_EQ(java->read_line(scaled(10s)), "timeout") << "Curator wrote while dlock read";
  other.unlock_shared();
  ASSERT_TRUE(waiter.release());

  EXPECT_TRUE(peek.wait_children(lock.path, 0, scaled(5s)).empty()) << "nodes left after everyone released";
  java->write_line("quit");
  EXPECT_EQ(java->wait(scaled(10s)), 0);
}

// dlock writes: Curator can neither read nor write; a queued Curator reader is served when
// dlock releases, and dlock then reads beside it but cannot write.
TEST(ZooKeeperInterop, DlockWriterExcludesCuratorReaders) {
  TempDir dir;
  SharedLock lock(dir);
  ZooKeeperPeek peek(lock.dlock_url);
  auto java = start_curator(lock.path, "rwlock");

  auto client = dlock::connect(lock.dlock_url);
  auto m = client->shared_mutex(lock.name);
  m.lock();
  const auto token = m.token();
  const auto ours = peek.children(lock.path);
  ASSERT_EQ(ours.size(), 1u);
  EXPECT_TRUE(is_write_node(ours.front())) << ours.front();
  EXPECT_EQ(token, czxid_of(peek, lock, ours.front())) << "the writer's token is not its node's czxid";

  java->write_line("try-read-lock 0");
  EXPECT_EQ(java->read_line(scaled(10s)), "timeout") << "Curator read while dlock wrote";
  java->write_line("try-read-lock 200");
  EXPECT_EQ(java->read_line(scaled(10s)), "timeout") << "Curator read while dlock wrote";
  java->write_line("try-write-lock 0");
  EXPECT_EQ(java->read_line(scaled(10s)), "timeout") << "Curator wrote while dlock wrote";
  EXPECT_EQ(peek.children(lock.path), ours) << "Curator's failed attempts left a node";

  java->write_line("read-lock");
  auto queue = peek.wait_children(lock.path, 2, scaled(10s));
  ASSERT_EQ(queue.size(), 2u) << "Curator's reader never made its node";
  EXPECT_EQ(queue.front(), ours.front());
  EXPECT_TRUE(is_read_node(queue.back())) << queue.back();
  EXPECT_EQ(java->read_line(300ms), std::nullopt) << "Curator read while dlock wrote";

  m.unlock();
  auto got = parse_curator_acquired(java->read_line(scaled(10s)).value_or(""));
  ASSERT_TRUE(got) << "Curator's reader was not served after dlock's writer released";
  EXPECT_EQ(got->node, queue.back());
  EXPECT_GT(static_cast<std::uint64_t>(got->czxid), token);
  EXPECT_FALSE(m.try_lock_for(100ms)) << "dlock wrote while Curator read";
  EXPECT_TRUE(m.try_lock_shared()) << "dlock could not read beside Curator's reader";
  m.unlock_shared();

  java->write_line("unlock");
  EXPECT_EQ(java->read_line(scaled(10s)), "released");
  EXPECT_TRUE(m.try_lock()) << "dlock cannot write after Curator's reader released";
  m.unlock();
  java->write_line("quit");
  EXPECT_EQ(java->wait(scaled(10s)), 0);
}

// No writer starves across libraries: Curator's reader A holds; dlock's writer W queues;
// then a dlock reader R and a Curator reader C, arriving after W, must not slip in beside A
// — they queue behind W. A releases → W alone; W releases → R and C together.
TEST(ZooKeeperInterop, ReadersArrivingAfterAWaitingWriterQueueBehindIt) {
  TempDir dir;
  SharedLock lock(dir);
  ZooKeeperPeek peek(lock.dlock_url);
  auto java_a = start_curator(lock.path, "rwlock");
  auto java_c = start_curator(lock.path, "rwlock");  // both JVMs up before the queue forms

  auto a = curator_acquire(*java_a, "read-lock", scaled(10s));
  ASSERT_TRUE(a);
  EXPECT_TRUE(is_read_node(a->node)) << a->node;

  auto client_w = dlock::connect(lock.dlock_url);
  auto client_r = dlock::connect(lock.dlock_url);
  DlockWaiter w(client_w, lock.name, scaled(60s), Take::write);
  auto queue = peek.wait_children(lock.path, 2, scaled(10s));
  ASSERT_EQ(queue.size(), 2u) << "W never made its node";
  const std::string node_w = queue[1];
  EXPECT_TRUE(is_write_node(node_w)) << node_w;
  EXPECT_FALSE(w.acquired_within(200ms)) << "W wrote while A read";

  // Late readers are refused while W waits (A alone holds, and only reads).
  auto r_try = client_r->shared_mutex(lock.name);
  EXPECT_FALSE(r_try.try_lock_shared()) << "dlock's reader overtook the waiting writer";
  EXPECT_FALSE(r_try.try_lock_shared_for(300ms)) << "dlock's reader overtook the waiting writer";
  java_c->write_line("try-read-lock 300");
  EXPECT_EQ(java_c->read_line(scaled(10s)), "timeout") << "Curator's reader overtook dlock's waiting writer";
  EXPECT_EQ(peek.children(lock.path), queue) << "a refused reader left its node";

  // So they queue.
  DlockWaiter r(client_r, lock.name, scaled(60s), Take::read);
  queue = peek.wait_children(lock.path, 3, scaled(10s));
  ASSERT_EQ(queue.size(), 3u) << "R never made its node";
  const std::string node_r = queue[2];
  java_c->write_line("read-lock");
  queue = peek.wait_children(lock.path, 4, scaled(10s));
  ASSERT_EQ(queue.size(), 4u) << "C never made its node";
  const std::string node_c = queue[3];
  ASSERT_EQ(queue, (std::vector<std::string>{a->node, node_w, node_r, node_c}));
  EXPECT_TRUE(is_read_node(node_r)) << node_r;
  EXPECT_TRUE(is_read_node(node_c)) << node_c;
  EXPECT_LT(a->sequence, sequence_of(node_w));
  EXPECT_LT(sequence_of(node_w), sequence_of(node_r));
  EXPECT_LT(sequence_of(node_r), sequence_of(node_c));
  EXPECT_FALSE(r.acquired_within(300ms)) << "R read beside A while W waited";
  EXPECT_EQ(java_c->read_line(1ms), std::nullopt) << "C read beside A while W waited";
  EXPECT_FALSE(w.holds_now()) << "W wrote while A read";

  // A → W, alone.
  const auto a_released = steady::now();
  java_a->write_line("unlock");
  ASSERT_EQ(java_a->read_line(scaled(10s)), "released");
  auto token_w = w.acquired_within(scaled(10s));
  ASSERT_TRUE(token_w) << "W was not served after A released " << w.error();
  EXPECT_GT(w.acquired_at(), a_released);
  EXPECT_EQ(*token_w, czxid_of(peek, lock, node_w)) << "W's token is not its node's czxid";
  EXPECT_GT(*token_w, static_cast<std::uint64_t>(a->czxid));
  EXPECT_FALSE(r.acquired_within(300ms)) << "R read while W wrote";
  EXPECT_EQ(java_c->read_line(1ms), std::nullopt) << "C read while W wrote";

  // W → R and C, together.
  const auto czxid_r = czxid_of(peek, lock, node_r);
  const auto w_released = steady::now();
  ASSERT_TRUE(w.release());
  auto token_r = r.acquired_within(scaled(10s));
  ASSERT_TRUE(token_r) << "R was not served after W released " << r.error();
  EXPECT_GT(r.acquired_at(), w_released);
  EXPECT_EQ(*token_r, czxid_r) << "R's token is not its node's czxid";
  EXPECT_GT(*token_r, *token_w);
  auto got_c = parse_curator_acquired(java_c->read_line(scaled(10s)).value_or(""));
  ASSERT_TRUE(got_c) << "C was not served after W released";
  EXPECT_EQ(got_c->node, node_c);
  EXPECT_GT(static_cast<std::uint64_t>(got_c->czxid), *token_r);
  EXPECT_TRUE(r.holds_now()) << "R lost its read lock when C got one";

  ASSERT_TRUE(r.release());
  java_c->write_line("unlock");
  EXPECT_EQ(java_c->read_line(scaled(10s)), "released");
  EXPECT_TRUE(peek.wait_children(lock.path, 0, scaled(5s)).empty()) << "nodes left after the queue drained";
  for (auto* java : {java_a.get(), java_c.get()}) {
    java->write_line("quit");
    EXPECT_EQ(java->wait(scaled(10s)), 0);
  }
}

// dlock's Counter and Curator's SharedCount on the same znode read and change one value
// (4-byte big-endian int), in both directions, negative values included.
TEST(ZooKeeperInterop, CounterAndCuratorSharedCountShareOneValue) {
  TempDir dir;
  SharedLock node(dir);
  auto client = dlock::connect(node.dlock_url);
  auto counter = client->counter(node.name);
  auto curator_count = [&](std::vector<std::string> delta) {
    std::vector<std::string> args{server_url("zookeeper"), "count", node.path};
    args.insert(args.end(), delta.begin(), delta.end());
    ChildProcess java(curator_tool_command(args));
    auto line = java.read_line(scaled(30s));
    EXPECT_EQ(java.wait(scaled(10s)), 0);
    return line.value_or("(no answer)");
  };
  counter.store(-123'456);
  EXPECT_EQ(curator_count({}), "count -123456");
  EXPECT_EQ(curator_count({"1000"}), "count -122456");
  EXPECT_EQ(counter.fetch_add(1), -122'456);
  EXPECT_EQ(curator_count({}), "count -122455");
}

// A counter made with CounterWidth::int64 is Curator's DistributedAtomicLong: 8 bytes, the
// whole int64 range, both ways.
TEST(ZooKeeperInterop, Int64CounterAndCuratorDistributedAtomicLongShareOneValue) {
  TempDir dir;
  SharedLock node(dir);
  auto client = dlock::connect(node.dlock_url);
  auto counter = client->counter(node.name, CounterWidth::int64);
  auto curator_long = [&](std::vector<std::string> delta) {
    std::vector<std::string> args{server_url("zookeeper"), "atomic-long", node.path};
    args.insert(args.end(), delta.begin(), delta.end());
    ChildProcess java(curator_tool_command(args));
    auto line = java.read_line(scaled(30s));
    EXPECT_EQ(java.wait(scaled(10s)), 0);
    return line.value_or("(no answer)");
  };
  counter.store(-5'000'000'000);
  EXPECT_EQ(curator_long({}), "long -5000000000");
  EXPECT_EQ(curator_long({"10000000000"}), "long 5000000000");
  EXPECT_EQ(counter.fetch_add(1), 5'000'000'000);
  EXPECT_EQ(curator_long({}), "long 5000000001");
}

// dlock's Election and Curator's LeaderLatch on one path are one election: each sees the
// other's participant id as leader, each waits while the other leads, and a resign (or
// close) hands over across the two libraries.
TEST(ZooKeeperInterop, LeaderLatchAndElectionAreOneElection) {
  TempDir dir;
  SharedLock where(dir);
  ChildProcess java(curator_tool_command({server_url("zookeeper"), "latch", where.path, "java-1"}));
  ASSERT_EQ(java.read_line(scaled(30s)), "ready");
  java.write_line("start");
  ASSERT_EQ(java.read_line(scaled(10s)), "started");
  java.write_line("await 10000");
  ASSERT_EQ(java.read_line(scaled(15s)), "leader");

  auto client = dlock::connect(where.dlock_url);
  auto election = client->election(where.name);
  EXPECT_EQ(election.leader(), "java-1") << "dlock does not see Curator's leader";
  EXPECT_FALSE(election.campaign_for(300ms, "cpp-1")) << "dlock led while Curator's LeaderLatch did";

  std::atomic<bool> leads{false}, resign{false};
  std::thread candidate([&] {
    election.campaign("cpp-1");
    leads = true;
    while (!resign) std::this_thread::sleep_for(5ms);
    election.resign();
  });
  std::this_thread::sleep_for(scaled(300ms));
  EXPECT_FALSE(leads.load());
  java.write_line("close");
  ASSERT_EQ(java.read_line(scaled(10s)), "closed");
  const auto until = steady::now() + scaled(10s);
  while (!leads && steady::now() < until) std::this_thread::sleep_for(10ms);
  EXPECT_TRUE(leads.load()) << "Curator's close did not hand over to dlock";

  java.write_line("start");
  ASSERT_EQ(java.read_line(scaled(10s)), "started");
  java.write_line("leader");
  EXPECT_EQ(java.read_line(scaled(10s)), "leader-id cpp-1") << "Curator does not see dlock's leader";
  java.write_line("await 300");
  EXPECT_EQ(java.read_line(scaled(10s)), "timeout") << "Curator led while dlock did";
  resign = true;
  candidate.join();
  java.write_line("await 10000");
  EXPECT_EQ(java.read_line(scaled(15s)), "leader") << "dlock's resign did not hand over to Curator";
  EXPECT_EQ(election.leader(), "java-1");
  java.write_line("quit");
  EXPECT_EQ(java.wait(scaled(10s)), std::optional<int>(0));
}

// dlock's Semaphore and Curator's InterProcessSemaphoreV2 on one path hand out one set of
// permits: lease nodes under <path>/leases in the same naming, the mutex under <path>/locks
// released once a permit is taken or given up, and each library waits for the other's
// permits to come back.
TEST(ZooKeeperInterop, SemaphoreAndCuratorSemaphoreV2ShareOneSetOfPermits) {
  TempDir dir;
  SharedLock lock(dir);
  ZooKeeperPeek peek(lock.dlock_url);
  const std::string leases = lock.path + "/leases";
  auto java = start_curator_semaphore(lock.path, 3);
  auto first = curator_acquire(*java, "acquire", scaled(10s));
  auto second = curator_acquire(*java, "acquire", scaled(10s));
  ASSERT_TRUE(first && second);
  EXPECT_NE(first->node.find("-lease-"), std::string::npos) << first->node;

  auto client = dlock::connect(lock.dlock_url);
  auto semaphore = client->semaphore(lock.name, 3);
  ASSERT_TRUE(semaphore.try_acquire()) << "the third of three permits was not free";
  EXPECT_FALSE(semaphore.try_acquire_for(200ms)) << "dlock took a fourth of three permits";
  auto nodes = peek.children(leases);
  ASSERT_EQ(nodes.size(), 3u);
  EXPECT_EQ(nodes[0], first->node);
  EXPECT_EQ(nodes[1], second->node);
  EXPECT_EQ(nodes[2].rfind("_c_", 0), 0u) << nodes[2];
  EXPECT_NE(nodes[2].find("-lease-"), std::string::npos) << nodes[2];
  EXPECT_EQ(semaphore.token(), static_cast<std::uint64_t>(peek.czxid(leases + "/" + nodes[2]).value_or(-1)));
  EXPECT_TRUE(peek.children(lock.path + "/locks").empty()) << "the takers' mutex was left held";
  EXPECT_EQ(semaphore.in_use(), 3);

  // Curator waits for dlock's permit.
  EXPECT_FALSE(curator_acquire(*java, "try-acquire 200", scaled(10s))) << "Curator took a fourth of three";
  const auto dlock_token = semaphore.token();
  semaphore.release();
  auto third = curator_acquire(*java, "try-acquire 10000", scaled(20s));
  ASSERT_TRUE(third) << "Curator did not get the permit dlock gave back";
  EXPECT_GT(static_cast<std::uint64_t>(third->czxid), dlock_token);

  // dlock waits for Curator's.
  auto waiting = std::async(std::launch::async, [&] { return semaphore.try_acquire_for(scaled(20s)); });
  EXPECT_EQ(waiting.wait_for(300ms), std::future_status::timeout) << "dlock took a permit Curator holds";
  java->write_line("release");
  ASSERT_EQ(java->read_line(scaled(10s)), "released");
  EXPECT_TRUE(waiting.get()) << "dlock did not get the permit Curator gave back";
  EXPECT_GT(semaphore.token(), static_cast<std::uint64_t>(third->czxid));
  semaphore.release();
  java->write_line("quit");
  EXPECT_EQ(java->wait(scaled(10s)), 0);
  EXPECT_TRUE(peek.children(leases).empty()) << "leases left behind";
}

// With one permit the layout is Curator's InterProcessSemaphoreMutex: a dlock semaphore of
// one and that mutex exclude each other.
TEST(ZooKeeperInterop, OnePermitSemaphoreAndCuratorSemaphoreMutexExcludeEachOther) {
  TempDir dir;
  SharedLock lock(dir);
  auto java = start_curator_semaphore(lock.path, 1);
  auto client = dlock::connect(lock.dlock_url);
  auto mutex = client->semaphore(lock.name, 1);
  {
    std::unique_lock held(mutex);
    EXPECT_FALSE(curator_acquire(*java, "try-acquire 200", scaled(10s))) << "both held the semaphore mutex";
  }
  ASSERT_TRUE(curator_acquire(*java, "try-acquire 10000", scaled(20s)));
  EXPECT_FALSE(mutex.try_lock_for(200ms)) << "both held the semaphore mutex";
  java->write_line("release");
  ASSERT_EQ(java->read_line(scaled(10s)), "released");
  EXPECT_TRUE(mutex.try_lock_for(scaled(10s)));
  mutex.unlock();
  java->write_line("quit");
  EXPECT_EQ(java->wait(scaled(10s)), 0);
}

// ------------------------------------------------------------------ barrier

// A DistributedDoubleBarrier member for `members` members on `path`, in a CuratorTool process,
// connected.
std::unique_ptr<ChildProcess> curator_barrier_member(const std::string& path, int members) {
  auto java = std::make_unique<ChildProcess>(
      curator_tool_command({server_url("zookeeper"), "barrier", path, std::to_string(members)}));
  EXPECT_EQ(java->read_line(scaled(30s)), "ready");
  return java;
}

bool has_child(const std::vector<std::string>& children, const std::string& name) {
  return std::find(children.begin(), children.end(), name) != children.end();
}

// Two Curator and two dlock members. In the first round a dlock member arrives last (its
// `ready` must wake the Java ones) and leaves last; in the second a Curator member does both.
TEST(ZooKeeperInterop, DoubleBarrierOfCuratorAndDlockMembersOpensAndEmptiesAtTheTotalCount) {
  constexpr int parties = 4;
  for (bool dlock_last : {true, false}) {
    SCOPED_TRACE(dlock_last ? "a dlock member last" : "a Curator member last");
    TempDir dir;
    SharedLock at(dir);  // <root>/lock: the barrier's node
    ZooKeeperPeek peek(at.dlock_url);
    auto java_first = curator_barrier_member(at.path, parties);
    auto java_other = curator_barrier_member(at.path, parties);
    auto c1 = dlock::connect(at.dlock_url), c2 = dlock::connect(at.dlock_url);
    auto dlock_first = c1->barrier(at.name, parties), dlock_other = c2->barrier(at.name, parties);
    auto dlock_enters = [&](Barrier& member) {
      return std::async(std::launch::async, [&member] { return member.arrive_and_wait_for(scaled(30s)); });
    };
    auto dlock_leaves = [&](Barrier& member) {
      return std::async(std::launch::async, [&member] { return member.leave_for(scaled(30s)); });
    };

    java_first->write_line("enter");
    auto first_in = dlock_enters(dlock_first);
    std::future<bool> other_in;
    if (dlock_last) java_other->write_line("enter");
    else other_in = dlock_enters(dlock_other);
    ASSERT_EQ(peek.wait_children(at.path, 3, scaled(20s)).size(), 3u) << "three members are not in";
    // Three of four: nobody is through, and the barrier is not open.
    EXPECT_EQ(java_first->read_line(scaled(500ms)), std::nullopt) << "Curator entered early";
    EXPECT_EQ(first_in.wait_for(0s), std::future_status::timeout) << "dlock entered early";
    EXPECT_FALSE(has_child(peek.children(at.path), "ready"));

    if (dlock_last) other_in = dlock_enters(dlock_other);
    else java_other->write_line("enter");
    EXPECT_EQ(java_first->read_line(scaled(20s)), "entered");
    EXPECT_EQ(java_other->read_line(scaled(20s)), "entered");
    EXPECT_TRUE(first_in.get());
    EXPECT_TRUE(other_in.get());
    const auto inside = peek.children(at.path);
    EXPECT_EQ(inside.size(), 5u);  // four members and `ready`
    EXPECT_TRUE(has_child(inside, "ready"));

    // Three leave; none of them is through while the fourth is in.
    java_first->write_line("leave");
    auto first_out = dlock_leaves(dlock_first);
    std::future<bool> other_out;
    if (dlock_last) java_other->write_line("leave");
    else other_out = dlock_leaves(dlock_other);
    EXPECT_EQ(java_first->read_line(scaled(500ms)), std::nullopt) << "Curator left early";
    EXPECT_EQ(first_out.wait_for(0s), std::future_status::timeout) << "dlock left early";
    if (dlock_last) other_out = dlock_leaves(dlock_other);
    else java_other->write_line("leave");
    EXPECT_EQ(java_first->read_line(scaled(20s)), "left");
    EXPECT_EQ(java_other->read_line(scaled(20s)), "left");
    EXPECT_TRUE(first_out.get());
    EXPECT_TRUE(other_out.get());
    EXPECT_EQ(peek.children(at.path), std::vector<std::string>{}) << "members or `ready` left behind";
  }
}

// The layout Curator reads: a member is an ephemeral node named by a UUID, `ready` a
// persistent one; a timed-out arrival leaves no node, and the last one out leaves nothing.
TEST(ZooKeeperInterop, BarrierNodesAreCuratorsAndATimedOutArrivalLeavesNone) {
  TempDir dir;
  SharedLock at(dir);
  ZooKeeperPeek peek(at.dlock_url);
  auto c = dlock::connect(at.dlock_url);
  auto waits = c->barrier(at.name, 2);
  EXPECT_FALSE(waits.arrive_and_wait_for(300ms));
  EXPECT_EQ(peek.children(at.path), std::vector<std::string>{}) << "a timed-out member left its node";

  auto alone = c->barrier(at.name, 1);
  alone.arrive_and_wait();
  auto inside = peek.children(at.path);
  ASSERT_EQ(inside.size(), 2u);
  ASSERT_TRUE(has_child(inside, "ready"));
  const std::string member = inside[0] == "ready" ? inside[1] : inside[0];
  ASSERT_EQ(member.size(), 36u) << member;
  for (std::size_t i : {8u, 13u, 18u, 23u}) EXPECT_EQ(member[i], '-') << member;
  EXPECT_EQ(peek.ephemeral(at.path + "/" + member), true);
  EXPECT_EQ(peek.ephemeral(at.path + "/ready"), false);
  alone.leave();
  EXPECT_EQ(peek.children(at.path), std::vector<std::string>{});
}

}  // namespace
}  // namespace dlock::test
