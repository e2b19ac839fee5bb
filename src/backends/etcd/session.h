// session.h — one client's connection to an etcd cluster: the gRPC channels
// (one per member, failed over in turn), the lease every lock of the client
// rides on (kept alive by one LeaseKeepAlive stream), and one Watch stream
// shared by every waiter.
//
// Lease: granted at start with Config::ttl and renewed every ttl/3. Its
// local deadline is computed from when each keepalive was *sent* (the
// cluster restarts the TTL when it receives it, later), less a margin for
// clock drift; the lease counts as lost at that deadline even if the
// cluster never answered, and at once when a keepalive answers TTL <= 0
// (expired or revoked). A lost lease fires its `dropped` token (every hold
// on it is then lost) and the next call that needs one grants a new lease.
//
// Thread-safety: every member function may be called from any thread.
// Blocking: every call returns by its deadline (errc::unavailable then).
#pragma once

#include "backends/etcd/config.h"

#include "core/driver.h"

#include <etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h>
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <stop_token>
#include <thread>
#include <vector>

namespace dlock::detail::etcd {

namespace pb = etcdserverpb;

// Something a waiter waits for: set by a watch event, the loss of the
// lease, a broken watch stream, or a local release.
class Signal {
 public:
  void notify();
  // Waits until notified (true) or `until` (false); a notification is
  // consumed by the wait that sees it.
  bool wait_until(steady::time_point until);
  bool fired() const;
  // From now on `notify` also runs `callback` (outside the lock; it must
  // not block). Empty: none.
  void call_back(std::function<void()> callback);

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool fired_ = false;
  std::shared_ptr<std::function<void()>> callback_;
};

struct Lease {
  std::int64_t id = 0;
  std::stop_token dropped;  // fires when this lease is lost
};

class Session {
 public:
  Session(Config config, Events& events);
  ~Session();  // revokes the lease (freeing every key on it) and stops the streams
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Connects, authenticates (with a user in the URL), grants the lease and
  // starts keeping it alive.
  Status start();
  const Config& config() const noexcept { return config_; }

  // The live lease, granted anew if the last one was lost.
  Result<Lease> lease(steady::time_point deadline, std::string_view step);
  // The lease's local deadline (see above); min() if it is not the live one.
  steady::time_point lease_deadline(std::int64_t id) const;
  // The TTL of the live lease: the cluster's grant, but no longer than
  // Config::ttl (see lease_deadline_after).
  std::chrono::seconds lease_ttl() const;

  // Unary calls, failed over between members, each within `deadline`.
  // Each first waits for the calling thread's txn_async calls (below).
  Result<pb::TxnResponse> txn(const pb::TxnRequest& request, steady::time_point deadline, std::string_view step);
  Result<pb::RangeResponse> range(const pb::RangeRequest& request, steady::time_point deadline, std::string_view step);
  Result<pb::LeaseGrantResponse> grant(std::int64_t ttl_seconds, steady::time_point deadline, std::string_view step);
  Status revoke(std::int64_t lease_id, steady::time_point deadline, std::string_view step);
  // Revokes the leases given up, until `deadline`; those not revoked then
  // stay for the next turn.
  void revoke_given_up(steady::time_point deadline);
  Result<pb::LeaseTimeToLiveResponse> time_to_live(std::int64_t lease_id, steady::time_point deadline,
                                                   std::string_view step);

  // A Txn sent without waiting (Mutex::unlock): `done` gets its outcome
  // later, on one of the session's two threads for this (the one that
  // reads the answers, the one that sends again; it must not block). gRPC does not order separate calls, so until
  // `done` has run every later call of the sending thread waits for it first (await_own): what that thread does next
  // runs after this Txn. One attempt has op_timeout; one that finds no member (unreachable, silent, a stale auth token)
  // is sent again on the retry thread, failed over as txn() is, until `give_up`. `resent`: it was sent more than once,
  // so an earlier send may have been applied. `done` runs once, by `give_up` plus op_timeout, or when the session ends
  // (errc::unavailable).
  using AsyncDone = std::function<void(Result<pb::TxnResponse> outcome, bool resent)>;
  void txn_async(pb::TxnRequest request, steady::time_point give_up, std::string step, AsyncDone done);
  // Waits until the calling thread's txn_async calls are answered;
  // errc::unavailable if one still is not by `deadline`.
  Status await_own(steady::time_point deadline, std::string_view step);
  // Ends every txn_async still in flight (each `done` runs, with its
  // answer or errc::unavailable) and returns once none is left; later ones
  // fail at once. For the owner of the state the `done`s touch, before it
  // goes; the destructor does it too.
  void end_async();

  // Notifies `signal` once a key in [key, range_end) (range_end empty: `key`
  // alone) is deleted — or, unless deletions_only, also put — after the
  // caller read it at `read_revision`; also when the watch is cancelled,
  // compacted or its stream breaks: a waiter then looks again. Once: the
  // watch ends with its first notification. The id is for unwatch().
  //
  // The watch starts at the member's current revision: one from a past
  // revision waits for the member's catch-up loop (up to 100 ms a wait).
  // If anything was written between the read and the watch's start (or the
  // start is not known by `deadline`), `changed_since_read` — the caller's
  // read again, narrowed to what it waits for — says whether the change
  // came in between; if it did, or that read fails, `signal` is notified at
  // once.
  Result<std::int64_t> watch(const std::string& key, const std::string& range_end, bool deletions_only,
                             std::shared_ptr<Signal> signal, std::int64_t read_revision,
                             const std::function<Result<bool>()>& changed_since_read, steady::time_point deadline);
  void unwatch(std::int64_t watch_id);

  // Signals notified whenever the lease is lost (waiters look again).
  void add_waiter(const std::shared_ptr<Signal>& signal);
  void remove_waiter(const std::shared_ptr<Signal>& signal);

 private:
  template <class Call>
  Status call(steady::time_point deadline, std::string_view step, Call&& call);
  void prepare(grpc::ClientContext& context, steady::time_point deadline);
  // Waits until `until` while gRPC reconnects the members (see .cpp).
  void pause(steady::time_point until);
  Status authenticate(steady::time_point deadline);
  void rotate(std::size_t failed);
  std::size_t current() const;

  struct Sent;
  void answered(const std::shared_ptr<Sent>& sent);
  void finish(const std::shared_ptr<Sent>& sent, Result<pb::TxnResponse> outcome);
  void read_answers();
  void retry_sent();

  void keep_alive();
  void lose_lease(std::int64_t id, const std::string& why);
  void read_watches(std::shared_ptr<grpc::ClientContext> context,
                    std::shared_ptr<grpc::ClientReaderWriter<pb::WatchRequest, pb::WatchResponse>> stream);
  void drop_watches();
  Result<std::int64_t> open_watch(const std::string& key, const std::string& range_end, bool deletions_only,
                                  std::shared_ptr<Signal> signal, std::shared_ptr<std::promise<std::int64_t>> created);

  Config config_;
  Events& events_;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  std::vector<std::unique_ptr<pb::KV::Stub>> kv_;
  std::vector<std::unique_ptr<pb::Lease::Stub>> leases_;
  std::vector<std::unique_ptr<pb::Watch::Stub>> watch_;
  std::vector<std::unique_ptr<pb::Auth::Stub>> auth_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::size_t current_ = 0;              // guarded by mu_: the member calls go to first
  std::string token_;                    // guarded by mu_: the auth token, empty without auth
  std::int64_t lease_id_ = 0;            // guarded by mu_: 0 = none live
  std::int64_t lease_ttl_ = 0;           // guarded by mu_: seconds, as granted, at most Config::ttl
  steady::time_point lease_until_{};     // guarded by mu_: local deadline of lease_id_
  std::stop_source lease_dropped_;       // guarded by mu_
  // Leases this client gave up (lose_lease) that the cluster may still keep:
  // a new leader renews every lease's TTL, so under repeated elections a
  // given-up lease, and the keys on it, can outlive it for as long as they
  // go on. The keeper revokes them (revoke_given_up).
  std::vector<std::int64_t> given_up_;   // guarded by mu_
  std::vector<std::shared_ptr<Signal>> waiters_;  // guarded by mu_
  bool stopping_ = false;                // guarded by mu_
  std::mutex grant_mu_;                  // one lease grant at a time
  std::thread keeper_;

  // txn_async: the completion queue its answers come on (read by
  // answers_reader_, a thread of the session's, so that no thread of
  // gRPC's outlives the client), what is in flight, how many of them each
  // thread sent, and those sent again synchronously by the retry thread.
  grpc::CompletionQueue answers_;
  std::mutex sent_mu_;
  std::condition_variable sent_cv_;
  std::map<const Sent*, std::shared_ptr<Sent>> in_flight_;  // sent_mu_
  std::map<std::thread::id, int> unanswered_;   // sent_mu_: sending thread -> count
  std::deque<std::shared_ptr<Sent>> to_retry_;  // sent_mu_
  bool async_ended_ = false;                    // sent_mu_
  std::thread answers_reader_;                  // sent_mu_: started with the first txn_async
  std::thread retrier_;                         // sent_mu_: started with the first retry

  std::mutex watch_mu_;  // the watch stream: opening, writing, the watchers
  std::shared_ptr<grpc::ClientContext> watch_context_;
  std::shared_ptr<grpc::ClientReaderWriter<pb::WatchRequest, pb::WatchResponse>> watch_stream_;
  std::map<std::int64_t, std::shared_ptr<Signal>> watchers_;
  std::map<std::int64_t, std::shared_ptr<std::promise<std::int64_t>>> creations_;  // each watch's start revision, until it is made
  std::int64_t next_watch_id_ = 1;
  // The watch streams' readers: at most one runs; one whose stream ended
  // is joined when the next stream opens (or at close), so a stream that
  // breaks again and again leaves no thread behind.
  struct WatchReader {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> ended = std::make_shared<std::atomic<bool>>(false);
  };
  std::vector<WatchReader> watch_readers_;
};

// The local deadline of a lease whose grant or keepalive was sent at `sent`
// and answered with `ttl_said` seconds (the lease was asked for with
// `ttl_asked` seconds): the cluster restarts the TTL when it receives the
// request, later than `sent`; less a margin for clock drift. A member's
// word is trusted up to what was asked and no further (a TTL beyond it, from
// a faulty member, would keep locks valid here after the lease expired
// there); 0 or less is a lease already gone (`sent`).
steady::time_point lease_deadline_after(steady::time_point sent, std::int64_t ttl_said, std::int64_t ttl_asked);

// Notified by one watch (Session::watch), which it cancels when it goes.
class WatchWaiter final : public Waiter {
 public:
  WatchWaiter(Session& session, std::int64_t id, std::shared_ptr<Signal> signal)
      : session_(session), id_(id), signal_(std::move(signal)) {}
  ~WatchWaiter() override { session_.unwatch(id_); }
  WatchWaiter(const WatchWaiter&) = delete;
  WatchWaiter& operator=(const WatchWaiter&) = delete;
  Status wait_until(steady::time_point until) override {
    signal_->wait_until(until);
    return {};
  }
  bool on_notify(std::function<void()> notify) override {
    signal_->call_back(std::move(notify));
    return true;
  }

 private:
  Session& session_;
  std::int64_t id_;
  std::shared_ptr<Signal> signal_;
};

}  // namespace dlock::detail::etcd
