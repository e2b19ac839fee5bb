// errors.h — the one place ZooKeeper's return codes become dlock errors.
#pragma once

#include <dlock/status.h>

#include <string_view>

namespace dlock::detail::zookeeper {

// `rc` is a ZOO_ERRORS value (ZOK is success); `step` says what was being
// done ("acquiring 'orders'"), `path` which znode.
Status to_status(int rc, std::string_view step, std::string_view path);

// No reply within op_timeout.
Status no_reply(std::string_view step);

}  // namespace dlock::detail::zookeeper
