// conformance_fixture.h — what every conformance suite's fixture has: the
// backend under test (the suite's parameter), its URL (for the embedded
// stores, in a private temp dir), a fresh client, names unique to the
// running test, and the test worker's command line.
#pragma once

#include "backends_under_test.h"
#include "child_process.h"

#include <dlock/dlock.h>

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::test {

class ConformanceFixture : public ::testing::TestWithParam<BackendUnderTest> {
 protected:
  std::string url() const { return GetParam().url(dir_.path()); }
  std::shared_ptr<Client> client() const { return dlock::connect(url()); }
  // A file for the fencing-checking resource (tests/support/fenced_resource.h).
  std::string resource_path() const { return dir_.path() + "/resource"; }
  // "<family>/<the running test's name>": each suite names its locks under
  // a family of its own, and no two tests share a name.
  static std::string name_in(std::string_view family) {
    return std::string(family) + "/" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
  }
  // The test worker (tests/support/worker.cpp) with `args`.
  static std::vector<std::string> worker(std::vector<std::string> args) {
    args.insert(args.begin(), DLOCK_TEST_WORKER);
    return args;
  }

  TempDir dir_;
};

}  // namespace dlock::test
