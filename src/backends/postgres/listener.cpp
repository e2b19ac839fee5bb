#include "backends/postgres/listener.h"

#include "core/owner_id.h"
#include "core/thread_name.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

namespace dlock::detail::postgres {

Result<std::shared_ptr<Listener>> Listener::start(ConnectInfo info, std::unique_ptr<PgConnection> conn,
                                                  std::shared_ptr<sql::Mailbox> mailbox, Events& events,
                                                  std::chrono::milliseconds op_timeout) {
  auto address = random_client_id();
  if (!address) return address.status();
  int stop_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (stop_fd < 0) return Status(errc::internal, "postgres backend: eventfd failed");
  auto listener = std::shared_ptr<Listener>(
      new Listener(std::move(info), std::move(*address), std::move(mailbox), events, op_timeout, stop_fd));
  if (Status s = listener->listen(*conn, steady::now() + op_timeout); !s) return s;
  listener->thread_ = std::jthread([raw = listener.get(), c = std::move(conn)]() mutable {
    name_this_thread("dlock-pg-listen");
    raw->run(std::move(c));
  });
  return listener;
}

Listener::Listener(ConnectInfo info, std::string address, std::shared_ptr<sql::Mailbox> mailbox, Events& events,
                   std::chrono::milliseconds op_timeout, int stop_fd)
    : info_(std::move(info)), address_(std::move(address)), mailbox_(std::move(mailbox)), events_(events),
      op_timeout_(op_timeout), stop_fd_(stop_fd) {}

Listener::~Listener() {
  const std::uint64_t one = 1;
  (void)!::write(stop_fd_, &one, sizeof one);
  if (thread_.joinable()) thread_.join();
  ::close(stop_fd_);
}

Status Listener::listen(PgConnection& conn, steady::time_point deadline) {
  conn.set_deadline(deadline);
  auto done = conn.exec("LISTEN \"dlock_" + address_ + "\"", "listening for wake-ups");
  return done ? Status{} : done.status();
}

void Listener::run(std::unique_ptr<PgConnection> conn) {
  auto deliver = [this](std::string_view payload) {
    if (auto target = sql::WakeTarget::decode(payload)) mailbox_->deliver(*target);
  };
  for (bool stopped = false; !stopped;) {
    if (!conn) {
      auto fresh = PgConnection::open(info_, nullptr, steady::now() + op_timeout_);
      if (fresh && listen(**fresh, steady::now() + op_timeout_)) {
        conn = std::move(*fresh);
        events_.connection_restored("postgres wake-up listener");
        mailbox_->deliver_all();
      } else {
        // Retry in a second, unless told to stop meanwhile.
        pollfd fd{stop_fd_, POLLIN, 0};
        if (::poll(&fd, 1, 1'000) > 0) return;
        continue;
      }
    }
    Status s = conn->wait_notifications(steady::now() + std::chrono::seconds(1), stop_fd_, stopped, deliver);
    if (!s) {
      conn.reset();
      events_.connection_lost("postgres wake-up listener");
      mailbox_->deliver_all();
    }
  }
}

}  // namespace dlock::detail::postgres
