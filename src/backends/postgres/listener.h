// listener.h — wake-ups on PostgreSQL: LISTEN on this client's channel.
//
// A release's `heads` statement NOTIFYs the channel of each waiter it
// wakes ("dlock_" + the waiter client's address) with "owner\nkind\nname";
// PostgreSQL delivers it when the release commits. One connection per
// client listens, on its own thread, and hands what arrives to the
// client's Mailbox. When that connection fails, every waiter is woken (a
// wake-up may have been lost: they look again) and the thread reconnects.
#pragma once

#include "backends/postgres/connection.h"
#include "backends/sql/wakeups.h"
#include "core/events.h"

#include <memory>
#include <string>
#include <thread>

namespace dlock::detail::postgres {

class Listener final : public sql::Wakeups {
 public:
  // Listens on `conn` (a plain connection, already open) from now on.
  static Result<std::shared_ptr<Listener>> start(ConnectInfo info, std::unique_ptr<PgConnection> conn,
                                                 std::shared_ptr<sql::Mailbox> mailbox, Events& events,
                                                 std::chrono::milliseconds op_timeout);
  ~Listener() override;
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  std::string address() const override { return address_; }
  // Never needed: the database wakes the heads a release returns.
  void wake(std::string_view, const sql::WakeTarget&) override {}

 private:
  Listener(ConnectInfo info, std::string address, std::shared_ptr<sql::Mailbox> mailbox, Events& events,
           std::chrono::milliseconds op_timeout, int stop_fd);
  Status listen(PgConnection& conn, steady::time_point deadline);
  void run(std::unique_ptr<PgConnection> conn);

  const ConnectInfo info_;
  const std::string address_;
  std::shared_ptr<sql::Mailbox> mailbox_;
  Events& events_;
  const std::chrono::milliseconds op_timeout_;
  int stop_fd_ = -1;  // eventfd: written once to stop the thread
  std::jthread thread_;
};

}  // namespace dlock::detail::postgres
