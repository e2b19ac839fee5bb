// cluster.h — redis+cluster://: the backend's commands sent to the master
// that serves each key's hash slot.
//
// The backend is redis:// with another way of sending its commands (a
// Commands, pool.h): every key of one lock shares the hash tag {<name>},
// so each script runs on one master, and the ClusterRouter only picks it:
//   - the slot map comes from CLUSTER SLOTS (on start, from the seeds);
//   - a command answered MOVED goes again to the master named there, and
//     the map is read again (at most every 100 ms; the moved slot at once);
//   - ASK (a slot being migrated, our keys already on the target): ASKING
//     and the command again on the target, the map unchanged;
//   - TRYAGAIN (a migration half way for a script's keys) and CLUSTERDOWN
//     (a failover under way): again after a pause, within the deadline;
//   - a connection to a master that fails makes the next call re-read the
//     map, which then names the promoted replica (a failed call is not sent
//     again: it may have run).
// Each master has its own Pool (pipelined, pool.h); a batch whose
// commands go to several masters is split, one sub-batch per master, all
// written before any reply is read (Pool::start, Pool::finish: the round
// trips overlap), and its replies put back in order. Scripts are loaded on every master, and
// again on one that answers NOSCRIPT (a promoted replica: SCRIPT LOAD is
// not replicated), before the command goes there again.
//
// Wake-ups are sharded: the scripts SPUBLISH on a channel in the lock's
// slot, and the subscriber (subscriber.h) asks the router which master to
// SSUBSCRIBE on (SlotOwners), so a release is heard by that shard only.
//
// Replication is asynchronous, as with redis+sentinel: a failover can lose
// a lock that had not reached the promoted replica (docs/backends.md). The
// router tells the backend (on_moved) which slots a re-read map or a MOVED
// shows on another master than before, and the backend re-validates the
// holds in them there at once (revalidator.h).
#pragma once

#include "backends/redis/config.h"
#include "backends/redis/pool.h"
#include "backends/redis/subscriber.h"

#include <array>
#include <condition_variable>
#include <deque>
#include <thread>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace dlock::detail::redis {

class ClusterRouter final : public Commands, public SlotOwners {
 public:
  // `config`: the redis+cluster URL's (seeds, options); it outlives the router.
  explicit ClusterRouter(const Config& config);
  ~ClusterRouter() override;

  // Asks every seed who it is and whom it knows: seeds of two clusters, or a
  // node without cluster support, are refused (invalid_argument); seeds
  // that do not answer are skipped if one does. Then reads the slot map.
  Status start(steady::time_point deadline);
  // `listener` is called, on the thread that noticed and without the
  // router's lock, with the slots a new map or a MOVED shows served by
  // another master than before. Set before start(), not changed afterwards.
  void on_moved(std::function<void(const std::set<int>&)> listener) { on_moved_ = std::move(listener); }

  Replies run(const Batch& batch, steady::time_point deadline, std::string_view step) override;
  // A batch whose commands all go to one master is sent there without
  // waiting (Pool::send), and the router's own thread reads its replies
  // (Pool::flush of that master, unless a call on it read them first); if
  // one asks for the router (MOVED, ASK, TRYAGAIN, CLUSTERDOWN, NOSCRIPT:
  // the command did not run), that thread runs the batch again, within the
  // same deadline. Any other batch is run (run()) before this returns.
  void send(const Batch& batch, steady::time_point deadline, std::function<void(Replies)> done) override;
  // Reads what send() left behind, and waits for the router's thread.
  void flush(steady::time_point deadline) override;
  Result<std::string> load(Script script, steady::time_point deadline) override;
  Result<std::vector<Pool*>> shards(steady::time_point deadline) override;

  // SlotOwners (the sharded subscriber's).
  std::optional<Endpoint> master_of(int slot, bool reread, steady::time_point deadline) override;
  // Also when a node failed a call, which used up its time: the calls that
  // follow find a promoted replica.
  void reread_later() override;
  void redirected(std::string_view error, const Endpoint& asked) override;
  const Config& node_config(const Endpoint& at) override;

 private:
  // Which master serves each slot (an index into masters, -1 none).
  struct SlotMap {
    std::array<std::int16_t, 16384> owner{};
    std::vector<Endpoint> masters;
  };
  struct Node;

  Node& node(const Endpoint& at);
  Pool& pool(const Endpoint& at);
  std::shared_ptr<const SlotMap> slot_map();
  // Reads CLUSTER SLOTS (from `first`, else the masters, else the seeds);
  // at most every 100 ms unless `now`.
  Status refresh(steady::time_point deadline, const Endpoint* first, bool now = false);
  // A MOVED answer: `slot` is on `at` now.
  void moved(int slot, const Endpoint& at);
  // Makes `map` the slot map (mu_ held); the slots it moved (a served slot
  // now on another master).
  std::set<int> install(std::shared_ptr<const SlotMap> map);

  // The background thread's work (send()).
  struct Resend {
    Batch batch;
    steady::time_point deadline;
    std::function<void(Replies)> done;
  };
  void run_background();
  void start_background();  // (bg_mu_ held)

  const Config& config_;
  std::function<void(const std::set<int>&)> on_moved_;
  std::mutex bg_mu_;
  std::condition_variable bg_cv_;
  std::deque<Resend> resends_;                                    // bg_mu_
  std::map<Pool*, steady::time_point> unread_;                    // bg_mu_: pools to flush, by when
  bool bg_busy_ = false;                                          // bg_mu_: working on what it took
  bool refreshing_ = false;                                       // bg_mu_: refresher_ is reading the map
  bool reread_again_ = false;                                     // bg_mu_: ... and is to read it once more
  std::thread refresher_;                                         // bg_mu_: reread_later()'s
  bool stopping_ = false;                                         // bg_mu_
  std::thread bg_thread_;                                         // started by the first send()
  const int closing_fd_;  // an eventfd, written when the router closes: its pools' waits give up
  std::mutex mu_;
  std::shared_ptr<const SlotMap> map_;                  // mu_
  std::map<std::string, std::unique_ptr<Node>> nodes_;  // mu_; by "host:port", never removed
  steady::time_point refreshed_at_{};                   // mu_
  std::set<std::string> unanswered_;                    // mu_: nodes that failed their last reading
};

}  // namespace dlock::detail::redis
