#include <dlock/latch.h>

#include "core/client_state.h"
#include "core/latch_driver.h"

#include <algorithm>
#include <string>
#include <thread>

namespace dlock {
namespace {

using detail::steady;

// The longest a waiter trusts a notification alone before reading again
// (a safety net: a lost watch costs at most this much delay).
constexpr std::chrono::milliseconds reread_interval{500};

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
  // A notification armed on the store and not yet fired: the safety re-read
  // doesn't arm another one (each would stay registered until the count changes).
  std::unique_ptr<detail::Waiter> change;
  for (;;) {
    // Reading and arming are one step, so a change in between is not missed.
    auto read = driver(*client_).read(name_, count_, !change, op_deadline(*client_)).value();
    if (read.remaining == 0) return true;
    if (read.change) change = std::move(read.change);
    const auto now = steady::now();
    if (now >= deadline) return false;
    const auto until = std::min(deadline, now + reread_interval);
    if (!change) {
      std::this_thread::sleep_until(until);
      continue;
    }
    change->wait_until(until).throw_if_error();
    if (steady::now() < until) change.reset();  // it fired (or the session changed): arm anew
  }
}

}  // namespace dlock
