#include "backends/redis/pool.h"

#include "backends/redis/errors.h"

#include <hiredis.h>

#include <algorithm>
#include <mutex>

namespace dlock::detail::redis {

struct Pool::Request {
  Request(Batch b, steady::time_point d) : batch(std::move(b)), deadline(d) {}
  enum class State { queued, sent, done };

  const Batch batch;
  const steady::time_point deadline;
  Replies result;                  // the leader's until state is done
  State state = State::queued;     // Channel::mu
  bool lead = false;               // Channel::mu: its thread is to lead now
  bool abandoned = false;          // Channel::mu: its thread left (out of time), or none waits (send)
  // Channel::mu: start() wrote it (or queued it) and its thread is not
  // waiting yet (finish()): the lead is not passed to it meanwhile.
  bool parked = false;
  bool write_only = false;         // its thread leads only until it is written (start())
  std::function<void(Replies)> done;  // send(): who gets the replies
  std::condition_variable cv;      // with Channel::mu
};

struct Pool::Channel {
  Channel(const Config& config, std::atomic<std::uint64_t>* generation) : conn(config, generation) {}

  // The leader's (handed from leader to leader under mu).
  Connection conn;
  std::deque<std::shared_ptr<Request>> sent;  // in conn's output or written, unanswered; oldest first

  std::mutex mu;
  bool busy = false;                           // mu: a thread leads; if not, queue is empty
  std::deque<std::shared_ptr<Request>> queue;  // mu: not yet in conn's output
  std::atomic<int> calls{0};                   // calls under way on it (pick()'s hint)
  std::atomic<int> detached{0};                // send() batches not answered yet
};

namespace {
// The connection the calling thread last sent a batch on without waiting
// (its pool's id, never reused, and its index): the thread's next calls go
// there while that batch is unanswered, so they run after it.
std::atomic<std::uint64_t> next_pool_id{1};
thread_local std::uint64_t sent_pool = 0;
thread_local std::size_t sent_channel = 0;
}  // namespace

Pool::Pool(const Config& config) : id_(next_pool_id.fetch_add(1)) {
  for (int i = 0; i < config.connections; ++i)
    channels_.push_back(std::make_unique<Channel>(config, &generation_));
}

Pool::~Pool() = default;

void Pool::cancel_on(int fd) noexcept {
  for (auto& ch : channels_) ch->conn.cancel_on(fd);
}


Pool::Channel& Pool::pick() noexcept {
  if (sent_pool == id_) {
    Channel& ch = *channels_[sent_channel];
    if (ch.detached.load(std::memory_order_relaxed) > 0) return ch;
    sent_pool = 0;
  }
  // An idle connection if there is one (a lone thread always gets the
  // first: one warm connection), else the one with the fewest calls.
  Channel* best = channels_.front().get();
  int fewest = INT_MAX;
  for (auto& ch : channels_) {
    const int calls = ch->calls.load(std::memory_order_relaxed);
    if (calls == 0) return *ch;
    if (calls < fewest) {
      fewest = calls;
      best = ch.get();
    }
  }
  return *best;
}

Replies Pool::run(const Batch& batch, steady::time_point deadline, std::string_view step) {
  if (batch.empty()) return {};
  return run_on(pick(), batch, deadline, step);
}

Replies Pool::run_on(Channel& ch, const Batch& batch, steady::time_point deadline, std::string_view step) {
  auto me = std::make_shared<Request>(batch, deadline);
  ch.calls.fetch_add(1, std::memory_order_relaxed);
  struct Leave {
    std::atomic<int>& calls;
    ~Leave() { calls.fetch_sub(1, std::memory_order_relaxed); }
  } leave{ch.calls};

  std::unique_lock lk(ch.mu);
  ch.queue.push_back(me);
  if (!ch.busy) {
    ch.busy = true;
    me->lead = true;
  }
  return await(ch, lk, me, step);
}

Replies Pool::await(Channel& ch, std::unique_lock<std::mutex>& lk, const std::shared_ptr<Request>& me,
                    std::string_view step) {
  if (me->state != Request::State::done && !me->lead) {
    // A follower: the leader answers us, or passes us the lead.
    const bool woken =
        me->cv.wait_until(lk, me->deadline, [&] { return me->state == Request::State::done || me->lead; });
    if (me->state == Request::State::done) return std::move(me->result);
    if (!woken) {
      if (me->state == Request::State::queued) {
        ch.queue.erase(std::find(ch.queue.begin(), ch.queue.end(), me));
        return {{}, no_time_left(step)};
      }
      me->abandoned = true;  // written: the leader reads its replies and drops them
      return {{}, no_answer(step)};
    }
  }
  if (me->state == Request::State::done) return std::move(me->result);
  lead(ch, lk, *me, step);
  return std::move(me->result);
}

Pool::Pending Pool::start(const Batch& batch, steady::time_point deadline, std::string_view step) {
  if (batch.empty()) return {};
  Channel& ch = pick();
  auto me = std::make_shared<Request>(batch, deadline);
  me->parked = true;
  ch.calls.fetch_add(1, std::memory_order_relaxed);
  std::unique_lock lk(ch.mu);
  ch.queue.push_back(me);
  if (!ch.busy) {
    // Nobody leads: write it now (and whatever else queued), then let go.
    ch.busy = true;
    me->write_only = true;
    lead(ch, lk, *me, step);
    me->write_only = false;
  }
  return {me, &ch};
}

Replies Pool::finish(Pending& pending, std::string_view step) {
  if (!pending.request) return {};
  Channel& ch = *pending.channel;
  struct Leave {
    std::atomic<int>& calls;
    ~Leave() { calls.fetch_sub(1, std::memory_order_relaxed); }
  } leave{ch.calls};
  std::unique_lock lk(ch.mu);
  auto me = std::move(pending.request);
  me->parked = false;
  // Its replies unread (or it still queued) and nobody leading: we lead.
  if (me->state != Request::State::done && !me->lead && !ch.busy) {
    ch.busy = true;
    me->lead = true;
  }
  return await(ch, lk, me, step);
}

// Called with lk held and the lead; returns with lk held, me done and the
// lead passed on (or busy cleared).
// Wakes the threads of finished batches, or hands a sent batch's replies to
// its `done` (lk not held; the shared_ptrs keep the waiters' cvs alive).
void Pool::complete(std::vector<std::shared_ptr<Request>>& finished, const Request* me) {
  for (auto& r : finished) {
    if (r->done) {
      try {
        r->done(std::move(r->result));
      } catch (...) {
      }
    } else if (r.get() != me) {
      r->cv.notify_one();
    }
  }
  finished.clear();
}

void Pool::send(const Batch& batch, steady::time_point deadline, std::function<void(Replies)> done) {
  if (batch.empty()) return;
  auto me = std::make_shared<Request>(batch, deadline);
  Channel& ch = pick();
  sent_pool = id_;
  for (std::size_t i = 0; i < channels_.size(); ++i)
    if (channels_[i].get() == &ch) sent_channel = i;
  std::atomic<int>& detached = ch.detached;
  detached.fetch_add(1, std::memory_order_relaxed);
  me->done = [&detached, done = std::move(done)](Replies replies) {
    detached.fetch_sub(1, std::memory_order_relaxed);
    done(std::move(replies));
  };
  me->abandoned = true;  // no thread waits for it: leaders read its replies
  std::unique_lock lk(ch.mu);
  ch.queue.push_back(me);
  if (ch.busy) return;  // the leader writes it with its own
  // Nobody leads: write it now (and whatever else queued), then let go.
  ch.busy = true;
  ch.calls.fetch_add(1, std::memory_order_relaxed);
  lead(ch, lk, *me, "sending a command");
  ch.calls.fetch_sub(1, std::memory_order_relaxed);
}

void Pool::flush(steady::time_point deadline) {
  for (auto& ch : channels_) {
    if (ch->detached.load() == 0) continue;
    // A PING behind them: its answer comes after theirs, and whoever leads
    // for it reads theirs first.
    Batch ping;
    ping.add({"PING"});
    (void)run_on(*ch, ping, deadline, "flushing");
  }
}

// One thread's turn as a channel's leader, in named steps. lk is held on
// entry and exit of every step unless the step says otherwise.
class Pool::Lead {
 public:
  Lead(Channel& ch, std::unique_lock<std::mutex>& lk, Request& me, std::string_view step)
      : ch_(ch), conn_(ch.conn), lk_(lk), me_(me), step_(step) {}

  // Rounds until our part is over (settled()) and what queued meanwhile
  // is written, then the lead goes on.
  void run() {
    me_.lead = false;
    for (;;) {
      const bool flushing = settled();
      if (flushing && !flush_more()) break;
      take_queue();
      lk_.unlock();
      take_replies();
      const auto now = steady::now();
      fail_if_oldest_overdue(now);
      drop_late(now);
      write_fresh(flushing);
      wait_for_replies(flushing);
      lk_.lock();
      requeue_given_back();
      mark_finished();
      if (settled()) continue;  // flush, then pass the lead on
      lk_.unlock();
      notify();
      lk_.lock();
    }
    pass_lead();
  }

 private:
  using State = Request::State;

  // Our part is over once our replies are in, or (send()) once our batch
  // is written.
  bool settled() const {
    return me_.state == State::done ||
           ((me_.done || me_.write_only) && me_.state == State::sent && !conn_.output_pending());
  }

  // Once our part is over, write once more what queued meanwhile (if the
  // connection is ready: no connecting on others' behalf past our
  // deadline); false when there is nothing more to write.
  bool flush_more() {
    // Batches sent without waiting have no thread to lead for them: the
    // leader writes them all before it goes (or fails them if the
    // connection is not up: connecting is up to a thread with its own time).
    const bool unattended =
        std::any_of(ch_.queue.begin(), ch_.queue.end(), [](const auto& r) { return bool(r->done); });
    if (!conn_.connected() || conn_.stale()) {
      std::erase_if(ch_.queue, [&](std::shared_ptr<Request>& r) {
        if (!r->done) return false;
        r->result.failure = Status(errc::unavailable, std::string(step_) + ": not sent, the connection was down");
        finished_.push_back(std::move(r));
        return true;
      });
      return false;
    }
    // (A bounded number of rounds: a leader never works for others for long.)
    if ((flushed_ && !(unattended && flush_rounds_ < 16)) || ch_.queue.empty()) {
      if (!conn_.output_pending() || ch_.sent.empty()) return false;
    }
    flushed_ = true;
    ++flush_rounds_;
    return true;
  }

  // Takes every queued batch to write in this round.
  void take_queue() {
    fresh_.assign(ch_.queue.begin(), ch_.queue.end());
    ch_.queue.clear();
    for (auto& r : fresh_) r->state = State::sent;
  }

  // lk not held. The connection is gone: every written batch fails.
  void fail_sent(const Status& why) {
    for (auto& r : ch_.sent) {
      r->result.failure = why;
      finished_.push_back(std::move(r));
    }
    ch_.sent.clear();
  }

  // lk not held. Hands the replies received so far to their batches (no I/O).
  void take_replies() {
    while (!ch_.sent.empty()) {
      auto reply = conn_.next_reply(step_);
      if (!reply) return fail_sent(reply.status());
      if (!*reply) return;
      Request& r = *ch_.sent.front();
      r.result.replies.push_back(std::move(*reply));
      if (r.result.replies.size() == r.batch.size()) {
        finished_.push_back(std::move(ch_.sent.front()));
        ch_.sent.pop_front();
      }
    }
  }

  // lk not held. The oldest written batch is past its deadline (its thread
  // left): if its replies are not here now, the connection is dead.
  void fail_if_oldest_overdue(steady::time_point now) {
    if (ch_.sent.empty() || ch_.sent.front()->deadline > now) return;
    if (Status s = conn_.wait(now, step_); !s) fail_sent(s);
    take_replies();
    if (!ch_.sent.empty() && ch_.sent.front()->deadline <= now) fail_sent(conn_.fail(no_answer(step_)));
  }

  // lk not held. Batches queued past their deadline are not sent.
  void drop_late(steady::time_point now) {
    std::erase_if(fresh_, [&](std::shared_ptr<Request>& r) {
      if (r->deadline > now) return false;
      r->result.failure = no_time_left(step_);
      finished_.push_back(std::move(r));
      return true;
    });
  }

  // lk not held. Writes this round's batches, connecting first if needed
  // and if it is ours to do.
  void write_fresh(bool flushing) {
    if (fresh_.empty()) return;
    // Made before a failure another call saw, or closed by the server.
    if (!flushing && ch_.sent.empty() && !conn_.output_pending() && (conn_.stale() || conn_.readable_while_idle()))
      conn_.drop();
    const bool mine_fresh = std::any_of(fresh_.begin(), fresh_.end(), [&](const auto& r) { return r.get() == &me_; });
    if (!conn_.connected() && !mine_fresh) {
      // Connecting is up to a thread with its own batch to send and its
      // own time: the first of these (we would overrun our deadline).
      give_back_ = std::move(fresh_);
    } else if (Status ready = conn_.connected() ? Status{} : conn_.connect(me_.deadline); !ready) {
      for (auto& r : fresh_) {
        r->result.failure = ready;
        finished_.push_back(std::move(r));
      }
    } else {
      for (auto& r : fresh_) {
        conn_.append(r->batch.bytes());
        ch_.sent.push_back(std::move(r));
      }
      if (Status s = conn_.write_some(step_); !s) fail_sent(s);
    }
    fresh_.clear();
  }

  // lk not held. Waits for our replies (and those before them); when
  // flushing, for the socket to take what it has not taken yet, so it is
  // written before the lead goes.
  void wait_for_replies(bool flushing) {
    const bool answered = flushing || settled() || std::any_of(finished_.begin(), finished_.end(), [&](const auto& r) {
                            return r.get() == &me_;
                          });
    if (!answered && !ch_.sent.empty()) {
      const auto until = std::min(ch_.sent.front()->deadline, me_.deadline);
      if (Status s = conn_.wait(until, step_); !s) fail_sent(s);
      take_replies();
    } else if (flushing && conn_.output_pending() && !ch_.sent.empty()) {
      if (Status s = conn_.wait(ch_.sent.front()->deadline, step_); !s) fail_sent(s);
      take_replies();
    }
  }

  // Batches not ours to connect for go back to the queue's front, in order.
  void requeue_given_back() {
    for (auto r = give_back_.rbegin(); r != give_back_.rend(); ++r)
      if (!(*r)->abandoned || (*r)->done) {  // (an abandoned one's thread left: drop it)
        (*r)->state = State::queued;
        ch_.queue.push_front(std::move(*r));
      }
    give_back_.clear();
  }

  void mark_finished() {
    for (auto& r : finished_) r->state = State::done;
  }

  // lk not held. Hands the finished batches' replies to their threads.
  void notify() { complete(finished_, &me_); }

  // Our batch is done: the lead goes to the oldest unanswered batch's
  // thread (it waits for its replies), else to the first queued one (it
  // writes), else nobody leads.
  void pass_lead() {
    std::shared_ptr<Request> next;
    for (auto& r : ch_.sent)
      if (!r->abandoned && !r->parked) {
        next = r;
        break;
      }
    if (!next)
      for (auto& r : ch_.queue)
        if (!r->done && !r->parked) {
          next = r;
          break;
        }
    // Only batches sent without waiting are left queued (the rounds ran
    // out): they fail, and the lease frees what they would have released.
    // (A parked one stays: its thread leads for it in finish().)
    if (!next)
      std::erase_if(ch_.queue, [&](std::shared_ptr<Request>& r) {
        if (r->parked) return false;
        r->result.failure = Status(errc::unavailable, std::string(step_) + ": not sent (the connection was busy)");
        finished_.push_back(std::move(r));
        return true;
      });
    if (next) next->lead = true;
    else ch_.busy = false;
    lk_.unlock();
    notify();
    if (next) next->cv.notify_one();
    lk_.lock();
  }

  Channel& ch_;
  Connection& conn_;  // the leader's while it leads
  std::unique_lock<std::mutex>& lk_;
  Request& me_;
  const std::string_view step_;
  std::vector<std::shared_ptr<Request>> fresh_, finished_, give_back_;
  bool flushed_ = false;
  int flush_rounds_ = 0;
};

void Pool::lead(Channel& ch, std::unique_lock<std::mutex>& lk, Request& me, std::string_view step) {
  Lead(ch, lk, me, step).run();
}

Result<Reply> Commands::command(std::span<const std::string_view> words, steady::time_point deadline,
                                std::string_view step, std::string_view key) {
  Batch batch;
  batch.add(words, key);
  Replies out = run(batch, deadline, step);
  if (!out.failure.ok()) return out.failure;
  Reply& reply = out.replies.front();
  if (reply->type == REDIS_REPLY_ERROR) return to_status(nullptr, reply.get(), step, key);
  return std::move(reply);
}

Result<std::string> Commands::load_on(Pool& pool, Script script, steady::time_point deadline) {
  const std::string& text = script_text(script);
  const std::string_view words[] = {"SCRIPT", "LOAD", text};
  auto reply = pool.command(words, deadline, "loading the " + std::string(script_name(script)) + " script");
  if (!reply) return reply.status();
  if ((*reply)->type != REDIS_REPLY_STRING)
    return Status(errc::internal, "redis backend: SCRIPT LOAD answered something else than a SHA1");
  return std::string((*reply)->str, (*reply)->len);
}

Status Commands::load_all(steady::time_point deadline) {
  for (Script s : all_scripts) {
    auto sha = load(s, deadline);
    if (!sha) return sha.status();
    shas_[static_cast<std::size_t>(s)] = *sha;
  }
  return {};
}

Result<std::string> Pool::load(Script script, steady::time_point deadline) { return load_on(*this, script, deadline); }

Result<Reply> Commands::eval(Script script, std::span<const std::string_view> keys,
                             std::span<const std::string_view> args, steady::time_point deadline,
                             std::string_view step, std::string_view key) {
  Batch batch;
  batch.add_eval(sha(script), keys, args);
  for (int attempt = 0;; ++attempt) {
    Replies out = run(batch, deadline, step);
    if (!out.failure.ok()) return out.failure;
    Reply& reply = out.replies.front();
    // The server lost its script cache (restart, SCRIPT FLUSH): load, retry once.
    if (is_noscript(reply.get()) && attempt == 0) {
      if (auto loaded = load(script, deadline); !loaded) return loaded.status();
      continue;
    }
    if (reply->type == REDIS_REPLY_ERROR) return to_status(nullptr, reply.get(), step, key);
    return std::move(reply);
  }
}

}  // namespace dlock::detail::redis
