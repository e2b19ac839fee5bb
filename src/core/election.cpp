// Election: the leader is the holder of a LockKind::leader on the election's
// name, so campaigning is the one acquire loop (the candidate's place in
// the store's queue, the predecessor watch), resigning is a release, and
// losing leadership is a lost hold.
#include <dlock/election.h>

#include "core/backoff.h"
#include "core/client_state.h"

#include <algorithm>
#include <thread>

namespace dlock {
namespace {
using detail::LockKind;
using steady = std::chrono::steady_clock;

// A watch is a hint: the leader is read again at least this often.
constexpr std::chrono::milliseconds observe_safety_net{500};
}  // namespace

Election::Election(std::shared_ptr<detail::ClientState> client, std::string name, MutexOptions options)
    : client_(std::move(client)), name_(std::move(name)), options_(options) {}

void Election::campaign(std::string id) { campaign_until_steady(steady::time_point::max(), std::move(id)); }

bool Election::campaign_until_steady(steady::time_point deadline, std::string id) {
  // Leading is a state, not a count: campaigning again changes nothing.
  if (auto held = client_->find(name_, LockKind::leader)) {
    if (held->check_lost())
      throw Error(errc::lock_lost, "campaign '" + name_ + "': this thread lost leadership; resign() first");
    return true;
  }
  return client_->acquire(name_, LockKind::leader, options_, deadline, std::move(id)).value();
}

detail::AsyncStart Election::starter(steady::time_point deadline, std::string id, std::stop_token stop) const {
  return [client = client_, name = name_, options = options_, deadline, id = std::move(id), stop](AsyncCallback done) {
    client->acquire_async(detail::lock_request(name, LockKind::leader, options, id), options, deadline, stop,
                          std::move(done));
  };
}

void Election::resign() noexcept { (void)client_->release(name_, LockKind::leader); }

Status Election::resign_checked() noexcept { return client_->release(name_, LockKind::leader); }

bool Election::is_leader() const noexcept {
  try {
    auto hold = client_->find(name_, LockKind::leader);
    return hold && !hold->check_lost();
  } catch (...) {
    return false;
  }
}

bool Election::lost() const noexcept {
  try {
    auto hold = client_->find(name_, LockKind::leader);
    return hold && hold->check_lost();
  } catch (...) {
    return false;
  }
}

std::stop_token Election::stop_token() const {
  auto hold = client_->find(name_, LockKind::leader);
  if (!hold) throw Error(errc::not_owner, "stop_token of election '" + name_ + "': the calling thread does not lead");
  return hold->stop.get_token();
}

std::uint64_t Election::token() const {
  auto hold = client_->find(name_, LockKind::leader);
  if (!hold) throw Error(errc::not_owner, "token of election '" + name_ + "': the calling thread does not lead");
  return hold->token;
}

std::optional<std::string> Election::leader() {
  return client_->backend().locks().holder(name_, LockKind::leader, false).value().data;
}

std::optional<std::string> Election::wait_leader_change_steady(const std::optional<std::string>& known,
                                                                steady::time_point deadline) {
  detail::Backoff backoff(std::chrono::milliseconds(1), client_->options().max_backoff);
  for (;;) {
    const bool may_wait = steady::now() < deadline;
    auto now = client_->backend().locks().holder(name_, LockKind::leader, may_wait).value();
    if (now.data != known || !may_wait) return now.data;
    // With a watch, sleep until notified; without one (nobody leads),
    // poll with backoff.
    auto wake = std::min(deadline, steady::now() + (now.change ? observe_safety_net : backoff.next()));
    if (now.change) {
      now.change->wait_until(wake).throw_if_error();
    } else {
      std::this_thread::sleep_until(wake);
    }
  }
}

}  // namespace dlock
