#include "backends/redis/session.h"

#include "backends/redis/errors.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <hiredis.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <climits>
#include <mutex>

namespace dlock::detail::redis {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds first_backoff{50};
constexpr milliseconds max_backoff{1'000};

timeval to_timeval(steady::duration d) {
  auto us = std::max<std::int64_t>(std::chrono::duration_cast<std::chrono::microseconds>(d).count(), 1'000);
  return timeval{static_cast<time_t>(us / 1'000'000), static_cast<suseconds_t>(us % 1'000'000)};
}

Status no_time_left(std::string_view step) {
  return Status(errc::unavailable,
                "redis backend: " + std::string(step) + ": no time left within ClientOptions::op_timeout");
}

// A host name lookup under way in glibc (getaddrinfo_a), which writes into
// it until the lookup ends: one given up on at its deadline is kept until
// then (reaped by later lookups), never freed under glibc's feet.
struct Lookup {
  std::string name;
  addrinfo hints{};
  gaicb request{};
};
// Never destroyed: glibc may still be writing into one at exit.
std::mutex abandoned_mu;
auto* const abandoned = new std::vector<std::unique_ptr<Lookup>>();  // guarded by abandoned_mu

void reap_abandoned_lookups() {
  std::lock_guard lk(abandoned_mu);
  std::erase_if(*abandoned, [](const std::unique_ptr<Lookup>& l) {
    if (gai_error(&l->request) == EAI_INPROGRESS) return false;
    if (l->request.ar_result) freeaddrinfo(l->request.ar_result);
    return true;
  });
}

// The address to give hiredis for `host`: the host itself if it is a
// numeric address (no lookup), else what the resolver answers by
// `deadline` — hiredis's own getaddrinfo call has no timeout, and a
// resolver that does not answer would hold connect() for its retries.
// IPv4 first, as hiredis does.
Result<std::string> numeric_address(const std::string& host, steady::time_point deadline, std::string_view step) {
  in6_addr parsed{};
  if (::inet_pton(AF_INET, host.c_str(), &parsed) == 1 || ::inet_pton(AF_INET6, host.c_str(), &parsed) == 1)
    return host;
  reap_abandoned_lookups();
  auto lookup = std::make_unique<Lookup>();
  lookup->name = host;
  lookup->hints.ai_family = AF_UNSPEC;
  lookup->hints.ai_socktype = SOCK_STREAM;
  lookup->request.ar_name = lookup->name.c_str();
  lookup->request.ar_request = &lookup->hints;
  gaicb* list[] = {&lookup->request};
  if (int rc = ::getaddrinfo_a(GAI_NOWAIT, list, 1, nullptr); rc != 0) return resolve_error(step, rc);
  int rc;
  while ((rc = ::gai_error(&lookup->request)) == EAI_INPROGRESS) {
    const auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - steady::now()).count();
    if (left <= 0) {
      if (::gai_cancel(&lookup->request) != EAI_CANCELED) {
        std::lock_guard lk(abandoned_mu);
        abandoned->push_back(std::move(lookup));
      }
      return Status(errc::unavailable, "redis backend: " + std::string(step) + ": looking up the host name: "
                                       "no answer within ClientOptions::op_timeout");
    }
    const timespec ts{static_cast<time_t>(left / 1'000'000'000), static_cast<long>(left % 1'000'000'000)};
    (void)::gai_suspend(list, 1, &ts);  // returns when it ends, at the timeout, or on a signal
  }
  if (rc != 0) return resolve_error(step, rc);
  const addrinfo* chosen = lookup->request.ar_result;
  for (const addrinfo* a = chosen; a; a = a->ai_next)
    if (a->ai_family == AF_INET) {
      chosen = a;
      break;
    }
  char text[INET6_ADDRSTRLEN] = {};
  const int named = chosen ? ::getnameinfo(chosen->ai_addr, chosen->ai_addrlen, text, sizeof text, nullptr, 0,
                                           NI_NUMERICHOST)
                           : EAI_NONAME;
  if (lookup->request.ar_result) freeaddrinfo(lookup->request.ar_result);
  if (named != 0) return resolve_error(step, named);
  return std::string(text);
}

}  // namespace

void FreeReply::operator()(redisReply* reply) const { freeReplyObject(reply); }

// --- Batch: the Redis protocol, every word binary-safe ------------------------

void Batch::header(char kind, std::size_t n) {
  char digits[24];
  auto [end, ec] = std::to_chars(digits, digits + sizeof digits, n);
  bytes_.push_back(kind);
  bytes_.append(digits, end);
  bytes_.append("\r\n");
}

void Batch::word(std::string_view w) {
  header('$', w.size());
  bytes_.append(w);
  bytes_.append("\r\n");
}

int hash_slot(std::string_view key) noexcept {
  // The part between the first '{' and the next '}', if not empty.
  if (auto open = key.find('{'); open != std::string_view::npos)
    if (auto close = key.find('}', open + 1); close != std::string_view::npos && close > open + 1)
      key = key.substr(open + 1, close - open - 1);
  // CRC16, polynomial 0x1021, initial value 0 (the cluster specification's).
  std::uint16_t crc = 0;
  for (unsigned char byte : key) {
    crc ^= static_cast<std::uint16_t>(byte << 8);
    for (int bit = 0; bit < 8; ++bit)
      crc = static_cast<std::uint16_t>(crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1);
  }
  return crc & 16383;
}

void Batch::ended(std::string_view key) {
  ends_.push_back(bytes_.size());
  slots_.push_back(!key.empty() ? hash_slot(key) : slots_.empty() ? -1 : slots_.back());
  ++count_;
}

void Batch::add(std::span<const std::string_view> words, std::string_view key) {
  header('*', words.size());
  for (auto w : words) word(w);
  ended(key);
}

void Batch::add_eval(std::string_view sha, std::span<const std::string_view> keys,
                     std::span<const std::string_view> args) {
  char digits[24];
  auto [end, ec] = std::to_chars(digits, digits + sizeof digits, keys.size());
  header('*', 3 + keys.size() + args.size());
  word("EVALSHA");
  word(sha);
  word(std::string_view(digits, static_cast<std::size_t>(end - digits)));
  for (auto k : keys) word(k);
  for (auto a : args) word(a);
  ended(keys.empty() ? std::string_view() : keys.front());
}

void Batch::add_copy(const Batch& from, std::size_t i) {
  const std::size_t begin = i == 0 ? 0 : from.ends_[i - 1];
  bytes_.append(from.bytes_, begin, from.ends_[i] - begin);
  ends_.push_back(bytes_.size());
  slots_.push_back(from.slots_[i]);
  ++count_;
}

// --- Connection ---------------------------------------------------------------

Connection::Connection(const Config& config, std::atomic<std::uint64_t>* generation)
    : config_(config), generation_(generation) {}

Connection::~Connection() { drop(); }

void Connection::drop() noexcept {
  if (context_) redisFree(context_);
  context_ = nullptr;
  out_.clear();
  out_done_ = 0;
}

Status Connection::connect_failure(Status why) {
  drop();
  if (config_.discovery) {
    failed_at_epoch_ = config_.discovery->epoch();
    if (at_) config_.discovery->failed(*at_);  // (a rotation moves on: the next one is tried at once)
  }
  backoff_ = backoff_.count() == 0 ? first_backoff : std::min(backoff_ * 2, max_backoff);
  retry_at_ = steady::now() + backoff_;
  last_error_ = why.message();
  return why;
}

Status Connection::connect(steady::time_point deadline) {
  drop();
  const auto now = steady::now();
  std::string where = "connecting to " + config_.redacted_url;
  // A new server to try (a failover) is worth trying at once.
  if (config_.discovery && config_.discovery->epoch() != failed_at_epoch_) retry_at_ = {};
  if (now < retry_at_)
    return Status(errc::unavailable, last_error_ + " (backing off: next attempt in " +
                                         std::to_string(std::chrono::ceil<milliseconds>(retry_at_ - now).count()) +
                                         " ms)");
  const auto budget = std::min<steady::duration>(config_.connect_timeout, deadline - now);
  if (budget <= steady::duration::zero())
    return Status(errc::unavailable, "redis backend: " + where + ": no time left within ClientOptions::op_timeout");
  const auto connect_deadline = now + budget;
  if (config_.unix_socket) {
    context_ = redisConnectUnixWithTimeout(config_.socket_path.c_str(), to_timeval(budget));
  } else {
    std::string host = config_.host;
    int port = config_.port;
    at_.reset();
    if (config_.discovery) {
      auto found = config_.discovery->where(connect_deadline);
      if (!found) return connect_failure(found.status());
      made_at_epoch_ = config_.discovery->epoch();
      at_ = *found;
      host = found->host;
      port = found->port.value_or(default_port);
      where += " (" + host + ":" + std::to_string(port) + ")";
    }
    auto address = numeric_address(host, connect_deadline, where);
    if (!address) return connect_failure(address.status());
    context_ = redisConnectWithTimeout(address->c_str(), port, to_timeval(connect_deadline - steady::now()));
  }
  if (!context_) return connect_failure(Status(errc::unavailable, "redis backend: " + where + ": out of memory"));
  if (context_->err) return connect_failure(to_status(context_, nullptr, where));
  // hiredis 0.14 opens its socket without close-on-exec: a program this
  // process starts (dlock run's command) must not inherit an authenticated
  // connection.
  (void)::fcntl(context_->fd, F_SETFD, FD_CLOEXEC);
  if (!config_.unix_socket) {
    // Keepalive finds a dead peer on an idle connection; TCP_USER_TIMEOUT
    // bounds how long sent data may stay unacknowledged before the kernel
    // gives up (a black-holed server).
    (void)redisEnableKeepAlive(context_);
    unsigned int user_timeout = static_cast<unsigned int>(config_.op_timeout.count());
    (void)::setsockopt(context_->fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof user_timeout);
  }
  if (config_.password) {
    std::vector<std::string_view> auth{"AUTH"};
    if (config_.user) auth.push_back(*config_.user);
    auth.push_back(*config_.password);
    if (auto r = command(auth, connect_deadline, where + ": AUTH"); !r) return connect_failure(r.status());
  }
  if (config_.db != 0) {
    const std::string db = std::to_string(config_.db);
    const std::string_view select[] = {"SELECT", db};
    if (auto r = command(select, connect_deadline, where + ": SELECT " + db); !r) return connect_failure(r.status());
  }
  if (config_.discovery && at_)
    if (Status s = config_.discovery->check(*this, *at_, connect_deadline); !s) return connect_failure(s);
  backoff_ = milliseconds(0);
  retry_at_ = {};
  made_in_ = generation_ ? generation_->load() : 0;
  if (std::exchange(was_lost_, false) && config_.events) config_.events->connection_restored(config_.redacted_url);
  return {};
}

bool Connection::readable_while_idle() const noexcept {
  if (!context_) return false;
  pollfd p{context_->fd, POLLIN, 0};
  return ::poll(&p, 1, 0) != 0;
}

void Connection::lose(std::string_view what) noexcept {
  if (context_ && config_.discovery && at_) config_.discovery->failed(*at_);
  if (context_ && config_.events) {
    was_lost_ = true;
    try {
      config_.events->connection_lost(config_.redacted_url + ": " + std::string(what));
    } catch (...) {
    }
  }
  drop();
}

Status Connection::fail(Status why) {
  lose(why.message());
  if (generation_) generation_->fetch_add(1);
  return why;
}

Status Connection::write_some(std::string_view step) {
  if (!context_) return Status(errc::unavailable, "redis backend: " + std::string(step) + ": not connected");
  while (out_done_ < out_.size()) {
    // MSG_NOSIGNAL: a server that closed the connection is an error, not SIGPIPE.
    const ssize_t n =
        ::send(context_->fd, out_.data() + out_done_, out_.size() - out_done_, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      out_done_ += static_cast<std::size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return {};  // the rest when the socket takes it (wait())
    } else {
      return fail(io_error(step, n < 0 ? errno : EPIPE));
    }
  }
  out_.clear();
  out_done_ = 0;
  return {};
}

Status Connection::read_some(std::string_view step) {
  char buf[16 * 1024];
  for (;;) {
    const ssize_t n = ::recv(context_->fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) {
      if (redisReaderFeed(context_->reader, buf, static_cast<std::size_t>(n)) != REDIS_OK)
        return fail(io_error(step, ENOMEM));
      if (static_cast<std::size_t>(n) < sizeof buf) return {};
    } else if (n == 0) {
      return fail(io_error(step, 0));
    } else if (errno == EINTR) {
      continue;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      return {};
    } else {
      return fail(io_error(step, errno));
    }
  }
}

Result<Reply> Connection::next_reply(std::string_view step) {
  if (!context_) return Status(errc::unavailable, "redis backend: " + std::string(step) + ": not connected");
  void* raw = nullptr;
  if (redisGetReplyFromReader(context_, &raw) != REDIS_OK) return fail(to_status(context_, nullptr, step));
  return Reply(static_cast<redisReply*>(raw));
}

Status Connection::wait(steady::time_point deadline, std::string_view step) {
  if (!context_) return Status(errc::unavailable, "redis backend: " + std::string(step) + ": not connected");
  const auto left = std::max(deadline - steady::now(), steady::duration::zero());
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
  const timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
  pollfd fds[2] = {{context_->fd, static_cast<short>(POLLIN | (output_pending() ? POLLOUT : 0)), 0},
                   {cancel_fd_, POLLIN, 0}};
  const int n = ::ppoll(fds, cancel_fd_ >= 0 ? 2 : 1, &ts, nullptr);
  if (n < 0) return errno == EINTR ? Status{} : fail(io_error(step, errno));
  if (n == 0) return fail(no_answer(step));
  if (cancel_fd_ >= 0 && fds[1].revents != 0)
    return fail(Status(errc::unavailable, "redis backend: " + std::string(step) + ": the client is closing"));
  const pollfd& p = fds[0];
  if (p.revents & POLLOUT)
    if (Status s = write_some(step); !s) return s;
  if (p.revents & (POLLIN | POLLERR | POLLHUP)) return read_some(step);
  if (p.revents & POLLNVAL) return fail(io_error(step, EBADF));
  return {};
}

Result<Reply> Connection::command(std::span<const std::string_view> words, steady::time_point deadline,
                                  std::string_view step, std::string_view key) {
  if (!context_) return Status(errc::unavailable, "redis backend: " + std::string(step) + ": not connected");
  if (deadline <= steady::now()) return no_time_left(step);
  Batch batch;
  batch.add(words);
  append(batch.bytes());
  if (Status s = write_some(step); !s) return s;
  for (;;) {
    auto reply = next_reply(step);
    if (!reply) return reply.status();
    if (*reply) {
      if ((*reply)->type == REDIS_REPLY_ERROR) return to_status(context_, reply->get(), step, key);
      return std::move(*reply);
    }
    if (Status s = wait(deadline, step); !s) return s;
  }
}

// --- Pool ---------------------------------------------------------------------

struct Pool::Request {
  Request(Batch b, steady::time_point d) : batch(std::move(b)), deadline(d) {}
  enum class State { queued, sent, done };

  const Batch batch;
  const steady::time_point deadline;
  Replies result;                  // the leader's until state is done
  State state = State::queued;     // Channel::mu
  bool lead = false;               // Channel::mu: its thread is to lead now
  bool abandoned = false;          // Channel::mu: its thread left (out of time), or none waits (send)
  // Channel::mu: start() wrote it (or queued it) and its thread is not
  // waiting yet (finish()): the lead is not passed to it meanwhile.
  bool parked = false;
  bool write_only = false;         // its thread leads only until it is written (start())
  std::function<void(Replies)> done;  // send(): who gets the replies
  std::condition_variable cv;      // with Channel::mu
};

struct Pool::Channel {
  Channel(const Config& config, std::atomic<std::uint64_t>* generation) : conn(config, generation) {}

  // The leader's (handed from leader to leader under mu).
  Connection conn;
  std::deque<std::shared_ptr<Request>> sent;  // in conn's output or written, unanswered; oldest first

  std::mutex mu;
  bool busy = false;                           // mu: a thread leads; if not, queue is empty
  std::deque<std::shared_ptr<Request>> queue;  // mu: not yet in conn's output
  std::atomic<int> calls{0};                   // calls under way on it (pick()'s hint)
  std::atomic<int> detached{0};                // send() batches not answered yet
};

namespace {
// The connection the calling thread last sent a batch on without waiting
// (its pool's id, never reused, and its index): the thread's next calls go
// there while that batch is unanswered, so they run after it.
std::atomic<std::uint64_t> next_pool_id{1};
thread_local std::uint64_t sent_pool = 0;
thread_local std::size_t sent_channel = 0;
}  // namespace

Pool::Pool(const Config& config) : id_(next_pool_id.fetch_add(1)) {
  for (int i = 0; i < config.connections; ++i)
    channels_.push_back(std::make_unique<Channel>(config, &generation_));
}

Pool::~Pool() = default;

void Pool::cancel_on(int fd) noexcept {
  for (auto& ch : channels_) ch->conn.cancel_on(fd);
}


Pool::Channel& Pool::pick() noexcept {
  if (sent_pool == id_) {
    Channel& ch = *channels_[sent_channel];
    if (ch.detached.load(std::memory_order_relaxed) > 0) return ch;
    sent_pool = 0;
  }
  // An idle connection if there is one (a lone thread always gets the
  // first: one warm connection), else the one with the fewest calls.
  Channel* best = channels_.front().get();
  int fewest = INT_MAX;
  for (auto& ch : channels_) {
    const int calls = ch->calls.load(std::memory_order_relaxed);
    if (calls == 0) return *ch;
    if (calls < fewest) {
      fewest = calls;
      best = ch.get();
    }
  }
  return *best;
}

Replies Pool::run(const Batch& batch, steady::time_point deadline, std::string_view step) {
  if (batch.empty()) return {};
  return run_on(pick(), batch, deadline, step);
}

Replies Pool::run_on(Channel& ch, const Batch& batch, steady::time_point deadline, std::string_view step) {
  auto me = std::make_shared<Request>(batch, deadline);
  ch.calls.fetch_add(1, std::memory_order_relaxed);
  struct Leave {
    std::atomic<int>& calls;
    ~Leave() { calls.fetch_sub(1, std::memory_order_relaxed); }
  } leave{ch.calls};

  std::unique_lock lk(ch.mu);
  ch.queue.push_back(me);
  if (!ch.busy) {
    ch.busy = true;
    me->lead = true;
  }
  return await(ch, lk, me, step);
}

Replies Pool::await(Channel& ch, std::unique_lock<std::mutex>& lk, const std::shared_ptr<Request>& me,
                    std::string_view step) {
  if (me->state != Request::State::done && !me->lead) {
    // A follower: the leader answers us, or passes us the lead.
    const bool woken =
        me->cv.wait_until(lk, me->deadline, [&] { return me->state == Request::State::done || me->lead; });
    if (me->state == Request::State::done) return std::move(me->result);
    if (!woken) {
      if (me->state == Request::State::queued) {
        ch.queue.erase(std::find(ch.queue.begin(), ch.queue.end(), me));
        return {{}, no_time_left(step)};
      }
      me->abandoned = true;  // written: the leader reads its replies and drops them
      return {{}, no_answer(step)};
    }
  }
  if (me->state == Request::State::done) return std::move(me->result);
  lead(ch, lk, *me, step);
  return std::move(me->result);
}

Pool::Pending Pool::start(const Batch& batch, steady::time_point deadline, std::string_view step) {
  if (batch.empty()) return {};
  Channel& ch = pick();
  auto me = std::make_shared<Request>(batch, deadline);
  me->parked = true;
  ch.calls.fetch_add(1, std::memory_order_relaxed);
  std::unique_lock lk(ch.mu);
  ch.queue.push_back(me);
  if (!ch.busy) {
    // Nobody leads: write it now (and whatever else queued), then let go.
    ch.busy = true;
    me->write_only = true;
    lead(ch, lk, *me, step);
    me->write_only = false;
  }
  return {me, &ch};
}

Replies Pool::finish(Pending& pending, std::string_view step) {
  if (!pending.request) return {};
  Channel& ch = *pending.channel;
  struct Leave {
    std::atomic<int>& calls;
    ~Leave() { calls.fetch_sub(1, std::memory_order_relaxed); }
  } leave{ch.calls};
  std::unique_lock lk(ch.mu);
  auto me = std::move(pending.request);
  me->parked = false;
  // Its replies unread (or it still queued) and nobody leading: we lead.
  if (me->state != Request::State::done && !me->lead && !ch.busy) {
    ch.busy = true;
    me->lead = true;
  }
  return await(ch, lk, me, step);
}

// Called with lk held and the lead; returns with lk held, me done and the
// lead passed on (or busy cleared).
// Wakes the threads of finished batches, or hands a sent batch's replies to
// its `done` (lk not held; the shared_ptrs keep the waiters' cvs alive).
void Pool::complete(std::vector<std::shared_ptr<Request>>& finished, const Request* me) {
  for (auto& r : finished) {
    if (r->done) {
      try {
        r->done(std::move(r->result));
      } catch (...) {
      }
    } else if (r.get() != me) {
      r->cv.notify_one();
    }
  }
  finished.clear();
}

void Pool::send(const Batch& batch, steady::time_point deadline, std::function<void(Replies)> done) {
  if (batch.empty()) return;
  auto me = std::make_shared<Request>(batch, deadline);
  Channel& ch = pick();
  sent_pool = id_;
  for (std::size_t i = 0; i < channels_.size(); ++i)
    if (channels_[i].get() == &ch) sent_channel = i;
  std::atomic<int>& detached = ch.detached;
  detached.fetch_add(1, std::memory_order_relaxed);
  me->done = [&detached, done = std::move(done)](Replies replies) {
    detached.fetch_sub(1, std::memory_order_relaxed);
    done(std::move(replies));
  };
  me->abandoned = true;  // no thread waits for it: leaders read its replies
  std::unique_lock lk(ch.mu);
  ch.queue.push_back(me);
  if (ch.busy) return;  // the leader writes it with its own
  // Nobody leads: write it now (and whatever else queued), then let go.
  ch.busy = true;
  ch.calls.fetch_add(1, std::memory_order_relaxed);
  lead(ch, lk, *me, "sending a command");
  ch.calls.fetch_sub(1, std::memory_order_relaxed);
}

void Pool::flush(steady::time_point deadline) {
  for (auto& ch : channels_) {
    if (ch->detached.load() == 0) continue;
    // A PING behind them: its answer comes after theirs, and whoever leads
    // for it reads theirs first.
    Batch ping;
    ping.add({"PING"});
    (void)run_on(*ch, ping, deadline, "flushing");
  }
}

void Pool::lead(Channel& ch, std::unique_lock<std::mutex>& lk, Request& me, std::string_view step) {
  using State = Request::State;
  Connection& conn = ch.conn;
  std::vector<std::shared_ptr<Request>> fresh, finished, give_back;

  // The connection is gone: every written batch fails.
  auto fail_sent = [&](const Status& why) {
    for (auto& r : ch.sent) {
      r->result.failure = why;
      finished.push_back(std::move(r));
    }
    ch.sent.clear();
  };
  // Hands the replies received so far to their batches (no I/O).
  auto take_replies = [&] {
    while (!ch.sent.empty()) {
      auto reply = conn.next_reply(step);
      if (!reply) return fail_sent(reply.status());
      if (!*reply) return;
      Request& r = *ch.sent.front();
      r.result.replies.push_back(std::move(*reply));
      if (r.result.replies.size() == r.batch.size()) {
        finished.push_back(std::move(ch.sent.front()));
        ch.sent.pop_front();
      }
    }
  };
  auto finish = [&] {  // lk held
    for (auto& r : finished) r->state = State::done;
  };
  auto notify = [&] { complete(finished, &me); };  // lk not held

  // Our part is over once our replies are in, or (send()) once our batch
  // is written.
  auto settled = [&] {
    return me.state == State::done ||
           ((me.done || me.write_only) && me.state == State::sent && !conn.output_pending());
  };
  me.lead = false;
  bool flushed = false;
  int flush_rounds = 0;
  for (;;) {
    // lk held. Once our part is over, write once more what queued
    // meanwhile (if the connection is ready: no connecting on others'
    // behalf past our deadline), then pass the lead on.
    const bool flushing = settled();
    if (flushing) {
      // Batches sent without waiting have no thread to lead for them: the
      // leader writes them all before it goes (or fails them if the
      // connection is not up: connecting is up to a thread with its own time).
      const bool unattended = std::any_of(ch.queue.begin(), ch.queue.end(), [](const auto& r) { return bool(r->done); });
      if (!conn.connected() || conn.stale()) {
        std::erase_if(ch.queue, [&](std::shared_ptr<Request>& r) {
          if (!r->done) return false;
          r->result.failure = Status(errc::unavailable, std::string(step) + ": not sent, the connection was down");
          finished.push_back(std::move(r));
          return true;
        });
        break;
      }
      // (A bounded number of rounds: a leader never works for others for long.)
      if ((flushed && !(unattended && flush_rounds < 16)) || ch.queue.empty()) {
        if (!conn.output_pending() || ch.sent.empty()) break;
      }
      flushed = true;
      ++flush_rounds;
    }
    fresh.assign(ch.queue.begin(), ch.queue.end());
    ch.queue.clear();
    for (auto& r : fresh) r->state = State::sent;
    lk.unlock();

    take_replies();
    auto now = steady::now();
    // The oldest written batch is past its deadline (its thread left): if
    // its replies are not here now, the connection is dead.
    if (!ch.sent.empty() && ch.sent.front()->deadline <= now) {
      if (Status s = conn.wait(now, step); !s) fail_sent(s);
      take_replies();
      if (!ch.sent.empty() && ch.sent.front()->deadline <= now) fail_sent(conn.fail(no_answer(step)));
    }
    // Batches queued past their deadline are not sent.
    std::erase_if(fresh, [&](std::shared_ptr<Request>& r) {
      if (r->deadline > now) return false;
      r->result.failure = no_time_left(step);
      finished.push_back(std::move(r));
      return true;
    });
    if (!fresh.empty()) {
      // Made before a failure another call saw, or closed by the server.
      if (!flushing && ch.sent.empty() && !conn.output_pending() && (conn.stale() || conn.readable_while_idle()))
        conn.drop();
      const bool mine_fresh = std::any_of(fresh.begin(), fresh.end(), [&](const auto& r) { return r.get() == &me; });
      if (!conn.connected() && !mine_fresh) {
        // Connecting is up to a thread with its own batch to send and its
        // own time: the first of these (we would overrun our deadline).
        give_back = std::move(fresh);
      } else {
        Status ready = conn.connected() ? Status{} : conn.connect(me.deadline);
        if (!ready) {
          for (auto& r : fresh) {
            r->result.failure = ready;
            finished.push_back(std::move(r));
          }
        } else {
          for (auto& r : fresh) {
            conn.append(r->batch.bytes());
            ch.sent.push_back(std::move(r));
          }
          if (Status s = conn.write_some(step); !s) fail_sent(s);
        }
      }
      fresh.clear();
    }
    // Wait for our replies (and those before them).
    const bool answered = flushing || settled() ||
                          std::any_of(finished.begin(), finished.end(), [&](const auto& r) { return r.get() == &me; });
    if (!answered && !ch.sent.empty()) {
      const auto until = std::min(ch.sent.front()->deadline, me.deadline);
      if (Status s = conn.wait(until, step); !s) fail_sent(s);
      take_replies();
    } else if (flushing && conn.output_pending() && !ch.sent.empty()) {
      // What the socket did not take yet: written before the lead goes.
      if (Status s = conn.wait(ch.sent.front()->deadline, step); !s) fail_sent(s);
      take_replies();
    }
    lk.lock();
    for (auto r = give_back.rbegin(); r != give_back.rend(); ++r)
      if (!(*r)->abandoned || (*r)->done) {  // (an abandoned one's thread left: drop it)
        (*r)->state = State::queued;
        ch.queue.push_front(std::move(*r));
      }
    give_back.clear();
    finish();
    if (settled()) continue;  // flush, then pass the lead on
    lk.unlock();
    notify();
    lk.lock();
  }
  // lk held, me done: the lead goes to the oldest unanswered batch's thread
  // (it waits for its replies), else to the first queued one (it writes).
  std::shared_ptr<Request> next;
  for (auto& r : ch.sent)
    if (!r->abandoned && !r->parked) {
      next = r;
      break;
    }
  if (!next)
    for (auto& r : ch.queue)
      if (!r->done && !r->parked) {
        next = r;
        break;
      }
  // Only batches sent without waiting are left queued (the rounds ran out):
  // they fail, and the lease frees what they would have released. (A
  // parked one stays: its thread leads for it in finish().)
  if (!next)
    std::erase_if(ch.queue, [&](std::shared_ptr<Request>& r) {
      if (r->parked) return false;
      r->result.failure = Status(errc::unavailable, std::string(step) + ": not sent (the connection was busy)");
      finished.push_back(std::move(r));
      return true;
    });
  if (next) next->lead = true;
  else ch.busy = false;
  lk.unlock();
  notify();
  if (next) next->cv.notify_one();
  lk.lock();
}

Result<Reply> Commands::command(std::span<const std::string_view> words, steady::time_point deadline,
                                std::string_view step, std::string_view key) {
  Batch batch;
  batch.add(words, key);
  Replies out = run(batch, deadline, step);
  if (!out.failure.ok()) return out.failure;
  Reply& reply = out.replies.front();
  if (reply->type == REDIS_REPLY_ERROR) return to_status(nullptr, reply.get(), step, key);
  return std::move(reply);
}

Result<std::string> Commands::load_on(Pool& pool, Script script, steady::time_point deadline) {
  const std::string& text = script_text(script);
  const std::string_view words[] = {"SCRIPT", "LOAD", text};
  auto reply = pool.command(words, deadline, "loading the " + std::string(script_name(script)) + " script");
  if (!reply) return reply.status();
  if ((*reply)->type != REDIS_REPLY_STRING)
    return Status(errc::internal, "redis backend: SCRIPT LOAD answered something else than a SHA1");
  return std::string((*reply)->str, (*reply)->len);
}

Status Commands::load_all(steady::time_point deadline) {
  for (Script s : all_scripts) {
    auto sha = load(s, deadline);
    if (!sha) return sha.status();
    shas_[static_cast<std::size_t>(s)] = *sha;
  }
  return {};
}

Result<std::string> Pool::load(Script script, steady::time_point deadline) { return load_on(*this, script, deadline); }

Result<Reply> Commands::eval(Script script, std::span<const std::string_view> keys,
                             std::span<const std::string_view> args, steady::time_point deadline,
                             std::string_view step, std::string_view key) {
  Batch batch;
  batch.add_eval(sha(script), keys, args);
  for (int attempt = 0;; ++attempt) {
    Replies out = run(batch, deadline, step);
    if (!out.failure.ok()) return out.failure;
    Reply& reply = out.replies.front();
    // The server lost its script cache (restart, SCRIPT FLUSH): load, retry once.
    if (is_noscript(reply.get()) && attempt == 0) {
      if (auto loaded = load(script, deadline); !loaded) return loaded.status();
      continue;
    }
    if (reply->type == REDIS_REPLY_ERROR) return to_status(nullptr, reply.get(), step, key);
    return std::move(reply);
  }
}

}  // namespace dlock::detail::redis
