// quorum_backend.h — a Backend made of N independent backends: its
// LockDriver fans each step out to the N nodes' drivers and decides by
// majority (dlock/quorum.h says what that gives and what it does not).
//
// Being a Backend, it gets core's acquire loop, reentrancy, lease keeper,
// Mutex, MultiLock, the async API and the CLI unchanged; only the remote
// steps are quorum logic.
#pragma once

#include <dlock/quorum.h>

#include "core/driver.h"
#include "core/url.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace dlock::detail {

class ClientState;

// One store of a quorum, before it is opened.
struct QuorumNode {
  // For messages: the node's URL with its password hidden.
  std::string label;
  // Who the node is, for refusing a node given twice (src/quorum_connect.cpp).
  std::string identity;
  // Opens the node's backend (again, after a failure). Empty when `client`
  // is given: the node is that client's backend.
  std::function<Result<std::unique_ptr<Backend>>()> open;
  std::shared_ptr<ClientState> client;
};

// invalid_argument naming the field and the rule.
Status validate(const QuorumOptions& options);

// The quorum over `nodes`: refuses fewer than 3 or a node given twice,
// opens the nodes in parallel (each within options.node_timeout) and fails
// with unavailable if fewer than a majority open.
Result<std::unique_ptr<Backend>> open_quorum_backend(std::vector<QuorumNode> nodes, const QuorumOptions& quorum,
                                                     const ClientOptions& options);

}  // namespace dlock::detail
