#include "backends/redis/subscriber.h"

#include "backends/redis/errors.h"
#include "backends/redis/replies.h"
#include "core/thread_name.h"

#include <hiredis.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <initializer_list>
#include <vector>

namespace dlock::detail::redis {
namespace {

using std::chrono::milliseconds;

// An idle subscriber connection is PINGed this often; a PING unanswered
// for op_timeout means the server is gone (or black-holed): reconnect.
constexpr milliseconds ping_every{1'000};

// A sharded channel whose SSUBSCRIBE failed (not MOVED) is tried again after this.
constexpr milliseconds retry_after{100};
// How long, and how many, removed slots are remembered (see remove()).
constexpr milliseconds departed_for{5'000};
constexpr std::size_t departed_max = 10'000;

bool is_array_starting(const redisReply* r, std::string_view kind) {
  return r && r->type == REDIS_REPLY_ARRAY && r->elements >= 1 && r->element[0]->type == REDIS_REPLY_STRING &&
         std::string_view(r->element[0]->str, r->element[0]->len) == kind;
}

// In subscribed mode PING answers ["pong", ""]; a sharded link with no
// channel yet answers +PONG.
bool is_pong(const redisReply* r) {
  return is_array_starting(r, "pong") ||
         (r && r->type == REDIS_REPLY_STATUS && std::string_view(r->str, r->len) == "PONG");
}

// Queues the command on the context and writes it out; false if that failed.
bool write_command(redisContext* c, std::initializer_list<std::string_view> words) {
  std::vector<const char*> argv;
  std::vector<std::size_t> lengths;
  for (auto w : words) {
    argv.push_back(w.data());
    lengths.push_back(w.size());
  }
  if (redisAppendCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lengths.data()) != REDIS_OK) return false;
  int done = 0;
  while (!done)
    if (redisBufferWrite(c, &done) != REDIS_OK) return false;
  return true;
}

std::string address(const Endpoint& e) { return e.host + ":" + std::to_string(e.port.value_or(default_port)); }

}  // namespace

struct Subscriber::Link {
  // Its connection gives up waiting once `stop_fd` is readable (the
  // subscriber closing): a connection attempt or a subscription to a
  // master that does not answer holds up the client's destruction no more.
  Link(const Config& config, Endpoint master, int stop_fd) : at(std::move(master)), conn(config, nullptr) {
    if (stop_fd >= 0) conn.cancel_on(stop_fd);
  }
  const Endpoint at;  // sharded: the master
  Connection conn;
  // Sharded: a connection attempt of its own is under way on `attempt`
  // (a thread); until it sets this back (release), nothing else touches
  // the link. The rest is the subscriber's thread's.
  std::atomic<bool> connecting{false};
  bool connected_by_attempt = false;  // the attempt's outcome (read once it is back)
  std::thread attempt;
  // Sharded: the channels of the SSUBSCRIBE / SUNSUBSCRIBE sent and not
  // answered yet, in order (an error reply is the first one's).
  std::deque<std::string> asked;
  steady::time_point heard_at = steady::now();
  steady::time_point ping_sent = steady::time_point::max();  // max: no PING outstanding
};

Subscriber::Subscriber(const Config& config, std::string channel, MessageHook on_message, SlotOwners* owners)
    : config_(config), channel_(std::move(channel)), on_message_(std::move(on_message)), owners_(owners) {
  stop_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  kick_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (!owners_) links_[""] = std::make_unique<Link>(config_, Endpoint{}, stop_fd_);
}

Subscriber::~Subscriber() {
  if (thread_.joinable()) {
    std::uint64_t one = 1;
    (void)!::write(stop_fd_, &one, sizeof one);
    thread_.join();
  }
  // (An attempt under way gives up at once: its connection waits on stop_fd_ too.)
  for (auto& [where, link] : links_)
    if (link->attempt.joinable()) link->attempt.join();
  if (stop_fd_ >= 0) ::close(stop_fd_);
  if (kick_fd_ >= 0) ::close(kick_fd_);
}

void Subscriber::kick() {
  std::uint64_t one = 1;
  (void)!::write(kick_fd_, &one, sizeof one);
}

Status Subscriber::start(steady::time_point deadline) {
  if (stop_fd_ < 0 || kick_fd_ < 0) return Status(errc::internal, "redis backend: eventfd failed");
  if (!owners_)
    if (Status s = subscribe(deadline); !s) return s;
  thread_ = std::thread([this] {
    name_this_thread("dlock-redis-sub");
    run();
  });
  return {};
}

Status Subscriber::subscribe(steady::time_point deadline) {
  Connection& connection = links_.at("")->conn;
  if (Status s = connection.connect(deadline); !s) return s;
  const std::string_view words[] = {"SUBSCRIBE", channel_};
  auto reply = connection.command(words, deadline, "subscribing to " + channel_);
  if (!reply) return reply.status();
  if (!is_array_starting(reply->get(), "subscribe")) {
    connection.drop();
    return Status(errc::internal, "redis backend: SUBSCRIBE answered something unexpected");
  }
  return {};
}

std::shared_ptr<Subscriber::Slot> Subscriber::add(const std::string& owner, const std::string& name,
                                                 const std::string& channel,
                                                 std::function<void(const Handover&)> orphaned, std::string secret) {
  auto slot = std::make_shared<Slot>();
  slot->owner = owner;
  slot->name = name;
  slot->orphaned = std::move(orphaned);
  slot->secret = std::move(secret);
  std::unique_lock lk(mu_);
  slot->nonce = std::to_string(++next_nonce_);
  slots_[owner] = slot;  // an owner is one thread: it waits for one lock at a time
  if (owners_ && !channel.empty()) {
    slot->channel = channel;
    Channel& c = channels_[channel];  // (erased by the thread only once it has no users)
    ++c.users;
    if (!c.confirmed) {
      kick();
      confirmed_.wait_until(lk, steady::now() + config_.op_timeout, [&] { return c.confirmed; });
    }
    // Not heard yet: a handover before the subscription would be lost to us.
    if (!c.confirmed) slot->secret.clear();
  }
  return slot;
}

std::string Subscriber::secret(const Slot& slot) {
  std::lock_guard lk(mu_);
  return slot.secret;
}

bool Subscriber::remove(const std::shared_ptr<Slot>& slot) {
  std::lock_guard lk(mu_);
  if (auto it = slots_.find(slot->owner); it != slots_.end() && it->second == slot) {
    slots_.erase(it);
    // (One that had its handover takes no other: leave() gives on an untaken one.)
    if (slot->orphaned && !slot->handover && !slot->secret.empty()) {
      // A wake-up that hands it the lock may be on its way (the release ran
      // before our leaving did): dispatch() gives that lock on. Kept for
      // a few seconds, far longer than a message takes.
      const auto now = steady::now();
      while (!departed_order_.empty() &&
             (departed_order_.front().first + departed_for < now || departed_order_.size() >= departed_max)) {
        departed_.erase(departed_order_.front().second);
        departed_order_.pop_front();
      }
      std::string key = slot->owner + "\n" + slot->nonce;
      departed_[key] = slot;
      departed_order_.emplace_back(now, std::move(key));
    }
  }
  if (!slot->channel.empty()) {
    if (auto c = channels_.find(slot->channel); c != channels_.end() && --c->second.users == 0) kick();
    slot->channel.clear();  // counted once
  }
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

// (Both after a subscription broke: a handover sent meanwhile is lost to
// us, and someone else subscribed may have heard its secret. The slots take
// no handover from now on; a lock handed to one is found by its next attempt.)
void Subscriber::wake_channel(const std::string& channel, std::vector<std::function<void()>>& calls) {
  for (auto& [owner, slot] : slots_)
    if (slot->channel == channel) {
      slot->secret.clear();
      if (auto call = notify(*slot)) calls.push_back(std::move(call));
    }
}

void Subscriber::wake_all() {
  std::vector<std::function<void()>> calls;
  {
    std::lock_guard lk(mu_);
    for (auto& [owner, slot] : slots_) {
      slot->secret.clear();
      if (auto call = notify(*slot)) calls.push_back(std::move(call));
    }
  }
  for (auto& call : calls) call();
}

// A message "<client id>/<owner>/<nonce>\n<name>" wakes the slot of that
// owner, if it is the same wait (nonce) for that lock; "…\n<token>\n<server
// ms>\n<lease ms>\n<secret>" after the name says the release handed the
// lock to it. Anyone allowed to PUBLISH can send either: a handover is taken
// only if it carries the wait's secret (Slot::secret), and only the first
// one; anything else is a mere wake-up (the waiter asks the store again).
// (Owners hold no '/', names no control characters.)
void Subscriber::dispatch(const redisReply* r) {
  const auto message = message_of(r);
  if (!message) return;
  if (on_message_) return on_message_(message->channel, message->payload);
  const auto wake = wake_of(message->payload);
  if (!wake) return;
  // The same length, and every byte compared (no early exit to time).
  auto proves = [&](const Slot& slot) {
    const std::string_view given = wake->secret, ours = slot.secret;
    if (!wake->handover || ours.empty() || given.size() != ours.size() || slot.handover) return false;
    unsigned char differ = 0;
    for (std::size_t i = 0; i < ours.size(); ++i) differ |= static_cast<unsigned char>(given[i] ^ ours[i]);
    return differ == 0;
  };
  const Handover handover{.token = wake->token, .server_ms = wake->server_ms, .lease_ms = wake->lease_ms};
  std::function<void()> call;
  std::shared_ptr<Slot> orphan;
  {
    std::lock_guard lk(mu_);
    auto it = slots_.find(std::string(wake->owner));
    if (it == slots_.end() || it->second->name != wake->name || it->second->nonce != wake->nonce) {
      // Handed to a waiter that has left: given on (its release checks the
      // token, so a lock its owner took again since is left alone).
      auto d = departed_.find(std::string(wake->owner) + "\n" + std::string(wake->nonce));
      if (d == departed_.end() || d->second->name != wake->name || !proves(*d->second)) return;
      orphan = std::move(d->second);
      departed_.erase(d);
    } else {
      if (proves(*it->second)) it->second->handover = handover;
      call = notify(*it->second);
    }
  }
  if (orphan) orphan->orphaned(handover);
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

void Subscriber::reconcile() {
  // A channel whose subscription differs from what its waiters need.
  struct Change {
    std::string channel;
    std::string leave_on;  // "": subscribe; else SUNSUBSCRIBE on this link
  };
  std::vector<Change> changes;
  const auto now = steady::now();
  {
    std::lock_guard lk(mu_);
    for (auto it = channels_.begin(); it != channels_.end();) {
      Channel& c = it->second;
      if (c.users == 0 && c.link.empty()) {
        it = channels_.erase(it);
        continue;
      }
      if (c.users > 0 && c.link.empty() && c.retry_at <= now) changes.push_back({it->first, {}});
      else if (c.users == 0 && !c.link.empty() && !c.leaving) changes.push_back({it->first, c.link});
      ++it;
    }
  }
  // Nothing here waits on a server: reading the map again and connecting
  // to a master run on threads of their own (a master that does not answer
  // would otherwise hold up every other master's wake-ups for op_timeout).
  collect_attempts();
  if (std::exchange(reread_, false)) owners_->reread_later();
  for (const Change& t : changes) {
    Link* link = nullptr;
    bool sent = false;
    bool connecting = false;  // its link is being made: subscribe once it is
    if (!t.leave_on.empty()) {
      auto it = links_.find(t.leave_on);
      link = it != links_.end() ? it->second.get() : nullptr;
      if (link && link->connecting.load(std::memory_order_acquire)) link = nullptr;
      sent = link && link->conn.connected() && write_command(link->conn.context(), {"SUNSUBSCRIBE", t.channel});
    } else if (auto at = owners_->master_of(hash_slot(t.channel), false, steady::time_point::max())) {
      auto& slot = links_[address(*at)];
      if (!slot) slot = std::make_unique<Link>(owners_->node_config(*at), *at, stop_fd_);
      link = slot.get();
      if (link->connecting.load(std::memory_order_acquire)) {
        link = nullptr;
        connecting = true;
      } else if (!link->conn.connected()) {
        if (now >= link->conn.retry_at()) start_attempt(*link);  // (a failed one backs off)
        link = nullptr;
        connecting = true;
      } else {
        sent = write_command(link->conn.context(), {"SSUBSCRIBE", t.channel});
      }
    }
    if (sent) link->asked.push_back(t.channel);
    else if (link && link->conn.connected()) lose_link(address(link->at), "subscriber: a write failed");  // (its other channels too)
    std::lock_guard lk(mu_);
    Channel& c = channels_[t.channel];
    if (!t.leave_on.empty()) {
      c.leaving = sent;
      c.confirmed = false;  // a waiter coming now waits for the channel to be subscribed again
      if (!sent) c.link.clear();
    } else if (sent) {
      c.link = address(link->at);
    } else {
      // Tried again after a pause, or as soon as its master's link is made.
      c.retry_at = steady::now() + retry_after;
      c.awaiting_link = connecting;
      if (!connecting) reread_ = true;
    }
  }
}

void Subscriber::start_attempt(Link& link) {
  if (link.attempt.joinable()) link.attempt.join();  // (done: collected already)
  link.connecting.store(true, std::memory_order_relaxed);
  link.attempt = std::thread([this, &link] {
    name_this_thread("dlock-redis-con");
    link.connected_by_attempt = link.conn.connect(steady::now() + config_.op_timeout).ok();
    if (link.connected_by_attempt) {
      link.heard_at = steady::now();
      link.ping_sent = steady::time_point::max();
      link.asked.clear();
    }
    link.connecting.store(false, std::memory_order_release);  // the subscriber's thread's again
    kick();
  });
}

void Subscriber::collect_attempts() {
  bool made = false;
  for (auto& [where, link] : links_) {
    if (!link->attempt.joinable() || link->connecting.load(std::memory_order_acquire)) continue;
    link->attempt.join();
    // A failed master may have been failed over: the map is read again
    // (and the link, backing off, tried again later).
    if (link->connected_by_attempt) made = true;
    else reread_ = true;
  }
  if (!made) return;
  std::lock_guard lk(mu_);
  for (auto& [name, c] : channels_)  // subscribed now rather than after their pause
    if (std::exchange(c.awaiting_link, false)) c.retry_at = {};
}

bool Subscriber::on_reply(Link& link, const redisReply* r) {
  const bool joined = is_array_starting(r, "ssubscribe");
  std::vector<std::function<void()>> calls;
  if (joined || is_array_starting(r, "sunsubscribe")) {
    if (r->elements < 2 || r->element[1]->type != REDIS_REPLY_STRING) return false;
    const std::string channel(r->element[1]->str, r->element[1]->len);
    const bool answer = !link.asked.empty() && link.asked.front() == channel;
    if (answer) link.asked.pop_front();
    {
      std::lock_guard lk(mu_);
      auto it = channels_.find(channel);
      if (it == channels_.end()) return true;
      Channel& c = it->second;
      if (joined) {
        c.confirmed = true;
        if (std::exchange(c.lost, false)) wake_channel(channel, calls);  // a message may have been lost meanwhile
        confirmed_.notify_all();
      } else if (answer && c.leaving) {
        c.link.clear();  // (subscribed again next round if a waiter came back)
        c.leaving = false;
      } else {
        // Pushed by the server: the slot moved away (migration, failover).
        c.link.clear();
        c.confirmed = c.leaving = false;
        c.lost = true;
        c.retry_at = {};
        reread_ = true;
        wake_channel(channel, calls);
      }
    }
    for (auto& call : calls) call();
    return true;
  }
  if (r->type != REDIS_REPLY_ERROR) return true;
  // The answer to the oldest SSUBSCRIBE / SUNSUBSCRIBE: MOVED (the map is
  // stale), or the cluster is down for now.
  if (link.asked.empty()) return false;
  const std::string channel = std::move(link.asked.front());
  link.asked.pop_front();
  const std::string_view text(r->str, r->len);
  const bool moved = text.starts_with("MOVED ");
  if (moved) owners_->redirected(text, link.at);
  std::lock_guard lk(mu_);
  if (auto it = channels_.find(channel); it != channels_.end()) {
    Channel& c = it->second;
    c.link.clear();
    c.confirmed = c.leaving = false;
    c.retry_at = moved ? steady::time_point{} : steady::now() + retry_after;
    reread_ = reread_ || !moved;
  }
  return true;
}

void Subscriber::lose_link(const std::string& where, std::string_view why) {
  auto it = links_.find(where);
  if (it == links_.end()) return;
  it->second->conn.lose(why);
  it->second->asked.clear();
  reread_ = true;  // the master may have failed: its replica serves the slots soon
  std::vector<std::function<void()>> calls;
  {
    std::lock_guard lk(mu_);
    for (auto& [name, c] : channels_)
      if (c.link == where) {
        c.link.clear();
        c.confirmed = c.leaving = false;
        c.lost = true;
        c.retry_at = {};
        wake_channel(name, calls);
      }
  }
  for (auto& call : calls) call();
}

void Subscriber::run() {
  milliseconds backoff{0};
  for (;;) {
    if (owners_) {
      reconcile();
    } else {
      Link& link = *links_.at("");
      Connection& connection = link.conn;
      if (connection.connected() && connection.stale()) connection.lose("subscriber: the master changed");
      if (!connection.connected()) {
        if (Status s = subscribe(steady::now() + config_.op_timeout); !s) {
          backoff = std::clamp(backoff * 2, milliseconds(50), milliseconds(1'000));
          if (!sleep_unless_stopped(backoff)) return;
          continue;
        }
        backoff = milliseconds(0);
        link.heard_at = steady::now();
        link.ping_sent = steady::time_point::max();
        wake_all();  // whatever was published meanwhile is lost: everyone retries
      }
    }
    const auto now = steady::now();
    auto next_check = now + ping_every;
    std::vector<pollfd> fds = {{stop_fd_, POLLIN, 0}, {kick_fd_, POLLIN, 0}};
    std::vector<std::pair<std::string, Link*>> polled;
    for (auto& [where, link] : links_) {
      if (link->connecting.load(std::memory_order_acquire) || !link->conn.connected()) continue;
      fds.push_back({link->conn.context()->fd, POLLIN, 0});
      polled.emplace_back(where, link.get());
      next_check = std::min(next_check, link->ping_sent != steady::time_point::max()
                                            ? link->ping_sent + config_.op_timeout
                                            : link->heard_at + ping_every);
    }
    if (owners_) {
      std::lock_guard lk(mu_);
      for (auto& [name, c] : channels_)
        if (c.link.empty()) next_check = std::min(next_check, std::max(c.retry_at, now));
    }
    const int timeout = static_cast<int>(std::clamp<std::int64_t>(
        std::chrono::ceil<milliseconds>(next_check - now).count(), 0, ping_every.count()));
    const int n = ::poll(fds.data(), fds.size(), timeout);
    if (n < 0 && errno != EINTR) {
      for (auto& [where, link] : polled)
        if (owners_) lose_link(where, "subscriber: waiting for messages failed");
        else link->conn.lose("subscriber: waiting for messages failed");
      continue;
    }
    if (n > 0 && fds[0].revents) return;  // the backend is being destroyed
    if (n > 0 && fds[1].revents) {
      std::uint64_t count;
      (void)!::read(kick_fd_, &count, sizeof count);
    }
    std::vector<std::pair<std::string, std::string_view>> failed;
    for (std::size_t i = 0; i < polled.size(); ++i) {
      auto& [where, link] = polled[i];
      if (n <= 0 || !fds[i + 2].revents) continue;
      redisContext* c = link->conn.context();
      if (redisBufferRead(c) != REDIS_OK) {
        failed.emplace_back(where, "subscriber: the server closed the connection");  // resubscribe
        continue;
      }
      void* raw = nullptr;
      bool in_step = true;
      while (in_step && redisGetReplyFromReader(c, &raw) == REDIS_OK && raw) {
        Reply reply(static_cast<redisReply*>(raw));
        raw = nullptr;
        link->heard_at = steady::now();
        if (is_pong(reply.get())) link->ping_sent = steady::time_point::max();
        else if (is_array_starting(reply.get(), "message") || is_array_starting(reply.get(), "smessage"))
          dispatch(reply.get());
        else if (owners_) in_step = on_reply(*link, reply.get());
      }
      if (c->err || !in_step) failed.emplace_back(where, "subscriber: a read failed");
    }
    const auto after = steady::now();
    for (auto& [where, link] : polled) {
      if (std::any_of(failed.begin(), failed.end(), [&](const auto& f) { return f.first == where; })) continue;
      if (link->ping_sent != steady::time_point::max()) {
        if (after >= link->ping_sent + config_.op_timeout) failed.emplace_back(where, "subscriber: no answer to PING");
      } else if (after >= link->heard_at + ping_every) {
        if (write_command(link->conn.context(), {"PING"})) link->ping_sent = after;
        else failed.emplace_back(where, "subscriber: a write failed");
      }
    }
    for (auto& [where, why] : failed) {
      if (owners_) lose_link(where, why);
      else links_.at(where)->conn.lose(why);
    }
  }
}

}  // namespace dlock::detail::redis
