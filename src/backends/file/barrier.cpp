#include "backends/file/barrier.h"

#include "backends/file/file_waiter.h"
#include "backends/file/lock_file.h"

#include <limits>

namespace dlock::detail::file {
namespace {

// Members have no lease: an entry is in while its liveness lock is held.
constexpr std::int64_t no_expiry = std::numeric_limits<std::int64_t>::max();

// How many members are in now (entries held by live members). The caller's
// own entry (`own`, if still there) counts: a descriptor does not see its
// own liveness lock.
Result<std::uint32_t> live_members(int fd, const Header& header, std::uint64_t own) {
  auto entries = read_entries(fd, header.used);
  if (!entries) return entries.status();
  const std::int64_t now = monotonic_ns();
  std::uint32_t n = 0;
  for (const auto& e : *entries) {
    if (own != 0 && e.token == own) {
      ++n;
      continue;
    }
    auto held = entry_held(fd, e, now);
    if (!held) return held.status();
    if (*held) ++n;
  }
  return n;
}

// With the guard held: takes `member`'s entry out if it is still there, and
// if nobody is left in, ends the round (the next one starts shut).
Status take_out(int fd, std::uint64_t token, std::uint32_t slot, Header& header, bool sync) {
  auto mine = read_entry(fd, entry_offset(slot));
  if (!mine) return mine.status();
  if (mine->token == token) {
    if (Status s = write_entry(fd, entry_offset(slot), Entry{}, sync); !s) return s;
  }
  auto in = live_members(fd, header, 0);
  if (!in) return in.status();
  if (*in == 0 && (header.opened || header.used)) {
    ++header.round;
    header.opened = 0;
    return write_header(fd, header, sync);
  }
  return {};
}

std::string barrier_file(const std::string& name) { return encode_name(name, FileKind::barrier); }

}  // namespace

Barriers::~Barriers() {
  for (auto& [key, m] : members_) ::close(m.fd);
}

Result<std::string> Barriers::join(const std::string& name, std::chrono::milliseconds lease,
                                   steady::time_point deadline) {
  (void)lease;  // a member's life is its process's
  auto fd = dir_.open(barrier_file(name), true);
  if (!fd) return fd.status();
  Member m;
  m.fd = *fd;
  Status s = take_guard(*fd, true, Directory::left(deadline));
  if (s) {
    GuardScope guard(*fd);
    s = [&]() -> Status {
      auto record = read_record(*fd);
      if (!record) return record.status();
      auto header = read_header(*fd);
      if (!header) return header.status();
      auto entries = read_entries(*fd, header->used);
      if (!entries) return entries.status();
      const std::int64_t now = monotonic_ns();
      std::optional<std::uint32_t> free_slot;
      std::uint32_t in = 0;
      for (std::uint32_t i = 0; i < entries->size(); ++i) {
        auto held = entry_held(*fd, (*entries)[i], now);
        if (!held) return held.status();
        if (*held) ++in;
        else if (!free_slot) free_slot = i;
      }
      // An open round whose members all died is over.
      if (in == 0 && header->opened) {
        ++header->round;
        header->opened = 0;
      }
      auto next = next_token(*record);
      if (!next) return next.status();
      m.slot = free_slot ? *free_slot : header->used++;
      m.token = *next;
      m.round = header->round;
      if (Status t = take_liveness(*fd, m.token); !t) return t;
      record->last_token = m.token;
      Entry e{};
      e.token = m.token;
      e.expires_ns = no_expiry;
      e.acquired_unix_ms = unix_ms();
      e.pid = dir_.pid;
      if (Status t = write_entry(*fd, entry_offset(m.slot), e, false); !t) return t;
      if (Status t = write_header(*fd, *header, false); !t) return t;
      return write_record(*fd, *record, dir_.sync);
    }();
  }
  if (!s) {
    ::close(*fd);
    return s;
  }
  const std::string id = std::to_string(m.token);
  std::lock_guard lk(mu_);
  members_[{name, id}] = m;
  return id;
}

Result<BarrierCheck> Barriers::entered(const std::string& name, const std::string& member, int parties, bool watch,
                                       steady::time_point deadline) {
  auto m = find({name, member});
  if (!m) return Status(errc::lock_lost, "barrier '" + name + "': this member is not in it any more");
  BarrierCheck out;
  // Armed before the read, so a change in between is not missed.
  if (watch) out.change = dir_.watches->watch(dir_.path_of(barrier_file(name)), wake_on_change);
  if (Status s = take_guard(m->fd, true, Directory::left(deadline)); !s) return s;
  GuardScope guard(m->fd);
  auto header = read_header(m->fd);
  if (!header) return header.status();
  auto mine = read_entry(m->fd, entry_offset(m->slot));
  if (!mine) return mine.status();
  if (header->round != m->round || mine->token != m->token)
    return Status(errc::lock_lost, "barrier '" + name + "': this member's entry is gone");
  if (!header->opened) {
    auto in = live_members(m->fd, *header, m->token);
    if (!in) return in.status();
    if (*in < static_cast<std::uint32_t>(parties)) return out;
    header->opened = 1;
    if (Status s = write_header(m->fd, *header, dir_.sync); !s) return s;
  }
  out.done = true;
  out.change.reset();
  return out;
}

Result<BarrierCheck> Barriers::left(const std::string& name, const std::string& member, bool watch,
                                    steady::time_point deadline) {
  const Key key{name, member};
  auto m = find(key);
  if (!m) return BarrierCheck{true, nullptr};  // out already
  BarrierCheck out;
  if (watch) out.change = dir_.watches->watch(dir_.path_of(barrier_file(name)), wake_on_change);
  {
    if (Status s = take_guard(m->fd, true, Directory::left(deadline)); !s) return s;
    GuardScope guard(m->fd);
    auto header = read_header(m->fd);
    if (!header) return header.status();
    // The round this member was in ended: everyone left.
    out.done = header->round != m->round;
    if (!out.done) {
      if (Status s = take_out(m->fd, m->token, m->slot, *header, dir_.sync); !s) return s;
      out.done = header->round != m->round;
    }
  }
  if (!out.done) return out;
  out.change.reset();
  forget(key);
  return out;
}

void Barriers::remove(const std::string& name, const std::string& member, steady::time_point deadline) noexcept {
  const Key key{name, member};
  auto m = find(key);
  if (!m) return;
  if (take_guard(m->fd, true, Directory::left(deadline))) {
    GuardScope guard(m->fd);
    auto header = read_header(m->fd);
    if (header && header->round == m->round) (void)take_out(m->fd, m->token, m->slot, *header, dir_.sync);
  }
  // Closing drops the liveness lock too: even if the entry could not be
  // rewritten, it no longer counts.
  forget(key);
}

std::optional<Barriers::Member> Barriers::find(const Key& key) const {
  std::lock_guard lk(mu_);
  auto it = members_.find(key);
  if (it == members_.end()) return std::nullopt;
  return it->second;
}

void Barriers::forget(const Key& key) {
  int fd = -1;
  {
    std::lock_guard lk(mu_);
    auto it = members_.find(key);
    if (it == members_.end()) return;
    fd = it->second.fd;
    members_.erase(it);
  }
  ::close(fd);
}

}  // namespace dlock::detail::file
