#include "core/mig.h"

#include <algorithm>
#include <cctype>

namespace berth {
namespace {

// Memory per instance (MiB) of the 1g, 1g double-memory, 3g/4g and 7g instance sizes; the 2g
// instance has the double-memory 1g's memory. Sources: NVIDIA's MIG user guide and NVML.
struct MemoryColumn {
  const char* suffix_1g;
  const char* suffix_1g_double;
  const char* suffix_half;
  const char* suffix_full;
  int64_t mib_1g, mib_1g_double, mib_half, mib_full;
};

std::vector<MigProfile> Table(const MemoryColumn& m) {
  const std::vector<int> seven = {0, 1, 2, 3, 4, 5, 6};
  return {
      {std::string("1g.") + m.suffix_1g, 1, 1, seven, 7, m.mib_1g},
      {std::string("1g.") + m.suffix_1g + "+me", 1, 1, seven, 1, m.mib_1g},
      {std::string("1g.") + m.suffix_1g_double, 1, 2, {0, 2, 4, 6}, 4, m.mib_1g_double},
      {std::string("2g.") + m.suffix_1g_double, 2, 2, {0, 2, 4}, 3, m.mib_1g_double},
      {std::string("3g.") + m.suffix_half, 3, 4, {0, 4}, 2, m.mib_half},
      {std::string("4g.") + m.suffix_half, 4, 4, {0}, 1, m.mib_half},
      {std::string("7g.") + m.suffix_full, 7, 8, {0}, 1, m.mib_full},
  };
}

std::string Normalize(const std::string& model) {
  std::string out;
  for (char c : model)
    if (!std::isspace(static_cast<unsigned char>(c)))
      out += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::vector<MigProfile> BuiltinMigProfiles(const std::string& model) {
  const std::string n = Normalize(model);
  auto has = [&](const char* s) { return n.find(s) != std::string::npos; };
  if (has("A100") && has("80GB"))
    return Table({"10gb", "20gb", "40gb", "80gb", 9856, 19968, 40192, 80384});
  if (has("A100")) return Table({"5gb", "10gb", "20gb", "40gb", 4864, 9856, 19968, 40192});
  // H100 NVL sizes are the advertised GB figures; NVML's exact MiB values are not published.
  if (has("H100") && has("NVL"))
    return Table({"12gb", "24gb", "47gb", "94gb", 12288, 24576, 48128, 96256});
  // H100 and H200 as the driver (580) lists them on real GPUs (tests/data/agent/h100-vm and
  // h200-vm, mig-lgip.txt), below the names' advertised GB (NVML's mock GPUs say more): the
  // H100's 7g.80gb has 79.25 GiB, less than the GPU's 81559 MiB, where 80 GiB would not fit.
  if (has("H100")) return Table({"10gb", "20gb", "40gb", "80gb", 9984, 20096, 40448, 81152});
  if (has("H200")) return Table({"18gb", "35gb", "71gb", "141gb", 16384, 33280, 71424, 143360});
  return {};
}

int FindMigProfile(const std::vector<MigProfile>& profiles, const std::string& name) {
  for (size_t i = 0; i < profiles.size(); ++i)
    if (profiles[i].name == name) return static_cast<int>(i);
  return -1;
}

static uint8_t SlotMask(int start, int size) {
  return static_cast<uint8_t>(((1u << size) - 1u) << start);
}

bool MigLayout::CanPlaceAt(const std::vector<MigProfile>& profiles, int p, int start) const {
  const MigProfile& prof = profiles[p];
  if (std::find(prof.starts.begin(), prof.starts.end(), start) == prof.starts.end()) return false;
  if (start + prof.memory_slots > kMigMemorySlots) return false;
  if (used_slots_ & SlotMask(start, prof.memory_slots)) return false;
  if (counts_[p] >= prof.max_instances) return false;
  return used_compute_ + prof.compute_slices <= kMigComputeSlices;
}

int MigLayout::BestStart(const std::vector<MigProfile>& profiles, int p) const {
  int best = -1;
  int best_options = -1;
  for (int start : profiles[p].starts) {
    if (!CanPlaceAt(profiles, p, start)) continue;
    MigLayout after = *this;
    after.Place(profiles, p, start);
    // Weigh each remaining placement by its size so that large profiles stay possible.
    int options = 0;
    for (size_t q = 0; q < profiles.size(); ++q)
      for (int s : profiles[q].starts)
        if (after.CanPlaceAt(profiles, static_cast<int>(q), s)) options += profiles[q].memory_slots;
    if (options > best_options) {
      best_options = options;
      best = start;
    }
  }
  return best;
}

void MigLayout::Place(const std::vector<MigProfile>& profiles, int p, int start) {
  used_slots_ |= SlotMask(start, profiles[p].memory_slots);
  used_compute_ += profiles[p].compute_slices;
  ++counts_[p];
}

void MigLayout::Remove(const std::vector<MigProfile>& profiles, int p, int start) {
  used_slots_ &= static_cast<uint8_t>(~SlotMask(start, profiles[p].memory_slots));
  used_compute_ -= profiles[p].compute_slices;
  --counts_[p];
}

std::string PlaceMigLayout(const std::vector<MigProfile>& profiles,
                           const std::vector<std::string>& layout,
                           std::vector<MigInstance>* placed) {
  struct Entry {
    int profile;
    int start;  // -1: any
    std::string text;
  };
  std::vector<Entry> entries;
  for (const std::string& item : layout) {
    const size_t at = item.find('@');
    const std::string name = item.substr(0, at);
    const int p = FindMigProfile(profiles, name);
    if (p < 0) {
      std::string known;
      for (const MigProfile& prof : profiles) known += (known.empty() ? "" : ", ") + prof.name;
      return "unknown MIG profile \"" + name + "\"; known profiles: " + known;
    }
    int start = -1;
    if (at != std::string::npos) {
      const std::string digits = item.substr(at + 1);
      if (digits.size() != 1 || !std::isdigit(static_cast<unsigned char>(digits[0])))
        return "\"" + item + "\": the start after '@' must be a slot 0-7";
      start = digits[0] - '0';
    }
    if (static_cast<int>(profiles.size()) > kMaxMigProfiles) return "too many MIG profiles";
    entries.push_back({p, start, item});
  }
  // Pinned entries first, then larger profiles first: the order nvidia-smi needs as well.
  std::stable_sort(entries.begin(), entries.end(), [&](const Entry& a, const Entry& b) {
    if ((a.start >= 0) != (b.start >= 0)) return a.start >= 0;
    return profiles[a.profile].memory_slots > profiles[b.profile].memory_slots;
  });
  MigLayout gpu;
  placed->clear();
  for (const Entry& e : entries) {
    const int start = e.start >= 0 ? e.start : gpu.BestStart(profiles, e.profile);
    if (start < 0 || !gpu.CanPlaceAt(profiles, e.profile, start))
      return "MIG layout entry \"" + e.text +
             "\" does not fit with the entries before it (8 memory slots, 7 compute slices, "
             "allowed starts and per-profile limits); remove an entry or use smaller profiles";
    gpu.Place(profiles, e.profile, start);
    placed->push_back({e.profile, start});
  }
  return "";
}

}  // namespace berth
