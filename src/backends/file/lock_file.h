// lock_file.h — the on-disk layout of one file:// lock and the steps on it.
//
// One file per lock name in the lock directory. Byte ranges carry Linux
// open-file-description (OFD) locks, which the kernel drops when the last
// descriptor of the holder's open file goes — including when it dies:
//   byte 0                 guard: held (write) for the few microseconds a
//                          process reads or rewrites the record, so record
//                          updates are atomic across processes
//   byte live_base + token liveness: held by the holder of grant `token`
//                          for as long as it holds the lock
// The record at offset 0 says who holds the lock, until when (lease on
// CLOCK_MONOTONIC, shared by all processes of the host) and the highest
// fencing token ever issued for the name. A grant is valid while the
// record names it, its liveness lock is held and its lease has not run out.
#pragma once

#include <dlock/status.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace dlock::detail::file {

struct Record {
  char magic[8];
  std::uint64_t last_token;     // highest fencing token issued for this name
  std::uint64_t holder_token;   // 0: free
  std::int64_t expires_ns;      // CLOCK_MONOTONIC nanoseconds; the holder's lease end
  std::int64_t acquired_unix_ms;
  std::int32_t holder_pid;
  std::uint32_t owner_len;
  char owner[64];
};

inline constexpr char record_magic[8] = {'D', 'L', 'O', 'C', 'K', 'F', '1', '\0'};
inline constexpr std::int64_t live_base = std::int64_t{1} << 40;

std::int64_t monotonic_ns();

// Takes the guard (byte 0): a write lock for writers, a read lock for
// readers. Gives up with unavailable after `timeout` (a process stopped
// inside its few-microsecond record update would otherwise block us).
Status take_guard(int fd, bool write, std::chrono::milliseconds timeout);
void drop_guard(int fd);

// Reads the record; a new (empty) file reads as a free lock with no tokens.
Result<Record> read_record(int fd);
Status write_record(int fd, const Record& record, bool sync);

// Whether some open file (other than fd's) holds the liveness lock of `token`.
Result<bool> holder_alive(int fd, std::uint64_t token);
// Takes the liveness lock of `token` on fd (non-blocking).
Status take_liveness(int fd, std::uint64_t token);

// A lock name as a file name: [A-Za-z0-9_.-] kept (a leading '.' escaped),
// everything else as %XX; ".lock" appended. Injective.
std::string encode_name(std::string_view name);
// The inverse for file names made by encode_name; empty if it isn't one.
std::string decode_name(std::string_view file_name);

bool owner_is(const Record& record, std::string_view owner);
void set_owner(Record& record, std::string_view owner);

}  // namespace dlock::detail::file
