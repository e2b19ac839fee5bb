// config.cpp — reading a redis:// (and redis+unix, +sentinel, +cluster) URL (config.h).
#include "backends/redis/config.h"

#include "core/duration.h"
#include "core/option_values.h"

#include <charconv>

namespace dlock::detail::redis {
namespace {

using std::chrono::milliseconds;

Status invalid(const Config& c, std::string why) {
  return Status(errc::invalid_argument, "redis url " + c.redacted_url + ": " + std::move(why));
}

// The checked value of an option, or its error with the URL.
template <class T>
Result<T> in_url(const Config& c, Result<T> value) {
  if (!value) return invalid(c, value.status().message());
  return value;
}

Result<int> parse_int(const Config& c, std::string_view text, std::string_view what, int lo, int hi) {
  return in_url(c, parse_count(text, what, lo, hi));
}

// The URL's hosts, each once, with `port` where it gives none; `what`
// names one in messages ("sentinel", "seed").
Result<std::vector<Endpoint>> listed_once(const Config& c, const Url& url, std::uint16_t port, std::string_view what) {
  std::vector<Endpoint> out;
  for (const auto& e : url.endpoints) {
    Endpoint node{e.host, e.port.value_or(port)};
    for (const auto& seen : out)
      if (seen.host == node.host && seen.port == node.port)
        return invalid(c, std::string(what) + " " + node.host + ":" + std::to_string(*node.port) +
                              " is listed twice (each once)");
    out.push_back(std::move(node));
  }
  return out;
}

Result<milliseconds> parse_bounded(const Config& c, const std::string& text, std::string_view what, milliseconds lo,
                                   milliseconds hi) {
  return in_url(c, parse_duration_within(text, what, lo, hi));
}

}  // namespace

Result<Config> parse_config(const Url& url, const ClientOptions& options) {
  Config c;
  c.redacted_url = url.redacted();
  c.op_timeout = options.op_timeout;
  c.connect_timeout = options.op_timeout;
  c.unix_socket = url.scheme == "redis+unix";
  c.user = url.user;
  c.password = url.password;
  if (c.user && !c.password)
    return invalid(c, "a user name needs a password (redis://user:password@host; ACL users always have one)");
  if (c.password && c.password->empty()) return invalid(c, "empty password");

  auto query = url.query;
  // db=N as an option (redis:// has it as the path).
  auto take_db = [&]() -> Status {
    if (auto it = query.find("db"); it != query.end()) {
      auto db = parse_int(c, it->second, "db", 0, 1'000'000);
      if (!db) return db.status();
      c.db = *db;
      query.erase(it);
    }
    return {};
  };
  if (url.scheme == "redis+sentinel") {
    if (url.endpoints.empty())
      return invalid(c, "needs the sentinels, e.g. redis+sentinel://127.0.0.1:26379,127.0.0.1:26380/mymaster");
    auto sentinels = listed_once(c, url, default_sentinel_port, "sentinel");
    if (!sentinels) return sentinels.status();
    c.sentinels = std::move(*sentinels);
    const std::string name = url.path.empty() ? std::string() : url.path.substr(1);
    if (name.empty())
      return invalid(c, "needs the master name the sentinels monitor as the path, e.g. "
                        "redis+sentinel://127.0.0.1:26379/mymaster");
    if (name.find('/') != std::string::npos || name.find_first_of(" \t\r\n") != std::string::npos)
      return invalid(c, "master name '" + name + "' must be one word without '/' or spaces");
    c.master_name = name;
    if (Status s = take_db(); !s) return s;
  } else if (url.scheme == "redis+cluster") {
    if (url.endpoints.empty())
      return invalid(c, "needs the seed nodes, e.g. redis+cluster://127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002");
    auto seeds = listed_once(c, url, default_port, "seed");
    if (!seeds) return seeds.status();
    c.seeds = std::move(*seeds);
    if (!url.path.empty() && url.path != "/")
      return invalid(c, "takes no path (a cluster has database 0 only)");
    if (query.count("db")) return invalid(c, "takes no db (a cluster has database 0 only)");
    if (query.count("wait_replicas") || query.count("wait_timeout"))
      return invalid(c, "wait_replicas is not available on redis+cluster (it is on redis+sentinel)");
  } else if (c.unix_socket) {
    if (!url.endpoints.empty())
      return invalid(c, "redis+unix takes no host; write redis+unix:///path/to/redis.sock (three slashes)");
    if (url.path.size() < 2 || url.path.back() == '/')
      return invalid(c, "needs the socket's absolute path, e.g. redis+unix:///run/redis/redis.sock");
    c.socket_path = url.path;
    if (Status s = take_db(); !s) return s;
  } else {
    if (url.endpoints.size() != 1)
      return invalid(c, url.endpoints.empty() ? "needs a host, e.g. redis://127.0.0.1:6379"
                                              : "takes one host (redis:// speaks to one server)");
    c.host = url.endpoints[0].host;
    if (url.endpoints[0].port) c.port = *url.endpoints[0].port;
    if (!url.path.empty() && url.path != "/") {
      auto db = parse_int(c, std::string_view(url.path).substr(1), "db (the path)", 0, 1'000'000);
      if (!db) return db.status();
      c.db = *db;
    }
  }

  for (const auto& [key, value] : query) {
    if (key == "prefix") {
      if (value.empty()) return invalid(c, "prefix must not be empty (keys would spread over the whole keyspace)");
      if (value.find_first_of("{}") != std::string::npos)
        return invalid(c, "prefix '" + value + "' must not contain '{' or '}' (dlock puts the lock name in braces "
                                               "so that all keys of a lock share one hash slot)");
      if (value.size() > 128) return invalid(c, "prefix is longer than 128 bytes");
      c.prefix = value;
    } else if (key == "connections") {
      auto n = parse_int(c, value, "connections", 1, 64);
      if (!n) return n.status();
      c.connections = *n;
    } else if (key == "connect_timeout") {
      auto d = parse_bounded(c, value, "connect_timeout", milliseconds(1), std::chrono::minutes(10));
      if (!d) return d.status();
      c.connect_timeout = *d;
    } else if (key == "waiter_ttl") {
      auto d = parse_bounded(c, value, "waiter_ttl", std::chrono::seconds(1), std::chrono::hours(1));
      if (!d) return d.status();
      c.waiter_ttl = *d;
    } else if (key == "token_retention") {
      auto d = parse_bounded(c, value, "token_retention", milliseconds(0), std::chrono::hours(24 * 30));
      if (!d) return d.status();
      c.token_retention = *d;
    } else if (key == "wait_replicas") {
      auto n = parse_int(c, value, "wait_replicas", 0, 100);
      if (!n) return n.status();
      c.wait_replicas = *n;
    } else if (key == "wait_timeout") {
      auto d = parse_bounded(c, value, "wait_timeout", milliseconds(1), std::chrono::minutes(1));
      if (!d) return d.status();
      c.wait_timeout = *d;
    } else {
      return invalid(c, "unknown option '" + key +
                            "' (known: prefix, connections, connect_timeout, waiter_ttl, token_retention, "
                            "wait_replicas, wait_timeout" +
                            (c.unix_socket || !c.master_name.empty() ? ", db" : "") + ")");
    }
  }
  if (query.count("wait_timeout") && c.wait_replicas == 0)
    return invalid(c, "wait_timeout is for wait_replicas (how long to wait for them); set wait_replicas=N too");
  // WAIT holds its connection: calls pipelined behind it wait too, each
  // within its own op_timeout.
  if (c.wait_replicas > 0 && c.wait_timeout >= c.op_timeout)
    return invalid(c, "wait_timeout (" + std::to_string(c.wait_timeout.count()) +
                          " ms) must be shorter than ClientOptions::op_timeout (" +
                          std::to_string(c.op_timeout.count()) + " ms): calls sharing the connection wait behind WAIT");
  return c;
}

}  // namespace dlock::detail::redis
