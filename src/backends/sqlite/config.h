// config.h — what a sqlite:// URL asks for, checked before anything touches
// the file system.
//
//   sqlite:///absolute/path/to/locks.db
//
// The path names the database file (made 0600 if missing; its directory
// must exist). No host, no user or password, no options.
#pragma once

#include "core/url.h"

#include <dlock/options.h>
#include <dlock/status.h>

#include <string>

namespace dlock::detail::sqlite {

struct Config {
  std::string path;  // the database file: absolute, plain (no '.', '..' or empty segments)
};

// invalid_argument: "sqlite url: <why>" (also for what the file system
// says of the path when the client opens it).
Status invalid_url(std::string why);

Result<Config> parse_config(const Url& url, const ClientOptions& options);

}  // namespace dlock::detail::sqlite
