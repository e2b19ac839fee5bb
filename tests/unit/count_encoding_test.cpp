// The encoding of a Counter's or Latch's cell (core/cas_counters.h), the same
// on zk:// and etcd://: Curator's 4-byte int and 8-byte long, big-endian.
#include "core/cas_counters.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

namespace dlock::detail {
namespace {

CountCell of_width(int width) {
  CountCell cell;
  cell.width = width;
  cell.version = 1;
  return cell;
}

TEST(CountEncoding, BothWidthsRoundTripBigEndian) {
  auto four = encode_count(-2, CountCell{}, CounterWidth::int32, "value");
  ASSERT_TRUE(four);
  EXPECT_EQ(*four, std::string("\xff\xff\xff\xfe", 4));
  auto back = decode_count(*four, "cell");
  ASSERT_TRUE(back);
  EXPECT_EQ(back->value, -2);
  EXPECT_EQ(back->width, 4);

  const std::int64_t big = std::numeric_limits<std::int64_t>::min() + 5;
  auto eight = encode_count(big, CountCell{}, CounterWidth::int64, "value");
  ASSERT_TRUE(eight);
  EXPECT_EQ(eight->size(), 8u);
  EXPECT_EQ(static_cast<unsigned char>((*eight)[0]), 0x80);
  auto wide = decode_count(*eight, "cell");
  ASSERT_TRUE(wide);
  EXPECT_EQ(wide->value, big);
  EXPECT_EQ(wide->width, 8);
}

TEST(CountEncoding, AnExistingCellKeepsItsWidth) {
  auto in_four = encode_count(7, of_width(4), CounterWidth::int64, "value");
  ASSERT_TRUE(in_four);
  EXPECT_EQ(in_four->size(), 4u) << "an int32 cell was rewritten as 8 bytes";
  auto in_eight = encode_count(7, of_width(8), CounterWidth::int32, "value");
  ASSERT_TRUE(in_eight);
  EXPECT_EQ(in_eight->size(), 8u);
}

TEST(CountEncoding, ValuesBeyondTheWidthAndDataOfOtherSizesAreRefused) {
  auto over = encode_count(std::int64_t{1} << 31, of_width(4), CounterWidth::int64, "store: value");
  ASSERT_FALSE(over);
  EXPECT_EQ(over.status().code(), errc::invalid_argument);
  EXPECT_NE(over.status().message().find("store: value 2147483648"), std::string::npos) << over.status().message();
  auto odd = decode_count("abc", "etcd: key 'x'");
  ASSERT_FALSE(odd);
  EXPECT_EQ(odd.status().code(), errc::invalid_argument);
  EXPECT_NE(odd.status().message().find("etcd: key 'x' holds 3 bytes"), std::string::npos) << odd.status().message();
  auto empty = decode_count("", "cell");
  ASSERT_TRUE(empty);
  EXPECT_EQ(empty->value, 0);
  EXPECT_EQ(empty->width, 0);
}

}  // namespace
}  // namespace dlock::detail
