// redis+cluster:// under failovers and slot migrations. Each test starts its
// own cluster (scripts/redis-cluster.sh, REPLICAS=1: 3 masters, 1 replica
// each) in a temp dir, because it moves slots or fails a master over, and
// stops it at the end.
//
// What they show:
//   - a slot migration (SETSLOT IMPORTING/MIGRATING, MIGRATE, SETSLOT NODE)
//     of a contended lock's slot, and a CLUSTER FAILOVER of its master, in
//     the middle of a run of several clients taking turns: the fencing-
//     checking resource sees no two holders and no token twice, every
//     client keeps taking turns afterwards (no hang), a release is never
//     lost (the lock is free at once when all are done), and the lock's
//     keys are on the new master;
//   - wake-ups reach only the shard that owns the lock, and follow its slot
//     when it migrates, and a stopped master does not hold up the others';
//   - after a failover, holds in the moved slots are re-validated at once;
//   - a SIGKILLed master: the replica is promoted, the clients follow it
//     (the gap is printed; a double grant is possible and reported);
//   - dead seeds fail connect() within op_timeout.
// (The backend's behaviour without faults: tests/backends/redis_cluster_test.cpp.)
#include "child_process.h"
#include "fenced_resource.h"
#include "redis_cluster_setup.h"
#include "thrown.h"

#include <dlock/dlock.h>

#include <gtest/gtest.h>

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

namespace dlock::test {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

long long ms(steady::duration d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); }

// (tests/backends/redis_cluster_test.cpp runs the same cluster, but for the
// helpers below, as suite RedisClusterFault too: CTest's test names use it.)
class RedisClusterFault : public OwnRedisCluster {
 protected:
  // Clients taking turns on `name` (each turn a fenced write) while
  // `disturb` runs once they all have turns; then every client must take
  // more turns, the resource must have seen no violation (if `strict`),
  // and the lock must be free at once when they are done. The resource's
  // counts, and the gap from the last acquisition before `disturb` began
  // to the first after.
  struct RunOutcome {
    ResourceCounts counts;
    long long gap_ms = -1;
  };
  RunOutcome contended_run(const std::string& name, const std::function<void()>& disturb, bool strict = true);
  // Takes `name` and expects its lock key on master `port`.
  void expect_lock_on(const std::string& name, const std::string& port) {
    auto client = dlock::connect(url_, {.op_timeout = 1s});
    auto m = client->mutex(name, {.lease = 30s});
    ASSERT_TRUE(m.try_lock_for(scaled(2s)));
    EXPECT_EQ(cli(port, "EXISTS 'dlock:{" + name + "}:lock'"), "1") << "the lock is not on master " << port;
    m.unlock();
  }

  // The masters in the order CLUSTER SLOTS names them: the slot map's,
  // in which a client asks them for the map again.
  std::vector<std::string> masters_in_map_order() {
    std::vector<std::string> order;
    std::istringstream slots(cli(masters_[0], "CLUSTER SLOTS"));
    for (std::string line; std::getline(slots, line);)
      if (std::find(masters_.begin(), masters_.end(), line) != masters_.end() &&
          std::find(order.begin(), order.end(), line) == order.end())
        order.push_back(line);
    return order;
  }
  // The pid of the node on `port`; -1 if it is not known.
  pid_t pid_of(const std::string& port) {
    const std::string text = trimmed(script("pid " + port));
    return text.empty() ? -1 : static_cast<pid_t>(std::stol(text));
  }
  // A lock name whose keys master `port` serves ("" if none found).
  std::string name_on(const std::string& port) {
    for (int i = 0; i < 256; ++i)
      if (const std::string candidate = "stock:" + std::to_string(i); master_of(slot_of(candidate)) == port)
        return candidate;
    return "";
  }
  // One turn: `held` is taken, `wanted`'s thread queues, `between` runs,
  // then the release; how long `wanted` took to get the lock after it (-1:
  // never).
  long long handoff_delay(Mutex& held, Mutex& wanted, const std::function<void()>& between = [] {}) {
    EXPECT_TRUE(held.try_lock_for(scaled(2s)));
    std::atomic<bool> got{false};
    steady::time_point got_at{};
    std::thread t([&] {
      if (wanted.try_lock_for(scaled(10s))) {
        got_at = steady::now();
        got = true;
        wanted.unlock();  // (on the thread that holds it)
      }
    });
    std::this_thread::sleep_for(scaled(300ms));  // queued and subscribed
    between();
    const auto released = steady::now();
    held.unlock();
    t.join();
    EXPECT_TRUE(got) << "the waiter never got the lock";
    return got ? ms(got_at - released) : -1;
  }
};

RedisClusterFault::RunOutcome RedisClusterFault::contended_run(const std::string& name,
                                                               const std::function<void()>& disturb, bool strict) {
  FencedResource resource(dir_.path() + "/resource", true);
  constexpr int workers = 4;
  std::atomic<bool> stop{false};
  // When the disturbance began, the last acquisition before it, the first after (0: none).
  std::atomic<steady::rep> disturbed_at{steady::time_point::max().time_since_epoch().count()};
  std::atomic<steady::rep> last_before{0}, first_after{0};
  std::atomic<int> turns[workers] = {};
  std::atomic<int> errors{0};
  std::vector<std::shared_ptr<Client>> clients;
  for (int i = 0; i < 2; ++i) clients.push_back(dlock::connect(url_, {.op_timeout = 1s}));
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      auto m = clients[static_cast<std::size_t>(w % 2)]->mutex(name, {.lease = 3s});
      // Bounded: at most 60 s and 100 000 turns whatever the test does.
      const auto until = steady::now() + 60s;
      for (int i = 0; i < 100'000 && !stop && steady::now() < until; ++i) {
        try {
          if (!m.try_lock_for(500ms)) continue;
        } catch (const Error&) {
          ++errors;  // unavailable while the slot moves or the master changes: try again
          std::this_thread::sleep_for(20ms);
          continue;
        }
        const steady::rep at = steady::now().time_since_epoch().count();
        if (at < disturbed_at.load()) {
          for (auto seen = last_before.load(); seen < at && !last_before.compare_exchange_weak(seen, at);) {
          }
        } else {
          steady::rep none = 0;
          first_after.compare_exchange_strong(none, at);
        }
        if (resource.enter(m.token(), w + 1)) {
          std::this_thread::sleep_for(1ms);
          resource.leave(w + 1);
        }
        ++turns[w];
        m.unlock();
      }
    });
  }
  auto all_at_least = [&](int n) {
    for (auto& t : turns)
      if (t.load() < n) return false;
    return true;
  };
  EXPECT_TRUE(eventually([&] { return all_at_least(3); }, scaled(10s))) << "the clients never all took turns";
  int before[workers];
  for (int w = 0; w < workers; ++w) before[w] = turns[w].load();
  const auto disturbed = steady::now();
  disturbed_at = disturbed.time_since_epoch().count();
  disturb();
  // No hang: every client takes turns again.
  EXPECT_TRUE(eventually(
      [&] {
        for (int w = 0; w < workers; ++w)
          if (turns[w].load() < before[w] + 3) return false;
        return true;
      },
      scaled(15s)))
      << "a client stopped taking turns after the disturbance";
  std::printf("every client took 3 more turns %lld ms after the disturbance began; %d errors on the way\n",
              ms(steady::now() - disturbed), errors.load());
  stop = true;
  for (auto& t : threads) t.join();
  // No lost release: the lock is free at once.
  auto after = dlock::connect(url_, {.op_timeout = 1s});
  auto m = after->mutex(name);
  const bool free = m.try_lock();
  if (free) {
    m.unlock();
  } else {
    // What is left, and what the clients say of their releases: a release
    // that failed, one still on its way (freed a moment later), or one
    // never sent.
    std::string why = "the lock's key on " + master_of(slot_of(name)) + ": " +
                      cli(master_of(slot_of(name)), "HGETALL 'dlock:{" + name + "}:lock'") + "; clients:";
    for (const auto& c : clients) {
      const auto st = c->stats();
      why += " acquisitions " + std::to_string(st.acquisitions) + " releases " + std::to_string(st.releases) +
             " failed releases " + std::to_string(st.failed_releases) + ";";
    }
    const bool freed_soon = m.try_lock_for(500ms);
    if (freed_soon) m.unlock();
    ADD_FAILURE() << "the lock was left held after every client released it (" << why
                  << (freed_soon ? " free within 500 ms)" : " still held 500 ms later)");
  }
  const auto counts = resource.counts();
  EXPECT_GT(counts.accepted, 0u);
  if (strict) {
    EXPECT_EQ(counts.overlaps, 0u) << "two holders at once";
    EXPECT_EQ(counts.duplicate_tokens, 0u) << "a token issued twice";
    EXPECT_EQ(counts.stale_rejected, 0u) << "a stale holder wrote";
  }
  RunOutcome out{counts, -1};
  if (first_after.load() != 0 && last_before.load() != 0)
    out.gap_ms = ms(steady::duration(first_after.load() - last_before.load()));
  return out;
}

// The lock's slot moves to another master in the middle of the run: ASK
// (keys already moved) and TRYAGAIN (a script's keys split between the two)
// while it moves, MOVED afterwards.
TEST_F(RedisClusterFault, SlotMigrationDuringAContendedRunKeepsMutualExclusion) {
  const std::string name = "orders", slot = slot_of(name);
  const std::string from = master_of(slot);
  ASSERT_FALSE(from.empty());
  const std::string to = from == masters_[0] ? masters_[1] : masters_[0];
  contended_run(name, [&] {
    const std::string moved = trimmed(script("migrate " + slot + " " + to));
    EXPECT_EQ(moved, from) << "the migration failed: " << moved;
  });
  EXPECT_EQ(master_of(slot), to);
  expect_lock_on(name, to);
  EXPECT_TRUE(cli(from, "EXISTS 'dlock:{" + name + "}:lock'").starts_with("MOVED")) << "the old master still serves it";
}

// A slot half way through a migration, with none of a lock's keys on the
// source yet: the source answers ASK, the client follows it with ASKING to
// the target, which answers TRYAGAIN (a script's keys are not all there)
// until the migration ends; then MOVED, and the lock is taken on the target
// within the one call.
TEST_F(RedisClusterFault, AskAndTryAgainAreFollowedUntilTheMigrationEnds) {
  const std::string name = "fresh", slot = slot_of(name);
  const std::string from = master_of(slot);
  const std::string to = from == masters_[0] ? masters_[1] : masters_[0];
  const std::string from_id = cli(from, "CLUSTER MYID"), to_id = cli(to, "CLUSTER MYID");
  ASSERT_EQ(cli(to, "CLUSTER SETSLOT " + slot + " IMPORTING " + from_id), "OK");
  ASSERT_EQ(cli(from, "CLUSTER SETSLOT " + slot + " MIGRATING " + to_id), "OK");
  auto asking_calls = [&] {
    const std::string stats = cli(to, "INFO commandstats");
    const auto at = stats.find("cmdstat_asking:calls=");
    return at == std::string::npos ? 0 : std::stoi(stats.substr(at + 21));
  };
  const int asked_before = asking_calls();
  auto client = dlock::connect(url_, {.op_timeout = 3s});
  auto m = client->mutex(name, {.lease = 30s});
  std::thread finish([&] {
    std::this_thread::sleep_for(300ms);
    for (const auto& port : {to, from}) (void)cli(port, "CLUSTER SETSLOT " + slot + " NODE " + to_id);
  });
  const auto start = steady::now();
  bool locked = false;
  try {
    locked = m.try_lock_for(scaled(2s));
  } catch (const Error& e) {
    ADD_FAILURE() << e.what();
  }
  finish.join();
  EXPECT_TRUE(locked) << "not locked once the migration ended";
  EXPECT_GE(steady::now() - start, 250ms) << "locked while the slot was still migrating";
  EXPECT_GT(asking_calls(), asked_before) << "the client did not follow ASK to the importing node";
  EXPECT_EQ(cli(to, "EXISTS 'dlock:{" + name + "}:lock'"), "1");
  if (locked) m.unlock();
}

// CLUSTER FAILOVER of the lock's master (the replica catches up, then takes
// over; the old master answers MOVED from then on) in the middle of the run.
// Also: holds in slots that moved are re-validated on their new master as
// soon as their client sees the move (here: a MOVED on another call in the
// slot; the whole map is then re-read), not at their next renewal: a hold
// the new master lacks (its key deleted there, as if the grant had not been
// replicated) is lost at once; one it has is kept.
TEST_F(RedisClusterFault, FailoverDuringAContendedRunKeepsMutualExclusion) {
  const std::string name = "stock", slot = slot_of(name);
  const std::string old_master = master_of(slot);
  ASSERT_FALSE(old_master.empty());
  auto holder = dlock::connect(url_, {.op_timeout = 1s});
  // Same hash tag, so the same slot; long leases: their renewals come long after the test.
  auto gone = holder->mutex(name + "}gone", {.lease = 60s});
  auto kept = holder->mutex(name + "}kept", {.lease = 60s});
  ASSERT_TRUE(gone.try_lock());
  ASSERT_TRUE(kept.try_lock());
  std::string new_master;
  long long lost_after = -1;
  contended_run(name, [&] {
    new_master = trimmed(script("failover " + old_master));
    ASSERT_EQ(cli(new_master, "DEL 'dlock:{" + name + "}gone}:lock'"), "1");
    EXPECT_FALSE(gone.lost());
    const auto noticed = steady::now();
    auto probe = holder->mutex(name + "}probe");  // answered MOVED by the old master
    EXPECT_TRUE(probe.try_lock_for(scaled(2s)));
    if (eventually([&] { return gone.lost(); }, 2s)) lost_after = ms(steady::now() - noticed);
    probe.unlock();
  });
  ASSERT_NE(new_master, old_master);
  EXPECT_EQ(master_of(slot), new_master);
  expect_lock_on(name, new_master);
  std::printf("the hold the new master lacked: lost %lld ms after its client met the moved slot (lease 60 s)\n",
              lost_after);
  EXPECT_GE(lost_after, 0) << "the hold the new master lacks was not lost";
  EXPECT_FALSE(kept.lost()) << "a hold the new master has was reported lost";
  EXPECT_EQ(gone.unlock_checked().code(), errc::lock_lost);
  EXPECT_TRUE(kept.unlock_checked().ok());
}

// Wake-ups are sharded: a waiter SSUBSCRIBEs on the master of its lock's
// slot only (no other node has the channel, no node has a classic one), a
// release there wakes it at once (well before core's 500 ms retry), and
// when the slot migrates while it waits the server drops the subscription,
// the client subscribes again on the new master and the next release there
// still wakes it at once.
TEST_F(RedisClusterFault, WakeUpsGoToTheOwningShardAndFollowAMigration) {
  const std::string name = "parcels", slot = slot_of(name);
  const std::string from = master_of(slot);
  ASSERT_FALSE(from.empty());
  const std::string to = from == masters_[0] ? masters_[1] : masters_[0];
  auto channels_on = [&](const std::string& port) { return cli(port, "PUBSUB SHARDCHANNELS 'dlock:{" + name + "}:*'"); };
  auto holder = dlock::connect(url_, {.op_timeout = 1s});
  auto waiter = dlock::connect(url_, {.op_timeout = 1s});
  auto held = holder->mutex(name, {.lease = 30s});
  auto wanted = waiter->mutex(name, {.lease = 30s});
  auto turn = [&](const std::function<void()>& between) { return handoff_delay(held, wanted, between); };
  const long long first = turn([&] {
    for (const auto& port : masters_) {
      if (port == from) EXPECT_NE(channels_on(port), "") << "the waiter is not subscribed on the lock's master";
      else EXPECT_EQ(channels_on(port), "") << "master " << port << " has the lock's channel";
      EXPECT_EQ(cli(port, "PUBSUB CHANNELS '*'"), "") << "a classic channel on " << port;
    }
  });
  const long long moved = turn([&] {
    EXPECT_EQ(trimmed(script("migrate " + slot + " " + to)), from);
    EXPECT_TRUE(eventually([&] { return channels_on(to) != ""; }, 2s)) << "not subscribed again on the new master";
    EXPECT_EQ(channels_on(from), "");
  });
  std::printf("woken %lld ms after the release; after the slot moved, %lld ms\n", first, moved);
  EXPECT_GE(first, 0);
  EXPECT_LT(first, scaled(250ms).count());
  EXPECT_GE(moved, 0);
  EXPECT_LT(moved, scaled(250ms).count());
}

// A SIGKILLed master (no manual failover: its replica is promoted once the
// other masters have taken it for failed, after cluster-node-timeout, here
// 1.5 s) in the middle of a contended run: the clients find the promoted
// replica and take turns again, and the lock is free at the end. The
// resource may see a double grant (asynchronous replication: a lock taken
// on the dead master and not yet replicated is granted again on the new
// one, docs/backends.md): it is not asserted away, only reported, since
// the fence (a newer token, or the same token refused) is what catches it.
class KilledMaster : public RedisClusterFault {
 protected:
  KilledMaster() { node_timeout_ms_ = "1500"; }
};

TEST_F(KilledMaster, ClientsFindThePromotedReplicaAndKeepTakingTurns) {
  const std::string name = "tickets", slot = slot_of(name);
  const std::string old_master = master_of(slot);
  ASSERT_FALSE(old_master.empty());
  const std::string pid = trimmed(script("pid " + old_master));
  ASSERT_FALSE(pid.empty());
  const auto outcome = contended_run(
      name,
      [&] {
        ASSERT_EQ(::kill(static_cast<pid_t>(std::stol(pid)), SIGKILL), 0);
      },
      false);
  std::string promoted;
  EXPECT_TRUE(eventually([&] { return (promoted = master_of(slot)) != old_master && !promoted.empty(); }, 5s));
  std::printf("last acquisition before the kill -> first after: %lld ms (node timeout 1.5 s, lease 3 s); "
              "resource: %llu accepted, %llu overlaps, %llu stale rejected, %llu duplicate tokens\n",
              outcome.gap_ms, static_cast<unsigned long long>(outcome.counts.accepted),
              static_cast<unsigned long long>(outcome.counts.overlaps),
              static_cast<unsigned long long>(outcome.counts.stale_rejected),
              static_cast<unsigned long long>(outcome.counts.duplicate_tokens));
  EXPECT_GT(outcome.gap_ms, 0) << "no acquisition after the kill";
}

// A master that stops answering (SIGSTOPped): the other masters' wake-ups
// still come at once. When the waiting client's subscriber loses its link
// to the stopped master it reads the slot map again, which asks the
// masters in the map's order, the stopped one first here: with a password
// a new connection to it hangs at AUTH until op_timeout. That read (and
// any connection to a master) is the subscriber's connector thread's; it
// was the subscriber's own, which then read no other master's messages.
class StoppedMaster : public RedisClusterFault {
 protected:
  StoppedMaster() { node_timeout_ms_ = "60000"; }  // no failover while it is stopped
};

TEST_F(StoppedMaster, WakeUpsFromTheOtherMastersStillComeAtOnce) {
  const std::vector<std::string> order = masters_in_map_order();
  ASSERT_EQ(order.size(), 3u);
  // A name on the last master, and one on the first, which will stop.
  const std::string name = name_on(order.back()), stalled_name = name_on(order.front());
  ASSERT_FALSE(name.empty() || stalled_name.empty());
  const pid_t pid = pid_of(order.front());
  ASSERT_GT(pid, 0);
  for (const auto& port : masters_) ASSERT_EQ(cli(port, "CONFIG SET requirepass s3cret-pw"), "OK");
  const std::string url = "redis+cluster://default:s3cret-pw@" + url_.substr(std::string("redis+cluster://").size());
  auto holder = dlock::connect(url, {.op_timeout = 1s});
  auto waiter = dlock::connect(url, {.op_timeout = 1s});

  // The waiter's client subscribes on the first master, which then stops.
  auto blocker = holder->mutex(stalled_name, {.lease = 30s});
  ASSERT_TRUE(blocker.try_lock());
  std::thread parked([&] {
    try {
      (void)waiter->mutex(stalled_name).try_lock_for(scaled(2s));
    } catch (const Error&) {
    }
  });
  std::this_thread::sleep_for(300ms);  // queued and subscribed there
  ASSERT_TRUE(stop_process(pid));
  parked.join();
  // Its link's PING goes unanswered (1 s, then op_timeout): the link is dropped.
  std::this_thread::sleep_for(scaled(2500ms));

  auto held = holder->mutex(name, {.lease = 30s});
  auto wanted = waiter->mutex(name, {.lease = 30s});
  std::vector<long long> delays;  // release -> the waiter has the lock, per turn
  for (int i = 0; i < 4; ++i) delays.push_back(handoff_delay(held, wanted));
  ::kill(pid, SIGCONT);
  std::string list;
  for (long long d : delays) list += std::to_string(d) + " ";
  std::printf("woken after the release (ms): %s\n", list.c_str());
  EXPECT_GE(*std::min_element(delays.begin(), delays.end()), 0);
  EXPECT_LT(*std::max_element(delays.begin(), delays.end()), scaled(250ms).count())
      << "a wake-up waited for the stopped master: " << list;
}

// A client closes at once while its slot map is being read again from a
// master that does not answer (SIGSTOPped, the first in the map's order):
// a call to it failed, and the reading it set off gives the stopped master
// its share of op_timeout first. The reading gives up when the client
// closes; it used to hold the client's destruction for that share (2 s).
TEST_F(StoppedMaster, AClientClosesAtOnceWhileAMasterDoesNotAnswer) {
  const std::vector<std::string> order = masters_in_map_order();
  ASSERT_EQ(order.size(), 3u);
  const std::string stalled_name = name_on(order.front());
  ASSERT_FALSE(stalled_name.empty());
  const pid_t pid = pid_of(order.front());
  ASSERT_GT(pid, 0);
  auto client = dlock::connect(url_, {.op_timeout = 6s});
  ASSERT_TRUE(stop_process(pid));
  bool failed = false;
  try {
    (void)client->mutex(stalled_name).try_lock();
  } catch (const Error& e) {
    failed = e.kind() == errc::unavailable;
  }
  const auto closing = steady::now();
  client.reset();
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - closing);
  ::kill(pid, SIGCONT);
  EXPECT_TRUE(failed) << "a call to the stopped master did not fail unavailable";
  std::printf("the client closed in %lld ms (op_timeout 6 s)\n", static_cast<long long>(took.count()));
  EXPECT_LT(took, scaled(700ms)) << "closing the client waited for a master that does not answer";
}

// The lock's master stops answering (SIGSTOPped, as if cut off) and is the
// first the clients would ask for the slot map again: its replica is
// promoted after the node timeout (1.5 s), and the clients find it. A call
// the stopped master failed has used up its time, so the map is read again
// on a thread of its own with time of its own, each node asked for a share
// of it (the stopped one took it all, and no other was asked: the clients
// kept calling the stopped master).
TEST_F(KilledMaster, ClientsFindTheReplicaOfAStoppedMasterTheyWouldAskFirst) {
  const std::vector<std::string> order = masters_in_map_order();
  ASSERT_EQ(order.size(), 3u);
  const std::string name = name_on(order.front());
  ASSERT_FALSE(name.empty());
  const pid_t pid = pid_of(order.front());
  ASSERT_GT(pid, 0);
  const std::string slot = slot_of(name);
  const auto outcome = contended_run(name, [&] { ASSERT_TRUE(stop_process(pid)); }, false);
  ::kill(pid, SIGCONT);
  std::printf("last acquisition before the stop -> first after: %lld ms (node timeout 1.5 s, lease 3 s)\n",
              outcome.gap_ms);
  EXPECT_GT(outcome.gap_ms, 0) << "no acquisition after the stop";
  std::string now;
  EXPECT_TRUE(eventually([&] { return !(now = master_of(slot)).empty() && now != order.front(); }, 5s))
      << "the slot was not failed over: the turns after the stop proved nothing";
}

TEST(RedisClusterUrl, DeadSeedsFailWithinTheTimeout) {
  const auto start = steady::now();
  try {
    (void)dlock::connect("redis+cluster://127.0.0.1:1,127.0.0.1:2", {.op_timeout = 500ms});
    ADD_FAILURE() << "connected with no seed there";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), errc::unavailable) << e.what();
  }
  EXPECT_LT(steady::now() - start, scaled(1500ms));
}

}  // namespace
}  // namespace dlock::test
