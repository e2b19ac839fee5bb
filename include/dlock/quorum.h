// dlock/quorum.h — one lock over N independent stores: held while a
// majority of them hold it (Redlock, generalised to any lease-based backend).
//
// A quorum client is a Client like any other: its Mutex and MultiLock (the
// only primitives it has) take a lock on every node in parallel and hold it
// when a majority granted it in time. Make one from N >= 3 clients or URLs:
//
//   auto locks = dlock::connect_quorum({"redis://10.0.0.1:6379", "redis://10.0.0.2:6379",
//                                       "redis://10.0.0.3:6379"});
//   auto locks = dlock::connect("redlock://10.0.0.1:6379,10.0.0.2:6379,10.0.0.3:6379");   // the same
//
// How a lock is taken: the request goes to every node at once, each answer
// waited for at most QuorumOptions::node_timeout. It is granted when a
// majority (N/2 + 1) granted it and time is left: validity = the lease as
// the majority's nodes keep it − the time the request took − drift, where
// drift = lease × drift_factor + 2 ms (clocks of the nodes running fast, the
// clock's resolution). Otherwise the grants that came back are released on
// every node and the attempt counts as busy: the acquire loop retries after
// a random (jittered, growing) delay until the caller's deadline. An answer
// that comes after node_timeout is released by itself. A lock is renewed on
// every node that granted it; it is lost when fewer than a majority renew it
// before its validity ends, or at once when so many nodes refused a renewal
// that a majority can no longer hold it. Waiters poll (no notification
// across nodes). If a majority of the nodes cannot be reached, calls fail
// with errc::unavailable within one node_timeout (plus the release of any
// partial grant: another node_timeout at most).
//
// What it does NOT give:
//   - No fencing token safe across node restarts or clock steps. token()
//     is the largest of the tokens the granting nodes issued. On redlock://
//     each node issues its token from its own clock in microseconds (the
//     URL sets the nodes' token_retention=0, so no node counts up from an
//     old token): any two majorities share a node, which granted the later
//     lock only after the earlier one was released or had expired there,
//     so the later token is larger — as long as the nodes' clocks agree to
//     within the time a lock is held, the bounded-drift assumption the
//     validity rests on too. A node whose clock steps back can issue a
//     token below an earlier holder's. A node restarted without its data
//     inside a lease lets a second client in while the first still holds
//     (below): the second's token is larger, so a resource that keeps the
//     highest token refuses the first's later writes, but both may write
//     before that. Over other nodes (connect_quorum), tokens are whatever
//     each node issues: counters on different nodes are not comparable, so
//     the largest is not even increasing in general (after a node missed
//     some grants). Protect a resource that must refuse stale writers with
//     a consensus store (zk://) instead.
//   - Safety rests on the nodes keeping their leases. A node that restarts
//     empty inside a lease lets a second client win a majority while the
//     first still holds it (tests/fault/quorum_fault_test.cpp shows it).
//     Operational rule: a restarted node stays down for longer than the
//     longest lease (plus drift), or runs with persistence that loses no
//     write (Redis: appendonly yes, appendfsync always).
//   - Bounded clock drift is assumed: a node whose clock jumps forward
//     expires leases early, like a restart.
//   - Not fair (no queue across nodes): MutexOptions::fair is refused.
//
// Thread-safety: as Client. Each node has one thread of the quorum client
// that talks to it, so calls to one node run in order (the calling thread
// makes one node's call itself when that node's thread is idle). Those
// threads end with the client.
#pragma once

#include <dlock/client.h>
#include <dlock/options.h>
#include <dlock/status.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace dlock {

struct QuorumOptions {
  // How long one node's answer is waited for, per request (acquire, renew,
  // release). Much shorter than the lease: a dead or stopped node costs
  // this much per request, and a lease must satisfy
  //   lease − drift − node_timeout > 0
  // (refused with invalid_argument otherwise). Must be > 0. URL: node_timeout=200ms.
  std::chrono::milliseconds node_timeout{200};
  // Share of the lease allowed for the nodes' clocks running faster than
  // this process's; drift = lease × drift_factor + 2 ms is taken off every
  // validity. Must be in [0, 1). 0.01 is what Redlock's description uses.
  // URL: drift_factor=0.01.
  double drift_factor = 0.01;
};

// A quorum over `nodes` (N >= 3 distinct clients of lease-based stores; an
// even N is allowed but tolerates no more failures than N - 1). The clients
// stay usable on their own and are kept alive by the quorum client.
// `options.op_timeout` bounds a whole call of the quorum client; each
// node's answer is bounded by quorum.node_timeout (a node client's own
// op_timeout bounds how long its thread may stay busy with one call).
// Throws Error(invalid_argument) for fewer than 3 nodes, a node given twice
// (the same client, or two clients of the same store after normalising
// host names and ports), a node whose store keeps locks by session rather
// than lease (zk://), or bad options.
std::shared_ptr<Client> connect_quorum(std::vector<std::shared_ptr<Client>> nodes, QuorumOptions quorum = {},
                                       ClientOptions options = {});

// A quorum over the stores at `urls`, each opened with op_timeout =
// quorum.node_timeout (so no call to a node outlasts it). Connecting tries
// the nodes that failed to open again while fewer than a majority are open,
// until options.op_timeout, and then fails with unavailable; a node
// not open then is opened again when it is next needed (at most once a
// second). Errors as above, and as connect() for each URL.
std::shared_ptr<Client> connect_quorum(const std::vector<std::string>& urls, QuorumOptions quorum = {},
                                       ClientOptions options = {});

// The same, returning the error instead of throwing.
Result<std::shared_ptr<Client>> connect_quorum_checked(std::vector<std::shared_ptr<Client>> nodes,
                                                       QuorumOptions quorum = {}, ClientOptions options = {});
Result<std::shared_ptr<Client>> connect_quorum_checked(const std::vector<std::string>& urls,
                                                       QuorumOptions quorum = {}, ClientOptions options = {});

}  // namespace dlock
