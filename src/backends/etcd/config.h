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
// The prefix is where lock keys live: the lock "orders" is the key range
// <prefix>/orders/..., one key per contender, the layout of etcd's
// concurrency.Mutex (so `etcdctl lock <prefix>/orders` and a Go service's
// Mutex on that name share the lock). A name with '/' is one segment too,
// escaped, under <prefix>.paths/ (name_range below), so that no name's
// range holds another's. No path means the prefix "dlock"; a path "/x/y"
// means "x/y" (etcd keys have no leading '/': etcdctl's names don't either).
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

// The key range of one name's keys under `root` (the prefix, or a kind's
// root below), which holds no other name's keys:
//
//   a name without '/'   root + "/" + name + "/"                    etcd's layout: the range of
//                                                                   `etcdctl lock <root>/<name>`
//   a name with '/'      root + ".paths/" + escaped(name) + "/"     one segment: '%' is "%25",
//                                                                   '/' is "%2F"
//
// The keys a recipe puts in a name's range end in a segment of their own
// (a lease, an id): a name is never a part of another's key. As etcd names
// them, "a" is the range a/, and "a/b" (a/b/) lies inside it: etcdctl's
// Mutex on "a" waits behind one on "a/b". Here "a/b" is paths/a%2Fb/ and
// "a%2Fb" is a%2Fb/: both stay out of a/ and out of each other's.
std::string name_range(std::string_view root, std::string_view name);

// The name whose range starts with `segment`, the first segment after
// `root` + "/" (paths: after root + ".paths/"); nullopt if no name has that
// segment there (a key dlock did not write: a name with '/' in the plain
// root, a bad escape).
std::optional<std::string> name_of_segment(std::string_view segment, bool paths);

// The first segment of the names that start with `prefix` (to list them):
// in the plain root only names without '/' can (nullopt if `prefix` has
// one); under ".paths" every name has one, escaped as name_range does.
std::optional<std::string> segment_prefix(std::string_view prefix, bool paths);

// The key range of a lock's contenders: name_range(prefix, name).
std::string lock_prefix(const Config& config, std::string_view name);

// Where the keys of the primitives etcd has no tool for live, beside the
// locks' range so that a Mutex and, say, a Semaphore of one name never
// meet: name_range(prefix + "." + kind, name) (kind: "rwlock",
// "semaphore", "barrier").
std::string kind_prefix(const Config& config, std::string_view kind, std::string_view name);
// prefix + "." + kind + "/": the root of the counters' and latches' keys
// (<root><name>, one key per name, never read as a range).
std::string kind_root(const Config& config, std::string_view kind);

// A name segment ('/'-separated part of a lock name or of the prefix) etcd
// keys can hold and etcdctl can name: not empty, ".", "..", and no control
// characters. `what` names it in the message.
Status check_segment(std::string_view segment, std::string_view what);

}  // namespace dlock::detail::etcd
