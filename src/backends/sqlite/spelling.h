// spelling.h — how SQLite spells dlock's SQL: the lock table recipe's
// dialect (backends/sql).
#pragma once

#include "backends/sql/dialect.h"

namespace dlock::detail::sqlite {

inline constexpr sql::DialectSpelling spelling = {
    .name = "sqlite",
    .begin = "BEGIN IMMEDIATE",
    // julianday('now') is the wall clock to the millisecond, the same for
    // every use within one statement.
    .now_ms = "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)",
    // Bytes, not LIKE (whose '%' and '_' are wildcards) nor substr on TEXT
    // (which counts characters).
    .starts_with = "substr(CAST(name AS BLOB), 1, length(CAST(?1 AS BLOB))) = CAST(?1 AS BLOB)",
    .text_type = "TEXT",
    .table_suffix = " WITHOUT ROWID",
    .notify_heads = "",
};

}  // namespace dlock::detail::sqlite
