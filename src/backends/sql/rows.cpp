#include "backends/sql/connection.h"

#include <charconv>

namespace dlock::detail::sql {

std::string_view Rows::text(std::size_t row, std::size_t column) const {
  if (row >= rows_.size() || column >= rows_[row].size() || !rows_[row][column]) return {};
  return *rows_[row][column];
}

std::int64_t Rows::integer(std::size_t row, std::size_t column) const {
  const std::string_view t = text(row, column);
  std::int64_t value = 0;
  auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), value);
  return ec == std::errc() && end == t.data() + t.size() ? value : 0;
}

}  // namespace dlock::detail::sql
