// Human durations (core/duration.h).
#include "core/duration.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace dlock::detail {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

std::chrono::milliseconds ok(std::string_view text) {
  auto d = parse_duration(text, "--lease");
  EXPECT_TRUE(d.ok()) << text << ": " << d.status().message();
  return d.ok() ? *d : std::chrono::milliseconds(-12345);
}

std::string refused(std::string_view text) {
  auto d = parse_duration(text, "--lease");
  EXPECT_FALSE(d.ok()) << "'" << text << "' was accepted as " << (d.ok() ? d->count() : 0) << "ms";
  EXPECT_EQ(d.code(), errc::invalid_argument) << text;
  return d.status().message();
}

TEST(Duration, UnitsAndFractions) {
  EXPECT_EQ(ok("500ms"), 500ms);
  EXPECT_EQ(ok("10s"), 10'000ms);
  EXPECT_EQ(ok("2m"), 120'000ms);
  EXPECT_EQ(ok("1h"), 3'600'000ms);
  EXPECT_EQ(ok("1.5s"), 1'500ms);
  EXPECT_EQ(ok("0.25m"), 15'000ms);
  EXPECT_EQ(ok("0"), 0ms);
  EXPECT_EQ(ok("0ms"), 0ms);
  EXPECT_EQ(ok("0s"), 0ms);
  EXPECT_EQ(ok("24h"), 86'400'000ms);
}

TEST(Duration, MalformedTextIsRefused) {
  for (const char* text : {"", "10", "-1s", "1x", "1.2.3s", ".5s", "5.s", "s", "ms", "1 s", " 1s", "1s ",
                           "1e3s", "1sec", "1S", "1Ms", "1.5", "+1s", "1h30m", "0x10s", "10ss"})
    refused(text);
}

TEST(Duration, HugeValuesAreRefused) {
  EXPECT_THAT(refused("99999999999999999999h"), HasSubstr("too large"));
  EXPECT_THAT(refused("1000000000000000000000000000000000000000s"), HasSubstr("too large"));
  EXPECT_THAT(refused(std::string(400, '9') + "ms"), HasSubstr("too large"));
  // Found by fuzz_duration: 1,141 years was accepted, and adding it to a
  // steady_clock reading overflowed (dlock run --wait 9997979h).
  EXPECT_THAT(refused("9997979h"), HasSubstr("at most 100 years"));
  EXPECT_THAT(refused("876601h"), HasSubstr("too large"));
  EXPECT_EQ(parse_duration("876000h", "--wait").value(), std::chrono::hours(876000));
}

TEST(Duration, MessageNamesTheArgumentAndTheText) {
  for (const char* text : {"", "10", "-1s", "1x", "1.2.3s", ".5s", "99999999999999999999h"}) {
    std::string m = refused(text);
    EXPECT_THAT(m, HasSubstr("--lease")) << text;
    EXPECT_THAT(m, HasSubstr("'" + std::string(text) + "'")) << text;
  }
  EXPECT_THAT(refused("10"), HasSubstr("unit"));
  EXPECT_THAT(refused("1x"), HasSubstr("'x'"));
}

TEST(Duration, FormatPicksAReadableUnit) {
  EXPECT_EQ(format_duration(500ns), "500ns");
  EXPECT_EQ(format_duration(1500ns), "1.5us");
  EXPECT_EQ(format_duration(2500us), "2.50ms");
  EXPECT_EQ(format_duration(1500ms), "1.50s");
}

}  // namespace
}  // namespace dlock::detail
