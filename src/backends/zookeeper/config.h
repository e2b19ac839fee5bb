// config.h — what a zk:// URL asks for, checked before any I/O.
//
//   zk://[user:password@]host[:port][,host[:port]...][/root][?option=value&...]
//
// The path is the root under which lock names live: the lock "orders/42"
// is the znode <root>/orders/42, whose children are the contenders' nodes
// (the layout of Curator's InterProcessMutex, so pointing dlock at the
// path a Curator lock uses makes the two exclude each other). No path means
// /dlock; "/" alone means ZooKeeper's own root. Missing parents are created
// as container nodes, which ZooKeeper deletes once they are empty.
//
// With user:password the session authenticates with the "digest" scheme and
// every node dlock creates gets CREATOR_ALL_ACL (only that identity may use
// or delete it); without, nodes are open (OPEN_ACL_UNSAFE).
//
// Options (anything else is refused, naming it):
//   session_timeout=10s   asked of the ensemble, 1s..10m; a negotiated value
//                         below it is refused at connect (the ensemble's
//                         minSessionTimeout/maxSessionTimeout bound it)
//   lost_on=suspend       when a held lock counts as lost: "suspend" (the
//                         connection dropped: the session may expire without
//                         our knowing, so stop at once — the safe default) or
//                         "expiry" (only once the session is known expired,
//                         or a quarter of the timeout after the drop, ahead of
//                         the ensemble expiring it)
#pragma once

#include "core/url.h"

#include <dlock/options.h>
#include <dlock/status.h>

#include "core/events.h"

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::detail::zookeeper {

// Where a host named without a port listens.
inline constexpr std::uint16_t default_port = 2181;

struct Config {
  std::string hosts;  // "host:port,host:port" as the C client takes it
  std::string root = "/dlock";
  std::optional<std::string> user;
  std::optional<std::string> password;
  std::chrono::milliseconds session_timeout{10'000};
  bool lost_on_suspend = true;
  std::chrono::milliseconds op_timeout{};
  std::string redacted_url;  // for messages: no password
  Events* events = nullptr;  // the backend's: where a connection lost or restored is reported
};

Result<Config> parse_config(const Url& url, const ClientOptions& options);

// The znode of a lock: root + "/" + name.
std::string lock_path(const Config& config, std::string_view name);

// Checks one path segment (of the root or of a lock name) against what
// ZooKeeper accepts; `what` names it in the message.
Status check_segment(std::string_view segment, std::string_view what);

}  // namespace dlock::detail::zookeeper
