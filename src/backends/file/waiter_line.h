// waiter_line.h — waiters in line, in their lock file (WaiterSlot and Line
// in lock_file.h), so that a release wakes one of them: the first. A
// Mutex's waiters, a SharedMutex's writers, a Semaphore's.
//
// A waiter about to wait takes a free slot and the next ticket, read-locks
// the slot's byte through a descriptor of its own (the kernel drops it if
// the waiter dies: a dead waiter holds nobody up) and binds its doorbell
// (doorbell.h) before its ticket is written: a ticket in line always has a
// socket of its waiter's behind it. The first in line is the live slot with
// the lowest ticket.
// Every function here expects the caller to hold the file's guard.
#pragma once

#include "backends/file/doorbell.h"
#include "backends/file/lock_file.h"

#include <dlock/status.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace dlock::detail::file {

struct PlaceInLine {
  std::uint32_t slot = 0;
  WaiterSlot waiter{};
};

// The live waiters in line, first first (the first `most` of them).
Result<std::vector<PlaceInLine>> waiters_in_line(int fd, const Line& line, std::int64_t now_ns,
                                                 std::size_t most = SIZE_MAX);
// The live waiter first in line; nullopt if nobody waits in line.
Result<std::optional<PlaceInLine>> first_waiter(int fd, const Line& line, std::int64_t now_ns);

struct Joined {
  PlaceInLine place;
  Doorbell doorbell;  // bound; close_doorbell when the place is given up
};

// Joins the line: a free slot, read-locked through `place_fd` (a descriptor
// of the same file that the waiter keeps while it waits), with the next
// ticket. nullopt if every slot is taken, or if no doorbell could be bound
// for the ticket (its name held by a live socket, no /proc): the
// caller then waits out of line, woken by every release.
Result<std::optional<Joined>> join_line(const Doorbells& bells, int fd, const Line& line, int place_fd, std::int64_t max_barging_ns,
                                        std::int64_t now_ns, bool sync);

// Leaves it (granted, or given up): the slot is free again if it still
// holds `place`'s ticket.
Status leave_line(int fd, const Line& line, const PlaceInLine& place, bool sync);

// A waiter in line retried: its place counts for waiting_lease_ns more.
Status renew_place_in_line(int fd, const Line& line, PlaceInLine& place, std::int64_t now_ns);

}  // namespace dlock::detail::file
