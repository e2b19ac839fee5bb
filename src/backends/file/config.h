// config.h — what a file:// URL asks for, checked before anything touches
// the file system.
//
//   file:///absolute/dir[?fsync=true]     (file://localhost/dir is the same)
//
// The directory holds the lock files; it is made 0700 if missing (its
// parent must exist) and refused if another user owns it, if group or
// others may write to it, or if it is on a network file system.
//
// Options (anything else is refused, naming it):
//   fsync=false   true: sync each grant to disk, so the fencing counters
//                 survive an OS crash, not only a process crash (a held lock
//                 never does: the kernel drops it)
#pragma once

#include "core/url.h"

#include <dlock/options.h>
#include <dlock/status.h>

#include <string>

namespace dlock::detail::file {

struct Config {
  std::string dir;    // absolute, plain (no '.', '..' or empty segments), no trailing '/'
  bool sync = false;  // fsync=true
};

// invalid_argument: "file url: <why>" (also for what the file system says
// of the directory when the client opens it).
Status invalid_url(std::string why);

Result<Config> parse_config(const Url& url, const ClientOptions& options);

}  // namespace dlock::detail::file
