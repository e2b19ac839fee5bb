// errors.h — the one place PostgreSQL errors become dlock errors (STYLE rule 4).
#pragma once

#include <dlock/status.h>

#include <string_view>

struct pg_result;

namespace dlock::detail::postgres {

// A failed statement's result as a Status, by its SQLSTATE:
//   08 (connection), 53 (resources), 57P (shutting down), 40001/40P01
//   (serialization, deadlock), 55P03 (lock_timeout)   -> unavailable: retry later
//   42501 (insufficient privilege)                    -> unavailable, naming the privilege
//   everything else                                   -> internal
Status to_status(const pg_result* result, std::string_view step);

}  // namespace dlock::detail::postgres
