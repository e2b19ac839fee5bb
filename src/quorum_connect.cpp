// Making quorum clients: from clients, from URLs, and redlock:// (a quorum
// of redis:// nodes). The quorum itself is core's (core/quorum_backend.h);
// this file turns URLs into nodes, and tells which of them are one store.
#include <dlock/quorum.h>

#include "core/client_state.h"
#include "core/duration.h"
#include "core/owner_id.h"
#include "core/quorum_backend.h"
#include "core/registry.h"
#include "core/validate.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <charconv>
#include <set>

namespace dlock {
namespace {

// The lowest address `host` resolves to: the same for every spelling of
// one host (localhost's ::1 and 127.0.0.1 included), an IPv4 one first;
// `host` itself if it does not resolve.
std::string lowest_address(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0 || !found) return host;
  std::set<std::string> addresses;
  for (addrinfo* a = found; a; a = a->ai_next) {
    char text[INET6_ADDRSTRLEN] = {};
    const void* raw = a->ai_family == AF_INET
                          ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr)
                          : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr);
    if (::inet_ntop(a->ai_family, raw, text, sizeof text)) addresses.insert(text);
  }
  ::freeaddrinfo(found);
  for (const auto& a : addresses)
    if (a.find(':') == std::string::npos) return a;
  return addresses.empty() ? host : *addresses.begin();
}

// "family|address:port|..." of a network store (host names resolved,
// default ports filled in, so redis://localhost and redis://127.0.0.1:6379
// are one node), or "family|path" of a local one. Stores on one server
// (redis databases, postgres schemas) are one node: they fail together.
// The family and the default port are the registry's (core/registry.h).
std::string node_identity(const detail::Url& url) {
  const detail::BackendEntry* entry = detail::find_backend(url.scheme);
  const std::string family(entry ? entry->family : std::string_view(url.scheme));
  if (url.endpoints.empty()) return family + "|" + url.path;
  std::string out = family;
  for (const detail::Endpoint& e : url.endpoints) {
    std::uint16_t port = e.port.value_or(entry ? entry->default_port : 0);
    out += "|" + lowest_address(e.host) + ":" + (port ? std::to_string(port) : std::string("-"));
  }
  return out;
}

// A client around a quorum backend over `nodes`.
Result<std::shared_ptr<Client>> quorum_client(std::vector<detail::QuorumNode> nodes, const QuorumOptions& quorum,
                                              const ClientOptions& options, std::string url, std::string scheme) {
  if (Status s = detail::validate(options); !s) return s;
  auto backend = detail::open_quorum_backend(std::move(nodes), quorum, options);
  if (!backend) return backend.status();
  auto id = detail::random_client_id();
  if (!id) return id.status();
  auto state = std::make_shared<detail::ClientState>(std::move(*backend), std::move(*id), std::move(url),
                                                     std::move(scheme), options);
  return detail::make_client(std::move(state));
}

// The node `url` names, opened (now and after a failure) with op_timeout = node_timeout.
Result<detail::QuorumNode> url_node(const detail::Url& url, const QuorumOptions& quorum, const ClientOptions& options) {
  ClientOptions node_options = options;
  node_options.op_timeout = quorum.node_timeout;
  detail::QuorumNode node;
  node.label = url.redacted();
  node.identity = node_identity(url);
  node.open = [url, node_options] { return detail::open_backend(url, node_options); };
  return node;
}

std::string quorum_url(const std::vector<detail::QuorumNode>& nodes) {
  std::string out = "quorum(";
  for (std::size_t i = 0; i < nodes.size(); ++i) out += (i ? "," : "") + nodes[i].label;
  return out + ")";
}

}  // namespace

Result<std::shared_ptr<Client>> connect_quorum_checked(std::vector<std::shared_ptr<Client>> clients,
                                                       QuorumOptions quorum, ClientOptions options) {
  std::vector<detail::QuorumNode> nodes;
  for (std::size_t i = 0; i < clients.size(); ++i) {
    if (!clients[i])
      return Status(errc::invalid_argument, "quorum: node " + std::to_string(i + 1) + " is a null client");
    auto url = detail::parse_url(clients[i]->url());
    if (!url) return url.status();
    detail::QuorumNode node;
    node.label = clients[i]->url();
    node.identity = node_identity(*url);
    node.client = detail::state_of(*clients[i]);
    nodes.push_back(std::move(node));
  }
  std::string url = quorum_url(nodes);
  return quorum_client(std::move(nodes), quorum, options, std::move(url), "quorum");
}

Result<std::shared_ptr<Client>> connect_quorum_checked(const std::vector<std::string>& urls, QuorumOptions quorum,
                                                       ClientOptions options) {
  if (Status s = detail::validate(quorum); !s) return s;
  std::vector<detail::QuorumNode> nodes;
  for (std::size_t i = 0; i < urls.size(); ++i) {
    auto url = detail::parse_url(urls[i]);
    if (!url) return Status(url.code(), "quorum: node " + std::to_string(i + 1) + ": " + url.status().message());
    auto node = url_node(*url, quorum, options);
    if (!node) return node.status();
    nodes.push_back(std::move(*node));
  }
  std::string url = quorum_url(nodes);
  return quorum_client(std::move(nodes), quorum, options, std::move(url), "quorum");
}

std::shared_ptr<Client> connect_quorum(std::vector<std::shared_ptr<Client>> nodes, QuorumOptions quorum,
                                       ClientOptions options) {
  return connect_quorum_checked(std::move(nodes), quorum, options).value();
}

std::shared_ptr<Client> connect_quorum(const std::vector<std::string>& urls, QuorumOptions quorum,
                                       ClientOptions options) {
  return connect_quorum_checked(urls, quorum, options).value();
}

namespace detail {

// redlock://[user:pass@]h1:p1,...,hN:pN[/db][?node_timeout=200ms&drift_factor=0.01&<redis options>]:
// one redis:// node per host, each with the credentials, database and the
// redis options (prefix, connections, ...) of the URL.
Result<std::unique_ptr<Backend>> open_redlock_backend(const Url& url, const ClientOptions& options) {
  auto invalid = [&](std::string why) {
    return Status(errc::invalid_argument, "redlock url " + url.redacted() + ": " + std::move(why));
  };
  QuorumOptions quorum;
  Url node_url = url;
  node_url.scheme = "redis";
  if (auto it = node_url.query.find("node_timeout"); it != node_url.query.end()) {
    auto d = parse_duration(it->second, "node_timeout");
    if (!d) return invalid(d.status().message());
    quorum.node_timeout = *d;
    node_url.query.erase(it);
  }
  if (auto it = node_url.query.find("drift_factor"); it != node_url.query.end()) {
    const std::string& text = it->second;
    double value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc{} || end != text.data() + text.size())
      return invalid("drift_factor '" + text + "' is not a number (e.g. 0.01)");
    quorum.drift_factor = value;
    node_url.query.erase(it);
  }
  if (Status s = validate(quorum); !s) return invalid(s.message());
  // Every node issues its tokens from its clock (microseconds), not by
  // counting up from its last one: counts on different nodes are not
  // comparable, clocks are (dlock/quorum.h, token()).
  node_url.query.emplace("token_retention", "0");
  if (url.endpoints.size() < 3)
    return invalid("needs at least 3 hosts (got " + std::to_string(url.endpoints.size()) +
                   "): with fewer, one server failing stops every lock");
  std::vector<QuorumNode> nodes;
  for (const Endpoint& endpoint : url.endpoints) {
    Url one = node_url;
    one.endpoints = {endpoint};
    auto node = url_node(one, quorum, options);
    if (!node) return node.status();
    nodes.push_back(std::move(*node));
  }
  return open_quorum_backend(std::move(nodes), quorum, options);
}

}  // namespace detail
}  // namespace dlock
