// replies.h — what the recipes read out of a Txn's answer: which answer of
// the taken branch holds what. A reply is one member's word; these readers
// are where it is checked before it is trusted: it must have taken a branch
// the Txn could take and hold one answer per operation of that branch, each
// of the kind asked (a read's answer is a RangeResponse, not a put's). Any
// other reply is errc::unavailable (errors.h malformed_reply), never read:
// an empty read where a put's answer stands would be a lock granted. The
// RangeResponses returned point into `reply`, which must outlive them.
#pragma once

#include <dlock/status.h>

#include <etcd/etcdserver/etcdserverpb/rpc.pb.h>

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace dlock::detail::etcd {

namespace pb = etcdserverpb;

// try_acquire's Txn:
//   if our key is absent:  put it, read the first blockers[, read the last two]
//   else:                  read our key, read the first blockers
struct AcquireRead {
  bool created = false;                           // the put branch ran
  std::int64_t revision = 0;                      // our key's create revision
  const pb::RangeResponse* first = nullptr;       // the first blockers by creation
  const pb::RangeResponse* last_two = nullptr;    // the put branch with `reads_last`: the two created last
};
Result<AcquireRead> read_acquire(const pb::TxnResponse& reply, bool reads_last, std::string_view step);

// look_again's Txn: read our key, read the blockers created before it.
struct QueueRead {
  const pb::RangeResponse* mine = nullptr;
  const pb::RangeResponse* before = nullptr;
};
Result<QueueRead> read_queue(const pb::TxnResponse& reply, std::string_view step);

// A Txn of `count` reads and no compare (renewals, a barrier's check).
Result<std::vector<const pb::RangeResponse*>> read_ranges(const pb::TxnResponse& reply, std::size_t count,
                                                          std::string_view step);

}  // namespace dlock::detail::etcd
