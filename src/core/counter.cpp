#include <dlock/counter.h>

#include "core/client_state.h"
#include "core/counter_driver.h"

namespace dlock {
namespace {

// The driver and the deadline of one call: op_timeout from now.
struct Step {
  detail::CounterDriver& driver;
  detail::steady::time_point deadline;
};

Step step(detail::ClientState& client) {
  // Client::counter() handed this handle out only if the backend has counters.
  return {*client.backend().counters(), detail::steady::now() + client.options().op_timeout};
}

}  // namespace

Counter::Counter(std::shared_ptr<detail::ClientState> client, std::string name, CounterWidth width)
    : client_(std::move(client)), name_(std::move(name)), width_(width) {}

std::int64_t Counter::load() {
  auto [driver, deadline] = step(*client_);
  return driver.load(name_, deadline).value();
}

void Counter::store(std::int64_t value) {
  auto [driver, deadline] = step(*client_);
  driver.store(name_, value, width_, deadline).throw_if_error();
}

std::int64_t Counter::fetch_add(std::int64_t delta) {
  auto [driver, deadline] = step(*client_);
  return driver.fetch_add(name_, delta, width_, deadline).value();
}

bool Counter::compare_exchange(std::int64_t& expected, std::int64_t desired) {
  auto [driver, deadline] = step(*client_);
  return driver.compare_exchange(name_, expected, desired, width_, deadline).value();
}

}  // namespace dlock
