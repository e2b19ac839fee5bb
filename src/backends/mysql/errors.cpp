#include "backends/mysql/errors.h"

#include "backends/sql/server_options.h"

#include <string>

namespace dlock::detail::mysql {

Status to_status(unsigned code, std::string_view message, std::string_view step, bool& broken) {
  std::string what = "mysql backend: " + std::string(step) + ": " + std::string(message.empty() ? "error" : message) +
                     " (error " + std::to_string(code) + ")";
  const bool client = code >= 2000 && code < 3000;
  broken = client || code == 1053 || code == 1927 || code == 1040;
  if (broken || code == 1205 || code == 1213 || code == 1044 || code == 1045) return Status(errc::unavailable, what);
  if (code == 1142 || code == 1143)
    return Status(errc::unavailable, what + " — " + sql::privileges_needed());
  return Status(errc::internal, what);
}

}  // namespace dlock::detail::mysql
