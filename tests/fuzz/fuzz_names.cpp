// Fuzzes lock-name validation (core/validate.h) and the file backend's name
// encoding. The input is split at its first NUL into two names a and b.
// Beyond not crashing: a valid name's file name holds only [A-Za-z0-9_.%-],
// never starts with '.', decodes back to the name, and two different valid
// names never share a file name (two locks must never be one).
#include "backends/file/lock_file.h"
#include "core/validate.h"

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

namespace {

bool plain(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
         c == '-' || c == '%';
}

// The file name of a valid name, checked; empty for an invalid name.
std::string checked_file_name(std::string_view name) {
  if (!dlock::detail::validate_name(name).ok()) return {};
  using dlock::detail::file::FileKind;
  std::string mutex_file;
  for (auto kind : {FileKind::mutex, FileKind::shared, FileKind::election, FileKind::permits, FileKind::counter,
                    FileKind::barrier}) {
    const std::string file = dlock::detail::file::encode_name(name, kind);
    if (file.empty() || file.front() == '.') std::abort();
    for (char c : file)
      if (!plain(c)) std::abort();
    const auto decoded = dlock::detail::file::decode_name(file);
    if (!decoded || decoded->first != name || decoded->second != kind) std::abort();
    if (kind == FileKind::mutex) mutex_file = file;
  }
  return mutex_file;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const auto cut = input.find('\0');
  const std::string_view a = input.substr(0, cut);
  const std::string_view b = cut == std::string_view::npos ? std::string_view() : input.substr(cut + 1);
  const std::string fa = checked_file_name(a), fb = checked_file_name(b);
  if (!fa.empty() && fa == fb && a != b) std::abort();
  return 0;
}
