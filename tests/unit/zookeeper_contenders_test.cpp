// How the zk:// backend reads a lock node's children (backends/zookeeper/
// contenders.h), in Curator's layout, and names that were queued wrongly
// before these functions were split out to be fuzzed.
#include "backends/zookeeper/contenders.h"

#include <gtest/gtest.h>

namespace dlock::detail::zookeeper {
namespace {

using Names = std::vector<std::string>;

TEST(ZooKeeperContenders, ParsesSequenceNumbers) {
  EXPECT_EQ(sequence_of("_c_3f2b-lock-0000000042"), 42);
  EXPECT_EQ(sequence_of("0000000000"), 0);
  EXPECT_EQ(sequence_of("x-9999999999"), 9'999'999'999);
  EXPECT_FALSE(sequence_of("_c_3f2b-lock-00000x0042"));
  EXPECT_FALSE(sequence_of("lock-42"));
  EXPECT_FALSE(sequence_of(""));
}

TEST(ZooKeeperContenders, QueuesByNumberLeavingOthersOut) {
  const Names children = {"_c_b-lock-0000000043", "_c_a-lock-0000000042", "leases", "_c_c-latch-0000000001",
                          "_c_d-lock-0000000044"};
  EXPECT_EQ(contenders(children, LockKind::mutex),
            (Names{"_c_a-lock-0000000042", "_c_b-lock-0000000043", "_c_d-lock-0000000044"}));
  EXPECT_EQ(contenders(children, LockKind::leader), (Names{"_c_c-latch-0000000001"}));
}

// Before: the last 10 characters were compared as text whatever they were, so a node whose name does not end in a sequence
// number ("-lock-" in a name someone made by hand) took a place in the
// queue, ahead of the real contenders ('-' sorts before digits).
TEST(ZooKeeperContenders, NodesWithoutASequenceNumberAreNotContenders) {
  const Names children = {"_c_a-lock-0000000005", "my-lock-is-here-----"};
  EXPECT_EQ(contenders(children, LockKind::mutex), (Names{"_c_a-lock-0000000005"}));
  EXPECT_TRUE(place_in_queue(contenders(children, LockKind::mutex), "_c_a-lock-0000000005", LockKind::mutex).ours);
  EXPECT_FALSE(place_in_queue(contenders(children, LockKind::mutex), "_c_a-lock-0000000005", LockKind::mutex).blocker);
}

TEST(ZooKeeperContenders, PicksTheNodeToWatch) {
  const Names q = {"_c_a-lock-0000000001", "_c_b-lock-0000000002", "_c_c-lock-0000000003", "_c_d-lock-0000000004"};
  EXPECT_FALSE(place_in_queue(q, q[0], LockKind::mutex).blocker);
  auto second = place_in_queue(q, q[1], LockKind::mutex);
  EXPECT_EQ(second.blocker, 0u);
  EXPECT_TRUE(second.last_blocker);
  auto third = place_in_queue(q, q[2], LockKind::mutex);
  EXPECT_EQ(third.blocker, 0u);
  EXPECT_EQ(third.then_watch, 1u);
  auto fourth = place_in_queue(q, q[3], LockKind::mutex);
  EXPECT_EQ(fourth.blocker, 1u);
  EXPECT_FALSE(fourth.then_watch);
  EXPECT_FALSE(place_in_queue(q, "_c_z-lock-0000000009", LockKind::mutex).ours);

  const Names rw = {"_c_a-__READ__0000000001", "_c_b-__WRIT__0000000002", "_c_c-__READ__0000000003"};
  EXPECT_FALSE(place_in_queue(rw, rw[0], LockKind::read).blocker);
  auto reader = place_in_queue(rw, rw[2], LockKind::read);
  EXPECT_EQ(reader.blocker, 1u);
  EXPECT_TRUE(reader.last_blocker);
  EXPECT_EQ(place_in_queue(rw, rw[1], LockKind::write).blocker, 0u);
}

TEST(ZooKeeperContenders, NamesTheHolders) {
  const Names children = {"_c_a-__READ__0000000003", "_c_b-__READ__0000000001", "_c_c-__WRIT__0000000002",
                          "_c_d-lock-0000000007"};
  using Held = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(holders(children), (Held{{"_c_d-lock-0000000007", "mutex"}, {"_c_b-__READ__0000000001", "read"}}));
}

}  // namespace
}  // namespace dlock::detail::zookeeper
