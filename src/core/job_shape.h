// A job's shape: what decides where it can go, split into a class (the constraints: queue,
// kinds of demand, models, affinity, selectors, spread) and a size. Within one cycle capacity
// is rarely freed, so a job at least as large as one of its class that could neither be placed
// nor preempt for, and of no higher priority, is taken to fail too (kube-scheduler and Slurm
// skip such jobs the same way). What a cycle frees or makes after a failure (GPUs an elastic
// job gives back when it shrinks for a preemptor, a victim a borrower's start makes) is seen in
// the next cycle: a job skipped for a failure is marked failed as of the failure's state
// version, so any change since has it tried again. This keeps a deep queue's cycle cheap.
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
  // Whether a job of `cls` with `size` and `priority` is known to fail; `as_of` (if given) gets
  // the earliest state version of the failures that say so: a job marked failed as of then is
  // tried again once anything changed since, even within this cycle's version (GPUs a shrink
  // freed, a victim a start made).
  bool Dominated(int cls, const ShapeSize& size, double priority, uint64_t* as_of = nullptr) const;
  // A failure seen at state version `as_of`.
  void Add(int cls, const ShapeSize& size, double priority, uint64_t as_of);

 private:
  struct Failure {
    ShapeSize size;
    double priority;
    uint64_t as_of;
  };
  static constexpr size_t kPerClass = 8;      // the smallest failures kept per class
  std::vector<std::vector<Failure>> failed_;  // [class]
  uint64_t changes_ = 0;
};

}  // namespace berth
