// barrier.h — the double barrier on file://: one file per name (.barrier).
// Each member is an entry slot whose liveness lock is held by a descriptor
// kept open while the member is in, so a member that dies stops counting
// at once (members have no lease here: their life is the process's). The
// header keeps whether the current round is open and the round's number;
// the last member out starts the next round, shut. Waiters are woken by
// inotify: a member's entry written or removed, or its descriptor closed.
#pragma once

#include "backends/file/directory.h"
#include "core/barrier_driver.h"

#include <map>
#include <mutex>
#include <utility>

namespace dlock::detail::file {

class Barriers final : public BarrierDriver {
 public:
  explicit Barriers(const Directory& dir) : dir_(dir) {}
  ~Barriers() override;

  Result<std::string> join(const std::string& name, std::chrono::milliseconds lease,
                           steady::time_point deadline) override;
  Result<BarrierCheck> entered(const std::string& name, const std::string& member, int parties, bool watch,
                               steady::time_point deadline) override;
  Result<BarrierCheck> left(const std::string& name, const std::string& member, bool watch,
                            steady::time_point deadline) override;
  void remove(const std::string& name, const std::string& member, steady::time_point deadline) noexcept override;

 private:
  // A member of this process: its descriptor (holding its liveness lock),
  // token, slot and the round it joined in.
  struct Member {
    int fd = -1;
    std::uint64_t token = 0;
    std::uint32_t slot = 0;
    std::uint64_t round = 0;
  };
  using Key = std::pair<std::string, std::string>;  // (name, member id)

  std::optional<Member> find(const Key& key) const;
  void forget(const Key& key);

  const Directory& dir_;
  mutable std::mutex mu_;
  std::map<Key, Member> members_;  // guarded by mu_
};

}  // namespace dlock::detail::file
