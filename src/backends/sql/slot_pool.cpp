#include "backends/sql/slot_pool.h"

#include <algorithm>
#include <atomic>

namespace dlock::detail::sql {
namespace {

std::vector<Stmt> statements_of(std::span<const Call> calls) {
  std::vector<Stmt> out;
  out.reserve(calls.size());
  for (const Call& call : calls) out.push_back(call.statement);
  return out;
}

// A batch this thread sent without waiting: on which pool's slot (and
// which connection of that slot), as the how-many-th send there.
struct Owed {
  std::uint64_t pool;
  std::size_t slot;
  std::uint64_t generation;
  std::uint64_t sent;
};
thread_local std::vector<Owed> owed_by_this_thread;

std::atomic<std::uint64_t> next_pool_id{1};

}  // namespace

// --- PooledConnection ------------------------------------------------------

void PooledConnection::answer_oldest(bool& failed) {
  auto oldest = std::move(unanswered_.front());
  unanswered_.erase(unanswered_.begin());
  if (!oldest()) failed = true;
  ++answered_;
}

void PooledConnection::sent_unanswered(std::function<bool()> read) {
  ++sent_;
  unanswered_.push_back(std::move(read));
}

void PooledConnection::read_unanswered() {
  bool failed = false;
  while (!unanswered_.empty()) answer_oldest(failed);
  if (failed) end_failed_transaction();
}

Result<std::vector<Rows>> PooledConnection::round_trip(std::span<const Call> calls, std::span<const Stmt> statements) {
  if (Status s = write(calls); !s) return s;
  auto out = read(statements);
  if (!out) end_failed_transaction();
  return out;
}

Result<std::vector<Rows>> PooledConnection::run(std::span<const Call> calls) {
  const auto statements = statements_of(calls);
  if (unanswered_.empty() || !pipelines()) {
    read_unanswered();
    return round_trip(calls, statements);
  }
  // Ours goes out at once behind the unanswered ones: one round trip for
  // all; their results come first.
  if (Status s = write(calls); !s) {
    read_unanswered();
    return s;
  }
  bool earlier_failed = false;
  while (!unanswered_.empty()) answer_oldest(earlier_failed);
  auto out = read(statements);
  if (!out && earlier_failed && failed_in_aborted_transaction()) {
    // An earlier batch failed inside its transaction, so ours ran into
    // that abort and changed nothing: once more, on a clean connection.
    end_failed_transaction();
    return round_trip(calls, statements);
  }
  if (!out || earlier_failed) end_failed_transaction();
  return out;
}

void PooledConnection::send(std::span<const Call> calls, Answer answer) {
  if (!pipelines()) read_unanswered();
  if (Status s = write(calls); !s) {
    read_unanswered();
    answer(std::move(s));
    return;
  }
  sent_unanswered([this, statements = statements_of(calls), answer = std::move(answer)] {
    auto out = read(statements);
    const bool ok = out.ok();
    answer(std::move(out));
    return ok;
  });
}

// --- SlotPool --------------------------------------------------------------

SlotPool::SlotPool(std::string backend, Open open, int size, Events& events)
    : id_(next_pool_id.fetch_add(1)),
      backend_(std::move(backend)),
      open_(std::move(open)),
      events_(events),
      slots_(static_cast<std::size_t>(size)) {}

Result<Pool::Lease> SlotPool::take(std::string_view step, steady::time_point deadline) {
  std::size_t index;
  {
    std::unique_lock lk(mu_);
    auto& owed = owed_by_this_thread;
    const auto mine = std::find_if(owed.begin(), owed.end(), [&](const Owed& o) { return o.pool == id_; });
    // Whether this thread's batch sent without waiting is still unread.
    auto waits_for_answer = [&] {
      if (mine == owed.end()) return false;
      const Slot& s = slots_[mine->slot];
      return s.generation == mine->generation && s.answered < mine->sent;
    };
    auto pick = [&] {
      if (waits_for_answer()) return slots_[mine->slot].busy ? slots_.size() : mine->slot;
      for (std::size_t i = 0; i < slots_.size(); ++i)
        if (!slots_[i].busy) return i;
      return slots_.size();
    };
    if (!free_.wait_until(lk, deadline, [&] { return pick() < slots_.size(); }))
      return Status(errc::unavailable, backend_ + " backend: " + std::string(step) +
                                           ": every connection of this client stayed busy for longer than "
                                           "ClientOptions::op_timeout (see the url's pool option)");
    index = pick();
    if (mine != owed.end() && !waits_for_answer()) owed.erase(mine);
    slots_[index].busy = true;
  }
  Slot& slot = slots_[index];  // ours until given back; its conn changes under mu_ (give_back reads them all)
  if (!slot.conn || slot.conn->broken()) {
    const bool was_open = slot.conn != nullptr;
    std::unique_ptr<PooledConnection> old;
    {
      std::lock_guard lk(mu_);
      old = std::move(slot.conn);
      ++slot.generation;
      slot.sent = slot.answered = 0;
    }
    if (old) old->read_unanswered();  // each fails at once: the connection did
    old.reset();                      // closed outside the lock
    auto fresh = open_(deadline);
    if (!fresh) {
      release(index);
      return fresh.status();
    }
    {
      std::lock_guard lk(mu_);
      slot.conn = std::move(*fresh);
    }
    if (was_open) events_.connection_restored(backend_ + " connection");
  }
  slot.conn->set_deadline(deadline);
  return Lease(slot.conn.get(), Give{this});
}

void SlotPool::flush(steady::time_point deadline) {
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    {
      std::unique_lock lk(mu_);
      if (!free_.wait_until(lk, deadline, [&] { return !slots_[i].busy; }) || !slots_[i].conn) continue;
      slots_[i].busy = true;
    }
    slots_[i].conn->set_deadline(deadline);
    slots_[i].conn->read_unanswered();
    release(i);
  }
}

void SlotPool::give_back(Connection* c) noexcept {
  std::size_t index = slots_.size();
  {
    // Other slots' connections may be replaced meanwhile: look under mu_.
    std::lock_guard lk(mu_);
    for (std::size_t i = 0; i < slots_.size() && index == slots_.size(); ++i)
      if (slots_[i].conn.get() == c) index = i;
  }
  if (index == slots_.size()) return;
  // Ours until released: only this caller touches it.
  if (slots_[index].conn->broken()) events_.connection_lost(backend_ + " connection");
  release(index);
}

void SlotPool::release(std::size_t index) {
  {
    std::lock_guard lk(mu_);
    Slot& slot = slots_[index];
    if (slot.conn) {
      if (slot.conn->sent_count() > slot.sent) {
        // This thread sent a batch on it without waiting: until that one's
        // results are read, its next call goes here too.
        auto& owed = owed_by_this_thread;
        std::erase_if(owed, [&](const Owed& o) { return o.pool == id_; });
        owed.push_back({id_, index, slot.generation, slot.conn->sent_count()});
      }
      slot.sent = slot.conn->sent_count();
      slot.answered = slot.conn->answered_count();
    }
    slot.busy = false;
  }
  // Every waiter looks: one may wait for this slot only.
  free_.notify_all();
}

}  // namespace dlock::detail::sql
