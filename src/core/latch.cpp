#include <dlock/latch.h>

#include "core/client_state.h"
#include "core/latch_driver.h"
#include "core/notified_wait.h"

#include <string>

namespace dlock {
namespace {

using detail::steady;

detail::LatchDriver& driver(detail::ClientState& client) {
  // Client::latch() handed this handle out only if the backend has latches.
  return *client.backend().latches();
}

steady::time_point op_deadline(const detail::ClientState& client) {
  return steady::now() + client.options().op_timeout;
}

}  // namespace

Latch::Latch(std::shared_ptr<detail::ClientState> client, std::string name, std::int64_t count)
    : client_(std::move(client)), name_(std::move(name)), count_(count) {}

void Latch::count_down(std::int64_t n) {
  if (n < 0)
    throw Error(errc::invalid_argument,
                "count_down of latch '" + name_ + "': n must be >= 0, not " + std::to_string(n));
  (void)driver(*client_).count_down(name_, count_, n, op_deadline(*client_)).value();
}

bool Latch::try_wait() {
  return driver(*client_).read(name_, count_, false, op_deadline(*client_)).value().remaining == 0;
}

void Latch::wait() { (void)wait_until_steady(steady::time_point::max()); }

void Latch::arrive_and_wait(std::int64_t n) {
  count_down(n);
  wait();
}

bool Latch::wait_until_steady(steady::time_point deadline) {
  struct Checked {
    bool done;
    std::unique_ptr<detail::Waiter> change;
  };
  return detail::wait_until_done(deadline, [&](bool watch) {
    auto read = driver(*client_).read(name_, count_, watch, op_deadline(*client_)).value();
    return Checked{read.remaining == 0, std::move(read.change)};
  });
}

}  // namespace dlock
