// errors.h — the one place MySQL/MariaDB errors become dlock errors (STYLE rule 4).
#pragma once

#include <dlock/status.h>

#include <string_view>

namespace dlock::detail::mysql {

// What a failed call's error number means for the caller:
//   client errors 2000..2999 (connection refused, lost, gone away), 1040
//   (too many connections), 1205 (lock wait timeout), 1213 (deadlock),
//   1053 / 1927 (server shutting down, connection killed),
//   1044 / 1045 (no access to the database, bad password)  -> unavailable: retry later
//   1142, 1143 (no access to a table)                     -> unavailable, naming the privileges
//   everything else                                        -> internal
// `broken`: whether the connection is unusable after it.
Status to_status(unsigned code, std::string_view message, std::string_view step, bool& broken);

}  // namespace dlock::detail::mysql
