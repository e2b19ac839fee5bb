// The generic checks on names and options (core/validate.h).
#include "core/validate.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace dlock::detail {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

std::string refused(const Status& s) {
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), errc::invalid_argument);
  return s.message();
}

TEST(ValidateMutexOptions, DefaultsAreValid) {
  EXPECT_TRUE(validate(MutexOptions{}).ok());
  EXPECT_EQ(renew_interval(MutexOptions{}), 10'000ms);
}

TEST(ValidateMutexOptions, LeaseMustBePositiveAndAtMost24h) {
  EXPECT_THAT(refused(validate(MutexOptions{.lease = 0ms})), HasSubstr("lease"));
  EXPECT_THAT(refused(validate(MutexOptions{.lease = -1ms})), HasSubstr("lease"));
  EXPECT_THAT(refused(validate(MutexOptions{.lease = -1ms, .lease_mode = LeaseMode::fixed})), HasSubstr("lease"));
  EXPECT_TRUE(validate(MutexOptions{.lease = 24h}).ok());
  EXPECT_THAT(refused(validate(MutexOptions{.lease = 24h + 1ms})), HasSubstr("lease"));
  EXPECT_THAT(refused(validate(MutexOptions{.lease = std::chrono::milliseconds::max()})), HasSubstr("lease"));
}

TEST(ValidateMutexOptions, RenewIntervalMustBeShorterThanTheLease) {
  EXPECT_TRUE(validate(MutexOptions{.lease = 1000ms, .renew_interval = 999ms}).ok());
  EXPECT_THAT(refused(validate(MutexOptions{.lease = 1000ms, .renew_interval = 1000ms})),
              HasSubstr("renew_interval"));
  EXPECT_THAT(refused(validate(MutexOptions{.lease = 1000ms, .renew_interval = 5000ms})),
              HasSubstr("renew_interval"));
  EXPECT_THAT(refused(validate(MutexOptions{.lease = 1000ms, .renew_interval = -1ms})), HasSubstr("renew_interval"));
}

TEST(ValidateMutexOptions, RenewIntervalZeroMeansAThirdOfTheLease) {
  EXPECT_EQ(renew_interval(MutexOptions{.lease = 900ms}), 300ms);
  EXPECT_EQ(renew_interval(MutexOptions{.lease = 900ms, .renew_interval = 100ms}), 100ms);
}

TEST(ValidateMutexOptions, WatchdogLeaseTooShortToRenewIsRefused) {
  EXPECT_THAT(refused(validate(MutexOptions{.lease = 1ms})), HasSubstr("lease"));
  EXPECT_THAT(refused(validate(MutexOptions{.lease = 2ms})), HasSubstr("too short"));
  EXPECT_TRUE(validate(MutexOptions{.lease = 3ms}).ok());
  // A fixed lease is never renewed, so a tiny one is fine.
  EXPECT_TRUE(validate(MutexOptions{.lease = 1ms, .lease_mode = LeaseMode::fixed}).ok());
}

TEST(ValidateMutexOptions, UnknownLeaseModeIsRefused) {
  EXPECT_THAT(refused(validate(MutexOptions{.lease_mode = static_cast<LeaseMode>(7)})), HasSubstr("lease_mode"));
}

TEST(ValidateClientOptions, TimeoutsMustBePositive) {
  EXPECT_TRUE(validate(ClientOptions{}).ok());
  EXPECT_TRUE(validate(ClientOptions{.op_timeout = 1ms, .max_backoff = 1ms}).ok());
  EXPECT_THAT(refused(validate(ClientOptions{.op_timeout = 0ms})), HasSubstr("op_timeout"));
  EXPECT_THAT(refused(validate(ClientOptions{.op_timeout = -5ms})), HasSubstr("op_timeout"));
  EXPECT_THAT(refused(validate(ClientOptions{.max_backoff = 0ms})), HasSubstr("max_backoff"));
  EXPECT_THAT(refused(validate(ClientOptions{.max_backoff = -1ms})), HasSubstr("max_backoff"));
}

TEST(ValidateName, EmptyIsRefused) { EXPECT_THAT(refused(validate_name("")), HasSubstr("name")); }

TEST(ValidateName, LengthLimitIsInBytes) {
  EXPECT_TRUE(validate_name(std::string(512, 'a')).ok());
  EXPECT_THAT(refused(validate_name(std::string(513, 'a'))), HasSubstr("513"));
  // 256 two-byte characters are 512 bytes; one more byte is too many.
  std::string two_byte;
  for (int i = 0; i < 256; ++i) two_byte += "\xC3\xA9";
  EXPECT_TRUE(validate_name(two_byte).ok());
  EXPECT_THAT(refused(validate_name(two_byte + "a")), HasSubstr("name"));
}

TEST(ValidateName, ValidMultiByteUtf8IsAccepted) {
  for (const char* name : {"caf\xC3\xA9",                      // é, 2 bytes
                           "\xE2\x82\xAC" "100",               // €, 3 bytes
                           "\xE6\x97\xA5\xE6\x9C\xAC",         // 日本
                           "lock-\xF0\x9F\x94\x92",            // 🔒, 4 bytes
                           "\xF4\x8F\xBF\xBF",                 // U+10FFFF, the last code point
                           "\xEE\x80\x80",                     // U+E000, just past the surrogates
                           "\xED\x9F\xBF"})                    // U+D7FF, just before them
    EXPECT_TRUE(validate_name(name).ok()) << name;
}

TEST(ValidateName, InvalidUtf8IsRefusedWithItsPosition) {
  struct Case {
    std::string name;
    const char* at;
  };
  for (const Case& c : std::initializer_list<Case>{
           {"ab\xC0\xAF", "byte 2"},               // overlong '/'
           {"\xC1\xBF", "byte 0"},                 // overlong
           {"\xE0\x80\xAF", "byte 0"},             // overlong 3-byte
           {"\xF0\x80\x80\xAF", "byte 0"},         // overlong 4-byte
           {"x\xED\xA0\x80", "byte 1"},            // U+D800, a surrogate
           {"\xED\xBF\xBF", "byte 0"},             // U+DFFF
           {"abc\xE2\x82", "byte 3"},              // truncated at the end
           {"\xE2\x82z", "byte 0"},                // truncated in the middle
           {"\xC3", "byte 0"},                     // lone lead byte
           {"a\x80", "byte 1"},                    // lone continuation byte
           {"\xF4\x90\x80\x80", "byte 0"},         // past U+10FFFF
           {"\xF8\x88\x80\x80\x80", "byte 0"},     // 5-byte form
           {"\xFF", "byte 0"},
       }) {
    std::string m = refused(validate_name(c.name));
    EXPECT_THAT(m, HasSubstr("UTF-8")) << ::testing::PrintToString(c.name);
    EXPECT_THAT(m, HasSubstr(c.at)) << ::testing::PrintToString(c.name);
  }
}

TEST(ValidateName, ControlCharactersAreRefused) {
  for (std::string name : {std::string("a\nb"), std::string("\tx"), std::string("x\x7f"), std::string("a\0b", 3),
                           std::string("\x1b[31m")}) {
    std::string m = refused(validate_name(name));
    EXPECT_THAT(m, HasSubstr("control character")) << ::testing::PrintToString(name);
  }
}

TEST(ValidateName, OrdinaryNamesAreAccepted) {
  for (const char* name : {"a", "stock:1001", "orders/eu-west/42", ".hidden", "..", "a b", "%41", "x?y=z&w"})
    EXPECT_TRUE(validate_name(name).ok()) << name;
}

}  // namespace
}  // namespace dlock::detail
