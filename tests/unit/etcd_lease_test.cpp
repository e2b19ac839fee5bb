// How long the etcd:// backend trusts its lease (backends/etcd/session.h
// lease_deadline_after), from TTLs a member states: never longer than the
// client asked for, whatever the member says, and no overflow on the way.
// No server.
#include "backends/etcd/session.h"

#include <gtest/gtest.h>

#include <limits>

namespace dlock::detail::etcd {
namespace {

using namespace std::chrono_literals;

const auto sent = steady::now();

TEST(EtcdLease, TheDeadlineIsTheTtlAfterTheSendLessTheDriftMargin) {
  const auto until = lease_deadline_after(sent, 10, 10);
  EXPECT_LT(until, sent + 10s);
  EXPECT_GT(until, sent + 9s);
}

TEST(EtcdLease, ALongerTtlThanAskedIsNotTrusted) {
  EXPECT_LE(lease_deadline_after(sent, 3600, 10), sent + 10s);
  EXPECT_LE(lease_deadline_after(sent, 11, 10), sent + 10s);
  // A shorter one is the cluster's word: the lease ends sooner.
  EXPECT_LE(lease_deadline_after(sent, 5, 10), sent + 5s);
}

TEST(EtcdLease, HugeTtlsDoNotOverflow) {
  for (std::int64_t said : {std::numeric_limits<std::int64_t>::max(), std::int64_t{1} << 62, std::int64_t{1} << 40}) {
    const auto until = lease_deadline_after(sent, said, 10);
    EXPECT_LE(until, sent + 10s) << said;
    EXPECT_GT(until, sent) << said;
  }
}

TEST(EtcdLease, ANonPositiveTtlIsALeaseAlreadyGone) {
  for (std::int64_t said : {std::int64_t{0}, std::int64_t{-1}, std::numeric_limits<std::int64_t>::min()})
    EXPECT_LE(lease_deadline_after(sent, said, 10), sent) << said;
}

}  // namespace
}  // namespace dlock::detail::etcd
