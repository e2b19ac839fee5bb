#include "backends/etcd/replies.h"

namespace dlock::detail::etcd {

Result<AcquireRead> read_acquire(const pb::TxnResponse& reply, bool reads_last, std::string_view step) {
  AcquireRead out;
  out.created = reply.succeeded();
  out.revision = reply.header().revision();
  if (!out.created) {
    const auto& mine = reply.responses(0).response_range();
    if (mine.kvs_size() == 0)
      return Status(errc::internal, "etcd: " + std::string(step) + ": our key vanished inside a Txn");
    out.revision = mine.kvs(0).create_revision();
  }
  out.first = &reply.responses(1).response_range();
  if (out.created && reads_last) out.last_two = &reply.responses(2).response_range();
  return out;
}

Result<QueueRead> read_queue(const pb::TxnResponse& reply, std::string_view /*step*/) {
  return QueueRead{&reply.responses(0).response_range(), &reply.responses(1).response_range()};
}

Result<std::vector<const pb::RangeResponse*>> read_ranges(const pb::TxnResponse& reply, std::size_t count,
                                                          std::string_view /*step*/) {
  std::vector<const pb::RangeResponse*> out;
  for (std::size_t i = 0; i < count; ++i) out.push_back(&reply.responses(static_cast<int>(i)).response_range());
  return out;
}

}  // namespace dlock::detail::etcd
