#include "backends/sql/slot_pool.h"

#include <algorithm>
#include <thread>

namespace dlock::detail::sql {
namespace {

std::vector<Stmt> statements_of(std::span<const Call> calls) {
  std::vector<Stmt> out;
  out.reserve(calls.size());
  for (const Call& call : calls) out.push_back(call.statement);
  return out;
}

}  // namespace

// --- PooledConnection ------------------------------------------------------

void PooledConnection::answer_oldest(bool& failed) {
  auto oldest = std::move(unanswered_.front());
  unanswered_.erase(unanswered_.begin());
  if (!oldest()) failed = true;
  ++answered_;
  if (answered_hook_) answered_hook_();
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
  // One unanswered batch at a time: a batch written behind one that fails
  // inside its transaction fails too (PostgreSQL skips it), and one sent
  // without waiting could not be sent again, as run() does with its own.
  read_unanswered();
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
    : backend_(std::move(backend)), open_(std::move(open)), events_(events), slots_(static_cast<std::size_t>(size)) {}

Result<Pool::Lease> SlotPool::take(std::string_view step, steady::time_point deadline) {
  std::size_t index;
  {
    std::unique_lock lk(mu_);
    const auto me = std::this_thread::get_id();
    // This thread's batch sent without waiting, if its answer is unread.
    auto waits_for_answer = [&]() -> const Owed* {
      const auto it = owed_.find(me);
      return it != owed_.end() && unread(it->second) ? &it->second : nullptr;
    };
    auto pick = [&] {
      if (const Owed* mine = waits_for_answer()) return slots_[mine->slot].busy ? slots_.size() : mine->slot;
      for (std::size_t i = 0; i < slots_.size(); ++i)
        if (!slots_[i].busy) return i;
      return slots_.size();
    };
    if (!free_.wait_until(lk, deadline, [&] { return pick() < slots_.size(); }))
      return Status(errc::unavailable, backend_ + " backend: " + std::string(step) +
                                           ": every connection of this client stayed busy for longer than "
                                           "ClientOptions::op_timeout (see the url's pool option)");
    index = pick();
    if (!waits_for_answer()) owed_.erase(me);
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
    (*fresh)->on_answered([this, index, conn = fresh->get()] {
      {
        std::lock_guard lk(mu_);
        if (slots_[index].conn.get() != conn) return;
        slots_[index].answered = conn->answered_count();
      }
      free_.notify_all();
    });
    {
      std::lock_guard lk(mu_);
      slot.conn = std::move(*fresh);
    }
    if (was_open) events_.connection_restored(backend_ + " connection");
  }
  slot.conn->set_deadline(deadline);
  return Lease(slot.conn.get(), Give{this});
}

bool SlotPool::unread(const Owed& owed) const {
  const Slot& s = slots_[owed.slot];
  return s.generation == owed.generation && s.answered < owed.sent;
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
      const bool sent_now = slot.conn->sent_count() > slot.sent;
      slot.sent = slot.conn->sent_count();
      slot.answered = slot.conn->answered_count();
      // Records whose answers are read go (those of threads that ended too).
      std::erase_if(owed_, [&](const auto& entry) { return !unread(entry.second); });
      // This thread sent a batch on it without waiting: until that one's
      // results are read, its next call goes here too.
      if (sent_now) owed_[std::this_thread::get_id()] = {index, slot.generation, slot.sent};
    }
    slot.busy = false;
  }
  // Every waiter looks: one may wait for this slot only.
  free_.notify_all();
}

}  // namespace dlock::detail::sql
