#include "commands.h"

#include "core/duration.h"
#include "core/url.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace dlock::cli {

std::string default_backend() {
  if (const char* env = std::getenv("DLOCK_BACKEND"); env && *env) return env;
  if (const char* run = std::getenv("XDG_RUNTIME_DIR"); run && *run == '/')
    return std::string("file://") + run + "/dlock";
  return "file:///tmp/dlock-" + std::to_string(::getuid());
}

std::string printable_url(const std::string& url) {
  auto parsed = detail::parse_url(url);
  return parsed ? parsed->redacted() : url;
}

std::chrono::milliseconds duration_arg(const std::string& text, std::string_view option) {
  auto d = detail::parse_duration(text, option);
  if (!d) throw CLI::ValidationError(d.status().message());
  return *d;
}

std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string prometheus_label(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    if (c == '\\' || c == '"') out += '\\';
    out += c;
  }
  return out + "\"";
}

}  // namespace dlock::cli
