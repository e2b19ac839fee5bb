#include "stock_store.h"

#include "flash_sale.h"

#include <atomic>
#include <stdexcept>

#ifdef DLOCK_TOOL_WITH_REDIS
#include "core/url.h"

#include <hiredis.h>
#endif

namespace dlock::cli {
namespace {

// Memory: std::atomic only so the cross-process accesses are defined; the
// racy modes use a separate load and store, which loses updates exactly as
// a read and a write in two statements would.
struct MemoryCells {
  std::atomic<std::int64_t> stock;
  std::atomic<std::int64_t> segment[max_segments];
};

class MemoryCell final : public StockCell {
 public:
  explicit MemoryCell(std::atomic<std::int64_t>& cell) : cell_(cell) {}
  std::int64_t read() override { return cell_.load(std::memory_order_relaxed); }
  void write(std::int64_t value) override { cell_.store(value, std::memory_order_relaxed); }
  bool take_if_positive() override {
    std::int64_t left = cell_.load();
    do {
      if (left <= 0) return false;
    } while (!cell_.compare_exchange_weak(left, left - 1));
    return true;
  }

 private:
  std::atomic<std::int64_t>& cell_;
};

class MemoryView final : public StockView {
 public:
  explicit MemoryView(MemoryCells& cells) : stock_(cells.stock) {
    for (auto& s : cells.segment) segments_.emplace_back(s);
  }
  StockCell& stock() override { return stock_; }
  StockCell& segment(int i) override { return segments_.at(static_cast<std::size_t>(i)); }

 private:
  MemoryCell stock_;
  std::vector<MemoryCell> segments_;
};

class MemoryStore final : public StockStore {
 public:
  explicit MemoryStore(void* shared) : cells_(*static_cast<MemoryCells*>(shared)) {}
  void fill(std::int64_t stock, int segments) override {
    cells_.stock = segments ? 0 : stock;
    for (int i = 0; i < segments; ++i) cells_.segment[i] = stock / segments + (i < stock % segments ? 1 : 0);
  }
  std::int64_t left(int segments) override {
    std::int64_t sum = cells_.stock.load();
    for (int i = 0; i < segments; ++i) sum += cells_.segment[i].load();
    return sum;
  }
  std::unique_ptr<StockView> view() override { return std::make_unique<MemoryView>(cells_); }
  void clear(int) override {}
  const char* kind() const override { return "memory"; }

 private:
  MemoryCells& cells_;
};

#ifdef DLOCK_TOOL_WITH_REDIS

// One hiredis connection, opened from a redis:// or redis+unix:// URL.
class RedisConnection {
 public:
  explicit RedisConnection(const std::string& url_text) {
    auto url = detail::parse_url(url_text);
    if (!url) throw std::runtime_error(url.status().message());
    const timeval timeout{5, 0};
    if (url->scheme == "redis+unix") {
      ctx_ = redisConnectUnixWithTimeout(url->path.c_str(), timeout);
    } else {
      const auto& e = url->endpoints.at(0);
      ctx_ = redisConnectWithTimeout(e.host.c_str(), e.port.value_or(6379), timeout);
    }
    if (!ctx_ || ctx_->err) throw std::runtime_error("stock store: cannot connect to " + url->redacted());
    redisSetTimeout(ctx_, timeout);
    if (url->password) {
      if (url->user) command({"AUTH", *url->user, *url->password});
      else command({"AUTH", *url->password});
    }
    std::string db = url->scheme == "redis+unix" ? (url->query.count("db") ? url->query.at("db") : "")
                                                 : (url->path.size() > 1 ? url->path.substr(1) : "");
    if (!db.empty() && db != "0") command({"SELECT", db});
  }
  ~RedisConnection() { redisFree(ctx_); }
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  // The reply as an integer (nil reads as 0); throws on an error reply.
  std::int64_t command(const std::vector<std::string>& args) {
    std::vector<const char*> argv;
    std::vector<std::size_t> lens;
    for (const auto& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    auto* reply = static_cast<redisReply*>(
        redisCommandArgv(ctx_, static_cast<int>(argv.size()), argv.data(), lens.data()));
    if (!reply) throw std::runtime_error("stock store: the Redis connection failed");
    std::int64_t out = 0;
    bool error = reply->type == REDIS_REPLY_ERROR;
    if (reply->type == REDIS_REPLY_INTEGER) out = reply->integer;
    else if (reply->type == REDIS_REPLY_STRING) out = std::stoll(std::string(reply->str, reply->len));
    std::string message = error ? std::string(reply->str, reply->len) : "";
    freeReplyObject(reply);
    if (error) throw std::runtime_error("stock store: Redis said " + message);
    return out;
  }

 private:
  redisContext* ctx_ = nullptr;
};

// One atomic step in the store: decrement only if positive.
constexpr const char* take_script =
    "local v = tonumber(redis.call('GET', KEYS[1]) or '0') "
    "if v > 0 then redis.call('DECR', KEYS[1]) return 1 end return 0";

class RedisCell final : public StockCell {
 public:
  RedisCell(RedisConnection& connection, std::string key) : connection_(connection), key_(std::move(key)) {}
  std::int64_t read() override { return connection_.command({"GET", key_}); }
  void write(std::int64_t value) override { connection_.command({"SET", key_, std::to_string(value)}); }
  bool take_if_positive() override { return connection_.command({"EVAL", take_script, "1", key_}) == 1; }

 private:
  RedisConnection& connection_;
  std::string key_;
};

std::string segment_key(const std::string& product, int i) { return product + ":stock:seg:" + std::to_string(i); }

class RedisView final : public StockView {
 public:
  RedisView(const std::string& url, const std::string& product)
      : connection_(url), stock_(connection_, product + ":stock") {
    for (int i = 0; i < max_segments; ++i) segments_.emplace_back(connection_, segment_key(product, i));
  }
  StockCell& stock() override { return stock_; }
  StockCell& segment(int i) override { return segments_.at(static_cast<std::size_t>(i)); }

 private:
  RedisConnection connection_;
  RedisCell stock_;
  std::vector<RedisCell> segments_;
};

class RedisStore final : public StockStore {
 public:
  RedisStore(std::string url, std::string product) : url_(std::move(url)), product_(std::move(product)) {}
  void fill(std::int64_t stock, int segments) override {
    RedisConnection c(url_);
    c.command({"SET", product_ + ":stock", std::to_string(segments ? 0 : stock)});
    for (int i = 0; i < segments; ++i)
      c.command({"SET", segment_key(product_, i), std::to_string(stock / segments + (i < stock % segments ? 1 : 0))});
  }
  std::int64_t left(int segments) override {
    RedisConnection c(url_);
    std::int64_t sum = c.command({"GET", product_ + ":stock"});
    for (int i = 0; i < segments; ++i) sum += c.command({"GET", segment_key(product_, i)});
    return sum;
  }
  std::unique_ptr<StockView> view() override { return std::make_unique<RedisView>(url_, product_); }
  void clear(int segments) override {
    RedisConnection c(url_);
    c.command({"DEL", product_ + ":stock"});
    for (int i = 0; i < segments; ++i) c.command({"DEL", segment_key(product_, i)});
  }
  const char* kind() const override { return "redis"; }

 private:
  std::string url_, product_;
};

#endif  // DLOCK_TOOL_WITH_REDIS

}  // namespace

std::size_t memory_store_bytes() { return sizeof(MemoryCells); }

std::unique_ptr<StockStore> open_stock_store(const std::string& kind, void* shared, const std::string& redis_url,
                                             const std::string& product) {
  if (kind == "memory") return std::make_unique<MemoryStore>(shared);
#ifdef DLOCK_TOOL_WITH_REDIS
  if (kind == "redis") return std::make_unique<RedisStore>(redis_url, product);
#else
  (void)redis_url;
  (void)product;
#endif
  throw std::runtime_error("--stock-in: unknown store '" + kind + "'");
}

std::string default_stock_store(const std::string& backend) {
#ifdef DLOCK_TOOL_WITH_REDIS
  if (backend.starts_with("redis://") || backend.starts_with("redis+unix://")) return "redis";
#else
  (void)backend;
#endif
  return "memory";
}

std::vector<std::string> stock_store_kinds() {
#ifdef DLOCK_TOOL_WITH_REDIS
  return {"memory", "redis"};
#else
  return {"memory"};
#endif
}

}  // namespace dlock::cli
