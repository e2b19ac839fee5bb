// barrier.cpp — the double barrier on the lock table recipe (barrier.h).
#include "backends/sql/barrier.h"

#include "core/owner_id.h"

#include <algorithm>

namespace dlock::detail::sql {
namespace {

class Barriers final : public BarrierDriver {
 public:
  explicit Barriers(CountRows& rows) : rows_(rows) {}

  bool leased_members() const override { return true; }

  Result<std::string> join(const std::string& name, std::chrono::milliseconds lease,
                           steady::time_point deadline) override {
    auto id = random_client_id();
    if (!id) return id.status();
    const Call calls[] = {{Stmt::insert_hold, {name, kind_member, *id, "x", std::int64_t{0}, std::int64_t{lease.count()},
                                               "", rows_.holder_info()}}};
    auto out = rows_.run("joining barrier '" + name + "'", deadline, calls);
    if (!out) return out.status();
    return *id;
  }

  Result<BarrierCheck> entered(const std::string& name, const std::string& member, int parties, bool watch,
                               steady::time_point deadline) override {
    BarrierCheck check;
    Status gone;
    auto done = rows_.under_count(
        "entering barrier '" + name + "'", name, kind_barrier, 0, 4, deadline,
        [&](std::int64_t open, int, std::vector<Call>& writes) -> Status {
          if (open == 1)
            check.done = true;
          else
            writes.push_back({Stmt::holders, {name, kind_member}});
          return {};
        },
        [&](const std::vector<Row>& members, std::vector<Call>& writes) {
          if (check.done) return;
          const bool in = std::any_of(members.begin(), members.end(), [&](const Row& m) { return m.owner == member; });
          if (!in) {
            gone = Status(errc::lock_lost, "barrier '" + name + "': this member's entry is gone (its lease ran out)");
          } else if (static_cast<int>(members.size()) >= parties) {
            writes.push_back({Stmt::set_count, {name, kind_barrier, std::int64_t{1}}});
            CountRows::wake_watchers(name, kind_barrier, writes);
            check.done = true;
          } else if (watch) {
            check.change = rows_.watcher(name, kind_barrier, writes);
          }
        });
    if (!done) return done;
    if (!gone) return gone;
    return check;
  }

  Result<BarrierCheck> left(const std::string& name, const std::string& member, bool watch,
                            steady::time_point deadline) override {
    BarrierCheck check;
    auto done = rows_.under_count(
        "leaving barrier '" + name + "'", name, kind_barrier, 0, 4, deadline,
        [&](std::int64_t, int, std::vector<Call>& writes) -> Status {
          writes.push_back({Stmt::drop_own, {name, kind_member, member}});
          writes.push_back({Stmt::holders, {name, kind_member}});
          return {};
        },
        [&](const std::vector<Row>& members, std::vector<Call>& writes) {
          if (members.empty()) {
            // The last one out closes it for the next round.
            writes.push_back({Stmt::set_count, {name, kind_barrier, std::int64_t{0}}});
            CountRows::wake_watchers(name, kind_barrier, writes);
            check.done = true;
          } else if (watch) {
            check.change = rows_.watcher(name, kind_barrier, writes);
          }
        });
    if (!done) return done;
    return check;
  }

  void remove(const std::string& name, const std::string& member, steady::time_point deadline) noexcept override {
    const Call calls[] = {{Stmt::drop_own, {name, kind_member, member}}};
    (void)rows_.run("leaving barrier '" + name + "'", deadline, calls);
  }

 private:
  CountRows& rows_;
};

}  // namespace

std::unique_ptr<BarrierDriver> make_barriers(CountRows& rows) { return std::make_unique<Barriers>(rows); }

}  // namespace dlock::detail::sql
