#include "backends/redis/sentinel.h"

#include "backends/redis/errors.h"

#include <hiredis.h>

#include <algorithm>
#include <charconv>

namespace dlock::detail::redis {
namespace {

std::string address(const Endpoint& e) { return e.host + ":" + std::to_string(e.port.value_or(0)); }

bool same(const Endpoint& a, const Endpoint& b) { return a.host == b.host && a.port == b.port; }

std::string_view text_of(const redisReply* r) {
  return r && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS) ? std::string_view(r->str, r->len)
                                                                             : std::string_view();
}

std::optional<std::uint16_t> port_of(std::string_view text) {
  unsigned value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || value == 0 || value > 65535) return std::nullopt;
  return static_cast<std::uint16_t>(value);
}

// A connection's settings for talking to `sentinel`: no AUTH, no SELECT,
// no events (the sentinels coming and going is not the store's connection).
Config sentinel_config(const Config& base, const Endpoint& sentinel) {
  Config c;
  c.host = sentinel.host;
  c.port = sentinel.port.value_or(26379);
  c.op_timeout = base.op_timeout;
  c.connect_timeout = base.connect_timeout;
  c.connections = 1;
  c.redacted_url = "sentinel " + address(sentinel) + " of " + base.redacted_url;
  return c;
}

}  // namespace

MasterLocator::MasterLocator(const Config& config)
    : master_name_(config.master_name), sentinels_(config.sentinels), url_(config.redacted_url) {
  for (const auto& s : sentinels_) sentinel_configs_.push_back(sentinel_config(config, s));
  watch_config_ = sentinel_config(config, sentinels_.front());
  watch_config_.redacted_url = "the sentinels of " + config.redacted_url;
  // (each sentinel in turn)
  watch_config_.discovery = std::make_shared<Rotation>(sentinels_);
}

MasterLocator::~MasterLocator() { stop(); }

Result<Endpoint> MasterLocator::where(steady::time_point deadline) {
  {
    std::lock_guard lk(mu_);
    if (master_) return *master_;
  }
  return ask(deadline);
}

// Each sentinel gets an equal share of the time left (one that is down
// refuses at once; one black-holed costs only its share).
Result<Endpoint> MasterLocator::ask(steady::time_point deadline) {
  std::size_t first;
  {
    std::lock_guard lk(mu_);
    first = first_;
  }
  std::string errors;
  int answered = 0;
  for (std::size_t i = 0; i < sentinels_.size(); ++i) {
    const std::size_t at = (first + i) % sentinels_.size();
    const auto now = steady::now();
    if (now >= deadline) break;
    const auto share = now + (deadline - now) / static_cast<long>(sentinels_.size() - i);
    Connection conn(sentinel_configs_[at], nullptr);
    const std::string step = "asking sentinel " + address(sentinels_[at]) + " for master '" + master_name_ + "'";
    Status failure = conn.connect(share);
    if (failure) {
      const std::string_view words[] = {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", master_name_};
      auto reply = conn.command(words, share, step);
      if (reply) {
        ++answered;
        const redisReply* r = reply->get();
        if (r->type == REDIS_REPLY_ARRAY && r->elements == 2) {
          auto port = port_of(text_of(r->element[1]));
          if (port && !text_of(r->element[0]).empty()) {
            Endpoint master{std::string(text_of(r->element[0])), port};
            {
              std::lock_guard lk(mu_);
              first_ = at;
            }
            learned(master);
            return master;
          }
        }
        failure = Status(errc::unavailable, "sentinel " + address(sentinels_[at]) + " does not know master '" +
                                                master_name_ + "'");
      } else {
        failure = reply.status();
      }
    }
    if (!errors.empty()) errors += "; ";
    errors += failure.message();
  }
  if (answered == static_cast<int>(sentinels_.size()))
    return Status(errc::invalid_argument, "redis+sentinel url " + url_ + ": no sentinel monitors a master named '" +
                                              master_name_ + "' (the URL's path is the name given to "
                                              "'sentinel monitor')");
  return Status(errc::unavailable, "redis+sentinel url " + url_ + ": no sentinel named the master of '" +
                                       master_name_ + "' in time (" + errors + ")");
}

Status MasterLocator::check(Connection& connection, const Endpoint& at, steady::time_point deadline) {
  const std::string_view role[] = {"ROLE"};
  auto reply = connection.command(role, deadline, "checking the role of " + address(at));
  if (!reply) return reply.status();
  const redisReply* r = reply->get();
  const std::string_view role_name =
      r->type == REDIS_REPLY_ARRAY && r->elements >= 1 ? text_of(r->element[0]) : std::string_view("?");
  if (role_name == "master") return {};
  failed(at);
  return Status(errc::unavailable, "redis+sentinel url " + url_ + ": " + address(at) + " is not a master (ROLE: " +
                                       std::string(role_name) +
                                       "); a failover is under way, or the sentinels' answer was stale");
}

void MasterLocator::failed(const Endpoint& at) {
  std::lock_guard lk(mu_);
  if (master_ && same(*master_, at)) master_.reset();
}

void MasterLocator::learned(const Endpoint& at) {
  {
    std::lock_guard lk(mu_);
    master_ = at;
    if (last_ && same(*last_, at)) return;  // the same master, asked again after a failure
    last_ = at;
  }
  // A new master (or the first one): connections to any other are dropped.
  epoch_.fetch_add(1);
  std::lock_guard lk(switch_mu_);
  if (revalidator_) revalidator_->request();
}

// "+switch-master <name> <old ip> <old port> <new ip> <new port>"
void MasterLocator::on_message(std::string_view channel, std::string_view payload) {
  if (channel != "+switch-master") return;
  std::vector<std::string_view> words;
  while (!payload.empty()) {
    const auto cut = payload.find(' ');
    words.push_back(payload.substr(0, cut));
    if (cut == std::string_view::npos) break;
    payload.remove_prefix(cut + 1);
  }
  if (words.size() != 5 || words[0] != master_name_) return;
  if (auto port = port_of(words[4])) learned(Endpoint{std::string(words[3]), port});
}

Status MasterLocator::start(std::function<bool()> on_switch, steady::time_point deadline) {
  {
    // (the master found so far is the first, not a switch)
    std::lock_guard lk(switch_mu_);
    revalidator_ = std::make_unique<Revalidator>([on_switch = std::move(on_switch)](const std::set<int>&) {
      return on_switch();
    });
  }
  watcher_ = std::make_unique<Subscriber>(watch_config_, "+switch-master",
                                          [this](std::string_view channel, std::string_view payload) {
                                            on_message(channel, payload);
                                          });
  // A sentinel that is down is skipped: the subscriber's thread keeps
  // trying the others. Only a start that reaches none fails.
  Status started = watcher_->start(deadline);
  for (std::size_t i = 1; !started && i < sentinels_.size() && steady::now() < deadline; ++i)
    started = watcher_->start(deadline);  // (a failed connection moved the rotation on)
  if (!started) {
    stop();
    return started;
  }
  return {};
}

void MasterLocator::stop() {
  // (not under switch_mu_: the check it may be running can learn a master)
  Revalidator* revalidator;
  {
    std::lock_guard lk(switch_mu_);
    revalidator = revalidator_.get();
  }
  if (revalidator) revalidator->stop();
  watcher_.reset();
}

}  // namespace dlock::detail::redis
