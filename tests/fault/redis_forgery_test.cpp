// Redis handovers under a store user who may PUBLISH, SPUBLISH and
// SUBSCRIBE on every channel but may read no key: what such a user sends
// on a waiter's channel never makes lock() return while another client
// holds the lock, and a handover it overheard is worth nothing replayed.
// The test knows the waiter's queue entry and channel (it reads them as the
// server's default user: the attacker may have learned them from the code
// and a pattern subscription); the forger's own connection cannot read
// keys, which the test checks first. Each test starts its own redis-server
// (it adds an ACL user).
#include "child_process.h"
#include "ports.h"

#include <dlock/dlock.h>

#include <gtest/gtest.h>
#include <hiredis.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <memory>
#include <thread>

namespace dlock::test {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

struct FreeReply {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, FreeReply>;

// One plain connection to the test's server, as the default user or, after
// AUTH, as another one.
class Raw {
 public:
  explicit Raw(int port) {
    timeval timeout{5, 0};
    c_ = redisConnectWithTimeout("127.0.0.1", port, timeout);
    if (!c_ || c_->err) {
      redisFree(c_);  // (a failed connect still allocates its context)
      throw std::runtime_error("cannot connect to the test's redis-server");
    }
    (void)redisSetTimeout(c_, timeout);
  }
  ~Raw() { redisFree(c_); }
  Raw(const Raw&) = delete;
  Raw& operator=(const Raw&) = delete;

  Reply command(const std::vector<std::string>& words) {
    std::vector<const char*> argv;
    std::vector<std::size_t> lengths;
    for (const auto& w : words) {
      argv.push_back(w.data());
      lengths.push_back(w.size());
    }
    return Reply(static_cast<redisReply*>(
        redisCommandArgv(c_, static_cast<int>(argv.size()), argv.data(), lengths.data())));
  }
  // The next message pushed on a subscribed connection (nullptr: none within its timeout).
  Reply next() {
    void* raw = nullptr;
    if (redisGetReply(c_, &raw) != REDIS_OK) return nullptr;
    return Reply(static_cast<redisReply*>(raw));
  }
  std::string text(const std::vector<std::string>& words) {
    Reply r = command(words);
    if (!r) return "<no reply>";
    if (r->type == REDIS_REPLY_INTEGER) return std::to_string(r->integer);
    if (r->type == REDIS_REPLY_NIL) return "";
    return std::string(r->str ? r->str : "", r->str ? r->len : 0);
  }

 private:
  redisContext* c_ = nullptr;
};

class RedisForgery : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int attempt = 0; attempt < 20 && !server_; ++attempt) {
      port_ = free_port();
      auto child = std::make_unique<ChildProcess>(std::vector<std::string>{
          "/usr/bin/redis-server", "--port", std::to_string(port_), "--bind", "127.0.0.1", "--dir", dir_.path(),
          "--logfile", dir_.path() + "/redis.log", "--save", "", "--appendonly", "no"});
      const auto until = steady::now() + scaled(5s);
      while (steady::now() < until && !child->wait(0ms)) {
        try {
          Raw probe(port_);
          if (probe.text({"PING"}) == "PONG") {
            server_ = std::move(child);
            break;
          }
        } catch (const std::runtime_error&) {
        }
        std::this_thread::sleep_for(20ms);
      }
    }
    ASSERT_TRUE(server_) << "redis-server did not start (see " << dir_.path() << "/redis.log)";
    admin_ = std::make_unique<Raw>(port_);
    // May publish and subscribe on every channel; no key at all.
    ASSERT_EQ(admin_->text({"ACL", "SETUSER", "forger", "reset", "on", ">pw", "resetkeys", "&*", "+publish",
                            "+spublish", "+subscribe", "+psubscribe", "+ssubscribe", "+ping", "+get", "+lrange",
                            "+hget", "+time"}),
              "OK");
    forger_ = login();
  }
  void TearDown() override {
    if (server_) {
      server_->signal(SIGTERM);
      (void)server_->wait(scaled(5s));
    }
  }

  std::unique_ptr<Raw> login() {
    auto raw = std::make_unique<Raw>(port_);
    EXPECT_EQ(raw->text({"AUTH", "forger", "pw"}), "OK");
    return raw;
  }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }

  // The server's clock in ms (as the scripts read it).
  std::int64_t server_ms() {
    Reply t = admin_->command({"TIME"});
    return std::stoll(t->element[0]->str) * 1000 + std::stoll(t->element[1]->str) / 1000;
  }
  // The queue entries of mutex `name`, in order.
  std::vector<std::string> queue(const std::string& name) {
    Reply r = admin_->command({"LRANGE", "dlock:{" + name + "}:queue", "0", "-1"});
    std::vector<std::string> out;
    if (r && r->type == REDIS_REPLY_ARRAY)
      for (std::size_t i = 0; i < r->elements; ++i) out.emplace_back(r->element[i]->str, r->element[i]->len);
    return out;
  }
  std::string wait_for_entry(const std::string& name) {
    const auto until = steady::now() + scaled(5s);
    while (steady::now() < until) {
      if (auto q = queue(name); !q.empty()) return q.front();
      std::this_thread::sleep_for(5ms);
    }
    return {};
  }

  // Every shape of wake-up the subscriber reads, addressed to `entry`
  // waiting for `name`, on its client's channel (and, for good measure, the
  // sharded channel redis+cluster would use), handing over token `token`.
  void forge(const std::string& entry, const std::string& name, std::uint64_t token) {
    const std::string client = entry.substr(0, entry.find('/'));
    const std::string now = std::to_string(server_ms());
    const std::string head = entry + "\n" + name;
    const std::string handover = head + "\n" + std::to_string(token) + "\n" + now + "\n60000";
    for (const std::string& payload :
         {head, handover, handover + "\n" + std::string(32, '0'), handover + "\n" + std::string(32, 'f'),
          handover + "\n", handover + "\n" + entry}) {
      for (const auto& [verb, channel] :
           {std::pair<std::string, std::string>{"PUBLISH", "dlock:client:" + client},
            {"SPUBLISH", "dlock:{" + name + "}:client:" + client}}) {
        Reply r = forger_->command({verb, channel, payload});
        ASSERT_TRUE(r && r->type == REDIS_REPLY_INTEGER) << verb << " refused to the forger";
      }
    }
  }

  TempDir dir_;
  std::unique_ptr<ChildProcess> server_;
  int port_ = 0;
  std::unique_ptr<Raw> admin_, forger_;
};

TEST_F(RedisForgery, TheForgerCannotReadKeys) {
  auto holder = dlock::connect(url());
  auto m = holder->mutex("forged");
  ASSERT_TRUE(m.try_lock());
  for (const auto& words : std::vector<std::vector<std::string>>{{"HGET", "dlock:{forged}:lock", "token"},
                                                                 {"LRANGE", "dlock:{forged}:queue", "0", "-1"}}) {
    Reply r = forger_->command(words);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->type, REDIS_REPLY_ERROR) << words[0];
    if (r->type == REDIS_REPLY_ERROR) {
      EXPECT_NE(std::string(r->str).find("NOPERM"), std::string::npos) << r->str;
    }
  }
  m.unlock();
}

// A waiter past its max_barging_wait (fair: 0) is handed the lock by the
// release itself; forged handovers of every shape, with the waiter's real
// entry and channel, give it nothing while another client holds the lock,
// and lock() returns only after the real release, with a greater token.
TEST_F(RedisForgery, ForgedHandoversDoNotGrantAHeldLock) {
  auto holder_client = dlock::connect(url());
  auto waiter_client = dlock::connect(url());
  auto held = holder_client->mutex("forged");
  auto waiting = waiter_client->mutex("forged", {.fair = true});
  held.lock();
  const std::uint64_t held_token = held.token();

  // (A Mutex's hold is its thread's: each waiting thread unlocks what it took.)
  auto got = std::async(std::launch::async, [&] {
    const bool ok = waiting.try_lock_for(scaled(2s));
    if (ok) waiting.unlock();
    return ok;
  });
  const std::string entry = wait_for_entry("forged");
  ASSERT_FALSE(entry.empty()) << "the waiter never queued";
  while (got.wait_for(20ms) != std::future_status::ready) forge(entry, "forged", held_token + 1'000'000);
  EXPECT_FALSE(got.get()) << "a forged wake-up made try_lock_for return while another client held the lock";

  // lock() returns after the real release only.
  std::atomic<bool> released{false};
  struct Locked {
    bool after_release;
    std::uint64_t token;
    std::string stored;
  };
  auto locked = std::async(std::launch::async, [&] {
    waiting.lock();
    Locked out{released.load(), waiting.token(), Raw(port_).text({"HGET", "dlock:{forged}:lock", "token"})};
    waiting.unlock();
    return out;
  });
  const std::string again = wait_for_entry("forged");
  ASSERT_FALSE(again.empty());
  const auto until = steady::now() + scaled(1s);
  while (steady::now() < until && locked.wait_for(20ms) != std::future_status::ready)
    forge(again, "forged", held_token + 1'000'000);
  released = true;
  held.unlock();
  ASSERT_EQ(locked.wait_for(scaled(5s)), std::future_status::ready);
  const Locked out = locked.get();
  EXPECT_TRUE(out.after_release) << "lock() returned before the holder released";
  EXPECT_GT(out.token, held_token);
  EXPECT_EQ(out.stored, std::to_string(out.token)) << "the token lock() returned is not the one the store holds";
}

// The forger also subscribes: it overhears the real handover and sends it
// again, as it was and with another token, once the waiter holds the lock.
// Neither releases the new holder's lock nor hands another waiter anything.
TEST_F(RedisForgery, AnOverheardHandoverIsWorthNothingAgain) {
  auto listener = login();
  Reply sub = listener->command({"PSUBSCRIBE", "dlock:client:*"});
  ASSERT_TRUE(sub && sub->type == REDIS_REPLY_ARRAY);

  auto holder_client = dlock::connect(url());
  auto waiter_client = dlock::connect(url());
  auto other_client = dlock::connect(url());
  auto held = holder_client->mutex("overheard");
  auto waiting = waiter_client->mutex("overheard", {.fair = true});
  held.lock();
  // The waiter's thread holds the lock until told to let go.
  std::promise<std::uint64_t> taken;
  std::promise<void> let_go;
  std::atomic<bool> still_held{false};
  std::thread waiter_thread([&] {
    waiting.lock();
    taken.set_value(waiting.token());
    let_go.get_future().wait();
    still_held = !waiting.lost();
    waiting.unlock();
  });
  struct Joiner {
    std::thread& t;
    std::promise<void>& p;
    ~Joiner() {
      try {
        p.set_value();
      } catch (const std::future_error&) {
      }
      t.join();
    }
  } joiner{waiter_thread, let_go};
  ASSERT_FALSE(wait_for_entry("overheard").empty());
  held.unlock();
  auto taken_future = taken.get_future();
  ASSERT_EQ(taken_future.wait_for(scaled(5s)), std::future_status::ready);
  const std::uint64_t token = taken_future.get();

  // The handover as the forger heard it.
  std::string channel, grant;
  for (int i = 0; i < 10 && grant.empty(); ++i) {
    Reply m = listener->next();
    ASSERT_TRUE(m) << "the forger heard no handover";
    if (m->type == REDIS_REPLY_ARRAY && m->elements == 4) {
      std::string payload(m->element[3]->str, m->element[3]->len);
      if (payload.find("\n" + std::to_string(token) + "\n") != std::string::npos) {
        channel.assign(m->element[2]->str, m->element[2]->len);
        grant = payload;
      }
    }
  }
  ASSERT_FALSE(grant.empty()) << "no handover carried the waiter's token";
  // (It carried the wait's secret too: the lines are entry, name, token,
  // server ms, lease ms, secret.)
  EXPECT_EQ(std::count(grant.begin(), grant.end(), '\n'), 5) << grant;

  // Another waiter, queued now: the overheard grant readdressed to it, or
  // sent again as it was, changes nothing.
  auto other = other_client->mutex("overheard", {.fair = true});
  auto other_got = std::async(std::launch::async, [&] { return other.try_lock_for(scaled(1500ms)); });
  const auto queued = steady::now() + scaled(5s);
  std::string other_entry;
  while (other_entry.empty() && steady::now() < queued) {
    for (const auto& e : queue("overheard"))
      if (e.substr(0, e.find('/')) != grant.substr(0, grant.find('/'))) other_entry = e;
    std::this_thread::sleep_for(5ms);
  }
  ASSERT_FALSE(other_entry.empty()) << "the other waiter never queued";
  const std::string rest = grant.substr(grant.find('\n'));
  const std::string other_channel = "dlock:client:" + other_entry.substr(0, other_entry.find('/'));
  while (other_got.wait_for(20ms) != std::future_status::ready) {
    ASSERT_TRUE(forger_->command({"PUBLISH", channel, grant}));
    ASSERT_TRUE(forger_->command({"PUBLISH", other_channel, other_entry + rest}));
  }
  EXPECT_FALSE(other_got.get()) << "an overheard handover, readdressed, gave the lock to another waiter";
  EXPECT_EQ(admin_->text({"HGET", "dlock:{overheard}:lock", "token"}), std::to_string(token))
      << "an overheard handover sent again released the holder's lock";
}

}  // namespace
}  // namespace dlock::test
