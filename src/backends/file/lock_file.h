// lock_file.h — the on-disk layout of file:// primitives and the steps on them.
//
// One file per name and primitive in the lock directory, its kind in the
// suffix (FileKind): a Mutex and a SharedMutex of the same name are
// different files, as they are different locks. Byte ranges carry Linux
// open-file-description (OFD) locks, which the kernel drops when the last
// descriptor of the holder's open file goes — including when it dies:
//   byte 0                   guard: held (write) for the few microseconds a
//                            process reads or rewrites the file's records,
//                            so updates are atomic across processes
//   byte live_base + token   liveness: held by the holder of grant `token`
//                            (or a barrier member) for as long as it holds
//   byte queue_base + ticket an election candidate waiting in line
//   byte queue_base + slot   a Mutex's waiter in slot `slot`, read-locked
//                            for as long as it waits (WaiterSlot)
//   byte unqueued_waiting    read-locked by every Mutex waiter that found no
//                            free slot: releases then wake every waiter
//   byte writer_waiting      read-locked by every writer waiting for a
//                            SharedMutex: later readers queue behind them
// The Record at offset 0 keeps the highest fencing token ever issued for
// the file and its single holder (a Mutex's, a SharedMutex's writer, an
// Election's leader), with its lease on CLOCK_MONOTONIC (shared by all
// processes of the host). An entry is held while its token is set, its
// liveness lock is held and its lease has not run out.
// Files with many holders (a SharedMutex's readers, a Semaphore's permits,
// a Barrier's members) keep a Header at header_offset and a table of
// Entry slots from entries_offset; the Header also keeps a Semaphore's
// declared permits, a Barrier's round and an Election's or a Mutex's
// tickets. A Mutex's waiters queue in WaiterSlots from waiter_slots_offset.
// A Counter (and a Latch, which is a counter of the same name) is a
// CountRecord.
#pragma once

#include <dlock/status.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dlock::detail::file {

enum class FileKind { mutex, shared, election, permits, counter, barrier };

// One holder: of the lock, a read share, a permit, a barrier membership.
struct Entry {
  std::uint64_t token;       // 0: free
  std::int64_t expires_ns;   // CLOCK_MONOTONIC nanoseconds; the lease's end
  std::int64_t acquired_unix_ms;
  std::int32_t pid;
  std::uint32_t owner_len;
  char owner[64];
};

struct Record {
  char magic[8];
  std::uint64_t last_token;  // highest fencing token issued for this file
  Entry holder;              // the single holder (token 0: free)
};
static_assert(sizeof(Record) == 112, "the record's layout is on disk");

struct Header {
  std::uint32_t used;         // slots of the entry table ever used (high-water mark)
  std::int32_t permits;       // a Semaphore's count, as first declared (0: none yet)
  std::uint64_t round;        // a Barrier's: +1 each time its last member leaves
  std::uint32_t opened;       // a Barrier's: the current round is open
  std::uint32_t reserved;
  std::uint64_t last_ticket;  // an Election's: highest ticket given to a candidate
  // A SharedMutex's: until when (CLOCK_MONOTONIC ns) the byte writer_waiting
  // counts; every waiting writer pushes it on at each retry.
  std::int64_t writer_waiting_until;
};

// How long a waiter's place (a writer waiting, a candidate's ticket) counts
// after the waiter last retried. Core's acquire loop retries at least every
// 500 ms while it waits, so a live waiter always renews in time; a stopped
// one (SIGSTOP) keeps its byte lock but stops holding the others back.
inline constexpr std::int64_t waiting_lease_ns = 2'000'000'000;

// An Election's participant id: the leader's, and each queued candidate's.
inline constexpr std::size_t max_id_bytes = 1024;
struct IdSlot {
  std::uint64_t ticket;  // the candidate's ticket (the leader's: its token)
  std::uint32_t len;
  std::uint32_t reserved;
  std::int64_t waiting_until;  // a candidate's place counts until then (waiting_lease_ns)
  char data[max_id_bytes];
};

// A Mutex's waiter in line: the lowest live ticket is first. Live while
// its ticket is set, its byte (queue_base + slot) is locked and its place
// counts (waiting_until, renewed at each retry as an election candidate's).
struct WaiterSlot {
  std::uint64_t ticket;         // 0: free
  std::int64_t since_ns;        // CLOCK_MONOTONIC: when it started waiting
  std::int64_t waiting_until;   // its place counts until then (waiting_lease_ns)
  std::int64_t max_barging_ns;  // how long it lets newcomers go first (0: fair)
};
static_assert(sizeof(WaiterSlot) == 32, "a waiter's slot's layout is on disk");

struct CountRecord {
  char magic[8];
  std::int32_t width;  // bytes: 4 (int32) or 8 (int64)
  std::int32_t reserved;
  std::int64_t value;
};

inline constexpr char record_magic[8] = {'D', 'L', 'O', 'C', 'K', 'F', '1', '\0'};
inline constexpr char count_magic[8] = {'D', 'L', 'O', 'C', 'K', 'C', '1', '\0'};
inline constexpr std::int64_t holder_offset = offsetof(Record, holder);
inline constexpr std::int64_t header_offset = 128;
inline constexpr std::int64_t leader_id_offset = 256;  // IdSlot of the leader
inline constexpr std::int64_t entries_offset = 4096;
inline constexpr std::int64_t candidate_ids_offset = 4096;  // IdSlot ring of queued candidates (elections)
inline constexpr std::uint64_t candidate_id_slots = 256;
inline constexpr std::int64_t live_base = std::int64_t{1} << 40;
inline constexpr std::int64_t queue_base = std::int64_t{1} << 41;
inline constexpr std::int64_t writer_waiting = std::int64_t{1} << 42;
// An Election's file: read-locked by candidates that wait without a place
// in line (no doorbell can reach them): while it is, a leader's release
// wakes every waiter.
inline constexpr std::int64_t unrung_candidates = writer_waiting + 1;
// Where a file keeps its waiters in line (WaiterSlot): a Mutex's file from
// 4096 (it has no entry table), 128 of them; a SharedMutex's (its writers)
// and a Semaphore's between the header and the entry table, 64. A waiter
// in slot i read-locks byte queue_base + i; one that found no free slot
// read-locks unqueued(), and so does a SharedMutex's waiting reader: while
// that byte is locked, releases wake every waiter.
struct Line {
  std::int64_t offset;
  std::uint32_t slots;
  std::int64_t unqueued() const { return queue_base + slots; }
};
inline constexpr Line mutex_line{4096, 128};
inline constexpr Line slots_line{2048, 64};
static_assert(slots_line.offset >= header_offset + 64 && slots_line.offset + 64 * 32 <= entries_offset,
              "the line of a file with an entry table lies between its header and its table");
// Tokens and tickets name lock bytes (live_base + token, queue_base +
// ticket), so they stay below the next range: a file holding larger ones
// was changed by something else (read_* refuse it), and none is issued
// past them (next_token, next_ticket: after 2^40 acquisitions of one name).
inline constexpr std::uint64_t max_token = static_cast<std::uint64_t>(queue_base - live_base) - 1;
inline constexpr std::uint64_t max_ticket = static_cast<std::uint64_t>(writer_waiting - queue_base) - 1;
// The error for a lock file whose content dlock did not write: `what` is
// what was found.
Status damaged(const std::string& what);
Result<std::uint64_t> next_token(const Record& record);
Result<std::uint64_t> next_ticket(const Header& header);

std::int64_t monotonic_ns();
std::int64_t unix_ms();

// Takes the guard (byte 0): a write lock for writers, a read lock for
// readers. Gives up with unavailable after `timeout` (a process stopped
// inside its few-microsecond record update would otherwise block us).
Status take_guard(int fd, bool write, std::chrono::milliseconds timeout);
void drop_guard(int fd);

// Releases the guard on every path out of an update.
class GuardScope {
 public:
  explicit GuardScope(int fd) : fd_(fd) {}
  ~GuardScope() { drop_guard(fd_); }
  GuardScope(const GuardScope&) = delete;
  GuardScope& operator=(const GuardScope&) = delete;

 private:
  int fd_;
};

// Reads the record; a new (empty) file reads as a free lock with no tokens.
Result<Record> read_record(int fd);
Status write_record(int fd, const Record& record, bool sync);
// The header (zeros in a file that has none yet).
Result<Header> read_header(int fd);
Status write_header(int fd, const Header& header, bool sync);
// Entry slot `slot`'s offset; the first `count` slots (zeros past the end).
std::int64_t entry_offset(std::uint32_t slot);
Result<std::vector<Entry>> read_entries(int fd, std::uint32_t count);
Result<Entry> read_entry(int fd, std::int64_t offset);
Status write_entry(int fd, std::int64_t offset, const Entry& entry, bool sync);
// An id slot (zeros past the end of the file).
Result<IdSlot> read_id(int fd, std::int64_t offset);
Status write_id(int fd, std::int64_t offset, std::uint64_t ticket, std::string_view id, bool sync);
// Pushes a queued candidate's waiting_until on to now + waiting_lease_ns.
Status renew_id(int fd, std::int64_t offset);
std::int64_t candidate_id_offset(std::uint64_t ticket);
// A counter; nullopt if none was written yet.
Result<std::optional<CountRecord>> read_count(int fd);
Status write_count(int fd, int width, std::int64_t value, bool sync);

// Whether some open file (other than fd's) holds the liveness lock of `token`.
Result<bool> holder_alive(int fd, std::uint64_t token);
// Takes the liveness lock of `token` on fd (non-blocking).
Status take_liveness(int fd, std::uint64_t token);
// Whether `entry` is held now: set, within its lease, its holder alive.
Result<bool> entry_held(int fd, const Entry& entry, std::int64_t now_ns);
// Whether some open file other than fd's holds a lock on a byte of
// [start, start + len) (len > 0).
Result<bool> range_locked(int fd, std::int64_t start, std::int64_t len);
// Takes a lock of `type` (F_RDLCK/F_WRLCK) on one byte (non-blocking).
Status lock_byte(int fd, short type, std::int64_t offset);
// Drops fd's lock on one byte.
void unlock_byte(int fd, std::int64_t offset);
// A Mutex's waiter slots.
Result<std::vector<WaiterSlot>> read_waiter_slots(int fd, const Line& line);
Status write_waiter_slot(int fd, const Line& line, std::uint32_t slot, const WaiterSlot& waiter, bool sync);

// A name as a file name: [A-Za-z0-9_.-] kept (a leading '.' escaped),
// everything else as %XX; the kind's suffix appended. Injective.
std::string encode_name(std::string_view name, FileKind kind = FileKind::mutex);
// The bytes encode_name adds for the longest suffix.
inline constexpr std::size_t longest_suffix = 8;  // ".permits", ".barrier"
// The inverse for file names made by encode_name; nullopt if it isn't one.
std::optional<std::pair<std::string, FileKind>> decode_name(std::string_view file_name);

bool owner_is(const Entry& entry, std::string_view owner);
void set_owner(Entry& entry, std::string_view owner);

}  // namespace dlock::detail::file
