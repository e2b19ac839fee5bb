#include "backends/etcd/replies.h"

#include "backends/etcd/errors.h"

#include <string>

namespace dlock::detail::etcd {
namespace {

using Answer = pb::ResponseOp::ResponseCase;
constexpr Answer put = pb::ResponseOp::kResponsePut;
constexpr Answer range = pb::ResponseOp::kResponseRange;

std::string_view said(Answer answer) {
  switch (answer) {
    case pb::ResponseOp::kResponsePut:
      return "a put";
    case pb::ResponseOp::kResponseRange:
      return "a read";
    case pb::ResponseOp::kResponseDeleteRange:
      return "a delete";
    case pb::ResponseOp::kResponseTxn:
      return "a Txn";
    default:
      return "empty";
  }
}

// The reply took the branch `succeeded` and answered `asked`, one answer
// per operation, each of its kind, in order.
Status check(const pb::TxnResponse& reply, bool succeeded, const std::vector<Answer>& asked, std::string_view step) {
  if (reply.succeeded() != succeeded)
    return malformed_reply(step, "it took a branch the Txn could not take");
  if (reply.responses_size() != static_cast<int>(asked.size()))
    return malformed_reply(step, std::to_string(reply.responses_size()) + " answers to " +
                                     std::to_string(asked.size()) + " operations");
  for (std::size_t i = 0; i < asked.size(); ++i) {
    const Answer got = reply.responses(static_cast<int>(i)).response_case();
    if (got != asked[i])
      return malformed_reply(step, "answer " + std::to_string(i + 1) + " is " + std::string(said(got)) + ", not " +
                                       std::string(said(asked[i])));
  }
  return {};
}

}  // namespace

Result<AcquireRead> read_acquire(const pb::TxnResponse& reply, bool reads_last, std::string_view step) {
  AcquireRead out;
  out.created = reply.succeeded();
  std::vector<Answer> asked = out.created ? std::vector<Answer>{put, range} : std::vector<Answer>{range, range};
  if (out.created && reads_last) asked.push_back(range);
  if (Status s = check(reply, out.created, asked, step); !s) return s;
  out.revision = reply.header().revision();
  if (!out.created) {
    const auto& mine = reply.responses(0).response_range();
    if (mine.kvs_size() == 0)
      return Status(errc::internal, "etcd: " + std::string(step) + ": our key vanished inside a Txn");
    out.revision = mine.kvs(0).create_revision();
  }
  // Our key's revision orders it among the blockers: without it, any key
  // would seem created after ours.
  if (out.revision <= 0) return malformed_reply(step, "no revision for our key");
  out.first = &reply.responses(1).response_range();
  if (out.created && reads_last) out.last_two = &reply.responses(2).response_range();
  return out;
}

Result<QueueRead> read_queue(const pb::TxnResponse& reply, std::string_view step) {
  if (Status s = check(reply, true, {range, range}, step); !s) return s;
  return QueueRead{&reply.responses(0).response_range(), &reply.responses(1).response_range()};
}

Result<std::vector<const pb::RangeResponse*>> read_ranges(const pb::TxnResponse& reply, std::size_t count,
                                                          std::string_view step) {
  if (Status s = check(reply, true, std::vector<Answer>(count, range), step); !s) return s;
  std::vector<const pb::RangeResponse*> out;
  for (std::size_t i = 0; i < count; ++i) out.push_back(&reply.responses(static_cast<int>(i)).response_range());
  return out;
}

}  // namespace dlock::detail::etcd
