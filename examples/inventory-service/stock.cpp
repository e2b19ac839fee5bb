// open_stock: the store named by a URL's scheme.
#include "stock.h"

#include "stores.h"

#include <stdexcept>

bool Stock::sell_for_update(const std::string&, const std::function<void()>&) {
  throw std::logic_error(describe() + " has no transactions (for-update is for SQL stores)");
}

bool Stock::sell_optimistic(const std::string&, const std::function<void()>&) {
  throw std::logic_error(describe() + " has no row versions (optimistic is for SQL stores)");
}

std::unique_ptr<Stock> open_stock(const std::string& url) {
  const auto scheme = url.substr(0, url.find("://"));
  if (url.find("://") == std::string::npos)
    throw std::invalid_argument("--store: '" + url + "' is not a URL (redis://, mysql:// or postgres://)");
  if (scheme == "redis") return open_redis_stock(url);
  if (scheme == "mysql") return open_mariadb_stock(url);
  if (scheme == "postgres" || scheme == "postgresql") return open_postgres_stock(url);
  throw std::invalid_argument("--store: scheme '" + scheme + "' is not one of redis, mysql, postgres");
}
