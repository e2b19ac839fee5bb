// spelling.h — how PostgreSQL spells the lock table recipe (backends/sql):
// the server's clock, a prefix test, and the NOTIFY a release's `heads`
// query is wrapped in, so the database wakes the heads itself on commit.
// Also used by bench/pg_raw.cpp, which runs the same statements raw.
#pragma once

#include "backends/sql/dialect.h"

#include <string>
#include <string_view>

namespace dlock::detail::postgres {

inline constexpr sql::DialectSpelling spelling = {
    .name = "postgres",
    .begin = "BEGIN",
    .now_ms = "(extract(epoch from clock_timestamp()) * 1000)::bigint",
    .starts_with = "starts_with(name, ?1)",
    .text_type = "TEXT",
    .table_suffix = "",
    .notify_heads = "WITH h AS (%s) SELECT owner, mode, wake, "
                    "pg_notify('dlock_' || wake, owner || chr(10) || ?2 || chr(10) || ?1) FROM h",
};

// The recipe writes ?1, ?2, ...; PostgreSQL numbers parameters $1, $2, ...
inline std::string numbered(std::string_view sql) {
  std::string out(sql);
  for (std::size_t i = 0; i + 1 < out.size(); ++i)
    if (out[i] == '?' && out[i + 1] >= '0' && out[i + 1] <= '9') out[i] = '$';
  return out;
}

}  // namespace dlock::detail::postgres
