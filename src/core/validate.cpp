#include "core/validate.h"

#include <string>

namespace dlock::detail {
namespace {

Status invalid(std::string why) { return Status(errc::invalid_argument, std::move(why)); }

std::string ms(std::chrono::milliseconds d) { return std::to_string(d.count()) + "ms"; }

// Index of the first byte that is not part of valid UTF-8, or npos.
std::size_t invalid_utf8_at(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    std::size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    if (len == 0 || i + len > s.size()) return i;
    std::uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1f) : len == 3 ? (c & 0x0f) : (c & 0x07);
    for (std::size_t k = 1; k < len; ++k) {
      auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc >> 6) != 0x2) return i;
      cp = (cp << 6) | (cc & 0x3f);
    }
    // Overlong forms, surrogates and values past U+10FFFF are not UTF-8.
    static constexpr std::uint32_t min_for_len[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_for_len[len] || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff) return i;
    i += len;
  }
  return std::string_view::npos;
}

}  // namespace

Status validate_name(std::string_view name) {
  if (name.empty()) return invalid("name: must not be empty");
  if (name.size() > max_name_bytes)
    return invalid("name: " + std::to_string(name.size()) + " bytes is longer than the limit of " +
                   std::to_string(max_name_bytes));
  if (auto at = invalid_utf8_at(name); at != std::string_view::npos)
    return invalid("name: not valid UTF-8 at byte " + std::to_string(at));
  for (std::size_t i = 0; i < name.size(); ++i) {
    auto c = static_cast<unsigned char>(name[i]);
    bool c1 = c == 0xc2 && i + 1 < name.size() && static_cast<unsigned char>(name[i + 1]) <= 0x9f;  // U+0080..U+009F
    if (c < 0x20 || c == 0x7f || c1)
      return invalid("name: control character at byte " + std::to_string(i));
  }
  return {};
}

Status validate(const MutexOptions& o) {
  if (o.lease <= std::chrono::milliseconds::zero())
    return invalid("MutexOptions::lease: must be > 0 (got " + ms(o.lease) + ")");
  if (o.lease > max_lease)
    return invalid("MutexOptions::lease: " + ms(o.lease) + " is longer than the limit of 24h");
  if (o.lease_mode != LeaseMode::watchdog && o.lease_mode != LeaseMode::fixed)
    return invalid("MutexOptions::lease_mode: unknown value");
  if (o.renew_interval < std::chrono::milliseconds::zero())
    return invalid("MutexOptions::renew_interval: must be >= 0 (got " + ms(o.renew_interval) + ")");
  if (o.renew_interval >= o.lease)
    return invalid("MutexOptions::renew_interval: " + ms(o.renew_interval) +
                   " must be shorter than the lease (" + ms(o.lease) + ")");
  if (o.lease_mode == LeaseMode::watchdog && renew_interval(o) < std::chrono::milliseconds(1))
    return invalid("MutexOptions::lease: " + ms(o.lease) + " is too short for watchdog renewal (need >= 3ms)");
  if (o.max_barging_wait < std::chrono::milliseconds::zero() || o.max_barging_wait > std::chrono::hours(1))
    return invalid("MutexOptions::max_barging_wait: must be in 0..1h (got " + ms(o.max_barging_wait) + ")");
  return {};
}

Status validate(const ClientOptions& o) {
  if (o.op_timeout <= std::chrono::milliseconds::zero())
    return invalid("ClientOptions::op_timeout: must be > 0 (got " + ms(o.op_timeout) + ")");
  if (o.max_backoff <= std::chrono::milliseconds::zero())
    return invalid("ClientOptions::max_backoff: must be > 0 (got " + ms(o.max_backoff) + ")");
  return {};
}

std::chrono::milliseconds renew_interval(const MutexOptions& o) {
  return o.renew_interval > std::chrono::milliseconds::zero() ? o.renew_interval : o.lease / 3;
}

std::vector<std::string_view> path_segments(std::string_view path) {
  std::vector<std::string_view> out;
  for (std::size_t at = 0;;) {
    auto slash = path.find('/', at);
    out.push_back(path.substr(at, slash == std::string_view::npos ? std::string_view::npos : slash - at));
    if (slash == std::string_view::npos) return out;
    at = slash + 1;
  }
}

}  // namespace dlock::detail
