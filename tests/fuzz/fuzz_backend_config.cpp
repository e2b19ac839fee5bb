// Fuzzes what each backend makes of a parsed URL before any I/O, through its
// config.h: redis://, redis+unix://, redis+sentinel://, redis+cluster://,
// zk://, etcd://, etcds:// (which reads the PEM files its URL names),
// postgres://, mysql:// (which check that their TLS files can be read),
// file:// and sqlite://.
// Beyond not crashing:
//   - a password is never echoed: not in an error, not in the redacted URL
//     the client puts in its messages and logs;
//   - a config that parses is named by its redacted URL: that URL parses to
//     the same config (but for the password, shown as "***"), so what a
//     message shows is the store the client uses.
#include "backends/etcd/config.h"
#include "backends/file/config.h"
#include "backends/mysql/config.h"
#include "backends/postgres/config.h"
#include "backends/redis/config.h"
#include "backends/sqlite/config.h"
#include "backends/zookeeper/config.h"
#include "core/url.h"

#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace {

using dlock::ClientOptions;
using dlock::detail::Url;

// A password the check can look for without false alarms: 8+ letters and
// digits with at least two of each case and two digits, which no fixed text
// of a message holds, appearing once in the URL.
bool distinctive(const std::string& password, std::string_view text) {
  if (password.size() < 8) return false;
  int upper = 0, lower = 0, digits = 0;
  for (unsigned char ch : password) {
    if (std::isupper(ch)) ++upper;
    else if (std::islower(ch)) ++lower;
    else if (std::isdigit(ch)) ++digits;
    else return false;
  }
  if (upper < 2 || lower < 2 || digits < 2) return false;
  const auto first = text.find(password);
  return first != std::string_view::npos && text.find(password, first + 1) == std::string_view::npos;
}

void must_not_show(const std::string& shown, const std::optional<std::string>& secret) {
  if (secret && shown.find(*secret) != std::string::npos) std::abort();
}

// The config its redacted URL names, parsed again.
template <typename Parse>
auto reparse(const std::string& redacted, Parse parse) {
  auto url = dlock::detail::parse_url(redacted);
  if (!url) std::abort();  // a redacted URL must parse
  return parse(*url, ClientOptions{});
}

void check_redis(const Url& url, const std::optional<std::string>& secret) {
  auto c = dlock::detail::redis::parse_config(url, ClientOptions{});
  if (!c) return must_not_show(c.status().message(), secret);
  must_not_show(c->redacted_url, secret);
  auto again = reparse(c->redacted_url, dlock::detail::redis::parse_config);
  if (!again) std::abort();
  if (again->host != c->host || again->port != c->port || again->socket_path != c->socket_path ||
      again->unix_socket != c->unix_socket || again->user != c->user || again->db != c->db ||
      again->prefix != c->prefix || again->connections != c->connections ||
      again->waiter_ttl != c->waiter_ttl || again->token_retention != c->token_retention ||
      again->master_name != c->master_name || again->sentinels.size() != c->sentinels.size() ||
      again->wait_replicas != c->wait_replicas || again->wait_timeout != c->wait_timeout ||
      again->password.has_value() != c->password.has_value())
    std::abort();
  // Hash tags: a prefix with braces would move every key out of its name's slot.
  if (c->prefix.empty() || c->prefix.find_first_of("{}") != std::string::npos) std::abort();
}

void check_zookeeper(const Url& url, const std::optional<std::string>& secret) {
  auto c = dlock::detail::zookeeper::parse_config(url, ClientOptions{});
  if (!c) return must_not_show(c.status().message(), secret);
  must_not_show(c->redacted_url, secret);
  must_not_show(c->hosts, secret);
  auto again = reparse(c->redacted_url, dlock::detail::zookeeper::parse_config);
  if (!again) std::abort();
  if (again->hosts != c->hosts || again->root != c->root || again->user != c->user ||
      again->session_timeout != c->session_timeout || again->lost_on_suspend != c->lost_on_suspend)
    std::abort();
  if (c->root.empty() || c->root.front() != '/') std::abort();
}

void check_etcd(const Url& url, const std::optional<std::string>& secret) {
  auto c = dlock::detail::etcd::parse_config(url, ClientOptions{});
  if (!c) return must_not_show(c.status().message(), secret);
  must_not_show(c->redacted_url, secret);
  for (const auto& endpoint : c->endpoints) must_not_show(endpoint, secret);
  // etcd keys (and etcdctl's names) have no leading or trailing '/'.
  if (c->prefix.empty() || c->prefix.front() == '/' || c->prefix.back() == '/') std::abort();
  if (c->ttl < std::chrono::seconds(2) || c->ttl > std::chrono::hours(1)) std::abort();
  // TLS files only with etcds://, a certificate only with its key.
  if (!c->tls && !(c->ca_file.empty() && c->cert_file.empty() && c->key_file.empty())) std::abort();
  if (c->cert_file.empty() != c->key_file.empty()) std::abort();
  // The redacted URL hides key= as it hides passwords (its name ends in
  // "key"): there is no client key file to parse back.
  if (!c->key_file.empty()) return;
  auto again = reparse(c->redacted_url, dlock::detail::etcd::parse_config);
  if (!again) std::abort();
  if (again->endpoints != c->endpoints || again->prefix != c->prefix || again->user != c->user ||
      again->ttl != c->ttl || again->tls != c->tls || again->ca_file != c->ca_file ||
      again->cert_file != c->cert_file || again->key_file != c->key_file)
    std::abort();
}

// The libpq parameters but the password, which must be there to be sent.
std::vector<std::pair<std::string, std::string>> shown_params(const dlock::detail::postgres::ConnectInfo& info) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& param : info.params)
    if (param.first != "password") out.push_back(param);
  return out;
}

void check_postgres(const Url& url, const std::optional<std::string>& secret) {
  auto c = dlock::detail::postgres::parse_config(url, ClientOptions{});
  if (!c) return must_not_show(c.status().message(), secret);
  must_not_show(c->connect.redacted_url, secret);
  for (const auto& [key, value] : shown_params(c->connect)) {
    must_not_show(key, secret);
    must_not_show(value, secret);
  }
  auto again = reparse(c->connect.redacted_url, dlock::detail::postgres::parse_config);
  if (!again) std::abort();
  if (shown_params(again->connect) != shown_params(c->connect) || again->session != c->session ||
      again->schema != c->schema || again->pool != c->pool || again->table.waiter_ttl != c->table.waiter_ttl)
    std::abort();
}

void check_mysql(const Url& url, const std::optional<std::string>& secret) {
  auto c = dlock::detail::mysql::parse_config(url, ClientOptions{});
  if (!c) return must_not_show(c.status().message(), secret);
  must_not_show(c->connect.redacted_url, secret);
  must_not_show(c->connect.host, secret);
  must_not_show(c->connect.database, secret);
  auto again = reparse(c->connect.redacted_url, dlock::detail::mysql::parse_config);
  if (!again) std::abort();
  if (again->connect.host != c->connect.host || again->connect.port != c->connect.port ||
      again->connect.user != c->connect.user || again->connect.database != c->connect.database ||
      again->connect.tls != c->connect.tls || again->session != c->session || again->pool != c->pool ||
      again->table.waiter_ttl != c->table.waiter_ttl)
    std::abort();
}

// file:// and sqlite:// take no password; a path that parses is absolute.
void check_local(const Url& url) {
  if (url.scheme == "file") {
    auto c = dlock::detail::file::parse_config(url, ClientOptions{});
    if (c && (c->dir.empty() || c->dir.front() != '/' || c->dir.back() == '/' || url.password)) std::abort();
  } else {
    auto c = dlock::detail::sqlite::parse_config(url, ClientOptions{});
    if (c && (c->path.empty() || c->path.front() != '/' || c->path.back() == '/' || url.password)) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto url = dlock::detail::parse_url(text);
  if (!url) return 0;
  std::optional<std::string> secret;
  if (url->password && distinctive(*url->password, text)) secret = url->password;
  if (url->scheme == "redis" || url->scheme == "redis+unix" || url->scheme == "redis+sentinel" ||
      url->scheme == "redis+cluster")
    check_redis(*url, secret);
  else if (url->scheme == "zk")
    check_zookeeper(*url, secret);
  else if (url->scheme == "etcd" || url->scheme == "etcds")
    check_etcd(*url, secret);
  else if (url->scheme == "postgres" || url->scheme == "postgresql")
    check_postgres(*url, secret);
  else if (url->scheme == "mysql" || url->scheme == "mariadb")
    check_mysql(*url, secret);
  else if (url->scheme == "file" || url->scheme == "sqlite")
    check_local(*url);
  return 0;
}
