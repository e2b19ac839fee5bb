// Where the etcd:// backend keeps a name's keys (backends/etcd/config.h
// name_range): no name's range holds another's, names without '/' keep
// etcd's own layout, and listing finds a name from its key. No server.
#include "backends/etcd/config.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace dlock::detail::etcd {
namespace {

const std::vector<std::string> names{"a",   "a/b",   "a/b/c", "a b",   "a%2Fb", "a.b",     "a%",  "a%25",
                                     "a/%", "a%/b",  "%2F",   "b/a",   "a.paths", "a/b%2Fc", "a%2Fb/c", "ab"};

TEST(EtcdNames, NoNamesRangeHoldsAnothersKeys) {
  for (const auto& x : names) {
    for (const auto& y : names) {
      if (x == y) continue;
      EXPECT_FALSE(name_range("dlock", y).starts_with(name_range("dlock", x)))
          << "the range of '" << x << "' (" << name_range("dlock", x) << ") holds '" << y << "''s keys ("
          << name_range("dlock", y) << ")";
    }
  }
}

TEST(EtcdNames, NamesWithoutASlashKeepEtcdsLayout) {
  EXPECT_EQ(name_range("dlock", "jobs"), "dlock/jobs/");
  EXPECT_EQ(name_range("dlock", "a%2Fb"), "dlock/a%2Fb/");
  EXPECT_EQ(name_range("x/y", "a b"), "x/y/a b/");
  EXPECT_EQ(name_range("dlock", "jobs/nightly"), "dlock.paths/jobs%2Fnightly/");
  EXPECT_EQ(name_range("dlock.rwlock", "a%/b"), "dlock.rwlock.paths/a%25%2Fb/");
}

TEST(EtcdNames, AKeysSegmentNamesItsName) {
  for (const auto& n : names) {
    const bool paths = n.find('/') != std::string::npos;
    const std::string range = name_range("dlock", n);
    const std::string root = paths ? "dlock.paths/" : "dlock/";
    ASSERT_TRUE(range.starts_with(root)) << range;
    const std::string segment = range.substr(root.size(), range.size() - root.size() - 1);
    EXPECT_EQ(name_of_segment(segment, paths), std::optional<std::string>(n)) << segment;
  }
  // Segments no name has: a name without '/' is never under .paths.
  EXPECT_EQ(name_of_segment("ab", true), std::nullopt);
  EXPECT_EQ(name_of_segment("a%25b", true), std::nullopt);
  EXPECT_EQ(name_of_segment("a%2", true), std::nullopt);
  EXPECT_EQ(name_of_segment("a%41b", true), std::nullopt);
  EXPECT_EQ(name_of_segment("a/b", false), std::nullopt);
}

TEST(EtcdNames, AListingsPrefixFindsExactlyTheNamesThatStartWithIt) {
  for (const std::string prefix : {"", "a", "a/", "a/b", "a%", "a%2", "a%2F", "a.", "b/", "%"}) {
    for (const auto& n : names) {
      const bool paths = n.find('/') != std::string::npos;
      const std::string root = paths ? "dlock.paths/" : "dlock/";
      const auto first = segment_prefix(prefix, paths);
      const bool found = first && name_range("dlock", n).starts_with(root + *first);
      EXPECT_EQ(found, n.starts_with(prefix)) << "'" << n << "' under the prefix '" << prefix << "'";
    }
  }
}

}  // namespace
}  // namespace dlock::detail::etcd
