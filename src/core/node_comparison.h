// How a node as found on its host differs from the node the cluster declares: the agent's
// topology condition and the server's check of a registration against the cluster file both
// ask this. Pure functions over the cluster model.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/cluster.h"

namespace berth {

// True when a model declared as `declared` ("A100-80GB") can be the discovered `found`
// ("A100-SXM4-80GB"): every dash-separated word of the declared name, ignoring case, is one
// of the found name's.
bool ModelMatches(std::string_view found, std::string_view declared);

// The differences between the discovered Node and the one the cluster file declares for this
// host, as sentences for a node condition (empty: they agree): GPU count, models, MIG mode,
// sockets and their CPUs, the GPUs' sockets, their PCIe switch grouping, NVLink domains.
// Groupings are compared as partitions of the GPUs, not by switch or domain number.
std::vector<std::string> CompareNodes(const Node& discovered, const Node& declared);

}  // namespace berth
