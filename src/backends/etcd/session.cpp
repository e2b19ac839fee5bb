#include "backends/etcd/session.h"

#include "backends/etcd/errors.h"
#include "core/thread_name.h"

#include <algorithm>
#include <limits>
#include <optional>

namespace dlock::detail::etcd {
namespace {

using std::chrono::milliseconds;

// How much earlier than the cluster the client gives a lease up: 1% of its
// TTL for clock drift, and 2 ms more.
milliseconds drift(std::int64_t ttl_seconds) { return milliseconds(ttl_seconds * 10 + 2); }

// A failed-over call waits this long once every member has refused it.
constexpr milliseconds all_members_down_pause{50};

grpc::ChannelArguments channel_arguments(const Config& config) {
  grpc::ChannelArguments args;
  // A member that comes back is found within about a second, not gRPC's
  // default of up to two minutes. (Not GRPC_ARG_MIN_RECONNECT_BACKOFF_MS:
  // it is also how long one connection attempt may take, and a loaded
  // machine needs more than a few hundred milliseconds for a handshake.)
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // A member that stops answering (stopped, cut off) is dropped after a
  // ping goes unanswered; etcd accepts pings every 5 s or more.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10'000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, static_cast<int>(std::min<std::int64_t>(config.op_timeout.count(), 20'000)));
  // Each client its own connections: one client's failure is not another's.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return args;
}

// etcds://: TLS, checked against the URL's CA (gRPC's default roots without
// one), with the client's certificate if it gave one.
std::shared_ptr<grpc::ChannelCredentials> credentials(const Config& config) {
  if (!config.tls) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions tls;
  tls.pem_root_certs = config.ca_pem;
  tls.pem_cert_chain = config.cert_pem;
  tls.pem_private_key = config.key_pem;
  return grpc::SslCredentials(tls);
}

// A call that ran out of time after members could not be reached failed
// for the reason they gave (a refused connection, a failed TLS handshake),
// not for the deadline the retries reached.
const grpc::Status& why(const grpc::Status& last, const std::optional<grpc::Status>& unreachable) {
  return last.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED && unreachable ? *unreachable : last;
}

}  // namespace

steady::time_point lease_deadline_after(steady::time_point sent, std::int64_t ttl_said, std::int64_t ttl_asked) {
  const std::int64_t ttl = std::min(ttl_said, ttl_asked);
  if (ttl <= 0) return sent;
  return sent + std::chrono::seconds(ttl) - drift(ttl);
}

void Signal::notify() {
  std::shared_ptr<std::function<void()>> callback;
  {
    std::lock_guard lk(mu_);
    fired_ = true;
    callback = callback_;
  }
  cv_.notify_all();
  if (callback && *callback) (*callback)();
}

bool Signal::wait_until(steady::time_point until) {
  std::unique_lock lk(mu_);
  if (!cv_.wait_until(lk, until, [&] { return fired_; })) return false;
  fired_ = false;
  return true;
}

bool Signal::fired() const {
  std::lock_guard lk(mu_);
  return fired_;
}

void Signal::call_back(std::function<void()> callback) {
  std::lock_guard lk(mu_);
  callback_ = std::make_shared<std::function<void()>>(std::move(callback));
}

Session::Session(Config config, Events& events) : config_(std::move(config)), events_(events) {
  const auto args = channel_arguments(config_);
  const auto creds = credentials(config_);
  for (const auto& endpoint : config_.endpoints) {
    auto channel = grpc::CreateCustomChannel(endpoint, creds, args);
    kv_.push_back(pb::KV::NewStub(channel));
    leases_.push_back(pb::Lease::NewStub(channel));
    watch_.push_back(pb::Watch::NewStub(channel));
    auth_.push_back(pb::Auth::NewStub(channel));
    channels_.push_back(std::move(channel));
  }
}

Session::~Session() {
  end_async();
  std::int64_t id;
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
    id = lease_id_;
  }
  cv_.notify_all();
  if (keeper_.joinable()) keeper_.join();
  // Every key on the lease goes with it: the client's locks are free at
  // once, not a TTL later.
  if (id != 0) (void)revoke(id, steady::now() + config_.op_timeout, "revoking the client's lease");
  std::vector<WatchReader> readers;
  {
    std::lock_guard lk(watch_mu_);
    if (watch_context_) watch_context_->TryCancel();
    readers = std::move(watch_readers_);
  }
  for (auto& r : readers) r.thread.join();
}

Status Session::start() {
  const auto deadline = steady::now() + config_.op_timeout;
  if (config_.user) {
    if (Status s = authenticate(deadline); !s) return s;
  }
  if (auto granted = lease(deadline, "granting the client's lease at " + config_.redacted_url); !granted)
    return granted.status();
  keeper_ = std::thread([this] {
    name_this_thread("dlock-etcd-keep");
    keep_alive();
  });
  return {};
}

std::size_t Session::current() const {
  std::lock_guard lk(mu_);
  return current_;
}

void Session::rotate(std::size_t failed) {
  std::lock_guard lk(mu_);
  if (current_ == failed) current_ = (current_ + 1) % channels_.size();
}

// The pause watches the members' channels rather than sleeping: a watch is
// what makes gRPC look at a channel's connection attempt (a sleeping
// client's attempt is otherwise noticed only by gRPC's backup poller, every
// 5 s), so a member that comes back is used as soon as it accepts.
void Session::pause(steady::time_point until) {
  const auto wall_until = std::chrono::system_clock::now() + std::max(until - steady::now(), steady::duration::zero());
  grpc::CompletionQueue changes;
  std::size_t watching = 0;
  for (const auto& channel : channels_) {
    const grpc_connectivity_state state = channel->GetState(true);
    if (state == GRPC_CHANNEL_READY || state == GRPC_CHANNEL_SHUTDOWN) continue;
    channel->NotifyOnStateChange(state, wall_until, &changes, nullptr);
    ++watching;
  }
  // Every watch ends by `until` (on a change or its deadline).
  void* tag;
  bool changed;
  for (; watching > 0 && changes.Next(&tag, &changed); --watching) {
  }
  changes.Shutdown();
  while (changes.Next(&tag, &changed)) {
  }
  std::this_thread::sleep_until(until);  // members that answered but refused (a leader change)
}

void Session::prepare(grpc::ClientContext& context, steady::time_point deadline) {
  // gRPC takes a wall-clock deadline: the time left, from now.
  if (deadline != steady::time_point::max())
    context.set_deadline(std::chrono::system_clock::now() + std::max(deadline - steady::now(), steady::duration::zero()));
  std::lock_guard lk(mu_);
  if (!token_.empty()) context.AddMetadata("token", token_);
}

Status Session::authenticate(steady::time_point deadline) {
  pb::AuthenticateRequest request;
  request.set_name(*config_.user);
  request.set_password(*config_.password);
  pb::AuthenticateResponse response;
  std::optional<grpc::Status> unreachable;  // the last member that could not be reached, and why
  for (std::size_t tries = 0;; ++tries) {
    const std::size_t at = current();
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::max(deadline - steady::now(), steady::duration::zero()));
    grpc::Status s = auth_[at]->Authenticate(&context, request, &response);
    if (s.ok()) {
      std::lock_guard lk(mu_);
      token_ = response.token();
      return {};
    }
    if (s.error_code() == grpc::StatusCode::UNAVAILABLE) unreachable = s;
    if (s.error_code() != grpc::StatusCode::UNAVAILABLE || steady::now() >= deadline)
      return to_status(why(s, unreachable), "authenticating as '" + *config_.user + "' at " + config_.redacted_url,
                       config_.tls);
    rotate(at);
    if ((tries + 1) % channels_.size() == 0) pause(std::min(deadline, steady::now() + all_members_down_pause));
  }
}

// Runs `call(member, context)` on the current member; a member that cannot
// be reached passes the call to the next one until `deadline`. An expired
// auth token is renewed once.
template <class Call>
Status Session::call(steady::time_point deadline, std::string_view step, Call&& call) {
  if (Status s = await_own(deadline, step); !s) return s;
  bool authenticated_again = false;
  std::optional<grpc::Status> unreachable;  // the last member that could not be reached, and why
  for (std::size_t tries = 0;; ++tries) {
    const std::size_t at = current();
    // A call given much less than op_timeout (a renewal read due soon, a
    // short try_lock_for) that runs out says nothing against the member.
    const bool full_time = deadline - steady::now() >= config_.op_timeout / 2;
    grpc::ClientContext context;
    prepare(context, deadline);
    const grpc::Status s = call(at, context);
    if (s.ok()) return {};
    if (s.error_code() == grpc::StatusCode::UNAUTHENTICATED && config_.user && !authenticated_again &&
        s.error_message().find("invalid auth token") != std::string::npos) {
      authenticated_again = true;
      if (Status a = authenticate(deadline); !a) return a;
      continue;
    }
    if (s.error_code() == grpc::StatusCode::UNAVAILABLE ||
        (s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED && full_time))
      rotate(at);
    if (s.error_code() == grpc::StatusCode::UNAVAILABLE) unreachable = s;
    if (s.error_code() != grpc::StatusCode::UNAVAILABLE || steady::now() >= deadline)
      return to_status(why(s, unreachable), step, config_.tls);
    if ((tries + 1) % channels_.size() == 0) pause(std::min(deadline, steady::now() + all_members_down_pause));
  }
}

Result<pb::TxnResponse> Session::txn(const pb::TxnRequest& request, steady::time_point deadline,
                                     std::string_view step) {
  pb::TxnResponse response;
  if (Status s = call(deadline, step, [&](std::size_t at, grpc::ClientContext& c) {
        return kv_[at]->Txn(&c, request, &response);
      });
      !s)
    return s;
  return response;
}

struct Session::Sent {
  grpc::ClientContext context;
  pb::TxnRequest request;
  pb::TxnResponse response;
  grpc::Status status;
  std::unique_ptr<grpc::ClientAsyncResponseReader<pb::TxnResponse>> reader;
  steady::time_point give_up;
  std::string step;
  std::thread::id thread;
  std::size_t at = 0;  // the member of the first attempt
  bool resent = false;
  AsyncDone done;
};

void Session::txn_async(pb::TxnRequest request, steady::time_point give_up, std::string step, AsyncDone done) {
  auto sent = std::make_shared<Sent>();
  sent->request = std::move(request);
  sent->give_up = give_up;
  sent->step = std::move(step);
  sent->thread = std::this_thread::get_id();
  sent->done = std::move(done);
  prepare(sent->context, std::min(give_up, steady::now() + config_.op_timeout));
  sent->at = current();
  std::lock_guard lk(sent_mu_);
  if (async_ended_) {
    sent->done(Status(errc::unavailable, "etcd: " + sent->step + ": the client is closing"), false);
    return;
  }
  in_flight_[sent.get()] = sent;
  ++unanswered_[sent->thread];
  if (!answers_reader_.joinable())
    answers_reader_ = std::thread([this] {
      name_this_thread("dlock-etcd-ans");
      read_answers();
    });
  // (Under sent_mu_, so that end_async() shuts the queue down only after
  // every call on it has been started.)
  sent->reader = kv_[sent->at]->AsyncTxn(&sent->context, sent->request, &answers_);
  sent->reader->Finish(&sent->response, &sent->status, sent.get());
}

// The answers' thread: each call's outcome as it comes, until end_async()
// shuts the queue down.
void Session::read_answers() {
  void* tag = nullptr;
  bool ok = false;
  while (answers_.Next(&tag, &ok)) {
    std::shared_ptr<Sent> sent;
    {
      std::lock_guard lk(sent_mu_);
      if (auto it = in_flight_.find(static_cast<const Sent*>(tag)); it != in_flight_.end()) sent = it->second;
    }
    if (sent) answered(sent);
  }
}

// The answer, or, as txn() would retry it, a call handed to the retry thread.
void Session::answered(const std::shared_ptr<Sent>& sent) {
  const grpc::Status& status = sent->status;
  if (status.ok()) return finish(sent, std::move(sent->response));
  const auto code = status.error_code();
  const bool member_failed = code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::DEADLINE_EXCEEDED;
  if ((member_failed || (code == grpc::StatusCode::UNAUTHENTICATED && config_.user)) && steady::now() < sent->give_up) {
    if (member_failed) rotate(sent->at);
    std::lock_guard lk(sent_mu_);
    if (!async_ended_) {
      to_retry_.push_back(sent);
      if (!retrier_.joinable())
        retrier_ = std::thread([this] {
          name_this_thread("dlock-etcd-retry");
          retry_sent();
        });
      sent_cv_.notify_all();
      return;
    }
  }
  finish(sent, to_status(status, sent->step, config_.tls));
}

void Session::finish(const std::shared_ptr<Sent>& sent, Result<pb::TxnResponse> outcome) {
  sent->done(std::move(outcome), sent->resent);
  {
    std::lock_guard lk(sent_mu_);
    if (auto it = unanswered_.find(sent->thread); it != unanswered_.end() && --it->second == 0) unanswered_.erase(it);
    in_flight_.erase(sent.get());
  }
  sent_cv_.notify_all();
}

// The retry thread: each call handed to it is sent again, an op_timeout at
// a time, while no member answers and until its give_up.
void Session::retry_sent() {
  std::unique_lock lk(sent_mu_);
  for (;;) {
    sent_cv_.wait(lk, [&] { return async_ended_ || !to_retry_.empty(); });
    if (to_retry_.empty()) return;
    auto sent = std::move(to_retry_.front());
    to_retry_.pop_front();
    Result<pb::TxnResponse> outcome =
        Status(errc::unavailable, "etcd: " + sent->step + ": the client closed before it was answered");
    while (!async_ended_) {
      lk.unlock();
      sent->resent = true;
      outcome = txn(sent->request, std::min(sent->give_up, steady::now() + config_.op_timeout), sent->step);
      lk.lock();
      if (outcome || outcome.status().code() != errc::unavailable || steady::now() >= sent->give_up) break;
    }
    lk.unlock();
    finish(sent, std::move(outcome));
    lk.lock();
  }
}

Status Session::await_own(steady::time_point deadline, std::string_view step) {
  const auto self = std::this_thread::get_id();
  std::unique_lock lk(sent_mu_);
  if (sent_cv_.wait_until(lk, deadline, [&] { return !unanswered_.contains(self); })) return {};
  return Status(errc::unavailable,
                "etcd: " + std::string(step) + ": a release this thread sent earlier is still unanswered");
}

void Session::end_async() {
  std::vector<std::shared_ptr<Sent>> cancel;
  {
    std::lock_guard lk(sent_mu_);
    if (std::exchange(async_ended_, true)) return;
    for (const auto& [key, sent] : in_flight_) cancel.push_back(sent);
  }
  sent_cv_.notify_all();
  for (const auto& sent : cancel) sent->context.TryCancel();
  std::thread reader, retrier;
  {
    // Cancelled calls are answered at once; a retry under way ends by its deadline.
    std::unique_lock lk(sent_mu_);
    sent_cv_.wait(lk, [&] { return in_flight_.empty(); });
    reader = std::move(answers_reader_);
    retrier = std::move(retrier_);
  }
  answers_.Shutdown();
  if (reader.joinable()) {
    reader.join();
  } else {
    void* tag = nullptr;
    bool ok = false;
    while (answers_.Next(&tag, &ok)) {
    }
  }
  if (retrier.joinable()) retrier.join();
}

Result<pb::RangeResponse> Session::range(const pb::RangeRequest& request, steady::time_point deadline,
                                         std::string_view step) {
  pb::RangeResponse response;
  if (Status s = call(deadline, step, [&](std::size_t at, grpc::ClientContext& c) {
        return kv_[at]->Range(&c, request, &response);
      });
      !s)
    return s;
  return response;
}

Result<pb::LeaseGrantResponse> Session::grant(std::int64_t ttl_seconds, steady::time_point deadline,
                                              std::string_view step) {
  pb::LeaseGrantRequest request;
  request.set_ttl(ttl_seconds);
  pb::LeaseGrantResponse response;
  if (Status s = call(deadline, step, [&](std::size_t at, grpc::ClientContext& c) {
        return leases_[at]->LeaseGrant(&c, request, &response);
      });
      !s)
    return s;
  if (!response.error().empty()) return Status(errc::unavailable, "etcd: " + std::string(step) + ": " + response.error());
  return response;
}

void Session::revoke_given_up(steady::time_point deadline) {
  std::vector<std::int64_t> ids;
  {
    std::lock_guard lk(mu_);
    ids = given_up_;
  }
  for (std::int64_t id : ids) {
    if (steady::now() >= deadline) return;
    if (!revoke(id, deadline, "revoking a lease the client gave up")) continue;
    std::lock_guard lk(mu_);
    std::erase(given_up_, id);
    events_.log(LogLevel::info, "etcd: revoked a lease the client had given up; the keys on it are gone");
  }
}

Status Session::revoke(std::int64_t lease_id, steady::time_point deadline, std::string_view step) {
  pb::LeaseRevokeRequest request;
  request.set_id(lease_id);
  pb::LeaseRevokeResponse response;
  Status s = call(deadline, step, [&](std::size_t at, grpc::ClientContext& c) {
    return leases_[at]->LeaseRevoke(&c, request, &response);
  });
  return s.code() == errc::lock_lost ? Status() : s;  // already gone
}

Result<pb::LeaseTimeToLiveResponse> Session::time_to_live(std::int64_t lease_id, steady::time_point deadline,
                                                          std::string_view step) {
  pb::LeaseTimeToLiveRequest request;
  request.set_id(lease_id);
  pb::LeaseTimeToLiveResponse response;
  if (Status s = call(deadline, step, [&](std::size_t at, grpc::ClientContext& c) {
        return leases_[at]->LeaseTimeToLive(&c, request, &response);
      });
      !s)
    return s;
  return response;
}

Result<Lease> Session::lease(steady::time_point deadline, std::string_view step) {
  const auto live = [&]() -> std::optional<Lease> {
    std::lock_guard lk(mu_);
    if (lease_id_ != 0 && steady::now() < lease_until_) return Lease{lease_id_, lease_dropped_.get_token()};
    return std::nullopt;
  };
  if (auto l = live()) return *l;
  std::lock_guard one(grant_mu_);
  if (auto l = live()) return *l;
  const auto sent = steady::now();
  auto granted = grant(config_.ttl.count(), deadline, step);
  if (!granted) return granted.status();
  if (granted->ttl() <= 0 || granted->id() == 0)
    return Status(errc::unavailable, "etcd: " + std::string(step) + ": the cluster granted lease " +
                                         std::to_string(granted->id()) + " with a TTL of " +
                                         std::to_string(granted->ttl()) + " s");
  Lease out;
  {
    std::lock_guard lk(mu_);
    lease_id_ = granted->id();
    lease_ttl_ = std::min(granted->ttl(), config_.ttl.count());
    lease_until_ = lease_deadline_after(sent, lease_ttl_, config_.ttl.count());
    out = Lease{lease_id_, lease_dropped_.get_token()};
  }
  cv_.notify_all();  // the keeper has a lease to renew
  return out;
}

steady::time_point Session::lease_deadline(std::int64_t id) const {
  std::lock_guard lk(mu_);
  return id == lease_id_ && id != 0 ? lease_until_ : steady::time_point::min();
}

std::chrono::seconds Session::lease_ttl() const {
  std::lock_guard lk(mu_);
  return std::chrono::seconds(lease_ttl_);
}

void Session::lose_lease(std::int64_t id, const std::string& why) {
  std::stop_source dropped;
  std::vector<std::shared_ptr<Signal>> waiters;
  {
    std::lock_guard lk(mu_);
    if (id == 0 || lease_id_ != id) return;
    lease_id_ = 0;
    given_up_.push_back(id);
    dropped = std::exchange(lease_dropped_, std::stop_source());
    waiters = waiters_;
  }
  events_.log(LogLevel::warning, "etcd: the client's lease was lost (" + why + "); its locks with it");
  dropped.request_stop();
  for (auto& w : waiters) w->notify();
}

void Session::add_waiter(const std::shared_ptr<Signal>& signal) {
  std::lock_guard lk(mu_);
  waiters_.push_back(signal);
}

void Session::remove_waiter(const std::shared_ptr<Signal>& signal) {
  std::lock_guard lk(mu_);
  std::erase(waiters_, signal);
}

// The keepalive loop: one stream at a time, a request every ttl/3 for the
// live lease; a reader thread matches each answer to the time its request
// was sent (etcd answers a stream's requests in order). A stream left
// unanswered for op_timeout is dropped and opened again on the next member;
// so is, at once, a stream the member ended (it was killed or restarted).
void Session::keep_alive() {
  // Streams that end unanswered (every member down, or an idle client's
  // stream, which asks nothing) are opened again less and less often, and
  // said once: the outage, not each try.
  milliseconds pause{100};
  bool told = false;
  for (;;) {
    const std::size_t at = current();
    auto context = std::make_shared<grpc::ClientContext>();
    prepare(*context, steady::time_point::max());
    std::shared_ptr<grpc::ClientReaderWriter<pb::LeaseKeepAliveRequest, pb::LeaseKeepAliveResponse>> stream =
        leases_[at]->LeaseKeepAlive(context.get());
    std::mutex sent_mu;
    std::deque<std::pair<std::int64_t, steady::time_point>> sent;  // guarded by sent_mu
    bool ended = false;     // guarded by mu_: the stream ended (its member went): open the next one now
    bool answered = false;  // guarded by mu_: it answered a keepalive
    std::thread reader([&] {
      name_this_thread("dlock-etcd-ka");
      pb::LeaseKeepAliveResponse response;
      while (stream->Read(&response)) {
        steady::time_point sent_at;
        {
          std::lock_guard lk(sent_mu);
          if (sent.empty()) continue;
          sent_at = sent.front().second;
          sent.pop_front();
        }
        if (response.ttl() <= 0) {
          lose_lease(response.id(), "the cluster says it expired or was revoked");
          continue;
        }
        std::lock_guard lk(mu_);
        answered = true;
        if (response.id() == lease_id_)
          lease_until_ = std::max(lease_until_, lease_deadline_after(sent_at, response.ttl(), config_.ttl.count()));
      }
      // A member killed or restarted ends the stream at once: move on now,
      // not at the next keepalive (up to ttl/3 later, of a lease whose
      // deadline runs from the last answered one).
      {
        std::lock_guard lk(mu_);
        ended = true;
      }
      cv_.notify_all();
    });

    bool broken = false;
    auto next_send = steady::now();
    while (!broken) {
      std::int64_t id;
      {
        std::unique_lock lk(mu_);
        // No lease to keep: idle, but for leases given up to revoke.
        const auto idle = given_up_.empty() ? steady::time_point::max() : steady::now() + milliseconds(200);
        const auto wake = lease_id_ == 0 ? idle : std::min(next_send, lease_until_);
        cv_.wait_until(lk, wake, [&] { return stopping_ || ended; });
        if (stopping_) break;
        id = lease_id_;
        if (id != 0 && steady::now() >= lease_until_) {  // first, even if the stream ended
          lk.unlock();
          lose_lease(id, "no keepalive was answered before its deadline");
          continue;
        }
        if (ended) {
          broken = true;
          break;
        }
        if (id == 0) {
          if (given_up_.empty()) continue;
          lk.unlock();
          revoke_given_up(steady::now() + config_.op_timeout);
          continue;
        }
        if (steady::now() < next_send) continue;
      }
      const auto now = steady::now();
      {
        std::lock_guard lk(sent_mu);
        if (!sent.empty() && now - sent.front().second > config_.op_timeout) {
          broken = true;  // unanswered: the member is stopped or cut off
          break;
        }
        sent.emplace_back(id, now);
      }
      pb::LeaseKeepAliveRequest request;
      request.set_id(id);
      if (!stream->Write(request)) broken = true;
      next_send = now + std::max<std::chrono::milliseconds>(lease_ttl() / 3, milliseconds(100));
      // Between two keepalives: the leases given up, whose keys would
      // otherwise block others for as long as elections keep renewing them.
      bool any_given_up;
      {
        std::lock_guard lk(mu_);
        any_given_up = !given_up_.empty();
      }
      if (!broken && any_given_up) revoke_given_up(std::min(next_send, now + config_.op_timeout));
    }
    context->TryCancel();
    reader.join();
    (void)stream->Finish();
    bool was_up;
    {
      std::unique_lock lk(mu_);
      if (stopping_) return;
      was_up = answered;
    }
    rotate(at);
    if (was_up) told = false;
    if (!told) events_.connection_lost("etcd keepalive stream");
    told = true;
    pause = was_up ? milliseconds(100) : std::min(pause * 2, milliseconds(500));
    std::unique_lock lk(mu_);
    cv_.wait_for(lk, pause, [&] { return stopping_; });
    if (stopping_) return;
  }
}

Result<std::int64_t> Session::watch(const std::string& key, const std::string& range_end, bool deletions_only,
                                    std::shared_ptr<Signal> signal, std::int64_t read_revision,
                                    const std::function<Result<bool>()>& changed_since_read,
                                    steady::time_point deadline) {
  auto created = std::make_shared<std::promise<std::int64_t>>();
  auto made = created->get_future();
  auto id = open_watch(key, range_end, deletions_only, signal, created);
  if (!id) return id.status();
  std::int64_t from = std::numeric_limits<std::int64_t>::max();  // unknown
  if (made.wait_until(deadline) == std::future_status::ready) {
    from = made.get();
  } else {
    std::lock_guard lk(watch_mu_);
    creations_.erase(*id);
  }
  if (from > read_revision) {
    auto changed = changed_since_read();
    if (!changed || *changed) signal->notify();
  }
  return *id;
}

Result<std::int64_t> Session::open_watch(const std::string& key, const std::string& range_end, bool deletions_only,
                                         std::shared_ptr<Signal> signal,
                                         std::shared_ptr<std::promise<std::int64_t>> created) {
  std::lock_guard lk(watch_mu_);
  if (!watch_stream_) {
    // The readers of streams that have ended have nothing left to do (their
    // last step sets `ended`): joined now, each returns at once.
    std::erase_if(watch_readers_, [](WatchReader& r) {
      if (!r.ended->load()) return false;
      r.thread.join();
      return true;
    });
    watch_context_ = std::make_shared<grpc::ClientContext>();
    prepare(*watch_context_, steady::time_point::max());
    watch_stream_ = watch_[current()]->Watch(watch_context_.get());
    WatchReader reader;
    reader.thread = std::thread([this, c = watch_context_, s = watch_stream_, ended = reader.ended] {
      name_this_thread("dlock-etcd-wch");
      read_watches(c, s);
      ended->store(true);
    });
    watch_readers_.push_back(std::move(reader));
  }
  const std::int64_t id = next_watch_id_++;
  pb::WatchRequest request;
  auto* create = request.mutable_create_request();
  create->set_key(key);
  create->set_range_end(range_end);
  // (No start revision: from the member's current one.)
  if (deletions_only) create->add_filters(pb::WatchCreateRequest::NOPUT);
  create->set_watch_id(id);
  watchers_[id] = std::move(signal);
  creations_[id] = std::move(created);
  if (!watch_stream_->Write(request)) {
    watchers_.erase(id);
    creations_.erase(id);
    watch_context_->TryCancel();  // its reader wakes the other watchers
    return Status(errc::unavailable, "etcd: watching '" + key + "': the watch stream broke");
  }
  return id;
}

void Session::unwatch(std::int64_t watch_id) {
  std::lock_guard lk(watch_mu_);
  if (watchers_.erase(watch_id) == 0 || !watch_stream_) return;
  pb::WatchRequest request;
  request.mutable_cancel_request()->set_watch_id(watch_id);
  (void)watch_stream_->Write(request);
}

void Session::read_watches(std::shared_ptr<grpc::ClientContext> context,
                           std::shared_ptr<grpc::ClientReaderWriter<pb::WatchRequest, pb::WatchResponse>> stream) {
  pb::WatchResponse response;
  while (stream->Read(&response)) {
    std::shared_ptr<Signal> fire;
    std::shared_ptr<std::promise<std::int64_t>> created;
    {
      std::lock_guard lk(watch_mu_);
      if (response.created()) {
        if (auto c = creations_.find(response.watch_id()); c != creations_.end()) {
          created = std::move(c->second);
          creations_.erase(c);
        }
      }
    }
    if (created) created->set_value(response.header().revision());
    {
      std::lock_guard lk(watch_mu_);
      auto it = watchers_.find(response.watch_id());
      if (it == watchers_.end()) continue;
      // Events only come as asked (NOPUT filters puts out); the rest is the
      // watch's creation or progress.
      if (response.events_size() == 0 && !response.canceled() && response.compact_revision() == 0) continue;
      fire = std::move(it->second);
      watchers_.erase(it);
      if (!response.canceled() && stream == watch_stream_) {
        pb::WatchRequest cancel;
        cancel.mutable_cancel_request()->set_watch_id(response.watch_id());
        (void)stream->Write(cancel);
      }
    }
    fire->notify();
  }
  // The stream ended (the member went, or the client is closing): every
  // watcher looks again.
  std::vector<std::shared_ptr<Signal>> orphans;
  {
    std::lock_guard lk(watch_mu_);
    if (watch_stream_ == stream) {
      for (auto& [id, signal] : watchers_) orphans.push_back(std::move(signal));
      watchers_.clear();
      // Watches never made: their makers learn the revision is unknown.
      for (auto& [id, created] : creations_) created->set_value(std::numeric_limits<std::int64_t>::max());
      creations_.clear();
      watch_stream_.reset();
      watch_context_.reset();
    }
  }
  for (auto& s : orphans) s->notify();
  (void)stream->Finish();
  (void)context;
}

}  // namespace dlock::detail::etcd
