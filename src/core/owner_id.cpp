#include "core/owner_id.h"

#include <sys/random.h>

#include <atomic>
#include <cerrno>
#include <cstring>

namespace dlock::detail {

Result<std::string> random_client_id() {
  unsigned char bytes[16];
  std::size_t got = 0;
  while (got < sizeof bytes) {
    ssize_t n = getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Result<std::string>(errc::internal, std::string("getrandom failed: ") + std::strerror(errno));
    }
    got += static_cast<std::size_t>(n);
  }
  static constexpr char hex[] = "0123456789abcdef";
  std::string id;
  for (unsigned char b : bytes) {
    id.push_back(hex[b >> 4]);
    id.push_back(hex[b & 0xf]);
  }
  return id;
}

Result<std::string> random_uuid() {
  auto hex = random_client_id();
  if (!hex) return hex;
  const std::string& h = *hex;
  return h.substr(0, 8) + "-" + h.substr(8, 4) + "-" + h.substr(12, 4) + "-" + h.substr(16, 4) + "-" + h.substr(20, 12);
}

namespace {
// Ordinals of threads and of holds of their own share one sequence.
std::uint64_t next_ordinal() noexcept {
  static std::atomic<std::uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

std::uint64_t thread_ordinal() noexcept {
  thread_local const std::uint64_t mine = next_ordinal();
  return mine;
}

std::string owner_for_this_thread(const std::string& client_id) {
  return client_id + "-" + std::to_string(thread_ordinal());
}

std::string owner_of_its_own(const std::string& client_id) {
  return client_id + "-" + std::to_string(next_ordinal());
}

std::string short_owner(std::string_view owner) {
  return std::string(owner.substr(0, 8)) + (owner.size() > 8 ? "…" : "");
}

}  // namespace dlock::detail
