#include "backends/redis/subscriber.h"

#include "backends/redis/errors.h"
#include "backends/redis/replies.h"

#include <hiredis.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

namespace dlock::detail::redis {
namespace {

using std::chrono::milliseconds;

// An idle subscriber connection is PINGed this often; a PING unanswered
// for op_timeout means the server is gone (or black-holed): reconnect.
constexpr milliseconds ping_every{1'000};

bool is_array_starting(const redisReply* r, std::string_view kind) {
  return r && r->type == REDIS_REPLY_ARRAY && r->elements >= 1 && r->element[0]->type == REDIS_REPLY_STRING &&
         std::string_view(r->element[0]->str, r->element[0]->len) == kind;
}

}  // namespace

Subscriber::Subscriber(const Config& config, std::string channel, MessageHook on_message)
    : config_(config), channel_(std::move(channel)), on_message_(std::move(on_message)), connection_(config, nullptr) {
  stop_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
}

Subscriber::~Subscriber() {
  if (thread_.joinable()) {
    std::uint64_t one = 1;
    (void)!::write(stop_fd_, &one, sizeof one);
    thread_.join();
  }
  if (stop_fd_ >= 0) ::close(stop_fd_);
}

Status Subscriber::start(steady::time_point deadline) {
  if (stop_fd_ < 0) return Status(errc::internal, "redis backend: eventfd failed");
  if (Status s = subscribe(deadline); !s) return s;
  thread_ = std::thread([this] { run(); });
  return {};
}

Status Subscriber::subscribe(steady::time_point deadline) {
  if (Status s = connection_.connect(deadline); !s) return s;
  const std::string_view words[] = {"SUBSCRIBE", channel_};
  auto reply = connection_.command(words, deadline, "subscribing to " + channel_);
  if (!reply) return reply.status();
  if (!is_array_starting(reply->get(), "subscribe")) {
    connection_.drop();
    return Status(errc::internal, "redis backend: SUBSCRIBE answered something unexpected");
  }
  return {};
}

std::shared_ptr<Subscriber::Slot> Subscriber::add(const std::string& owner, const std::string& name) {
  auto slot = std::make_shared<Slot>();
  slot->owner = owner;
  slot->name = name;
  std::lock_guard lk(mu_);
  slot->nonce = std::to_string(++next_nonce_);
  slots_[owner] = slot;  // an owner is one thread: it waits for one lock at a time
  return slot;
}

bool Subscriber::remove(const std::shared_ptr<Slot>& slot) {
  std::lock_guard lk(mu_);
  if (auto it = slots_.find(slot->owner); it != slots_.end() && it->second == slot) slots_.erase(it);
  return slot->queued;
}

std::shared_ptr<Subscriber::Slot> Subscriber::find(const std::string& owner, const std::string& name) {
  std::lock_guard lk(mu_);
  auto it = slots_.find(owner);
  return it != slots_.end() && it->second->name == name ? it->second : nullptr;
}

void Subscriber::set_queued(Slot& slot, bool queued, steady::time_point sent, std::int64_t server_ms) {
  std::lock_guard lk(mu_);
  slot.queued = queued;
  if (queued && server_ms >= 0) {
    slot.attempt_sent = sent;
    slot.attempt_server_ms = server_ms;
  }
}

std::optional<Subscriber::Taken> Subscriber::take_handover(Slot& slot) {
  std::lock_guard lk(mu_);
  if (!slot.handover || slot.handover->taken || slot.attempt_server_ms < 0) return std::nullopt;
  slot.handover->taken = true;
  slot.queued = false;  // the release took our entry out of the queue
  return Taken{*slot.handover, slot.attempt_sent, slot.attempt_server_ms};
}

std::optional<Subscriber::Handover> Subscriber::untaken_handover(Slot& slot) {
  std::lock_guard lk(mu_);
  if (!slot.handover || slot.handover->taken) return std::nullopt;
  auto out = slot.handover;
  slot.handover.reset();
  return out;
}

void Subscriber::wait(Slot& slot, steady::time_point until) {
  std::unique_lock lk(mu_);
  slot.cv.wait_until(lk, until, [&] { return slot.notified; });
  slot.notified = false;
}

void Subscriber::call_back(Slot& slot, std::function<void()> notify) {
  bool already;
  {
    std::lock_guard lk(mu_);
    slot.on_notify = notify;
    already = slot.notified;
  }
  if (already) notify();
}

std::function<void()> Subscriber::notify(Slot& slot) {
  slot.notified = true;
  slot.cv.notify_one();
  return slot.on_notify;
}

void Subscriber::wake_all() {
  std::vector<std::function<void()>> calls;
  {
    std::lock_guard lk(mu_);
    for (auto& [owner, slot] : slots_)
      if (auto call = notify(*slot)) calls.push_back(std::move(call));
  }
  for (auto& call : calls) call();
}

// A message "<client id>/<owner>/<nonce>\n<name>" wakes the slot of that
// owner, if it is the same wait (nonce) for that lock; "…\n<token>\n<server
// ms>\n<lease ms>" after the name says the release handed the lock to it.
// (Owners hold no '/', names no control characters.)
void Subscriber::dispatch(const redisReply* r) {
  const auto message = message_of(r);
  if (!message) return;
  if (on_message_) return on_message_(message->channel, message->payload);
  const auto wake = wake_of(message->payload);
  if (!wake) return;
  std::optional<Handover> handover;
  if (wake->handover) handover = Handover{.token = wake->token, .server_ms = wake->server_ms, .lease_ms = wake->lease_ms};
  std::function<void()> call;
  {
    std::lock_guard lk(mu_);
    auto it = slots_.find(std::string(wake->owner));
    if (it == slots_.end() || it->second->name != wake->name || it->second->nonce != wake->nonce) return;
    if (handover) it->second->handover = handover;
    call = notify(*it->second);
  }
  if (call) call();
}

bool Subscriber::sleep_unless_stopped(milliseconds d) {
  const auto until = steady::now() + d;
  for (;;) {
    pollfd p{stop_fd_, POLLIN, 0};
    const auto left = std::chrono::ceil<milliseconds>(until - steady::now());
    const int n = ::poll(&p, 1, static_cast<int>(std::max<std::int64_t>(left.count(), 0)));
    if (n == 0) return true;                       // slept the whole time
    if (n < 0 && errno == EINTR) continue;         // a signal is no reason to stop
    return false;                                  // stopped (or poll failed)
  }
}

void Subscriber::run() {
  auto heard_at = steady::now();
  auto ping_sent = steady::time_point::max();  // max: no PING outstanding
  milliseconds backoff{0};
  for (;;) {
    if (connection_.connected() && connection_.stale()) connection_.lose("subscriber: the master changed");
    if (!connection_.connected()) {
      if (Status s = subscribe(steady::now() + config_.op_timeout); !s) {
        backoff = std::clamp(backoff * 2, milliseconds(50), milliseconds(1'000));
        if (!sleep_unless_stopped(backoff)) return;
        continue;
      }
      backoff = milliseconds(0);
      heard_at = steady::now();
      ping_sent = steady::time_point::max();
      wake_all();  // whatever was published meanwhile is lost: everyone retries
    }
    redisContext* c = connection_.context();
    const auto now = steady::now();
    auto next_check = ping_sent != steady::time_point::max() ? ping_sent + config_.op_timeout : heard_at + ping_every;
    int timeout = static_cast<int>(std::clamp<std::int64_t>(
        std::chrono::ceil<milliseconds>(next_check - now).count(), 0, ping_every.count()));
    pollfd p[2] = {{stop_fd_, POLLIN, 0}, {c->fd, POLLIN, 0}};
    int n = ::poll(p, 2, timeout);
    if (n < 0 && errno != EINTR) {
      connection_.lose("subscriber: waiting for messages failed");
      continue;
    }
    if (p[0].revents) return;  // the backend is being destroyed
    if (p[1].revents) {
      if (redisBufferRead(c) != REDIS_OK) {
        connection_.lose("subscriber: the server closed the connection");  // resubscribe
        continue;
      }
      void* raw = nullptr;
      while (redisGetReplyFromReader(c, &raw) == REDIS_OK && raw) {
        Reply reply(static_cast<redisReply*>(raw));
        raw = nullptr;
        heard_at = steady::now();
        if (is_array_starting(reply.get(), "pong")) ping_sent = steady::time_point::max();
        else dispatch(reply.get());
      }
      if (c->err) {
        connection_.lose("subscriber: a read failed");
        continue;
      }
    }
    const auto after = steady::now();
    if (ping_sent != steady::time_point::max()) {
      if (after >= ping_sent + config_.op_timeout) connection_.lose("subscriber: no answer to PING");
    } else if (after >= heard_at + ping_every) {
      // In subscribed mode PING answers ["pong", ""].
      if (redisAppendCommand(c, "PING") != REDIS_OK) {
        connection_.drop();
        continue;
      }
      int done = 0;
      while (!done)
        if (redisBufferWrite(c, &done) != REDIS_OK) break;
      if (!done) connection_.drop();
      else ping_sent = after;
    }
  }
}

}  // namespace dlock::detail::redis
