// Ports for the servers the tests start on 127.0.0.1.
#pragma once

namespace dlock::test {

// A TCP port on 127.0.0.1 that is free now and was not given before by this
// process, picked outside the kernel's ephemeral range where it can be: a
// server stopped and started again on its port (the fault tests) would
// otherwise find it taken, now and then, by some process's outgoing
// connection made meanwhile (scripts/ports.sh picks the same way). Throws
// std::runtime_error if none is found.
int free_port();

}  // namespace dlock::test
