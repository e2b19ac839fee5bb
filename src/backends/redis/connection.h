// connection.h — one connection to one Redis server: a hiredis context
// whose I/O is ours, and the batches of commands written on it.
//
// Every call has a deadline (ClientOptions::op_timeout from its start).
// Commands never block on the socket: writes are non-blocking sends, reads
// wait in ppoll() until the deadline (connecting is bounded by it too, host
// name lookup included), so a black-holed server costs a call
// op_timeout, never the kernel's retransmission time (TCP keepalive and
// TCP_USER_TIMEOUT are on as well). A connection that failed (I/O error,
// EOF, timeout) is dropped and the next call on it reconnects; a failed
// connect backs off (50 ms doubling to 1 s) so an outage fails calls fast
// instead of hammering the server.
#pragma once

#include "backends/redis/config.h"
#include "core/driver.h"

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <optional>
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

// unavailable: a call's deadline came before `step` could start.
Status no_time_left(std::string_view step);

// The Redis Cluster hash slot of `key` (CRC16 of its hash tag, or of the
// whole key if it has none, modulo 16384).
int hash_slot(std::string_view key) noexcept;

// Commands in the Redis protocol, written together and answered in order.
// Each command remembers its routing slot (for redis+cluster): its key's,
// or, for a command without one (WAIT, TIME), the command's before it
// (-1 for the first: any node).
class Batch {
 public:
  void add(std::span<const std::string_view> words, std::string_view key = {});
  void add(std::initializer_list<std::string_view> words, std::string_view key = {}) {
    add(std::span(words.begin(), words.size()), key);
  }
  // EVALSHA sha <number of keys> keys... args... (routed by the first key)
  void add_eval(std::string_view sha, std::span<const std::string_view> keys, std::span<const std::string_view> args);
  // Command i of `from` as it was written (its slot too).
  void add_copy(const Batch& from, std::size_t i);
  std::size_t size() const noexcept { return count_; }
  bool empty() const noexcept { return count_ == 0; }
  const std::string& bytes() const noexcept { return bytes_; }
  int slot(std::size_t i) const noexcept { return slots_[i]; }

 private:
  void word(std::string_view w);
  void header(char kind, std::size_t n);
  void ended(std::string_view key);
  std::string bytes_;
  std::size_t count_ = 0;
  std::vector<std::size_t> ends_;  // where each command's bytes end
  std::vector<int> slots_;
};

// The replies to a batch, in order (error replies are replies). If
// `failure` is not ok, the connection failed or nothing answered in time:
// `replies` holds those that came before, and the other commands may or
// may not have run.
struct Replies {
  std::vector<Reply> replies;
  Status failure;
};

// One hiredis context: its socket and reply parser (the I/O of command()
// and the pipelining calls is ours; the subscriber's loop uses hiredis's
// on the same context). Not thread-safe: one user at a time (the pool's leader or the
// subscriber's thread).
class Connection {
 public:
  // `generation`: bumped (by any connection sharing it) when one fails, so
  // that connections made before the failure are dropped before their next
  // use instead of failing one call each after a server restart.
  Connection(const Config& config, std::atomic<std::uint64_t>* generation);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  bool connected() const noexcept { return context_ != nullptr; }
  // Made before a failure another connection saw, or (Discovery) before
  // the server to use changed.
  bool stale() const noexcept {
    return (generation_ && made_in_ < generation_->load()) ||
           (config_.discovery && made_at_epoch_ != config_.discovery->epoch());
  }
  // Whether the idle connection has something to read: the server closed
  // it (restart, CLIENT KILL, idle timeout) or it is out of step. Either
  // way it is unusable; checking (one poll, no wait) before a call spares
  // the call an error after every server restart.
  bool readable_while_idle() const noexcept;
  // TCP or unix socket, keepalive, AUTH, SELECT; with a Discovery, to the
  // address it gives, checked by it.
  Status connect(steady::time_point deadline);
  void drop() noexcept;
  // After a failed connect(): when the next may be tried (backing off, 50 ms
  // doubling to 1 s); earlier ones fail at once.
  steady::time_point retry_at() const noexcept { return retry_at_; }
  // Its waits give up (the connection dropped, the call failing
  // `unavailable`) once `fd` is readable: its owner is closing. Set before
  // the connection is used.
  void cancel_on(int fd) noexcept { cancel_fd_ = fd; }
  redisContext* context() const noexcept { return context_; }

  // One round trip; an error reply becomes a Status (to_status).
  Result<Reply> command(std::span<const std::string_view> words, steady::time_point deadline, std::string_view step,
                        std::string_view key = {});

  // Pipelining, never blocking but in wait(): queue bytes for the server,
  // write what the socket takes, take a reply already received (nullptr:
  // none complete yet), wait until something can be read (or written, if
  // output is pending) and do it. A failure drops the connection.
  void append(std::string_view bytes) { out_.append(bytes); }
  bool output_pending() const noexcept { return out_done_ < out_.size(); }
  Status write_some(std::string_view step);
  Result<Reply> next_reply(std::string_view step);
  Status wait(steady::time_point deadline, std::string_view step);
  // Gives up on the connection (drops it): `why`, for the caller to return.
  Status fail(Status why);
  // Drops a connection that failed (`what` went wrong), reporting it lost
  // if it was up.
  void lose(std::string_view what) noexcept;

 private:
  Status connect_failure(Status why);
  Status read_some(std::string_view step);

  const Config& config_;
  std::atomic<std::uint64_t>* generation_;
  std::uint64_t made_in_ = 0;
  std::uint64_t made_at_epoch_ = 0;     // config_.discovery's epoch when connected
  std::uint64_t failed_at_epoch_ = 0;   // ... when the last connect failed (a new one skips the backoff)
  std::optional<Endpoint> at_;          // where a Discovery sent us (for failed())
  bool was_lost_ = false;  // up once, then lost: the next connect() is a reconnect
  redisContext* context_ = nullptr;
  std::string out_;            // written up to out_done_
  std::size_t out_done_ = 0;
  steady::time_point retry_at_{};
  std::chrono::milliseconds backoff_{0};
  int cancel_fd_ = -1;
  std::string last_error_;
};

}  // namespace dlock::detail::redis
