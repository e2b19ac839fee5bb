// dlock's etcd:// mutex and `etcdctl lock` (etcd's own concurrency.Mutex) on the same
// name: they exclude each other in both orders, and a mixed queue is served in create
// revision order, with fencing tokens (create revisions) growing along it. dlock's
// Election and `etcdctl elect` (concurrency.Election): one election, each side seeing
// the other's leader by its id.
//
// etcdctl runs as child processes: `etcdctl lock NAME` prints its key once it holds the
// lock and holds it until SIGTERM; `etcdctl lock NAME sh -c ...` runs the command while
// holding it (with ETCD_LOCK_REV set; no stdin) and releases it when the command ends.
#include "child_process.h"
#include "servers.h"

#include <dlock/dlock.h>

#include <gtest/gtest.h>

#include <csignal>
#include <cstdio>
#include <future>
#include <string>
#include <thread>
#include <vector>

namespace dlock::test {
namespace {

using namespace std::chrono_literals;

// The lock under test: "<prefix>/lock" for etcdctl, (URL with that prefix, "lock") for dlock.
struct SharedLock {
  explicit SharedLock(const TempDir& dir)
      : prefix("dlock-interop/" + unique_name(dir.path())), etcdctl_name(prefix + "/lock"),
        dlock_url(server_url("etcd") + "/" + prefix + "?ttl=5s") {}
  std::string prefix;
  std::string etcdctl_name;
  std::string dlock_url;
  const std::string name = "lock";
};

std::string endpoints() {
  const std::string url = server_url("etcd");
  return url.substr(url.find("://") + 3);
}

std::vector<std::string> etcdctl(std::vector<std::string> args) {
  std::vector<std::string> argv{DLOCK_ETCDCTL, "--endpoints", endpoints()};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

// What `etcdctl <args>` prints (args quoted by the caller).
std::string etcdctl_output(const std::string& args) {
  std::string out;
  if (FILE* p = popen((std::string(DLOCK_ETCDCTL) + " --endpoints " + endpoints() + " " + args).c_str(), "r")) {
    char buf[4096];
    while (std::size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
    pclose(p);
  }
  return out;
}

// The create revision of `key` (what dlock's token is for its own keys); 0 if it is missing.
std::uint64_t create_revision(const std::string& key) {
  const std::string out = etcdctl_output("get -w fields '" + key + "'");
  const std::string field = "\"CreateRevision\" : ";
  const auto at = out.find(field);
  return at == std::string::npos ? 0 : std::stoull(out.substr(at + field.size()));
}

// The keys under the lock, one per line.
std::string keys(const SharedLock& lock) { return etcdctl_output("get --prefix --keys-only '" + lock.etcdctl_name + "/'"); }

// How many contender keys the lock has.
int contenders(const SharedLock& lock) {
  const std::string out = keys(lock);
  int n = 0;
  for (std::size_t at = 0; (at = out.find(lock.etcdctl_name + "/", at)) != std::string::npos; ++at) ++n;
  return n;
}

TEST(EtcdInterop, EtcdctlHolderExcludesDlockUntilItReleases) {
  TempDir dir;
  SharedLock lock(dir);
  ChildProcess holder(etcdctl({"lock", lock.etcdctl_name}));
  auto line = holder.read_line(scaled(10s));
  ASSERT_TRUE(line && line->starts_with(lock.etcdctl_name + "/")) << line.value_or("<nothing>");

  auto client = connect(lock.dlock_url);
  auto m = client->mutex(lock.name);
  EXPECT_FALSE(m.try_lock()) << "dlock took a lock etcdctl holds";
  EXPECT_FALSE(m.try_lock_for(300ms));
  EXPECT_EQ(contenders(lock), 1) << "a dlock waiter that gave up left its key";

  holder.signal(SIGTERM);  // etcdctl revokes its lease: its key goes
  ASSERT_TRUE(holder.wait(scaled(5s)));
  ASSERT_TRUE(m.try_lock_for(scaled(5s)));
  m.unlock();
}

TEST(EtcdInterop, DlockHolderExcludesEtcdctlUntilItReleases) {
  TempDir dir;
  SharedLock lock(dir);
  auto client = connect(lock.dlock_url);
  auto m = client->mutex(lock.name);
  m.lock();
  const auto token = m.token();
  ChildProcess waiter(etcdctl({"lock", lock.etcdctl_name, "--", "sh", "-c", "echo held $ETCD_LOCK_KEY; sleep 1"}));
  EXPECT_FALSE(waiter.read_line(scaled(1500ms))) << "etcdctl took a lock dlock holds";
  m.unlock();
  auto line = waiter.read_line(scaled(5s));
  ASSERT_TRUE(line && line->starts_with("held ")) << line.value_or("<nothing>");
  EXPECT_GT(create_revision(line->substr(5)), token) << "create revisions must grow along the queue";
  EXPECT_EQ(waiter.wait(scaled(5s)), std::optional<int>(0));
}

// dlock holds; etcdctl queues, then a second dlock client queues behind it. The release
// goes to etcdctl (first in revision order), then to the dlock waiter.
TEST(EtcdInterop, MixedQueueIsServedInRevisionOrder) {
  TempDir dir;
  SharedLock lock(dir);
  auto first = connect(lock.dlock_url);
  auto m = first->mutex(lock.name);
  m.lock();
  const auto first_token = m.token();

  ChildProcess etcdctl_waiter(etcdctl({"lock", lock.etcdctl_name, "--", "sh", "-c", "echo held $ETCD_LOCK_KEY; sleep 2"}));
  ASSERT_TRUE(eventually([&] { return contenders(lock) == 2; }, 10s)) << "etcdctl never queued";

  auto second = connect(lock.dlock_url);
  auto later = second->mutex(lock.name);
  auto got = std::async(std::launch::async, [&] {
    if (!later.try_lock_for(scaled(20s))) return std::uint64_t{0};
    const auto token = later.token();
    later.unlock();  // by the thread that holds it
    return token;
  });
  ASSERT_TRUE(eventually([&] { return contenders(lock) == 3; }, 10s)) << "the dlock waiter never queued";

  m.unlock();
  auto line = etcdctl_waiter.read_line(scaled(5s));
  ASSERT_TRUE(line && line->starts_with("held ")) << line.value_or("<nothing>");
  const auto etcdctl_rev = create_revision(line->substr(5));
  EXPECT_GT(etcdctl_rev, first_token);
  EXPECT_EQ(got.wait_for(500ms), std::future_status::timeout) << "the dlock waiter overtook etcdctl";

  // Its command ends after 2 s (etcdctl gives it no stdin): etcdctl releases.
  ASSERT_EQ(got.wait_for(scaled(5s)), std::future_status::ready);
  const auto last_token = got.get();
  EXPECT_GT(last_token, etcdctl_rev) << "tokens must grow along the queue";
  EXPECT_TRUE(eventually([&] { return contenders(lock) == 0; }, 5s)) << "keys left behind:\n" << keys(lock);
}

// etcdctl leads with the proposal "from-etcdctl": dlock sees it as the leader and can't
// lead; when etcdctl goes, dlock leads, and `etcdctl elect -l` sees dlock's id.
TEST(EtcdInterop, ElectionIsSharedWithEtcdctlElect) {
  TempDir dir;
  SharedLock lock(dir);
  ChildProcess etcdctl_leader(etcdctl({"elect", lock.etcdctl_name, "from-etcdctl"}));
  auto line = etcdctl_leader.read_line(scaled(10s));  // its key, then its proposal
  ASSERT_TRUE(line && line->starts_with(lock.etcdctl_name + "/")) << line.value_or("<nothing>");

  auto client = connect(lock.dlock_url);
  auto election = client->election(lock.name);
  EXPECT_EQ(election.leader(), std::optional<std::string>("from-etcdctl"));
  EXPECT_FALSE(election.campaign_for(500ms, "from-dlock")) << "two leaders";

  auto observer_client = connect(lock.dlock_url);
  auto observer = observer_client->election(lock.name);
  etcdctl_leader.signal(SIGTERM);  // it resigns (its lease is revoked)
  ASSERT_TRUE(etcdctl_leader.wait(scaled(5s)));
  ASSERT_TRUE(election.campaign_for(scaled(5s), "from-dlock"));
  EXPECT_EQ(observer.wait_leader_change_for(std::optional<std::string>("from-etcdctl"), scaled(5s)),
            std::optional<std::string>("from-dlock"));

  ChildProcess listener(etcdctl({"elect", "-l", lock.etcdctl_name}));
  bool seen = false;
  while (auto out = listener.read_line(scaled(5s))) {
    if (*out == "from-dlock") {
      seen = true;
      break;
    }
  }
  EXPECT_TRUE(seen) << "etcdctl elect -l did not see dlock's leader";
  election.resign();
}

// The primitives etcd has no tool for keep their keys where docs/backends.md
// says (read here with etcdctl), beside the locks' range: a Mutex, a
// SharedMutex and a Semaphore of one name are three locks. A permit's key
// holds the count it was declared with; another count is refused.
TEST(EtcdInterop, OtherPrimitivesKeepTheirKeysBesideTheLocks) {
  TempDir dir;
  SharedLock lock(dir);
  auto client = dlock::connect(lock.dlock_url);
  auto semaphore = client->semaphore(lock.name, 2);
  semaphore.acquire();
  semaphore.acquire();
  auto shared = client->shared_mutex(lock.name);
  shared.lock_shared();
  auto mutex = client->mutex(lock.name);
  ASSERT_TRUE(mutex.try_lock()) << "a Mutex met a Semaphore or SharedMutex of its name";

  const std::string permits = etcdctl_output("get --prefix '" + lock.prefix + ".semaphore/" + lock.name + "/'");
  // key, value, key, value
  std::vector<std::string> lines;
  for (std::size_t at = 0, end; at < permits.size(); at = end + 1) {
    end = permits.find('\n', at);
    if (end == std::string::npos) end = permits.size();
    lines.push_back(permits.substr(at, end - at));
  }
  ASSERT_EQ(lines.size(), 4u) << permits;
  EXPECT_EQ(lines[1], "2");
  EXPECT_EQ(lines[3], "2");
  EXPECT_NE(etcdctl_output("get --prefix --keys-only '" + lock.prefix + ".rwlock/" + lock.name + "/read/'"), "");
  EXPECT_EQ(etcdctl_output("get --prefix --keys-only '" + lock.prefix + ".rwlock/" + lock.name + "/write/'"), "");

  auto other = dlock::connect(lock.dlock_url);
  auto three = other->semaphore(lock.name, 3);
  try {
    (void)three.try_acquire();
    ADD_FAILURE() << "a semaphore declared with 3 permits was taken while 2 were declared";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("has 2 permits"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("not 3"), std::string::npos) << e.what();
  }
  mutex.unlock();
  shared.unlock_shared();
  semaphore.release(2);
  EXPECT_EQ(etcdctl_output("get --prefix --keys-only '" + lock.prefix + ".'"), "") << "keys left behind";
}

// A name's range holds no other name's keys, for etcdctl too: dlock holding
// "lock/nightly" keeps nobody out of `etcdctl lock <prefix>/lock`. A name
// with '/' is one escaped segment under <prefix>.paths/ (docs/backends.md),
// which etcdctl can name; a name without '/' keeps etcd's layout, '%' and
// all.
TEST(EtcdInterop, NamesBelowANameAreOtherLocksAndEtcdctlCanNameThem) {
  TempDir dir;
  SharedLock lock(dir);
  auto client = dlock::connect(lock.dlock_url);
  auto nested = client->mutex("lock/nightly");
  nested.lock();
  {
    ChildProcess plain(etcdctl({"lock", lock.etcdctl_name, "--", "sh", "-c", "echo held"}));
    auto line = plain.read_line(scaled(5s));
    EXPECT_EQ(line, std::optional<std::string>("held"))
        << "dlock's 'lock/nightly' kept `etcdctl lock " << lock.etcdctl_name << "` out";
    EXPECT_EQ(plain.wait(scaled(5s)), std::optional<int>(0));
  }
  nested.unlock();

  const std::string escaped = lock.prefix + ".paths/lock%2Fnightly";
  {
    ChildProcess holder(etcdctl({"lock", escaped}));
    auto line = holder.read_line(scaled(10s));
    ASSERT_TRUE(line && line->starts_with(escaped + "/")) << line.value_or("<nothing>");
    auto same = client->mutex("lock/nightly");
    EXPECT_FALSE(same.try_lock()) << "`etcdctl lock " << escaped << "` did not hold dlock's 'lock/nightly'";
    auto other = client->mutex("lock%2Fnightly");
    EXPECT_TRUE(other.try_lock()) << "'lock/nightly' held 'lock%2Fnightly' too";
    if (other.held_by_current_thread()) other.unlock();
    holder.signal(SIGTERM);
    ASSERT_TRUE(holder.wait(scaled(5s)));
  }
  {
    ChildProcess holder(etcdctl({"lock", lock.prefix + "/lock%2Fnightly"}));
    auto line = holder.read_line(scaled(10s));
    ASSERT_TRUE(line && line->starts_with(lock.prefix + "/lock%2Fnightly/")) << line.value_or("<nothing>");
    auto same = client->mutex("lock%2Fnightly");
    EXPECT_FALSE(same.try_lock()) << "`etcdctl lock " << lock.prefix << "/lock%2Fnightly` did not hold dlock's "
                                  << "'lock%2Fnightly'";
    auto other = client->mutex("lock/nightly");
    EXPECT_TRUE(other.try_lock()) << "'lock%2Fnightly' held 'lock/nightly' too";
    if (other.held_by_current_thread()) other.unlock();
    holder.signal(SIGTERM);
    ASSERT_TRUE(holder.wait(scaled(5s)));
  }
}

}  // namespace
}  // namespace dlock::test
