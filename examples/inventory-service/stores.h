// The three stock stores behind open_stock, one file each, and what the SQL
// ones share. Each takes its URL as open_stock received it.
#pragma once

#include "stock.h"

#include <atomic>
#include <memory>
#include <string>
#include <variant>
#include <vector>

std::unique_ptr<Stock> open_redis_stock(const std::string& url);
std::unique_ptr<Stock> open_mariadb_stock(const std::string& url);
std::unique_ptr<Stock> open_postgres_stock(const std::string& url);

// Stock in a table, one row per key:
//
//   inventory(sku VARCHAR(64) PRIMARY KEY, stock BIGINT, version BIGINT, fence BIGINT)
//
// `version` goes up with every write (the optimistic mode compares it);
// `fence` is the newest fencing token a lock holder wrote with. The flows are
// written once here in SQL both databases accept; a client only runs a
// statement on its thread's connection.
class SqlStock : public Stock {
 public:
  long long get(const std::string& key) override;
  void set(const std::string& key, long long value) override;
  bool set_fenced(const std::string& key, long long value, std::uint64_t token) override;
  bool take_one(const std::string& key) override;
  bool transactional() const override { return true; }
  bool sell_for_update(const std::string& key, const std::function<void()>& work) override;
  bool sell_optimistic(const std::string& key, const std::function<void()>& work) override;
  long long conflicts() const override { return conflicts_.load(); }

 protected:
  using Param = std::variant<std::string, long long>;
  struct Result {
    std::vector<long long> row;  // the first row's columns as integers; empty if no row
    long long changed = 0;       // rows an UPDATE or INSERT changed
  };
  // One statement on this thread's connection; `?` marks each parameter.
  // Throws std::runtime_error on an error (and drops the connection, so the
  // next call starts afresh).
  virtual Result run(const std::string& sql, const std::vector<Param>& params) = 0;
  // INSERT or UPDATE (sku, stock) = (?, ?), version + 1 and fence = 0: the dialects differ here only.
  virtual std::string upsert_sql() const = 0;
  void create_table();

 private:
  std::atomic<long long> conflicts_{0};
};
