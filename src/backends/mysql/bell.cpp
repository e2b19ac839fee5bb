#include "backends/mysql/bell.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <charconv>
#include <cstdlib>

namespace dlock::detail::mysql {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// How long one sleep lasts; a ring ends it sooner.
constexpr seconds sleep_length{5};
// Two readings of one server's start time differ by a second at most
// (uptime is whole seconds); a restart moves it by more.
constexpr std::int64_t same_start_slack = 2;

// "<connection id>/<server start, unix seconds>" read on `conn`.
Result<std::string> address_of(MyConnection& conn, std::string& server_start) {
  auto out = conn.exec("SELECT CONNECTION_ID(), UNIX_TIMESTAMP(); SHOW GLOBAL STATUS LIKE 'Uptime'",
                       "setting up wake-ups");
  if (!out) return out.status();
  if (out->size() != 2 || (*out)[0].size() != 1 || (*out)[1].size() != 1)
    return Status(errc::internal, "mysql backend: no connection id or uptime for wake-ups");
  server_start = std::to_string((*out)[0].integer(0, 1) - (*out)[1].integer(0, 1));
  return std::to_string((*out)[0].integer(0, 0)) + "/" + server_start;
}

std::int64_t number(std::string_view text) {
  std::int64_t n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  return ec == std::errc() && end == text.data() + text.size() ? n : -1;
}

}  // namespace

Result<std::shared_ptr<Bell>> Bell::start(ConnectInfo info, std::shared_ptr<sql::Mailbox> mailbox, Events& events) {
  int stop_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (stop_fd < 0) return Status(errc::internal, "mysql backend: eventfd failed");
  auto bell = std::shared_ptr<Bell>(new Bell(std::move(info), std::move(mailbox), events, stop_fd));
  std::string address;
  auto conn = bell->sleeper(steady::now() + bell->info_.op_timeout, address);
  if (!conn) return conn.status();
  bell->address_ = std::move(address);
  bell->thread_ = std::jthread([raw = bell.get(), c = std::move(*conn)]() mutable { raw->run(std::move(c)); });
  return bell;
}

Bell::Bell(ConnectInfo info, std::shared_ptr<sql::Mailbox> mailbox, Events& events, int stop_fd)
    : info_(std::move(info)), mailbox_(std::move(mailbox)), events_(events), stop_fd_(stop_fd) {}

Bell::~Bell() {
  const std::uint64_t one = 1;
  (void)!::write(stop_fd_, &one, sizeof one);
  if (thread_.joinable()) thread_.join();
  ::close(stop_fd_);
}

std::string Bell::address() const {
  std::lock_guard lk(address_mu_);
  return address_;
}

Result<std::unique_ptr<MyConnection>> Bell::sleeper(steady::time_point deadline, std::string& address) {
  auto conn = MyConnection::open(info_, nullptr, deadline);
  if (!conn) return conn.status();
  std::string start;
  auto got = address_of(**conn, start);
  if (!got) return got.status();
  address = std::move(*got);
  (*conn)->set_stop_fd(stop_fd_);
  return conn;
}

void Bell::run(std::unique_ptr<MyConnection> conn) {
  for (;;) {
    if (!conn) {
      std::string address;
      auto fresh = sleeper(steady::now() + info_.op_timeout, address);
      if (fresh) {
        conn = std::move(*fresh);
        {
          std::lock_guard lk(address_mu_);
          address_ = std::move(address);
        }
        events_.connection_restored("mysql wake-up connection");
        mailbox_->deliver_all();  // their entries name the old address: they look again, and queue anew
      } else {
        // Retry in a second, unless told to stop meanwhile.
        pollfd fd{stop_fd_, POLLIN, 0};
        if (::poll(&fd, 1, 1'000) > 0) return;
        continue;
      }
    }
    conn->set_deadline(steady::now() + sleep_length + info_.op_timeout);
    auto slept = conn->exec("SELECT SLEEP(" + std::to_string(sleep_length.count()) + ")", "waiting for wake-ups");
    pollfd stop{stop_fd_, POLLIN, 0};
    if (::poll(&stop, 1, 0) > 0) return;
    if (conn->broken()) {
      conn.reset();
      events_.connection_lost("mysql wake-up connection");
      mailbox_->deliver_all();
      continue;
    }
    // Rung: MariaDB ends the sleep with an error (interrupted), MySQL with 1.
    if (!slept || (slept->size() == 1 && (*slept)[0].integer(0, 0) == 1)) mailbox_->deliver_all();
  }
}

void Bell::wake(std::string_view address, const sql::WakeTarget& target) {
  const auto slash = address.find('/');
  if (slash == std::string_view::npos) return;
  const std::int64_t id = number(address.substr(0, slash)), start = number(address.substr(slash + 1));
  if (id <= 0) return;
  if (address == this->address()) {
    mailbox_->deliver(target);  // a waiter of this client: no need to ask the server
    return;
  }
  std::lock_guard lk(ringer_mu_);
  const auto deadline = steady::now() + info_.op_timeout;
  if (!ringer_ || ringer_->broken()) {
    auto conn = MyConnection::open(info_, nullptr, deadline);
    if (!conn) return;
    if (!address_of(**conn, ringer_start_)) return;
    ringer_ = std::move(*conn);
  }
  // An address from another start of the server names a connection id
  // that may now be someone else's: never ring it.
  if (std::llabs(number(ringer_start_) - start) > same_start_slack) return;
  ringer_->set_deadline(deadline);
  // Unknown thread (the waiter's client is gone) or not permitted (another
  // user): the waiter polls.
  (void)ringer_->exec("KILL QUERY " + std::to_string(id), "waking a waiter");
}

}  // namespace dlock::detail::mysql
