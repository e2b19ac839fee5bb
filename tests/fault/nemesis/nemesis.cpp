#include "nemesis.h"

#include "child_process.h"
#include "client_network.h"
#include "fenced_resource.h"
#include "tcp_proxy.h"

#include <dlock/dlock.h>

#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <regex>
#include <sstream>
#include <thread>

namespace dlock::test {

const char* to_string(Fault f) {
  switch (f) {
    case Fault::pause_client: return "pause-client";
    case Fault::kill_client: return "kill-client";
    case Fault::pause_server: return "pause-server";
    case Fault::restart_server: return "restart-server";
    case Fault::partition: return "partition";
    case Fault::lossy_network: return "lossy-network";
    case Fault::failover: return "failover";
  }
  return "?";
}

std::vector<NemesisBackend> nemesis_backends() {
  using F = Fault;
  using namespace std::chrono_literals;
  const std::string dir = DLOCK_SCRIPTS_DIR;
  std::vector<NemesisBackend> all;
  const std::vector<F> process = {F::pause_client, F::kill_client};
  const std::vector<F> every = {F::pause_client,   F::kill_client, F::pause_server,
                                F::restart_server, F::partition,   F::lossy_network};
#ifdef DLOCK_WITH_FILE
  all.push_back({"file", "", process});
#endif
#ifdef DLOCK_WITH_SQLITE
  all.push_back({"sqlite", "", process});
#endif
#ifdef DLOCK_WITH_REDIS
  // No restart: a redis-server without persistence forgets its locks and
  // its token counter when it restarts (docs/reliability.md).
  all.push_back({"redis", dir + "/redis-server.sh", {F::pause_client, F::kill_client, F::pause_server, F::partition, F::lossy_network}});
  // The same with every write in the append-only file before its reply
  // (appendfsync always): locks and tokens survive a restart.
  all.push_back({"redis_aof", dir + "/redis-server.sh", {F::restart_server}});
  // The topologies, one case each in CI (every fault they claim, mixed).
  // No partition: worker 0's relay reaches one port, and a topology's
  // clients reach several (docs/reliability.md).
  const std::vector<F> replicated = {F::pause_client, F::kill_client, F::pause_server, F::restart_server, F::failover};
  // Replication is asynchronous: a master SIGKILLed (restart-server),
  // stopped past down-after-milliseconds (pause-server) or handed over by
  // SENTINEL FAILOVER (the old master takes writes until the sentinels
  // demote it, seconds later) can lose the last grant. The old master may
  // serve for up to about 8 s after a forced failover.
  all.push_back({.name = "redis_sentinel", .script = dir + "/redis-sentinel.sh", .faults = replicated,
                 .double_grant = {F::pause_server, F::restart_server, F::failover}, .double_grant_grace = 10s,
                 .mixed_case = true});
  // CLUSTER FAILOVER waits for the replica to catch up before it swaps: no
  // grant is lost. A SIGKILLed master, or one stopped past the node
  // timeout (3 s here), is replaced by a replica that may lack the last grant.
  all.push_back({.name = "redis_cluster", .script = dir + "/redis-cluster.sh", .faults = replicated,
                 .double_grant = {F::pause_server, F::restart_server}, .double_grant_grace = 5s,
                 .mixed_case = true});
  // Five nodes, each with appendfsync always; the server faults hit one or
  // two at a time (a minority). A node restarted empty inside a lease would
  // break exclusion (quorum_fault_test shows it); it is not claimed.
  all.push_back({.name = "redlock", .script = dir + "/redlock-servers.sh",
                 .faults = {F::pause_client, F::kill_client, F::pause_server, F::restart_server}, .mixed_case = true});
#endif
#ifdef DLOCK_WITH_ZOOKEEPER
  all.push_back({"zookeeper", dir + "/zookeeper-server.sh", every});
  // Three servers; the faults hit the leader: stopped (the others elect
  // another if it stays stopped past the sync limit, 5 s here, so mostly
  // not), or killed until another leads and then started again. The
  // client faults are those of one server (the same code).
  all.push_back({.name = "zookeeper_ensemble", .script = dir + "/zookeeper-server.sh",
                 .faults = {F::failover, F::pause_server}, .mixed_case = true});
#endif
#ifdef DLOCK_WITH_ETCD
  // A stopped server: an unlock that timed out while it was stopped is
  // applied after it resumes, after the same client's next acquisition
  // found its old key (same lease, same key) still there and took it as
  // granted, so that grant's key is deleted under it and the next waiter
  // holds at once (caught by the checker; the fence refused the old
  // holder's write). Fixed (a doubtful key is deleted before it is made
  // again); three soak runs since found it no more (docs/reliability.md).
  all.push_back({"etcd", dir + "/etcd-server.sh", every});
  // Three members; failover SIGKILLs the leader, waits until another
  // leads, then starts it again.
  all.push_back({.name = "etcd_ensemble", .script = dir + "/etcd-server.sh", .faults = {F::failover},
                 .failing = {F::pause_server}, .mixed_case = true});
#endif
#ifdef DLOCK_WITH_POSTGRES
  all.push_back({"postgres", dir + "/postgres-server.sh", every});
  // The server's advisory lock, held by a connection of its own (ended by
  // the server when idle past the lease).
  all.push_back({.name = "postgres_session", .script = dir + "/postgres-server.sh", .faults = every,
                 .url_options = "?mode=session", .mixed_case = true});
#endif
#ifdef DLOCK_WITH_MYSQL
  all.push_back({"mysql", dir + "/mariadb-server.sh", every});
  all.push_back({.name = "mysql_session", .script = dir + "/mariadb-server.sh", .faults = every,
                 .url_options = "?mode=session", .mixed_case = true});
#endif
  return all;
}

const NemesisBackend* find_nemesis_backend(const std::string& name) {
  static const auto all = nemesis_backends();
  for (const auto& b : all)
    if (b.name == name) return &b;
  return nullptr;
}

namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;
using std::chrono::milliseconds;

bool sh(const std::string& command) { return std::system((command + " >/dev/null 2>&1").c_str()) == 0; }

// The run's own store: started, stopped, killed and restarted through its
// script. On a topology the server faults aim at the node serving the
// lock (see nemesis.h).
class Store {
 public:
  Store(const NemesisBackend& backend, const std::string& dir, milliseconds lease, std::uint64_t seed)
      : backend_(backend), dir_(dir + "/store"), lease_s_(std::max<long>(1, static_cast<long>(lease.count() / 1000))),
        rng_(seed) {
    if (backend.script.empty()) {
      std::filesystem::create_directories(dir_);
      url_ = backend.name == "file" ? "file://" + dir_ : "sqlite://" + dir_ + "/locks.db";
      return;
    }
    started_ = script("start", clustered() ? std::to_string(members()) : "");
    if (!started_) return;
    std::ifstream in(dir_ + "/url");
    in >> url_;
    const std::string ttl = std::to_string(lease_s_) + "s";
    if (etcd()) url_ += "/nemesis?ttl=" + ttl;
    if (zookeeper()) url_ += "/nemesis?session_timeout=" + ttl;
    url_ += backend.url_options;
    if (topology() == "cluster")
      slot_ = output("redis-cli -h 127.0.0.1 -p " + std::to_string(port()) + " CLUSTER KEYSLOT nemesis");
  }
  ~Store() {
    if (started_) {
      resume();
      script("stop");
    }
  }
  bool ok() const { return !url_.empty() && (topology() != "cluster" || !slot_.empty()); }
  const std::string& url() const { return url_; }
  int port() const {
    std::smatch m;
    return std::regex_search(url_, m, std::regex(R"(127\.0\.0\.1:(\d+))")) ? std::stoi(m[1]) : 0;
  }
  // url() through host:port instead of the store's 127.0.0.1:port.
  std::string url_via(const std::string& host, int port) const {
    return std::regex_replace(url_, std::regex(R"(127\.0\.0\.1:\d+)"), host + ":" + std::to_string(port),
                              std::regex_constants::format_first_only);
  }
  bool pause() {
    if (redis_nodes()) {
      paused_ = aim();
      bool ok = !paused_.empty();
      for (const auto& pid_file : paused_) ok = sh("kill -STOP $(cat " + pid_file + ")") && ok;
      return ok;
    }
    if (!clustered()) return script("pause");
    paused_member_ = aimed_member();
    return !paused_member_.empty() && member_script(zookeeper() ? "pause-node" : "pause", paused_member_);
  }
  bool resume() {
    if (redis_nodes()) {
      bool ok = true;
      for (const auto& pid_file : paused_) ok = sh("kill -CONT $(cat " + pid_file + ")") && ok;
      paused_.clear();
      return ok;
    }
    if (!clustered()) return script("resume");
    if (paused_member_.empty()) return true;
    const bool resumed = member_script(zookeeper() ? "resume-node" : "resume", paused_member_);
    if (resumed) paused_member_.clear();
    return resumed;
  }
  // A crash (SIGKILL) and a start on the same port and data (a topology's
  // master: its replica takes over first, then it comes back as a replica).
  bool restart() {
    const std::string t = topology();
    if (t == "sentinel") {
      const std::string old = output(backend_.script + " master " + dir_);
      return !old.empty() && script("kill-master") && script("restart-node", old);
    }
    if (t == "cluster") {
      const std::string old = master_of_slot();
      if (old.empty() || !sh("kill -KILL $(cat " + dir_ + "/node-" + old + ".pid)")) return false;
      // Its replica is promoted after the node timeout; then it comes back, empty, as that one's replica.
      const bool moved = eventually([&] { auto now = master_of_slot(); return !now.empty() && now != old; }, 30s);
      return sh(cluster_env() + backend_.script + " restart-node " + dir_ + " " + old) && moved;
    }
    if (t == "quorum") {
      bool ok = true;
      for (const auto& pid_file : aim()) {
        const std::string node = pid_file.substr(0, pid_file.rfind('/'));
        (void)sh("kill -KILL $(cat " + pid_file + ")");
        ok = sh(persistence() + DLOCK_SCRIPTS_DIR "/redis-server.sh restart " + node) && ok;
      }
      return ok;
    }
    if (redis_nodes()) (void)sh("kill -KILL $(cat " + dir_ + "/redis.pid)");  // its restart would stop it cleanly
    if (!clustered()) return script("restart");
    const std::string member = aimed_member();
    return !member.empty() && member_script(etcd() ? "kill" : "kill-node", member) && start_member(member);
  }
  // The master handed over to a replica; returns once the new one serves.
  bool failover() {
    if (topology() == "sentinel") {
      return script("failover");
    }
    if (topology() == "ensemble") {
      // The leader crashes; the fault ends once another member leads and
      // the old one is back as a follower.
      const std::string old = aimed_member();
      if (old.empty() || !member_script(etcd() ? "kill" : "kill-node", old)) return false;
      const bool moved = eventually([&] { auto now = current_leader(); return !now.empty() && now != old; }, 30s);
      return start_member(old) && moved;
    }
    const std::string old = master_of_slot();
    return !old.empty() && sh(cluster_env() + backend_.script + " failover " + dir_ + " " + old);
  }

 private:
  // "sentinel", "cluster", "quorum", or "" (one server or member).
  std::string topology() const {
    if (backend_.name == "redis_sentinel") return "sentinel";
    if (backend_.name == "redis_cluster") return "cluster";
    if (backend_.name == "redlock") return "quorum";
    if (members() > 1) return "ensemble";
    return "";
  }
  bool etcd() const { return backend_.name.starts_with("etcd"); }
  bool zookeeper() const { return backend_.name.starts_with("zookeeper"); }
  // etcd's and zookeeper's scripts make clusters: one member (named 1), or
  // three for a ZooKeeper ensemble or an etcd cluster.
  bool clustered() const { return etcd() || zookeeper(); }
  int members() const { return backend_.name.ends_with("_ensemble") ? 3 : 1; }
  // The member a server fault hits: the leader of an ensemble (waited for
  // while an election after the last fault goes on), else 1. Empty if none.
  std::string aimed_member() {
    if (members() == 1) return "1";
    std::string leader;
    (void)eventually([&] { return !(leader = current_leader()).empty(); }, 30s);
    return leader;
  }
  std::string current_leader() { return output(backend_.script + " leader " + dir_); }
  bool member_script(const std::string& verb, const std::string& member) {
    return script(verb, member);
  }
  // start-node refuses while the killed member's pid is still there: a few tries.
  bool start_member(const std::string& member) {
    for (int i = 0; i < 20; ++i) {
      if (member_script("start-node", member)) return true;
      std::this_thread::sleep_for(100ms);
    }
    return false;
  }
  // Stopped and killed here through their redis-server pid files.
  bool redis_nodes() const { return backend_.name.starts_with("redis") || backend_.name == "redlock"; }
  std::string persistence() const {
    return backend_.name == "redis_aof" || backend_.name == "redlock"
               ? "REDIS_EXTRA_ARGS='--appendonly yes --appendfsync always' "
               : "";
  }
  std::string cluster_env() const { return topology() == "cluster" ? "REPLICAS=1 CLUSTER_NODE_TIMEOUT_MS=3000 " : ""; }
  std::string output(const std::string& command) {
    std::string out = shell_output(command + " 2>/dev/null");
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r' || out.back() == ' ')) out.pop_back();
    return out;
  }
  std::string master_of_slot() { return output(cluster_env() + backend_.script + " master-of " + dir_ + " " + slot_); }
  // The pid files of the node(s) a server fault hits: the master (of the
  // lock's slot), or one or two of a quorum's five nodes.
  std::vector<std::string> aim() {
    const std::string t = topology();
    std::string port;
    if (t == "sentinel") port = output(backend_.script + " master " + dir_);
    if (t == "cluster") port = master_of_slot();
    if (!port.empty()) return {dir_ + "/node-" + port + ".pid"};
    if (t != "quorum")
      return t.empty() ? std::vector<std::string>{dir_ + "/redis.pid"} : std::vector<std::string>{};
    std::vector<int> nodes = {1, 2, 3, 4, 5};
    std::shuffle(nodes.begin(), nodes.end(), rng_);
    nodes.resize(std::uniform_int_distribution<std::size_t>(1, 2)(rng_));  // a minority of 5
    std::vector<std::string> pid_files;
    for (int n : nodes) pid_files.push_back(dir_ + "/node" + std::to_string(n) + "/redis.pid");
    return pid_files;
  }
  // A verb of the store's script on its directory (then `extra`), with the
  // environment every verb gets: persistence for the AOF and quorum nodes,
  // replicas and node timeout for the Cluster.
  bool script(const std::string& verb, const std::string& extra = "") {
    return sh(persistence() + cluster_env() + backend_.script + " " + verb + " " + dir_ +
              (extra.empty() ? "" : " " + extra));
  }
  const NemesisBackend& backend_;
  std::string dir_, url_, slot_;
  long lease_s_;
  std::mt19937_64 rng_;
  std::vector<std::string> paused_;  // pid files of the nodes stopped now
  std::string paused_member_;        // the etcd or zookeeper member stopped now
  bool started_ = false;
};

// Who holds the lock now, as the history says (a process whose last
// acquisition has no release yet).
std::vector<std::int64_t> holders(const std::string& history_path) {
  std::map<std::int64_t, bool> holding;
  for (const auto& e : read_history(history_path)) {
    if (e.op == "acquire" && e.type == "ok") holding[e.process] = true;
    if (e.op == "release" && e.type == "invoke") holding[e.process] = false;
  }
  std::vector<std::int64_t> now;
  for (auto [process, held] : holding)
    if (held) now.push_back(process);
  return now;
}

class Run {
 public:
  Run(const NemesisBackend& backend, const NemesisOptions& options)
      : backend_(backend), options_(options), rng_(options.seed),
        store_(backend, dir_.path(), options.lease, options.seed), resource_path_(dir_.path() + "/resource"),
        history_path_(dir_.path() + "/history"), resource_(resource_path_, true), history_(history_path_) {}

  NemesisReport go() {
    NemesisReport report;
    if (!store_.ok()) {
      report.error = "could not start the " + backend_.name + " store (" + backend_.script + ")";
      return report;
    }
    auto uses = [&](Fault f) { return std::find(options_.faults.begin(), options_.faults.end(), f) != options_.faults.end(); };
    if (uses(Fault::partition) || uses(Fault::lossy_network)) {
      const std::string why = uses(Fault::lossy_network) ? ClientNetwork::degrade_unavailable_reason()
                                                          : ClientNetwork::unavailable_reason();
      if (!why.empty()) {
        report.error = why;
        return report;
      }
      network_ = std::make_unique<ClientNetwork>(0);
      proxy_ = std::make_unique<TcpProxy>(store_.port(), network_->host_ip());
    }
    end_ = steady::now() + options_.run;
    workers_.resize(static_cast<std::size_t>(options_.workers));
    for (std::size_t i = 0; i < workers_.size(); ++i) start_worker(i);
    // Each kind once in a random order, then again in another: a short
    // schedule of many kinds still has most of them.
    std::vector<Fault> bag;
    while (!options_.faults.empty()) {
      if (!sleep_until_before_end(milliseconds(between(200, 700)))) break;
      if (bag.empty()) {
        bag = options_.faults;
        std::shuffle(bag.begin(), bag.end(), rng_);
      }
      const Fault next = bag.back();
      bag.pop_back();
      if (auto error = inject(next); !error.empty()) {
        report.error = error;
        break;
      }
    }
    std::vector<std::string> hung;
    for (auto& w : workers_) {
      const auto left = std::chrono::duration_cast<milliseconds>(end_ - steady::now());
      if (!w->wait(std::max(left, 0ms) + scaled(20s))) hung.push_back(std::to_string(w->pid()));
    }
    final_acquisition();
    report.check = check_history(read_history(history_path_), check_options());
    for (const auto& pid : hung)
      report.check.violations.push_back("bounds: worker " + pid + " did not finish within its run + 20 s");
    std::ifstream in(history_path_);
    std::stringstream text;
    text << in.rdbuf();
    report.history = text.str();
    return report;
  }

 private:
  int between(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

  // Sleeps `d` unless that reaches past the end of the run (less 300 ms).
  bool sleep_until_before_end(milliseconds d) {
    if (steady::now() + d >= end_ - 300ms) return false;
    std::this_thread::sleep_for(d);
    return true;
  }

  void start_worker(std::size_t i) {
    const auto left = std::chrono::duration_cast<milliseconds>(end_ - steady::now());
    const bool isolated = i == 0 && network_;
    std::vector<std::string> argv = {DLOCK_TEST_WORKER,
                                     "nemesis",
                                     isolated ? store_.url_via(network_->host_ip(), proxy_->port()) : store_.url(),
                                     "nemesis",
                                     resource_path_,
                                     history_path_,
                                     std::to_string(std::max<long>(0, static_cast<long>(left.count()))),
                                     std::to_string(options_.lease.count()),
                                     std::to_string(options_.op_timeout.count()),
                                     std::to_string(options_.wait.count()),
                                     std::to_string(options_.seed * 16 + i + 16 * next_worker_++),
                                     options_.lock ? "lock" : "nolock"};
    if (isolated) argv.push_back(network_->name());
    workers_[i] = std::make_unique<ChildProcess>(argv);
  }

  void record(std::int64_t process, const char* type, Fault f) {
    history_.append({0, process, "nemesis", type, 0, 0, to_string(f)});
  }

  // The slot of the worker to hurt: the holder if there is one.
  std::size_t victim() {
    const auto now = holders(history_path_);
    std::vector<std::size_t> holding;
    for (std::size_t i = 0; i < workers_.size(); ++i)
      if (std::find(now.begin(), now.end(), workers_[i]->pid()) != now.end()) holding.push_back(i);
    if (!holding.empty()) return holding[static_cast<std::size_t>(between(0, static_cast<int>(holding.size()) - 1))];
    return static_cast<std::size_t>(between(0, static_cast<int>(workers_.size()) - 1));
  }

  // One fault, healed before it returns. Empty, or why it could not be made.
  std::string inject(Fault f) {
    const milliseconds past_lease = options_.lease + 1s;
    switch (f) {
      case Fault::pause_client: {
        auto& w = *workers_[victim()];
        record(w.pid(), "start", f);
        (void)stop_process(w.pid());  // every thread stopped before the pause is timed
        std::this_thread::sleep_for(past_lease);
        w.signal(SIGCONT);
        record(w.pid(), "stop", f);
        return "";
      }
      case Fault::kill_client: {
        const auto i = victim();
        record(workers_[i]->pid(), "start", f);
        workers_[i]->signal(SIGKILL);
        workers_[i]->wait(5s);
        record(workers_[i]->pid(), "stop", f);
        start_worker(i);
        return "";
      }
      case Fault::pause_server: {
        record(0, "start", f);
        if (!store_.pause()) return "could not stop the store";
        std::this_thread::sleep_for(milliseconds(between(300, static_cast<int>(past_lease.count()))));
        const bool resumed = store_.resume();
        record(0, "stop", f);
        return resumed ? "" : "could not resume the store";
      }
      case Fault::restart_server: {
        record(0, "start", f);
        const bool restarted = store_.restart();
        record(0, "stop", f);
        return restarted ? "" : "could not restart the store";
      }
      case Fault::partition:
      case Fault::lossy_network: {
        // While worker 0 holds, if it comes to hold within a second.
        const auto pid = workers_[0]->pid();
        for (int i = 0; i < 100; ++i) {
          const auto now = holders(history_path_);
          if (std::find(now.begin(), now.end(), pid) != now.end()) break;
          std::this_thread::sleep_for(10ms);
        }
        if (f == Fault::partition) {
          record(pid, "start", f);
          if (!network_->cut()) return "could not cut the client's network";
          std::this_thread::sleep_for(past_lease);
          const bool healed = network_->heal();
          record(pid, "stop", f);
          return healed ? "" : "could not heal the client's network";
        }
        const int loss = between(10, 40), rate = 32 << between(0, 3);
        record(pid, "start", f);
        if (!network_->degrade(loss, rate)) return "could not degrade the client's network";
        std::this_thread::sleep_for(milliseconds(between(500, static_cast<int>(past_lease.count()))));
        const bool restored = network_->restore();
        record(pid, "stop", f);
        return restored ? "" : "could not restore the client's network";
      }
      case Fault::failover: {
        record(0, "start", f);
        const bool done = store_.failover();
        record(0, "stop", f);
        return done ? "" : "could not fail the master over";
      }
    }
    return "unknown fault";
  }

  // No hold may have leaked: the lock can be taken within the lease (or
  // session timeout) after the run. A call that fails `unavailable` (the
  // store or the machine slow to answer within op_timeout right after a
  // fault, as under TSan) is made again on a new client until that bound
  // is spent: what this checks is that no one holds the lock, and the
  // checker still fails the run if the lock comes too late.
  void final_acquisition() {
    history_.append({0, 0, "final", "invoke"});
    const auto deadline = steady::now() + check_options().final_bound + 2s;
    std::string failure;
    for (;;) {
      try {
        auto client = connect(store_.url(), {.op_timeout = options_.op_timeout});
        auto m = client->mutex("nemesis", {.lease = options_.lease});
        const auto left = std::chrono::duration_cast<milliseconds>(deadline - steady::now());
        const bool got = m.try_lock_for(std::max(left, milliseconds(0)));
        history_.append({0, 0, "final", got ? "ok" : "fail"});
        if (got) m.unlock();
        return;
      } catch (const Error& e) {
        failure = dlock::to_string(e.kind());
        if (e.kind() != errc::unavailable || steady::now() + 100ms >= deadline) break;
      }
      std::this_thread::sleep_for(100ms);
    }
    history_.append({0, 0, "final", "fail", 0, 0, failure});
  }

  CheckOptions check_options() const {
    std::vector<std::string> double_grant;
    for (Fault f : backend_.double_grant) double_grant.emplace_back(to_string(f));
    return {.acquire_bound = scaled(options_.wait + 2 * options_.op_timeout + 1s),
            .release_bound = scaled(2 * options_.op_timeout + 1s),
            .final_bound = scaled(options_.lease + 2 * options_.op_timeout + 2s),
            .lost_slack = scaled(50ms),
            .double_grant_faults = double_grant,
            .double_grant_grace = backend_.double_grant_grace};
  }

  const NemesisBackend& backend_;
  NemesisOptions options_;
  std::mt19937_64 rng_;
  TempDir dir_;
  Store store_;
  std::string resource_path_, history_path_;
  FencedResource resource_;
  HistoryWriter history_;
  std::unique_ptr<ClientNetwork> network_;
  std::unique_ptr<TcpProxy> proxy_;
  std::vector<std::unique_ptr<ChildProcess>> workers_;
  std::uint64_t next_worker_ = 0;
  steady::time_point end_;
};

}  // namespace

NemesisReport run_nemesis(const NemesisBackend& backend, const NemesisOptions& options) {
  Run run(backend, options);
  return run.go();
}

}  // namespace dlock::test
