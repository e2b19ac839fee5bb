#include "backends/sql/slot_pool.h"

namespace dlock::detail::sql {

SlotPool::SlotPool(std::string backend, Open open, int size, Events& events)
    : backend_(std::move(backend)), open_(std::move(open)), events_(events), slots_(static_cast<std::size_t>(size)) {}

Result<Pool::Lease> SlotPool::take(std::string_view step, steady::time_point deadline) {
  std::size_t index;
  {
    std::unique_lock lk(mu_);
    auto free_slot = [&] {
      for (std::size_t i = 0; i < slots_.size(); ++i)
        if (!slots_[i].busy) return i;
      return slots_.size();
    };
    if (!free_.wait_until(lk, deadline, [&] { return free_slot() < slots_.size(); }))
      return Status(errc::unavailable, backend_ + " backend: " + std::string(step) +
                                           ": every connection of this client stayed busy for longer than "
                                           "ClientOptions::op_timeout (see the url's pool option)");
    index = free_slot();
    slots_[index].busy = true;
  }
  Slot& slot = slots_[index];  // ours until given back; its conn changes under mu_ (give_back reads them all)
  if (!slot.conn || slot.conn->broken()) {
    const bool was_open = slot.conn != nullptr;
    std::unique_ptr<PooledConnection> old;
    {
      std::lock_guard lk(mu_);
      old = std::move(slot.conn);
    }
    old.reset();  // closed outside the lock
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
    slots_[index].busy = false;
  }
  free_.notify_one();
}

}  // namespace dlock::detail::sql
