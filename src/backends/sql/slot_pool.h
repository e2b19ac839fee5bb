// slot_pool.h — the connections of one client of a database server
// (postgres://, mysql://): up to N, opened when first needed, replaced when
// one breaks, each used by one call at a time.
#pragma once

#include "backends/sql/connection.h"
#include "core/driver.h"
#include "core/events.h"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

namespace dlock::detail::sql {

// A connection a SlotPool keeps. It sends without waiting: the batches it
// sent that way wait in a line for their results, which are read (each to
// its Answer) before the result of anything sent after them.
class PooledConnection : public Connection {
 public:
  // The deadline of the call that uses the connection now.
  virtual void set_deadline(steady::time_point deadline) noexcept = 0;
  // A call failed in a way that leaves the connection unusable (I/O error,
  // deadline passed with a reply outstanding): it must be replaced.
  virtual bool broken() const noexcept = 0;

  Result<std::vector<Rows>> run(std::span<const Call> calls) final;
  bool sends_without_waiting() const noexcept final { return true; }
  void send(std::span<const Call> calls, Answer answer) final;
  // Reads the results of every batch sent without waiting (a failure for
  // each one if the connection fails first).
  void read_unanswered();
  // How many batches were sent without waiting, and how many of those
  // have had their results read (the pool's record of who waits for what).
  std::uint64_t sent_count() const noexcept { return sent_; }
  std::uint64_t answered_count() const noexcept { return answered_; }
  // Runs after each answer is read (the pool's: a thread waiting for this
  // connection only until that answer is read may go elsewhere now).
  void on_answered(std::function<void()> hook) { answered_hook_ = std::move(hook); }

 protected:
  // Writes one batch, reading nothing.
  virtual Status write(std::span<const Call> calls) = 0;
  // Reads the results of the oldest batch written and not read yet, whose
  // statements were `statements` (a failure: the first error; the server
  // skipped the rest). Leaves a transaction the failure left open as it is.
  virtual Result<std::vector<Rows>> read(std::span<const Stmt> statements) = 0;
  // Whether a batch may be written while earlier ones' results are unread
  // (PostgreSQL's pipeline); if not, they are read first.
  virtual bool pipelines() const noexcept = 0;
  // Whether the last batch read failed only because an earlier batch's
  // failure had left its transaction aborted (then it changed nothing).
  virtual bool failed_in_aborted_transaction() const noexcept { return false; }
  // Ends a transaction a failed batch left open (rollback), if any.
  virtual void end_failed_transaction() = 0;

  // For a connection's own calls that send without waiting (session mode's
  // unlock): once something is written, `read` reads its results and
  // answers them (whether they succeeded). read_unanswered() runs it in
  // turn; every call of the connection reads what is unanswered first.
  void sent_unanswered(std::function<bool()> read);

 private:
  // Reads the oldest unanswered batch and answers it (`failed` set if it failed).
  void answer_oldest(bool& failed);
  // Writes `calls` and reads their results (a transaction a failure left
  // open ended).
  Result<std::vector<Rows>> round_trip(std::span<const Call> calls, std::span<const Stmt> statements);

  std::vector<std::function<bool()>> unanswered_;  // readers of what was sent, oldest first
  std::uint64_t sent_ = 0, answered_ = 0;
  std::function<void()> answered_hook_;
};

class SlotPool final : public Pool {
 public:
  // Opens a connection by `deadline` (unavailable if it cannot).
  using Open = std::function<Result<std::unique_ptr<PooledConnection>>(steady::time_point deadline)>;

  // `backend` ("postgres") names the connections in errors and events.
  SlotPool(std::string backend, Open open, int size, Events& events);

  // A free connection (opened or replaced if need be), or unavailable if
  // every one stays busy, or none can be opened, before `deadline`.
  // A thread that sent a batch without waiting takes that batch's
  // connection next, until its results have been read (by whoever used the
  // connection since): so whatever the thread does next runs after it.
  Result<Lease> take(std::string_view step, steady::time_point deadline) override;
  void flush(steady::time_point deadline) override;

 private:
  struct Slot {
    std::unique_ptr<PooledConnection> conn;
    bool busy = false;             // guarded by mu_
    std::uint64_t generation = 0;  // guarded by mu_: bumped when conn is replaced
    std::uint64_t answered = 0;    // guarded by mu_: conn->answered_count() when last given back
    std::uint64_t sent = 0;        // guarded by mu_: conn->sent_count() when last given back
  };

  // A batch a thread sent without waiting: on which slot (and which of
  // that slot's connections), as the how-many-th sent there.
  struct Owed {
    std::size_t slot;
    std::uint64_t generation;
    std::uint64_t sent;
  };

  void give_back(Connection* c) noexcept override;
  void release(std::size_t index);
  // Whether `owed`'s answer is still unread (mu_ held).
  bool unread(const Owed& owed) const;

  const std::string backend_;
  const Open open_;
  Events& events_;
  std::mutex mu_;
  std::condition_variable free_;
  std::vector<Slot> slots_;  // size fixed; each slot's conn touched only by who has it busy
  std::unordered_map<std::thread::id, Owed> owed_;  // guarded by mu_: by the thread that sent it
};

}  // namespace dlock::detail::sql
