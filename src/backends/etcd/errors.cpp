#include "backends/etcd/errors.h"

#include <grpcpp/support/status.h>

#include <algorithm>
#include <cctype>
#include <string>

namespace dlock::detail::etcd {
namespace {

// gRPC reports a failed TLS handshake as an unreachable member, in words
// of its own ("Ssl handshake failed: ... certificate verify failed").
bool handshake_failed(std::string said) {
  std::transform(said.begin(), said.end(), said.begin(), [](unsigned char ch) { return std::tolower(ch); });
  for (const char* sign : {"handshake", "ssl", "tls", "certificate"})
    if (said.find(sign) != std::string::npos) return true;
  return false;
}

}  // namespace

Status to_status(const grpc::Status& status, std::string_view step, bool tls) {
  if (status.ok()) return {};
  const std::string what = "etcd: " + std::string(step) + ": ";
  const std::string said = status.error_message();
  switch (status.error_code()) {
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return Status(errc::unavailable, what + "no answer within ClientOptions::op_timeout");
    case grpc::StatusCode::UNAVAILABLE:
      if (tls && handshake_failed(said))
        return Status(errc::unavailable, what + "the TLS handshake failed: the member's certificate did not verify "
                                                "against the CA (ca=, or gRPC's default roots) (" + said + ")");
      // A member that wants a client certificate, or does not speak TLS,
      // just closes the connection: gRPC says no more than that.
      if (tls && said.find("Connection refused") == std::string::npos)
        return Status(errc::unavailable, what + "the cluster cannot be reached over TLS (" + said +
                                             "); if its members are up, the TLS handshake failed: a member that "
                                             "wants a client certificate (cert=, key=) or refused it, or one "
                                             "that does not speak TLS");
      [[fallthrough]];
    case grpc::StatusCode::CANCELLED:
    case grpc::StatusCode::ABORTED:
      return Status(errc::unavailable, what + "the cluster cannot be reached (" + said + ")");
    case grpc::StatusCode::UNAUTHENTICATED:
      // etcd's words ("authentication failed, invalid user ID or password")
      // never echo the password.
      return Status(errc::invalid_argument, what + "refused the user and password (" + said + ")");
    case grpc::StatusCode::PERMISSION_DENIED:
      return Status(errc::invalid_argument, what + "the user may not use these keys (" + said + ")");
    case grpc::StatusCode::NOT_FOUND:
      // etcd's "requested lease not found": the lease expired or was revoked.
      return Status(errc::lock_lost, what + "the lease is gone (" + said + ")");
    case grpc::StatusCode::INVALID_ARGUMENT:
      // What etcd says to a request without a token where auth is on.
      if (said.find("user name is empty") != std::string::npos)
        return Status(errc::invalid_argument, what + "the cluster has authentication on: give a user and password, "
                                                     "etcd://user:password@host (" + said + ")");
      return Status(errc::invalid_argument, what + "etcd refused the request (" + said + ")");
    case grpc::StatusCode::OUT_OF_RANGE:
    case grpc::StatusCode::FAILED_PRECONDITION:
      return Status(errc::invalid_argument, what + "etcd refused the request (" + said + ")");
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return Status(errc::unavailable, what + "etcd is out of space or overloaded (" + said + ")");
    default:
      return Status(errc::internal, what + said);
  }
}

Status malformed_reply(std::string_view step, std::string_view what) {
  return Status(errc::unavailable, "etcd: " + std::string(step) + ": a member's reply was malformed (" +
                                       std::string(what) + "); nothing in it was trusted");
}

}  // namespace dlock::detail::etcd
