#include "core/quorum_backend.h"

#include "core/client_state.h"
#include "core/node_worker.h"


#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>

namespace dlock::detail {
namespace {

using std::chrono::milliseconds;

// What every validity loses besides the lease's share: the clock's resolution.
constexpr milliseconds drift_floor{2};
// A node that could not be opened is tried again at most this often.
constexpr milliseconds reopen_interval{1'000};
// A node's lock is asked for without its queue and barging rules: no node
// may hand the lock to a waiter on its own (each node could pick another).
constexpr milliseconds no_barging_bound = std::chrono::hours(1);

// One store of the quorum.
struct Node {
  std::string label;
  std::function<Result<std::unique_ptr<Backend>>()> open;
  std::shared_ptr<ClientState> client;  // a borrowed backend's owner
  std::unique_ptr<Backend> owned;       // on the worker only
  std::atomic<Backend*> backend{nullptr};
  steady::time_point next_open{};       // on the worker only
  Status open_failure;                  // on the worker only
  std::atomic<bool> retry_now{false};   // open again now, whenever it was last tried
  std::function<void(LogLevel, std::string_view)> log;
  // Whether a call to the node is bounded by node_timeout, so the calling
  // thread may make it itself (NodeWorker::run_here) without overrunning.
  bool bounded = false;
  NodeWorker worker;                    // last: its thread ends before the rest goes

  // On the worker: the node's backend, opened now if it is not yet.
  Result<Backend*> get() {
    if (Backend* b = backend.load()) return b;
    const auto now = steady::now();
    if (now < next_open && !retry_now.exchange(false)) return Status(errc::unavailable, label + ": not connected (" + open_failure.message() + ")");
    auto opened = open();
    if (opened && (*opened)->session_timeout())
      opened = Status(errc::invalid_argument,
                      label + ": keeps locks for as long as a session, not by lease; a quorum needs leased locks");
    if (!opened) {
      next_open = now + reopen_interval;
      open_failure = opened.status();
      return Status(opened.code(), label + ": " + opened.status().message());
    }
    owned = std::move(*opened);
    if (log) owned->events().set_log(log);
    backend.store(owned.get());
    return owned.get();
  }
};

// A node's part of a held lock: touched only on that node's worker.
struct NodeGrant {
  Grant grant;
};

// The quorum's grant: which nodes hold it, and until when each keeps it.
class QuorumGrant final : public GrantState {
 public:
  std::shared_ptr<const LockRequest> request;      // what the nodes were asked
  std::vector<std::shared_ptr<NodeGrant>> nodes;   // nullptr: not held there
  std::vector<steady::time_point> valid_until;     // per node, for the holder of the outer grant
};

// The answers of one fan-out, one slot per node, filled by the workers.
template <class T>
struct Round {
  explicit Round(std::size_t n) : answers(n) {}
  std::mutex mu;
  std::condition_variable answered_cv;
  std::vector<std::optional<T>> answers;  // guarded by mu
  std::size_t answered = 0;               // guarded by mu
  bool closed = false;                    // guarded by mu: answers after this are late
};

// The k-th latest of `times` (k >= 1): until then at least k of them are
// still in the future. min() if there are fewer than k.
steady::time_point kth_latest(std::vector<steady::time_point> times, std::size_t k) {
  if (times.size() < k || k == 0) return steady::time_point::min();
  std::nth_element(times.begin(), times.begin() + static_cast<std::ptrdiff_t>(k - 1), times.end(),
                   std::greater<>());
  return times[k - 1];
}

class QuorumBackend final : public Backend, public LockDriver {
 public:
  QuorumBackend(std::vector<QuorumNode> nodes, const QuorumOptions& quorum, const ClientOptions& options)
      : quorum_(quorum), majority_(nodes.size() / 2 + 1), nodes_(nodes.size()) {
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      Node& node = nodes_[i];
      node.label = "node " + std::to_string(i + 1) + " (" + nodes[i].label + ")";
      node.open = std::move(nodes[i].open);
      node.client = std::move(nodes[i].client);
      node.log = options.log;
      if (node.client) node.backend.store(&node.client->backend());
      node.bounded = !node.client || node.client->options().op_timeout <= quorum.node_timeout;
    }
  }

  // Opens every node at once; fails unless a majority opened within
  // `timeout`. A node's opening is bounded by its own op_timeout (for a
  // URL, node_timeout), which a loaded machine can overrun: the nodes that
  // failed are tried again, every open_pause, while fewer than a majority
  // are open and `timeout` lasts.
  Status start(milliseconds timeout) {
    constexpr milliseconds open_pause{20};
    const auto deadline = steady::now() + timeout;
    std::vector<std::string> failures;
    std::size_t opened = 0;
    for (bool first = true; opened < majority_ && steady::now() < deadline; first = false) {
      if (!first) std::this_thread::sleep_for(open_pause);
      for (Node& node : nodes_) node.retry_now.store(true);
      auto answers = fan_out<Status>(
          all(), deadline, [](Node&, Backend&) { return Status(); }, [](Status s) { return s; });
      failures.clear();
      opened = 0;
      for (std::size_t i = 0; i < answers.size(); ++i) {
        if (answers[i] && answers[i]->ok()) ++opened;
        else failures.push_back(answers[i] ? answers[i]->message() : nodes_[i].label + ": no answer in time");
        if (answers[i] && answers[i]->code() == errc::invalid_argument) return *answers[i];
      }
    }
    if (opened >= majority_) return {};
    return Status(errc::unavailable, "quorum: only " + std::to_string(opened) + " of " + std::to_string(nodes_.size()) +
                                         " nodes answered, a majority is " + std::to_string(majority_) + ": " +
                                         join(failures));
  }

  Status validate_name(std::string_view name) const override {
    for (const Node& node : nodes_)
      if (Backend* b = node.backend.load())
        if (Status s = b->validate_name(name); !s) return s;
    return {};
  }

  Status validate(const MutexOptions& options) const override {
    const auto budget = options.lease - drift(options.lease) - quorum_.node_timeout;
    if (budget <= milliseconds::zero())
      return Status(errc::invalid_argument,
                    "MutexOptions::lease: " + std::to_string(options.lease.count()) +
                        "ms is too short for this quorum: lease - drift (" + std::to_string(drift(options.lease).count()) +
                        "ms) - node_timeout (" + std::to_string(quorum_.node_timeout.count()) + "ms) must be > 0");
    return {};
  }

  LockDriver& locks() override { return *this; }

  Status ping() override {
    auto answers = fan_out<Status>(
        all(), steady::now() + quorum_.node_timeout, [](Node&, Backend& b) { return b.ping(); },
        [](Status s) { return s; });
    return majority_or_first_error(answers, "ping");
  }

  Result<Attempt> try_acquire(const LockRequest& request) override {
    auto asked = std::make_shared<LockRequest>(request);
    asked->fair = false;
    asked->max_barging_wait = no_barging_bound;
    std::shared_ptr<const LockRequest> req = asked;
    const std::size_t n = nodes_.size(), need = majority_;
    auto answers = fan_out<Result<Attempt>>(
        all(), steady::now() + quorum_.node_timeout,
        [req](Node&, Backend& b) { return b.locks().try_acquire(*req); },
        [](Status s) { return Result<Attempt>(std::move(s)); },
        // Granted after we stopped waiting: give it back at once.
        [req](Node& node, Result<Attempt>& late) {
          if (late && std::holds_alternative<Grant>(*late))
            if (Backend* b = node.backend.load()) (void)b->locks().release(*req, std::get<Grant>(*late));
        },
        // No majority possible any more: stop waiting for the rest.
        [n, need](std::vector<std::optional<Result<Attempt>>>& so_far, std::size_t answered) {
          std::size_t granted = 0;
          for (auto& a : so_far) granted += a && *a && std::holds_alternative<Grant>(**a);
          return granted + (n - answered) < need;
        },
        [req](Node&, Backend& b) -> std::function<Result<Attempt>()> {
          std::shared_ptr<PendingAttempt> pending = b.locks().start_try_acquire(*req);
          return [pending, req] { return pending->finish(); };
        });

    auto held = std::make_unique<QuorumGrant>();
    held->request = req;
    held->nodes.resize(n);
    held->valid_until.assign(n, steady::time_point::min());
    std::vector<steady::time_point> granted_until;
    std::uint64_t token = 0;
    Busy busy;
    std::vector<std::pair<std::size_t, Status>> failures;
    std::size_t unanswered = 0, busy_nodes = 0;
    for (std::size_t i = 0; i < n; ++i) {
      auto& answer = answers[i];
      if (!answer) {
        ++unanswered;
        failures.emplace_back(i, Status(errc::unavailable, nodes_[i].label + ": no answer in time"));
      } else if (!*answer) {
        failures.emplace_back(i, answer->status());
      } else if (auto* grant = std::get_if<Grant>(&**answer)) {
        token = std::max(token, grant->token);
        held->valid_until[i] = grant->valid_until;
        granted_until.push_back(grant->valid_until);
        held->nodes[i] = std::make_shared<NodeGrant>(NodeGrant{std::move(*grant)});
      } else {
        ++busy_nodes;
        busy.holder_expires = std::min(busy.holder_expires, std::get<Busy>(**answer).holder_expires);
        busy.ask_again = std::min(busy.ask_again, std::get<Busy>(**answer).ask_again);
      }
    }
    if (granted_until.size() >= need) {
      Grant grant;
      grant.token = token;
      grant.valid_until = kth_latest(granted_until, need) - drift(request.lease);
      grant.state = std::move(held);
      return Attempt(std::move(grant));
    }
    // No majority: what was granted is released everywhere before the
    // caller's loop retries (after its jittered delay).
    if (!granted_until.empty()) (void)release_on_nodes(*held, "giving back a partial grant");
    // Unavailable when the nodes that failed leave no majority, or when
    // they and the unanswered ones do and no node said someone holds it
    // (an answer still out is not a holder; a node that said busy is).
    const std::size_t answered_failures = failures.size() - unanswered;
    if (answered_failures > n - need || (failures.size() > n - need && busy_nodes == 0))
      return too_many_failures(failures, "acquiring lock '" + request.name + "'");
    return Attempt(busy);
  }

  std::unique_ptr<Waiter> watch(const LockRequest&) override { return nullptr; }

  Status release(const LockRequest& request, Grant& grant) override {
    auto* held = dynamic_cast<QuorumGrant*>(grant.state.get());
    if (!held) return Status(errc::internal, "releasing lock '" + request.name + "': not a quorum grant");
    return release_on_nodes(*held, "releasing lock '" + request.name + "'");
  }

  void release_async(const LockRequest& request, Grant& grant, std::function<void(Status)> done) override {
    auto* held = dynamic_cast<QuorumGrant*>(grant.state.get());
    if (!held) return done(Status(errc::internal, "releasing lock '" + request.name + "': not a quorum grant"));
    struct Tally {
      std::mutex mu;
      std::size_t waiting = 0, released = 0;
      std::vector<Status> failures;
      std::function<void(Status)> done;
    };
    auto tally = std::make_shared<Tally>();
    tally->done = std::move(done);
    std::vector<std::pair<std::size_t, std::shared_ptr<NodeGrant>>> todo;
    for (std::size_t i = 0; i < held->nodes.size(); ++i)
      if (held->nodes[i]) todo.emplace_back(i, std::exchange(held->nodes[i], nullptr));
    tally->waiting = todo.size();
    if (todo.empty()) return tally->done(Status(errc::lock_lost, "unlock '" + request.name + "': held on no node"));
    const std::size_t need = majority_;
    const std::string what = "unlock '" + request.name + "'";
    for (auto& [i, node_grant] : todo) {
      Node& node = nodes_[i];
      // (Captured by an init-capture: clang before 16 cannot capture a structured binding.)
      // On the node's worker, not the calling thread: each send costs a
      // system call that wakes a server, five of them more than the
      // caller's whole acquire (measured: bench/quorum.sh, 34 µs vs 220).
      node.worker.post([&node, req = held->request, node_grant = node_grant, tally, need, what] {
        auto report = [tally, need, what](Status s) {
          std::function<void(Status)> finish;
          Status outcome;
          {
            std::lock_guard lk(tally->mu);
            if (s.ok()) ++tally->released;
            else tally->failures.push_back(std::move(s));
            if (--tally->waiting > 0) return;
            outcome = tally->released >= need ? Status() : released_on_too_few(tally->released, tally->failures, what);
            finish = std::move(tally->done);
          }
          finish(std::move(outcome));
        };
        Backend* b = node.backend.load();
        if (!b) return report(Status(errc::unavailable, node.label + ": not connected"));
        b->locks().release_async(*req, node_grant->grant, report);
      });
    }
  }

  void renew(std::span<Renewal> batch) override {
    const std::size_t n = nodes_.size();
    // Per node, the batch items it holds.
    std::vector<std::vector<std::size_t>> per_node(n);
    std::vector<QuorumGrant*> held(batch.size());
    for (std::size_t j = 0; j < batch.size(); ++j) {
      held[j] = dynamic_cast<QuorumGrant*>(batch[j].grant->state.get());
      if (!held[j]) {
        batch[j].outcome = Status(errc::internal, "renewing: not a quorum grant");
        continue;
      }
      for (std::size_t i = 0; i < n; ++i)
        if (held[j]->nodes[i]) per_node[i].push_back(j);
    }
    // One node's answer: per item it holds, the outcome and new validity.
    struct Outcomes {
      Status failure;  // the node could not be asked
      std::vector<std::pair<Status, steady::time_point>> items;
    };
    struct Work {
      std::vector<std::shared_ptr<const LockRequest>> requests;
      std::vector<std::shared_ptr<NodeGrant>> grants;
    };
    std::vector<std::size_t> asked;
    auto work = std::make_shared<std::vector<std::shared_ptr<const Work>>>(n);
    for (std::size_t i = 0; i < n; ++i) {
      if (per_node[i].empty()) continue;
      auto w = std::make_shared<Work>();
      for (std::size_t j : per_node[i]) {
        w->requests.push_back(held[j]->request);
        w->grants.push_back(held[j]->nodes[i]);
      }
      (*work)[i] = std::move(w);
      asked.push_back(i);
    }
    auto answers = fan_out<Outcomes>(
        asked, steady::now() + quorum_.node_timeout,
        [work, this](Node& node, Backend& b) {
          const Work& w = *(*work)[index_of(node)];
          std::vector<Renewal> inner;
          for (std::size_t k = 0; k < w.requests.size(); ++k)
            inner.push_back(Renewal{w.requests[k].get(), &w.grants[k]->grant, {}});
          b.locks().renew(inner);
          Outcomes out;
          for (std::size_t k = 0; k < inner.size(); ++k)
            out.items.emplace_back(inner[k].outcome, w.grants[k]->grant.valid_until);
          return out;
        },
        [](Status s) { return Outcomes{std::move(s), {}}; });
    // Per item: which nodes renewed, which refused.
    for (std::size_t j = 0; j < batch.size(); ++j) {
      if (!held[j]) continue;
      QuorumGrant& q = *held[j];
      std::size_t renewed = 0;
      std::vector<std::string> why;
      for (std::size_t i = 0; i < n; ++i) {
        if (!q.nodes[i]) continue;
        const auto& answer = answers[i];
        const auto at = std::find(per_node[i].begin(), per_node[i].end(), j) - per_node[i].begin();
        if (!answer || static_cast<std::size_t>(at) >= answer->items.size()) {
          why.push_back(answer ? answer->failure.message() : nodes_[i].label + ": no answer within node_timeout");
          continue;
        }
        const auto& [status, until] = answer->items[static_cast<std::size_t>(at)];
        if (status.ok()) {
          ++renewed;
          q.valid_until[i] = until;
        } else if (status.code() == errc::lock_lost || status.code() == errc::not_owner) {
          q.nodes[i] = nullptr;  // that node no longer has it for us
          q.valid_until[i] = steady::time_point::min();
          why.push_back(status.message());
        } else {
          why.push_back(status.message());
        }
      }
      std::vector<steady::time_point> holding;
      for (std::size_t i = 0; i < n; ++i)
        if (q.nodes[i]) holding.push_back(q.valid_until[i]);
      const auto until = kth_latest(holding, majority_);
      batch[j].grant->valid_until =
          until == steady::time_point::min() ? until : until - drift(batch[j].request->lease);
      const std::string what = "renewing lock '" + batch[j].request->name + "'";
      if (renewed >= majority_) batch[j].outcome = {};
      else if (holding.size() < majority_)
        batch[j].outcome = Status(errc::lock_lost, what + ": held on only " + std::to_string(holding.size()) + " of " +
                                                       std::to_string(n) + " nodes, fewer than a majority (" +
                                                       join(why) + ")");
      else
        batch[j].outcome = Status(errc::unavailable, what + ": renewed on only " + std::to_string(renewed) + " of " +
                                                         std::to_string(n) + " nodes (" + join(why) + ")");
    }
  }

  Status force_release(std::string_view name) override {
    const std::string owned_name(name);
    auto answers = fan_out<Status>(
        all(), steady::now() + quorum_.node_timeout,
        [owned_name](Node&, Backend& b) { return b.locks().force_release(owned_name); }, [](Status s) { return s; });
    return majority_or_first_error(answers, "force-releasing '" + owned_name + "'");
  }

  // A lock is listed when a majority of the nodes list it for one holder.
  Result<std::vector<LockInfo>> list(std::string_view prefix) override {
    const std::string owned_prefix(prefix);
    auto answers = fan_out<Result<std::vector<LockInfo>>>(
        all(), steady::now() + quorum_.node_timeout,
        [owned_prefix](Node&, Backend& b) { return b.locks().list(owned_prefix); },
        [](Status s) { return Result<std::vector<LockInfo>>(std::move(s)); });
    std::map<std::tuple<std::string, std::string, std::string>, std::vector<LockInfo>> seen;
    std::vector<std::pair<std::size_t, Status>> failures;
    for (std::size_t i = 0; i < answers.size(); ++i) {
      if (!answers[i]) failures.emplace_back(i, Status(errc::unavailable, nodes_[i].label + ": no answer in time"));
      else if (!*answers[i]) failures.emplace_back(i, answers[i]->status());
      else
        for (auto& info : **answers[i]) seen[{info.name, info.kind, info.holder}].push_back(std::move(info));
    }
    if (failures.size() > nodes_.size() - majority_) return too_many_failures(failures, "listing locks");
    std::vector<LockInfo> out;
    for (auto& [key, infos] : seen) {
      if (infos.size() < majority_) continue;
      LockInfo merged = infos.front();
      std::vector<milliseconds> left;
      for (const auto& info : infos) {
        merged.token = std::max(merged.token, info.token);
        if (info.remaining) left.push_back(*info.remaining);
      }
      if (left.size() >= majority_) {
        std::nth_element(left.begin(), left.begin() + static_cast<std::ptrdiff_t>(majority_ - 1), left.end(),
                         std::greater<>());
        merged.remaining = left[majority_ - 1];
      }
      out.push_back(std::move(merged));
    }
    std::sort(out.begin(), out.end(),
              [](const LockInfo& a, const LockInfo& b) { return std::tie(a.name, a.token) < std::tie(b.name, b.token); });
    return out;
  }

  void flush(steady::time_point deadline) override {
    for (Node& node : nodes_) {
      node.worker.wait_idle(deadline);
      if (Backend* b = node.backend.load()) b->flush(deadline);
    }
  }

 private:
  milliseconds drift(milliseconds lease) const {
    return milliseconds(static_cast<std::int64_t>(std::ceil(static_cast<double>(lease.count()) * quorum_.drift_factor))) +
           drift_floor;
  }

  std::vector<std::size_t> all() const {
    std::vector<std::size_t> out(nodes_.size());
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = i;
    return out;
  }

  std::size_t index_of(const Node& node) const { return static_cast<std::size_t>(&node - nodes_.data()); }

  static std::string join(const std::vector<std::string>& parts) {
    std::string out;
    for (const auto& p : parts) out += (out.empty() ? "" : "; ") + p;
    return out;
  }

  // Runs call(node, backend) on every node in `which`, each on its own
  // worker, and waits for their answers until `deadline` or until
  // `decided(answers so far, how many)` says the rest cannot matter.
  // A node not answered by then has nullopt; its answer, when it comes,
  // goes to `late` (if any). `call` and `late` may run on the workers
  // after this returns: they must own what they use.
  //
  // With `start` (the call in two halves: start sends, the function it
  // returns reads the answer), the calling thread itself asks every node
  // it can claim (bounded, nothing of the node's queued): it sends to all
  // of them before it reads any answer, with no thread switch. The others
  // go to their workers as above.
  template <class T>
  std::vector<std::optional<T>> fan_out(
      const std::vector<std::size_t>& which, steady::time_point deadline, std::function<T(Node&, Backend&)> call,
      std::function<T(Status)> failed, std::function<void(Node&, T&)> late = {},
      std::function<bool(std::vector<std::optional<T>>&, std::size_t)> decided = {},
      std::function<std::function<T()>(Node&, Backend&)> start = {}) {
    auto round = std::make_shared<Round<T>>(nodes_.size());
    if (which.empty()) return std::move(round->answers);
    // Nodes asked from here: the claim is given back once the answer is
    // read (or, if reading throws, as the list goes).
    struct Sent {
      std::size_t node;
      std::function<T()> finish;
      std::unique_ptr<NodeWorker::Claimed> claimed;
    };
    std::vector<Sent> sent;
    // Without `start`, the calling thread asks one node itself (after
    // handing the others to their workers): one thread switch less per round.
    std::function<void()> here;
    for (std::size_t i : which) {
      Node& node = nodes_[i];
      if (start && node.bounded) {
        Backend* b = node.backend.load();
        if (b && node.worker.claim()) {
          auto claimed = std::make_unique<NodeWorker::Claimed>(node.worker);
          sent.push_back(Sent{i, start(node, *b), std::move(claimed)});
          continue;
        }
      }
      auto task = [round, i, &node, call, failed, late, deadline] {
        T answer = [&] {
          // Queued behind a call that took its whole timeout: too late to matter.
          if (steady::now() >= deadline)
            return failed(Status(errc::unavailable, node.label + ": busy past node_timeout with an earlier call"));
          auto backend = node.get();
          if (!backend) return failed(backend.status());
          return call(node, **backend);
        }();
        std::unique_lock lk(round->mu);
        if (round->closed) {
          lk.unlock();
          if (late) late(node, answer);
          return;
        }
        round->answers[i] = std::move(answer);
        ++round->answered;
        round->answered_cv.notify_all();
      };
      if (!here && !start && node.bounded && i == which.back()) here = task;
      else node.worker.post(std::move(task));
    }
    if (here && !nodes_[which.back()].worker.run_here(here)) nodes_[which.back()].worker.post(std::move(here));
    for (Sent& s : sent) {
      T answer = s.finish();  // within the node's op_timeout: it is bounded
      s.claimed.reset();
      std::lock_guard lk(round->mu);
      round->answers[s.node] = std::move(answer);
      ++round->answered;
    }
    std::unique_lock lk(round->mu);
    round->answered_cv.wait_until(lk, deadline, [&] {
      return round->answered == which.size() || (decided && decided(round->answers, round->answered));
    });
    round->closed = true;
    return std::move(round->answers);
  }

  // Releases the lock on every node that holds it (in parallel, waiting
  // up to node_timeout); the grant holds no node afterwards.
  Status release_on_nodes(QuorumGrant& held, const std::string& what) {
    std::vector<std::size_t> which;
    for (std::size_t i = 0; i < held.nodes.size(); ++i)
      if (held.nodes[i]) which.push_back(i);
    if (which.empty()) return Status(errc::lock_lost, what + ": held on no node");
    auto grants = std::make_shared<std::vector<std::shared_ptr<NodeGrant>>>(std::move(held.nodes));
    held.nodes.assign(nodes_.size(), nullptr);
    auto answers = fan_out<Status>(
        which, steady::now() + quorum_.node_timeout,
        [req = held.request, grants, this](Node& node, Backend& b) {
          return b.locks().release(*req, (*grants)[index_of(node)]->grant);
        },
        [](Status s) { return s; });
    std::size_t released = 0;
    std::vector<Status> failures;
    for (std::size_t i : which) {
      if (answers[i] && answers[i]->ok()) ++released;
      else failures.push_back(answers[i] ? *answers[i] : Status(errc::unavailable, nodes_[i].label + ": no answer in time"));
    }
    if (released >= majority_) return {};
    return released_on_too_few(released, failures, what);
  }

  // The outcome of a release a majority did not confirm.
  static Status released_on_too_few(std::size_t released, const std::vector<Status>& failures, const std::string& what) {
    bool lost = false;
    std::vector<std::string> why;
    for (const Status& s : failures) {
      lost = lost || s.code() == errc::lock_lost || s.code() == errc::not_owner;
      why.push_back(s.message());
    }
    return Status(lost ? errc::lock_lost : errc::unavailable,
                  what + ": released on only " + std::to_string(released) + " nodes, fewer than a majority (" +
                      join(why) + ")");
  }

  // More nodes failed than the quorum tolerates: one error naming them all.
  // Their common code if they agree (e.g. invalid_argument), else unavailable.
  Status too_many_failures(const std::vector<std::pair<std::size_t, Status>>& failures, const std::string& what) const {
    errc code = failures.front().second.code();
    std::vector<std::string> why;
    for (const auto& [i, s] : failures) {
      if (s.code() != code) code = errc::unavailable;
      why.push_back(s.message().starts_with("node ") ? s.message() : nodes_[i].label + ": " + s.message());
    }
    return Status(code, what + ": " + std::to_string(failures.size()) + " of " + std::to_string(nodes_.size()) +
                            " nodes failed, a majority needs " + std::to_string(majority_) + " (" + join(why) + ")");
  }

  Status majority_or_first_error(const std::vector<std::optional<Status>>& answers, const std::string& what) const {
    std::size_t ok = 0;
    std::vector<std::pair<std::size_t, Status>> failures;
    for (std::size_t i = 0; i < answers.size(); ++i) {
      if (answers[i] && answers[i]->ok()) ++ok;
      else failures.emplace_back(i, answers[i] ? *answers[i] : Status(errc::unavailable, "no answer in time"));
    }
    if (ok >= majority_) return {};
    return too_many_failures(failures, what);
  }

  const QuorumOptions quorum_;
  const std::size_t majority_;
  std::vector<Node> nodes_;  // never resized: workers hold references
};

}  // namespace

Status validate(const QuorumOptions& options) {
  if (options.node_timeout <= milliseconds::zero())
    return Status(errc::invalid_argument, "QuorumOptions::node_timeout: must be > 0 (got " +
                                              std::to_string(options.node_timeout.count()) + "ms)");
  if (!std::isfinite(options.drift_factor) || options.drift_factor < 0 || options.drift_factor >= 1)
    return Status(errc::invalid_argument, "QuorumOptions::drift_factor: must be in [0, 1) (got " +
                                              std::to_string(options.drift_factor) + ")");
  return {};
}

Result<std::unique_ptr<Backend>> open_quorum_backend(std::vector<QuorumNode> nodes, const QuorumOptions& quorum,
                                                     const ClientOptions& options) {
  if (Status s = validate(quorum); !s) return s;
  if (nodes.size() < 3)
    return Status(errc::invalid_argument, "quorum: needs at least 3 nodes (got " + std::to_string(nodes.size()) +
                                              "): with fewer, one node failing stops every lock");
  std::map<std::string, std::size_t> seen;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    auto [it, fresh] = seen.emplace(nodes[i].identity, i);
    if (!fresh)
      return Status(errc::invalid_argument, "quorum: node " + std::to_string(i + 1) + " (" + nodes[i].label +
                                                ") is the same store as node " + std::to_string(it->second + 1) +
                                                " (" + nodes[it->second].label +
                                                "); the nodes must be independent stores");
  }
  auto backend = std::make_unique<QuorumBackend>(std::move(nodes), quorum, options);
  if (Status s = backend->start(options.op_timeout); !s) return s;
  return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace dlock::detail
