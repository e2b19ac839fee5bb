#include "backends/postgres/errors.h"

#include "backends/sql/dialect.h"

#include <libpq-fe.h>

#include <string>

namespace dlock::detail::postgres {

Status to_status(const pg_result* result, std::string_view step) {
  const char* state = PQresultErrorField(result, PG_DIAG_SQLSTATE);
  const char* primary = PQresultErrorField(result, PG_DIAG_MESSAGE_PRIMARY);
  const std::string code = state ? state : "";
  std::string what = "postgres backend: " + std::string(step) + ": " + (primary ? primary : "error") +
                     (code.empty() ? "" : " (SQLSTATE " + code + ")");
  const std::string_view cls = std::string_view(code).substr(0, 2);
  if (cls == "08" || cls == "53" || code.starts_with("57P") || code == "40001" || code == "40P01" || code == "55P03")
    return Status(errc::unavailable, what);
  if (code == "42501")
    return Status(errc::unavailable,
                  what + " — the database user needs SELECT, INSERT, UPDATE and DELETE on " + sql::table_list());
  return Status(errc::internal, what);
}

}  // namespace dlock::detail::postgres
