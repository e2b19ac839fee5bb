#include "backends/sql/wakeups.h"

namespace dlock::detail::sql {

std::optional<WakeTarget> WakeTarget::decode(std::string_view text) {
  auto first = text.find('\n');
  if (first == std::string_view::npos) return std::nullopt;
  auto second = text.find('\n', first + 1);
  if (second == std::string_view::npos) return std::nullopt;
  return WakeTarget{std::string(text.substr(0, first)), std::string(text.substr(first + 1, second - first - 1)),
                    std::string(text.substr(second + 1))};
}

std::shared_ptr<Mailbox::Slot> Mailbox::enter(const WakeTarget& target) {
  auto slot = std::make_shared<Slot>();
  std::lock_guard lk(mu_);
  slots_[target] = slot;
  return slot;
}

void Mailbox::leave(const WakeTarget& target) {
  std::lock_guard lk(mu_);
  slots_.erase(target);
}

std::shared_ptr<Mailbox::Slot> Mailbox::find(const WakeTarget& target) const {
  std::lock_guard lk(mu_);
  auto it = slots_.find(target);
  return it == slots_.end() ? nullptr : it->second;
}

void Mailbox::deliver(const WakeTarget& target) {
  auto slot = find(target);
  if (!slot) return;
  {
    std::lock_guard lk(slot->mu);
    slot->woken = true;
  }
  slot->cv.notify_one();
}

void Mailbox::deliver_all() {
  std::lock_guard lk(mu_);
  for (auto& [target, slot] : slots_) {
    {
      std::lock_guard slk(slot->mu);
      slot->woken = true;
    }
    slot->cv.notify_one();
  }
}

}  // namespace dlock::detail::sql
