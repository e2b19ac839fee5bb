#include <dlock/client.h>

#include "core/barrier_driver.h"
#include "core/client_state.h"
#include "core/counter_driver.h"
#include "core/latch_driver.h"
#include "core/semaphore_driver.h"
#include "core/validate.h"

#include <algorithm>
#include <limits>
#include <string_view>

namespace dlock {

Client::Client(std::shared_ptr<detail::ClientState> state) : state_(std::move(state)) {}
Client::~Client() = default;

namespace {

// Throws unsupported unless the backend `has` the primitive `call` makes
// (`what`: "a semaphore", ...).
void require(const detail::ClientState& state, bool has, std::string_view call, std::string_view what) {
  if (!has)
    throw Error(errc::unsupported, std::string(call) + ": the " + state.scheme() + " backend has no " +
                                       std::string(what));
}

// Every check a handle's name passes before any I/O.
void check_name(detail::ClientState& state, const std::string& name) {
  detail::validate_name(name).throw_if_error();
  state.backend().validate_name(name).throw_if_error();
}

// Every check a lock's name and options pass before any I/O.
void check(detail::ClientState& state, const std::string& name, const MutexOptions& options) {
  check_name(state, name);
  detail::validate(options).throw_if_error();
  state.backend().validate(options).throw_if_error();
  if (options.fair && !state.backend().supports_fair())
    throw Error(errc::unsupported, "MutexOptions::fair: the " + state.scheme() + " backend keeps no queue of waiters");
}

}  // namespace

Mutex Client::mutex(std::string name, MutexOptions options) {
  check(*state_, name, options);
  return Mutex(state_, std::move(name), options);
}

MultiLock Client::multi_lock(std::vector<std::string> names, MutexOptions options) {
  if (names.empty()) throw Error(errc::invalid_argument, "multi_lock: names is empty");
  std::sort(names.begin(), names.end());
  if (auto twice = std::adjacent_find(names.begin(), names.end()); twice != names.end())
    throw Error(errc::invalid_argument, "multi_lock: the name '" + *twice + "' is listed twice");
  std::vector<Mutex> locks;
  for (const auto& name : names) locks.push_back(mutex(name, options));
  return MultiLock(std::move(locks), std::move(names));
}

SharedMutex Client::shared_mutex(std::string name, MutexOptions options) {
  require(*state_, state_->backend().supports_shared(), "shared_mutex", "read-write lock");
  check(*state_, name, options);
  return SharedMutex(state_, std::move(name), options);
}

Counter Client::counter(std::string name, CounterWidth width) {
  require(*state_, state_->backend().counters() != nullptr, "counter", "counter");
  check_name(*state_, name);
  return Counter(state_, std::move(name), width);
}

Latch Client::latch(std::string name, std::int64_t count) {
  auto* latches = state_->backend().latches();
  require(*state_, latches != nullptr, "latch", "latch");
  check_name(*state_, name);
  if (count < 0 || count > std::numeric_limits<std::int32_t>::max())
    throw Error(errc::invalid_argument, "latch '" + name + "': count must be in 0..2147483647 (int32), not " +
                                            std::to_string(count));
  // The first client to open it sets its count.
  (void)latches->read(name, count, false, detail::steady::now() + state_->options().op_timeout).value();
  return Latch(state_, std::move(name), count);
}

Semaphore Client::semaphore(std::string name, std::ptrdiff_t permits, MutexOptions options) {
  require(*state_, state_->semaphores() != nullptr, "semaphore", "semaphore");
  check(*state_, name, options);
  if (permits < 1 || permits > std::numeric_limits<std::int32_t>::max())
    throw Error(errc::invalid_argument, "semaphore '" + name + "': permits must be between 1 and 2147483647, not " +
                                            std::to_string(permits));
  return Semaphore(state_, std::move(name), permits, options);
}

Barrier Client::barrier(std::string name, int parties, MutexOptions options) {
  require(*state_, state_->backend().barriers() != nullptr, "barrier", "barrier");
  check_name(*state_, name);
  detail::validate(options).throw_if_error();
  if (parties < 1)
    throw Error(errc::invalid_argument,
                "barrier '" + name + "': parties must be >= 1, not " + std::to_string(parties));
  return Barrier(state_, std::move(name), parties, options);
}

Election Client::election(std::string name, MutexOptions options) {
  require(*state_, state_->backend().supports_election(), "election", "elections");
  check(*state_, name, options);
  return Election(state_, std::move(name), options);
}

std::vector<LockInfo> Client::list_locks(std::string_view prefix) {
  return state_->backend().locks().list(prefix).value();
}

Status Client::ping() { return state_->backend().ping(); }

std::optional<std::chrono::milliseconds> Client::session_timeout() const {
  return state_->backend().session_timeout();
}

const std::string& Client::url() const noexcept { return state_->url(); }
const std::string& Client::scheme() const noexcept { return state_->scheme(); }
ClientStats Client::stats() const noexcept { return state_->stats(); }

namespace detail {
std::shared_ptr<Client> make_client(std::shared_ptr<ClientState> state) {
  return std::shared_ptr<Client>(new Client(std::move(state)));
}
std::shared_ptr<ClientState> state_of(const Client& client) { return client.state_; }
}  // namespace detail

}  // namespace dlock
