// Nodes that join the cluster as their agents register (berth server --cluster none).
//
// A server started without a cluster grows one: the agent of a node the cluster does not have
// sends the node's shape (as GPU discovery found it, or as its --declare file gives it) and
// its GPU models, and the node is added at the end of the cluster, so that the indices of the
// nodes before it never change. The server keeps each joined node's registration in its state
// and joins them again, in the order they joined, on a restart; an admin may remove one whose
// agent is gone for good (the nodes after it then move up one index).
#pragma once

#include <cstddef>
#include <string>

#include "core/cluster.h"
#include "protocol/agent_protocol.h"

namespace berth {

// The most nodes that may join one server: each holds a worker for its agent's watch.
constexpr size_t kMaxJoinedNodes = 256;

// Puts node `name` into `cluster` as `registration` gives it: its found node, else its
// declared one, with the GPU models of its GPUs the cluster does not have yet. A node of that
// name is replaced in place (its agent found other hardware: a GPU lost, MIG laid out anew;
// or other labels); else the node is added at the end. The cluster's models are then those of
// its nodes' GPUs. Returns "" when done, else what is wrong (the cluster is left as it was):
// no shape sent, neither GPUs nor CPUs, CPU ids repeated or out of range, a GPU count other
// than its UUIDs', a GPU UUID empty or repeated, a GPU model not sent or sent with another
// memory size than the other nodes', a node the cluster model refuses, or a cluster already
// of kMaxJoinedNodes nodes.
std::string JoinNode(const std::string& name, const NodeRegistration& registration,
                     Cluster* cluster);

// After a node left `cluster`: the models are those of its nodes' GPUs again.
void LeaveNode(Cluster* cluster);

}  // namespace berth
