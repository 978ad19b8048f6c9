#include "core/node_comparison.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <utility>

namespace berth {
namespace {

std::vector<std::vector<int>> Partition(const std::vector<int>& group_of, bool skip_negative) {
  std::map<int, std::vector<int>> groups;
  for (size_t g = 0; g < group_of.size(); ++g)
    if (!skip_negative || group_of[g] >= 0) groups[group_of[g]].push_back(static_cast<int>(g));
  std::vector<std::vector<int>> out;
  for (auto& [id, members] : groups) out.push_back(std::move(members));
  std::sort(out.begin(), out.end());
  return out;
}

std::string FormatPartition(const std::vector<std::vector<int>>& groups) {
  if (groups.empty()) return "none";
  std::string out;
  for (const std::vector<int>& group : groups)
    out += (out.empty() ? "[" : " [") + FormatCpuList(group) + "]";
  return out;
}

std::vector<std::string> Words(std::string_view name) {
  std::vector<std::string> words;
  std::string word;
  for (char c : std::string(name) + "-") {
    if (c == '-' || c == ' ' || c == '_') {
      if (!word.empty() && word != "NVIDIA") words.push_back(word);
      word.clear();
    } else {
      word += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    }
  }
  return words;
}

}  // namespace

bool ModelMatches(std::string_view found, std::string_view declared) {
  const std::vector<std::string> have = Words(found);
  for (const std::string& word : Words(declared))
    if (std::find(have.begin(), have.end(), word) == have.end()) return false;
  return true;
}

std::vector<std::string> CompareNodes(const Node& found, const Node& declared) {
  std::vector<std::string> out;
  const auto count = [](size_t n, const char* what) {
    return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
  };
  if (found.gpus.size() != declared.gpus.size())
    out.push_back("found " + count(found.gpus.size(), "GPU") + ", the cluster file declares " +
                  std::to_string(declared.gpus.size()));
  if (found.sockets.size() != declared.sockets.size()) {
    out.push_back("found " + count(found.sockets.size(), "socket") +
                  " (NUMA nodes), the cluster file declares " +
                  std::to_string(declared.sockets.size()));
  } else {
    for (size_t s = 0; s < found.sockets.size(); ++s)
      if (!declared.sockets[s].cpus.empty() && found.sockets[s].cpus != declared.sockets[s].cpus)
        out.push_back("socket " + std::to_string(s) + " has CPUs " +
                      FormatCpuList(found.sockets[s].cpus) + ", the cluster file declares " +
                      FormatCpuList(declared.sockets[s].cpus));
  }
  const size_t gpus = std::min(found.gpus.size(), declared.gpus.size());
  // One sentence per kind of difference, naming all the GPUs it concerns.
  std::map<std::pair<std::string, std::string>, std::vector<int>> models, mig, sockets;
  for (size_t g = 0; g < gpus; ++g) {
    const Gpu& a = found.gpus[g];
    const Gpu& b = declared.gpus[g];
    if (!ModelMatches(a.model, b.model)) models[{a.model, b.model}].push_back(static_cast<int>(g));
    if (a.mig_enabled != b.mig_enabled)
      mig[{a.mig_enabled ? "enabled" : "disabled", b.mig_enabled ? "enabled" : "disabled"}]
          .push_back(static_cast<int>(g));
    if (found.sockets.size() == declared.sockets.size()) {
      const int sa = found.switches[a.pcie_switch].socket;
      const int sb = declared.switches[b.pcie_switch].socket;
      if (sa != sb)
        sockets[{std::to_string(sa), std::to_string(sb)}].push_back(static_cast<int>(g));
    }
  }
  const auto gpu_list = [](const std::vector<int>& gs) {
    return (gs.size() == 1 ? "GPU " : "GPUs ") + FormatCpuList(gs);
  };
  for (const auto& [pair, gs] : models)
    out.push_back(gpu_list(gs) + (gs.size() == 1 ? " is " : " are ") + pair.first +
                  ", the cluster file declares " + pair.second);
  for (const auto& [pair, gs] : mig)
    out.push_back(gpu_list(gs) + ": MIG is " + pair.first + ", the cluster file declares it " +
                  pair.second);
  for (const auto& [pair, gs] : sockets)
    out.push_back(gpu_list(gs) + (gs.size() == 1 ? " is" : " are") + " on socket " + pair.first +
                  ", the cluster file declares socket " + pair.second);
  if (found.gpus.size() == declared.gpus.size()) {
    std::vector<int> switch_a, switch_b, domain_a, domain_b;
    for (size_t g = 0; g < gpus; ++g) {
      switch_a.push_back(found.gpus[g].pcie_switch);
      switch_b.push_back(declared.gpus[g].pcie_switch);
      domain_a.push_back(found.gpus[g].nvlink_domain);
      domain_b.push_back(declared.gpus[g].nvlink_domain);
    }
    const auto pa = Partition(switch_a, false), pb = Partition(switch_b, false);
    if (pa != pb)
      out.push_back("GPUs share PCIe switches as " + FormatPartition(pa) +
                    ", the cluster file declares " + FormatPartition(pb));
    const auto da = Partition(domain_a, true), db = Partition(domain_b, true);
    if (da != db)
      out.push_back("NVLink domains are " + FormatPartition(da) + ", the cluster file declares " +
                    FormatPartition(db));
  }
  return out;
}

}  // namespace berth
