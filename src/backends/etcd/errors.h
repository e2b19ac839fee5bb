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

}  // namespace dlock::detail::etcd
