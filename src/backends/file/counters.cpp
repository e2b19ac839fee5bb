#include "backends/file/counters.h"

#include "backends/file/file_waiter.h"
#include "backends/file/lock_file.h"
#include "core/count_value.h"

#include <algorithm>

namespace dlock::detail::file {
namespace {

int bytes_of(CounterWidth width) { return width == CounterWidth::int64 ? 8 : 4; }

// One counter file, open and guarded for the length of one call.
class Open {
 public:
  ~Open() {
    if (guarded_) drop_guard(fd_);
    if (fd_ >= 0) ::close(fd_);
  }
  Open(const Open&) = delete;
  Open& operator=(const Open&) = delete;

  // Writers create the file; a reader of a missing one gets fd() < 0.
  static Result<std::unique_ptr<Open>> at(const Directory& dir, const std::string& name, bool write,
                                          steady::time_point deadline) {
    auto fd = dir.open(encode_name(name, FileKind::counter), write);
    if (!fd) return fd.status();
    std::unique_ptr<Open> open(new Open(*fd));
    if (*fd < 0) return open;
    if (Status s = take_guard(*fd, write, Directory::left(deadline)); !s) return s;
    open->guarded_ = true;
    return open;
  }

  int fd() const { return fd_; }

 private:
  explicit Open(int fd) : fd_(fd) {}
  int fd_;
  bool guarded_ = false;
};

// Under the guard: the counter's value and width (a missing one: 0 in `width`).
Result<std::pair<std::int64_t, int>> current(int fd, CounterWidth width) {
  if (fd < 0) return std::pair<std::int64_t, int>{0, bytes_of(width)};
  auto count = read_count(fd);
  if (!count) return count.status();
  if (!*count) return std::pair<std::int64_t, int>{0, bytes_of(width)};
  return std::pair<std::int64_t, int>{(*count)->value, (*count)->width};
}

}  // namespace

Result<std::int64_t> Counters::load(const std::string& name, steady::time_point deadline) {
  auto open = Open::at(dir_, name, false, deadline);
  if (!open) return open.status();
  auto now = current((*open)->fd(), CounterWidth::int32);
  if (!now) return now.status();
  return now->first;
}

Status Counters::store(const std::string& name, std::int64_t value, CounterWidth width,
                       steady::time_point deadline) {
  auto open = Open::at(dir_, name, true, deadline);
  if (!open) return open.status();
  auto now = current((*open)->fd(), width);
  if (!now) return now.status();
  if (Status s = check_count_fits(value, now->second, "store: value"); !s) return s;
  return write_count((*open)->fd(), now->second, value, dir_.sync);
}

Result<std::int64_t> Counters::fetch_add(const std::string& name, std::int64_t delta, CounterWidth width,
                                         steady::time_point deadline) {
  auto open = Open::at(dir_, name, true, deadline);
  if (!open) return open.status();
  auto now = current((*open)->fd(), width);
  if (!now) return now.status();
  auto sum = count_sum(name, now->first, delta);
  if (!sum) return sum.status();
  if (Status s = check_count_fits(*sum, now->second, "fetch_add: the result"); !s) return s;
  if (Status s = write_count((*open)->fd(), now->second, *sum, dir_.sync); !s) return s;
  return now->first;
}

Result<bool> Counters::compare_exchange(const std::string& name, std::int64_t& expected, std::int64_t desired,
                                        CounterWidth width, steady::time_point deadline) {
  auto open = Open::at(dir_, name, true, deadline);
  if (!open) return open.status();
  auto now = current((*open)->fd(), width);
  if (!now) return now.status();
  if (now->first != expected) {
    expected = now->first;
    return false;
  }
  if (Status s = check_count_fits(desired, now->second, "compare_exchange: desired"); !s) return s;
  if (Status s = write_count((*open)->fd(), now->second, desired, dir_.sync); !s) return s;
  return true;
}

Result<LatchRead> Counters::read(const std::string& name, std::int64_t initial, bool watch,
                                 steady::time_point deadline) {
  // Refused even when the latch exists (and this count would go unused): the
  // same call must not succeed or fail depending on who came first.
  if (Status s = check_count_fits(initial, 4, "latch count"); !s) return s;
  auto open = Open::at(dir_, name, true, deadline);
  if (!open) return open.status();
  const int fd = (*open)->fd();
  // Armed before the read, so a count_down in between is not missed.
  std::unique_ptr<Waiter> change;
  if (watch) change = dir_.watches->watch(dir_.path_of(encode_name(name, FileKind::counter)), wake_on_write);
  auto count = read_count(fd);
  if (!count) return count.status();
  if (!*count) {
    if (Status s = write_count(fd, 4, initial, dir_.sync); !s) return s;
    *count = CountRecord{{}, 4, 0, initial};
  }
  LatchRead out{(*count)->value, nullptr};
  if (out.remaining > 0) out.change = std::move(change);
  return out;
}

Result<std::int64_t> Counters::count_down(const std::string& name, std::int64_t initial, std::int64_t n,
                                          steady::time_point deadline) {
  if (Status s = check_count_fits(initial, 4, "latch count"); !s) return s;
  auto open = Open::at(dir_, name, true, deadline);
  if (!open) return open.status();
  const int fd = (*open)->fd();
  auto count = read_count(fd);
  if (!count) return count.status();
  const std::int64_t before = *count ? (*count)->value : initial;
  const int width = *count ? (*count)->width : 4;
  const std::int64_t after = std::max<std::int64_t>(0, before - n);
  if (*count && after == before) return after;  // already 0, or n == 0: nothing to write
  if (Status s = write_count(fd, width, after, dir_.sync); !s) return s;
  return after;
}

}  // namespace dlock::detail::file
