// Stock in Redis: one key per product (or segment), through hiredis.
#include "stores.h"

#include <hiredis.h>

#include <cstdlib>
#include <stdexcept>

namespace {

class RedisStock final : public Stock {
 public:
  explicit RedisStock(const std::string& url) {
    // redis://HOST:PORT
    const auto hostport = url.substr(url.find("://") + 3);
    const auto colon = hostport.rfind(':');
    host_ = hostport.substr(0, colon);
    char* end = nullptr;
    const long port = colon == std::string::npos ? 6379 : std::strtol(hostport.c_str() + colon + 1, &end, 10);
    if ((end && *end != '\0' && *end != '/') || port < 1 || port > 65535 || host_.empty())
      throw std::invalid_argument("--store " + url + ": expected redis://HOST:PORT");
    port_ = static_cast<int>(port);
    (void)command({"PING"});
  }

  std::string describe() const override { return "Redis " + host_ + ":" + std::to_string(port_); }

  long long get(const std::string& key) override {
    auto r = command({"GET", redis_key(key)});
    return r->type == REDIS_REPLY_STRING ? std::atoll(r->str) : 0;
  }

  void set(const std::string& key, long long value) override {
    (void)command({"DEL", redis_key(key) + ":fence"});
    (void)command({"SET", redis_key(key), std::to_string(value)});
  }

  bool set_fenced(const std::string& key, long long value, std::uint64_t token) override {
    static const char* script =
        "local seen = tonumber(redis.call('GET', KEYS[2]) or '0') "
        "if tonumber(ARGV[2]) < seen then return 0 end "
        "redis.call('SET', KEYS[2], ARGV[2]) redis.call('SET', KEYS[1], ARGV[1]) return 1";
    auto r = command({"EVAL", script, "2", redis_key(key), redis_key(key) + ":fence", std::to_string(value),
                      std::to_string(token)});
    return r->type == REDIS_REPLY_INTEGER && r->integer == 1;
  }

  bool take_one(const std::string& key) override {
    static const char* script =
        "local n = tonumber(redis.call('GET', KEYS[1]) or '0') "
        "if n <= 0 then return -1 end return redis.call('DECR', KEYS[1])";
    auto r = command({"EVAL", script, "1", redis_key(key)});
    return r->type == REDIS_REPLY_INTEGER && r->integer >= 0;
  }

 private:
  static std::string redis_key(const std::string& key) { return "inventory:{" + key + "}:stock"; }

  using Reply = std::unique_ptr<redisReply, decltype(&freeReplyObject)>;
  // One connection per HTTP worker thread (one store per process); a broken
  // one is replaced on the next call.
  Reply command(const std::vector<std::string>& args) {
    thread_local std::unique_ptr<redisContext, decltype(&redisFree)> ctx(nullptr, &redisFree);
    if (!ctx || ctx->err) {
      const timeval timeout{5, 0};  // a dead server is an error, not a hung request
      ctx.reset(redisConnectWithTimeout(host_.c_str(), port_, timeout));
      if (!ctx) throw std::runtime_error("Redis: out of memory");
      if (ctx->err) throw std::runtime_error("Redis " + describe() + ": " + ctx->errstr);
      redisSetTimeout(ctx.get(), timeval{30, 0});
    }
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const auto& a : args) argv.push_back(a.c_str()), lens.push_back(a.size());
    Reply r(static_cast<redisReply*>(redisCommandArgv(ctx.get(), static_cast<int>(args.size()), argv.data(), lens.data())),
            &freeReplyObject);
    if (!r) throw std::runtime_error("Redis: " + std::string(ctx->errstr));
    if (r->type == REDIS_REPLY_ERROR) throw std::runtime_error("Redis: " + std::string(r->str, r->len));
    return r;
  }

  std::string host_;
  int port_ = 6379;
};

}  // namespace

std::unique_ptr<Stock> open_redis_stock(const std::string& url) { return std::make_unique<RedisStock>(url); }
