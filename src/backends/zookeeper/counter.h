// counter.h — Counter and Latch on ZooKeeper: one persistent node whose data
// is a count in one of Apache Curator's encodings, changed only by
// compare-and-set on the node's version.
//
//   <root>/<name>    data: a big-endian signed integer, 4 bytes
//                    (SharedCount's int) or 8 bytes (DistributedAtomicLong's
//                    long); a node with no data reads as 0; missing: the
//                    counter reads as 0 and is created on first write
//
// A node keeps the width it was created with: every write encodes in the
// width read (a missing node: the width asked for).
//
// Every change is read-then-set with the version read (zoo_aset): if anyone
// wrote in between, ZooKeeper answers ZBADVERSION and we read again, so no
// update is lost, until the call's deadline.
#pragma once

#include "backends/zookeeper/session.h"
#include "core/counter_driver.h"

#include <cstdint>
#include <optional>
#include <string>

namespace dlock::detail::zookeeper {

// A count node as read: its value, version (nullopt: no node) and width
// in bytes (4 or 8; 0 for no data).
struct CountNode {
  std::int64_t value = 0;
  std::optional<int> version;
  int width = 0;
};

// The bytes of `value` in `seen`'s width, or `missing` if it has none (no
// node, or no data); invalid_argument if it does not fit in 4 bytes where
// that is the width (`what` names the value in the message).
Result<std::string> encode_count(std::int64_t value, const CountNode& seen, CounterWidth missing,
                                 std::string_view what);
// The count in a node's data; invalid_argument if it is not one.
Result<CountNode> decode_count(const std::string& data, std::string_view path);

// One compare-and-set: writes `bytes` (from encode_count) if the node is
// still as `seen` (an absent node is created, parents as needed). true:
// written; false: someone changed it first (read again).
Result<bool> write_count(Session& session, const std::string& path, const CountNode& seen, const std::string& bytes,
                         steady::time_point deadline, std::string_view step);
// The node's value and version (no version: there is no node). With
// `watch`, the read also leaves a one-shot data watch that notifies it.
Result<CountNode> read_count(Session& session, const std::string& path, steady::time_point deadline,
                             std::string_view step, const std::shared_ptr<Signal>& watch = nullptr);

// A compare-and-set loop ran out of time: others kept writing first.
Status contended(std::string_view step);

class Counters final : public CounterDriver {
 public:
  explicit Counters(Session& session) : session_(session) {}
  Result<std::int64_t> load(const std::string& name, steady::time_point deadline) override;
  Status store(const std::string& name, std::int64_t value, CounterWidth width,
               steady::time_point deadline) override;
  Result<std::int64_t> fetch_add(const std::string& name, std::int64_t delta, CounterWidth width,
                                 steady::time_point deadline) override;
  Result<bool> compare_exchange(const std::string& name, std::int64_t& expected, std::int64_t desired,
                                CounterWidth width, steady::time_point deadline) override;

 private:
  Session& session_;
};

}  // namespace dlock::detail::zookeeper
