// bell.h — wake-ups on MySQL/MariaDB, which has no NOTIFY.
//
// Each client keeps one connection asleep in SELECT SLEEP(...) on a thread
// of its own. Its address (stored with the client's queue entries) is that
// connection's id on the server and the server's start time, so that an id
// from before a restart — which the server hands out again — is never
// rung. A release rings the waiters it freed with KILL QUERY <id> from a
// connection of the releasing client: the sleep ends at once, the thread
// wakes every waiter of its client (a ring carries nothing: each looks
// again, and only the head finds the lock free) and sleeps again.
//
// A ring is a hint. One that arrives between two sleeps, or while the
// sleeping connection is being replaced, is lost, and the waiter finds out
// at its next periodic look, as without wake-ups. KILL QUERY of another
// session needs the same database user, or CONNECTION ADMIN (PROCESS on
// older servers): clients of different users are not rung, and poll.
#pragma once

#include "backends/mysql/connection.h"
#include "backends/sql/wakeups.h"
#include "core/events.h"

#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace dlock::detail::mysql {

class Bell final : public sql::Wakeups {
 public:
  // Starts the sleeping connection's thread (its first connection is made
  // here, so a bad server fails the client's creation).
  static Result<std::shared_ptr<Bell>> start(ConnectInfo info, std::shared_ptr<sql::Mailbox> mailbox,
                                             Events& events);
  ~Bell() override;
  Bell(const Bell&) = delete;
  Bell& operator=(const Bell&) = delete;

  std::string address() const override;
  void wake(std::string_view address, const sql::WakeTarget& target) override;

 private:
  Bell(ConnectInfo info, std::shared_ptr<sql::Mailbox> mailbox, Events& events, int stop_fd);
  // A connection set up to sleep (and its address), by `deadline`.
  Result<std::unique_ptr<MyConnection>> sleeper(steady::time_point deadline, std::string& address);
  void run(std::unique_ptr<MyConnection> conn);

  const ConnectInfo info_;
  std::shared_ptr<sql::Mailbox> mailbox_;
  Events& events_;
  int stop_fd_ = -1;  // eventfd: written once to stop the thread
  // The address rings to this client go to. It changes only when the
  // sleeping connection is replaced; waiters that queued with the old one
  // are woken then (and queue again with the new one).
  mutable std::mutex address_mu_;
  std::string address_;  // guarded by address_mu_
  std::mutex ringer_mu_;
  std::unique_ptr<MyConnection> ringer_;  // guarded by ringer_mu_: made on the first ring
  std::string ringer_start_;              // guarded by ringer_mu_: its server's start time
  std::jthread thread_;
};

}  // namespace dlock::detail::mysql
