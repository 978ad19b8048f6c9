// Helpers for the node agent's tests: the captured outputs under tests/data/agent/.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "agent/agent_text.h"
#include "agent/host_topology.h"

namespace berth {

inline std::string AgentData(const std::string& name) {
  return std::string(BERTH_SOURCE_DIR) + "/tests/data/agent/" + name;
}

// The text of a capture under tests/data/agent/.
inline std::string Capture(const std::string& name) {
  const std::optional<std::string> text = agent_text::ReadSmallFile(AgentData(name));
  EXPECT_TRUE(text) << "missing capture " << name;
  return text.value_or("");
}

// The DGX A100's host of the dgx-a100 captures: 2 sockets of 64 cores with SMT, 1 TiB each
// (NPS1).
inline HostTopology DgxHost() {
  HostTopology host;
  const std::vector<int> s0 = ParseCpuList("0-63,128-191", "s0");
  const std::vector<int> s1 = ParseCpuList("64-127,192-255", "s1");
  host.cpus = ParseCpuList("0-255", "all");
  host.packages = {{0, s0}, {1, s1}};
  host.numa_nodes = {{0, s0, 1048576}, {1, s1, 1048576}};
  return host;
}

}  // namespace berth
