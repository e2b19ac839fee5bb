// config.h — what an etcd:// URL asks for, checked before any network I/O.
//
//   etcd://[user:password@]host[:port][,host[:port]...][/prefix][?option=value&...]
//   etcds://...same...[?ca=FILE][&cert=FILE&key=FILE]
//
// etcds:// speaks TLS to every member and checks its certificate: against
// the CA in `ca` (PEM), or gRPC's default roots without it; the
// certificate must name the host as the URL gives it (127.0.0.1 needs an IP
// subjectAltName). The files are read when the client is made; one that is
// missing or unreadable, or not PEM, is refused, naming the option and path,
// before any connection is tried.
//
// The hosts are members of one cluster (port 2379 if none is given); calls
// go to one member and fail over to the next when it cannot be reached.
// The prefix is where lock keys live: the lock "orders/42" is the key range
// <prefix>/orders/42/..., one key per contender, the layout of etcd's
// concurrency.Mutex (so `etcdctl lock <prefix>/orders/42` and a Go service's
// Mutex on that name share the lock). No path means the prefix "dlock"; a
// path "/x/y" means "x/y" (etcd keys have no leading '/': etcdctl's names
// don't either).
//
// Options (anything else is refused, naming it):
//   ttl=10s    the client's lease (its session), 2s..1h, whole seconds: every
//              lock the client takes is attached to it and dies with it,
//              this long after the client stops renewing it (a process
//              killed, stopped or cut off). etcdctl's default is 10s too.
//   ca=FILE    (etcds:// only) the CA certificates that sign the members'
//              certificates, PEM; none: gRPC's default roots (the file
//              GRPC_DEFAULT_SSL_ROOTS_FILE_PATH names, else its roots.pem of
//              public CAs: /usr/share/grpc/roots.pem on Debian).
//   cert=FILE, key=FILE
//              (etcds:// only, both or neither) the client's certificate and
//              its private key, PEM, for a cluster that asks clients for one
//              (etcd --client-cert-auth).
#pragma once

#include "core/url.h"

#include <dlock/options.h>
#include <dlock/status.h>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::detail::etcd {

struct Config {
  std::vector<std::string> endpoints;  // "host:port", as the URL gave them
  std::string prefix = "dlock";         // no leading or trailing '/'
  std::optional<std::string> user;
  std::optional<std::string> password;
  std::chrono::seconds ttl{10};
  std::chrono::milliseconds op_timeout{};
  // etcds://: TLS to every member. The PEM texts were read from the files the
  // URL names (empty: not given; no CA: gRPC's default roots).
  bool tls = false;
  std::string ca_file, cert_file, key_file;
  std::string ca_pem, cert_pem, key_pem;
  std::string redacted_url;  // for messages: no password
};

Result<Config> parse_config(const Url& url, const ClientOptions& options);

// The key range of a lock's contenders: prefix + "/" + name + "/".
std::string lock_prefix(const Config& config, std::string_view name);

// Where the keys of the primitives etcd has no tool for live, beside the
// locks' range so that a Mutex and, say, a Semaphore of one name never
// meet: prefix + "." + kind + "/" + name + "/" (kind: "rwlock",
// "semaphore", "barrier"). Without the name: the root of that kind.
std::string kind_prefix(const Config& config, std::string_view kind, std::string_view name);
std::string kind_root(const Config& config, std::string_view kind);

// A name segment ('/'-separated part of a lock name or of the prefix) etcd
// keys can hold and etcdctl can name: not empty, ".", "..", and no control
// characters. `what` names it in the message.
Status check_segment(std::string_view segment, std::string_view what);

}  // namespace dlock::detail::etcd
