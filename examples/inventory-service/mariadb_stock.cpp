// Stock in a MariaDB (or MySQL) table, through MariaDB Connector/C.
#include "stores.h"

#include <mysql.h>

#include <cstdlib>
#include <mutex>
#include <stdexcept>

namespace {

struct Address {
  std::string user, password, host, database;
  unsigned port = 3306;
};

// mysql://USER:PASSWORD@HOST:PORT/DATABASE
Address parse(const std::string& url) {
  auto bad = [&](const std::string& why) { return std::invalid_argument("--store " + url + ": " + why); };
  Address a;
  std::string rest = url.substr(url.find("://") + 3);
  const auto at = rest.rfind('@');
  if (at != std::string::npos) {
    const auto credentials = rest.substr(0, at);
    const auto colon = credentials.find(':');
    a.user = credentials.substr(0, colon);
    if (colon != std::string::npos) a.password = credentials.substr(colon + 1);
    rest = rest.substr(at + 1);
  }
  const auto slash = rest.find('/');
  if (slash == std::string::npos || slash + 1 == rest.size()) throw bad("no database (mysql://USER:PASSWORD@HOST:PORT/DATABASE)");
  a.database = rest.substr(slash + 1, rest.find('?') == std::string::npos ? std::string::npos : rest.find('?') - slash - 1);
  const auto hostport = rest.substr(0, slash);
  const auto colon = hostport.rfind(':');
  a.host = hostport.substr(0, colon);
  if (colon != std::string::npos) {
    char* end = nullptr;
    const long port = std::strtol(hostport.c_str() + colon + 1, &end, 10);
    if (*end != '\0' || port < 1 || port > 65535) throw bad("the port must be 1..65535");
    a.port = static_cast<unsigned>(port);
  }
  if (a.host.empty()) throw bad("no host");
  return a;
}

class MariaDbStock final : public SqlStock {
 public:
  explicit MariaDbStock(const std::string& url) : address_(parse(url)) {
    static std::once_flag init;  // the library's global state, before any thread connects
    std::call_once(init, [] { mysql_library_init(0, nullptr, nullptr); });
    create_table();
  }

  std::string describe() const override {
    return "MariaDB " + address_.host + ":" + std::to_string(address_.port) + "/" + address_.database +
           ", table inventory";
  }

 protected:
  std::string upsert_sql() const override {
    return "INSERT INTO inventory (sku, stock) VALUES (?, ?)"
           " ON DUPLICATE KEY UPDATE stock = VALUES(stock), version = version + 1, fence = 0";
  }

  Result run(const std::string& sql, const std::vector<Param>& params) override {
    MYSQL* db = connection();
    std::string text;  // the parameters inlined: strings escaped and quoted, integers as they are
    std::size_t next = 0;
    for (char c : sql) {
      if (c != '?') {
        text += c;
        continue;
      }
      const Param& p = params.at(next++);
      if (const auto* n = std::get_if<long long>(&p)) {
        text += std::to_string(*n);
      } else {
        const auto& s = std::get<std::string>(p);
        std::string escaped(s.size() * 2 + 1, '\0');
        escaped.resize(mysql_real_escape_string(db, escaped.data(), s.data(), s.size()));
        text += "'" + escaped + "'";
      }
    }
    if (mysql_real_query(db, text.data(), text.size()) != 0) fail(db);
    Result r;
    std::unique_ptr<MYSQL_RES, decltype(&mysql_free_result)> rows(mysql_store_result(db), &mysql_free_result);
    if (!rows) {
      if (mysql_field_count(db) != 0) fail(db);
      r.changed = static_cast<long long>(mysql_affected_rows(db));
      return r;
    }
    if (MYSQL_ROW row = mysql_fetch_row(rows.get())) {
      for (unsigned i = 0; i < mysql_num_fields(rows.get()); ++i) r.row.push_back(row[i] ? std::atoll(row[i]) : 0);
    }
    return r;
  }

 private:
  // This thread's connection, opened on first use and after an error. One
  // store per process, so one connection per HTTP worker thread.
  MYSQL* connection() {
    auto& db = this_thread_connection();
    if (db) return db.get();
    db.reset(mysql_init(nullptr));
    const unsigned connect_s = 5, io_s = 30;  // a dead server is an error, not a hung request
    mysql_options(db.get(), MYSQL_OPT_CONNECT_TIMEOUT, &connect_s);
    mysql_options(db.get(), MYSQL_OPT_READ_TIMEOUT, &io_s);
    mysql_options(db.get(), MYSQL_OPT_WRITE_TIMEOUT, &io_s);
    if (!mysql_real_connect(db.get(), address_.host.c_str(), address_.user.c_str(), address_.password.c_str(),
                            address_.database.c_str(), address_.port, nullptr, 0))
      fail(db.get());
    return db.get();
  }
  [[noreturn]] void fail(MYSQL* db) {
    std::runtime_error e("MariaDB: " + std::string(mysql_error(db)));
    this_thread_connection().reset();
    throw e;
  }
  static std::unique_ptr<MYSQL, decltype(&mysql_close)>& this_thread_connection() {
    thread_local std::unique_ptr<MYSQL, decltype(&mysql_close)> db(nullptr, &mysql_close);
    return db;
  }

  Address address_;
};

}  // namespace

std::unique_ptr<Stock> open_mariadb_stock(const std::string& url) { return std::make_unique<MariaDbStock>(url); }
