#include "backends/redis/connection.h"

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

Status no_time_left(std::string_view step) {
  return Status(errc::unavailable,
                "redis backend: " + std::string(step) + ": no time left within ClientOptions::op_timeout");
}

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

}  // namespace dlock::detail::redis
