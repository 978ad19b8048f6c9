// A job's shape: what decides where it can go, split into a class (the constraints: queue,
// kinds of demand, models, affinity, selectors, spread) and a size. Within one cycle nothing
// frees capacity, so a job at least as large as one of its class that could neither be placed
// nor preempt for, and of no higher priority, cannot be either (kube-scheduler and Slurm skip
// such jobs the same way). A borrower started later in the cycle is a new possible victim;
// the jobs skipped meanwhile see it in the next cycle. This keeps a deep queue's cycle cheap.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/job.h"

namespace berth {

struct ShapeSize {
  int units = 0;     // GPUs per replica, or milli-GPU of a share; 0 for multi-group jobs
  int replicas = 0;  // the fewest it can start with
  int64_t cpu_milli = 0, memory_mib = 0;

  // Every dimension at least `o`'s.
  bool Covers(const ShapeSize& o) const {
    return units >= o.units && replicas >= o.replicas && cpu_milli >= o.cpu_milli &&
           memory_mib >= o.memory_mib;
  }
};

// The class key of a spec (queue and raw priority included), and its size. Jobs with several task
// groups get their sizes in the key: only identical ones share a class.
std::string ShapeClassKey(const JobSpec& spec);
ShapeSize ShapeSizeOf(const JobSpec& spec);

// The failures of one cycle, by class.
class FailedShapes {
 public:
  void Clear() { failed_.clear(); }
  // Counts the failures that changed what is known, so a caller can tell when to look again.
  uint64_t changes() const { return changes_; }
  // Whether a job of `cls` with `size` and `priority` is known to fail.
  bool Dominated(int cls, const ShapeSize& size, double priority) const;
  void Add(int cls, const ShapeSize& size, double priority);

 private:
  struct Failure {
    ShapeSize size;
    double priority;
  };
  static constexpr size_t kPerClass = 8;      // the smallest failures kept per class
  std::vector<std::vector<Failure>> failed_;  // [class]
  uint64_t changes_ = 0;
};

}  // namespace berth
