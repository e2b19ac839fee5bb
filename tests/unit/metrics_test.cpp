// Metrics and logs (dlock/metrics.h, ClientOptions::log) on the file backend:
// the Prometheus text parses back, every counter is there, counts only
// grow, and the counts say what happened; the log callback hears of a lost
// lock and a failed release, and never sees an owner id.
#include "unit_support.h"

#include <dlock/dlock.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <regex>
#include <sstream>
#include <thread>

namespace dlock::test {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

// One scrape: sample ("name{labels}") -> value, and each metric's type.
struct Scrape {
  std::map<std::string, double> samples;
  std::map<std::string, std::string> types;
};

// Parses the text exposition format strictly enough to catch a broken
// writer: HELP and TYPE before a metric's samples, names and labels
// well-formed, values numbers, every sample belonging to a declared metric.
Scrape parse(const std::string& text) {
  static const std::regex help(R"(# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) \S.*)");
  static const std::regex type(R"(# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram))");
  static const std::regex sample(
      R"(([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*"(?:,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*")*\}) (\S+))");
  Scrape out;
  std::string helped;
  std::istringstream in(text);
  std::string line;
  std::smatch m;
  while (std::getline(in, line)) {
    SCOPED_TRACE(line);
    if (std::regex_match(line, m, help)) {
      helped = m[1];
    } else if (std::regex_match(line, m, type)) {
      EXPECT_EQ(m[1], helped) << "TYPE without its HELP line just before";
      EXPECT_FALSE(out.types.contains(m[1])) << "metric declared twice";
      out.types[m[1]] = m[2];
    } else if (std::regex_match(line, m, sample)) {
      std::string metric = m[1];
      for (const char* suffix : {"_bucket", "_sum", "_count"}) {
        const std::string s = suffix;
        if (!out.types.contains(metric) && metric.ends_with(s)) metric.resize(metric.size() - s.size());
      }
      EXPECT_TRUE(out.types.contains(metric)) << "sample of an undeclared metric";
      std::size_t used = 0;
      const double value = std::stod(m[3].str(), &used);
      EXPECT_EQ(used, m[3].length()) << "value is not a number";
      EXPECT_FALSE(out.samples.contains(m[1].str() + m[2].str())) << "sample repeated";
      out.samples[m[1].str() + m[2].str()] = value;
    } else {
      ADD_FAILURE() << "not a line of the text format";
    }
  }
  return out;
}

double value(const Scrape& s, const std::string& key) {
  auto it = s.samples.find(key);
  EXPECT_NE(it, s.samples.end()) << key << " missing";
  return it == s.samples.end() ? -1 : it->second;
}

// Collects what the client logs, from any thread.
struct LogSink {
  std::mutex mu;
  std::vector<std::pair<LogLevel, std::string>> lines;
  std::function<void(LogLevel, std::string_view)> callback() {
    return [this](LogLevel level, std::string_view message) {
      std::lock_guard lk(mu);
      lines.emplace_back(level, std::string(message));
    };
  }
  std::vector<std::pair<LogLevel, std::string>> snapshot() {
    std::lock_guard lk(mu);
    return lines;
  }
};

const char* const counters[] = {"acquisitions",    "releases",        "failed_releases",  "renewals",
                                "renewal_batches", "renewal_failures", "leases_lost",      "waits",
                                "wakeups",         "disconnects",      "reconnects"};

TEST(Metrics, TextParsesBackWithEveryCounterMonotoneAndCountsThatMatchWhatHappened) {
  TempDir dir;
  LogSink log;
  auto client = connect("file://" + dir.path().string() + "/locks", {.log = log.callback()});
  const std::string labels = R"({backend="file",instance="orders-1"})";

  const auto before = parse(metrics_text(*client, R"(instance="orders-1")"));
  for (const char* c : counters) {
    const std::string name = std::string("dlock_") + c + "_total";
    EXPECT_EQ(before.types.at(name), "counter") << name;
    EXPECT_EQ(value(before, name + labels), 0) << name;
  }
  ASSERT_EQ(before.types.at("dlock_acquire_duration_seconds"), "histogram");
  EXPECT_EQ(value(before, "dlock_acquire_duration_seconds_count" + labels), 0);

  // Uncontended: one acquisition, one release.
  auto a = client->mutex("a");
  a.lock();
  a.unlock();
  // Contended: the second thread waits until the first lets go.
  auto b = client->mutex("b");
  b.lock();
  std::atomic<bool> got{false};
  std::thread waiter([&] {
    auto mine = client->mutex("b");
    got = mine.try_lock_for(scaled(5s));
    if (got) mine.unlock();
  });
  std::this_thread::sleep_for(scaled(100ms));
  b.unlock();
  waiter.join();
  ASSERT_TRUE(got);
  // A fixed lease that runs out while held: lost, then its release fails.
  auto c = client->mutex("c", {.lease = 100ms, .lease_mode = LeaseMode::fixed});
  c.lock();
  ASSERT_TRUE(eventually([&] { return c.lost(); }, 5s));
  EXPECT_EQ(c.unlock_checked().code(), errc::lock_lost);

  const auto after = parse(metrics_text(*client, R"(instance="orders-1")"));
  for (const auto& [key, v] : before.samples) {
    ASSERT_TRUE(after.samples.contains(key)) << key << " disappeared";
    EXPECT_GE(after.samples.at(key), v) << key << " went down";
  }
  EXPECT_EQ(value(after, "dlock_acquisitions_total" + labels), 4);
  EXPECT_EQ(value(after, "dlock_releases_total" + labels), 3);
  EXPECT_EQ(value(after, "dlock_failed_releases_total" + labels), 1);
  EXPECT_EQ(value(after, "dlock_leases_lost_total" + labels), 1);
  EXPECT_EQ(value(after, "dlock_waits_total" + labels), 1);
  EXPECT_EQ(value(after, "dlock_disconnects_total" + labels), 0);

  // The histogram: cumulative buckets, +Inf == count == acquisitions, a
  // sum that includes the ~100 ms the waiter waited.
  double previous = 0;
  for (double bound : LatencyHistogram::bounds) {
    std::ostringstream le;
    le << bound;
    const double n = value(after, R"(dlock_acquire_duration_seconds_bucket{backend="file",instance="orders-1",le=")" +
                                      le.str() + "\"}");
    EXPECT_GE(n, previous) << "bucket le=" << bound << " is not cumulative";
    previous = n;
  }
  const double count = value(after, "dlock_acquire_duration_seconds_count" + labels);
  EXPECT_EQ(value(after, R"(dlock_acquire_duration_seconds_bucket{backend="file",instance="orders-1",le="+Inf"})"),
            count);
  EXPECT_EQ(count, 4);
  EXPECT_GE(value(after, "dlock_acquire_duration_seconds_sum" + labels), 0.05);
  EXPECT_LT(value(after, R"(dlock_acquire_duration_seconds_bucket{backend="file",instance="orders-1",le="0.01"})"),
            count)
      << "the waiter's ~100 ms wait should be above the 10 ms bucket";

  // The log heard of the lost lock and the failed release, as warnings,
  // and no message carries an owner id (32 hex digits).
  const auto lines = log.snapshot();
  auto logged = [&](const std::string& text) {
    return std::any_of(lines.begin(), lines.end(), [&](const auto& l) {
      return l.first == LogLevel::warning && l.second.find(text) != std::string::npos;
    });
  };
  EXPECT_TRUE(logged("lock 'c' lost: its fixed lease ran out")) << "no warning about the lost lock";
  EXPECT_TRUE(logged("releasing lock 'c' failed")) << "no warning about the failed release";
  static const std::regex hex_run("[0-9a-f]{16}");
  for (const auto& [level, message] : lines) {
    EXPECT_FALSE(std::regex_search(message, hex_run)) << "a log message carries an id: " << message;
  }
}

TEST(Metrics, TheLogIsSilentByDefaultAndALoggerThatThrowsBreaksNothing) {
  TempDir dir;
  std::atomic<int> calls{0};  // called from the lease keeper and from unlock()
  auto client = connect("file://" + dir.path().string() + "/locks", {.log = [&](LogLevel, std::string_view) {
                                                               ++calls;
                                                               throw std::runtime_error("logger down");
                                                             }});
  auto c = client->mutex("c", {.lease = 50ms, .lease_mode = LeaseMode::fixed});
  c.lock();
  ASSERT_TRUE(eventually([&] { return c.lost(); }, 5s));
  c.unlock();  // noexcept: the throwing logger is ignored
  EXPECT_GE(calls, 1);
  EXPECT_EQ(client->stats().leases_lost, 1u);
  // A second client without a logger: nothing to call, still counted.
  auto quiet = connect("file://" + dir.path().string() + "/locks");
  auto d = quiet->mutex("d", {.lease = 50ms, .lease_mode = LeaseMode::fixed});
  d.lock();
  ASSERT_TRUE(eventually([&] { return d.lost(); }, 5s));
  d.unlock();
  EXPECT_EQ(quiet->stats().leases_lost, 1u);
}

TEST(Metrics, ExtraLabelsAndTheBackendLabelAreEscaped) {
  ClientStats stats;
  stats.acquisitions = 7;
  const auto text = metrics_text(stats, "we\"ird\\name\n");
  EXPECT_THAT(text, HasSubstr(R"(dlock_acquisitions_total{backend="we\"ird\\name\n"} 7)"));
  const auto parsed = parse(text);
  EXPECT_EQ(parsed.samples.size(), std::size(counters) + LatencyHistogram::bounds.size() + 3);
}

}  // namespace
}  // namespace dlock::test
