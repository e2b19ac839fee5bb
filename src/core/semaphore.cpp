// Semaphore: the permits a handle holds, newest last. The driver takes and
// gives back each one; a permit the store drops (its session lost) marks
// the handle lost and fires its stop_token.
#include <dlock/semaphore.h>

#include "core/client_state.h"
#include "core/semaphore_driver.h"

#include <atomic>
#include <functional>
#include <mutex>
#include <vector>

namespace dlock {
namespace detail {

struct PermitBook {
  struct Held {
    Permit permit;
    std::atomic<bool> lost{false};
    // Declared last: destroyed first, so it never runs on a half-destroyed permit.
    std::unique_ptr<std::stop_callback<std::function<void()>>> on_dropped;
  };

  // Called by the store's drop, on any thread; never with `mu` held by the
  // caller (it runs the holder's stop callbacks).
  void mark_lost(Held& permit) {
    std::stop_source fire;
    {
      std::lock_guard lk(mu);
      permit.lost = true;
      fire = stop;
    }
    fire.request_stop();
  }

  mutable std::mutex mu;
  std::vector<std::unique_ptr<Held>> held;  // guarded by mu; oldest first
  std::stop_source stop;                    // guarded by mu; a fresh one once a fired one has no permits left
};

}  // namespace detail

namespace {

detail::SemaphoreDriver& driver(detail::ClientState& client) {
  // Client::semaphore() handed this handle out only if the backend has semaphores.
  return *client.semaphores();
}

}  // namespace

Semaphore::Semaphore(std::shared_ptr<detail::ClientState> client, std::string name, std::ptrdiff_t permits,
                     MutexOptions options)
    : client_(std::move(client)), name_(std::move(name)), permits_(permits), options_(options),
      book_(std::make_unique<detail::PermitBook>()) {}

Semaphore::Semaphore(Semaphore&&) noexcept = default;

Semaphore& Semaphore::operator=(Semaphore&& other) noexcept {
  if (this != &other) {
    if (book_ && held() > 0) (void)release_checked(held());
    client_ = std::move(other.client_);
    name_ = std::move(other.name_);
    permits_ = other.permits_;
    options_ = other.options_;
    book_ = std::move(other.book_);
  }
  return *this;
}

Semaphore::~Semaphore() {
  if (book_ && held() > 0) (void)release_checked(held());
}

void Semaphore::acquire() { (void)acquire_until(std::chrono::steady_clock::time_point::max()); }

bool Semaphore::try_acquire() { return acquire_until(std::chrono::steady_clock::now()); }

bool Semaphore::acquire_until(std::chrono::steady_clock::time_point deadline) {
  if (!book_) throw Error(errc::invalid_argument, "semaphore: this handle was moved from");
  auto got = driver(*client_)
                 .acquire(name_, static_cast<std::int32_t>(permits_), client_->owner_for_this_thread(), options_,
                          deadline)
                 .value();
  if (!got) return false;
  auto held = std::make_unique<detail::PermitBook::Held>();
  held->permit = std::move(*got);
  if (held->permit.dropped.stop_possible()) {
    // Made before the permit is listed and without the book's mutex: if it
    // was dropped already, the callback runs right here.
    detail::PermitBook* book = book_.get();
    detail::PermitBook::Held* h = held.get();
    held->on_dropped = std::make_unique<std::stop_callback<std::function<void()>>>(
        held->permit.dropped, std::function<void()>([book, h] { book->mark_lost(*h); }));
  }
  std::lock_guard lk(book_->mu);
  book_->held.push_back(std::move(held));
  return true;
}

detail::AsyncStart Semaphore::starter(std::chrono::steady_clock::time_point deadline, std::stop_token stop) const {
  if (!book_) throw Error(errc::invalid_argument, "semaphore: this handle was moved from");
  if (!client_->backend().supports_permits())
    throw Error(errc::unsupported, "async_acquire of semaphore '" + name_ + "': the " + client_->scheme() +
                                       " backend does not lease permits (its semaphore waits only on a thread)");
  return [client = client_, name = name_, permits = permits_, options = options_, deadline, stop](AsyncCallback done) {
    auto request = detail::lock_request(name, detail::LockKind::permit, options);
    request.permits = static_cast<std::int32_t>(permits);
    client->acquire_async(std::move(request), options, deadline, stop, std::move(done));
  };
}

Status Semaphore::release_checked(std::ptrdiff_t n) noexcept {
  try {
    if (!book_) return Status(errc::invalid_argument, "semaphore: this handle was moved from");
    if (n < 1)
      return Status(errc::invalid_argument,
                    "release of semaphore '" + name_ + "': n must be >= 1, not " + std::to_string(n));
    std::vector<std::unique_ptr<detail::PermitBook::Held>> out;
    {
      std::lock_guard lk(book_->mu);
      auto& held = book_->held;
      if (static_cast<std::ptrdiff_t>(held.size()) < n)
        return Status(errc::not_owner, "release of semaphore '" + name_ + "': " + std::to_string(n) +
                                           " permit(s) asked back but this handle holds " +
                                           std::to_string(held.size()));
      for (std::ptrdiff_t i = 0; i < n; ++i) {
        out.push_back(std::move(held.back()));
        held.pop_back();
      }
      if (held.empty() && book_->stop.stop_requested()) book_->stop = std::stop_source();
    }
    Status outcome;
    for (auto& h : out) {
      Status s = driver(*client_).release(name_, h->permit);
      if (h->lost && s.code() != errc::lock_lost)
        s = Status(errc::lock_lost, "release of semaphore '" + name_ + "': the permit had been lost before" +
                                        (s.ok() ? std::string() : " (and releasing failed too: " + s.message() + ")"));
      if (!s && outcome.ok()) outcome = s;
    }
    return outcome;
  } catch (const std::exception& e) {
    return Status(errc::internal, "release of semaphore '" + name_ + "': " + e.what());
  }
}

void Semaphore::release(std::ptrdiff_t n) {
  Status s = release_checked(n);
  if (s.code() == errc::invalid_argument || s.code() == errc::not_owner) s.throw_if_error();
}

std::ptrdiff_t Semaphore::held() const noexcept {
  if (!book_) return 0;
  std::lock_guard lk(book_->mu);
  return static_cast<std::ptrdiff_t>(book_->held.size());
}

std::ptrdiff_t Semaphore::in_use() { return driver(*client_).in_use(name_).value(); }

std::uint64_t Semaphore::token() const {
  if (book_) {
    std::lock_guard lk(book_->mu);
    if (!book_->held.empty()) return book_->held.back()->permit.token;
  }
  throw Error(errc::not_owner, "token of semaphore '" + name_ + "': this handle holds no permit");
}

bool Semaphore::lost() const noexcept {
  if (!book_) return false;
  try {
    // A leased permit whose lease ran out (its holder was stopped past it)
    // is lost before any renewal could tell, as a Mutex's hold is.
    const detail::SemaphoreDriver& permits = driver(*client_);
    std::lock_guard lk(book_->mu);
    for (const auto& h : book_->held)
      if (h->lost || permits.lease_over(h->permit)) return true;
  } catch (...) {
  }
  return false;
}

std::stop_token Semaphore::stop_token() const {
  if (book_) {
    std::lock_guard lk(book_->mu);
    if (!book_->held.empty()) return book_->stop.get_token();
  }
  throw Error(errc::not_owner, "stop_token of semaphore '" + name_ + "': this handle holds no permit");
}

}  // namespace dlock
