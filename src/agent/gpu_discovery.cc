#include "agent/gpu_discovery.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <numeric>
#include <set>

#include "agent/agent_text.h"
#include "config/config_error.h"
#include "config/file_text.h"
#include "core/mig.h"

namespace berth {
namespace {

using agent_text::At;
using agent_text::Split;
using agent_text::ToInt;
using agent_text::Trim;

constexpr size_t kMaxTextBytes = 1 << 20;
constexpr size_t kMaxLines = 4096;
constexpr size_t kMaxLineBytes = 16384;
constexpr int64_t kMaxMemoryMiB = int64_t{1} << 30;  // a petabyte: far above any GPU
constexpr int kMaxNvLinks = 1000;

std::vector<std::string_view> Lines(std::string_view text, const std::string& source) {
  return agent_text::SplitLines(text, source, kMaxTextBytes, kMaxLines, kMaxLineBytes);
}

bool Bracketed(std::string_view field) {
  return field.size() >= 2 && field.front() == '[' && field.back() == ']';
}

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

std::string CheckedName(std::string_view text, const std::string& where) {
  const std::string problem = NameProblem(text, "the field");
  if (!problem.empty()) throw ConfigError(where + problem);
  return std::string(text);
}

// Union-find over at most kMaxGpus elements.
class Groups {
 public:
  explicit Groups(size_t n) : parent_(n) { std::iota(parent_.begin(), parent_.end(), 0); }
  int Find(int a) { return parent_[a] == a ? a : parent_[a] = Find(parent_[a]); }
  void Join(int a, int b) {
    a = Find(a);
    b = Find(b);
    if (a != b) parent_[std::max(a, b)] = std::min(a, b);  // the root is the lowest member
  }

 private:
  std::vector<int> parent_;
};

bool SharesPcieSwitch(const Link& link) {
  return link.kind == LinkKind::kPix || link.kind == LinkKind::kPxb;
}

Link ParseLink(std::string_view cell, const std::string& where) {
  if (cell == "X") return {LinkKind::kSelf, 0};
  if (cell == "PIX") return {LinkKind::kPix, 0};
  if (cell == "PXB") return {LinkKind::kPxb, 0};
  if (cell == "PHB") return {LinkKind::kPhb, 0};
  if (cell == "NODE") return {LinkKind::kNode, 0};
  if (cell == "SYS" || cell == "SOC") return {LinkKind::kSys, 0};  // SOC: drivers before 384
  if (StartsWith(cell, "NV"))
    if (const std::optional<int64_t> n = ToInt(cell.substr(2), 1, kMaxNvLinks))
      return {LinkKind::kNvLink, static_cast<int>(*n)};
  throw ConfigError(where + "unknown link " + Quoted(cell) +
                    "; expected X, NV#, PIX, PXB, PHB, NODE or SYS");
}

// `text` without terminal escape sequences (ESC '[' ... final letter). One never spans lines: an
// unfinished one ends at the line's end, which is kept so that errors name the right line.
std::string WithoutEscapes(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\x1b' && i + 1 < text.size() && text[i + 1] == '[') {
      i += 2;
      while (i < text.size() && text[i] != '\n' &&
             !std::isalpha(static_cast<unsigned char>(text[i])))
        ++i;
      if (i < text.size() && text[i] == '\n') out += '\n';
      continue;
    }
    out += text[i];
  }
  return out;
}

}  // namespace

GpuQuery ParseGpuQuery(std::string_view text, const std::string& source) {
  GpuQuery query;
  std::set<int> indices;
  const std::vector<std::string_view> lines = Lines(text, source);
  for (size_t n = 0; n < lines.size(); ++n) {
    const std::string at = At(source, n + 1);
    const std::string_view line = Trim(lines[n]);
    if (line.empty()) continue;
    // nvidia-smi prints this instead of a row for a GPU it cannot open at all.
    constexpr std::string_view kLost = "Unable to determine the device handle for GPU";
    if (StartsWith(line, kLost)) {
      query.conditions.push_back("a GPU is lost: " + CheckedName(line, at) +
                                 "; reset it (nvidia-smi -r) or reboot the host");
      continue;
    }
    if (StartsWith(line, "No devices were found")) continue;
    const std::vector<std::string_view> fields = Split(line, ',');
    if (fields.size() != 7)
      throw ConfigError(at + "expected 7 comma-separated fields (" + kGpuQueryFields + "), got " +
                        std::to_string(fields.size()) + "; run `" + kGpuQueryCommand + "`");
    std::vector<std::string_view> f;
    for (std::string_view field : fields) f.push_back(Trim(field));
    if (f[0] == "index") continue;  // a header: run without noheader
    GpuRecord gpu;
    const auto problem = [&](std::string_view field) {
      if (gpu.problem.empty()) gpu.problem = CheckedName(field, at);
    };
    if (Bracketed(f[0])) {
      problem(f[0]);
      gpu.index = static_cast<int>(query.gpus.size());
    } else if (const std::optional<int64_t> index = ToInt(f[0], 0, kMaxGpus - 1)) {
      gpu.index = static_cast<int>(*index);
    } else {
      throw ConfigError(at + "index: expected a GPU index from 0 to " +
                        std::to_string(kMaxGpus - 1) + ", got " + Quoted(f[0]));
    }
    if (!indices.insert(gpu.index).second)
      throw ConfigError(at + "index: GPU " + std::to_string(gpu.index) +
                        " is listed twice; give the output of one run");
    if (Bracketed(f[1])) {
      problem(f[1]);
    } else if (StartsWith(f[1], "GPU-")) {
      gpu.uuid = CheckedName(f[1], at + "uuid: ");
    } else {
      throw ConfigError(at + "uuid: expected \"GPU-...\", got " + Quoted(f[1]));
    }
    if (Bracketed(f[2]))
      problem(f[2]);
    else
      gpu.name = CheckedName(f[2], at + "name: ");
    if (Bracketed(f[3])) {
      problem(f[3]);
    } else if (const std::optional<int64_t> mib = ToInt(f[3], 0, kMaxMemoryMiB)) {
      gpu.memory_mib = *mib;
    } else {
      throw ConfigError(at + "memory.total: expected a number of MiB, got " + Quoted(f[3]) +
                        "; run with --format=csv,noheader,nounits");
    }
    if (Bracketed(f[4]))
      problem(f[4]);
    else
      gpu.bus_id = CheckedName(f[4], at + "pci.bus_id: ");
    MigMode* modes[] = {&gpu.mig_current, &gpu.mig_pending};
    for (int m = 0; m < 2; ++m) {
      const std::string_view mode = f[5 + m];
      if (mode == "Enabled") {
        *modes[m] = MigMode::kEnabled;
      } else if (mode == "Disabled") {
        *modes[m] = MigMode::kDisabled;
      } else if (mode == "[N/A]" || mode == "[Not Supported]") {
        *modes[m] = MigMode::kNotSupported;
      } else if (Bracketed(mode)) {
        problem(mode);
      } else {
        throw ConfigError(at + (m == 0 ? "mig.mode.current" : "mig.mode.pending") +
                          ": expected Enabled, Disabled or [N/A], got " + Quoted(mode));
      }
    }
    // A name or UUID of "[N/A]" alone, with the rest readable, is still a lost GPU: berth
    // cannot address it.
    if (!gpu.problem.empty()) {
      query.conditions.push_back(
          "GPU " + std::to_string(gpu.index) + (gpu.bus_id.empty() ? "" : " (" + gpu.bus_id + ")") +
          ": nvidia-smi reports " + gpu.problem +
          "; it fell off the bus or the driver lost it, and berth places nothing on it; reset "
          "it (nvidia-smi -r) or reboot the host");
    } else if (gpu.mig_pending != gpu.mig_current) {
      const auto name = [](MigMode mode) {
        return mode == MigMode::kEnabled ? "Enabled" : "Disabled";
      };
      query.conditions.push_back("GPU " + std::to_string(gpu.index) +
                                 ": MIG pending reboot: its MIG mode is " + name(gpu.mig_current) +
                                 " now and " + name(gpu.mig_pending) +
                                 " after a GPU reset or reboot; berth uses it as " +
                                 name(gpu.mig_current) + " until then");
    }
    query.gpus.push_back(std::move(gpu));
  }
  std::sort(query.gpus.begin(), query.gpus.end(),
            [](const GpuRecord& a, const GpuRecord& b) { return a.index < b.index; });
  return query;
}

GpuList ParseGpuList(std::string_view text, const std::string& source) {
  GpuList list;
  int gpu = -1;
  const std::vector<std::string_view> lines = Lines(text, source);
  for (size_t n = 0; n < lines.size(); ++n) {
    const std::string at = At(source, n + 1);
    const std::string_view line = Trim(lines[n]);
    if (line.empty() || StartsWith(line, "No devices were found") ||
        StartsWith(line, "Unable to determine"))
      continue;
    const size_t open = line.find("(UUID: ");
    const size_t close = line.rfind(')');
    if (open == std::string_view::npos || close == std::string_view::npos || close < open)
      throw ConfigError(at +
                        "expected \"GPU N: NAME (UUID: GPU-...)\" or \"MIG PROFILE Device "
                        "N: (UUID: MIG-...)\", got " +
                        Quoted(line) + "; run `" + kGpuListCommand + "`");
    const std::string uuid = CheckedName(Trim(line.substr(open + 7, close - open - 7)), at);
    if (StartsWith(line, "GPU ")) {
      const size_t colon = line.find(':');
      const std::optional<int64_t> index = ToInt(
          Trim(line.substr(4, colon == std::string_view::npos ? 0 : colon - 4)), 0, kMaxGpus - 1);
      if (!index)
        throw ConfigError(at + "expected a GPU index from 0 to " + std::to_string(kMaxGpus - 1) +
                          " after \"GPU\", in " + Quoted(line));
      gpu = static_cast<int>(*index);
      if (list.gpu_uuids.size() <= static_cast<size_t>(gpu)) list.gpu_uuids.resize(gpu + 1);
      list.gpu_uuids[gpu] = uuid;
      continue;
    }
    if (!StartsWith(line, "MIG "))
      throw ConfigError(at + "expected a line starting \"GPU\" or \"MIG\", got " + Quoted(line));
    if (gpu < 0) throw ConfigError(at + "a MIG device before any GPU line");
    // "MIG 3g.40gb     Device  0: (UUID: ...)"
    const std::string_view head = line.substr(4, open - 4);
    const size_t device_at = head.find("Device");
    const size_t colon = head.find(':', device_at);
    const std::optional<int64_t> device =
        device_at == std::string_view::npos || colon == std::string_view::npos
            ? std::nullopt
            : ToInt(Trim(head.substr(device_at + 6, colon - device_at - 6)), 0, 63);
    if (!device)
      throw ConfigError(at + "expected \"MIG PROFILE Device N: (UUID: ...)\", got " + Quoted(line));
    if (list.mig_devices.size() >= static_cast<size_t>(kMaxGpus) * 8)
      throw ConfigError(at + "more MIG devices than " + std::to_string(kMaxGpus) +
                        " GPUs can hold");
    list.mig_devices.push_back(MigDevice{gpu, static_cast<int>(*device),
                                         CheckedName(Trim(head.substr(0, device_at)), at), uuid});
  }
  return list;
}

GpuTopology ParseTopology(std::string_view raw, const std::string& source) {
  const std::string text = WithoutEscapes(raw);
  const std::vector<std::string_view> lines = Lines(text, source);
  size_t n = 0;
  while (n < lines.size() && Trim(lines[n]).empty()) ++n;
  if (n == lines.size())
    throw ConfigError(At(source, 1) + "empty; run `" + std::string(kTopologyCommand) + "`");
  const size_t header = n;
  GpuTopology topo;
  // The header: "", GPU0..GPUn, NIC names, then the affinity columns' names.
  enum class Extra { kCpuAffinity, kNumaAffinity, kGpuNumaId };
  std::vector<Extra> extras;
  {
    const std::string at = At(source, n + 1);
    const std::vector<std::string_view> cells = Split(lines[n], '\t');
    if (!Trim(cells[0]).empty())
      throw ConfigError(at + "expected the header row (a tab, then GPU0, GPU1, ...), got " +
                        Quoted(lines[n]) + "; run `" + kTopologyCommand + "`");
    for (size_t c = 1; c < cells.size(); ++c) {
      const std::string_view cell = Trim(cells[c]);
      if (cell.empty()) continue;
      if (cell == "CPU Affinity") {
        extras.push_back(Extra::kCpuAffinity);
      } else if (cell == "NUMA Affinity") {
        extras.push_back(Extra::kNumaAffinity);
      } else if (cell == "GPU NUMA ID") {
        extras.push_back(Extra::kGpuNumaId);
      } else if (!extras.empty()) {
        throw ConfigError(at + "column " + Quoted(cell) + " after the affinity columns");
      } else if (StartsWith(cell, "GPU") && ToInt(cell.substr(3), 0, kMaxGpus - 1)) {
        if (!topo.nics.empty() || *ToInt(cell.substr(3), 0, kMaxGpus) != topo.gpu_count)
          throw ConfigError(at + "column " + Quoted(cell) + " out of order; expected GPU" +
                            std::to_string(topo.gpu_count));
        ++topo.gpu_count;
      } else if (StartsWith(cell, "GPU")) {
        throw ConfigError(at + "column " + Quoted(cell) + ": more than " +
                          std::to_string(kMaxGpus) + " GPUs or not a GPU column");
      } else {
        if (topo.nics.size() >= static_cast<size_t>(kMaxNics))
          throw ConfigError(at + "more than " + std::to_string(kMaxNics) + " NIC columns");
        topo.nics.push_back(CheckedName(cell, at));
      }
    }
    if (topo.gpu_count == 0)
      throw ConfigError(at + "no GPU0 column; run `" + std::string(kTopologyCommand) + "`");
  }
  const size_t gpus = static_cast<size_t>(topo.gpu_count);
  topo.links.assign(gpus, {});
  topo.nic_links.assign(gpus, {});
  topo.cpus.assign(gpus, {});
  topo.numa.assign(gpus, -1);
  size_t rows = 0;
  for (++n; n < lines.size(); ++n) {
    const std::string at = At(source, n + 1);
    const std::string_view line = Trim(lines[n]);
    if (line.empty() || StartsWith(line, "Legend")) break;
    const std::vector<std::string_view> cells = Split(lines[n], '\t');
    const std::string_view label = Trim(cells[0]);
    if (!StartsWith(label, "GPU") || !ToInt(label.substr(3), 0, kMaxGpus - 1))
      continue;  // a NIC's row: its cells repeat the GPU rows' NIC columns
    if (label != "GPU" + std::to_string(rows))
      throw ConfigError(at + "row " + Quoted(label) + " out of order; expected GPU" +
                        std::to_string(rows));
    if (rows == gpus)
      throw ConfigError(at + "row " + Quoted(label) + " has no column; the header lists " +
                        std::to_string(gpus) + " GPUs");
    const size_t links = gpus + topo.nics.size();
    if (cells.size() < 1 + links)
      throw ConfigError(at + "expected " + std::to_string(links) + " link cells, got " +
                        std::to_string(cells.size() - 1));
    for (size_t c = 0; c < links; ++c) {
      const Link link =
          ParseLink(Trim(cells[1 + c]), at + "column " + std::to_string(c + 2) + ": ");
      if ((link.kind == LinkKind::kSelf) != (c == rows))
        throw ConfigError(
            at +
            (c == rows ? "expected X on the diagonal, got " : "X off the diagonal, in column ") +
            (c == rows ? Quoted(Trim(cells[1 + c])) : std::to_string(c + 2)));
      (c < gpus ? topo.links[rows] : topo.nic_links[rows]).push_back(link);
    }
    // Affinity values in the header's order. Some drivers print an extra tab after NUMA
    // Affinity, so empty cells are skipped rather than matched by position.
    std::vector<std::string_view> values;
    for (size_t c = 1 + links; c < cells.size(); ++c)
      if (!Trim(cells[c]).empty()) values.push_back(Trim(cells[c]));
    if (values.size() > extras.size())
      throw ConfigError(at + "more cells than the header has columns");
    for (size_t v = 0; v < values.size(); ++v) {
      if (extras[v] == Extra::kCpuAffinity && values[v] != "N/A") {
        topo.cpus[rows] = ParseCpuList(values[v], at + "CPU Affinity");
      } else if (extras[v] == Extra::kNumaAffinity && values[v] != "N/A") {
        const std::vector<int> nodes = ParseCpuList(values[v], at + "NUMA Affinity");
        if (nodes.empty() || nodes.front() >= kMaxNumaNodes)
          throw ConfigError(at + "NUMA Affinity: expected a NUMA node below " +
                            std::to_string(kMaxNumaNodes) + ", got " + Quoted(values[v]));
        topo.numa[rows] = nodes.front();
      }
    }
    ++rows;
  }
  if (rows != gpus)
    throw ConfigError(At(source, header + 1) + "GPU" + std::to_string(rows) +
                      " has a column but no row; give the whole output of `" + kTopologyCommand +
                      "`");
  return topo;
}

std::string ModelName(std::string_view name) {
  name = Trim(name);
  for (std::string_view prefix : {"NVIDIA ", "Tesla "})
    if (StartsWith(name, prefix)) name.remove_prefix(prefix.size());
  std::string out;
  for (char c : Trim(name)) {
    const bool space = c == ' ' || c == '\t';
    if (!space)
      out += c;
    else if (!out.empty() && out.back() != '-')
      out += '-';
  }
  return out;
}

namespace {

// A MIG-enabled GPU's slices can only run in the instances the host has: its layout becomes
// theirs, each pinned at its start slot, so that every slice berth places names one instance.
// Where the lister did not say an instance's start (`nvidia-smi -L`), berth lays it out itself
// around those it did say, and pairs the starts it chose, lowest first, with such instances of
// the same profile in listed order: instances of one profile are alike, so any one-to-one
// pairing isolates the slices, and the same listing gives the same pairing after a restart.
void PinMigInstances(DiscoveredNode* out) {
  for (size_t g = 0; g < out->node.gpus.size(); ++g) {
    Gpu& gpu = out->node.gpus[g];
    if (!gpu.mig_enabled) continue;
    const std::string name = "GPU " + std::to_string(out->host_index[g]);
    const auto model = std::find_if(out->models.begin(), out->models.end(),
                                    [&](const GpuModel& m) { return m.name == gpu.model; });
    const std::vector<MigProfile>& profiles = model->mig_profiles;
    std::vector<MigDevice*> devices;
    for (MigDevice& d : out->mig_devices)
      if (d.gpu == static_cast<int>(g)) devices.push_back(&d);
    if (devices.empty()) {
      out->conditions.push_back(name +
                                ": MIG is enabled and it has no MIG instances; its slices cannot "
                                "start until they are made (nvidia-smi mig -cgi PROFILES -C)");
      continue;
    }
    std::vector<std::string> layout;
    for (const MigDevice* d : devices)
      layout.push_back(d->profile + (d->start >= 0 ? "@" + std::to_string(d->start) : ""));
    std::vector<MigInstance> placed;
    if (const std::string err = PlaceMigLayout(profiles, layout, &placed); !err.empty()) {
      std::string listed;
      for (const std::string& item : layout) listed += (listed.empty() ? "" : ", ") + item;
      out->conditions.push_back(name + ": its MIG instances (" + listed +
                                ") are not a layout berth knows: " + err +
                                "; its slices cannot start");
      for (MigDevice* d : devices) d->start = -1;
      continue;
    }
    // The starts berth chose, by profile, lowest first: those of the instances listed without.
    std::multiset<std::pair<int, int>> pinned;  // (profile, start) the lister gave
    for (const MigDevice* d : devices)
      if (d->start >= 0) pinned.insert({FindMigProfile(profiles, d->profile), d->start});
    std::map<int, std::vector<int>> chosen;
    for (const MigInstance& i : placed)
      if (const auto it = pinned.find({i.profile, i.start}); it != pinned.end())
        pinned.erase(it);
      else
        chosen[i.profile].push_back(i.start);
    for (auto& [profile, starts] : chosen) std::sort(starts.begin(), starts.end());
    std::map<int, size_t> used;
    for (MigDevice* d : devices)
      if (d->start < 0) {
        const int p = FindMigProfile(profiles, d->profile);
        d->start = chosen[p][used[p]++];
      }
    for (const MigDevice* d : devices)
      gpu.mig_layout.push_back(d->profile + "@" + std::to_string(d->start));
  }
}

}  // namespace

DiscoveredNode BuildNode(const std::string& host_name, const GpuQuery& query,
                         const GpuTopology& topology, const HostTopology& host,
                         const GpuList* list) {
  DiscoveredNode out;
  out.conditions = query.conditions;
  Node& node = out.node;
  node.name = host_name;
  for (const NumaNode& numa : host.numa_nodes) {
    node.sockets.push_back(Socket{numa.cpus, numa.memory_mib});
    node.memory_mib += numa.memory_mib;
  }
  node.cpu_milli = 1000 * static_cast<int64_t>(host.cpus.size());
  if (node.sockets.empty()) node.sockets.push_back(Socket{host.cpus, 0});

  std::vector<const GpuRecord*> usable;
  for (const GpuRecord& gpu : query.gpus)
    if (gpu.problem.empty()) usable.push_back(&gpu);
  if (topology.gpu_count != static_cast<int>(query.gpus.size()))
    out.conditions.push_back("nvidia-smi topo -m shows " + std::to_string(topology.gpu_count) +
                             " GPUs and --query-gpu " + std::to_string(query.gpus.size()) +
                             "; GPUs beyond the matrix get a PCIe switch of their own");
  const auto in_matrix = [&](int host_index) { return host_index < topology.gpu_count; };

  // Sockets.
  std::vector<int> socket(usable.size(), 0);
  for (size_t g = 0; g < usable.size(); ++g) {
    const int t = usable[g]->index;
    if (!in_matrix(t)) continue;
    int s = topology.numa[t] >= 0 ? host.FindNumaNode(topology.numa[t]) : -1;
    if (topology.numa[t] >= 0 && s < 0)
      out.conditions.push_back("GPU " + std::to_string(t) + ": topo -m puts it on NUMA node " +
                               std::to_string(topology.numa[t]) +
                               ", which /sys does not list; taken by its CPU affinity");
    if (s < 0) {
      size_t best = 0;
      for (size_t i = 0; i < host.numa_nodes.size(); ++i) {
        size_t overlap = 0;
        for (int cpu : topology.cpus[t])
          overlap += std::binary_search(host.numa_nodes[i].cpus.begin(),
                                        host.numa_nodes[i].cpus.end(), cpu);
        if (overlap > best) best = overlap, s = static_cast<int>(i);
      }
    }
    socket[g] = std::max(s, 0);
  }

  // PCIe switches and NVLink domains.
  Groups pcie(usable.size()), nvlink(usable.size());
  std::vector<bool> has_nvlink(usable.size(), false);
  for (size_t a = 0; a < usable.size(); ++a) {
    const int ta = usable[a]->index;
    if (!in_matrix(ta)) continue;
    for (size_t b = a + 1; b < usable.size(); ++b) {
      const int tb = usable[b]->index;
      if (!in_matrix(tb)) continue;
      const Link& link = topology.links[ta][tb];
      if (link.kind == LinkKind::kNvLink) {
        nvlink.Join(static_cast<int>(a), static_cast<int>(b));
        has_nvlink[a] = has_nvlink[b] = true;
      }
      bool shared = SharesPcieSwitch(link);
      for (size_t k = 0; k < topology.nics.size() && !shared; ++k)
        shared = SharesPcieSwitch(topology.nic_links[ta][k]) &&
                 SharesPcieSwitch(topology.nic_links[tb][k]);
      if (shared && socket[a] == socket[b]) pcie.Join(static_cast<int>(a), static_cast<int>(b));
    }
  }
  std::vector<std::pair<int, int>> switch_keys;  // (socket, lowest GPU), one per switch
  for (size_t g = 0; g < usable.size(); ++g)
    if (pcie.Find(static_cast<int>(g)) == static_cast<int>(g))
      switch_keys.emplace_back(socket[g], static_cast<int>(g));
  std::sort(switch_keys.begin(), switch_keys.end());
  std::map<int, int> switch_of_root;
  for (const auto& [s, root] : switch_keys) {
    switch_of_root[root] = static_cast<int>(node.switches.size());
    node.switches.push_back(PcieSwitch{s});
  }
  std::map<int, int> domain_of_root;
  for (size_t g = 0; g < usable.size(); ++g) {
    const int root = nvlink.Find(static_cast<int>(g));
    if (has_nvlink[g] && !domain_of_root.count(root))
      domain_of_root.emplace(root, static_cast<int>(domain_of_root.size()));
  }

  // Models and GPUs.
  for (size_t g = 0; g < usable.size(); ++g) {
    const GpuRecord& record = *usable[g];
    const std::string model = ModelName(record.name);
    auto it = std::find_if(out.models.begin(), out.models.end(),
                           [&](const GpuModel& m) { return m.name == model; });
    if (it == out.models.end()) {
      out.models.push_back(GpuModel{model, record.memory_mib, {}});
      it = out.models.end() - 1;
    }
    if (record.mig_current != MigMode::kNotSupported && it->mig_profiles.empty())
      it->mig_profiles = BuiltinMigProfiles(model);
    Gpu gpu;
    gpu.model = model;
    gpu.pcie_switch = switch_of_root.at(pcie.Find(static_cast<int>(g)));
    gpu.nvlink_domain = has_nvlink[g] ? domain_of_root.at(nvlink.Find(static_cast<int>(g))) : -1;
    gpu.mig_enabled = record.mig_current == MigMode::kEnabled;
    if (gpu.mig_enabled && it->mig_profiles.empty()) {
      gpu.mig_enabled = false;
      out.conditions.push_back("GPU " + std::to_string(record.index) +
                               ": MIG is enabled but berth has no MIG profiles for " + model +
                               "; it is offered as a whole GPU");
    }
    node.gpus.push_back(std::move(gpu));
    out.host_index.push_back(record.index);
    out.gpu_uuids.push_back(record.uuid);
  }
  if (list) {
    for (const MigDevice& device : list->mig_devices) {
      const auto at = std::find(out.host_index.begin(), out.host_index.end(), device.gpu);
      if (at == out.host_index.end()) continue;  // a lost GPU's
      MigDevice renumbered = device;
      renumbered.gpu = static_cast<int>(at - out.host_index.begin());
      out.mig_devices.push_back(std::move(renumbered));
    }
    PinMigInstances(&out);
  }
  return out;
}

}  // namespace berth
