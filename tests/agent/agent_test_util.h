// Helpers for the node agent's tests: the captured outputs under tests/data/agent/.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "agent/agent_text.h"

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

}  // namespace berth
