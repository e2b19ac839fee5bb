// dlock::Hold: a hold of its own (not a thread's), as the async API gives
// it — a detail::HeldLock the lease keeper renews, released through the client.
#include <dlock/hold.h>

#include "core/client_state.h"

namespace dlock {

static_assert(std::is_nothrow_move_constructible_v<Hold>);
static_assert(noexcept(std::declval<Hold&>().unlock()));

Hold::Hold(std::shared_ptr<detail::ClientState> client, std::shared_ptr<detail::HeldLock> hold) noexcept
    : client_(std::move(client)), hold_(std::move(hold)) {}

Hold& Hold::operator=(Hold&& other) noexcept {
  if (this != &other) {
    unlock();
    client_ = std::move(other.client_);
    hold_ = std::move(other.hold_);
  }
  return *this;
}

Hold::~Hold() { unlock(); }

const std::string& Hold::name() const noexcept {
  static const std::string none;
  return hold_ ? hold_->request.name : none;
}

std::uint64_t Hold::token() const {
  if (!hold_) throw Error(errc::not_owner, "token of an empty Hold: it holds nothing");
  return hold_->token;
}

bool Hold::lost() const noexcept { return hold_ && hold_->check_lost(); }

std::stop_token Hold::stop_token() const {
  if (!hold_) throw Error(errc::not_owner, "stop_token of an empty Hold: it holds nothing");
  return hold_->stop.get_token();
}

void Hold::unlock() noexcept {
  if (!hold_) return;
  (void)client_->let_go(*hold_, true, false);
  hold_.reset();
  client_.reset();  // may be the client's last handle: it goes now
}

Status Hold::unlock_checked() noexcept {
  if (!hold_) return Status(errc::not_owner, "unlock of an empty Hold: it holds nothing");
  Status s = client_->let_go(*hold_, true);
  hold_.reset();
  client_.reset();
  return s;
}

std::future<Hold> Hold::future_of(const detail::AsyncStart& start) {
  auto promise = std::make_shared<std::promise<Hold>>();
  auto future = promise->get_future();
  start([promise](Status s, Hold hold) {
    if (s.ok()) promise->set_value(std::move(hold));
    else promise->set_exception(std::make_exception_ptr(Error(s.code(), s.message())));
  });
  return future;
}

}  // namespace dlock
