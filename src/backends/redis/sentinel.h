// sentinel.h — redis+sentinel://: finding the master through Redis Sentinel,
// and following it when it changes.
//
// The backend is redis:// with another way of finding its server: every
// connection (command or subscriber) asks its Discovery where to connect and
// checks what it reached. For redis+sentinel the MasterLocator answers:
//   - where: the master it knows, else what the first sentinel that answers
//     says (SENTINEL GET-MASTER-ADDR-BY-NAME), trying each in turn within
//     the call's deadline;
//   - check: ROLE on the fresh connection must say "master" — a node the
//     sentinels still name while it is being demoted, or a stale answer, is
//     refused (unavailable) and forgotten, so nothing is ever written to a
//     replica;
//   - a connection to the master that fails makes it forget the master, so
//     the next connection asks the sentinels again;
//   - a thread subscribed to +switch-master on one sentinel (the next one if
//     it goes away) learns of a failover as the sentinels announce it.
// Each change of master bumps epoch(): connections made before are dropped
// before their next use, and the backend's on_switch runs (on the locator's
// own thread, never inside a call) — it re-validates the holds taken on the
// old master.
//
// Sentinels are spoken to without AUTH (the URL's credentials are the data
// nodes'); replication is asynchronous, so a failover can lose a lock that
// had not reached the promoted replica (docs/backends.md).
#pragma once

#include "backends/redis/config.h"
#include "backends/redis/connection.h"
#include "backends/redis/revalidator.h"
#include "backends/redis/subscriber.h"

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace dlock::detail::redis {

class MasterLocator final : public Discovery {
 public:
  // `config`: the redis+sentinel URL's (sentinels, master name, timeouts).
  explicit MasterLocator(const Config& config);
  ~MasterLocator() override;

  Result<Endpoint> where(steady::time_point deadline) override;
  Status check(Connection& connection, const Endpoint& at, steady::time_point deadline) override;
  void failed(const Endpoint& at) override;
  std::uint64_t epoch() const noexcept override { return epoch_.load(); }

  // Starts following +switch-master, and running `on_switch` after each
  // change of master (on a Revalidator's thread); while it returns false
  // (the new master did not answer) it is run again every 100 ms, for up
  // to 5 s.
  Status start(std::function<bool()> on_switch, steady::time_point deadline);
  // Stops both threads; on_switch is not called after it returns.
  void stop();

 private:
  // Asks the sentinels, one after the other, for the master's address.
  Result<Endpoint> ask(steady::time_point deadline);
  // The master is `at` now (from a sentinel's answer or announcement).
  void learned(const Endpoint& at);
  void on_message(std::string_view channel, std::string_view payload);

  const std::string master_name_;
  const std::vector<Endpoint> sentinels_;
  const std::string url_;                  // redacted, for messages
  std::vector<Config> sentinel_configs_;   // one per sentinel (no AUTH, no SELECT)
  Config watch_config_;                    // the +switch-master subscriber's

  std::mutex mu_;
  std::optional<Endpoint> master_;  // mu_: the master to connect to (reset when a connection to it fails)
  std::optional<Endpoint> last_;    // mu_: the master as last learned (epoch_ counts its changes)
  std::size_t first_ = 0;           // mu_: the sentinel to ask first (the last that answered)
  std::atomic<std::uint64_t> epoch_{0};

  std::unique_ptr<Subscriber> watcher_;
  std::mutex switch_mu_;
  std::unique_ptr<Revalidator> revalidator_;  // switch_mu_ (set by start, stopped by stop)
};

}  // namespace dlock::detail::redis
