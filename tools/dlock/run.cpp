// dlock run — runs a command while holding a lock (like flock(1) or etcdctl lock).
//
// The command runs in a child process with DLOCK_NAME and DLOCK_TOKEN set.
// It gets SIGKILL if dlock dies (PR_SET_PDEATHSIG), so it never runs on
// unprotected, and it inherits only the descriptors dlock itself was given:
// whatever dlock or a client library opened (lock files, sockets, a library's
// wake-up pipe, even a descriptor another thread had open for a moment at the
// fork) is closed on exec, so the lock never stays held by it. If the lock is lost while it runs, it gets SIGTERM, then
// SIGKILL after --kill-after, and dlock exits with exit_lock_lost.
//
// --elect runs CMD while this process leads the election NAME instead: the
// same exclusion as a lock (on zk:// the same queue of ephemeral sequential
// nodes), but in Curator LeaderLatch's layout, with --id as the leader id
// observers read, so a Java LeaderLatch on the same path takes part.
//
// --permits N runs CMD holding one of N permits of the semaphore NAME
// instead: at most N such commands run at once, fleet-wide.
//
// Scheduled jobs: with --wait 0 a host whose cron fired while another ran
// the job skips it. --hold-at-least DUR keeps the lock (running nothing)
// until DUR after it was taken, so a short job fired on several hosts with
// skewed clocks still runs once; --max-run DUR terminates a job that runs
// longer (SIGTERM, then SIGKILL after --kill-after) and releases.
#include "commands.h"

#include "core/validate.h"

#include <dlock/dlock.h>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <limits>
#include <mutex>
#include <optional>
#include <stop_token>
#include <vector>

namespace dlock::cli {
namespace {

struct RunArgs {
  std::string backend;
  bool backend_given = false;
  std::string wait;
  std::string lease = "30s";
  std::string kill_after = "5s";
  std::string name;
  std::vector<std::string> command;
  bool elect = false;
  std::string id;
  std::string permits;  // given: a permit of a semaphore instead of the lock
  std::string hold_at_least;  // keep the claim until this long after it was taken
  std::string max_run;        // terminate CMD past this
  bool quiet = false;         // say nothing when the lock is not acquired
};

// RunArgs read and checked.
struct RunPlan {
  std::string url;
  std::int64_t permits = 0;  // > 0: a permit of a semaphore of this many
  std::chrono::milliseconds lease{};
  std::chrono::milliseconds kill_after{};
  std::optional<std::chrono::milliseconds> wait;  // none: wait forever
  std::chrono::milliseconds hold_at_least{};
  std::optional<std::chrono::milliseconds> max_run;  // none: no limit
};

// The shortest --lease `run` takes. The lease is renewed every lease/3, and
// each renewal must reach the store and come back before the lease runs
// out, on a machine that is also starting the command: below this the lock
// is lost (exit 76) even for `true`, so it is refused instead.
constexpr std::chrono::milliseconds min_lease{100};
// The longest the library takes.
constexpr std::chrono::hours max_lease{24};

// --permits N: a whole number of permits the semaphores take.
std::int64_t permits_arg(const std::string& text) {
  constexpr std::int64_t most = std::numeric_limits<std::int32_t>::max();
  std::int64_t n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec == std::errc::result_out_of_range || (ec == std::errc() && end == text.data() + text.size() && n > most))
    throw CLI::ValidationError("--permits: " + text + " is more than the limit of " + std::to_string(most));
  if (ec != std::errc() || end != text.data() + text.size())
    throw CLI::ValidationError("--permits: '" + text + "' is not a whole number");
  if (n < 1) throw CLI::ValidationError("--permits: must be >= 1, not " + text);
  return n;
}

// The arguments `run` needs checked before anything starts (no I/O):
// CLI::ValidationError naming the bad one.
RunPlan check_run(const RunArgs& args) {
  if (args.elect && !args.permits.empty())
    throw CLI::ValidationError("--elect and --permits: choose one (leadership or a permit)");
  RunPlan t;
  if (!args.permits.empty()) t.permits = permits_arg(args.permits);
  if (Status s = detail::validate_name(args.name); !s) {
    std::string why = s.message();
    if (why.starts_with("name: ")) why.erase(0, 6);
    throw CLI::ValidationError("NAME: " + why);
  }
  // An id is shown by dlock status and Election::leader(): a control
  // character in it could forge or garble a line there.
  if (!args.id.empty() && !args.elect) throw CLI::ValidationError("--id: goes with --elect (the leader's id)");
  if (std::any_of(args.id.begin(), args.id.end(),
                  [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }))
    throw CLI::ValidationError("--id: must not contain control characters (a newline, a tab, an escape...)");
  t.lease = duration_arg(args.lease, "--lease");
  if (t.lease < min_lease)
    throw CLI::ValidationError("--lease: " + args.lease + " is too short; the shortest is " +
                               std::to_string(min_lease.count()) +
                               "ms (the lease is renewed every lease/3, and a renewal must reach the store and "
                               "come back before the lease runs out)");
  if (t.lease > max_lease) throw CLI::ValidationError("--lease: " + args.lease + " is longer than the limit of 24h");
  t.kill_after = duration_arg(args.kill_after, "--kill-after");
  if (!args.wait.empty()) t.wait = duration_arg(args.wait, "--wait");
  if (!args.hold_at_least.empty()) t.hold_at_least = duration_arg(args.hold_at_least, "--hold-at-least");
  if (!args.max_run.empty()) {
    t.max_run = duration_arg(args.max_run, "--max-run");
    if (*t.max_run <= std::chrono::milliseconds(0))
      throw CLI::ValidationError("--max-run: must be > 0, not " + args.max_run);
  }
  t.url = store_url(args.backend, args.backend_given);
  return t;
}

// What CMD runs under: a lock held, leadership of an election (--elect), or
// a semaphore's permit (--permits).
class Claim {
 public:
  // (`plan` is check_run's of `args`.)
  Claim(Client& client, const RunArgs& args, const RunPlan& plan) {
    const std::chrono::milliseconds lease = plan.lease;
    if (args.elect) {
      election_.emplace(client.election(args.name, {.lease = lease}));
      id_ = args.id.empty() ? default_id() : args.id;
    } else if (plan.permits) {
      semaphore_.emplace(client.semaphore(args.name, plan.permits, {.lease = lease}));
    } else {
      mutex_.emplace(client.mutex(args.name, {.lease = lease}));
    }
  }

  bool take_until(std::chrono::steady_clock::time_point deadline) {
    if (semaphore_) return semaphore_->try_acquire_until(deadline);
    return mutex_ ? mutex_->try_lock_until(deadline) : election_->campaign_until(deadline, id_);
  }
  std::uint64_t token() const {
    if (semaphore_) return semaphore_->token();
    return mutex_ ? mutex_->token() : election_->token();
  }
  std::stop_token stop_token() const {
    if (semaphore_) return semaphore_->stop_token();
    return mutex_ ? mutex_->stop_token() : election_->stop_token();
  }
  bool lost() const noexcept {
    if (semaphore_) return semaphore_->lost();
    return mutex_ ? mutex_->lost() : election_->lost();
  }
  Status give_up() noexcept {
    if (semaphore_) return semaphore_->release_checked();
    return mutex_ ? mutex_->unlock_checked() : election_->resign_checked();
  }
  // For messages: "lock 'x'", "leadership of 'x'" or "a permit of 'x'".
  std::string what() const {
    if (semaphore_) return "a permit of '" + semaphore_->name() + "'";
    return (mutex_ ? "lock '" : "leadership of '") + (mutex_ ? mutex_->name() : election_->name()) + "'";
  }

 private:
  // host:pid, what a leader is known by unless --id says otherwise.
  static std::string default_id() {
    char host[HOST_NAME_MAX + 1] = {};
    ::gethostname(host, sizeof host - 1);
    return std::string(host) + ":" + std::to_string(::getpid());
  }

  std::optional<Mutex> mutex_;
  std::optional<Election> election_;
  std::optional<Semaphore> semaphore_;
  std::string id_;
};

// Signals dlock forwards to the command (and that end a wait for the lock).
sigset_t forwarded_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCHLD}) sigaddset(&set, s);
  return set;
}

// A pending termination signal, consumed; 0 if none.
int take_pending_signal(const sigset_t& set) {
  timespec zero{0, 0};
  for (;;) {
    int s = sigtimedwait(&set, nullptr, &zero);
    if (s != SIGCHLD) return s < 0 ? 0 : s;
  }
}

int exit_status_of(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return exit_internal;
}

// The descriptors open now, ascending (from /proc/self/fd).
std::vector<int> open_descriptors() {
  std::vector<int> fds;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (dirent* e = ::readdir(d))
      if (e->d_name[0] != '.' && std::atoi(e->d_name) != ::dirfd(d)) fds.push_back(std::atoi(e->d_name));
    ::closedir(d);
  }
  std::sort(fds.begin(), fds.end());
  return fds;
}

// In the child, before exec (async-signal-safe): every descriptor but those
// in `keep` (ascending) becomes close-on-exec.
void close_on_exec_except(const std::vector<int>& keep) {
  unsigned from = 0;
  for (int fd : keep) {
    if (static_cast<unsigned>(fd) > from) ::close_range(from, static_cast<unsigned>(fd) - 1, CLOSE_RANGE_CLOEXEC);
    from = static_cast<unsigned>(fd) + 1;
  }
  ::close_range(from, ~0U, CLOSE_RANGE_CLOEXEC);
}

int run(const RunArgs& args, const RunPlan& plan) {
  const auto kill_after = plan.kill_after;
  const auto wait = plan.wait;
  const auto hold_at_least = plan.hold_at_least;
  const auto max_run = plan.max_run;

  // Block the signals before any thread exists, so they are only ever
  // taken here with sigtimedwait (the client's threads inherit the mask).
  const sigset_t signals = forwarded_signals();
  sigset_t old_mask;
  pthread_sigmask(SIG_BLOCK, &signals, &old_mask);

  // What CMD may inherit: what dlock was started with, nothing it opened since.
  const std::vector<int> inherited = open_descriptors();
  auto client = dlock::connect(plan.url);
  Claim claim(*client, args, plan);

  // Wait in slices so Ctrl-C or SIGTERM ends the wait.
  const auto give_up = wait ? std::chrono::steady_clock::now() + *wait : std::chrono::steady_clock::time_point::max();
  bool acquired = false;
  for (;;) {
    auto slice_end = std::min(give_up, std::chrono::steady_clock::now() + std::chrono::milliseconds(200));
    if (claim.take_until(slice_end)) {
      acquired = true;
      break;
    }
    if (int s = take_pending_signal(signals)) return 128 + s;
    if (std::chrono::steady_clock::now() >= give_up) break;
  }
  if (!acquired) {
    if (!args.quiet) std::cerr << "dlock: " << claim.what() << " not acquired within " << args.wait << "\n";
    return exit_not_acquired;
  }
  const auto acquired_at = std::chrono::steady_clock::now();
  const auto run_until = max_run ? acquired_at + *max_run : std::chrono::steady_clock::time_point::max();

  const std::string token = std::to_string(claim.token());
  ::setenv("DLOCK_NAME", args.name.c_str(), 1);
  ::setenv("DLOCK_TOKEN", token.c_str(), 1);
  std::vector<char*> argv;
  for (const auto& a : args.command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  const pid_t parent = ::getpid();
  // Without a terminal to share, CMD gets a process group of its own, so a
  // lost lock stops everything it started, not only CMD itself. With a
  // terminal it stays in ours (job control), and its children are left to it.
  const bool own_group = !::isatty(STDIN_FILENO);
  // The child reports a failed exec's errno here, so dlock can say which
  // command could not run (as env(1) and timeout(1) do); a successful exec
  // closes it (close-on-exec) with nothing written.
  int exec_pipe[2];
  if (::pipe2(exec_pipe, O_CLOEXEC) != 0) {
    (void)claim.give_up();
    throw Error(errc::internal, "pipe failed");
  }
  std::cout.flush();
  std::cerr.flush();
  const pid_t child = ::fork();
  if (child < 0) {
    (void)claim.give_up();
    throw Error(errc::internal, "fork failed");
  }
  if (child == 0) {
    // Only async-signal-safe calls until exec.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(exit_internal);  // dlock already gone
    if (own_group) ::setpgid(0, 0);
    close_on_exec_except(inherited);
    ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
    ::execvp(argv[0], argv.data());
    const int error = errno;
    (void)!::write(exec_pipe[1], &error, sizeof error);
    ::_exit(error == ENOENT ? 127 : 126);
  }
  ::close(exec_pipe[1]);
  int exec_error = 0;
  ssize_t got;
  while ((got = ::read(exec_pipe[0], &exec_error, sizeof exec_error)) < 0 && errno == EINTR) {
  }
  ::close(exec_pipe[0]);
  if (got == sizeof exec_error)
    std::cerr << "dlock: failed to run command '" << args.command.front() << "': " << std::strerror(exec_error)
              << std::endl;

  if (own_group) ::setpgid(child, child);  // also here: no race with our first signal
  const pid_t target = own_group ? -child : child;

  // The child is signalled only while it has not been reaped (its pid could
  // be reused after), and a loss after it exited does not count.
  std::mutex reap_mu;
  bool reaped = false;
  std::atomic<bool> lost{false};
  bool overran = false;  // ran past --max-run and was terminated
  auto on_loss = [&] {
    std::lock_guard lk(reap_mu);
    if (reaped || lost.exchange(true)) return;
    ::kill(target, SIGTERM);
  };
  std::stop_callback on_lost(claim.stop_token(), on_loss);
  std::optional<std::chrono::steady_clock::time_point> kill_at;
  int wait_status = 0;
  for (;;) {
    timespec tick{0, 50'000'000};
    int s = sigtimedwait(&signals, nullptr, &tick);
    {
      std::lock_guard lk(reap_mu);
      if (s > 0 && s != SIGCHLD) ::kill(target, s);
      if (::waitpid(child, &wait_status, WNOHANG) == child) {
        reaped = true;
        break;
      }
    }
    // lost() also sees a lease whose local deadline passed while the lease
    // keeper is still waiting for a stalled store.
    if (!lost && claim.lost()) on_loss();
    if (!lost && !overran && std::chrono::steady_clock::now() >= run_until) {
      std::lock_guard lk(reap_mu);
      overran = true;
      ::kill(target, SIGTERM);
      kill_at = std::chrono::steady_clock::now() + kill_after;
    }
    if (lost && !kill_at) kill_at = std::chrono::steady_clock::now() + kill_after;
    if (kill_at && std::chrono::steady_clock::now() >= *kill_at) ::kill(target, SIGKILL);
  }
  if (own_group && (lost || overran)) ::kill(-child, SIGKILL);  // whatever CMD left running in its group
  if (lost) {
    (void)claim.give_up();
    std::cerr << "dlock: " << claim.what() << " was lost while the command ran; the command was terminated\n";
    return exit_lock_lost;
  }
  // --hold-at-least: keep the claim (renewed) until the window ends, so a
  // late-firing host finds it taken; a termination signal ends it early.
  int hold_signal = 0;
  while (!overran && !claim.lost() && std::chrono::steady_clock::now() < acquired_at + hold_at_least) {
    const auto left = acquired_at + hold_at_least - std::chrono::steady_clock::now();
    const auto ns = std::min<std::chrono::nanoseconds>(left, std::chrono::milliseconds(200));
    timespec tick{0, static_cast<long>(std::max<std::chrono::nanoseconds>(ns, std::chrono::nanoseconds(1)).count())};
    if (int s = sigtimedwait(&signals, nullptr, &tick); s > 0 && s != SIGCHLD) {
      hold_signal = s;
      break;
    }
  }
  Status released = claim.give_up();
  if (overran) {
    std::cerr << "dlock: the command ran past --max-run " << args.max_run << " and was terminated\n";
    return exit_max_run;
  }
  if (hold_signal) return 128 + hold_signal;
  if (!released.ok() && released.code() != errc::unavailable)
    std::cerr << "dlock: warning: " << released.message() << "\n";
  return exit_status_of(wait_status);
}

}  // namespace

void add_run(CLI::App& app, Chosen& chosen) {
  auto args = std::make_shared<RunArgs>();
  auto* cmd = app.add_subcommand("run", "Run a command while holding a lock");
  auto* backend =
      cmd->add_option("--backend", args->backend, "Store URL (default: $DLOCK_BACKEND or a per-user file:// dir)")
          ->type_name("URL");
  cmd->add_option("--wait", args->wait, "Give up after this long (exit 75); 0 tries once; default: wait forever")
      ->type_name("DUR");
  cmd->add_option("--lease", args->lease, "Lease, renewed every lease/3 while dlock runs (default 30s; 100ms to 24h)")
      ->type_name("DUR");
  cmd->add_option("--kill-after", args->kill_after,
                  "If the lock is lost: SIGTERM the command, then SIGKILL after this (default 5s)")
      ->type_name("DUR");
  cmd->add_flag("--elect", args->elect,
               "Run only while this process leads the election NAME (backends with elections: zk:// in Curator "
               "LeaderLatch's layout, etcd:// in concurrency.Election's, ...)");
  cmd->add_option("--id", args->id, "With --elect: the id observers see as leader (default: host:pid)")
      ->type_name("ID");
  cmd->add_flag("--quiet,-q", args->quiet,
               "Print nothing when the lock is not acquired within --wait (the exit status, 75, still says so)");
  cmd->add_option("--permits", args->permits,
                  "Run holding one of N permits of the semaphore NAME: at most N such commands at once "
                  "(backends with semaphores: zk:// in Curator InterProcessSemaphoreV2's layout, etcd://, ...)")
      ->type_name("N");
  cmd->add_option("--hold-at-least", args->hold_at_least,
                  "Keep the lock until this long after it was taken, even if the command ends sooner "
                  "(a job fired on several hosts runs once)")
      ->type_name("DUR");
  cmd->add_option("--max-run", args->max_run,
                  "Terminate the command (SIGTERM, then SIGKILL after --kill-after) if it runs longer "
                  "than this; exit 124")
      ->type_name("DUR");
  cmd->add_option("name", args->name, "Lock (or election) name")->required();
  cmd->add_option("command", args->command,
                  "Command and its arguments: everything after NAME (a \"--\" before it is optional)")
      ->required()
      ->expected(-1);
  cmd->footer(
      "Options come before NAME: everything after it is the command and its arguments, options included\n"
      "(dlock run job ls -l runs ls -l), as with flock(1) and env(1).\n"
      "Exit status: the command's; 75 if the lock (or leadership) was not acquired within --wait;\n"
      "76 if it was lost while the command ran (it was terminated); 124 if it ran past --max-run\n"
      "(it was terminated); 64 bad arguments (--elect or --permits on a backend without them too);\n"
      "69 store unavailable; 126 the command could not be executed; 127 it was not found.");
  cmd->callback([args, backend, &chosen] {
    args->backend_given = backend->count() > 0;
    const RunPlan plan = check_run(*args);
    chosen = [args, plan] { return run(*args, plan); };
  });
}

}  // namespace dlock::cli
