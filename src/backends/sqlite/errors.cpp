#include "backends/sqlite/errors.h"

#include <sqlite3.h>

#include <string>

namespace dlock::detail::sqlite {

Status to_status(sqlite3* db, int rc, std::string_view step) {
  std::string what = "sqlite backend: " + std::string(step) + ": ";
  // sqlite3_errmsg describes the connection's last error; without a
  // connection (opening failed early) the code's generic text is all there is.
  what += db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return Status(errc::unavailable, what +
                                           " (the database stayed locked by another connection for longer than "
                                           "ClientOptions::op_timeout)");
    case SQLITE_NOTADB:
      // The URL names a file that is something else (sqlite:///etc/passwd):
      // the caller's argument is wrong, and no retry will change that.
      return Status(errc::invalid_argument, what + " (not a SQLite database; dlock will not touch it)");
    case SQLITE_CORRUPT:
      return Status(errc::internal, what + " (the SQLite database is corrupt; dlock will not touch it)");
    case SQLITE_IOERR:
    case SQLITE_FULL:
    case SQLITE_CANTOPEN:
    case SQLITE_PROTOCOL:
    case SQLITE_NOMEM:
    case SQLITE_INTERRUPT:
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_AUTH:
    case SQLITE_NOLFS:
      // The file system or the process's rights, not dlock: an operator can
      // fix it and a later call may succeed.
      return Status(errc::unavailable, what);
    default:
      // SQLITE_ERROR (e.g. a dlock_* table of another shape), CONSTRAINT,
      // MISMATCH, MISUSE, RANGE, ...: a bug or a foreign schema.
      return Status(errc::internal, what);
  }
}

}  // namespace dlock::detail::sqlite
