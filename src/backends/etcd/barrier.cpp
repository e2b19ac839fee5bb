#include "backends/etcd/barrier.h"

#include "backends/etcd/keys.h"
#include "backends/etcd/replies.h"

#include "core/owner_id.h"

namespace dlock::detail::etcd {

std::string Barriers::waiters(const std::string& name) const {
  return kind_prefix(session_.config(), "barrier", name) + "waiters/";
}

std::string Barriers::ready(const std::string& name) const {
  return kind_prefix(session_.config(), "barrier", name) + "ready";
}

Result<std::string> Barriers::join(const std::string& name, std::chrono::milliseconds /*lease: the client's*/,
                                   steady::time_point deadline) {
  const std::string step = "entering barrier '" + name + "'";
  auto member = random_uuid();
  if (!member) return member;
  auto lease = session_.lease(deadline, step);
  if (!lease) return lease.status();
  // A put whose answer is lost may still have been applied: that key counts
  // as a member until the client's lease ends.
  pb::TxnRequest t;
  auto* put = t.add_success()->mutable_request_put();
  put->set_key(waiters(name) + *member);
  put->set_lease(lease->id);
  auto made = session_.txn(t, deadline, step);
  if (!made) return made.status();
  return member;
}

Result<BarrierCheck> Barriers::entered(const std::string& name, const std::string& member, int parties, bool watch,
                                       steady::time_point deadline) {
  const std::string step = "waiting to enter barrier '" + name + "'";
  pb::TxnRequest t;
  *t.add_success()->mutable_request_range() = one_key(ready(name));
  auto* members = t.add_success()->mutable_request_range();
  members->set_key(waiters(name));
  members->set_range_end(range_end(waiters(name)));
  members->set_count_only(true);
  *t.add_success()->mutable_request_range() = one_key(waiters(name) + member);
  auto reply = session_.txn(t, deadline, step);
  if (!reply) return reply.status();
  auto read = read_ranges(*reply, 3, step);
  if (!read) return read.status();
  const pb::RangeResponse &is_open = *(*read)[0], &in = *(*read)[1], &ours = *(*read)[2];
  if (is_open.kvs_size() > 0) return BarrierCheck{true, nullptr};
  if (ours.kvs_size() == 0)
    return Status(errc::lock_lost, "barrier '" + name +
                                       "': our member key is gone (the client's lease ended while it waited to "
                                       "enter); this member is out: arrive again");
  if (in.count() < parties) {
    if (!watch) return BarrierCheck{false, nullptr};
    // `ready` put after our read wakes us.
    auto signal = std::make_shared<Signal>();
    auto id = session_.watch(
        ready(name), "", false, signal, reply->header().revision(),
        [&]() -> Result<bool> {
          auto now = session_.range(one_key(ready(name)), deadline, step);
          if (!now) return now.status();
          return now->kvs_size() > 0;
        },
        deadline);
    if (!id) return id.status();
    return BarrierCheck{false, std::make_unique<WatchWaiter>(session_, *id, std::move(signal))};
  }
  // Enough are in: open it for everyone (whoever puts it first, it is open).
  pb::TxnRequest open;
  open.add_success()->mutable_request_put()->set_key(ready(name));
  auto opened = session_.txn(open, deadline, step);
  if (!opened) return opened.status();
  return BarrierCheck{true, nullptr};
}

Result<BarrierCheck> Barriers::left(const std::string& name, const std::string& member, bool watch,
                                    steady::time_point deadline) {
  const std::string step = "leaving barrier '" + name + "'";
  const std::string ours = waiters(name) + member;
  pb::RangeRequest r;
  r.set_key(waiters(name));
  r.set_range_end(range_end(waiters(name)));
  r.set_sort_target(pb::RangeRequest::CREATE);
  r.set_sort_order(pb::RangeRequest::ASCEND);
  r.set_keys_only(true);
  auto listed = session_.range(r, deadline, step);
  if (!listed) return listed.status();
  const auto& kvs = listed->kvs();
  bool ours_in = false;
  for (const auto& kv : kvs) ours_in = ours_in || kv.key() == ours;
  if (kvs.empty() || (kvs.size() == 1 && ours_in)) {
    // Every other member has left: ours goes, and the barrier is shut
    // for the next round.
    pb::TxnRequest t;
    t.add_success()->mutable_request_delete_range()->set_key(ours);
    t.add_success()->mutable_request_delete_range()->set_key(ready(name));
    auto shut = session_.txn(t, deadline, step);
    if (!shut) return shut.status();
    return BarrierCheck{true, nullptr};
  }
  // The lowest stays until the highest has gone; the others go now and
  // wait for the lowest, which goes last.
  const bool lowest = kvs[0].key() == ours;
  const auto& watched = lowest ? kvs[kvs.size() - 1] : kvs[0];
  if (ours_in && !lowest) {
    pb::TxnRequest t;
    t.add_success()->mutable_request_delete_range()->set_key(ours);
    auto gone = session_.txn(t, deadline, step);
    if (!gone) return gone.status();
  }
  if (!watch) return BarrierCheck{false, nullptr};
  // Its deletion after the listing wakes us (one gone before it was not listed).
  auto signal = std::make_shared<Signal>();
  auto id = session_.watch(
      watched.key(), "", true, signal, listed->header().revision(),
      [&]() -> Result<bool> {
        auto now = session_.range(one_key(watched.key()), deadline, step);
        if (!now) return now.status();
        return now->kvs_size() == 0 || now->kvs(0).create_revision() != watched.create_revision();
      },
      deadline);
  if (!id) return id.status();
  return BarrierCheck{false, std::make_unique<WatchWaiter>(session_, *id, std::move(signal))};
}

void Barriers::remove(const std::string& name, const std::string& member, steady::time_point deadline) noexcept {
  try {
    pb::TxnRequest t;
    t.add_success()->mutable_request_delete_range()->set_key(waiters(name) + member);
    // Unanswered, the key goes with the client's lease.
    (void)session_.txn(t, deadline, "removing a member of barrier '" + name + "'");
  } catch (...) {
  }
}

}  // namespace dlock::detail::etcd
