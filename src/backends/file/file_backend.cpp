// file:// — locks as files in one directory on one host (the embedded
// default). Every primitive but Counter, Latch (counters.h) and Barrier
// (barrier.h) is a lock of this driver: Mutex (.lock), SharedMutex (.rw),
// Semaphore (.permits), Election (.elect). The files' layout is
// lock_file.h's; how waiters wait in line, are rung and may be barged past,
// and how each primitive uses the file: docs/backends.md, "file://".
// A holder's liveness lock is on its grant's descriptor, so a dead holder's
// share is free the moment the kernel closes it.
#include "backends/file/barrier.h"
#include "backends/file/config.h"
#include "backends/file/counters.h"
#include "backends/file/directory.h"
#include "backends/file/file_waiter.h"
#include "backends/file/lock_file.h"
#include "backends/file/waiter_line.h"
#include "core/driver.h"
#include "core/local_path.h"
#include "core/owner_id.h"
#include "core/url.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

namespace dlock::detail {
namespace {

using namespace file;

constexpr std::size_t max_encoded_name = 240;  // + the longest suffix stays under NAME_MAX (255)
static_assert(max_encoded_name + longest_suffix <= 255);
constexpr std::size_t max_idle_descriptors = 256;
constexpr std::uint32_t max_readers = 65536;

Status os_error(const std::string& step) {
  return Status(errc::unavailable, "file backend: " + step + ": " + std::strerror(errno));
}

FileKind file_kind(LockKind kind) {
  switch (kind) {
    case LockKind::mutex: return FileKind::mutex;
    case LockKind::write:
    case LockKind::read: return FileKind::shared;
    case LockKind::leader: return FileKind::election;
    case LockKind::permit: return FileKind::permits;
    case LockKind::member: return FileKind::barrier;
  }
  return FileKind::mutex;
}

// A grant: the descriptor holding its liveness lock, and where its entry is.
class FileGrant final : public GrantState {
 public:
  FileGrant(int descriptor, std::int64_t entry_at) : fd(descriptor), offset(entry_at) {}
  ~FileGrant() override {
    if (fd >= 0) ::close(fd);
  }
  int fd;
  std::int64_t offset;
};

Entry make_entry(std::uint64_t token, const LockRequest& request, std::int64_t now, std::int32_t pid) {
  Entry e{};
  e.token = token;
  e.expires_ns = now + std::chrono::nanoseconds(request.lease).count();
  e.acquired_unix_ms = unix_ms();
  e.pid = pid;
  set_owner(e, request.owner);
  return e;
}

steady::time_point expires_at(steady::time_point sent, std::int64_t expires_ns, std::int64_t now_ns) {
  return sent + std::chrono::nanoseconds(expires_ns - now_ns);
}

// The line a kind's waiters join (a SharedMutex's readers don't: they only
// lock its unqueued byte while they wait); nullptr if they wait without one.
const Line* line_of(LockKind kind) {
  switch (kind) {
    case LockKind::mutex: return &mutex_line;
    case LockKind::write:
    case LockKind::read:
    case LockKind::permit: return &slots_line;
    default: return nullptr;
  }
}

class FileBackend final : public Backend, public LockDriver {
 public:
  explicit FileBackend(Directory dir)
      : watches_(events()), dir_(with_watches(std::move(dir))), counters_(dir_), barriers_(dir_) {}

  ~FileBackend() override {
    for (auto& [name, fds] : idle_)
      for (int fd : fds) ::close(fd);
    ::close(dir_.fd);
  }

  Status validate_name(std::string_view name) const override {
    auto encoded = encode_name(name).size() - 5;
    if (encoded > max_encoded_name)
      return Status(errc::invalid_argument, "name: encodes to a " + std::to_string(encoded) +
                                                "-byte file name, longer than the file backend's limit of " +
                                                std::to_string(max_encoded_name) +
                                                " (characters other than A-Z a-z 0-9 _ - . take 3 bytes each)");
    return {};
  }

  bool supports_fair() const override { return true; }
  bool supports_shared() const override { return true; }
  bool supports_election() const override { return true; }
  bool supports_permits() const override { return true; }
  LockDriver& locks() override { return *this; }
  CounterDriver* counters() override { return &counters_; }
  LatchDriver* latches() override { return &counters_; }
  BarrierDriver* barriers() override { return &barriers_; }

  Status ping() override {
    int fd = ::openat(dir_.fd, ".dlock-ping", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return os_error("opening the ping file");
    Status s = take_guard(fd, true, dir_.op_timeout);
    if (s.ok()) {
      std::int64_t now = monotonic_ns();
      if (::pwrite(fd, &now, sizeof now, 0) != static_cast<ssize_t>(sizeof now)) s = os_error("writing");
      drop_guard(fd);
    }
    ::close(fd);
    return s;
  }

  Result<Attempt> try_acquire(const LockRequest& request) override {
    if (request.kind == LockKind::member)
      return Status(errc::internal, "file backend: barrier members are not locks here");
    if (request.kind == LockKind::leader && request.data.size() > max_id_bytes)
      return Status(errc::invalid_argument, "election '" + request.name + "': the id is " +
                                                std::to_string(request.data.size()) +
                                                " bytes; the file backend keeps ids of up to " +
                                                std::to_string(max_id_bytes));
    const auto sent = steady::now();
    const std::string file = encode_name(request.name, file_kind(request.kind));
    auto fd = take_descriptor(file);
    if (!fd) return fd.status();
    if (Status s = take_guard(*fd, true, dir_.op_timeout); !s) {
      ::close(*fd);
      return s;
    }
    std::optional<GuardScope> guard(std::in_place, *fd);
    const bool slot = request.kind == LockKind::read || request.kind == LockKind::permit;
    auto attempt = slot ? take_slot(*fd, request, sent) : take_single(*fd, request, sent);
    guard.reset();
    if (!attempt) {
      ::close(*fd);  // drops a liveness lock taken on the way too
      return attempt.status();
    }
    if (std::holds_alternative<Busy>(*attempt)) put_descriptor(file, *fd);
    return attempt;
  }

  std::unique_ptr<Waiter> watch(const LockRequest& request) override {
    const std::string file = encode_name(request.name, file_kind(request.kind));
    const std::string path = dir_.path_of(file);
    if (request.kind == LockKind::mutex || request.kind == LockKind::write || request.kind == LockKind::permit)
      return wait_in_line(request, file, path);
    if (request.kind == LockKind::read) {
      // Releases wake every waiter while a reader waits (they may all go).
      auto place = dir_.open(file, false);
      if (place && *place >= 0 && lock_byte(*place, F_RDLCK, slots_line.unqueued()))
        return watches_.watch(path, wake_on_release, *place);
      if (place && *place >= 0) ::close(*place);
    }
    if (request.kind == LockKind::leader) {
      auto ticket = queue(request, file);
      if (ticket) {
        auto key = std::make_tuple(request.owner, request.name);
        // Leaving: its byte first, so that the next candidate is the first.
        // Its doorbell: a leader's release rings the next candidate only.
        return watches_.watch(
            path, wake_on_release, ticket->place,
            [this, key, file, place = ticket->place, t = ticket->ticket] {
              unlock_byte(place, queue_base + static_cast<std::int64_t>(t));
              leave_queue(key, file);
            },
            ticket->doorbell);
      }
      // A candidate out of line can't be rung: releases wake everyone.
      auto place = dir_.open(file, false);
      if (place && *place >= 0 && lock_byte(*place, F_RDLCK, unrung_candidates))
        return watches_.watch(path, wake_on_release, *place);
      if (place && *place >= 0) ::close(*place);
    }
    return watches_.watch(path, wake_on_release);
  }

  Status release(const LockRequest& request, Grant& grant) override {
    auto* state = static_cast<FileGrant*>(grant.state.get());
    if (!state || state->fd < 0) return Status(errc::lock_lost, "release '" + request.name + "': no grant");
    // A kind whose waiters wait in line rings the first of them, once what
    // it released lets someone in; everything else, or a file with waiters
    // that can't all be rung (or a SharedMutex's waiting readers), wakes
    // every waiter by closing.
    const Line* line = line_of(request.kind);
    bool wake_all = line == nullptr && request.kind != LockKind::leader;
    std::optional<std::uint64_t> ring;  // the ticket of the waiter or candidate to ring
    Status s = update_own_entry(request, grant, [&](Entry& e) {
      e = Entry{};
      if (wake_all) return Status{};
      const std::int64_t now = monotonic_ns();
      if (request.kind == LockKind::leader) {
        // An Election: the next candidate in line, unless one can't be rung.
        auto unrung = range_locked(state->fd, unrung_candidates, 1);
        auto header = read_header(state->fd);
        auto next = header ? first_in_line(state->fd, header->last_ticket + 1, now)
                           : Result<std::optional<std::uint64_t>>(header.status());
        wake_all = !unrung || *unrung || !next;
        if (!wake_all) ring = *next;
        return Status{};
      }
      auto unqueued = range_locked(state->fd, line->unqueued(), 1);
      if (!unqueued || *unqueued) {
        wake_all = true;
        return Status{};
      }
      // A reader that leaves others holding lets no one in.
      if (request.kind == LockKind::read) {
        auto others = holders_besides(state->fd, state->offset, now);
        if (!others || *others) {
          wake_all = !others;
          return Status{};
        }
      }
      auto found = first_waiter(state->fd, *line, now);
      if (!found) wake_all = true;
      else if (*found) ring = (*found)->waiter.ticket;
      return Status{};
    });
    if (s && ring) {
      auto id = file_id(state->fd);
      wake_all = !id || !ringer_.ring(doorbells_, *id, *ring);
    }
    if (!s || wake_all) {
      // Closing drops our liveness lock and wakes the waiters (IN_CLOSE_WRITE).
      ::close(state->fd);
    } else {
      unlock_byte(state->fd, live_base + static_cast<std::int64_t>(grant.token));
      put_descriptor(encode_name(request.name, file_kind(request.kind)), state->fd);
    }
    state->fd = -1;
    return s;
  }

  void renew(std::span<Renewal> batch) override {
    for (auto& item : batch) {
      const auto sent = steady::now();
      const auto lease = item.request->lease;
      const std::int64_t expires = monotonic_ns() + std::chrono::nanoseconds(lease).count();
      item.outcome = update_own_entry(*item.request, *item.grant, [&](Entry& e) {
        // A lease that ran out is not brought back, even if nobody took it
        // (as on every other backend): the holder may have been told it lost.
        if (e.expires_ns <= monotonic_ns())
          return Status(errc::lock_lost, std::string(kind_name(item.request->kind)) + " '" + item.request->name +
                                             "': the lease ran out before renewal");
        e.expires_ns = expires;
        return Status{};
      });
      if (item.outcome.ok()) item.grant->valid_until = sent + lease;
    }
  }

  Status force_release(std::string_view name) override {
    auto fd = dir_.open(encode_name(name), true);
    if (!fd) return fd.status();
    Status s = take_guard(*fd, true, dir_.op_timeout);
    if (s) {
      GuardScope guard(*fd);
      auto record = read_record(*fd);
      if (!record) {
        s = record.status();
      } else if (record->holder.token != 0) {
        record->holder = Entry{};
        s = write_record(*fd, *record, dir_.sync);
      }
    }
    ::close(*fd);
    return s;
  }

  Result<std::vector<LockInfo>> list(std::string_view prefix) override {
    int dfd = ::openat(dir_.fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return os_error("listing the lock directory");
    DIR* dir = ::fdopendir(dfd);
    if (!dir) {
      ::close(dfd);
      return os_error("listing the lock directory");
    }
    std::vector<LockInfo> out;
    Status failed;
    while (dirent* entry = ::readdir(dir)) {
      auto decoded = decode_name(entry->d_name);
      if (!decoded || !std::string_view(decoded->first).starts_with(prefix)) continue;
      if (Status s = list_file(entry->d_name, decoded->first, decoded->second, out); !s) {
        failed = s;
        break;
      }
    }
    ::closedir(dir);
    if (!failed) return failed;
    std::sort(out.begin(), out.end(), [](const LockInfo& a, const LockInfo& b) {
      return std::tie(a.name, a.kind, a.token) < std::tie(b.name, b.kind, b.token);
    });
    return out;
  }

  // The leader, or if nobody holds it now, the candidate first in line
  // (who takes it next, as on zk:// the lowest node leads at once).
  Result<Holder> holder(std::string_view name, LockKind kind, bool watch) override {
    if (kind != LockKind::leader) return Status(errc::unsupported, "file backend: holder() is for elections");
    const std::string file = encode_name(name, FileKind::election);
    Holder out;
    // Read-only: closing it raises no IN_CLOSE_WRITE, which would wake every
    // other observer into reading (and closing) again.
    auto fd = dir_.open(file, false);
    if (!fd) return fd.status();
    if (*fd < 0 && watch) {
      // A watch needs the file: made once (a new one reads as nobody leading).
      auto made = dir_.open(file, true);
      if (!made) return made.status();
      ::close(*made);
      fd = dir_.open(file, false);
      if (!fd) return fd.status();
    }
    if (*fd < 0) return out;
    // Armed before the read, so a change in between is not missed.
    if (watch) out.change = watches_.watch(dir_.path_of(file), wake_on_change);
    Status s = read_leader(*fd, out.data);
    ::close(*fd);
    if (!s) return s;
    return out;
  }

 private:
  // Mutex, an Election's leader, a SharedMutex's writer: the record's holder.
  Result<Attempt> take_single(int fd, const LockRequest& request, steady::time_point sent) {
    auto record = read_record(fd);
    if (!record) return record.status();
    const std::int64_t now = monotonic_ns();
    auto held = entry_held(fd, record->holder, now);
    if (!held) return held.status();
    std::optional<Busy> busy;
    if (*held) busy = Busy{expires_at(sent, record->holder.expires_ns, now)};
    if (request.kind == LockKind::write) {
      auto header = read_header(fd);
      if (!header) return header.status();
      // Readers holding their shares keep a writer out until the first ends.
      if (!busy) {
        auto readers = read_entries(fd, header->used);
        if (!readers) return readers.status();
        std::optional<std::int64_t> first_end;
        for (const auto& r : *readers) {
          auto alive = entry_held(fd, r, now);
          if (!alive) return alive.status();
          if (*alive) first_end = std::min(first_end.value_or(r.expires_ns), r.expires_ns);
        }
        if (first_end) busy = Busy{expires_at(sent, *first_end, now)};
      }
      // A writer that waits keeps later readers out for as long as it retries.
      if (busy) {
        header->writer_waiting_until = now + waiting_lease_ns;
        if (Status s = write_header(fd, *header, false); !s) return s;
      }
    }
    if (request.kind == LockKind::leader) {
      auto header = read_header(fd);
      if (!header) return header.status();
      const std::uint64_t ticket = ticket_of(request);
      if (ticket) {
        if (Status s = renew_place(fd, ticket); !s) return s;
      }
      // Candidates ahead in line (or any in line, for one that has no place) go first.
      if (!busy) {
        auto ahead = first_in_line(fd, ticket ? ticket : header->last_ticket + 1, now);
        if (!ahead) return ahead.status();
        if (*ahead) busy = Busy{};
      }
    }
    if (request.kind == LockKind::mutex || request.kind == LockKind::write) {
      if (Status s = mind_the_line(fd, request, now, sent, busy); !s) return s;
    }
    if (busy) return Attempt(*busy);
    auto next = next_token(*record);
    if (!next) return next.status();
    const std::uint64_t token = *next;
    if (Status s = take_liveness(fd, token); !s) return s;
    record->last_token = token;
    record->holder = make_entry(token, request, now, dir_.pid);
    if (request.kind == LockKind::leader) {
      if (Status s = write_id(fd, leader_id_offset, token, request.data, false); !s) return s;
    }
    if (Status s = write_record(fd, *record, dir_.sync); !s) return s;
    return granted(fd, token, holder_offset, request, sent);
  }

  // A SharedMutex's reader, a Semaphore's permit: a free entry slot.
  Result<Attempt> take_slot(int fd, const LockRequest& request, steady::time_point sent) {
    auto record = read_record(fd);
    if (!record) return record.status();
    auto header = read_header(fd);
    if (!header) return header.status();
    const std::int64_t now = monotonic_ns();
    std::uint32_t capacity = max_readers;
    bool header_changed = false;
    if (request.kind == LockKind::permit) {
      if (header->permits == 0) {
        header->permits = request.permits;  // the first declaration wins
        header_changed = true;
      } else if (header->permits != request.permits) {
        return Status(errc::invalid_argument, "semaphore '" + request.name + "' has " +
                                                  std::to_string(header->permits) +
                                                  " permits (as first declared); this handle declared " +
                                                  std::to_string(request.permits));
      }
      capacity = static_cast<std::uint32_t>(header->permits);
    } else {
      auto writing = entry_held(fd, record->holder, now);
      if (!writing) return writing.status();
      if (*writing) return Attempt(Busy{expires_at(sent, record->holder.expires_ns, now)});
      // A writer waits (and has retried lately: a stopped one stops counting).
      if (header->writer_waiting_until > now) {
        auto writer_queued = range_locked(fd, writer_waiting, 1);
        if (!writer_queued) return writer_queued.status();
        if (*writer_queued) return Attempt(Busy{expires_at(sent, header->writer_waiting_until, now)});
      }
    }
    auto entries = read_entries(fd, header->used);
    if (!entries) return entries.status();
    std::optional<std::uint32_t> free_slot;
    std::optional<std::int64_t> first_end;
    std::int64_t held_now = 0;
    for (std::uint32_t i = 0; i < entries->size(); ++i) {
      const Entry& e = (*entries)[i];
      auto held = entry_held(fd, e, now);
      if (!held) return held.status();
      if (!*held) {
        if (!free_slot) free_slot = i;
      } else {
        ++held_now;
        first_end = std::min(first_end.value_or(e.expires_ns), e.expires_ns);
      }
    }
    if (!free_slot && header->used < capacity) {
      free_slot = header->used++;
      header_changed = true;
    }
    if (!free_slot && request.kind == LockKind::read)
      return Status(errc::unavailable, "shared_mutex '" + request.name + "': more than " +
                                           std::to_string(max_readers) + " readers at once");
    // Permits left once this one is taken (for the next in line).
    std::int64_t left = 0;
    if (request.kind == LockKind::permit) {
      std::optional<Busy> busy;
      if (!free_slot) busy = Busy{first_end ? expires_at(sent, *first_end, now) : steady::time_point::max()};
      const std::int64_t free_permits = std::max<std::int64_t>(0, header->permits - held_now);
      if (Status s = mind_the_line(fd, request, now, sent, busy, free_permits); !s) return s;
      if (busy) return Attempt(*busy);
      left = free_permits - 1;
    }
    auto next = next_token(*record);
    if (!next) return next.status();
    const std::uint64_t token = *next;
    if (Status s = take_liveness(fd, token); !s) return s;
    record->last_token = token;
    const std::int64_t at = entry_offset(*free_slot);
    if (Status s = write_entry(fd, at, make_entry(token, request, now, dir_.pid), false); !s) return s;
    if (header_changed) {
      if (Status s = write_header(fd, *header, false); !s) return s;
    }
    if (Status s = write_record(fd, *record, dir_.sync); !s) return s;
    // Another permit is free: the next in line may take it now (a release
    // rings one waiter; two quick ones may both have rung the same one).
    if (left > 0) ring_first(fd, slots_line, now);
    return granted(fd, token, at, request, sent);
  }

  static Attempt granted(int fd, std::uint64_t token, std::int64_t at, const LockRequest& request,
                         steady::time_point sent) {
    Grant grant;
    grant.token = token;
    grant.valid_until = sent + request.lease;
    grant.state = std::make_unique<FileGrant>(fd, at);
    return Attempt(std::move(grant));
  }

  // A waiter's place in line is kept by owner, name and kind (a Mutex and
  // a Semaphore of one name are two files).
  using LineKey = std::tuple<std::string, std::string, LockKind>;
  static LineKey line_key(const LockRequest& request) {
    return std::make_tuple(request.owner, request.name, request.kind);
  }

  // A line (a Mutex's, a SharedMutex writers', a Semaphore's): a free lock
  // waits for the first in line once it has waited longer than it lets
  // others go first (or always, if either side is fair); a Semaphore's
  // caller, while such waiters ahead of it would use up the free permits
  // (`free_permits`). The caller's own place is renewed while it waits and
  // left when it takes the lock.
  Status mind_the_line(int fd, const LockRequest& request, std::int64_t now, steady::time_point sent,
                       std::optional<Busy>& busy, std::optional<std::int64_t> free_permits = std::nullopt) {
    const Line& line = *line_of(request.kind);
    auto place = place_in_line(request);
    if (!busy) {
      // Those who joined first waited longest: the first few decide.
      auto ahead = waiters_in_line(fd, line, now, static_cast<std::size_t>(std::max<std::int64_t>(1, free_permits.value_or(1))));
      if (!ahead) return ahead.status();
      std::int64_t entitled = 0;
      std::optional<std::int64_t> until;
      for (const PlaceInLine& w : *ahead) {
        if (place && w.slot == place->slot) break;  // only those before us
        if (request.fair || request.max_barging_wait.count() == 0 || now - w.waiter.since_ns >= w.waiter.max_barging_ns) {
          ++entitled;
          until = std::min(until.value_or(w.waiter.waiting_until), w.waiter.waiting_until);
        }
      }
      if (entitled > 0 && entitled >= free_permits.value_or(1)) busy = Busy{expires_at(sent, *until, now)};
    }
    if (!place) return {};
    if (busy) return renew_place_in_line(fd, line, *place, now);
    forget_place(request);
    return leave_line(fd, line, *place, false);
  }

  // A waiter in line, woken by its doorbell or when a holder dies; without
  // a free slot, woken by every release as before. A SharedMutex's writer
  // also read-locks writer_waiting: later readers queue behind it.
  std::unique_ptr<Waiter> wait_in_line(const LockRequest& request, const std::string& file, const std::string& path) {
    const Line& line = *line_of(request.kind);
    auto place = dir_.open(file, false);
    if (!place || *place < 0) return watches_.watch(path, wake_on_release);
    if (request.kind == LockKind::write && !lock_byte(*place, F_RDLCK, writer_waiting)) {
      ::close(*place);
      return watches_.watch(path, wake_on_release);
    }
    std::optional<Joined> joined;
    if (auto fd = take_descriptor(file); fd) {
      if (take_guard(*fd, true, dir_.op_timeout)) {
        GuardScope guard(*fd);
        const std::chrono::nanoseconds barging = request.fair ? std::chrono::milliseconds(0) : request.max_barging_wait;
        auto j = join_line(doorbells_, *fd, line, *place, barging.count(), monotonic_ns(), dir_.sync);
        if (j && *j) joined = **j;
      }
      put_descriptor(file, *fd);
    }
    if (!joined) {
      if (lock_byte(*place, F_RDLCK, line.unqueued())) return watches_.watch(path, wake_on_release, *place);
      ::close(*place);
      return watches_.watch(path, wake_on_release);
    }
    auto key = line_key(request);
    {
      std::lock_guard lk(mu_);
      in_line_[key] = joined->place;
    }
    return watches_.watch(
        path, wake_on_release, *place, [this, key, file, kind = request.kind] { give_up_place(key, file, kind); },
        joined->doorbell);
  }

  // A waiter that goes without the lock leaves the line, and if it was
  // rung (the lock is free), rings the next one in its stead.
  void give_up_place(const LineKey& key, const std::string& file, LockKind kind) {
    std::optional<PlaceInLine> place;
    {
      std::lock_guard lk(mu_);
      if (auto it = in_line_.find(key); it != in_line_.end()) {
        place = it->second;
        in_line_.erase(it);
      }
    }
    if (!place) return;  // it took the lock, and left the line then
    auto fd = take_descriptor(file);
    if (!fd) return;
    if (take_guard(*fd, true, dir_.op_timeout)) {
      GuardScope guard(*fd);
      const std::int64_t now = monotonic_ns();
      const Line& line = *line_of(kind);
      auto open = lets_in(*fd, kind, now);
      if (leave_line(*fd, line, *place, dir_.sync) && open && *open) ring_first(*fd, line, now);
    }
    put_descriptor(file, *fd);
  }

  // Whether the lock of `kind` in fd's file would let a waiter in now.
  Result<bool> lets_in(int fd, LockKind kind, std::int64_t now) {
    auto record = read_record(fd);
    if (!record) return record.status();
    if (kind == LockKind::mutex || kind == LockKind::write) {
      auto held = entry_held(fd, record->holder, now);
      if (!held || *held) return held ? Result<bool>(false) : held;
      if (kind == LockKind::mutex) return true;
      auto readers = holders_besides(fd, -1, now);
      if (!readers) return readers.status();
      return !*readers;
    }
    auto header = read_header(fd);
    if (!header) return header.status();
    auto entries = read_entries(fd, header->used);
    if (!entries) return entries.status();
    std::int64_t held = 0;
    for (const Entry& e : *entries) {
      auto alive = entry_held(fd, e, now);
      if (!alive) return alive.status();
      held += *alive;
    }
    return held < header->permits;
  }

  // Whether anyone holds fd's SharedMutex file but the entry at `mine`:
  // its writer, or a reader.
  Result<bool> holders_besides(int fd, std::int64_t mine, std::int64_t now) {
    auto record = read_record(fd);
    if (!record) return record.status();
    auto writer = entry_held(fd, record->holder, now);
    if (!writer || *writer) return writer;
    auto header = read_header(fd);
    if (!header) return header.status();
    auto entries = read_entries(fd, header->used);
    if (!entries) return entries.status();
    for (std::uint32_t i = 0; i < entries->size(); ++i) {
      if (entry_offset(i) == mine) continue;
      auto alive = entry_held(fd, (*entries)[i], now);
      if (!alive || *alive) return alive;
    }
    return false;
  }

  // Rings the first waiter in `line`, if any (best effort: a waiter not
  // rung finds out at its next periodic look).
  void ring_first(int fd, const Line& line, std::int64_t now) {
    auto first = first_waiter(fd, line, now);
    if (!first || !*first) return;
    if (auto id = file_id(fd); id) ringer_.ring(doorbells_, *id, (*first)->waiter.ticket);
  }

  std::optional<PlaceInLine> place_in_line(const LockRequest& request) const {
    std::lock_guard lk(mu_);
    auto it = in_line_.find(line_key(request));
    if (it == in_line_.end()) return std::nullopt;
    return it->second;
  }

  void forget_place(const LockRequest& request) {
    std::lock_guard lk(mu_);
    in_line_.erase(line_key(request));
  }

  // Election: a place in line for a candidate about to wait, held by the
  // returned descriptor's lock on its ticket's byte, and its doorbell. None
  // if no doorbell could be bound: a ticket in line can always be rung.
  struct Queued {
    std::uint64_t ticket;
    int place;
    Doorbell doorbell;
  };
  // The descriptor is read-only, so closing it (when the candidate leads
  // or gives up) raises no IN_CLOSE_WRITE: it wakes no other candidate.
  std::optional<Queued> queue(const LockRequest& request, const std::string& file) {
    auto place = dir_.open(file, false);
    if (!place || *place < 0) return std::nullopt;
    auto fd = take_descriptor(file);
    if (!fd) {
      ::close(*place);
      return std::nullopt;
    }
    std::optional<Queued> out;
    if (take_guard(*fd, true, dir_.op_timeout)) {
      GuardScope guard(*fd);
      auto header = read_header(*fd);
      auto next = header ? next_ticket(*header) : Result<std::uint64_t>(header.status());
      auto id = file_id(*fd);
      auto bell = next && id ? open_doorbell(doorbells_, *id, *next) : Result<Doorbell>(Status(errc::unavailable, ""));
      if (bell) {
        const std::uint64_t ticket = *next;
        header->last_ticket = ticket;
        // The byte is ours before the header says the ticket exists: a
        // candidate that comes later always sees us in line.
        const std::int64_t byte = queue_base + static_cast<std::int64_t>(ticket);
        if (lock_byte(*place, F_RDLCK, byte) && write_id(*fd, candidate_id_offset(ticket), ticket, request.data, false) &&
            write_header(*fd, *header, dir_.sync)) {
          out.emplace(Queued{ticket, *place, *bell});
        } else {
          unlock_byte(*place, byte);
          close_doorbell(*bell);
        }
      }
    }
    put_descriptor(file, *fd);
    if (!out) {
      ::close(*place);
      return std::nullopt;
    }
    std::lock_guard lk(mu_);
    tickets_[std::make_tuple(request.owner, request.name)] = out->ticket;
    return out;
  }

  // A candidate that goes (leader, or given up) is out of line; if nobody
  // leads, the next candidate is rung in its stead.
  void leave_queue(const std::tuple<std::string, std::string>& key, const std::string& file) {
    {
      std::lock_guard lk(mu_);
      tickets_.erase(key);
    }
    auto fd = take_descriptor(file);
    if (!fd) return;
    if (take_guard(*fd, true, dir_.op_timeout)) {
      GuardScope guard(*fd);
      const std::int64_t now = monotonic_ns();
      auto record = read_record(*fd);
      auto held = record ? entry_held(*fd, record->holder, now) : Result<bool>(record.status());
      auto header = read_header(*fd);
      if (held && !*held && header) {
        auto next = first_in_line(*fd, header->last_ticket + 1, now);
        if (next && *next) {
          if (auto id = file_id(*fd); id) ringer_.ring(doorbells_, *id, **next);
        }
      }
    }
    put_descriptor(file, *fd);
  }

  // A queued candidate retried: its place counts for waiting_lease_ns more.
  Status renew_place(int fd, std::uint64_t ticket) {
    const std::int64_t at = candidate_id_offset(ticket);
    auto slot = read_id(fd, at);
    if (!slot) return slot.status();
    return slot->ticket == ticket ? renew_id(fd, at) : Status{};
  }

  // The lowest ticket below `before` whose candidate waits: its byte locked
  // and its place renewed lately (a candidate whose slot was reused by a
  // later ticket counts too). nullopt if nobody is in line before it.
  Result<std::optional<std::uint64_t>> first_in_line(int fd, std::uint64_t before, std::int64_t now) {
    auto locked = [&](std::uint64_t a, std::uint64_t b) {
      return range_locked(fd, queue_base + static_cast<std::int64_t>(a), static_cast<std::int64_t>(b - a));
    };
    for (std::uint64_t from = 1; from < before;) {
      auto any = locked(from, before);
      if (!any) return any.status();
      if (!*any) break;
      // The lowest locked byte in [lo, hi), by halving the range that has one.
      std::uint64_t lo = from, hi = before;
      while (hi - lo > 1) {
        const std::uint64_t mid = lo + (hi - lo) / 2;
        auto below = locked(lo, mid);
        if (!below) return below.status();
        if (*below) hi = mid;
        else lo = mid;
      }
      auto slot = read_id(fd, candidate_id_offset(lo));
      if (!slot) return slot.status();
      if (slot->ticket != lo || slot->waiting_until > now) return std::optional<std::uint64_t>(lo);
      from = lo + 1;  // a stopped candidate: it holds nobody back
    }
    return std::optional<std::uint64_t>();
  }

  std::uint64_t ticket_of(const LockRequest& request) const {
    std::lock_guard lk(mu_);
    auto it = tickets_.find(std::make_tuple(request.owner, request.name));
    return it == tickets_.end() ? 0 : it->second;
  }

  // The leader's id, or the id of the live candidate with the lowest ticket.
  Status read_leader(int fd, std::optional<std::string>& leader) {
    if (Status s = take_guard(fd, false, dir_.op_timeout); !s) return s;
    GuardScope guard(fd);
    auto record = read_record(fd);
    if (!record) return record.status();
    const std::int64_t now = monotonic_ns();
    auto held = entry_held(fd, record->holder, now);
    if (!held) return held.status();
    if (*held) {
      auto id = read_id(fd, leader_id_offset);
      if (!id) return id.status();
      leader = std::string(id->data, id->len);
      return {};
    }
    auto header = read_header(fd);
    if (!header) return header.status();
    auto first = first_in_line(fd, header->last_ticket + 1, now);
    if (!first) return first.status();
    if (!*first) return {};
    auto id = read_id(fd, candidate_id_offset(**first));
    if (!id) return id.status();
    if (id->ticket == **first) leader = std::string(id->data, id->len);
    return {};
  }

  // The holders in one file, as `dlock status` shows them.
  Status list_file(const char* file, const std::string& name, FileKind kind, std::vector<LockInfo>& out) {
    if (kind == FileKind::counter) return {};
    int fd = ::openat(dir_.fd, file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return {};  // removed meanwhile
    Status s = take_guard(fd, false, dir_.op_timeout);
    if (!s) {
      ::close(fd);
      return s;
    }
    std::optional<GuardScope> guard(std::in_place, fd);
    const std::int64_t now = monotonic_ns();
    auto show = [&](const Entry& e, std::string what, std::string prefix) -> Status {
      auto held = entry_held(fd, e, now);
      if (!held) return held.status();
      if (!*held) return {};
      LockInfo info;
      info.name = name;
      info.holder = prefix + "pid " + std::to_string(e.pid) + " owner " +
                    short_owner(std::string_view(e.owner, e.owner_len));
      info.token = e.token;
      if (e.expires_ns != std::numeric_limits<std::int64_t>::max())  // barrier members have no lease
        info.remaining =
            std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::nanoseconds(e.expires_ns - now));
      info.kind = std::move(what);
      out.push_back(std::move(info));
      return {};
    };
    auto record = read_record(fd);
    if (!record) s = record.status();
    if (s && kind == FileKind::mutex) s = show(record->holder, "mutex", "");
    if (s && kind == FileKind::shared) s = show(record->holder, "write", "");
    if (s && kind == FileKind::election) {
      auto id = read_id(fd, leader_id_offset);
      if (!id) s = id.status();
      else s = show(record->holder, "leader", "'" + std::string(id->data, id->len) + "', ");
    }
    if (s && (kind == FileKind::shared || kind == FileKind::permits || kind == FileKind::barrier)) {
      auto header = read_header(fd);
      auto entries = header ? read_entries(fd, header->used) : Result<std::vector<Entry>>(header.status());
      if (!entries) s = entries.status();
      const char* what = kind == FileKind::shared ? "read" : kind == FileKind::permits ? "permit" : "member";
      for (std::size_t i = 0; s && i < entries->size(); ++i) s = show((*entries)[i], what, "");
    }
    guard.reset();
    ::close(fd);
    return s;
  }

  // Rewrites the grant's entry if it still names this grant and `change`
  // agrees; lock_lost otherwise.
  template <class Change>
  Status update_own_entry(const LockRequest& request, Grant& grant, Change change) {
    auto* state = static_cast<FileGrant*>(grant.state.get());
    if (!state || state->fd < 0) return Status(errc::lock_lost, "lock '" + request.name + "': released");
    if (Status s = take_guard(state->fd, true, dir_.op_timeout); !s) return s;
    GuardScope guard(state->fd);
    auto entry = read_entry(state->fd, state->offset);
    if (!entry) return entry.status();
    if (entry->token != grant.token || !owner_is(*entry, request.owner))
      return Status(errc::lock_lost, std::string(kind_name(request.kind)) + " '" + request.name +
                                         "': taken over by another holder (lease ran out, or force-released)");
    if (Status s = change(*entry); !s) return s;
    return write_entry(state->fd, state->offset, *entry, dir_.sync);
  }

  Result<int> take_descriptor(const std::string& file) {
    {
      std::lock_guard lk(mu_);
      if (auto it = idle_.find(file); it != idle_.end() && !it->second.empty()) {
        int fd = it->second.back();
        it->second.pop_back();
        --idle_count_;
        return fd;
      }
    }
    return dir_.open(file, true);
  }

  void put_descriptor(const std::string& file, int fd) {
    {
      std::lock_guard lk(mu_);
      if (idle_count_ < max_idle_descriptors) {
        idle_[file].push_back(fd);
        ++idle_count_;
        return;
      }
    }
    ::close(fd);
  }

  Directory with_watches(Directory dir) {
    dir.watches = &watches_;
    return dir;
  }

  Watches watches_;  // before dir_: every Waiter goes before it
  DoorbellRinger ringer_;
  const Directory dir_;
  const Doorbells doorbells_{dir_.fd};  // after dir_: it is made in there
  Counters counters_;
  Barriers barriers_;
  mutable std::mutex mu_;
  std::map<std::string, std::vector<int>> idle_;  // guarded by mu_
  std::size_t idle_count_ = 0;                    // guarded by mu_
  // An election candidate's ticket while its Waiter lives, by (owner, name).
  std::map<std::tuple<std::string, std::string>, std::uint64_t> tickets_;  // guarded by mu_
  // A waiter's place in line while its Waiter lives (line_key).
  std::map<LineKey, PlaceInLine> in_line_;  // guarded by mu_
};

}  // namespace

Result<std::unique_ptr<Backend>> open_file_backend(const Url& url, const ClientOptions& options) {
  auto config = parse_config(url, options);
  if (!config) return config.status();
  const std::string& path = config->dir;
  // Refuse a network file system before creating anything there.
  if (on_network_file_system(parent_dir(path)))
    return invalid_url("'" + path + "' is on a network file system, where these locks are not reliable");
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
    if (errno == ENOENT) return invalid_url("the parent of '" + path + "' does not exist");
    return os_error("creating '" + path + "'");
  }
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOTDIR || errno == ELOOP) return invalid_url("'" + path + "' is not a directory (or is a symlink)");
    return os_error("opening '" + path + "'");
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    Status s = os_error("inspecting '" + path + "'");
    ::close(fd);
    return s;
  }
  std::string problem = ownership_problem(st, path);
  if (problem.empty() && on_network_file_system(path))  // the directory may itself be a mount point
    problem = "'" + path + "' is on a network file system, where these locks are not reliable";
  if (!problem.empty()) {
    ::close(fd);
    return invalid_url(problem);
  }
  Directory directory{path, fd, config->sync, options.op_timeout, static_cast<std::int32_t>(::getpid())};
  return std::unique_ptr<Backend>(std::make_unique<FileBackend>(std::move(directory)));
}

}  // namespace dlock::detail
