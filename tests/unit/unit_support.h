// unit_support.h — small helpers shared by the unit tests: a timing
// multiplier for slow machines, private temp dirs and the thread count.
#pragma once

#include <dlock/dlock.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>

namespace dlock::test {

// DLOCK_TEST_TIME_SCALE (default 1) multiplies every wait and margin.
inline double time_scale() {
  static const double scale = [] {
    const char* s = std::getenv("DLOCK_TEST_TIME_SCALE");
    double v = s ? std::strtod(s, nullptr) : 1.0;
    return v > 0 ? v : 1.0;
  }();
  return scale;
}

inline std::chrono::milliseconds scaled(std::chrono::milliseconds d) {
  return std::chrono::milliseconds(static_cast<std::int64_t>(static_cast<double>(d.count()) * time_scale()));
}

// Polls `done` until it is true or `limit` (scaled) has passed.
inline bool eventually(const std::function<bool()>& done, std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + scaled(limit);
  while (!done()) {
    if (std::chrono::steady_clock::now() >= until) return done();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

// A private directory (mode 0700) removed with everything in it at scope end.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "dlock-unit-XXXXXX").string();
    if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all, ec);
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string url(std::string_view query = {}) const {
    return "file://" + path_.string() + (query.empty() ? "" : "?" + std::string(query));
  }
  // Entries in the directory (lock files and the like).
  std::size_t entries() const {
    std::size_t n = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(path_)) ++n;
    return n;
  }

 private:
  std::filesystem::path path_;
};

// Threads of this process: the entries of /proc/self/task.
inline std::size_t thread_count() {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/task")) ++n;
  return n;
}

// Runs `f` on a new thread and waits for it (for "another thread" checks).
template <class F>
auto on_other_thread(F f) {
  decltype(f()) out{};
  std::thread t([&] { out = f(); });
  t.join();
  return out;
}

// The code of a dlock::Error thrown by `f`, or no value if nothing (or
// something else) was thrown; the message goes to *message.
template <class F>
std::optional<errc> thrown_code(F f, std::string* message = nullptr) {
  try {
    f();
  } catch (const Error& e) {
    if (message) *message = e.what();
    return e.kind();
  } catch (...) {
    return std::nullopt;
  }
  return std::nullopt;
}

// What dlock::connect(url) says when it refuses `url` with `code`, before
// any server is asked (op_timeout 200 ms, for URLs that do reach for one);
// connect_checked must refuse it alike.
inline std::string refused(const std::string& url, errc code = errc::invalid_argument) {
  const ClientOptions options{.op_timeout = std::chrono::milliseconds(200)};
  std::string message;
  EXPECT_EQ(thrown_code([&] { (void)connect(url, options); }, &message), code) << url;
  EXPECT_EQ(connect_checked(url, options).code(), code) << url;
  return message;
}

// What connect(url) says when the store does not answer: unavailable, and
// within `bound` (scaled) although each call may take `op_timeout`.
inline std::string unavailable_within(const std::string& url, std::chrono::milliseconds op_timeout,
                                      std::chrono::milliseconds bound) {
  const auto start = std::chrono::steady_clock::now();
  std::string message;
  EXPECT_EQ(thrown_code([&] { (void)connect(url, {.op_timeout = op_timeout}); }, &message), errc::unavailable) << url;
  EXPECT_LT(std::chrono::steady_clock::now() - start, scaled(bound)) << url;
  return message;
}

// The password "s3cret" of `bad_url` (refused before any I/O) and of
// `unreachable_url` (a store that does not answer) shows in neither error;
// the latter names the store with "***" for it.
inline void never_echoes_the_password(const std::string& bad_url, const std::string& unreachable_url) {
  EXPECT_THAT(refused(bad_url), ::testing::Not(::testing::HasSubstr("s3cret")));
  const std::string message = refused(unreachable_url, errc::unavailable);
  EXPECT_THAT(message, ::testing::Not(::testing::HasSubstr("s3cret")));
  EXPECT_THAT(message, ::testing::HasSubstr("***"));
}

}  // namespace dlock::test
