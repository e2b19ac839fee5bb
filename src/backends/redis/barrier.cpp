// barrier.cpp — the double barrier on redis:// (barrier.h).
#include "backends/redis/barrier.h"

#include <atomic>

namespace dlock::detail::redis {
namespace {

class Barriers final : public BarrierDriver {
 public:
  explicit Barriers(const Store& store) : store_(store) {}

  bool leased_members() const override { return true; }

  Result<std::string> join(const std::string& name, std::chrono::milliseconds lease,
                           steady::time_point deadline) override {
    const std::string member = store_.client_id + "-m" + std::to_string(next_.fetch_add(1));
    const std::string l = ms(lease);
    const std::string_view args[] = {member, l};
    auto reply = run(Script::barrier_join, name, args, deadline, "joining barrier '" + name + "'");
    if (!reply) return reply.status();
    return member;
  }

  Result<BarrierCheck> entered(const std::string& name, const std::string& member, int parties, bool watch,
                               steady::time_point deadline) override {
    const std::string step = "entering barrier '" + name + "'";
    WatchSlot slot(store_, watch, name, tag(name));
    const std::string p = std::to_string(parties), ttl = ms(watcher_ttl), t = tag(name);
    const std::string_view args[] = {member, p, slot.entry(), ttl, store_.channel_prefix, t};
    auto reply = run(Script::barrier_enter, name, args, deadline, step);
    if (reply && integer(reply->get()) == -1)
      return Status(errc::lock_lost, "barrier '" + name +
                                         "': our member entry is gone (its lease ran out while it waited to "
                                         "enter); this member is out: arrive again");
    return check(std::move(reply), slot, step);
  }

  Result<BarrierCheck> left(const std::string& name, const std::string& member, bool watch,
                            steady::time_point deadline) override {
    const std::string step = "leaving barrier '" + name + "'";
    WatchSlot slot(store_, watch, name, tag(name));
    const std::string ttl = ms(watcher_ttl), t = tag(name);
    const std::string_view args[] = {member, slot.entry(), ttl, store_.channel_prefix, t};
    return check(run(Script::barrier_leave, name, args, deadline, step), slot, step);
  }

  void remove(const std::string& name, const std::string& member, steady::time_point deadline) noexcept override {
    try {
      const std::string t = tag(name);
      const std::string_view args[] = {member, store_.channel_prefix, t};
      (void)run(Script::barrier_remove, name, args, deadline, "leaving barrier '" + name + "'");
    } catch (...) {
      // Best effort: the member's lease ends it anyway.
    }
  }

 private:
  static std::string tag(const std::string& name) { return "barrier:" + name; }

  // A script's 1 (done) or 0 (not yet: the slot's Waiter).
  static Result<BarrierCheck> check(Result<Reply> reply, WatchSlot& slot, const std::string& step) {
    if (!reply) return reply.status();
    switch (integer(reply->get())) {
      case 1:
        return BarrierCheck{true, nullptr};
      case 0:
        return BarrierCheck{false, slot.take()};
      default:
        return unexpected(step);
    }
  }

  Result<Reply> run(Script script, const std::string& name, std::span<const std::string_view> args,
                    steady::time_point deadline, const std::string& step) {
    const std::string base = store_.base(name);
    const std::string state = base + "barrier", members = base + "barrier:members", gone = base + "barrier:left",
                      watchers = base + "barrier:watchers";
    const std::string_view keys[] = {state, members, gone, watchers};
    return store_.pool.eval(script, keys, args, deadline, step, state);
  }

  const Store& store_;
  std::atomic<std::uint64_t> next_{0};
};

}  // namespace

std::unique_ptr<BarrierDriver> make_barriers(const Store& store) { return std::make_unique<Barriers>(store); }

}  // namespace dlock::detail::redis
