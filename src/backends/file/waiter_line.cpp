#include "backends/file/waiter_line.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

namespace dlock::detail::file {
namespace {

std::int64_t byte_of(std::uint32_t slot) { return queue_base + static_cast<std::int64_t>(slot); }

}  // namespace

Result<std::vector<PlaceInLine>> waiters_in_line(int fd, const Line& line, std::int64_t now_ns, std::size_t most) {
  std::vector<PlaceInLine> out;
  // One probe answers the common case: nobody waits.
  auto anyone = range_locked(fd, queue_base, line.slots);
  if (!anyone) return anyone.status();
  if (!*anyone) return out;
  auto slots = read_waiter_slots(fd, line);
  if (!slots) return slots.status();
  std::vector<std::uint32_t> waiting;
  for (std::uint32_t i = 0; i < slots->size(); ++i)
    if ((*slots)[i].ticket != 0 && (*slots)[i].waiting_until > now_ns) waiting.push_back(i);
  std::sort(waiting.begin(), waiting.end(),
            [&](std::uint32_t a, std::uint32_t b) { return (*slots)[a].ticket < (*slots)[b].ticket; });
  for (std::uint32_t i : waiting) {
    auto alive = range_locked(fd, byte_of(i), 1);
    if (!alive) return alive.status();
    if (*alive) out.push_back(PlaceInLine{i, (*slots)[i]});
    if (out.size() >= most) break;
  }
  return out;
}

Result<std::optional<PlaceInLine>> first_waiter(int fd, const Line& line, std::int64_t now_ns) {
  auto all = waiters_in_line(fd, line, now_ns, 1);
  if (!all) return all.status();
  if (all->empty()) return std::optional<PlaceInLine>();
  return std::optional<PlaceInLine>(all->front());
}

Result<std::optional<Joined>> join_line(const Doorbells& bells, int fd, const Line& line, int place_fd,
                                        std::int64_t max_barging_ns, std::int64_t now_ns, bool sync) {
  auto header = read_header(fd);
  if (!header) return header.status();
  auto slots = read_waiter_slots(fd, line);
  if (!slots) return slots.status();
  auto ticket = next_ticket(*header);
  if (!ticket) return ticket.status();
  // Slots nobody is in first: a slot whose byte is still locked belongs to
  // a waiter on its way out, or one that is stopped.
  auto id = file_id(fd);
  if (!id) return id.status();
  std::vector<std::uint32_t> order(line.slots);
  for (std::uint32_t i = 0; i < line.slots; ++i) order[i] = i;
  std::stable_partition(order.begin(), order.end(), [&](std::uint32_t i) {
    return (*slots)[i].ticket == 0 || (*slots)[i].waiting_until <= now_ns;
  });
  for (std::uint32_t i : order) {
    auto taken = range_locked(fd, byte_of(i), 1);
    if (!taken) return taken.status();
    if (*taken) continue;
    // Bound before the slot names it: whoever finds us first in line can
    // ring, and a ticket nobody of ours listens for is never published.
    auto bell = open_doorbell(bells, *id, *ticket);
    if (!bell) return std::optional<Joined>();
    Joined out;
    out.doorbell = *bell;
    // Under the guard nobody else takes a slot: the byte is ours to lock.
    if (Status s = lock_byte(place_fd, F_RDLCK, byte_of(i)); !s) {
      close_doorbell(out.doorbell);
      return s;
    }
    out.place.slot = i;
    out.place.waiter = WaiterSlot{*ticket, now_ns, now_ns + waiting_lease_ns, max_barging_ns};
    header->last_ticket = out.place.waiter.ticket;
    Status s = write_waiter_slot(fd, line, i, out.place.waiter, false);
    if (s) s = write_header(fd, *header, sync);
    if (!s) {
      unlock_byte(place_fd, byte_of(i));
      close_doorbell(out.doorbell);
      return s;
    }
    return std::optional<Joined>(out);
  }
  return std::optional<Joined>();
}

Status leave_line(int fd, const Line& line, const PlaceInLine& place, bool sync) {
  auto slots = read_waiter_slots(fd, line);
  if (!slots) return slots.status();
  if ((*slots)[place.slot].ticket != place.waiter.ticket) return {};
  return write_waiter_slot(fd, line, place.slot, WaiterSlot{}, sync);
}

Status renew_place_in_line(int fd, const Line& line, PlaceInLine& place, std::int64_t now_ns) {
  auto slots = read_waiter_slots(fd, line);
  if (!slots) return slots.status();
  if ((*slots)[place.slot].ticket != place.waiter.ticket) return {};
  place.waiter.waiting_until = now_ns + waiting_lease_ns;
  return write_waiter_slot(fd, line, place.slot, place.waiter, false);
}

}  // namespace dlock::detail::file
