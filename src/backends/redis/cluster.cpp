#include "backends/redis/cluster.h"

#include "backends/redis/errors.h"
#include "backends/redis/replies.h"
#include "core/thread_name.h"

#include <hiredis.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <set>
#include <thread>

namespace dlock::detail::redis {
namespace {

using std::chrono::milliseconds;

// A command redirected more often than this fails.
constexpr int max_redirects = 16;
// How long TRYAGAIN / CLUSTERDOWN waits before the next round.
constexpr milliseconds pause{20};
// The slot map is read again at most this often (a MOVED patches its slot at once).
constexpr milliseconds refresh_every{100};

std::string address(const Endpoint& e) { return e.host + ":" + std::to_string(e.port.value_or(default_port)); }

bool error_starts(const redisReply* r, std::string_view word) {
  return r && r->type == REDIS_REPLY_ERROR && std::string_view(r->str, r->len).starts_with(word);
}

bool same(const Endpoint& a, const Endpoint& b) {
  return a.host == b.host && a.port.value_or(default_port) == b.port.value_or(default_port);
}

// A connection's settings for one node: the URL's, at that address.
Config config_for(const Config& base, const Endpoint& at) {
  Config c = base;
  c.host = at.host;
  c.port = at.port.value_or(default_port);
  c.discovery = nullptr;
  c.seeds.clear();
  c.redacted_url = address(at) + " of " + base.redacted_url;
  return c;
}

}  // namespace

struct ClusterRouter::Node {
  Node(const Config& base, const Endpoint& at) : config(config_for(base, at)), pool(config) {}
  const Config config;
  Pool pool;
};

ClusterRouter::ClusterRouter(const Config& config)
    : config_(config), closing_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

ClusterRouter::~ClusterRouter() {
  {
    std::lock_guard lk(bg_mu_);
    stopping_ = true;
  }
  bg_cv_.notify_all();
  if (bg_thread_.joinable()) bg_thread_.join();  // (the replies of releases sent without waiting: read)
  // Nothing but a map reading may use the pools now: it gives up at once
  // rather than spend its op_timeout on a master that does not answer.
  std::uint64_t one = 1;
  if (closing_fd_ >= 0) (void)!::write(closing_fd_, &one, sizeof one);
  if (refresher_.joinable()) refresher_.join();
  if (closing_fd_ >= 0) ::close(closing_fd_);
}

void ClusterRouter::run_background() {
  std::unique_lock lk(bg_mu_);
  for (;;) {
    bg_cv_.wait(lk, [&] { return stopping_ || !resends_.empty() || !unread_.empty(); });
    if (resends_.empty() && unread_.empty()) return;  // stopping, nothing left
    auto unread = std::move(unread_);
    unread_.clear();
    auto resends = std::move(resends_);
    resends_.clear();
    bg_busy_ = true;
    const bool closing = stopping_;
    lk.unlock();
    for (auto& [pool, until] : unread) pool->flush(until);  // (their callbacks may queue resends)
    for (auto& r : resends) {
      Replies got = closing ? Replies{{}, Status(errc::unavailable, "redis backend: the client is closing")}
                            : run(r.batch, r.deadline, "sending a command again");
      try {
        r.done(std::move(got));
      } catch (...) {
      }
    }
    lk.lock();
    bg_busy_ = false;
    bg_cv_.notify_all();
  }
}

ClusterRouter::Node& ClusterRouter::node(const Endpoint& at) {
  std::lock_guard lk(mu_);
  auto& n = nodes_[address(at)];
  if (!n) {
    n = std::make_unique<Node>(config_, at);
    if (closing_fd_ >= 0) n->pool.cancel_on(closing_fd_);
  }
  return *n;
}

Pool& ClusterRouter::pool(const Endpoint& at) { return node(at).pool; }

const Config& ClusterRouter::node_config(const Endpoint& at) { return node(at).config; }

std::optional<Endpoint> ClusterRouter::master_of(int slot, bool reread, steady::time_point deadline) {
  if (reread) (void)refresh(deadline, nullptr);
  auto map = slot_map();
  if (!map || slot < 0 || slot > 16383) return std::nullopt;
  const int owner = map->owner[static_cast<std::size_t>(slot)];
  if (owner < 0) return std::nullopt;
  return map->masters[static_cast<std::size_t>(owner)];
}

void ClusterRouter::redirected(std::string_view error, const Endpoint& asked) {
  if (auto redirect = redirect_of(error, asked); redirect && !redirect->ask) moved(redirect->slot, redirect->at);
}

std::shared_ptr<const ClusterRouter::SlotMap> ClusterRouter::slot_map() {
  std::lock_guard lk(mu_);
  return map_;
}

Status ClusterRouter::start(steady::time_point deadline) {
  // Each seed's node id, and the ids it knows (CLUSTER NODES: "<id> <address> <flags> ...").
  struct Seen {
    Endpoint seed;
    std::string id;
    std::set<std::string> known;
  };
  std::vector<Seen> seen;
  std::string errors;
  // Each seed gets an equal share of the time left: one that is down
  // refuses at once, one black-holed costs only its share.
  for (std::size_t i = 0; i < config_.seeds.size(); ++i) {
    const Endpoint& seed = config_.seeds[i];
    const auto now = steady::now();
    const auto share = now + (deadline - now) / static_cast<long>(config_.seeds.size() - i);
    const std::string step = "asking seed " + address(seed) + " for the cluster's nodes";
    const std::string_view words[] = {"CLUSTER", "NODES"};
    auto reply = pool(seed).command(words, share, step);
    if (!reply) {
      const std::string why = reply.status().message();
      if (why.find("cluster support disabled") != std::string::npos)
        return Status(errc::invalid_argument, "redis+cluster url " + config_.redacted_url + ": seed " + address(seed) +
                                                  " is not a cluster node (cluster support "
                                                  "disabled); use redis:// for a single server");
      if (reply.status().code() == errc::invalid_argument) return reply.status();
      errors += (errors.empty() ? "" : "; ") + why;
      continue;
    }
    auto nodes = cluster_nodes_of(reply->get());
    if (!nodes)
      return Status(errc::internal,
                    "redis+cluster url " + config_.redacted_url + ": " + step + ": " + nodes.status().message());
    seen.push_back({seed, std::move(nodes->myself), std::move(nodes->known)});
  }
  if (seen.empty())
    return Status(errc::unavailable,
                  "redis+cluster url " + config_.redacted_url + ": no seed answered (" + errors + ")");
  for (std::size_t i = 1; i < seen.size(); ++i)
    if (!seen.front().known.count(seen[i].id))
      return Status(errc::invalid_argument, "redis+cluster url " + config_.redacted_url + ": seeds " +
                                                address(seen.front().seed) + " and " + address(seen[i].seed) +
                                                " belong to different clusters (" + address(seen.front().seed) +
                                                " does not know node " + seen[i].id + "); list nodes of one cluster");
  return refresh(deadline, &seen.front().seed, true);
}

Status ClusterRouter::refresh(steady::time_point deadline, const Endpoint* first, bool now) {
  std::vector<Endpoint> ask;
  {
    std::lock_guard lk(mu_);
    const auto t = steady::now();
    if (t >= deadline) return Status(errc::unavailable, "redis backend: no time left to read the slot map");
    if (!now && t < refreshed_at_ + refresh_every) return {};
    refreshed_at_ = t;
    if (first) ask.push_back(*first);
    if (map_)
      for (const auto& m : map_->masters) ask.push_back(m);
  }
  ask.insert(ask.end(), config_.seeds.begin(), config_.seeds.end());
  std::set<std::string> seen;
  std::erase_if(ask, [&](const Endpoint& at) { return !seen.insert(address(at)).second; });
  {
    // Nodes that failed the last reading they were asked for go last.
    std::lock_guard lk(mu_);
    std::stable_partition(ask.begin(), ask.end(), [&](const Endpoint& at) { return !unanswered_.count(address(at)); });
  }
  std::string errors;
  for (std::size_t i = 0; i < ask.size(); ++i) {
    const Endpoint& at = ask[i];
    const auto t = steady::now();
    if (t >= deadline) break;
    // Each node an equal share of the time left, as at start: one that
    // does not answer (stopped, cut off) costs its share, and the next is
    // asked (it may have been failed over, and its replica serve now).
    const auto share = t + (deadline - t) / static_cast<long>(ask.size() - i);
    const std::string step = "reading the slot map from " + address(at);
    const std::string_view words[] = {"CLUSTER", "SLOTS"};
    auto reply = pool(at).command(words, share, step);
    {
      std::lock_guard lk(mu_);
      if (reply) unanswered_.erase(address(at));
      else unanswered_.insert(address(at));
    }
    if (!reply) {
      errors += (errors.empty() ? "" : "; ") + reply.status().message();
      continue;
    }
    auto ranges = slot_ranges_of(reply->get(), at);
    if (!ranges) return Status(errc::internal, "redis backend: " + step + ": " + ranges.status().message());
    auto map = std::make_shared<SlotMap>();
    map->owner.fill(-1);
    for (const SlotRange& range : *ranges) {
      auto it = std::find_if(map->masters.begin(), map->masters.end(),
                             [&](const Endpoint& e) { return same(e, range.master); });
      if (it == map->masters.end() && map->masters.size() >= map->owner.size()) continue;  // more masters than slots
      const auto index = static_cast<std::int16_t>(it - map->masters.begin());
      if (it == map->masters.end()) map->masters.push_back(range.master);
      std::fill(map->owner.begin() + range.first, map->owner.begin() + range.last + 1, index);
    }
    if (map->masters.empty()) {
      errors += (errors.empty() ? "" : "; ") + address(at) + " serves no slots";
      continue;
    }
    std::set<int> changed;
    {
      std::lock_guard lk(mu_);
      changed = install(std::move(map));
    }
    if (!changed.empty() && on_moved_) on_moved_(changed);
    return {};
  }
  return Status(errc::unavailable,
                "redis+cluster url " + config_.redacted_url + ": no node answered CLUSTER SLOTS (" + errors + ")");
}

void ClusterRouter::moved(int slot, const Endpoint& at) {
  std::set<int> changed;
  {
    std::lock_guard lk(mu_);
    auto map = map_ ? std::make_shared<SlotMap>(*map_) : std::make_shared<SlotMap>();
    if (!map_) map->owner.fill(-1);
    auto it = std::find_if(map->masters.begin(), map->masters.end(), [&](const Endpoint& e) { return same(e, at); });
    const auto index = static_cast<std::int16_t>(it - map->masters.begin());
    if (it == map->masters.end()) map->masters.push_back(at);
    map->owner[static_cast<std::size_t>(slot)] = index;
    changed = install(std::move(map));
  }
  if (!changed.empty() && on_moved_) on_moved_(changed);
}

std::set<int> ClusterRouter::install(std::shared_ptr<const SlotMap> map) {
  std::set<int> changed;
  if (map_)
    for (int slot = 0; slot < 16384; ++slot) {
      const int was = map_->owner[static_cast<std::size_t>(slot)], now = map->owner[static_cast<std::size_t>(slot)];
      // (a slot no master serves yet is counted once one does)
      if (now >= 0 && (was < 0 || !same(map_->masters[static_cast<std::size_t>(was)],
                                        map->masters[static_cast<std::size_t>(now)])))
        changed.insert(slot);
    }
  map_ = std::move(map);
  return changed;
}

Replies ClusterRouter::run(const Batch& batch, steady::time_point deadline, std::string_view step) {
  if (batch.empty()) return {};
  // A command still to send: its index, and the node an ASK sent it to.
  struct Unsent {
    std::size_t index;
    std::optional<Endpoint> ask;
  };
  struct Group {
    Endpoint at;
    Batch batch;
    std::vector<Unsent> items;
  };
  std::vector<Reply> out(batch.size());
  std::vector<Unsent> unsent;
  for (std::size_t i = 0; i < batch.size(); ++i) unsent.push_back({i, std::nullopt});
  std::size_t failed_at = batch.size();
  Status failure;
  auto fail = [&](std::size_t index, const Status& why) {
    if (index < failed_at) {
      failed_at = index;
      failure = why;
    }
  };
  // Rounds with a redirection (MOVED, ASK) are counted; TRYAGAIN and
  // CLUSTERDOWN are bounded by the deadline only.
  int redirects = 0;
  std::set<std::string> scripted;  // nodes the scripts were loaded on in this call
  while (!unsent.empty()) {
    if (redirects > max_redirects || steady::now() >= deadline) {
      const std::string why = redirects > max_redirects
                                  ? "redirected it more than " + std::to_string(max_redirects) + " times"
                                  : "did not serve it within ClientOptions::op_timeout";
      for (const Unsent& t : unsent)
        fail(t.index, Status(errc::unavailable, "redis backend: " + std::string(step) + ": the cluster " + why +
                                                    " (a failover or slot migration under way?)"));
      break;
    }
    auto map = slot_map();
    std::map<std::string, Group> groups;
    bool again = false, reread = false, redirected = false, failed_node = false;
    std::set<std::string> unscripted;  // nodes that answered NOSCRIPT in this round
    std::vector<Unsent> next;
    for (const Unsent& t : unsent) {
      std::optional<Endpoint> at = t.ask;
      if (!at) {
        const int slot = batch.slot(t.index);
        const int owner = map ? (slot < 0 ? 0 : map->owner[static_cast<std::size_t>(slot)]) : -1;
        if (owner < 0 || map->masters.empty()) {
          // Not served (a failover under way, or the map is stale): read it again, then retry.
          next.push_back(t);
          again = reread = true;
          continue;
        }
        at = map->masters[static_cast<std::size_t>(owner)];
      }
      Group& g = groups[address(*at)];
      g.at = *at;
      if (t.ask) g.batch.add({"ASKING"});
      g.batch.add_copy(batch, t.index);
      g.items.push_back(t);
    }
    // Every master's part is written before any reply is waited for.
    std::vector<Pool::Pending> pending;
    for (auto& [where, g] : groups) pending.push_back(pool(g.at).start(g.batch, deadline, step));
    std::size_t part = 0;
    for (auto& [where, g] : groups) {
      Replies got = pool(g.at).finish(pending[part++], step);
      std::size_t at = 0;
      for (const Unsent& t : g.items) {
        if (t.ask) ++at;  // ASKING's +OK
        if (at >= got.replies.size()) {
          fail(t.index, got.failure);
          continue;
        }
        Reply& reply = got.replies[at++];
        if (auto redirect = redirect_of(reply.get(), g.at)) {
          redirected = true;
          if (redirect->ask) {
            next.push_back({t.index, redirect->at});
          } else {
            moved(redirect->slot, redirect->at);
            next.push_back({t.index, std::nullopt});
            reread = true;
          }
        } else if (is_noscript(reply.get()) && !scripted.count(where)) {
          // A promoted replica (SCRIPT LOAD is not replicated): load them all there, once.
          next.push_back(t);
          unscripted.insert(where);
        } else if (error_starts(reply.get(), "TRYAGAIN") || error_starts(reply.get(), "CLUSTERDOWN")) {
          next.push_back(t);
          again = true;
          reread = reread || error_starts(reply.get(), "CLUSTERDOWN");
        } else {
          out[t.index] = std::move(reply);
        }
      }
      // The node failed us: the map is read again for the calls that follow
      // (a replica may be promoted), with time of its own.
      if (!got.failure.ok()) failed_node = true;
    }
    if (failed_node) reread_later();
    for (const std::string& where : unscripted) {
      Batch loads;
      for (Script script : all_scripts) loads.add({"SCRIPT", "LOAD", script_text(script)});
      (void)pool(groups[where].at).run(loads, deadline, "loading the scripts");
      scripted.insert(where);
    }
    if (redirected) ++redirects;
    if (reread) (void)refresh(deadline, nullptr);
    if (again && !next.empty())
      std::this_thread::sleep_for(
          std::min<steady::duration>(pause, std::max(deadline - steady::now(), steady::duration::zero())));
    unsent = std::move(next);
  }
  Replies result;
  for (std::size_t i = 0; i < failed_at; ++i) {
    if (!out[i]) {
      // (a later command failed first in time; this one is unknown too)
      failed_at = i;
      break;
    }
    result.replies.push_back(std::move(out[i]));
  }
  if (failed_at < batch.size())
    result.failure = failure.ok()
                         ? Status(errc::unavailable, "redis backend: " + std::string(step) + ": a node did not answer")
                         : failure;
  return result;
}

void ClusterRouter::send(const Batch& batch, steady::time_point deadline, std::function<void(Replies)> done) {
  // The one master every command goes to, if there is one.
  auto map = slot_map();
  int owner = -1;
  for (std::size_t i = 0; map && i < batch.size(); ++i) {
    const int slot = batch.slot(i);
    const int o = map->owner[static_cast<std::size_t>(slot < 0 ? 0 : slot)];
    if (o < 0 || (owner >= 0 && o != owner)) {
      owner = -1;
      break;
    }
    owner = o;
  }
  if (owner < 0) return done(run(batch, deadline, "sending a command"));
  Pool& to = pool(map->masters[static_cast<std::size_t>(owner)]);
  to.send(batch, deadline, [this, batch, deadline, done = std::move(done)](Replies replies) mutable {
    const bool again = std::any_of(replies.replies.begin(), replies.replies.end(), [](const Reply& r) {
      return redirect_of(r.get(), Endpoint{}) || is_noscript(r.get()) || error_starts(r.get(), "TRYAGAIN") ||
             error_starts(r.get(), "CLUSTERDOWN");
    });
    if (again) {
      std::lock_guard lk(bg_mu_);
      if (!stopping_) {
        resends_.push_back({std::move(batch), deadline, std::move(done)});
        bg_cv_.notify_all();
        return;
      }
    }
    if (!replies.failure.ok()) reread_later();
    done(std::move(replies));
  });
  // Nothing else may go to that master soon: the thread reads its replies.
  std::lock_guard lk(bg_mu_);
  if (stopping_) return;
  auto& until = unread_[&to];
  until = std::max(until, deadline);
  start_background();
  bg_cv_.notify_all();
}

void ClusterRouter::reread_later() {
  std::lock_guard lk(bg_mu_);
  if (stopping_) return;
  if (refreshing_) {
    // The reading under way may have begun before what made this request
    // (a promotion): one more follows it (however many ask meanwhile).
    reread_again_ = true;
    return;
  }
  if (refresher_.joinable()) refresher_.join();
  refreshing_ = true;
  // Not on the background thread: a reading may spend a share of
  // op_timeout on a node that does not answer, and the resends there
  // (a release answered MOVED) must not wait for it.
  refresher_ = std::thread([this] {
    name_this_thread("dlock-cluster");
    for (bool again = false;; again = true) {
      (void)refresh(steady::now() + config_.op_timeout, nullptr, again);
      std::lock_guard done(bg_mu_);
      if (stopping_ || !std::exchange(reread_again_, false)) {
        refreshing_ = false;
        return;
      }
    }
  });
}

void ClusterRouter::start_background() {
  if (!bg_thread_.joinable()) bg_thread_ = std::thread([this] {
      name_this_thread("dlock-cluster");
      run_background();
    });
}

void ClusterRouter::flush(steady::time_point deadline) {
  std::vector<Pool*> pools;
  {
    std::lock_guard lk(mu_);
    for (auto& [where, node] : nodes_) pools.push_back(&node->pool);
  }
  for (Pool* p : pools) p->flush(deadline);
  {
    // (the thread may be running a batch again: then its replies are read too)
    std::unique_lock lk(bg_mu_);
    bg_cv_.wait_until(lk, deadline, [&] { return resends_.empty() && unread_.empty() && !bg_busy_; });
  }
  for (Pool* p : pools) p->flush(deadline);
}

Result<std::string> ClusterRouter::load(Script script, steady::time_point deadline) {
  auto map = slot_map();
  if (!map) return Status(errc::unavailable, "redis+cluster url " + config_.redacted_url + ": no slot map yet");
  // Every master needs it; one that is down gets it when it answers NOSCRIPT.
  std::optional<Result<std::string>> first_error;
  std::optional<std::string> sha;
  for (const Endpoint& m : map->masters) {
    auto got = load_on(pool(m), script, deadline);
    if (got)
      sha = *got;
    else if (!first_error)
      first_error = got;
  }
  if (sha) return *sha;
  return *first_error;
}

Result<std::vector<Pool*>> ClusterRouter::shards(steady::time_point deadline) {
  if (Status s = refresh(deadline, nullptr, true); !s) return s;
  auto map = slot_map();
  std::vector<Pool*> out;
  for (const Endpoint& m : map->masters) out.push_back(&pool(m));
  return out;
}

}  // namespace dlock::detail::redis
