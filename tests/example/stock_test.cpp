// The inventory service's stock stores (examples/inventory-service/stock.h)
// against real Redis, PostgreSQL and MariaDB servers: what the service's
// modes rely on when many instances sell at once.
#include "stock.h"

#include <servers.h>

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;

// A key no other test (or earlier run) uses.
std::string fresh_key() {
  static std::atomic<int> n{0};
  return "t" + std::to_string(::getpid()) + "-" + std::to_string(++n) + "-" +
         std::to_string(std::chrono::steady_clock::now().time_since_epoch().count() % 1'000'000'007);
}

class StockOn : public testing::TestWithParam<const char*> {
 protected:
  void SetUp() override { stock_ = open_stock(dlock::test::server_url(GetParam())); }
  bool sql() const { return std::string(GetParam()) != "redis"; }
  std::unique_ptr<Stock> stock_;
};

TEST_P(StockOn, SetAndGet) {
  const auto key = fresh_key();
  EXPECT_EQ(stock_->get(key), 0) << "a key never set has no stock";
  stock_->set(key, 42);
  EXPECT_EQ(stock_->get(key), 42);
  stock_->set(key, 7);
  EXPECT_EQ(stock_->get(key), 7);
}

// A holder that lost its lock writes with an older token than the holder
// after it: the store must refuse that write and keep the newer one's.
TEST_P(StockOn, FencedWriteRefusesAnOlderToken) {
  const auto key = fresh_key();
  stock_->set(key, 10);
  EXPECT_TRUE(stock_->set_fenced(key, 9, 7));
  EXPECT_FALSE(stock_->set_fenced(key, 100, 5)) << "an older token's write went through";
  EXPECT_EQ(stock_->get(key), 9);
  EXPECT_TRUE(stock_->set_fenced(key, 8, 7)) << "the same holder writes twice";
  EXPECT_TRUE(stock_->set_fenced(key, 7, 1'000'000'000'000ULL));
  EXPECT_FALSE(stock_->set_fenced(key, 100, 999'999'999'999ULL));
  EXPECT_EQ(stock_->get(key), 7);
  stock_->set(key, 3);  // restocked: a new sale, with tokens from wherever its locks are
  EXPECT_TRUE(stock_->set_fenced(key, 2, 1));
  EXPECT_EQ(stock_->get(key), 2);
}

TEST_P(StockOn, TakeOneStopsAtZero) {
  const auto key = fresh_key();
  stock_->set(key, 2);
  EXPECT_TRUE(stock_->take_one(key));
  EXPECT_TRUE(stock_->take_one(key));
  EXPECT_FALSE(stock_->take_one(key));
  EXPECT_EQ(stock_->get(key), 0);
  EXPECT_FALSE(stock_->take_one(fresh_key())) << "a key never set has nothing to take";
}

// 8 threads (each its own connection) buy until sold out, with work between
// the read and the write: every store-native mode sells exactly the stock.
TEST_P(StockOn, StoreNativeModesSellExactlyTheStockUnderContention) {
  using Sell = std::function<bool(Stock&, const std::string&)>;
  std::vector<std::pair<std::string, Sell>> modes = {
      {"atomic", [](Stock& s, const std::string& k) { return s.take_one(k); }}};
  auto work = [] { std::this_thread::sleep_for(200us); };
  if (sql()) {
    modes.emplace_back("for-update", [&](Stock& s, const std::string& k) { return s.sell_for_update(k, work); });
    modes.emplace_back("optimistic", [&](Stock& s, const std::string& k) { return s.sell_optimistic(k, work); });
  }
  for (const auto& [mode, sell] : modes) {
    const auto key = fresh_key();
    const int stock = 60;
    stock_->set(key, stock);
    std::atomic<int> sold{0};
    std::vector<std::thread> buyers;
    for (int t = 0; t < 8; ++t)
      buyers.emplace_back([&, sell = sell] {
        for (int i = 0; i < 2 * stock; ++i) {  // bounded: more tries than there is stock
          if (!sell(*stock_, key)) break;
          ++sold;
        }
      });
    for (auto& b : buyers) b.join();
    EXPECT_EQ(sold.load(), stock) << mode;
    EXPECT_EQ(stock_->get(key), 0) << mode;
  }
}

TEST_P(StockOn, TransactionalModesOnlyOnSql) {
  EXPECT_EQ(stock_->transactional(), sql());
  if (!sql()) {
    EXPECT_THROW(stock_->sell_for_update(fresh_key(), [] {}), std::logic_error);
    EXPECT_THROW(stock_->sell_optimistic(fresh_key(), [] {}), std::logic_error);
  } else {
    EXPECT_FALSE(stock_->sell_for_update(fresh_key(), [] { FAIL() << "worked on a sold-out product"; }));
    EXPECT_FALSE(stock_->sell_optimistic(fresh_key(), [] { FAIL() << "worked on a sold-out product"; }));
  }
}

INSTANTIATE_TEST_SUITE_P(Stores, StockOn, testing::Values("redis", "postgres", "mysql"),
                         [](const auto& param_info) { return std::string(param_info.param); });

TEST(OpenStock, RefusesUrlsItCannotUse) {
  for (const char* url : {"", "127.0.0.1:6379", "ftp://127.0.0.1/x", "mysql://u:p@127.0.0.1:3306",
                          "mysql://u:p@127.0.0.1:99999/db", "mysql://u:p@:3306/db", "redis://127.0.0.1:x",
                          "redis://:6379"}) {
    EXPECT_THROW(open_stock(url), std::invalid_argument) << url;
  }
}

// A port on 127.0.0.1 nothing listens on: bound to pick it, then closed.
int closed_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

// A store that does not answer: an error within the connect timeout (5 s), not a hang.
TEST(OpenStock, DeadServerIsAnErrorNotAHang) {
  const std::string port = std::to_string(closed_port());
  for (const std::string& url : {"redis://127.0.0.1:" + port, "mysql://u:p@127.0.0.1:" + port + "/db",
                                "postgres://u:p@127.0.0.1:" + port + "/db"}) {
    const auto start = std::chrono::steady_clock::now();
    EXPECT_THROW(open_stock(url), std::runtime_error) << url;
    EXPECT_LT(std::chrono::steady_clock::now() - start, 6s) << url;
  }
}

}  // namespace
