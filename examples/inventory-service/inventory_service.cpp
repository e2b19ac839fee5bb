// The design documents' inventory service: several instances behind a load
// balancer sell the stock of one product, kept in a store they share (a
// MariaDB or PostgreSQL table, or a Redis key). Each order reads the stock,
// checks it, and writes it back minus one — the flow that oversells when two
// instances interleave, unless something serialises it.
//
//   POST /orders/<sku>         buy one: 201 and {"token":N} (0 without a lock), or 409 sold out
//   GET  /stock/<sku>          the stock left
//   PUT  /stock/<sku>?count=N  set the stock (split over the segments in segmented mode)
//   GET  /stats                this instance's accepted and refused orders, the time they took
//                              and the time its dlock mutexes were held (microseconds, summed)
//
// --protect chooses what serialises the read-check-write:
//   none        nothing: instances (and threads) interleave and oversell
//   local       a std::mutex: one instance's threads queue, the others don't
//   dlock       a dlock mutex per sku on --lock URL (any backend), with the
//               fencing token checked by the store on the write
//   segmented   the stock split over --segments rows/keys, each with its own dlock mutex
//   atomic      no lock: the store decrements only if positive, in one step
//   for-update  (SQL) no lock: the read is SELECT ... FOR UPDATE in a transaction
//   optimistic  (SQL) no lock: the write succeeds only if the row's version is
//               still the one read; on a conflict, read again
//
// Usage: inventory_service --port P --store URL --protect MODE [--lock URL] [--segments N]
//                          [--work-us N] [--instance NAME]
//   --store: redis://HOST:PORT, mysql://USER:PASSWORD@HOST:PORT/DB or postgres://USER:PASSWORD@HOST:PORT/DB
#include "stock.h"

#include <dlock/dlock.h>

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Options {
  int port = 0;
  std::string store_url;
  std::string protect = "dlock";
  std::string lock_url;
  int segments = 8;
  int work_us = 200;  // business logic between the read and the write (pricing, checks)
  std::string instance = "inventory";
};

// Adds the microseconds from its construction to its destruction to a
// counter: /stats reports how long orders took and how long locks were held.
class Stopwatch {
 public:
  explicit Stopwatch(std::atomic<long long>& total) : total_(total) {}
  ~Stopwatch() {
    total_ += std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::atomic<long long>& total_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

std::string segment_key(const std::string& sku, int i) { return sku + ":" + std::to_string(i); }

class Service {
 public:
  explicit Service(Options o) : o_(std::move(o)), stock_(open_stock(o_.store_url)) {
    if (o_.protect == "dlock" || o_.protect == "segmented") locks_ = dlock::connect(o_.lock_url);
  }

  // One order. 0 without a lock; the fencing token with one; nullopt: sold out.
  std::optional<std::uint64_t> order(const std::string& sku) {
    if (o_.protect == "dlock") {
      auto lock = locks_->mutex("stock:" + sku);
      std::unique_lock hold(lock);  // the only lines that differ from the unsafe flow
      Stopwatch held(held_us);      // (for /stats: how long the lock is held)
      return sell_one(sku, lock.token());
    }
    if (o_.protect == "local") {
      std::lock_guard hold(local_);  // serialises this instance's threads only
      return sell_one(sku, 0);
    }
    if (o_.protect == "segmented") return order_from_a_segment(sku);
    if (o_.protect == "atomic") return sold(stock_->take_one(sku));
    if (o_.protect == "for-update") return sold(stock_->sell_for_update(sku, [this] { work(); }));
    if (o_.protect == "optimistic") return sold(stock_->sell_optimistic(sku, [this] { work(); }));
    return sell_one(sku, 0);
  }

  long long stock_left(const std::string& sku) {
    if (o_.protect != "segmented") return stock_->get(sku);
    long long sum = 0;
    for (int i = 0; i < o_.segments; ++i) sum += stock_->get(segment_key(sku, i));
    return sum;
  }

  void set_stock(const std::string& sku, long long count) {
    if (o_.protect != "segmented") return stock_->set(sku, count);
    {
      std::lock_guard lk(empty_mu_);
      empty_.erase(sku);  // restocked: every instance must be told (run.sh restarts them per run)
    }
    for (int i = 0; i < o_.segments; ++i)
      stock_->set(segment_key(sku, i), count / o_.segments + (i < count % o_.segments ? 1 : 0));
  }

  const Options& options() const { return o_; }
  const Stock& stock() const { return *stock_; }
  std::atomic<long long> accepted{0}, refused{0};
  std::atomic<long long> order_us{0};  // time spent in order(), over all orders
  std::atomic<long long> held_us{0};   // time a dlock mutex was held, over all orders

 private:
  static std::optional<std::uint64_t> sold(bool yes) { return yes ? std::optional<std::uint64_t>(0) : std::nullopt; }
  void work() const { std::this_thread::sleep_for(std::chrono::microseconds(o_.work_us)); }

  // The documents' flow: read, check, (work), write back minus one.
  std::optional<std::uint64_t> sell_one(const std::string& key, std::uint64_t token) {
    const long long n = stock_->get(key);
    if (n <= 0) return std::nullopt;
    work();
    if (token == 0) {
      stock_->set(key, n - 1);
    } else if (!stock_->set_fenced(key, n - 1, token)) {
      return std::nullopt;  // our lock was lost and a newer holder wrote: refuse the order
    }
    return token;
  }
  // Segmented stock: start at a random segment and take the first free one
  // that still has stock, so buyers rarely queue on the same lock; then wait
  // in turn for the busy ones. A segment seen empty stays empty (stock only
  // goes down during a sale), so a sold-out product is found without locks.
  std::optional<std::uint64_t> order_from_a_segment(const std::string& sku) {
    thread_local std::mt19937 rng(std::random_device{}());
    const int start = static_cast<int>(rng() % static_cast<unsigned>(o_.segments));
    for (bool wait : {false, true}) {
      for (int k = 0; k < o_.segments; ++k) {
        const int i = (start + k) % o_.segments;
        if (known_empty(sku, i)) continue;
        auto lock = locks_->mutex("stock:" + sku + ":" + std::to_string(i));
        std::unique_lock hold(lock, std::defer_lock);
        if (wait ? (hold.lock(), true) : hold.try_lock()) {
          Stopwatch held(held_us);
          if (auto sold = sell_one(segment_key(sku, i), lock.token())) return sold;
          if (stock_->get(segment_key(sku, i)) <= 0) mark_empty(sku, i);
        }
      }
    }
    return std::nullopt;  // every segment is empty
  }
  bool known_empty(const std::string& sku, int i) {
    std::lock_guard lk(empty_mu_);
    auto it = empty_.find(sku);
    return it != empty_.end() && it->second[static_cast<std::size_t>(i)];
  }
  void mark_empty(const std::string& sku, int i) {
    std::lock_guard lk(empty_mu_);
    auto& v = empty_[sku];
    v.resize(static_cast<std::size_t>(o_.segments));
    v[static_cast<std::size_t>(i)] = true;
  }

  Options o_;
  std::unique_ptr<Stock> stock_;
  std::shared_ptr<dlock::Client> locks_;
  std::mutex local_;
  std::mutex empty_mu_;
  std::map<std::string, std::vector<bool>> empty_;  // segments seen empty, per sku
};

int whole_number(const std::string& flag, const std::string& value, int min, int max) {
  char* end = nullptr;
  const long n = std::strtol(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || n < min || n > max)
    throw std::invalid_argument(flag + ": a whole number in " + std::to_string(min) + ".." + std::to_string(max) +
                                ", not '" + value + "'");
  return static_cast<int>(n);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (i + 1 == argc) throw std::invalid_argument(flag + ": needs a value");
    const std::string value = argv[i + 1];
    if (flag == "--port") o.port = whole_number(flag, value, 0, 65535);
    else if (flag == "--store") o.store_url = value;
    else if (flag == "--protect") o.protect = value;
    else if (flag == "--lock") o.lock_url = value;
    else if (flag == "--segments") o.segments = whole_number(flag, value, 1, 1024);
    else if (flag == "--work-us") o.work_us = whole_number(flag, value, 0, 10'000'000);
    else if (flag == "--instance") o.instance = value;
    else throw std::invalid_argument("unknown option " + flag);
  }
  const std::vector<std::string> modes = {"none", "local", "dlock", "segmented", "atomic", "for-update", "optimistic"};
  if (std::find(modes.begin(), modes.end(), o.protect) == modes.end())
    throw std::invalid_argument("--protect: one of none, local, dlock, segmented, atomic, for-update, optimistic; not '" +
                                o.protect + "'");
  if (o.store_url.empty()) throw std::invalid_argument("--store URL is needed (redis://, mysql:// or postgres://)");
  if ((o.protect == "for-update" || o.protect == "optimistic") && o.store_url.rfind("redis://", 0) == 0)
    throw std::invalid_argument("--protect " + o.protect + " needs a SQL store (mysql:// or postgres://), not " +
                                o.store_url);
  if ((o.protect == "dlock" || o.protect == "segmented") && o.lock_url.empty())
    throw std::invalid_argument("--lock URL is needed with --protect " + o.protect);
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  std::unique_ptr<Service> service;
  try {
    service = std::make_unique<Service>(parse(argc, argv));
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "inventory_service: %s\n", e.what());
    return 64;
  } catch (const std::exception& e) {  // the store or the lock backend does not answer
    std::fprintf(stderr, "inventory_service: %s\n", e.what());
    return 69;
  }
  httplib::Server http;
  // A connection holds a worker thread while it is kept alive: enough of
  // them for the load balancer's kept connections and the burst.
  http.new_task_queue = [] { return new httplib::ThreadPool(64); };
  http.set_tcp_nodelay(true);  // small replies: no 40 ms Nagle/delayed-ACK stall
  http.Post(R"(/orders/([\w-]{1,48}))", [&](const httplib::Request& req, httplib::Response& res) {
    try {
      std::optional<std::uint64_t> token;
      {
        Stopwatch took(service->order_us);
        token = service->order(req.matches[1]);
      }
      if (token) {
        ++service->accepted;
        res.status = 201;
        res.set_content("{\"token\":" + std::to_string(*token) + "}", "application/json");
      } else {
        ++service->refused;
        res.status = 409;
        res.set_content("{\"error\":\"sold out\"}", "application/json");
      }
    } catch (const std::exception& e) {  // e.g. the lock store is unavailable
      res.status = 503;
      res.set_content(std::string("{\"error\":\"") + e.what() + "\"}", "application/json");
    }
  });
  http.Get(R"(/stock/([\w-]{1,48}))", [&](const httplib::Request& req, httplib::Response& res) {
    res.set_content(std::to_string(service->stock_left(req.matches[1])), "text/plain");
  });
  http.Put(R"(/stock/([\w-]{1,48}))", [&](const httplib::Request& req, httplib::Response& res) {
    const auto count = req.get_param_value("count");
    char* end = nullptr;
    const long long n = std::strtoll(count.c_str(), &end, 10);
    if (count.empty() || *end != '\0' || n < 0) {
      res.status = 400;
      return res.set_content("count: a whole number >= 0, not '" + count + "'\n", "text/plain");
    }
    service->set_stock(req.matches[1], n);
    res.set_content("ok", "text/plain");
  });
  http.Get("/stats", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content("{\"instance\":\"" + service->options().instance +
                        "\",\"accepted\":" + std::to_string(service->accepted.load()) +
                        ",\"refused\":" + std::to_string(service->refused.load()) +
                        ",\"conflicts\":" + std::to_string(service->stock().conflicts()) +
                        ",\"order_us\":" + std::to_string(service->order_us.load()) +
                        ",\"held_us\":" + std::to_string(service->held_us.load()) + "}",
                    "application/json");
  });
  const int port = service->options().port ? service->options().port : http.bind_to_any_port("127.0.0.1");
  if (service->options().port && !http.bind_to_port("127.0.0.1", port)) {
    std::fprintf(stderr, "inventory_service: cannot listen on 127.0.0.1:%d\n", port);
    return 69;
  }
  std::printf("%s listening on 127.0.0.1:%d (protect=%s, stock in %s)\n", service->options().instance.c_str(), port,
              service->options().protect.c_str(), service->stock().describe().c_str());
  std::fflush(stdout);
  http.listen_after_bind();
  return 0;
}
