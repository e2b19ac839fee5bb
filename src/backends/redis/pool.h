// pool.h — the command connections of one client (Pool), shared by all its
// threads through pipelining: the commands of concurrent calls are written
// together and their replies handed back in order, without any thread of
// the pool's own; and Commands, where the backend's commands go (one
// server's Pool, or redis+cluster's router).
#pragma once

#include "backends/redis/config.h"
#include "backends/redis/connection.h"
#include "backends/redis/scripts.h"
#include "core/driver.h"

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::detail::redis {

// The SHA1s SCRIPT LOAD gave for every script; filled once when the backend
// opens, read-only afterwards.
using ScriptShas = std::array<std::string, script_count>;

class Pool;

// Where the backend's commands go: one server's Pool, or (redis+cluster)
// the cluster router that sends each command to its slot's master.
class Commands {
 public:
  virtual ~Commands() = default;
  // The batch's replies (see Replies); never longer than `deadline`.
  virtual Replies run(const Batch& batch, steady::time_point deadline, std::string_view step) = 0;
  // Sends the batch; `done` gets its replies (see Pool::send).
  virtual void send(const Batch& batch, steady::time_point deadline, std::function<void(Replies)> done) = 0;
  // Reads the replies of every batch send() left behind (see Pool::flush).
  virtual void flush(steady::time_point deadline) = 0;
  // SCRIPT LOAD (on every server the commands go to); the SHA1 the server
  // gave.
  virtual Result<std::string> load(Script script, steady::time_point deadline) = 0;
  // The pools whose keys together are every key (SCAN goes to each).
  virtual Result<std::vector<Pool*>> shards(steady::time_point deadline) = 0;

  // One command; an error reply becomes a Status (to_status). `key`
  // routes it (redis+cluster) and names it in errors.
  Result<Reply> command(std::span<const std::string_view> words, steady::time_point deadline, std::string_view step,
                        std::string_view key = {});
  // EVALSHA; on NOSCRIPT loads the script and retries once.
  Result<Reply> eval(Script script, std::span<const std::string_view> keys, std::span<const std::string_view> args,
                     steady::time_point deadline, std::string_view step, std::string_view key = {});
  // Loads every script (the backend's start).
  Status load_all(steady::time_point deadline);
  const std::string& sha(Script script) const { return shas_[static_cast<std::size_t>(script)]; }

 protected:
  // SCRIPT LOAD on this one pool's server.
  static Result<std::string> load_on(Pool& pool, Script script, steady::time_point deadline);

 private:
  ScriptShas shas_;  // written by load_all(), read-only afterwards
};

// The command connections, shared by all threads of a client through
// pipelining (leader/follower, no thread of its own):
//
// A call queues its batch on the least busy connection. If no thread is at
// work on that connection, the caller becomes its leader: it writes every
// queued batch (its own and those of the threads that queued meanwhile) in
// one send, reads replies, hands each batch's replies to its thread and
// wakes it. A leader leads until its own replies are in, then passes the
// lead to the thread whose batch is the oldest still unanswered (or queued)
// — so one thread never works for others beyond its own call. A lone caller
// thus does exactly one write and one read per round trip, as with a
// private connection.
//
// Deadlines: a call waits at most until its own deadline; one whose batch
// was not written by then leaves the queue, one whose batch was written
// leaves it unanswered (its replies are read and dropped later). A leader
// waits for replies only until the deadline of the oldest unanswered batch:
// if that passes in silence the connection is dead — it is dropped and every
// batch written on it fails (unavailable) at once; queued batches go out on
// a new connection made by the next leader.
class Pool final : public Commands {
 public:
  explicit Pool(const Config& config);
  ~Pool() override;

  Replies run(const Batch& batch, steady::time_point deadline, std::string_view step) override;
  // Sends the batch without waiting for its replies: `done` gets them (or
  // the failure) from whichever thread reads them — the leader of a later
  // call on the same connection, or flush(). Commands of one connection
  // run in order. `done` runs on a caller's thread with no lock held; it
  // must not block or call the pool.
  void send(const Batch& batch, steady::time_point deadline, std::function<void(Replies)> done) override;
  // Reads the replies of every batch send() left behind (until `deadline`;
  // those unanswered then are dropped): before the pool's users go away.
  void flush(steady::time_point deadline) override;
  Result<std::string> load(Script script, steady::time_point deadline) override;
  Result<std::vector<Pool*>> shards(steady::time_point) override { return std::vector<Pool*>{this}; }
  // Its connections' waits give up once `fd` is readable (see
  // Connection::cancel_on). Set before the pool is used.
  void cancel_on(int fd) noexcept;

  struct Request;
  struct Channel;
  // A batch start() sent (or queued), whose replies finish() waits for.
  struct Pending {
    std::shared_ptr<Request> request;
    Channel* channel = nullptr;
  };
  // run() in two halves, so that one thread's batches to several servers
  // are all written before it waits for any reply (redis+cluster): start()
  // queues the batch, and writes it if no thread leads its connection;
  // finish() (called exactly once, soon after) waits for its replies as
  // run() does, leading if nobody else is.
  Pending start(const Batch& batch, steady::time_point deadline, std::string_view step);
  Replies finish(Pending& pending, std::string_view step);

 private:
  class Lead;  // one thread's turn as a channel's leader (pool.cpp)

  Channel& pick() noexcept;
  Replies run_on(Channel& ch, const Batch& batch, steady::time_point deadline, std::string_view step);
  // Until `me` is answered: as a follower, or as the leader once it has the lead.
  Replies await(Channel& ch, std::unique_lock<std::mutex>& lk, const std::shared_ptr<Request>& me,
                std::string_view step);
  void lead(Channel& ch, std::unique_lock<std::mutex>& lk, Request& me, std::string_view step);
  static void complete(std::vector<std::shared_ptr<Request>>& finished, const Request* me);

  const std::uint64_t id_;  // unique per pool, never reused (send()'s thread-local affinity)
  std::atomic<std::uint64_t> generation_{0};
  std::vector<std::unique_ptr<Channel>> channels_;
};

}  // namespace dlock::detail::redis
