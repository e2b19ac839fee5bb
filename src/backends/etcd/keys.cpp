#include "backends/etcd/keys.h"

#include <cstdio>

namespace dlock::detail::etcd {

std::string hex(std::int64_t id) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%llx", static_cast<unsigned long long>(id));
  return buf;
}

std::string range_end(std::string prefix) {
  while (!prefix.empty()) {
    if (static_cast<unsigned char>(prefix.back()) < 0xff) {
      prefix.back() = static_cast<char>(static_cast<unsigned char>(prefix.back()) + 1);
      return prefix;
    }
    prefix.pop_back();
  }
  return std::string(1, '\0');
}

etcdserverpb::RangeRequest one_key(const std::string& key) {
  etcdserverpb::RangeRequest r;
  r.set_key(key);
  return r;
}

}  // namespace dlock::detail::etcd
