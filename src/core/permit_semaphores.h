// permit_semaphores.h — Semaphore on stores that lease each permit
// (Backend::supports_permits): a permit is a LockKind::permit grant taken
// through the one acquire loop and kept alive by the client's lease keeper,
// in the same renewal batches as its locks.
#pragma once

#include "core/semaphore_driver.h"

#include <memory>

namespace dlock::detail {

class ClientState;

// The SemaphoreDriver ClientState::semaphores() hands out for such a store.
std::unique_ptr<SemaphoreDriver> make_permit_semaphores(ClientState& client);

}  // namespace dlock::detail
