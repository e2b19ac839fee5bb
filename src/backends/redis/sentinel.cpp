#include "backends/redis/sentinel.h"

#include "backends/redis/errors.h"
#include "backends/redis/replies.h"

#include <hiredis.h>

#include <algorithm>

namespace dlock::detail::redis {
namespace {

std::string address(const Endpoint& e) { return e.host + ":" + std::to_string(e.port.value_or(0)); }

bool same(const Endpoint& a, const Endpoint& b) { return a.host == b.host && a.port == b.port; }

// A connection's settings for talking to `sentinel`: no AUTH, no SELECT,
// no events (the sentinels coming and going is not the store's connection).
Config sentinel_config(const Config& base, const Endpoint& sentinel) {
  Config c;
  c.host = sentinel.host;
  c.port = sentinel.port.value_or(default_sentinel_port);
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
        if (auto master = master_address_of(reply->get())) {
          {
            std::lock_guard lk(mu_);
            first_ = at;
          }
          learned(*master);
          return *master;
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
  const std::string role_name = role_of(reply->get());
  if (role_name == "master") return {};
  failed(at);
  return Status(errc::unavailable, "redis+sentinel url " + url_ + ": " + address(at) + " is not a master (ROLE: " +
                                       role_name +
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
  if (auto master = switched_master_of(payload, master_name_)) learned(*master);
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
