// What the etcd:// backend reads out of a Txn's reply (backends/etcd/
// replies.h), fed replies a faulty or hostile member could send: too few
// answers, answers of another kind than asked, the other branch's answers.
// None may be read as a lock granted or a key seen; each is an
// `unavailable` error (ask again), naming the step. No server: the replies
// are built here.
#include "backends/etcd/replies.h"

#include <gtest/gtest.h>

#include <string>

namespace dlock::detail::etcd {
namespace {

enum class Op { put, range, del };

// A reply of the branch `succeeded` with `ops` answers; ranges hold one
// key created at `created` (0: none); the header's revision is 100.
pb::TxnResponse reply(bool succeeded, std::initializer_list<Op> ops, std::int64_t created = 0) {
  pb::TxnResponse r;
  r.set_succeeded(succeeded);
  r.mutable_header()->set_revision(100);
  for (Op op : ops) {
    auto* answer = r.add_responses();
    switch (op) {
      case Op::put:
        answer->mutable_response_put();
        break;
      case Op::range:
        if (created != 0) {
          auto* kv = answer->mutable_response_range()->add_kvs();
          kv->set_key("dlock/a/1f");
          kv->set_create_revision(created);
        } else {
          answer->mutable_response_range();
        }
        break;
      case Op::del:
        answer->mutable_response_delete_range();
        break;
    }
  }
  return r;
}

template <class T>
void expect_untrusted(const Result<T>& read, const char* what) {
  ASSERT_FALSE(read.ok()) << what << ": read as a good reply";
  EXPECT_EQ(read.status().code(), errc::unavailable) << what << ": " << read.status().message();
  EXPECT_NE(read.status().message().find("acquiring 'a'"), std::string::npos) << read.status().message();
}

TEST(EtcdReplies, AWellFormedAcquireReplyIsRead) {
  // (The reads point into the reply: it must outlive them.)
  const auto put_branch = reply(true, {Op::put, Op::range, Op::range}, 42);
  auto made = read_acquire(put_branch, true, "acquiring 'a'");
  ASSERT_TRUE(made.ok()) << made.status().message();
  EXPECT_TRUE(made->created);
  EXPECT_EQ(made->revision, 100);
  EXPECT_EQ(made->first->kvs(0).create_revision(), 42);
  ASSERT_NE(made->last_two, nullptr);

  const auto read_branch = reply(false, {Op::range, Op::range}, 42);
  auto found = read_acquire(read_branch, false, "acquiring 'a'");
  ASSERT_TRUE(found.ok()) << found.status().message();
  EXPECT_FALSE(found->created);
  EXPECT_EQ(found->revision, 42);
  EXPECT_EQ(found->last_two, nullptr);
}

TEST(EtcdReplies, AShortAcquireReplyIsNotTrusted) {
  expect_untrusted(read_acquire(reply(true, {}), false, "acquiring 'a'"), "put branch, no answers");
  expect_untrusted(read_acquire(reply(true, {Op::put}), false, "acquiring 'a'"), "put branch, no read");
  expect_untrusted(read_acquire(reply(true, {Op::put, Op::range}), true, "acquiring 'a'"),
                   "put branch, no read of the last two");
  expect_untrusted(read_acquire(reply(false, {}), false, "acquiring 'a'"), "read branch, no answers");
  expect_untrusted(read_acquire(reply(false, {Op::range}, 42), false, "acquiring 'a'"), "read branch, one read");
}

// An empty read of the first blockers would be a lock granted.
TEST(EtcdReplies, AMistypedAcquireReplyIsNotTrusted) {
  expect_untrusted(read_acquire(reply(true, {Op::put, Op::put}), false, "acquiring 'a'"),
                   "put branch, a put where the read of the blockers goes");
  expect_untrusted(read_acquire(reply(true, {Op::range, Op::range}, 42), false, "acquiring 'a'"),
                   "put branch, a read where the put goes");
  expect_untrusted(read_acquire(reply(true, {Op::put, Op::range, Op::del}, 42), true, "acquiring 'a'"),
                   "put branch, a delete where the read of the last two goes");
  expect_untrusted(read_acquire(reply(false, {Op::put, Op::range}, 42), false, "acquiring 'a'"),
                   "read branch, a put where the read of our key goes");
  expect_untrusted(read_acquire(reply(false, {Op::range, Op::del}, 42), false, "acquiring 'a'"),
                   "read branch, a delete where the read of the blockers goes");
  expect_untrusted(read_acquire(reply(true, {Op::put, Op::range, Op::range}, 42), false, "acquiring 'a'"),
                   "put branch, an answer more than asked");
}

TEST(EtcdReplies, QueueRepliesAreChecked) {
  const auto two_reads = reply(true, {Op::range, Op::range}, 42);
  auto good = read_queue(two_reads, "acquiring 'a'");
  ASSERT_TRUE(good.ok()) << good.status().message();
  EXPECT_EQ(good->mine->kvs(0).create_revision(), 42);
  EXPECT_EQ(good->before->kvs(0).create_revision(), 42);
  expect_untrusted(read_queue(reply(true, {}), "acquiring 'a'"), "no answers");
  expect_untrusted(read_queue(reply(true, {Op::range}, 42), "acquiring 'a'"), "one read of two");
  expect_untrusted(read_queue(reply(true, {Op::range, Op::put}, 42), "acquiring 'a'"), "a put for a read");
  expect_untrusted(read_queue(reply(true, {Op::del, Op::range}, 42), "acquiring 'a'"), "a delete for a read");
  // No compare: a reply of the other branch is not one etcd sends.
  expect_untrusted(read_queue(reply(false, {Op::range, Op::range}, 42), "acquiring 'a'"), "the failure branch");
}

// Renewals (one read per held key) and a barrier's check (three reads).
TEST(EtcdReplies, BatchesOfReadsAreChecked) {
  const auto three_reads = reply(true, {Op::range, Op::range, Op::range}, 42);
  auto good = read_ranges(three_reads, 3, "acquiring 'a'");
  ASSERT_TRUE(good.ok()) << good.status().message();
  ASSERT_EQ(good->size(), 3u);
  for (const auto* r : *good) EXPECT_EQ(r->kvs(0).create_revision(), 42);
  expect_untrusted(read_ranges(reply(true, {Op::range, Op::range}, 42), 3, "acquiring 'a'"), "two reads of three");
  expect_untrusted(read_ranges(reply(true, {}), 128, "acquiring 'a'"), "no reads of 128");
  expect_untrusted(read_ranges(reply(true, {Op::range, Op::put, Op::range}, 42), 3, "acquiring 'a'"),
                   "a put among the reads");
  expect_untrusted(read_ranges(reply(true, {Op::range, Op::range, Op::range, Op::range}, 42), 3, "acquiring 'a'"),
                   "four reads of three");
  expect_untrusted(read_ranges(reply(false, {Op::range, Op::range, Op::range}, 42), 3, "acquiring 'a'"),
                   "the failure branch");
}

}  // namespace
}  // namespace dlock::detail::etcd
