// The inventory service's stock store: a counter per key (a product, or one
// segment of it), kept in Redis or in a SQL table. Every call may block on
// the store's network round trips and throws std::runtime_error if the store
// fails (the service answers 503). Safe to call from many threads: each
// thread uses its own connection.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

class Stock {
 public:
  virtual ~Stock() = default;

  // What holds the stock, for the logs: "Redis 127.0.0.1:6379", "MariaDB ...".
  virtual std::string describe() const = 0;

  // The plain reads and writes of the documents' unsafe flow.
  virtual long long get(const std::string& key) = 0;
  // Restock: sets the count and forgets the fencing tokens seen (a new sale).
  virtual void set(const std::string& key, long long value) = 0;

  // The write of a lock holder, fenced: the store refuses a token older than
  // the newest it has accepted for this key (a holder that lost its lock).
  // False if refused.
  virtual bool set_fenced(const std::string& key, long long value, std::uint64_t token) = 0;

  // The store-native way: decrement only if positive, in one step (a Lua
  // script, or UPDATE ... WHERE stock > 0). False if there was none.
  virtual bool take_one(const std::string& key) = 0;

  // True if the store has transactions: sell_for_update and sell_optimistic work.
  virtual bool transactional() const { return false; }

  // Read, check, `work`, write back minus one in a transaction that locks the
  // row when it is read (SELECT ... FOR UPDATE). False if sold out.
  virtual bool sell_for_update(const std::string& key, const std::function<void()>& work);

  // Read with the row's version, check, `work`, write back minus one only if
  // the version is unchanged; on a conflict read again. False if sold out.
  virtual bool sell_optimistic(const std::string& key, const std::function<void()>& work);

  // How many optimistic writes lost to a concurrent one and were retried.
  virtual long long conflicts() const { return 0; }
};

// redis://HOST:PORT, mysql://USER:PASSWORD@HOST:PORT/DATABASE (MariaDB or
// MySQL) or postgres://USER:PASSWORD@HOST:PORT/DATABASE. On SQL the table
// `inventory` is created if missing. Throws std::invalid_argument for a URL
// it cannot use, std::runtime_error if the store does not answer.
std::unique_ptr<Stock> open_stock(const std::string& url);
