// A node's value for a label key, shared by node-selector and topology-spread so that both read
// topology keys the same way: "node" is the node's name, "rack" its rack, anything else (zone
// included) a label.
#pragma once

#include <string>

#include "core/cluster.h"

namespace berth {

// False when the node has no value for `key` (no such label, or no rack declared).
inline bool NodeLabel(const Node& node, const std::string& key, std::string* value) {
  if (key == "node") {
    *value = node.name;
    return true;
  }
  if (key == "rack" && !node.rack.empty()) {
    *value = node.rack;
    return true;
  }
  auto it = node.labels.find(key);
  if (it == node.labels.end()) return false;
  *value = it->second;
  return true;
}

}  // namespace berth
