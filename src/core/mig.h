// NVIDIA MIG: profile tables and the placement rules of one GPU.
//
// A MIG-capable GPU has 8 memory slots and 7 compute slices. A GPU instance of a profile
// occupies `memory_slots` consecutive slots starting at one of the profile's allowed starts;
// instances never overlap, each profile has a maximum count, and compute slices sum to <= 7.
// `MigLayout` is the state of one GPU; it is a value (8 bits plus counts), cheap to copy.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace berth {

struct MigProfile {
  std::string name;         // e.g. "3g.40gb", "1g.10gb+me"
  int compute_slices = 0;   // the "g" count
  int memory_slots = 0;     // consecutive memory slots occupied (1, 2, 4 or 8)
  std::vector<int> starts;  // allowed start slots
  int max_instances = 0;
  int64_t memory_mib = 0;
};

// The built-in table for a GPU model name (A100-40GB, A100-80GB, H100-80GB, H100-NVL, H200);
// empty for a model berth has no table for. Matching ignores case and a "-SXM..."/"-PCIE" tail.
std::vector<MigProfile> BuiltinMigProfiles(const std::string& model);

// Index of the profile named `name` in `profiles`, or -1.
int FindMigProfile(const std::vector<MigProfile>& profiles, const std::string& name);

struct MigInstance {
  int profile = 0;  // index into the GPU model's profiles
  int start = 0;
};

// Places a declared layout ("name" or "name@start" entries) on an empty GPU, larger profiles
// first. Returns "" and fills `placed`, or a message saying which entry cannot be placed.
std::string PlaceMigLayout(const std::vector<MigProfile>& profiles,
                           const std::vector<std::string>& layout,
                           std::vector<MigInstance>* placed);

constexpr int kMigMemorySlots = 8;
constexpr int kMigComputeSlices = 7;
constexpr int kMaxMigProfiles = 16;

class MigLayout {
 public:
  // True when an instance of profile `p` fits at `start` (allowed start, free slots, counts).
  bool CanPlaceAt(const std::vector<MigProfile>& profiles, int p, int start) const;
  // The start that leaves the most placements open for later requests, or -1 when none fits.
  int BestStart(const std::vector<MigProfile>& profiles, int p) const;
  void Place(const std::vector<MigProfile>& profiles, int p, int start);
  void Remove(const std::vector<MigProfile>& profiles, int p, int start);

  bool empty() const { return used_slots_ == 0; }
  uint8_t used_slots() const { return used_slots_; }
  int used_compute() const { return used_compute_; }
  int count(int p) const { return counts_[p]; }

 private:
  uint8_t used_slots_ = 0;  // bit i set: memory slot i is taken
  int used_compute_ = 0;
  uint8_t counts_[kMaxMigProfiles] = {};
};

}  // namespace berth
