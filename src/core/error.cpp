#include <dlock/error.h>

namespace dlock {
namespace {

class Category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "dlock"; }
  std::string message(int code) const override {
    switch (static_cast<errc>(code)) {
      case errc::invalid_argument: return "invalid argument";
      case errc::unavailable: return "store unavailable";
      case errc::timeout: return "timed out";
      case errc::lock_lost: return "lock lost";
      case errc::not_owner: return "not the owner";
      case errc::would_deadlock: return "would deadlock";
      case errc::unsupported: return "not supported by this backend";
      case errc::internal: return "internal error";
      case errc::cancelled: return "cancelled";
    }
    return "unknown dlock error";
  }
};

}  // namespace

const std::error_category& error_category() noexcept {
  static const Category category;
  return category;
}

const char* to_string(errc e) noexcept {
  switch (e) {
    case errc::invalid_argument: return "invalid_argument";
    case errc::unavailable: return "unavailable";
    case errc::timeout: return "timeout";
    case errc::lock_lost: return "lock_lost";
    case errc::not_owner: return "not_owner";
    case errc::would_deadlock: return "would_deadlock";
    case errc::unsupported: return "unsupported";
    case errc::internal: return "internal";
    case errc::cancelled: return "cancelled";
  }
  return "ok";
}

}  // namespace dlock
