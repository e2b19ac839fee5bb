// local_path.h — checks shared by the stores that live on this host's file
// system (file://, sqlite://): the path every process must agree on.
#pragma once

#include <sys/stat.h>

#include <string>
#include <string_view>

namespace dlock::detail {

// Absolute, with no '.', '..' or empty segments (so no "//" and no trailing
// '/'): the path says plainly which file every process shares.
bool is_plain_absolute_path(std::string_view path);

// The directory holding `path` ("/" for a top-level entry).
std::string parent_dir(const std::string& path);

// Whether `path` lives on a network file system (NFS, SMB), where the locks
// of one host are not reliable. False if it can't be told.
bool on_network_file_system(const std::string& path);

// Why `path` (whose status is `st`, from fstat on what was opened) is not
// safe to keep locks in or send wake-ups through, or "" if it is: only
// this process's effective user (or root) may own it, and neither group
// nor others may write to it (they could replace or rewrite what is in it).
std::string ownership_problem(const struct stat& st, const std::string& path);

}  // namespace dlock::detail
