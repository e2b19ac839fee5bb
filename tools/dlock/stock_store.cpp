#include "stock_store.h"

#include "flash_sale.h"

#include <atomic>
#include <stdexcept>
#include <vector>

#if defined(DLOCK_TOOL_WITH_REDIS) || defined(DLOCK_TOOL_WITH_POSTGRES) || defined(DLOCK_TOOL_WITH_MYSQL)
#include "core/url.h"
#endif
#if defined(DLOCK_TOOL_WITH_POSTGRES) || defined(DLOCK_TOOL_WITH_MYSQL)
#include <functional>
#include <variant>
#endif
#ifdef DLOCK_TOOL_WITH_REDIS
#include <hiredis.h>
#endif
#ifdef DLOCK_TOOL_WITH_POSTGRES
#include "backends/postgres/spelling.h"

#include <libpq-fe.h>
#endif
#ifdef DLOCK_TOOL_WITH_MYSQL
#include "backends/mysql/spelling.h"

#include <mysql.h>
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
      if (url->user)
        command({"AUTH", *url->user, *url->password});
      else
        command({"AUTH", *url->password});
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
    auto* reply =
        static_cast<redisReply*>(redisCommandArgv(ctx_, static_cast<int>(argv.size()), argv.data(), lens.data()));
    if (!reply) throw std::runtime_error("stock store: the Redis connection failed");
    std::int64_t out = 0;
    bool error = reply->type == REDIS_REPLY_ERROR;
    if (reply->type == REDIS_REPLY_INTEGER)
      out = reply->integer;
    else if (reply->type == REDIS_REPLY_STRING)
      out = std::stoll(std::string(reply->str, reply->len));
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

#if defined(DLOCK_TOOL_WITH_POSTGRES) || defined(DLOCK_TOOL_WITH_MYSQL)

// A statement's parameter: a number or a text.
using SqlParam = std::variant<std::int64_t, std::string>;

// One connection to the database of a SQL backend's URL (its dlock options
// are not the client library's). Statements number their parameters ?1, ?2, ...
class SqlStockConnection {
 public:
  virtual ~SqlStockConnection() = default;
  // Runs `sql`; the first row's columns as numbers (empty if no row), and
  // in `changed` the rows an UPDATE matched. Throws on an error.
  virtual std::vector<std::int64_t> row(const std::string& sql, const std::vector<SqlParam>& params = {},
                                        std::int64_t* changed = nullptr) = 0;
  // Makes what the URL names and fill() needs first (PostgreSQL: its schema).
  virtual void make_namespace() {}
  // The first column of the first row (0 if none).
  std::int64_t run(const std::string& sql, const std::vector<SqlParam>& params = {}, std::int64_t* changed = nullptr) {
    auto first = row(sql, params, changed);
    return first.empty() ? 0 : first[0];
  }
};

// What a database spells its own way; the rest of the stock's SQL is common.
struct StockSql {
  const char* kind;    // "postgres", "mysql": the store's name
  const char* begin;   // starts a transaction
  const char* table;   // the documents' stock table, made if missing
  const char* upsert;  // ?1 sku, ?2 stock: sets a cell, version 0
  const char* clear;   // ?1 the stock's sku, ?2 the segments' prefix
};

using OpenStockConnection = std::function<std::unique_ptr<SqlStockConnection>()>;

class SqlCell final : public StockCell {
 public:
  SqlCell(SqlStockConnection& connection, const StockSql& spelling, std::string sku)
      : connection_(connection), spelling_(spelling), sku_(std::move(sku)) {}
  std::int64_t read() override { return connection_.run("SELECT stock FROM db_stock WHERE sku = ?1", {sku_}); }
  void write(std::int64_t value) override {
    connection_.run("UPDATE db_stock SET stock = ?2 WHERE sku = ?1", {sku_, value});
  }
  bool take_if_positive() override {
    std::int64_t changed = 0;
    connection_.run("UPDATE db_stock SET stock = stock - 1 WHERE sku = ?1 AND stock > 0", {sku_}, &changed);
    return changed == 1;
  }
  bool take_for_update(const std::function<void()>& work) override {
    connection_.run(spelling_.begin);
    try {
      const std::int64_t left = connection_.run("SELECT stock FROM db_stock WHERE sku = ?1 FOR UPDATE", {sku_});
      if (left > 0) {
        work();
        write(left - 1);
      }
      connection_.run("COMMIT");
      return left > 0;
    } catch (...) {
      connection_.run("ROLLBACK");
      throw;
    }
  }
  bool take_optimistic(const std::function<void()>& work, std::uint64_t& retries) override {
    for (;;) {
      const auto seen = connection_.row("SELECT stock, version FROM db_stock WHERE sku = ?1", {sku_});
      if (seen.size() != 2 || seen[0] <= 0) return false;
      work();
      std::int64_t changed = 0;
      connection_.run("UPDATE db_stock SET stock = ?2, version = version + 1 WHERE sku = ?1 AND version = ?3",
                      {sku_, seen[0] - 1, seen[1]}, &changed);
      if (changed == 1) return true;
      ++retries;  // someone sold in between: read again
    }
  }

 private:
  SqlStockConnection& connection_;
  const StockSql& spelling_;
  std::string sku_;
};

std::string segment_sku(const std::string& product, int i) { return product + ":stock:seg:" + std::to_string(i); }

class SqlView final : public StockView {
 public:
  SqlView(std::unique_ptr<SqlStockConnection> connection, const StockSql& spelling, const std::string& product)
      : connection_(std::move(connection)), stock_(*connection_, spelling, product + ":stock") {
    for (int i = 0; i < max_segments; ++i) segments_.emplace_back(*connection_, spelling, segment_sku(product, i));
  }
  StockCell& stock() override { return stock_; }
  StockCell& segment(int i) override { return segments_.at(static_cast<std::size_t>(i)); }

 private:
  std::unique_ptr<SqlStockConnection> connection_;
  SqlCell stock_;
  std::vector<SqlCell> segments_;
};

class SqlStore final : public StockStore {
 public:
  SqlStore(OpenStockConnection open, const StockSql& spelling, std::string product)
      : open_(std::move(open)), spelling_(spelling), product_(std::move(product)) {}
  void fill(std::int64_t stock, int segments) override {
    auto c = open_();
    c->make_namespace();
    c->run(spelling_.table);
    c->run(spelling_.upsert, {product_ + ":stock", segments ? 0 : stock});
    for (int i = 0; i < segments; ++i)
      c->run(spelling_.upsert, {segment_sku(product_, i), stock / segments + (i < stock % segments ? 1 : 0)});
  }
  std::int64_t left(int segments) override {
    auto c = open_();
    std::int64_t sum = c->run("SELECT stock FROM db_stock WHERE sku = ?1", {product_ + ":stock"});
    for (int i = 0; i < segments; ++i)
      sum += c->run("SELECT stock FROM db_stock WHERE sku = ?1", {segment_sku(product_, i)});
    return sum;
  }
  std::unique_ptr<StockView> view() override { return std::make_unique<SqlView>(open_(), spelling_, product_); }
  void clear(int) override { open_()->run(spelling_.clear, {product_ + ":stock", product_ + ":stock:seg:"}); }
  const char* kind() const override { return spelling_.kind; }

 private:
  OpenStockConnection open_;
  const StockSql& spelling_;
  std::string product_;
};

// The parts of a SQL backend's URL the stock's connection uses.
detail::Url parse_sql_url(const std::string& url_text) {
  auto url = detail::parse_url(url_text);
  if (!url) throw std::runtime_error(url.status().message());
  return *url;
}

#endif  // DLOCK_TOOL_WITH_POSTGRES || DLOCK_TOOL_WITH_MYSQL

#ifdef DLOCK_TOOL_WITH_POSTGRES

constexpr StockSql postgres_stock = {
    .kind = "postgres",
    .begin = "BEGIN",
    .table =
        "CREATE TABLE IF NOT EXISTS db_stock (sku TEXT PRIMARY KEY, stock BIGINT NOT NULL, version BIGINT NOT NULL)",
    .upsert =
        "INSERT INTO db_stock (sku, stock, version) VALUES (?1, ?2, 0) "
        "ON CONFLICT (sku) DO UPDATE SET stock = excluded.stock, version = 0",
    .clear = "DELETE FROM db_stock WHERE sku = ?1 OR starts_with(sku, ?2)",
};

// One libpq connection to the database of a postgres:// URL: host, port,
// database, user, password and schema (made if missing) are used.
class PgStockConnection final : public SqlStockConnection {
 public:
  explicit PgStockConnection(const std::string& url_text) {
    const detail::Url url = parse_sql_url(url_text);
    std::vector<std::pair<std::string, std::string>> params = {
        {"host", url.endpoints.empty() ? "" : url.endpoints[0].host},
        {"port", std::to_string(url.endpoints.empty() ? 5432 : url.endpoints[0].port.value_or(5432))},
        {"dbname", url.path.size() > 1 ? url.path.substr(1) : ""},
        {"connect_timeout", "10"}};
    if (url.user) params.emplace_back("user", *url.user);
    if (url.password) params.emplace_back("password", *url.password);
    if (auto it = url.query.find("schema"); it != url.query.end()) {
      schema_ = it->second;
      if (schema_.empty() || schema_.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") != std::string::npos)
        throw std::runtime_error("stock store: schema '" + schema_ + "' must be lower-case letters, digits or '_'");
      params.emplace_back("options", "-c search_path=" + schema_);
    }
    std::vector<const char*> keys, values;
    for (const auto& [k, v] : params) {
      keys.push_back(k.c_str());
      values.push_back(v.c_str());
    }
    keys.push_back(nullptr);
    values.push_back(nullptr);
    conn_ = PQconnectdbParams(keys.data(), values.data(), 0);
    if (PQstatus(conn_) != CONNECTION_OK) {
      const std::string why = PQerrorMessage(conn_);
      PQfinish(conn_);
      throw std::runtime_error("stock store: cannot connect to " + url.redacted() + ": " + why);
    }
    PQsetNoticeProcessor(
        conn_, [](void*, const char*) {}, nullptr);
  }
  ~PgStockConnection() override { PQfinish(conn_); }
  PgStockConnection(const PgStockConnection&) = delete;
  PgStockConnection& operator=(const PgStockConnection&) = delete;

  void make_namespace() override {
    if (!schema_.empty()) run("CREATE SCHEMA IF NOT EXISTS " + schema_);
  }

  std::vector<std::int64_t> row(const std::string& sql, const std::vector<SqlParam>& params,
                                std::int64_t* changed) override {
    std::vector<std::string> texts;
    for (const auto& p : params)
      texts.push_back(std::holds_alternative<std::string>(p) ? std::get<std::string>(p)
                                                             : std::to_string(std::get<std::int64_t>(p)));
    std::vector<const char*> values;
    for (const auto& t : texts) values.push_back(t.c_str());
    PGresult* r = PQexecParams(conn_, detail::postgres::numbered(sql).c_str(), static_cast<int>(values.size()), nullptr,
                               values.data(), nullptr, nullptr, 0);
    const auto status = PQresultStatus(r);
    if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK) {
      std::string message = PQresultErrorMessage(r);
      PQclear(r);
      throw std::runtime_error("stock store: PostgreSQL said " + message);
    }
    std::vector<std::int64_t> out;
    if (status == PGRES_TUPLES_OK && PQntuples(r) > 0)
      for (int c = 0; c < PQnfields(r); ++c) out.push_back(std::atoll(PQgetvalue(r, 0, c)));
    if (changed) *changed = std::atoll(PQcmdTuples(r));
    PQclear(r);
    return out;
  }

 private:
  PGconn* conn_ = nullptr;
  std::string schema_;  // the URL's schema=, or empty
};

#endif  // DLOCK_TOOL_WITH_POSTGRES

#ifdef DLOCK_TOOL_WITH_MYSQL

constexpr StockSql mysql_stock = {
    .kind = "mysql",
    .begin = "START TRANSACTION",
    .table =
        "CREATE TABLE IF NOT EXISTS db_stock (sku VARBINARY(255) PRIMARY KEY, stock BIGINT NOT NULL, "
        "version BIGINT NOT NULL) ENGINE=InnoDB",
    .upsert =
        "INSERT INTO db_stock (sku, stock, version) VALUES (?1, ?2, 0) "
        "ON DUPLICATE KEY UPDATE stock = VALUES(stock), version = 0",
    .clear = "DELETE FROM db_stock WHERE sku = ?1 OR LEFT(sku, LENGTH(?2)) = ?2",
};

// One Connector/C connection to the database of a mysql:// URL: host,
// port, database, user and password are used. Parameters are written into
// the text as literals, as the mysql:// backend writes them.
class MyStockConnection final : public SqlStockConnection {
 public:
  explicit MyStockConnection(const std::string& url_text) : mysql_(mysql_init(nullptr)) {
    if (!mysql_) throw std::runtime_error("stock store: out of memory");
    const detail::Url url = parse_sql_url(url_text);
    const unsigned tcp = MYSQL_PROTOCOL_TCP, timeout = 10;
    mysql_options(mysql_, MYSQL_OPT_PROTOCOL, &tcp);
    mysql_options(mysql_, MYSQL_OPT_CONNECT_TIMEOUT, &timeout);
    const std::string host = url.endpoints.empty() ? "" : url.endpoints[0].host;
    const std::string database = url.path.size() > 1 ? url.path.substr(1) : "";
    if (!mysql_real_connect(mysql_, host.c_str(), url.user.value_or("").c_str(),
                            url.password ? url.password->c_str() : nullptr, database.c_str(),
                            url.endpoints.empty() ? 3306 : url.endpoints[0].port.value_or(3306), nullptr,
                            CLIENT_FOUND_ROWS)) {
      const std::string why = mysql_error(mysql_);
      mysql_close(mysql_);
      throw std::runtime_error("stock store: cannot connect to " + url.redacted() + ": " + why);
    }
  }
  ~MyStockConnection() override { mysql_close(mysql_); }
  MyStockConnection(const MyStockConnection&) = delete;
  MyStockConnection& operator=(const MyStockConnection&) = delete;

  std::vector<std::int64_t> row(const std::string& sql, const std::vector<SqlParam>& params,
                                std::int64_t* changed) override {
    std::vector<detail::sql::Param> literals;
    for (const auto& p : params) {
      if (const auto* text = std::get_if<std::string>(&p))
        literals.emplace_back(std::string_view(*text));
      else
        literals.emplace_back(std::get<std::int64_t>(p));
    }
    const std::string text = detail::mysql::with_params(sql, literals);
    if (mysql_real_query(mysql_, text.data(), text.size()) != 0)
      throw std::runtime_error(std::string("stock store: the server said ") + mysql_error(mysql_));
    std::vector<std::int64_t> out;
    MYSQL_RES* result = mysql_store_result(mysql_);
    if (result) {
      if (MYSQL_ROW r = mysql_fetch_row(result))
        for (unsigned c = 0; c < mysql_num_fields(result); ++c) out.push_back(r[c] ? std::atoll(r[c]) : 0);
      mysql_free_result(result);
    } else if (mysql_field_count(mysql_) != 0) {
      throw std::runtime_error(std::string("stock store: the server said ") + mysql_error(mysql_));
    }
    if (changed) *changed = static_cast<std::int64_t>(mysql_affected_rows(mysql_));
    return out;
  }

 private:
  MYSQL* mysql_;
};

#endif  // DLOCK_TOOL_WITH_MYSQL

}  // namespace

bool StockCell::take_for_update(const std::function<void()>&) {
  throw std::runtime_error("pessimistic: this stock store has no transactions (use a postgres:// or mysql:// backend)");
}

bool StockCell::take_optimistic(const std::function<void()>&, std::uint64_t&) {
  throw std::runtime_error("optimistic: this stock store has no transactions (use a postgres:// or mysql:// backend)");
}

std::size_t memory_store_bytes() { return sizeof(MemoryCells); }

std::unique_ptr<StockStore> open_stock_store(const std::string& kind, void* shared, const std::string& store_url,
                                             const std::string& product) {
  if (kind == "memory") return std::make_unique<MemoryStore>(shared);
#ifdef DLOCK_TOOL_WITH_REDIS
  if (kind == "redis") return std::make_unique<RedisStore>(store_url, product);
#endif
#ifdef DLOCK_TOOL_WITH_POSTGRES
  if (kind == "postgres")
    return std::make_unique<SqlStore>([store_url] { return std::make_unique<PgStockConnection>(store_url); },
                                      postgres_stock, product);
#endif
#ifdef DLOCK_TOOL_WITH_MYSQL
  if (kind == "mysql")
    return std::make_unique<SqlStore>([store_url] { return std::make_unique<MyStockConnection>(store_url); },
                                      mysql_stock, product);
#endif
  (void)store_url;
  (void)product;
  throw std::runtime_error("--stock-in: unknown store '" + kind + "'");
}

std::string default_stock_store(const std::string& backend) {
#ifdef DLOCK_TOOL_WITH_REDIS
  if (backend.starts_with("redis://") || backend.starts_with("redis+unix://")) return "redis";
#endif
#ifdef DLOCK_TOOL_WITH_POSTGRES
  if (backend.starts_with("postgres://") || backend.starts_with("postgresql://")) return "postgres";
#endif
#ifdef DLOCK_TOOL_WITH_MYSQL
  if (backend.starts_with("mysql://")) return "mysql";
#endif
  (void)backend;
  return "memory";
}

std::vector<std::string> stock_store_kinds() {
  std::vector<std::string> kinds = {"memory"};
#ifdef DLOCK_TOOL_WITH_REDIS
  kinds.push_back("redis");
#endif
#ifdef DLOCK_TOOL_WITH_POSTGRES
  kinds.push_back("postgres");
#endif
#ifdef DLOCK_TOOL_WITH_MYSQL
  kinds.push_back("mysql");
#endif
  return kinds;
}

}  // namespace dlock::cli
