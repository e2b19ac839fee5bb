// errors.h — the one place SQLite result codes become dlock errors (STYLE rule 4).
#pragma once

#include <dlock/status.h>

#include <string_view>

struct sqlite3;

namespace dlock::detail::sqlite {

// `rc` (an SQLite result code, extended or primary) from `step` on `db` as a
// Status, with SQLite's own message for the connection. Call it before any
// other statement runs on `db`: that would replace the message.
//   busy / locked (another process kept the database past op_timeout),
//   I/O, full disk, can't open, no permission     -> unavailable: retry later
//   corrupt / not a database, schema mismatches,
//   misuse and everything unexpected               -> internal
Status to_status(sqlite3* db, int rc, std::string_view step);

}  // namespace dlock::detail::sqlite
