// The etcd:// URL checks: refused with invalid_argument and a message naming
// the problem, before any connection is attempted (no server is running);
// an unreachable cluster is unavailable within the timeout.
#include <dlock/dlock.h>

#include "unit_support.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

namespace dlock {
namespace {

using test::refused;
using test::thrown_code;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(EtcdUrl, RefusesPrefixesWithEmptyOrRelativeSegments) {
  EXPECT_THAT(refused("etcd://127.0.0.1:1/a//b"), HasSubstr("empty segment"));
  EXPECT_THAT(refused("etcd://127.0.0.1:1//a"), HasSubstr("empty segment"));
  EXPECT_THAT(refused("etcd://127.0.0.1:1/a/../b"), HasSubstr("'..'"));
  EXPECT_THAT(refused("etcd://127.0.0.1:1/a/./b"), HasSubstr("'.'"));
  EXPECT_THAT(refused("etcd://127.0.0.1:1/locks/"), HasSubstr("must not end in '/'"));
}

TEST(EtcdUrl, RefusesLeaseTtlsOutOfRange) {
  EXPECT_THAT(refused("etcd://127.0.0.1:1?ttl=1s"), HasSubstr("ttl '1s' must be from"));
  EXPECT_THAT(refused("etcd://127.0.0.1:1?ttl=2h"), HasSubstr("ttl '2h'"));
  EXPECT_THAT(refused("etcd://127.0.0.1:1?ttl=2500ms"), HasSubstr("whole seconds"));
  EXPECT_THAT(refused("etcd://127.0.0.1:1?ttl=soon"), HasSubstr("ttl"));
}

TEST(EtcdUrl, RefusesUnknownOptionsAndHalfCredentials) {
  EXPECT_THAT(refused("etcd://127.0.0.1:1?tll=2s"), HasSubstr("unknown option 'tll'"));
  EXPECT_THAT(refused("etcd://alice@127.0.0.1:1"), HasSubstr("both a user and a password"));
  EXPECT_THAT(refused("etcd://"), HasSubstr("host"));
}

// etcds:// reads its PEM files when the client is made: a file that is
// missing, or holds no PEM of the right kind, is named with its option; a
// key file's contents are never shown; the TLS options need etcds://.
TEST(EtcdUrl, RefusesTlsFilesThatCannotServe) {
  test::TempDir temp;
  const std::string dir = temp.path().string();
  const std::string not_pem = dir + "/not.pem";
  std::ofstream(not_pem) << "KeyMaterial9x7Q\n";
  const std::string cert = dir + "/cert.pem";
  std::ofstream(cert) << "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
  const std::string tls = "etcds://127.0.0.1:1/a?";

  EXPECT_THAT(refused(tls + "ca=" + dir + "/missing.pem"),
              HasSubstr("ca='" + dir + "/missing.pem' cannot be read"));
  EXPECT_THAT(refused(tls + "ca=" + dir), HasSubstr("ca='" + dir + "' cannot be read"));
  EXPECT_THAT(refused(tls + "ca="), HasSubstr("ca= needs a file name"));
  EXPECT_THAT(refused(tls + "ca=" + not_pem), HasSubstr("ca='" + not_pem + "' holds no PEM CERTIFICATE"));
  EXPECT_THAT(refused(tls + "cert=" + cert), HasSubstr("needs both cert= and key="));
  EXPECT_THAT(refused(tls + "key=" + not_pem), HasSubstr("needs both cert= and key="));
  const std::string bad_key = refused(tls + "cert=" + cert + "&key=" + not_pem);
  EXPECT_THAT(bad_key, HasSubstr("key='" + not_pem + "' holds no PEM PRIVATE KEY"));
  EXPECT_THAT(bad_key, Not(HasSubstr("KeyMaterial")));
  EXPECT_THAT(refused("etcd://127.0.0.1:1?ca=" + cert), HasSubstr("the option 'ca' is for TLS: use etcds://"));
  EXPECT_THAT(refused(tls + "cacert=" + cert), HasSubstr("unknown option 'cacert' (known: ttl, ca, cert, key)"));
}

TEST(EtcdUrl, NeverEchoesThePassword) {
  test::never_echoes_the_password("etcd://alice:s3cret@127.0.0.1:1/a//b", "etcd://alice:s3cret@127.0.0.1:1");
}

TEST(EtcdUrl, UnreachableClusterFailsWithinTheTimeout) {
  const std::string message = test::unavailable_within("etcd://127.0.0.1:1,127.0.0.1:2",
                                                       std::chrono::milliseconds(400), std::chrono::milliseconds(1400));
  EXPECT_THAT(message, HasSubstr("127.0.0.1:1"));
}

}  // namespace
}  // namespace dlock
