// owner_id.h — who holds a lock: 128 random bits per client + a thread ordinal.
#pragma once

#include <dlock/status.h>

#include <cstdint>
#include <string>

namespace dlock::detail {

// 32 lower-case hex digits from getrandom(2) (a CSPRNG): unguessable, so no
// other client can release or renew our locks by forging the owner.
Result<std::string> random_client_id();

// 128 random bits (as random_client_id) in a UUID's text form,
// 8-4-4-4-12 lower-case hex digits — the form java.util.UUID prints, which
// Curator's recipes use in node names.
Result<std::string> random_uuid();

// A small number unique to the calling thread within this process, stable
// for the thread's life (never reused while the process runs).
std::uint64_t thread_ordinal() noexcept;

// The owner of a lock taken by the calling thread: "<client id>-<ordinal>".
std::string owner_for_this_thread(const std::string& client_id);

// An owner of its own, in the same form, for a hold that belongs to no
// thread (dlock::Hold, the async API): its ordinal is never a thread's or
// another such hold's.
std::string owner_of_its_own(const std::string& client_id);

// For people: the first 8 hex digits and an ellipsis, never the full id.
std::string short_owner(std::string_view owner);

}  // namespace dlock::detail
