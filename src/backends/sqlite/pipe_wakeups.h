// pipe_wakeups.h — wake-ups between SQLite clients on one host: a named
// pipe per client.
//
// Each client makes <database>.wake/<address> (a FIFO, 0600, in a 0700
// directory next to the database file; address = 128 random bits in hex)
// and one thread that reads it and delivers what arrives to the client's
// Mailbox. A release writes "owner\nkind\nname\0" to the pipe of each
// waiter it wakes (one write, atomic: shorter than PIPE_BUF). A pipe
// whose reader is gone (its client died) is removed by the first writer
// that finds it so. Nothing polls: a waiter sleeps until its pipe has a
// message for it (or core's periodic re-check).
//
// Only their owner controls them: the directory must not be a symlink,
// must belong to this user (or root) and be writable by nobody else, and
// every pipe is reached through the directory's descriptor. A release
// writes only to what is a FIFO of this user (or root) both before and
// after it opens it, never through a symlink: a file planted under a
// waiter's name is left alone.
#pragma once

#include "backends/sql/wakeups.h"

#include <memory>
#include <string>
#include <thread>

namespace dlock::detail::sqlite {

class PipeWakeups final : public sql::Wakeups {
 public:
  // Makes the directory (if missing), this client's pipe and its reader.
  static Result<std::shared_ptr<PipeWakeups>> open(const std::string& database_path,
                                                   std::shared_ptr<sql::Mailbox> mailbox);
  ~PipeWakeups() override;
  PipeWakeups(const PipeWakeups&) = delete;
  PipeWakeups& operator=(const PipeWakeups&) = delete;

  std::string address() const override { return address_; }
  void wake(std::string_view address, const sql::WakeTarget& target) override;

 private:
  PipeWakeups(int dir_fd, std::string address, std::shared_ptr<sql::Mailbox> mailbox, int pipe_fd, int stop_fd);
  void read_loop();

  const int dir_fd_;  // <database>.wake, opened without following a symlink
  const std::string address_;
  std::shared_ptr<sql::Mailbox> mailbox_;
  int pipe_fd_ = -1;  // our FIFO, opened read-write (never sees end of file)
  int stop_fd_ = -1;  // eventfd: written once to stop the reader
  std::jthread reader_;
};

}  // namespace dlock::detail::sqlite
