// contenders.h — reading a lock node's children in Curator's layout:
// which are contenders of a primitive, their order, who holds what, and
// which node a waiter watches. No I/O: the children are a listing
// ZooKeeper returned, and any client (or person) may have put any name
// there, so a name that does not fit is left out, never a crash or a
// misordered queue (tests/fuzz/fuzz_zk_names.cpp).
//
//   _c_<uuid>-lock-<seq>       a mutex's contender (InterProcessMutex)
//   _c_<uuid>-__READ__<seq>    a reader, _c_<uuid>-__WRIT__<seq> a writer
//                              (InterProcessReadWriteLock)
//   _c_<uuid>-latch-<seq>      an election's candidate (LeaderLatch)
//   _c_<uuid>-lease-<seq>      a semaphore's permit (InterProcessSemaphoreV2)
// <seq> is the 10 decimal digits ZooKeeper appends to a sequential node.
#pragma once

#include "core/driver.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dlock::detail::zookeeper {

inline constexpr std::string_view lock_marker = "-lock-";
inline constexpr std::string_view read_marker = "__READ__";
inline constexpr std::string_view write_marker = "__WRIT__";
inline constexpr std::string_view latch_marker = "-latch-";
inline constexpr std::string_view lease_marker = "-lease-";

// What follows "_c_<uuid>-" in a contender's node name, per primitive.
std::string_view node_name(LockKind kind);

// The sequence number ZooKeeper appended: the name's last 10 characters,
// all decimal digits; nullopt for a name that does not end so.
std::optional<std::int64_t> sequence_of(std::string_view child);

// Whether `child` is a contender of `kind`'s queue: its marker (a read or
// a write lock: either marker) and a sequence number.
bool is_contender(std::string_view child, LockKind kind);

// Whether a lock name's segment could be taken for a contender node
// (starts "_c_" or holds a marker): names must not (validate_name).
bool looks_like_contender(std::string_view segment);

// A lock's contender nodes of that primitive, lowest sequence number
// first (equal numbers, which ZooKeeper never gives under one parent: by
// name, so the order is total).
std::vector<std::string> contenders(std::vector<std::string> children, LockKind kind);

// The order contenders() sorts by: a strict weak order over contenders.
bool queued_before(std::string_view a, std::string_view b);

// Who holds what among one node's children, (child, kind) — kind as in
// LockInfo::kind: the lowest "-lock-" node (mutex), the lowest "-latch-"
// node (leader), and in a read-write lock the writer at the head or the
// readers before the first writer.
std::vector<std::pair<std::string, std::string>> holders(const std::vector<std::string>& children);

// Our node's place in `queue` (contenders() of `kind`): a mutex, a writer
// or a candidate holds it when its node is first; a reader when no
// writer's node is before its own. One that does not hold it watches one
// node before its own: the one just before it (then it is the last
// blocker), with two or more the one two before it (then_watch: with
// exactly two, the one just before, watched next); a reader the first
// writer before it.
struct QueuePlace {
  std::optional<std::size_t> ours;        // our node's index; nullopt: not in the queue
  std::optional<std::size_t> blocker;     // the node to watch; nullopt (and ours): we hold it
  bool last_blocker = false;              // the blocker is the only node left that blocks ours
  std::optional<std::size_t> then_watch;  // once the blocker is gone, the only one left before ours
};
QueuePlace place_in_queue(const std::vector<std::string>& queue, std::string_view ours, LockKind kind);

}  // namespace dlock::detail::zookeeper
