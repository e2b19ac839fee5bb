// keys.h — how the etcd backend's recipes name keys and ranges.
#pragma once

#include <etcd/etcdserver/etcdserverpb/rpc.pb.h>

#include <cstdint>
#include <string>

namespace dlock::detail::etcd {

// A lease id as etcd's own tools print it in keys: lowercase hex.
std::string hex(std::int64_t id);

// The end of the key range that starts with `prefix` (etcd's prefix rule:
// the prefix with its last byte incremented).
std::string range_end(std::string prefix);

// A read of `key` alone.
etcdserverpb::RangeRequest one_key(const std::string& key);

}  // namespace dlock::detail::etcd
