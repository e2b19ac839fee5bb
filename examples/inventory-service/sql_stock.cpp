// The stock flows on a SQL table, written once for MariaDB and PostgreSQL.
#include "stores.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <stdexcept>
#include <thread>

namespace {

// BEGIN now; ROLLBACK when it goes out of scope uncommitted (sold out, or a
// statement failed), so a thread's connection never stays in a transaction.
class Transaction {
 public:
  using Run = std::function<void(const std::string&)>;
  explicit Transaction(Run run) : run_(std::move(run)) { run_("BEGIN"); }
  ~Transaction() {
    if (open_) try {
        run_("ROLLBACK");
      } catch (const std::exception&) {  // the connection is gone, and the transaction with it
      }
  }
  void commit() {
    run_("COMMIT");
    open_ = false;
  }

 private:
  Run run_;
  bool open_ = true;
};

}  // namespace

// Every instance creates the table at start. On PostgreSQL two concurrent
// CREATE TABLE IF NOT EXISTS can both pass the check and one fails on the
// catalog's unique index: then the table exists, and the retry sees it.
void SqlStock::create_table() {
  for (int attempt = 1;; ++attempt) {
    try {
      (void)run(
          "CREATE TABLE IF NOT EXISTS inventory (sku VARCHAR(64) PRIMARY KEY, stock BIGINT NOT NULL,"
          " version BIGINT NOT NULL DEFAULT 0, fence BIGINT NOT NULL DEFAULT 0)",
          {});
      return;
    } catch (const std::runtime_error&) {
      if (attempt == 3) throw;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
}

long long SqlStock::get(const std::string& key) {
  auto r = run("SELECT stock FROM inventory WHERE sku = ?", {key});
  return r.row.empty() ? 0 : r.row[0];
}

void SqlStock::set(const std::string& key, long long value) { (void)run(upsert_sql(), {key, value}); }

// The fencing check is the WHERE clause: the row changes only if no newer
// token has written it.
bool SqlStock::set_fenced(const std::string& key, long long value, std::uint64_t token) {
  const auto t = static_cast<long long>(token);
  return run("UPDATE inventory SET stock = ?, fence = ?, version = version + 1 WHERE sku = ? AND fence <= ?",
             {value, t, key, t})
             .changed == 1;
}

bool SqlStock::take_one(const std::string& key) {
  return run("UPDATE inventory SET stock = stock - 1, version = version + 1 WHERE sku = ? AND stock > 0", {key})
             .changed == 1;
}

// The documents' flow inside a transaction: the row lock taken by the read
// makes every other buyer's read wait until we commit.
bool SqlStock::sell_for_update(const std::string& key, const std::function<void()>& work) {
  Transaction tx([this](const std::string& sql) { (void)run(sql, {}); });
  auto r = run("SELECT stock FROM inventory WHERE sku = ? FOR UPDATE", {key});
  if (r.row.empty() || r.row[0] <= 0) return false;
  work();
  (void)run("UPDATE inventory SET stock = ?, version = version + 1 WHERE sku = ?", {r.row[0] - 1, key});
  tx.commit();
  return true;
}

// No lock held while working: the write succeeds only if nobody wrote since
// our read (same version); otherwise read again, after a random pause that
// doubles with each conflict (without it, 100 buyers of one row retry in
// lockstep and nearly all of the store's work is lost writes). Bounded in
// time so a store that keeps conflicting gives an error, not a hung request.
bool SqlStock::sell_optimistic(const std::string& key, const std::function<void()>& work) {
  thread_local std::mt19937 random(std::random_device{}());
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  long long pause_us = 100;
  for (;;) {
    auto r = run("SELECT stock, version FROM inventory WHERE sku = ?", {key});
    if (r.row.size() < 2 || r.row[0] <= 0) return false;
    work();
    if (run("UPDATE inventory SET stock = ?, version = version + 1 WHERE sku = ? AND version = ?",
            {r.row[0] - 1, key, r.row[1]})
            .changed == 1)
      return true;
    ++conflicts_;
    if (std::chrono::steady_clock::now() > give_up)
      throw std::runtime_error("optimistic: still conflicting after 30 s");
    std::this_thread::sleep_for(std::chrono::microseconds(random() % static_cast<unsigned long long>(pause_us + 1)));
    pause_us = std::min(pause_us * 2, 20'000LL);
  }
}
