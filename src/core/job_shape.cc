#include "core/job_shape.h"

#include <algorithm>

namespace berth {

std::string ShapeClassKey(const JobSpec& spec) {
  // The raw priority decides what a job may do besides fit (use the guarantee, preempt lower
  // priority): jobs of different raw priorities never stand in for each other.
  std::string key = spec.queue + "|" + std::to_string(spec.priority) +
                    (spec.preemptible ? "" : "|np") + (spec.priority_class.empty() ? "" : "|c");
  key += '\x1f';
  const bool one = spec.groups.size() == 1;
  for (const TaskGroup& g : spec.groups) {
    const Demand& d = g.demand;
    key += d.gpus > 0 ? "g" : d.gpu_milli > 0 ? "m" : d.mig_profile.empty() ? "c" : "i";
    key += d.mig_profile + "|" + std::to_string(d.gpu_memory_mib) + "|";
    for (const std::string& m : d.models) key += m + ",";
    key += "|" + std::to_string(d.affinity ? static_cast<int>(*d.affinity) : -1) + "|";
    for (const auto& [k, v] : g.node_selector) key += k + "=" + v + ",";
    if (!one)
      key += "|" + std::to_string(d.gpus) + "/" + std::to_string(d.gpu_milli) + "/" +
             std::to_string(g.replicas) + "/" + std::to_string(d.cpu_milli) + "/" +
             std::to_string(d.memory_mib);
    key += '\x1e';
  }
  for (const SpreadConstraint& s : spec.spread)
    key += s.topology_key + ":" + std::to_string(s.max_skew) + (s.hard ? "h" : "s") + ",";
  key += "|" + std::to_string(spec.gang_affinity ? static_cast<int>(*spec.gang_affinity) : -1);
  if (!one) key += "|" + std::to_string(spec.min_replicas);
  return key;
}

ShapeSize ShapeSizeOf(const JobSpec& spec) {
  ShapeSize s;
  if (spec.groups.size() != 1) return s;
  const TaskGroup& g = spec.groups[0];
  s.units = g.demand.gpus > 0 ? g.demand.gpus : g.demand.gpu_milli;
  s.replicas = spec.min_replicas > 0 ? spec.min_replicas : g.replicas;
  s.cpu_milli = g.demand.cpu_milli;
  s.memory_mib = g.demand.memory_mib;
  return s;
}

bool FailedShapes::Dominated(int cls, const ShapeSize& size, double priority,
                             uint64_t* as_of) const {
  if (cls < 0 || static_cast<size_t>(cls) >= failed_.size()) return false;
  bool dominated = false;
  for (const Failure& f : failed_[cls])
    if (size.Covers(f.size) && priority <= f.priority) {
      if (!as_of) return true;
      *as_of = dominated ? std::min(*as_of, f.as_of) : f.as_of;
      dominated = true;
    }
  return dominated;
}

void FailedShapes::Add(int cls, const ShapeSize& size, double priority, uint64_t as_of) {
  if (cls < 0) return;
  if (static_cast<size_t>(cls) >= failed_.size()) failed_.resize(cls + 1);
  std::vector<Failure>& list = failed_[cls];
  // Keep the smallest failures: one that the new failure covers (larger, no higher priority)
  // says nothing more.
  std::erase_if(list,
                [&](const Failure& f) { return f.size.Covers(size) && f.priority <= priority; });
  if (list.size() == kPerClass) {
    auto volume = [](const ShapeSize& s) {
      return static_cast<double>(s.units) * s.replicas * (1 + s.cpu_milli) * (1 + s.memory_mib);
    };
    auto largest = std::max_element(
        list.begin(), list.end(),
        [&](const Failure& a, const Failure& b) { return volume(a.size) < volume(b.size); });
    if (volume(largest->size) <= volume(size)) return;
    list.erase(largest);
  }
  list.push_back({size, priority, as_of});
  ++changes_;
}

}  // namespace berth
