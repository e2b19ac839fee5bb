#include "backends/zookeeper/errors.h"

#include <zookeeper/zookeeper.h>

#include <string>

namespace dlock::detail::zookeeper {

Status to_status(int rc, std::string_view step, std::string_view path) {
  if (rc == ZOK) return {};
  const std::string what = "zookeeper: " + std::string(step) + " (" + std::string(path) + "): ";
  switch (rc) {
    case ZCONNECTIONLOSS:
    case ZOPERATIONTIMEOUT:
    case ZCLOSING:
    case ZSESSIONMOVED:
      return Status(errc::unavailable, what + "connection to the ensemble lost (" + zerror(rc) + ")");
    case ZSESSIONEXPIRED:
    case ZINVALIDSTATE:
      return Status(errc::unavailable, what + "the session expired; a new one is being opened");
    case ZNOAUTH:
    case ZAUTHFAILED:
      return Status(errc::invalid_argument,
                    what + "not allowed by the node's ACL (check the user and password in the URL; nodes dlock "
                           "creates with credentials are usable only with the same credentials)");
    case ZBADARGUMENTS:
      return Status(errc::invalid_argument, what + "ZooKeeper refused the path or arguments");
    case ZNOCHILDRENFOREPHEMERALS:
      return Status(errc::invalid_argument, what + "a lock's parent is an ephemeral node (a lock name may not "
                                                   "extend another dlock-made node)");
    case ZNOTREADONLY:
      return Status(errc::unavailable, what + "the server is read-only (no quorum)");
    default:
      return Status(errc::internal, what + zerror(rc));
  }
}

Status no_reply(std::string_view step) {
  return Status(errc::unavailable,
                "zookeeper: " + std::string(step) + ": no answer within ClientOptions::op_timeout");
}

}  // namespace dlock::detail::zookeeper
