#include "backends/file/lock_file.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <limits>
#include <thread>

namespace dlock::detail::file {
namespace {

Status os_error(const char* step) {
  return Status(errc::unavailable, std::string("file backend: ") + step + ": " + std::strerror(errno));
}

struct flock range(short type, std::int64_t start, std::int64_t len = 1) {
  struct flock fl {};
  fl.l_type = type;
  fl.l_whence = SEEK_SET;
  fl.l_start = start;
  fl.l_len = len;
  fl.l_pid = 0;  // required by OFD locks
  return fl;
}

// Reads `size` bytes at `offset`; past the end of the file reads as zeros.
Status read_at(int fd, void* out, std::size_t size, std::int64_t offset, const char* what) {
  std::memset(out, 0, size);
  auto* p = static_cast<char*>(out);
  std::size_t done = 0;
  while (done < size) {
    ssize_t n = pread(fd, p + done, size - done, offset + static_cast<std::int64_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return os_error(what);
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  return {};
}

Status write_at(int fd, const void* in, std::size_t size, std::int64_t offset, bool sync, const char* what) {
  ssize_t n = pwrite(fd, in, size, offset);
  if (n != static_cast<ssize_t>(size)) return os_error(what);
  if (sync && fdatasync(fd) != 0) return os_error("syncing the lock file");
  return {};
}

}  // namespace

std::int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::int64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

Status take_guard(int fd, bool write, std::chrono::milliseconds timeout) {
  auto fl = range(write ? F_WRLCK : F_RDLCK, 0);
  const auto give_up = std::chrono::steady_clock::now() + timeout;
  auto pause = std::chrono::microseconds(20);
  for (int attempt = 0;; ++attempt) {
    if (fcntl(fd, F_OFD_SETLK, &fl) == 0) return {};
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EACCES) return os_error("locking the record");
    // Guards are held for microseconds: yield first, then sleep briefly.
    if (attempt < 64) {
      sched_yield();
      continue;
    }
    if (std::chrono::steady_clock::now() >= give_up)
      return Status(errc::unavailable,
                    "file backend: the lock record stayed busy for longer than op_timeout "
                    "(is a process stopped while updating it?)");
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
}

void drop_guard(int fd) { unlock_byte(fd, 0); }

Result<Record> read_record(int fd) {
  Record r{};
  ssize_t n = pread(fd, &r, sizeof r, 0);
  if (n < 0) return os_error("reading the lock record");
  if (n == 0) {
    std::memset(&r, 0, sizeof r);
    std::memcpy(r.magic, record_magic, sizeof r.magic);
    return r;
  }
  if (static_cast<std::size_t>(n) != sizeof r || std::memcmp(r.magic, record_magic, sizeof r.magic) != 0)
    return Result<Record>(errc::internal, "file backend: a file in the lock directory is not a dlock lock file");
  if (r.last_token > max_token || r.holder.token > r.last_token)
    return damaged("fencing tokens " + std::to_string(r.holder.token) + " of " + std::to_string(r.last_token));
  if (r.holder.owner_len > sizeof r.holder.owner) r.holder.owner_len = sizeof r.holder.owner;
  return r;
}

Status damaged(const std::string& what) {
  return Status(errc::internal,
                "file backend: a lock file holds " + what + ", which dlock never writes (the file was changed by "
                "something else; remove it to start that name afresh)");
}

Result<std::uint64_t> next_token(const Record& record) {
  if (record.last_token >= max_token) return damaged("fencing token " + std::to_string(record.last_token) + ", the last one");
  return record.last_token + 1;
}

Result<std::uint64_t> next_ticket(const Header& header) {
  if (header.last_ticket >= max_ticket) return damaged("ticket " + std::to_string(header.last_ticket) + ", the last one");
  return header.last_ticket + 1;
}

Status write_record(int fd, const Record& record, bool sync) {
  return write_at(fd, &record, sizeof record, 0, sync, "writing the lock record");
}

Result<Header> read_header(int fd) {
  Header h{};
  if (Status s = read_at(fd, &h, sizeof h, header_offset, "reading the lock file's header"); !s) return s;
  if (h.permits < 0) return damaged(std::to_string(h.permits) + " permits");
  if (h.last_ticket > max_ticket) return damaged("ticket " + std::to_string(h.last_ticket));
  // Slots past the end of the file read as zeros (free): a count beyond
  // them (a header written before its entry, or a damaged file) is cut to
  // what the file holds, so no one reads or allocates for slots that are
  // not there.
  struct stat st {};
  if (::fstat(fd, &st) != 0) return os_error("reading the lock file's size");
  const std::int64_t past_table = std::max<std::int64_t>(0, st.st_size - entries_offset);
  const auto in_file = static_cast<std::uint64_t>((past_table + std::int64_t{sizeof(Entry)} - 1) /
                                                  std::int64_t{sizeof(Entry)});
  if (h.used > in_file) h.used = static_cast<std::uint32_t>(in_file);
  return h;
}

Status write_header(int fd, const Header& header, bool sync) {
  return write_at(fd, &header, sizeof header, header_offset, sync, "writing the lock file's header");
}

std::int64_t entry_offset(std::uint32_t slot) {
  return entries_offset + static_cast<std::int64_t>(slot) * static_cast<std::int64_t>(sizeof(Entry));
}

Result<std::vector<Entry>> read_entries(int fd, std::uint32_t count) {
  std::vector<Entry> out(count);
  if (count == 0) return out;
  if (Status s = read_at(fd, out.data(), count * sizeof(Entry), entries_offset, "reading the lock file's entries"); !s)
    return s;
  for (auto& e : out) {
    if (e.token > max_token) return damaged("fencing token " + std::to_string(e.token));
    if (e.owner_len > sizeof e.owner) e.owner_len = sizeof e.owner;
  }
  return out;
}

Result<Entry> read_entry(int fd, std::int64_t offset) {
  Entry e{};
  if (Status s = read_at(fd, &e, sizeof e, offset, "reading a lock entry"); !s) return s;
  if (e.token > max_token) return damaged("fencing token " + std::to_string(e.token));
  if (e.owner_len > sizeof e.owner) e.owner_len = sizeof e.owner;
  return e;
}

Status write_entry(int fd, std::int64_t offset, const Entry& entry, bool sync) {
  return write_at(fd, &entry, sizeof entry, offset, sync, "writing a lock entry");
}

Result<IdSlot> read_id(int fd, std::int64_t offset) {
  IdSlot slot{};
  if (Status s = read_at(fd, &slot, sizeof slot, offset, "reading an election id"); !s) return s;
  if (slot.ticket > max_ticket) return damaged("ticket " + std::to_string(slot.ticket));
  if (slot.len > sizeof slot.data) slot.len = sizeof slot.data;
  return slot;
}

Status write_id(int fd, std::int64_t offset, std::uint64_t ticket, std::string_view id, bool sync) {
  IdSlot slot{};
  slot.ticket = ticket;
  slot.waiting_until = monotonic_ns() + waiting_lease_ns;
  slot.len = static_cast<std::uint32_t>(std::min(id.size(), sizeof slot.data));
  std::memcpy(slot.data, id.data(), slot.len);
  // Only the bytes in use: the rest of the slot is never read.
  return write_at(fd, &slot, offsetof(IdSlot, data) + slot.len, offset, sync, "writing an election id");
}

Status renew_id(int fd, std::int64_t offset) {
  const std::int64_t until = monotonic_ns() + waiting_lease_ns;
  return write_at(fd, &until, sizeof until, offset + static_cast<std::int64_t>(offsetof(IdSlot, waiting_until)), false,
                  "renewing an election candidate's place");
}

std::int64_t candidate_id_offset(std::uint64_t ticket) {
  return candidate_ids_offset + static_cast<std::int64_t>((ticket % candidate_id_slots) * sizeof(IdSlot));
}

Result<std::optional<CountRecord>> read_count(int fd) {
  CountRecord r{};
  ssize_t n = pread(fd, &r, sizeof r, 0);
  if (n < 0) return os_error("reading the counter");
  if (n == 0) return std::optional<CountRecord>();
  if (static_cast<std::size_t>(n) != sizeof r || std::memcmp(r.magic, count_magic, sizeof r.magic) != 0 ||
      (r.width != 4 && r.width != 8))
    return Status(errc::internal, "file backend: a counter's file holds something else than a counter");
  if (r.width == 4 && (r.value < std::numeric_limits<std::int32_t>::min() ||
                       r.value > std::numeric_limits<std::int32_t>::max()))
    return damaged(std::to_string(r.value) + " in a 32-bit counter");
  return std::optional<CountRecord>(r);
}

Status write_count(int fd, int width, std::int64_t value, bool sync) {
  CountRecord r{};
  std::memcpy(r.magic, count_magic, sizeof r.magic);
  r.width = width;
  r.value = value;
  return write_at(fd, &r, sizeof r, 0, sync, "writing the counter");
}

Result<bool> holder_alive(int fd, std::uint64_t token) {
  return range_locked(fd, live_base + static_cast<std::int64_t>(token), 1);
}

Result<bool> entry_held(int fd, const Entry& entry, std::int64_t now_ns) {
  if (entry.token == 0 || entry.expires_ns <= now_ns) return false;
  return holder_alive(fd, entry.token);
}

Result<bool> range_locked(int fd, std::int64_t start, std::int64_t len) {
  auto fl = range(F_WRLCK, start, len);
  if (fcntl(fd, F_OFD_GETLK, &fl) != 0) return os_error("probing a lock range");
  return fl.l_type != F_UNLCK;
}

Status lock_byte(int fd, short type, std::int64_t offset) {
  auto fl = range(type, offset);
  while (fcntl(fd, F_OFD_SETLK, &fl) != 0) {
    if (errno == EINTR) continue;
    // Liveness bytes and tickets are fresh numbers; writers only read-lock
    // writer_waiting: nobody else can hold what we take here.
    if (errno == EAGAIN || errno == EACCES)
      return Status(errc::internal, "file backend: a byte lock that only this holder takes is taken");
    return os_error("locking a byte range");
  }
  return {};
}

void unlock_byte(int fd, std::int64_t offset) {
  auto fl = range(F_UNLCK, offset);
  (void)fcntl(fd, F_OFD_SETLK, &fl);
}

Result<std::vector<WaiterSlot>> read_waiter_slots(int fd, const Line& line) {
  std::vector<WaiterSlot> out(line.slots);
  if (Status s = read_at(fd, out.data(), out.size() * sizeof(WaiterSlot), line.offset, "reading the lock file's waiters");
      !s)
    return s;
  return out;
}

Status write_waiter_slot(int fd, const Line& line, std::uint32_t slot, const WaiterSlot& waiter, bool sync) {
  return write_at(fd, &waiter, sizeof waiter,
                  line.offset + static_cast<std::int64_t>(slot) * static_cast<std::int64_t>(sizeof waiter), sync,
                  "writing a waiter's place");
}

Status take_liveness(int fd, std::uint64_t token) {
  return lock_byte(fd, F_WRLCK, live_base + static_cast<std::int64_t>(token));
}

namespace {

constexpr std::pair<FileKind, std::string_view> suffixes[] = {
    {FileKind::mutex, ".lock"},      {FileKind::shared, ".rw"},         {FileKind::election, ".elect"},
    {FileKind::permits, ".permits"}, {FileKind::counter, ".count"},    {FileKind::barrier, ".barrier"},
};

std::string_view suffix(FileKind kind) {
  for (const auto& [k, s] : suffixes)
    if (k == kind) return s;
  return ".lock";
}

}  // namespace

std::string encode_name(std::string_view name, FileKind kind) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(name.size() + longest_suffix);
  for (std::size_t i = 0; i < name.size(); ++i) {
    auto c = static_cast<unsigned char>(name[i]);
    bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                c == '-' || (c == '.' && i > 0);
    if (keep) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 0xf]);
    }
  }
  out += suffix(kind);
  return out;
}

std::optional<std::pair<std::string, FileKind>> decode_name(std::string_view file_name) {
  if (file_name.empty() || file_name.front() == '.') return std::nullopt;
  for (const auto& [kind, suffix] : suffixes) {
    if (file_name.size() <= suffix.size() || !file_name.ends_with(suffix)) continue;
    std::string_view encoded = file_name.substr(0, file_name.size() - suffix.size());
    std::string out;
    for (std::size_t i = 0; i < encoded.size(); ++i) {
      if (encoded[i] != '%') {
        if (encoded[i] == '.' && i == 0) return std::nullopt;
        out.push_back(encoded[i]);
        continue;
      }
      if (i + 2 >= encoded.size()) return std::nullopt;
      auto hex = [](char c) { return c <= '9' ? c - '0' : c - 'A' + 10; };
      out.push_back(static_cast<char>(hex(encoded[i + 1]) * 16 + hex(encoded[i + 2])));
      i += 2;
    }
    return std::pair{std::move(out), kind};
  }
  return std::nullopt;
}

bool owner_is(const Entry& entry, std::string_view owner) {
  return entry.owner_len == owner.size() && std::memcmp(entry.owner, owner.data(), owner.size()) == 0;
}

void set_owner(Entry& entry, std::string_view owner) {
  std::memset(entry.owner, 0, sizeof entry.owner);
  entry.owner_len = static_cast<std::uint32_t>(std::min(owner.size(), sizeof entry.owner));
  std::memcpy(entry.owner, owner.data(), entry.owner_len);
}

}  // namespace dlock::detail::file
