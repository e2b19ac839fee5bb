// The error list and its two channels (dlock/error.h, dlock/status.h).
#include <dlock/error.h>
#include <dlock/status.h>

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace dlock {
namespace {

TEST(Error, CategoryAndNames) {
  EXPECT_STREQ(error_category().name(), "dlock");
  EXPECT_STREQ(to_string(errc::invalid_argument), "invalid_argument");
  EXPECT_STREQ(to_string(errc::lock_lost), "lock_lost");
  EXPECT_STREQ(to_string(errc::would_deadlock), "would_deadlock");
  std::error_code ec = errc::not_owner;
  EXPECT_EQ(&ec.category(), &error_category());
  EXPECT_EQ(ec.value(), static_cast<int>(errc::not_owner));
  EXPECT_FALSE(ec.message().empty());
}

TEST(Error, IsASystemErrorWithTheMessage) {
  try {
    throw Error(errc::unavailable, "store: connection refused");
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), make_error_code(errc::unavailable));
    EXPECT_NE(std::string(e.what()).find("store: connection refused"), std::string::npos);
    EXPECT_EQ(dynamic_cast<const Error&>(e).kind(), errc::unavailable);
  }
}

TEST(Status, OkAndErrorAndThrow) {
  Status ok;
  EXPECT_TRUE(ok.ok());
  EXPECT_NO_THROW(ok.throw_if_error());
  Status bad(errc::timeout, "waited 1s");
  EXPECT_FALSE(bad.ok());
  EXPECT_FALSE(static_cast<bool>(bad));
  EXPECT_EQ(bad.code(), errc::timeout);
  EXPECT_THROW(bad.throw_if_error(), Error);
}

TEST(Result, ValueOrError) {
  Result<int> v(7);
  EXPECT_TRUE(v.ok());
  EXPECT_EQ(v.value(), 7);
  EXPECT_TRUE(v.status().ok());
  Result<int> e(errc::invalid_argument, "name: must not be empty");
  EXPECT_FALSE(e.ok());
  EXPECT_EQ(e.code(), errc::invalid_argument);
  try {
    (void)e.value();
    ADD_FAILURE() << "value() of an error did not throw";
  } catch (const Error& err) {
    EXPECT_EQ(err.kind(), errc::invalid_argument);
    EXPECT_NE(std::string(err.what()).find("name: must not be empty"), std::string::npos);
  }
  Result<std::unique_ptr<int>> moved(std::make_unique<int>(3));
  EXPECT_EQ(*std::move(moved).value(), 3);
}

}  // namespace
}  // namespace dlock
