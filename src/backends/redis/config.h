// config.h — what a redis://, redis+unix://, redis+sentinel:// or redis+cluster:// URL asks
// for, checked before any I/O.
//
//   redis://[user[:password]@]host[:port][/db][?option=value&...]
//   redis+unix://[user[:password]@]/path/to/redis.sock[?db=N&option=value&...]
//   redis+sentinel://[user[:password]@]s1[:port],s2[:port],.../master-name[?db=N&option=value&...]
//       the sentinels (port 26379 by default, each once) and the name they
//       monitor the master by; user and password are the data nodes'
//   redis+cluster://[user[:password]@]n1[:port],n2[:port],...[?option=value&...]
//       seed nodes of one Redis Cluster (port 6379 by default, each once);
//       the slot map is read from them (cluster.h). No db, no wait_replicas
//
// Options (anything else is refused, naming it):
//   prefix=dlock:         every key and channel starts with it; no '{' or '}'
//                         (they would break the hash tags), not empty
//   connections=2         command connections shared by all threads, 1..64
//   connect_timeout=      connecting (TCP + AUTH + SELECT); default
//                         ClientOptions::op_timeout
//   waiter_ttl=2s         how long a queued waiter stays in the queue without
//                         refreshing it (a waiter refreshes at every attempt,
//                         at least every 500 ms); a dead waiter blocks a fair
//                         queue for at most this long. 1s..1h
//   token_retention=1h    how long a released lock's last fencing token is
//                         kept (see redis_backend.cpp); 0 forgets it at release
//   db=N                  redis+unix and redis+sentinel (redis:// takes it as the path)
//   wait_replicas=0       after each acquisition, WAIT for this many replicas to
//                         acknowledge it; fewer within wait_timeout: the lock is
//                         released and the acquisition fails (unavailable). Best
//                         effort (docs/backends.md). 0 (off)..100
//   wait_timeout=1s       how long WAIT waits (1ms..1min); only with wait_replicas
#pragma once

#include "core/events.h"
#include "core/driver.h"
#include "core/url.h"

#include <dlock/options.h>
#include <dlock/status.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dlock::detail::redis {

// Where a host named without a port listens.
inline constexpr std::uint16_t default_port = 6379;
inline constexpr std::uint16_t default_sentinel_port = 26379;

class Connection;  // connection.h

// Where a connection goes when it is not simply host:port (redis+sentinel:
// sentinel.h). Called by connections from any thread.
class Discovery {
 public:
  virtual ~Discovery() = default;
  // The address to connect to now (host, port).
  virtual Result<Endpoint> where(steady::time_point deadline) = 0;
  // A fresh connection to `at` (authenticated, db selected): ok if it is
  // what the caller may use; otherwise the connection is dropped.
  virtual Status check(Connection& connection, const Endpoint& at, steady::time_point deadline) = 0;
  // Connecting to `at`, or a connection to it, failed.
  virtual void failed(const Endpoint& at) = 0;
  // Changes whenever the address does: connections made before are dropped.
  virtual std::uint64_t epoch() const noexcept = 0;
};

// Each of a list of servers in turn: a connection that fails moves on to
// the next (the sentinels' +switch-master subscriber, redis+cluster's
// wake-up subscriber). Every server is taken as it is (no check).
class Rotation final : public Discovery {
 public:
  explicit Rotation(std::vector<Endpoint> servers) : servers_(std::move(servers)) {}
  Result<Endpoint> where(steady::time_point) override { return servers_[next_.load() % servers_.size()]; }
  Status check(Connection&, const Endpoint&, steady::time_point) override { return {}; }
  void failed(const Endpoint&) override { next_.fetch_add(1); }
  // Moves with the rotation: the next server is tried without backoff
  // (the caller's own backoff spaces the rounds).
  std::uint64_t epoch() const noexcept override { return next_.load(); }

 private:
  const std::vector<Endpoint> servers_;  // not empty
  std::atomic<std::size_t> next_{0};
};

struct Config {
  bool unix_socket = false;
  std::string host;          // TCP
  int port = default_port;   // TCP
  std::string socket_path;   // redis+unix
  std::optional<std::string> user;
  std::optional<std::string> password;
  int db = 0;
  std::string prefix = "dlock:";
  int connections = 2;
  std::chrono::milliseconds op_timeout{};
  std::chrono::milliseconds connect_timeout{};
  std::chrono::milliseconds waiter_ttl{2'000};
  std::chrono::milliseconds token_retention{3'600'000};
  // redis+sentinel: the sentinels and the master's name (Discovery set by the backend).
  std::vector<Endpoint> sentinels;
  std::string master_name;
  // redis+cluster: the seed nodes the slot map is first read from.
  std::vector<Endpoint> seeds;
  std::shared_ptr<Discovery> discovery;  // nullptr: connect to host:port (or socket_path)
  int wait_replicas = 0;
  std::chrono::milliseconds wait_timeout{1'000};
  std::string redacted_url;  // for messages: no password
  Events* events = nullptr;  // the backend's: where a connection lost or restored is reported
};

Result<Config> parse_config(const Url& url, const ClientOptions& options);

}  // namespace dlock::detail::redis
