// session_locks.h — postgres://…?mode=session: PostgreSQL's own advisory
// locks, which die with the connection that holds them (the logic is
// sql/session_locks.h's).
#pragma once

#include "backends/postgres/connection.h"
#include "backends/postgres/session_sql.h"
#include "core/driver.h"

#include <memory>

namespace dlock::detail::postgres {

// Session mode's backend; `first` (a plain connection) finds the class id.
Result<std::unique_ptr<Backend>> make_session_backend(ConnectInfo info, std::unique_ptr<PgConnection> first,
                                                      std::chrono::milliseconds op_timeout);

}  // namespace dlock::detail::postgres
