// errors.h — the one place gRPC and etcd errors become dlock errors.
#pragma once

#include <dlock/status.h>

#include <string_view>

namespace grpc {
class Status;
}

namespace dlock::detail::etcd {

// `status` is a finished call's; `step` says what was being done
// ("acquiring 'orders'"); `tls`: the channel speaks TLS (etcds://), whose
// failed handshakes are told as such. Success gives an ok Status.
Status to_status(const grpc::Status& status, std::string_view step, bool tls);

// A reply that is not an answer to what was asked (too few or too many
// answers, one of another kind, a branch no compare could take): a faulty
// member's, so nothing in it is trusted. errc::unavailable: the call may
// be made again (and may reach another member). `what` says what is wrong.
Status malformed_reply(std::string_view step, std::string_view what);

}  // namespace dlock::detail::etcd
