// Fuzzes duration parsing (core/duration.h), used by every CLI flag that
// takes a time and by URL options. Beyond not crashing or overflowing
// (UBSan): an accepted duration is non-negative and the same text always
// gives the same value; a refused one's message names the argument.
#include "core/duration.h"

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace dlock::detail;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto d = parse_duration(text, "--fuzz");
  if (!d) {
    if (d.status().message().find("--fuzz") == std::string::npos) std::abort();  // names the argument
    return 0;
  }
  if (d->count() < 0) std::abort();
  auto again = parse_duration(std::string(text), "--other");
  if (!again || *again != *d) std::abort();
  (void)format_duration(*d);  // what messages show of it: must not fail either
  return 0;
}
