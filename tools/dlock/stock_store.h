// stock_store.h — where the flash sale keeps its stock.
//
// "memory": a file mapped MAP_SHARED by every worker process (the default
// for the one-host backends). "postgres" and "mysql": a row per cell in the
// table db_stock (sku, stock, version) of the backend's database (the
// default for postgres:// and mysql:// backends), where the database alone
// can also protect the stock: a row lock (pessimistic), a version check (optimistic) or one
// conditional UPDATE (atomic). "redis": keys in the Redis server the lock
// backend already uses (the default for redis:// backends), so the sale
// does what a real service does — GET, work, SET in the shared store — and
// is comparable with a Redis client library doing the same.
//
// A cell is one counter: the product's stock, or one segment of it.
// read() and write() are separate steps on purpose (the racy modes lose
// updates through them); take_if_positive() is one atomic conditional
// decrement in the store (the `atomic` mode, no lock).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace dlock::cli {

class StockCell {
 public:
  virtual ~StockCell() = default;
  virtual std::int64_t read() = 0;
  virtual void write(std::int64_t value) = 0;
  virtual bool take_if_positive() = 0;
  // Stores with transactions (a database) only; the others throw.
  // One item in one transaction that locks the row: SELECT … FOR UPDATE,
  // `work`, UPDATE. False if it was empty.
  virtual bool take_for_update(const std::function<void()>& work);
  // One item by compare-and-set on a version column: read stock and
  // version, `work`, UPDATE … WHERE version is still the one read; a lost
  // race is counted in `retries` and redone. False if it was empty.
  virtual bool take_optimistic(const std::function<void()>& work, std::uint64_t& retries);
};

// The cells one buyer thread uses (a Redis store gives each thread its own
// connection, as a service's request handlers would have).
class StockView {
 public:
  virtual ~StockView() = default;
  virtual StockCell& stock() = 0;
  virtual StockCell& segment(int i) = 0;
};

class StockStore {
 public:
  virtual ~StockStore() = default;
  // Sets the stock (segments = 0) or splits it over `segments` cells.
  virtual void fill(std::int64_t stock, int segments) = 0;
  // What is left over all cells.
  virtual std::int64_t left(int segments) = 0;
  // A view for the calling thread (call it in the worker process).
  virtual std::unique_ptr<StockView> view() = 0;
  // Removes what the sale wrote (keys in Redis).
  virtual void clear(int segments) = 0;
  virtual const char* kind() const = 0;
};

// `kind` is "memory" (cells live at `shared`, an area of at least
// memory_store_bytes() mapped by every worker), "redis" (keys named after
// `product` in the server of `store_url`), "postgres" or "mysql" (rows of the
// table db_stock in the database of `store_url`). Throws std::runtime_error.
std::unique_ptr<StockStore> open_stock_store(const std::string& kind, void* shared, const std::string& store_url,
                                             const std::string& product);
std::size_t memory_store_bytes();

// "redis", "postgres" or "mysql" if `backend` is such a URL and this build can talk
// to that store, else "memory".
std::string default_stock_store(const std::string& backend);
// The stores this build has.
std::vector<std::string> stock_store_kinds();

}  // namespace dlock::cli
