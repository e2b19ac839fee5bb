#include "core/local_path.h"

#include <unistd.h>

#include <linux/magic.h>
#include <sys/statfs.h>

#include <algorithm>

namespace dlock::detail {

bool is_plain_absolute_path(std::string_view path) {
  if (path.empty() || path.front() != '/') return false;
  for (std::size_t start = 1; start <= path.size();) {
    const std::size_t end = std::min(path.find('/', start), path.size());
    const std::string_view segment = path.substr(start, end - start);
    if (segment.empty() || segment == "." || segment == "..") return false;
    start = end + 1;
  }
  return true;
}

std::string parent_dir(const std::string& path) {
  return path.substr(0, std::max<std::size_t>(path.rfind('/'), 1));
}

bool on_network_file_system(const std::string& path) {
  struct statfs fs {};
  return ::statfs(path.c_str(), &fs) == 0 && (fs.f_type == NFS_SUPER_MAGIC || fs.f_type == SMB_SUPER_MAGIC);
}

std::string ownership_problem(const struct stat& st, const std::string& path) {
  if (st.st_uid != ::geteuid() && st.st_uid != 0)
    return "'" + path + "' belongs to another user (uid " + std::to_string(st.st_uid) + ")";
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    return "'" + path + "' is writable by group or others, who could replace what is in it (chmod go-w)";
  return {};
}

}  // namespace dlock::detail
