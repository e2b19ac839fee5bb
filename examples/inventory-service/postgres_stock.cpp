// Stock in a PostgreSQL table, through libpq.
#include "stores.h"

#include <libpq-fe.h>

#include <cstdlib>
#include <stdexcept>

namespace {

class PostgresStock final : public SqlStock {
 public:
  explicit PostgresStock(std::string url) : url_(std::move(url)) { create_table(); }

  std::string describe() const override {
    PGconn* db = connection();
    return std::string("PostgreSQL ") + PQhost(db) + ":" + PQport(db) + "/" + PQdb(db) + ", table inventory";
  }

 protected:
  std::string upsert_sql() const override {
    return "INSERT INTO inventory (sku, stock) VALUES (?, ?)"
           " ON CONFLICT (sku) DO UPDATE SET stock = EXCLUDED.stock, version = inventory.version + 1, fence = 0";
  }

  Result run(const std::string& sql, const std::vector<Param>& params) override {
    PGconn* db = connection();
    std::string text;  // `?` becomes $1, $2, ...; the values go as text, typed by the server
    int n = 0;
    for (char c : sql) text += c == '?' ? "$" + std::to_string(++n) : std::string(1, c);
    std::vector<std::string> values;
    for (const auto& p : params)
      values.push_back(std::holds_alternative<long long>(p) ? std::to_string(std::get<long long>(p))
                                                            : std::get<std::string>(p));
    std::vector<const char*> pointers;
    for (const auto& v : values) pointers.push_back(v.c_str());
    std::unique_ptr<PGresult, decltype(&PQclear)> res(
        PQexecParams(db, text.c_str(), static_cast<int>(values.size()), nullptr, pointers.data(), nullptr, nullptr, 0),
        &PQclear);
    Result r;
    switch (PQresultStatus(res.get())) {
      case PGRES_TUPLES_OK:
        if (PQntuples(res.get()) > 0)
          for (int i = 0; i < PQnfields(res.get()); ++i) r.row.push_back(std::atoll(PQgetvalue(res.get(), 0, i)));
        return r;
      case PGRES_COMMAND_OK:
        r.changed = std::atoll(PQcmdTuples(res.get()));
        return r;
      default:
        fail(db);
    }
  }

 private:
  // This thread's connection, opened on first use and after an error. One
  // store per process, so one connection per HTTP worker thread.
  PGconn* connection() const {
    auto& db = this_thread_connection();
    if (db) return db.get();
    // The URL as libpq takes it, and a bound on connecting and on each
    // statement: a dead server is an error, not a hung request.
    const char* keys[] = {"dbname", "connect_timeout", "options", nullptr};
    const char* values[] = {url_.c_str(), "5", "-c statement_timeout=30000", nullptr};
    db.reset(PQconnectdbParams(keys, values, 1));
    if (PQstatus(db.get()) != CONNECTION_OK) fail(db.get());
    return db.get();
  }
  [[noreturn]] static void fail(PGconn* db) {
    std::runtime_error e("PostgreSQL: " + std::string(db ? PQerrorMessage(db) : "out of memory"));
    this_thread_connection().reset();
    throw e;
  }
  static std::unique_ptr<PGconn, decltype(&PQfinish)>& this_thread_connection() {
    thread_local std::unique_ptr<PGconn, decltype(&PQfinish)> db(nullptr, &PQfinish);
    return db;
  }

  std::string url_;
};

}  // namespace

std::unique_ptr<Stock> open_postgres_stock(const std::string& url) { return std::make_unique<PostgresStock>(url); }
