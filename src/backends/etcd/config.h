// config.h — what an etcd:// URL asks for, checked before any I/O.
//
//   etcd://[user:password@]host[:port][,host[:port]...][/prefix][?option=value&...]
//
// The hosts are members of one cluster (port 2379 if none is given); calls
// go to one member and fail over to the next when it cannot be reached.
// The prefix is where lock keys live: the lock "orders/42" is the key range
// <prefix>/orders/42/..., one key per contender, the layout of etcd's
// concurrency.Mutex (so `etcdctl lock <prefix>/orders/42` and a Go service's
// Mutex on that name share the lock). No path means the prefix "dlock"; a
// path "/x/y" means "x/y" (etcd keys have no leading '/': etcdctl's names
// don't either).
//
// Options (anything else is refused, naming it):
//   ttl=10s    the client's lease (its session), 2s..1h, whole seconds: every
//              lock the client takes is attached to it and dies with it,
//              this long after the client stops renewing it (a process
//              killed, stopped or cut off). etcdctl's default is 10s too.
#pragma once

#include "core/url.h"

#include <dlock/options.h>
#include <dlock/status.h>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::detail::etcd {

struct Config {
  std::vector<std::string> endpoints;  // "host:port", as the URL gave them
  std::string prefix = "dlock";         // no leading or trailing '/'
  std::optional<std::string> user;
  std::optional<std::string> password;
  std::chrono::seconds ttl{10};
  std::chrono::milliseconds op_timeout{};
  std::string redacted_url;  // for messages: no password
};

Result<Config> parse_config(const Url& url, const ClientOptions& options);

// The key range of a lock's contenders: prefix + "/" + name + "/".
std::string lock_prefix(const Config& config, std::string_view name);

// Where the keys of the primitives etcd has no tool for live, beside the
// locks' range so that a Mutex and, say, a Semaphore of one name never
// meet: prefix + "." + kind + "/" + name + "/" (kind: "rwlock",
// "semaphore", "barrier"). Without the name: the root of that kind.
std::string kind_prefix(const Config& config, std::string_view kind, std::string_view name);
std::string kind_root(const Config& config, std::string_view kind);

// A name segment ('/'-separated part of a lock name or of the prefix) etcd
// keys can hold and etcdctl can name: not empty, ".", "..", and no control
// characters. `what` names it in the message.
Status check_segment(std::string_view segment, std::string_view what);

}  // namespace dlock::detail::etcd
