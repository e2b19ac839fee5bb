// session_locks.h — mysql://…?mode=session: MySQL's and MariaDB's own
// named locks (GET_LOCK), which die with the connection that holds them
// (the logic is sql/session_locks.h's).
#pragma once

#include "backends/mysql/connection.h"
#include "core/driver.h"

#include <memory>
#include <string_view>

namespace dlock::detail::mysql {

// SQL that session mode needs besides the table recipe's tables.
inline constexpr std::string_view session_schema =
    "CREATE TABLE IF NOT EXISTS dlock_session_keys (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, "
    "name VARBINARY(512) NOT NULL UNIQUE) ENGINE=InnoDB";

Result<std::unique_ptr<Backend>> make_session_backend(ConnectInfo info);

}  // namespace dlock::detail::mysql
