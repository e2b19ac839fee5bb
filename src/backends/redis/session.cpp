#include "backends/redis/session.h"

#include "backends/redis/errors.h"

#include <hiredis.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>

namespace dlock::detail::redis {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds first_backoff{50};
constexpr milliseconds max_backoff{1'000};

timeval to_timeval(steady::duration d) {
  auto us = std::max<std::int64_t>(std::chrono::duration_cast<std::chrono::microseconds>(d).count(), 1'000);
  return timeval{static_cast<time_t>(us / 1'000'000), static_cast<suseconds_t>(us % 1'000'000)};
}

// argv/argvlen for hiredis: every word binary-safe.
struct Argv {
  std::vector<const char*> words;
  std::vector<std::size_t> lengths;
  void add(std::string_view w) {
    words.push_back(w.data());
    lengths.push_back(w.size());
  }
  int count() const { return static_cast<int>(words.size()); }
};

Argv eval_argv(const std::string& sha, const std::string& nkeys, std::span<const std::string_view> keys,
               std::span<const std::string_view> args) {
  Argv a;
  a.words.reserve(3 + keys.size() + args.size());
  a.lengths.reserve(3 + keys.size() + args.size());
  a.add("EVALSHA");
  a.add(sha);
  a.add(nkeys);
  for (auto k : keys) a.add(k);
  for (auto v : args) a.add(v);
  return a;
}

}  // namespace

void FreeReply::operator()(redisReply* reply) const { freeReplyObject(reply); }

Connection::Connection(const Config& config, const ScriptShas* shas, std::atomic<std::uint64_t>* generation)
    : config_(config), shas_(shas), generation_(generation) {}

Connection::~Connection() { drop(); }

void Connection::drop() noexcept {
  if (context_) redisFree(context_);
  context_ = nullptr;
}

Status Connection::connect_failure(Status why) {
  drop();
  backoff_ = backoff_.count() == 0 ? first_backoff : std::min(backoff_ * 2, max_backoff);
  retry_at_ = steady::now() + backoff_;
  last_error_ = why.message();
  return why;
}

Status Connection::connect(steady::time_point deadline) {
  drop();
  const auto now = steady::now();
  const std::string where = "connecting to " + config_.redacted_url;
  if (now < retry_at_)
    return Status(errc::unavailable, last_error_ + " (backing off: next attempt in " +
                                         std::to_string(std::chrono::ceil<milliseconds>(retry_at_ - now).count()) +
                                         " ms)");
  const auto budget = std::min<steady::duration>(config_.connect_timeout, deadline - now);
  if (budget <= steady::duration::zero())
    return Status(errc::unavailable, "redis backend: " + where + ": no time left within ClientOptions::op_timeout");
  const timeval tv = to_timeval(budget);
  context_ = config_.unix_socket ? redisConnectUnixWithTimeout(config_.socket_path.c_str(), tv)
                                 : redisConnectWithTimeout(config_.host.c_str(), config_.port, tv);
  if (!context_) return connect_failure(Status(errc::unavailable, "redis backend: " + where + ": out of memory"));
  if (context_->err) return connect_failure(to_status(context_, nullptr, where));
  if (!config_.unix_socket) {
    // Keepalive finds a dead peer on an idle connection; TCP_USER_TIMEOUT
    // bounds how long sent data may stay unacknowledged before the kernel
    // gives up (a black-holed server).
    (void)redisEnableKeepAlive(context_);
    unsigned int user_timeout = static_cast<unsigned int>(config_.op_timeout.count());
    (void)::setsockopt(context_->fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof user_timeout);
  }
  const auto connect_deadline = now + budget;
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
  backoff_ = milliseconds(0);
  retry_at_ = {};
  made_in_ = generation_ ? generation_->load() : 0;
  return {};
}

bool Connection::readable_while_idle() const noexcept {
  if (!context_) return false;
  pollfd p{context_->fd, POLLIN, 0};
  return ::poll(&p, 1, 0) != 0;
}

Status Connection::io_failure(std::string_view step) {
  Status s = to_status(context_, nullptr, step);
  drop();
  if (generation_) generation_->fetch_add(1);
  return s;
}

Status Connection::set_deadline(steady::time_point deadline, std::string_view step) {
  const auto left = deadline - steady::now();
  if (left <= steady::duration::zero())
    return Status(errc::unavailable,
                  "redis backend: " + std::string(step) + ": no time left within ClientOptions::op_timeout");
  if (redisSetTimeout(context_, to_timeval(left)) != REDIS_OK) return io_failure(step);
  return {};
}

Result<Reply> Connection::command(std::span<const std::string_view> words, steady::time_point deadline,
                                  std::string_view step, std::string_view key) {
  if (!context_) return Status(errc::unavailable, "redis backend: " + std::string(step) + ": not connected");
  if (Status s = set_deadline(deadline, step); !s) return s;
  Argv a;
  for (auto w : words) a.add(w);
  Reply reply(static_cast<redisReply*>(redisCommandArgv(context_, a.count(), a.words.data(), a.lengths.data())));
  if (!reply) return io_failure(step);
  if (reply->type == REDIS_REPLY_ERROR) return to_status(context_, reply.get(), step, key);
  return reply;
}

Result<std::string> Connection::load(Script script, steady::time_point deadline) {
  const std::string& text = script_text(script);
  const std::string_view words[] = {"SCRIPT", "LOAD", text};
  auto reply = command(words, deadline, "loading the " + std::string(script_name(script)) + " script");
  if (!reply) return reply.status();
  if ((*reply)->type != REDIS_REPLY_STRING)
    return Status(errc::internal, "redis backend: SCRIPT LOAD answered something else than a SHA1");
  return std::string((*reply)->str, (*reply)->len);
}

Result<Reply> Connection::eval(Script script, std::span<const std::string_view> keys,
                               std::span<const std::string_view> args, steady::time_point deadline,
                               std::string_view step, std::string_view key) {
  const std::string& sha = (*shas_)[static_cast<std::size_t>(script)];
  const std::string nkeys = std::to_string(keys.size());
  Argv a = eval_argv(sha, nkeys, keys, args);
  for (int attempt = 0;; ++attempt) {
    if (!context_) return Status(errc::unavailable, "redis backend: " + std::string(step) + ": not connected");
    if (Status s = set_deadline(deadline, step); !s) return s;
    Reply reply(static_cast<redisReply*>(redisCommandArgv(context_, a.count(), a.words.data(), a.lengths.data())));
    if (!reply) return io_failure(step);
    // The server lost its script cache (restart, SCRIPT FLUSH): load, retry once.
    if (is_noscript(reply.get()) && attempt == 0) {
      if (auto loaded = load(script, deadline); !loaded) return loaded.status();
      continue;
    }
    if (reply->type == REDIS_REPLY_ERROR) return to_status(context_, reply.get(), step, key);
    return reply;
  }
}

void Connection::append(std::span<const std::string_view> words) {
  Argv a;
  for (auto w : words) a.add(w);
  (void)redisAppendCommandArgv(context_, a.count(), a.words.data(), a.lengths.data());
}

void Connection::append_eval(Script script, std::span<const std::string_view> keys,
                             std::span<const std::string_view> args) {
  const std::string nkeys = std::to_string(keys.size());
  Argv a = eval_argv((*shas_)[static_cast<std::size_t>(script)], nkeys, keys, args);
  (void)redisAppendCommandArgv(context_, a.count(), a.words.data(), a.lengths.data());
}

Result<Reply> Connection::read(steady::time_point deadline, std::string_view step) {
  if (!context_) return Status(errc::unavailable, "redis backend: " + std::string(step) + ": not connected");
  if (Status s = set_deadline(deadline, step); !s) return s;
  void* raw = nullptr;
  if (redisGetReply(context_, &raw) != REDIS_OK || !raw) return io_failure(step);
  return Reply(static_cast<redisReply*>(raw));
}

Pool::Pool(const Config& config, const ScriptShas* shas) : config_(config) {
  for (int i = 0; i < config.connections; ++i) {
    all_.push_back(std::make_unique<Connection>(config, shas, &generation_));
    free_.push_back(all_.back().get());
  }
}

Result<Pool::Lease> Pool::take(steady::time_point deadline, std::string_view step) {
  Connection* c = nullptr;
  {
    std::unique_lock lk(mu_);
    if (!freed_.wait_until(lk, deadline, [&] { return !free_.empty(); }))
      return Status(errc::unavailable, "redis backend: " + std::string(step) + ": all " +
                                           std::to_string(all_.size()) +
                                           " connections stayed busy for longer than ClientOptions::op_timeout "
                                           "(raise the connections= option)");
    c = free_.back();
    free_.pop_back();
  }
  Lease lease(this, c);
  // Made before a failure another call saw, or closed by the server.
  if (c->stale() || c->readable_while_idle()) c->drop();
  if (!c->connected())
    if (Status s = c->connect(deadline); !s) return s;
  return lease;
}

void Pool::give_back(Connection* c) {
  {
    std::lock_guard lk(mu_);
    free_.push_back(c);
  }
  freed_.notify_one();
}

}  // namespace dlock::detail::redis
