// Making quorum clients: from clients, from URLs, and redlock:// (a quorum
// of redis:// nodes). The quorum itself is core's (core/quorum_backend.h);
// this file only turns URLs into nodes.
#include <dlock/quorum.h>

#include "core/client_state.h"
#include "core/duration.h"
#include "core/owner_id.h"
#include "core/quorum_backend.h"
#include "core/registry.h"
#include "core/validate.h"

#include <charconv>

namespace dlock {
namespace {

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
  auto identity = detail::node_identity(url);
  if (!identity) return identity.status();
  ClientOptions node_options = options;
  node_options.op_timeout = quorum.node_timeout;
  detail::QuorumNode node;
  node.label = url.redacted();
  node.identity = std::move(*identity);
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
    auto identity = detail::node_identity(*url);
    if (!identity) return identity.status();
    detail::QuorumNode node;
    node.label = clients[i]->url();
    node.identity = std::move(*identity);
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
