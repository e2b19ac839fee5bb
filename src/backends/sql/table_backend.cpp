// The lock table recipe (see dialect.cpp for the tables).
//
// Acquire: one transaction in two batches. The first locks the lock's
// fence row (so everything done to one lock is ordered: no two acquirers
// both see it free, and no release misses a waiter that queued meanwhile)
// and reads its holders and its queue; the recipe decides here; the second
// either writes the hold with the next fencing token and leaves the queue,
// or (busy, and the caller waits) queues or refreshes the caller's entry.
// Expired holds are taken over by the next acquirer: no cleanup job.
//
// Release: one batch — lock the fence row, delete our own hold (owner and
// token: after our lease ran out the row may be a successor's), read the
// first live waiters, commit — then wake those waiters (or the database
// did, on commit). One wake-up per handoff: the head, or for a read-write
// lock the first few (readers at the head may all go).
//
// Queue and bounded waits: a waiting thread's entry records when it queued.
// A caller may take a free lock ahead of queued waiters (no handoff delay)
// unless one of them has waited longer than max_barging_wait (0 = fair:
// any); from then on the lock goes in queue order until no one starves.
// Readers are held back only by writers queued before them; a semaphore's
// caller only while the starving waiters before it use up the free permits.
// An election's candidates always go in order, as on zk://, and a leader's
// release hands the leadership to the next in line in its own transaction.
//
// Without wake-ups (MySQL has no NOTIFY) a waiter polls, and each attempt
// refreshes its queue entry, so the order above still holds; the pause
// before its next attempt depends on its place in the queue (poll_pause).
//
// Where the database has no RETURNING, the rows a statement would return
// are read by a stand-in statement in the same batch (run, Dialect::stand_in).
//
// Clocks: expires_at is the store's clock (the database server's, or the
// host's for SQLite); every statement reads it there and returns times
// left, so this process never compares its clock with the store's. A
// grant's valid_until counts from when the request was sent.
#include "backends/sql/table_backend.h"

#include "backends/sql/barrier.h"
#include "backends/sql/counters.h"

#include "core/backoff.h"
#include "core/owner_id.h"
#include "core/pending_replies.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <climits>
#include <optional>
#include <span>
#include <utility>

namespace dlock::detail::sql {
namespace {

using std::chrono::milliseconds;

std::int64_t ms(milliseconds d) { return d.count(); }

// A lock's kind column and a hold's mode column for a request.
struct Place {
  std::string_view kind;
  std::string_view mode;  // "x", "w" or "r"
};

Place place_of(LockKind kind) {
  switch (kind) {
    case LockKind::mutex: return {"mutex", "x"};
    case LockKind::write: return {"rw", "w"};
    case LockKind::read: return {"rw", "r"};
    case LockKind::leader: return {"leader", "x"};
    case LockKind::permit: return {"permit", "x"};
    case LockKind::member: break;
  }
  return {"member", "x"};
}

// LockInfo::kind for a row.
std::string info_kind(std::string_view kind, std::string_view mode) {
  if (kind == "rw") return mode == "w" ? "write" : "read";
  return std::string(kind);
}

// What the holders and the queue say about `request`.
struct Decision {
  bool grant = false;
  milliseconds retry_in = milliseconds::max();  // Busy: when a holder's lease ends, if known
};

Decision decide(const LockRequest& request, const std::vector<Row>& holders, const std::vector<Row>& queue) {
  const Place place = place_of(request.kind);
  const bool reader = place.mode == "r";
  // Holds that stand in our way (our own rows never do: a writer may read).
  std::size_t in_way = 0;
  Decision d;
  auto note = [&](const Row& h) {
    ++in_way;
    d.retry_in = std::min(d.retry_in, milliseconds(h.left));
  };
  for (const Row& h : holders) {
    // Ours already: handed over by a release while we were not looking
    // (an election's), or a hold core gave up on. Take it (again).
    if (request.kind != LockKind::permit && h.owner == request.owner && h.mode == place.mode) {
      d.grant = true;
      return d;
    }
    if (request.kind == LockKind::permit) {
      note(h);
    } else if (h.owner != request.owner && (!reader || h.mode == "w")) {
      note(h);
    }
  }
  const std::size_t room =
      request.kind == LockKind::permit ? static_cast<std::size_t>(std::max(request.permits, 0)) : 1;
  if (in_way >= room) return d;
  const std::size_t free = request.kind == LockKind::permit ? room - in_way : 1;

  // Waiters queued before us (all of them if we are not queued) that we let
  // go first: starving ones, or every one when fair.
  const std::int64_t bound = request.fair || request.kind == LockKind::leader ? 0 : ms(request.max_barging_wait);
  std::size_t first = 0;
  for (const Row& w : queue) {
    if (w.owner == request.owner) break;
    const bool blocks = !reader || w.mode == "w";
    if (blocks && w.a >= bound) {
      ++first;
      d.retry_in = std::min(d.retry_in, milliseconds(w.left));
    }
  }
  d.grant = first < free;
  return d;
}

// Where `request`'s owner stands in the queue: the waiters before it that
// it lets go first (for a reader: the writers), how long the first of them
// and it have waited, and how long its entry has left to live (0: it has
// none).
struct Line {
  std::int64_t ahead = 0;
  std::int64_t first_waited = 0;
  std::int64_t waited = 0;
  std::int64_t left = 0;
};

Line line_of(const LockRequest& request, const std::vector<Row>& queue) {
  const bool reader = place_of(request.kind).mode == "r";
  Line line;
  for (const Row& w : queue) {
    if (w.owner == request.owner) {
      line.waited = w.a;
      line.left = w.left;
      break;
    }
    if (reader && w.mode != "w") continue;
    if (line.ahead++ == 0) line.first_waited = w.a;
  }
  return line;
}

Status unexpected(std::string_view step) {
  return Status(errc::internal, "sql backend: " + std::string(step) + ": unexpected reply shape");
}

class TableBackend;

// A thread waiting for one lock: its slot in the client's mailbox. Leaving
// takes its queue entry out if an attempt put one there, and drops a hold
// handed to it that it did not take.
class TableWaiter final : public Waiter {
 public:
  TableWaiter(TableBackend& backend, WakeTarget target, std::string_view mode, std::shared_ptr<Mailbox::Slot> slot,
              std::string address = {})
      : backend_(backend), target_(std::move(target)), mode_(mode), slot_(std::move(slot)),
        address_(std::move(address)) {}
  ~TableWaiter() override;

  Status wait_until(steady::time_point until) override {
    std::unique_lock lk(slot_->mu);
    slot_->cv.wait_until(lk, until, [&] { return slot_->woken; });
    woken_ = std::exchange(slot_->woken, false);
    return {};
  }

  std::optional<Grant> take_grant() override;
  const WakeTarget& target() const noexcept { return target_; }
  // The wake-up address its queue entry was written with (watchers).
  const std::string& address() const noexcept { return address_; }

 private:
  TableBackend& backend_;
  WakeTarget target_;
  std::string_view mode_;
  std::shared_ptr<Mailbox::Slot> slot_;
  std::string address_;
  bool woken_ = false;  // the last wait ended with a wake-up
  bool taken_ = false;  // take_grant() returned a hold handed to us
};

class TableBackend final : public Backend, public LockDriver, public CountRows {
 public:
  TableBackend(std::shared_ptr<const Dialect> dialect, std::shared_ptr<Mailbox> mailbox, TableConfig config)
      : dialect_(std::move(dialect)), mailbox_(std::move(mailbox)), config_(std::move(config)) {}

  void use(Parts parts) {
    pool_ = std::move(parts.pool);
    wakeups_ = std::move(parts.wakeups);
  }

  // The wake-ups' receiver delivers into the mailbox until it stops: stop
  // it before the rest goes.
  ~TableBackend() override { wakeups_.reset(); }

  Status validate_name(std::string_view) const override { return {}; }
  bool supports_fair() const override { return true; }
  // A caller that may wait enters the mailbox before its first attempt, so
  // that attempt queues it if the lock is taken (no second attempt to
  // queue, and no release in between to miss).
  bool waits_in_queue() const override { return true; }
  bool supports_shared() const override { return true; }
  bool supports_downgrade() const override { return true; }
  bool supports_election() const override { return true; }
  bool supports_permits() const override { return true; }
  LockDriver& locks() override { return *this; }
  CounterDriver* counters() override { return counters_.get(); }
  LatchDriver* latches() override { return latches_.get(); }
  BarrierDriver* barriers() override { return barriers_.get(); }

  Status ping() override {
    auto conn = connection("ping");
    if (!conn) return conn.status();
    const Call calls[] = {{Stmt::ping}};
    auto out = run(**conn, calls);
    return out ? Status{} : out.status();
  }

  Result<Attempt> try_acquire(const LockRequest& request) override {
    const auto sent = steady::now();
    const std::string step = "acquiring " + std::string(kind_name(request.kind)) + " '" + request.name + "'";
    if (request.kind == LockKind::member) return Status(errc::unsupported, step + ": no barriers on this backend");
    const Place place = place_of(request.kind);
    const std::int64_t permits = request.kind == LockKind::permit ? request.permits : 0;
    auto conn = connection(step);
    if (!conn) return conn.status();
    const WakeTarget target{request.owner, std::string(place.kind), request.name};
    auto slot = mailbox_->find(target);

    // A queued waiter's poll reads first, without locking: while the lock is
    // visibly not its to take and its entry is fresh, that is the whole
    // attempt, and the fence row stays free for the holder's release and
    // the first in line. The first two in line skip the read: their next
    // attempt is likely the handoff, which the read would only delay.
    if (slot && !wakeups_ && slot->is_queued() && !slot->is_near_front()) {
      const Call peek[] = {{Stmt::holders, {request.name, place.kind}}, {Stmt::waiters, {request.name, place.kind}}};
      auto seen = run(**conn, peek);
      if (!seen) return seen.status();
      const std::vector<Row> queue = live_rows((*seen)[1]);
      const Decision d = decide(request, live_rows((*seen)[0]), queue);
      const Line line = line_of(request, queue);
      const std::int64_t spare = line.left - ms(config_.waiter_ttl) / 2;
      if (!d.grant && spare > 0) {
        slot->set_queued(true, line.ahead <= 1);
        // The entry was not refreshed: the next attempt comes while it
        // still has half its time to live (which covers that attempt's own
        // delays), however long the pause would be.
        return busy(request, d, line, milliseconds(spare));
      }
    }

    const Call look[] = {{Stmt::begin},
                         {Stmt::lock_fence, {request.name, place.kind, permits}},
                         {Stmt::holders, {request.name, place.kind}},
                         {Stmt::waiters, {request.name, place.kind}}};
    auto seen = run(**conn, look);
    if (!seen) return seen.status();
    const Rows& fence = (*seen)[1];
    if (fence.size() != 1) return abandon(**conn, unexpected(step));
    const std::vector<Row> holders = live_rows((*seen)[2]);
    const std::vector<Row> queue = live_rows((*seen)[3]);

    const std::int64_t stored_permits = fence.integer(0, 1);
    if (permits > 0 && stored_permits > 0 && stored_permits != permits && !holders.empty())
      return abandon(**conn, Status(errc::invalid_argument,
                                    "semaphore '" + request.name + "': declared here with " + std::to_string(permits) +
                                        " permits, but the store has it with " + std::to_string(stored_permits) +
                                        " (every handle of one name must declare the same count)"));

    const Decision d = decide(request, holders, queue);
    if (!d.grant) {
      const std::string wake = wakeups_ ? wakeups_->address() : std::string();  // none: the waiter polls
      std::vector<Call> writes;
      if (slot)
        writes.push_back({Stmt::enqueue, {request.name, place.kind, request.owner, place.mode,
                                         ms(config_.waiter_ttl), wake, ms(request.lease), request.data,
                                         config_.holder_info}});
      writes.push_back({Stmt::commit});
      auto done = run(**conn, writes);
      if (!done) return done.status();
      if (!slot) return Attempt(busy_until(d));
      const Line line = line_of(request, queue);
      slot->set_queued(true, line.ahead <= 1);
      return busy(request, d, line);
    }

    const std::int64_t token = fence.integer(0, 0) + 1;
    const Call take[] = {
        {Stmt::drop_expired, {request.name, place.kind}},
        {Stmt::bump_token, {request.name, place.kind, permits}},
        {Stmt::insert_hold,
         {request.name, place.kind, request.owner, place.mode, token, ms(request.lease), request.data,
          config_.holder_info}},
        {Stmt::dequeue, {request.name, place.kind, request.owner}},
        {Stmt::drop_dead_waiters, {request.name, place.kind}},
        {Stmt::commit}};
    auto done = run(**conn, take);
    if (!done) return done.status();
    if (slot) slot->set_granted();
    Grant grant;
    grant.token = static_cast<std::uint64_t>(token);
    grant.valid_until = sent + request.lease;
    return Attempt(std::move(grant));
  }

  std::unique_ptr<Waiter> watch(const LockRequest& request) override {
    WakeTarget target{request.owner, std::string(place_of(request.kind).kind), request.name};
    auto slot = mailbox_->enter(target);
    return std::make_unique<TableWaiter>(*this, std::move(target), place_of(request.kind).mode, std::move(slot));
  }

  Status release(const LockRequest& request, Grant& grant) override {
    const Place place = place_of(request.kind);
    const Call change[] = {release_call(request, place, grant)};
    auto freed = free_and_wake("releasing " + std::string(kind_name(request.kind)) + " '" + request.name + "'",
                               request.name, place, change);
    if (!freed) return freed.status();
    return released(*freed, request.name);
  }

  // Where the database wakes the heads itself (or nobody does: MySQL
  // polls), the release's rows are only its outcome: the batch is sent and
  // its answer read later, on the same connection, before anything sent
  // after it there (sql::SlotPool keeps the thread on that connection).
  void release_async(const LockRequest& request, Grant& grant, std::function<void(Status)> done) override {
    if (wakeups_ && !dialect_->database_wakes_heads()) return done(release(request, grant));
    const std::string step = "releasing " + std::string(kind_name(request.kind)) + " '" + request.name + "'";
    auto conn = connection(step);
    if (!conn) return done(conn.status());
    if (!(*conn)->sends_without_waiting()) {
      conn->reset();
      return done(release(request, grant));
    }
    const Place place = place_of(request.kind);
    const Call change[] = {release_call(request, place, grant)};
    std::size_t heads_at = 0;
    const auto calls = freeing(request.name, place, change, heads_at);
    Expanded batch = expand(calls);
    const std::vector<Call> sent = std::move(batch.sent);  // written by send(): its views need not outlive it
    (*conn)->send(sent, [batch = std::move(batch), name = request.name,
                         done = unanswered_.track(std::move(done))](Result<std::vector<Rows>> out) {
      if (!out) return done(out.status());
      done(released(batch.collect(std::move(*out))[2], name));
    });
  }

  void flush(steady::time_point deadline) override {
    pool_->flush(deadline);
    unanswered_.close(deadline);
  }

  void renew(std::span<Renewal> batch) override {
    const auto sent = steady::now();
    auto conn = connection("renewing leases");
    if (!conn) {
      for (auto& item : batch) item.outcome = conn.status();
      return;
    }
    std::vector<Call> calls;
    calls.reserve(batch.size() + 2);
    calls.push_back({Stmt::begin});
    for (const Renewal& item : batch) {
      const Place place = place_of(item.request->kind);
      calls.push_back({Stmt::extend,
                       {ms(item.request->lease), item.request->name, place.kind, item.request->owner, place.mode,
                        static_cast<std::int64_t>(item.grant->token)}});
    }
    calls.push_back({Stmt::commit});
    auto done = run(**conn, calls);
    for (std::size_t i = 0; i < batch.size(); ++i) {
      Renewal& item = batch[i];
      if (!done) {
        item.outcome = done.status();
      } else if ((*done)[i + 1].changed == 1) {
        item.grant->valid_until = sent + item.request->lease;
        item.outcome = {};
      } else {
        item.outcome = Status(errc::lock_lost, "renewing '" + item.request->name +
                                                   "': the lease had run out or another holder took the lock");
      }
    }
  }

  Status force_release(std::string_view name) override {
    const std::string step = "force-releasing '" + std::string(name) + "'";
    const Place place = place_of(LockKind::mutex);
    const Call change[] = {{Stmt::force_release, {name, place.kind}}};
    auto freed = free_and_wake(step, name, place, change);
    return freed ? Status{} : freed.status();
  }

  Result<std::vector<LockInfo>> list(std::string_view prefix) override {
    auto conn = connection("listing locks");
    if (!conn) return conn.status();
    const Call calls[] = {{Stmt::list, {prefix}}};
    auto out = run(**conn, calls);
    if (!out) return out.status();
    const Rows& rows = (*out)[0];
    std::vector<LockInfo> infos;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      LockInfo info;
      info.name = rows.text(i, 0);
      info.kind = info_kind(rows.text(i, 1), rows.text(i, 3));
      const std::string data(rows.text(i, 6));
      info.holder = (data.empty() ? "" : data + " ") + std::string(rows.text(i, 7)) + " owner " +
                    short_owner(rows.text(i, 2));
      info.token = static_cast<std::uint64_t>(rows.integer(i, 4));
      info.remaining = milliseconds(std::max<std::int64_t>(rows.integer(i, 5), 0));
      infos.push_back(std::move(info));
    }
    return infos;
  }

  Result<Holder> holder(std::string_view name, LockKind kind, bool) override {
    auto conn = connection("reading the leader of '" + std::string(name) + "'");
    if (!conn) return conn.status();
    const Call calls[] = {{Stmt::leader, {name, place_of(kind).kind}}};
    auto out = run(**conn, calls);
    if (!out) return out.status();
    Holder h;
    if (!(*out)[0].empty()) h.data = std::string((*out)[0].text(0, 0));
    return h;  // no change notification: the caller polls
  }

  // A waiter leaves: its queue entry goes, if an attempt put one there,
  // and so does a hold handed to it that it did not take (`handed`). The
  // next head is woken if the lock is free.
  void leave(const WakeTarget& target, Mailbox::Slot& slot, bool handed) {
    mailbox_->leave(target);
    if (!slot.is_queued() && !handed) return;
    if (target.kind == kind_latch || target.kind == kind_barrier) {
      // A watcher: nothing waits behind it.
      auto conn = connection("leaving the watchers of '" + target.name + "'");
      if (!conn) return;
      const Call calls[] = {{Stmt::dequeue, {target.name, target.kind, target.owner}}};
      (void)run(**conn, calls);
      return;
    }
    const Place place{target.kind, "x"};
    const Call changes[] = {{Stmt::drop_own, {target.name, target.kind, target.owner}},
                            {Stmt::dequeue, {target.name, target.kind, target.owner}}};
    (void)free_and_wake("leaving the queue of '" + target.name + "'", target.name, place,
                        std::span(changes).subspan(handed ? 0 : 1));
  }

  // The caller's live hold of `target`, if a release handed it over.
  Result<std::optional<Grant>> handed_hold(const WakeTarget& target, std::string_view mode) {
    const auto sent = steady::now();
    auto conn = connection("taking the leadership of '" + target.name + "' handed over");
    if (!conn) return conn.status();
    const Call calls[] = {{Stmt::own_hold, {target.name, target.kind, target.owner, mode}}};
    auto out = run(**conn, calls);
    if (!out) return out.status();
    const Rows& rows = (*out)[0];
    if (rows.empty()) return std::optional<Grant>();
    Grant grant;
    grant.token = static_cast<std::uint64_t>(rows.integer(0, 0));
    grant.valid_until = sent + milliseconds(rows.integer(0, 1));
    return std::optional<Grant>(std::move(grant));
  }

 private:
  // Busy until the holder's lease ends (if known).
  static Busy busy_until(const Decision& d) {
    Busy b;
    if (d.retry_in != milliseconds::max()) b.holder_expires = steady::now() + d.retry_in;
    return b;
  }

  // A queued waiter's busy attempt: it polls again after poll_pause if no
  // wake-up will come, and in any case within `cap`.
  Attempt busy(const LockRequest& request, const Decision& d, const Line& line,
               std::optional<milliseconds> cap = std::nullopt) const {
    Busy b = busy_until(d);
    if (!wakeups_) b.holder_expires = std::min(b.holder_expires, steady::now() + poll_pause(request, line));
    if (cap) b.holder_expires = std::min(b.holder_expires, steady::now() + *cap);
    return Attempt(b);
  }

  // Without wake-ups a waiter polls. The first in line polls often: its
  // next attempt is the handoff; its pause grows with its wait (1/16 of
  // it, from 1 ms up to max_backoff), so a long-held lock is not polled
  // hard. A waiter further back must be awake again by the time it is
  // first, or the lock stays free while it sleeps and the others let it go
  // first: entries went in about one handoff apart, so it sleeps through
  // at most half of the handoffs still before it (at least 1 ms a place,
  // so that waiters that came in together do not all poll at once).
  milliseconds poll_pause(const LockRequest& request, const Line& line) const {
    const std::int64_t turns =
        request.kind == LockKind::permit ? line.ahead / std::max<std::int64_t>(request.permits, 1) : line.ahead;
    std::int64_t longest = line.waited / 16;
    if (turns > 0) {
      const std::int64_t per_handoff = std::max<std::int64_t>(line.first_waited - line.waited, 0) / line.ahead;
      longest = std::max(per_handoff * turns / 2, turns);
    }
    const std::int64_t cap = std::max<std::int64_t>(ms(config_.max_backoff), 1);
    longest = std::clamp<std::int64_t>(longest, 1, cap);
    Backoff pause{milliseconds(longest), milliseconds(longest)};
    return std::chrono::ceil<milliseconds>(pause.next());
  }

  Status under_count(const std::string& step, const std::string& name, std::string_view kind, std::int64_t initial,
                     std::int64_t width, steady::time_point deadline, const Decide& decide,
                     const Then& then) override {
    auto conn = pool_->take(step, deadline);
    if (!conn) return conn.status();
    const Call look[] = {{Stmt::begin}, {Stmt::lock_count, {name, kind, initial, width}}};
    auto seen = run(**conn, look);
    if (!seen) return seen.status();
    if ((*seen)[1].size() != 1) return abandon(**conn, unexpected(step));
    std::vector<Call> writes;
    const Rows& count = (*seen)[1];
    if (Status s = decide(count.integer(0, 0), static_cast<int>(count.integer(0, 1)), writes); !s)
      return abandon(**conn, s);
    if (then) {
      std::vector<Row> rows;
      if (!writes.empty()) {
        auto first = run(**conn, writes);
        if (!first) return first.status();
        rows = live_rows(first->back());
      }
      writes.clear();
      then(rows, writes);
    }
    const std::size_t heads_at = writes.size();
    writes.push_back({Stmt::commit});
    auto out = run(**conn, writes);
    if (!out) return out.status();
    conn->reset();
    for (std::size_t i = 0; i < heads_at; ++i)
      if (writes[i].statement == Stmt::heads) wake((*out)[i], name, kind);
    return {};
  }

  // Wakes the waiters a `heads` statement returned, unless the database
  // did. On a read-write lock, the head and the readers right after it.
  void wake(const Rows& woken, std::string_view name, std::string_view kind) {
    if (!wakeups_ || dialect_->database_wakes_heads()) return;
    for (std::size_t i = 0; i < woken.size(); ++i) {
      if (kind == "rw" && i > 0 && (woken.text(i, 1) == "w" || woken.text(0, 1) == "w")) break;
      wakeups_->wake(woken.text(i, 2), WakeTarget{std::string(woken.text(i, 0)), std::string(kind), std::string(name)});
    }
  }

  std::unique_ptr<Waiter> watcher(const std::string& name, std::string_view kind,
                                  std::vector<Call>& writes) override {
    if (!wakeups_) return nullptr;
    auto id = random_client_id();
    if (!id) return nullptr;
    WakeTarget target{*id, std::string(kind), name};
    auto slot = mailbox_->enter(target);
    slot->set_queued(true);
    auto waiter = std::make_unique<TableWaiter>(*this, std::move(target), "x", std::move(slot), wakeups_->address());
    // The call views the waiter's own copies of its id and address: they
    // live on the heap.
    writes.push_back({Stmt::enqueue, {name, kind, std::string_view(waiter->target().owner), "x",
                                      ms(std::chrono::hours(1)), std::string_view(waiter->address()), std::int64_t{0},
                                      "", ""}});
    return waiter;
  }

  Result<std::vector<Rows>> run(std::string_view step, steady::time_point deadline,
                                std::span<const Call> calls) override {
    auto conn = pool_->take(step, deadline);
    if (!conn) return conn.status();
    return run(**conn, calls);
  }

  const std::string& holder_info() const override { return config_.holder_info; }

  Result<Pool::Lease> connection(std::string_view step) {
    return pool_->take(step, steady::now() + config_.op_timeout);
  }

  // Ends a transaction a decision found nothing to write in, with `why`.
  Status abandon(Connection& conn, Status why) {
    const Call end[] = {{Stmt::rollback}};
    (void)conn.run(end);
    return why;
  }

  // The release of `grant`'s hold: our own row only (owner and token).
  static Call release_call(const LockRequest& request, const Place& place, const Grant& grant) {
    return {Stmt::release,
            {request.name, place.kind, request.owner, place.mode, static_cast<std::int64_t>(grant.token)}};
  }

  // What a release's first change returned, as its outcome.
  static Status released(const Rows& freed, const std::string& name) {
    if (freed.empty())
      return Status(errc::lock_lost, "unlock '" + name +
                                         "': no longer ours (the lease ran out and another holder took it, "
                                         "or it was force-released)");
    if (freed.integer(0, 0) <= 0)
      return Status(errc::lock_lost, "unlock '" + name + "': the lease had run out before unlock");
    return {};
  }

  // The batch that runs `changes` (a release, a force-release, a waiter
  // leaving) under the lock's fence row and reads the waiters at the head
  // of its queue (their rows at `heads_at`). An election's free lock is
  // handed to the first of them in the same transaction: the next in line
  // leads without a moment of no leader. The first change's rows are at 2.
  static std::vector<Call> freeing(std::string_view name, const Place& place, std::span<const Call> changes,
                                   std::size_t& heads_at) {
    const bool hand_over = place.kind == "leader";
    // A read-write lock's head may be several readers; otherwise one.
    const std::int64_t heads = place.kind == "rw" ? 8 : 1;
    std::vector<Call> calls = {{Stmt::begin}, {Stmt::lock_fence, {name, place.kind, std::int64_t{0}}}};
    calls.insert(calls.end(), changes.begin(), changes.end());
    if (hand_over)
      calls.insert(calls.end(), {{Stmt::drop_expired, {name, place.kind}},
                                 {Stmt::hand_over, {name, place.kind}},
                                 {Stmt::bump_handed, {name, place.kind}}});
    heads_at = calls.size();
    calls.push_back({Stmt::heads, {name, place.kind, heads}});
    if (hand_over) calls.push_back({Stmt::dequeue_holders, {name, place.kind}});
    calls.push_back({Stmt::commit});
    return calls;
  }

  // Runs freeing(changes) and wakes the heads. Returns what the first
  // change returned.
  Result<Rows> free_and_wake(std::string_view step, std::string_view name, const Place& place,
                             std::span<const Call> changes) {
    auto conn = connection(step);
    if (!conn) return conn.status();
    std::size_t heads_at = 0;
    const auto calls = freeing(name, place, changes, heads_at);
    auto out = run(**conn, calls);
    if (!out) return out.status();
    conn->reset();  // give the connection back before waking anyone
    wake((*out)[heads_at], name, place.kind);
    return std::move((*out)[2]);
  }

  // `calls` as sent where the database lacks RETURNING: a statement that
  // would return rows with it goes with the read that stands in for it
  // (Dialect::stand_in: same parameters, same transaction), whose rows are
  // returned for it; `changed` stays the statement's own.
  struct Expanded {
    std::vector<Call> sent;
    std::vector<std::size_t> at, read_at;  // where each call, and its stand-in, is in `sent`
    // One Rows per call, from the results of `sent`.
    std::vector<Rows> collect(std::vector<Rows> out) const {
      if (at.size() == out.size()) return out;
      std::vector<Rows> rows;
      rows.reserve(at.size());
      for (std::size_t i = 0; i < at.size(); ++i) {
        const std::int64_t changed = out[at[i]].changed;
        rows.push_back(std::move(out[read_at[i]]));
        rows.back().changed = changed;
      }
      return rows;
    }
  };
  Expanded expand(std::span<const Call> calls) const {
    Expanded e;
    for (const Call& call : calls) {
      const auto read = dialect_->stand_in(call.statement);
      if (read && read->before) e.sent.push_back({read->read, call.params});
      e.sent.push_back(call);
      e.at.push_back(e.sent.size() - 1);
      if (read && !read->before) e.sent.push_back({read->read, call.params});
      e.read_at.push_back(!read ? e.at.back() : read->before ? e.at.back() - 1 : e.at.back() + 1);
    }
    return e;
  }

  // Runs `calls` on `conn` (expanded).
  Result<std::vector<Rows>> run(Connection& conn, std::span<const Call> calls) const {
    Expanded e = expand(calls);
    auto out = conn.run(e.sent);
    if (!out) return out.status();
    return e.collect(std::move(*out));
  }

  std::unique_ptr<Pool> pool_;
  std::shared_ptr<const Dialect> dialect_;
  std::shared_ptr<Mailbox> mailbox_;
  std::shared_ptr<Wakeups> wakeups_;
  const TableConfig config_;
  PendingReplies unanswered_;  // releases sent without waiting
  // Counter, Latch and Barrier (counters.h, barrier.h), through CountRows.
  const std::unique_ptr<CounterDriver> counters_ = make_counters(*this);
  const std::unique_ptr<LatchDriver> latches_ = make_latches(*this);
  const std::unique_ptr<BarrierDriver> barriers_ = make_barriers(*this);
};

std::optional<Grant> TableWaiter::take_grant() {
  // Only an election's lock is handed over, and only with a wake-up.
  if (target_.kind != "leader" || !woken_) return std::nullopt;
  auto held = backend_.handed_hold(target_, mode_);
  if (!held || !*held) return std::nullopt;  // core's next attempt finds out
  taken_ = true;
  return std::move(**held);
}

// A leadership handed over and not taken is dropped — unless an attempt got
// it since (that hold is core's now).
TableWaiter::~TableWaiter() {
  backend_.leave(target_, *slot_, target_.kind == "leader" && !taken_ && !slot_->is_granted());
}

}  // namespace

Result<std::unique_ptr<Backend>> make_table_backend(std::shared_ptr<const Dialect> dialect,
                                                    std::shared_ptr<Mailbox> mailbox, TableConfig config,
                                                    const std::function<Result<Parts>(Events&)>& make_parts) {
  auto backend = std::make_unique<TableBackend>(std::move(dialect), std::move(mailbox), std::move(config));
  auto parts = make_parts(backend->events());
  if (!parts) return parts.status();
  backend->use(std::move(*parts));
  return std::unique_ptr<Backend>(std::move(backend));
}

std::string this_process() {
  std::array<char, HOST_NAME_MAX + 1> host{};
  if (::gethostname(host.data(), host.size()) != 0) host[0] = '\0';
  host.back() = '\0';
  return "host " + std::string(host.data()) + " pid " + std::to_string(::getpid());
}

}  // namespace dlock::detail::sql
