// dlock/client.h — a connection to one store, and the primitives made on it.
//
// dlock::connect() parses the URL, opens the backend and starts the client's
// lease keeper (one background thread that renews every lease the client
// holds). The client and every Mutex made from it share that state; when
// the last of them goes away, held locks are released and the thread ends.
//
// URLs: "<scheme>://…", one scheme (or a few) per store; dlock::backends()
// lists those of this build, file:///abs/dir (one host, no server) being
// the default. docs/backends.md gives each one's form and options, and in
// its table "Primitives on each backend" which primitives each has: a
// factory below throws unsupported for one its backend does not have.
//
// Thread-safety: a Client may be used from any number of threads.
#pragma once

#include <dlock/barrier.h>
#include <dlock/counter.h>
#include <dlock/latch.h>
#include <dlock/election.h>
#include <dlock/multi_lock.h>
#include <dlock/mutex.h>
#include <dlock/semaphore.h>
#include <dlock/shared_mutex.h>
#include <dlock/options.h>
#include <dlock/status.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dlock {

class Client;
namespace detail {
class ClientState;
std::shared_ptr<Client> make_client(std::shared_ptr<ClientState> state);
std::shared_ptr<ClientState> state_of(const Client& client);
}  // namespace detail

// One held lock as the store reports it (dlock status).
struct LockInfo {
  std::string name;
  // Who holds it, for people: e.g. "pid 4242 owner 3fa2c1d0…" (never the
  // full owner token).
  std::string holder;
  std::uint64_t token = 0;
  // Lease left as the store sees it; nullopt if the lock lives as long as
  // its holder's session.
  std::optional<std::chrono::milliseconds> remaining;
  // What is held: "mutex"; on stores that have them also "write" and "read"
  // (a SharedMutex's holders), "leader" (an Election's; `holder` starts
  // with its id), "permit" (one per Semaphore permit out) and, on file://,
  // "member" (one per Barrier member in).
  std::string kind = "mutex";
};

// How long acquisitions took, from the call to the grant (waiting
// included; re-entries and attempts that got nothing not counted).
struct LatencyHistogram {
  // Upper bounds of the buckets, in seconds; a last bucket takes the rest.
  static constexpr std::array<double, 14> bounds = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                                    0.025,  0.05,    0.1,    0.25,  0.5,    1.0,  5.0};
  std::array<std::uint64_t, bounds.size() + 1> counts{};  // per bucket (not cumulative)
  std::uint64_t count = 0;                                 // all of them
  double sum_seconds = 0;                                  // their total time
};

// Counters since the client was made (for metrics and tests; see
// dlock/metrics.h for the Prometheus text of them).
struct ClientStats {
  std::uint64_t acquisitions = 0;     // grants from the store (re-entries not counted)
  std::uint64_t releases = 0;         // releases the store confirmed
  std::uint64_t failed_releases = 0;  // releases that failed, and unlock()/unlock_checked() without a hold
  std::uint64_t renewals = 0;         // leases the store extended
  std::uint64_t renewal_batches = 0;  // renewal round trips (one per batch of due leases)
  std::uint64_t leases_lost = 0;      // holds marked lost (lost() turned true)
  // Waits for a busy lock that the store's notification ended before the
  // waiter's own retry time (spurious wake-ups included; backends without
  // notifications: 0). One per handoff is ideal; more means a release woke
  // waiters that then found the lock taken.
  std::uint64_t wakeups = 0;
  std::uint64_t waits = 0;             // acquisitions that found the lock busy and waited
  std::uint64_t renewal_failures = 0;  // renewals that could not reach the store (retried until the lease's end)
  std::uint64_t disconnects = 0;       // connections to the store lost (a store with several counts each)
  std::uint64_t reconnects = 0;        // connections to the store made again after a loss
  LatencyHistogram acquire_latency;
};

class Client {
 public:
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // A handle on the lock `name`. Checks the name and options (throws
  // invalid_argument); makes no remote call.
  Mutex mutex(std::string name, MutexOptions options = {});

  // A handle on the locks `names` taken as one (see multi_lock.h): each is
  // mutex(name, options). Throws invalid_argument for no names, a name
  // listed twice, or a bad name or options. No remote call.
  MultiLock multi_lock(std::vector<std::string> names, MutexOptions options = {});

  // A handle on the read-write lock `name` (not the same lock as mutex(name)).
  // Throws invalid_argument for a bad name or options, unsupported if the
  // backend has no read-write lock (docs/backends.md, "Primitives on each
  // backend"). No remote call.
  SharedMutex shared_mutex(std::string name, MutexOptions options = {});

  // A handle on the shared integer `name` (dlock/counter.h); `width` is
  // the encoding it is created with if the store has no such counter yet.
  // Throws unsupported if the backend has none (docs/backends.md,
  // "Primitives on each backend"), invalid_argument for a bad name. No
  // remote call.
  Counter counter(std::string name, CounterWidth width = CounterWidth::int32);

  // Opens the latch `name` (dlock/latch.h), creating it with `count` if it
  // does not exist yet. Throws unsupported if the backend has none
  // (docs/backends.md, "Primitives on each backend"), invalid_argument for
  // a bad name or a count
  // outside 0..2^31 - 1, unavailable if
  // the store did not answer within op_timeout.
  Latch latch(std::string name, std::int64_t count);

  // A handle on the semaphore `name` with `permits` permits (see
  // semaphore.h). On stores that lease permits (redis, file) each permit
  // has `options.lease` and `lease_mode` (watchdog: renewed while the
  // process lives) and `fair` queues waiters FIFO where the store keeps a
  // queue; on zk:// the session is the lease. Throws invalid_argument for a
  // bad name, options, or permits < 1 or above 2^31 - 1, unsupported if the
  // backend has no semaphore. No remote call.
  Semaphore semaphore(std::string name, std::ptrdiff_t permits, MutexOptions options = {});
  // A handle on the double barrier `name` for `parties` members
  // (dlock/barrier.h); each handle is one member. On stores that lease
  // members (redis) a member's entry has `options.lease`, renewed while the
  // process lives; a member whose lease runs out is out. Throws unsupported
  // if the backend has none, invalid_argument for a bad name, options or
  // parties < 1. No remote call.
  Barrier barrier(std::string name, int parties, MutexOptions options = {});

  // A handle on the election `name` (see election.h). On lease-based
  // stores the leader holds its place with `options.lease` (watchdog:
  // renewed while the process lives), so a leader that dies or stops
  // renewing is replaced after its lease; on zk:// the session is the
  // lease. Throws invalid_argument for a bad name or options, unsupported
  // if the backend has no elections. No remote call.
  Election election(std::string name, MutexOptions options = {});

  // Locks currently held whose names start with `prefix` (see LockInfo::kind
  // for what else a store may list), sorted by name.
  std::vector<LockInfo> list_locks(std::string_view prefix = {});

  // One round trip to the store with no lock logic: a health check, and the
  // benchmarks' reference for the physical limit.
  Status ping();

  // For stores whose locks live as long as a session (zk://; etcd://, whose
  // session is the client's lease): the session timeout the ensemble agreed
  // to — how long after its holder dies or is cut off a lock becomes free.
  // nullopt on stores that lease each lock.
  std::optional<std::chrono::milliseconds> session_timeout() const;

  // The URL this client was made from, with any password replaced by "***".
  const std::string& url() const noexcept;
  // The backend's scheme ("file", "sqlite", ...).
  const std::string& scheme() const noexcept;

  ClientStats stats() const noexcept;

 private:
  friend std::shared_ptr<Client> detail::make_client(std::shared_ptr<detail::ClientState>);
  friend std::shared_ptr<detail::ClientState> detail::state_of(const Client&);
  explicit Client(std::shared_ptr<detail::ClientState> state);
  std::shared_ptr<detail::ClientState> state_;
};

// Connects to the store named by `url`. Throws Error: invalid_argument for
// a malformed or unknown URL (the message names the part), unavailable if
// the store can't be reached within options.op_timeout.
std::shared_ptr<Client> connect(std::string_view url, ClientOptions options = {});

// The same as connect() but returns the error instead of throwing.
Result<std::shared_ptr<Client>> connect_checked(std::string_view url, ClientOptions options = {});

// The backends compiled into this build, e.g. {"file", "sqlite"}.
std::vector<std::string> backends();

}  // namespace dlock
