// session.h — connections to one Redis server: one hiredis context each,
// and the small pool of them that all threads of a client share.
//
// Every call has a deadline (ClientOptions::op_timeout from its start); the
// socket's send/receive timeouts are set to what is left of it before each
// round trip, TCP keepalive and TCP_USER_TIMEOUT are on, so a black-holed
// server costs a call op_timeout, never the kernel's retransmission time.
// A connection that failed (I/O error, timeout, EOF) is dropped and the
// next call on it reconnects; a failed connect backs off (50 ms doubling to
// 1 s) so an outage fails calls fast instead of hammering the server.
#pragma once

#include "backends/redis/options.h"
#include "backends/redis/scripts.h"
#include "core/driver.h"

#include <array>
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

struct redisContext;
struct redisReply;

namespace dlock::detail::redis {

struct FreeReply {
  void operator()(redisReply* reply) const;
};
using Reply = std::unique_ptr<redisReply, FreeReply>;

// The SHA1s SCRIPT LOAD gave for every script; filled once when the backend
// opens, read-only afterwards.
using ScriptShas = std::array<std::string, script_count>;

// One hiredis context. Not thread-safe: one user at a time (the pool's lease
// or the subscriber's thread).
class Connection {
 public:
  // `generation`: bumped (by any connection sharing it) when one fails, so
  // that connections made before the failure are dropped before their next
  // use instead of failing one call each after a server restart.
  Connection(const Config& config, const ScriptShas* shas, std::atomic<std::uint64_t>* generation);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  bool connected() const noexcept { return context_ != nullptr; }
  bool stale() const noexcept { return generation_ && made_in_ < generation_->load(); }
  // Whether the idle connection has something to read: the server closed
  // it (restart, CLIENT KILL, idle timeout) or it is out of step. Either
  // way it is unusable; checking (one poll, no wait) before a call spares
  // the call an error after every server restart.
  bool readable_while_idle() const noexcept;
  // TCP or unix socket, timeouts, keepalive, AUTH, SELECT.
  Status connect(steady::time_point deadline);
  void drop() noexcept;
  redisContext* context() const noexcept { return context_; }

  // One round trip; an error reply becomes a Status (to_status).
  Result<Reply> command(std::span<const std::string_view> words, steady::time_point deadline, std::string_view step,
                        std::string_view key = {});
  // EVALSHA; on NOSCRIPT loads the script and retries once.
  Result<Reply> eval(Script script, std::span<const std::string_view> keys, std::span<const std::string_view> args,
                     steady::time_point deadline, std::string_view step, std::string_view key = {});
  // SCRIPT LOAD; the SHA1 the server gave.
  Result<std::string> load(Script script, steady::time_point deadline);

  // Pipelining: append commands, then read their replies in order (error
  // replies are returned as replies, not as a Status).
  void append(std::span<const std::string_view> words);
  void append_eval(Script script, std::span<const std::string_view> keys, std::span<const std::string_view> args);
  Result<Reply> read(steady::time_point deadline, std::string_view step);

 private:
  Status set_deadline(steady::time_point deadline, std::string_view step);
  // The Status of a failed round trip; drops the context (it is unusable).
  Status io_failure(std::string_view step);
  Status connect_failure(Status why);

  const Config& config_;
  const ScriptShas* shas_;
  std::atomic<std::uint64_t>* generation_;
  std::uint64_t made_in_ = 0;
  redisContext* context_ = nullptr;
  steady::time_point retry_at_{};
  std::chrono::milliseconds backoff_{0};
  std::string last_error_;
};

// Command connections shared by all threads: take one, use it, give it back.
class Pool {
 public:
  Pool(const Config& config, const ScriptShas* shas);

  class Lease {
   public:
    Lease(Pool* pool, Connection* c) : pool_(pool), c_(c) {}
    Lease(Lease&& o) noexcept : pool_(o.pool_), c_(std::exchange(o.c_, nullptr)) {}
    Lease& operator=(Lease&&) = delete;
    ~Lease() {
      if (c_) pool_->give_back(c_);
    }
    Connection* operator->() const noexcept { return c_; }
    Connection& operator*() const noexcept { return *c_; }

   private:
    Pool* pool_;
    Connection* c_;
  };

  // A connected connection, or unavailable if none frees up (or connecting
  // fails) before `deadline`.
  Result<Lease> take(steady::time_point deadline, std::string_view step);

 private:
  void give_back(Connection* c);

  const Config& config_;
  std::atomic<std::uint64_t> generation_{0};
  std::vector<std::unique_ptr<Connection>> all_;
  std::mutex mu_;
  std::condition_variable freed_;
  std::vector<Connection*> free_;  // guarded by mu_; most recently used last
};

}  // namespace dlock::detail::redis
