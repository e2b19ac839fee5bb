// options.h — what a redis:// or redis+unix:// URL asks for, checked before any I/O.
//
//   redis://[user[:password]@]host[:port][/db][?option=value&...]
//   redis+unix://[user[:password]@]/path/to/redis.sock[?db=N&option=value&...]
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
//   db=N                  redis+unix only (redis:// takes it as the path)
#pragma once

#include "core/events.h"
#include "core/url.h"

#include <dlock/options.h>
#include <dlock/status.h>

#include <chrono>
#include <optional>
#include <string>

namespace dlock::detail::redis {

struct Config {
  bool unix_socket = false;
  std::string host;          // TCP
  int port = 6379;           // TCP
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
  std::string redacted_url;  // for messages: no password
  Events* events = nullptr;  // the backend's: where a connection lost or restored is reported
};

Result<Config> parse_config(const Url& url, const ClientOptions& options);

}  // namespace dlock::detail::redis
