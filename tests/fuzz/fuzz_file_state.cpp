// Fuzzes what the file backend reads back from its lock directory: the
// input is the content of one primitive's file (a corrupted disk, a stray
// file under a lock's name, a writer from a future version), and every
// primitive of that kind is used on it through the public API, then
// list_locks() reads the whole directory.
//
// Input: byte 0 picks the kind (mutex, shared, election, permits, counter,
// barrier) and byte 1 the semaphore's permits; the rest is the file.
// Beyond not crashing, leaking, hanging (libFuzzer's -timeout) or reading
// out of bounds:
// - a call either works or throws dlock::Error `internal` (a file that is not
//   dlock's), `unavailable` or `timeout` — never `invalid_argument`,
//   `not_owner` or `would_deadlock`, which would blame the caller for the
//   file's state (but for a Semaphore whose file declares another count);
// - a Mutex taken on a file whose record is dlock's gets a fencing token
//   greater than the record's last one (tokens never go back), and after
//   unlock_checked() the record's last token is that token.
#include "backends/file/lock_file.h"

#include <dlock/dlock.h>

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

namespace {

namespace file = dlock::detail::file;
using namespace std::chrono_literals;

constexpr std::string_view name = "f";

struct Directory {
  std::string path;
  std::shared_ptr<dlock::Client> client;
};

Directory& directory() {
  static Directory d = [] {
    char tmpl[] = "/tmp/dlock-fuzz-file-XXXXXX";
    if (!::mkdtemp(tmpl)) std::abort();
    Directory out{tmpl, nullptr};
    out.client = dlock::connect("file://" + out.path, {.op_timeout = 200ms});
    return out;
  }();
  return d;
}

// Rewrites the file in place (same inode: descriptors the backend keeps
// see the new bytes).
void write_file(const std::string& path, std::string_view content) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) std::abort();
  std::size_t done = 0;
  while (done < content.size()) {
    ssize_t n = ::pwrite(fd, content.data() + done, content.size() - done, static_cast<off_t>(done));
    if (n <= 0) std::abort();
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
}

// The record's last token if `content` starts with a dlock record.
std::optional<std::uint64_t> last_token_of(std::string_view content) {
  if (content.empty()) return 0;
  if (content.size() < sizeof(file::Record)) return std::nullopt;
  file::Record r;
  std::memcpy(&r, content.data(), sizeof r);
  if (std::memcmp(r.magic, file::record_magic, sizeof r.magic) != 0) return std::nullopt;
  return r.last_token;
}

void check_error(const dlock::Error& e) {
  switch (e.kind()) {
    case dlock::errc::internal:
    case dlock::errc::unavailable:
    case dlock::errc::timeout:
      if (std::string_view(e.what()).empty()) std::abort();
      return;
    default:
      std::fprintf(stderr, "unexpected error %s: %s\n", dlock::to_string(e.kind()), e.what());
      std::abort();
  }
}

template <class F>
void attempt(F&& f) {
  try {
    f();
  } catch (const dlock::Error& e) {
    check_error(e);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  static const file::FileKind kinds[] = {file::FileKind::mutex,   file::FileKind::shared,  file::FileKind::election,
                                         file::FileKind::permits, file::FileKind::counter, file::FileKind::barrier};
  const file::FileKind kind = kinds[data[0] % 6];
  const int permits = 1 + data[1] % 4;
  const std::string_view content(reinterpret_cast<const char*>(data) + 2, size - 2);
  Directory& dir = directory();
  const std::string path = dir.path + "/" + file::encode_name(name, kind);
  write_file(path, content);
  dlock::Client& client = *dir.client;
  const dlock::MutexOptions leased{.lease = 5s};

  switch (kind) {
    case file::FileKind::mutex:
      attempt([&] {
        auto m = client.mutex(std::string(name), leased);
        if (!m.try_lock()) return;
        const std::uint64_t token = m.token();
        if (auto before = last_token_of(content); before && token <= *before) std::abort();
        if (!m.unlock_checked().ok()) return;
        int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) std::abort();
        auto after = file::read_record(fd);
        ::close(fd);
        if (!after || after->last_token != token) std::abort();
      });
      break;
    case file::FileKind::shared:
      attempt([&] {
        auto rw = client.shared_mutex(std::string(name), leased);
        if (rw.try_lock_shared()) rw.unlock_shared();
      });
      attempt([&] {
        auto rw = client.shared_mutex(std::string(name), leased);
        if (rw.try_lock()) rw.unlock();
      });
      break;
    case file::FileKind::election:
      attempt([&] {
        auto e = client.election(std::string(name), leased);
        (void)e.leader();
        if (e.campaign_for(0ms, "fuzz")) e.resign();
      });
      break;
    case file::FileKind::permits:
      try {
        auto s = client.semaphore(std::string(name), permits, leased);
        (void)s.in_use();
        if (s.try_acquire()) s.release();
      } catch (const dlock::Error& e) {
        // The caller's count differs from the one the file declares (1 to
        // the most a file holds): the caller's mistake, rightly so.
        const bool declared_otherwise = e.kind() == dlock::errc::invalid_argument &&
                                        std::string_view(e.what()).find("as first declared") != std::string_view::npos;
        if (!declared_otherwise) check_error(e);
      }
      break;
    case file::FileKind::counter:
      attempt([&] {
        auto c = client.counter(std::string(name));
        (void)c.load();
        (void)c.fetch_add(1);
      });
      break;
    case file::FileKind::barrier:
      break;  // its calls wait for other members; list_locks() reads it
  }
  attempt([&] { (void)client.list_locks(); });
  return 0;
}
