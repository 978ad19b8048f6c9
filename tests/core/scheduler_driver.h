// The engine driven cycle after cycle as an adapter drives it, for tests of its behaviour over
// time (scheduler_over_time_test, scheduler_edge_case_test).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/scheduler.h"
#include "core/synthetic_cluster.h"

namespace berth {
namespace test {

inline JobSpec Job(const std::string& queue, int gpus, const std::string& user = "user") {
  JobSpec spec;
  spec.name = queue + "-job";
  spec.queue = queue;
  spec.user = user;
  TaskGroup g;
  g.name = "main";
  g.demand.gpus = gpus;
  spec.groups.push_back(g);
  return spec;
}

inline QueueSpec Queue(const std::string& name, int guaranteed_nodes = 0, double weight = 1) {
  QueueSpec q{name, weight, -1, {}};
  if (guaranteed_nodes > 0) q.guarantees.push_back({"dgx-a100/node", guaranteed_nodes});
  return q;
}

inline JobSpec Elastic(const std::string& queue, int replicas, int min_replicas, int gpus = 1) {
  JobSpec spec = Job(queue, gpus);
  spec.groups[0].replicas = replicas;
  spec.min_replicas = min_replicas;
  return spec;
}

// The engine's running jobs, guaranteed ones first: the order to adopt them into a fresh engine
// in, since guaranteed work binds the guarantee's cells.
inline std::vector<const JobRecord*> RunningGuaranteedFirst(const Scheduler& s) {
  std::vector<const JobRecord*> running;
  for (const auto& [id, j] : s.jobs())
    if (j.state == JobState::kRunning) running.push_back(&j);
  std::stable_sort(running.begin(), running.end(), [](const JobRecord* x, const JobRecord* y) {
    return !x->borrowed && y->borrowed;
  });
  return running;
}

// Carries out decisions as an adapter would: a started job runs for its duration, a preempted
// one stops when its grace period is over, an evicted or killed one at once; grows and shrinks
// take effect at once. Every call is followed by both consistency checks and a check that no
// whole GPU is held by two jobs (the engine's own view against the allocator's).
class Driver {
 public:
  Driver(int nodes, int per_rack, const std::vector<QueueSpec>& queues, Policy policy = Berth())
      : Driver(SyntheticDgxCluster(nodes, per_rack, 0), queues, std::move(policy)) {}
  Driver(Cluster cluster, const std::vector<QueueSpec>& queues, Policy policy = Berth())
      : cluster_(std::move(cluster)), s_(&cluster_, queues, policy) {
    EXPECT_EQ(s_.error(), "");
  }
  static Policy Berth() {
    Policy p;
    EXPECT_TRUE(BuiltinPolicy("berth", &p));
    return p;
  }
  int Submit(const JobSpec& spec, double duration = 1e9) {
    std::string why;
    const int id = s_.Submit(spec, now_, &why);
    EXPECT_GE(id, 0) << why;
    duration_[id] = duration;
    return id;
  }
  // A job already running on `gpus` of `node` (as a restarted adapter hands it over), that runs
  // until stopped: to lay a cluster out exactly.
  int Adopt(const JobSpec& spec, int node, const std::vector<int>& gpus, bool borrowed) {
    ReplicaPlacement at;
    at.node = node;
    at.gpus = gpus;
    std::string why;
    const int id = s_.Adopt(spec, {at}, borrowed, now_, now_, &why);
    EXPECT_GE(id, 0) << why;
    duration_[id] = 1e9;
    return id;
  }
  // One cycle at the current time, then the clock moves on by `step` seconds, carrying out
  // what fell due in between.
  void Cycle(double step = 1) {
    Handle(s_.Schedule(now_));
    Check();
    const double until = now_ + step;
    while (true) {
      auto next = std::min_element(due_.begin(), due_.end(),
                                   [](const Due& a, const Due& b) { return a.at < b.at; });
      if (next == due_.end() || next->at > until) break;
      const Due d = *next;
      due_.erase(next);
      now_ = std::max(now_, d.at);
      const JobRecord* j = s_.job(d.job);
      if (!j || j->start_time != d.started) continue;
      if (d.stop) {
        Handle(s_.Stopped(d.job, now_));
      } else if (j->state == JobState::kRunning) {
        s_.Finish(d.job, now_);
        if (on_finish_) on_finish_(d.job);
      }
      Check();
    }
    now_ = until;
  }
  void Check() {
    ASSERT_EQ(s_.CheckConsistency(), "");
    ASSERT_EQ(s_.allocator().CheckConsistency(), "");
    ASSERT_EQ(Overlap(), "");
  }
  // "" when no GPU is held (whole) by two running/stopping jobs, and every GPU a job holds is
  // held by somebody in the allocator.
  std::string Overlap() const {
    std::map<std::pair<int, int>, int> holder;
    for (const auto& [id, j] : s_.jobs()) {
      if (j.state != JobState::kRunning && j.state != JobState::kStopping) continue;
      for (const ReplicaPlacement& r : j.placements) {
        if (r.gpu_milli > 0 || r.mig_profile >= 0) continue;
        for (int g : r.gpus) {
          auto [it, added] = holder.emplace(std::make_pair(r.node, g), id);
          if (!added)
            return "GPU " + std::to_string(r.node) + "/" + std::to_string(g) + " held by jobs " +
                   std::to_string(it->second) + " and " + std::to_string(id);
          if (s_.allocator().gpu_used_milli(r.node, g) == 0)
            return "job " + std::to_string(id) + " runs on GPU " + std::to_string(r.node) + "/" +
                   std::to_string(g) + ", which the allocator has free";
        }
      }
    }
    return "";
  }
  void Handle(const std::vector<Decision>& decisions) {
    for (const Decision& d : decisions) {
      ++count_[d.kind];
      ++by_job_[d.job][d.kind];
      const double started = s_.job(d.job)->start_time;
      if (d.kind == Decision::Kind::kStart) {
        ++starts_[d.job];
        due_.push_back({now_ + duration_[d.job], d.job, false, started});
      } else if (d.kind == Decision::Kind::kPreempt) {
        ++preempted_[d.job];
        due_.push_back({now_ + d.grace_period_s, d.job, true, started});
      } else if (d.kind == Decision::Kind::kGrow || d.kind == Decision::Kind::kShrink) {
        // carried out at once; nothing to report back
      } else {
        due_.push_back({now_, d.job, true, started});
      }
    }
  }
  const JobRecord& J(int id) { return *s_.job(id); }
  int Running(const std::string& queue) {
    int n = 0;
    for (const auto& [id, j] : s_.jobs())
      n += j.state == JobState::kRunning && j.spec.queue == queue;
    return n;
  }
  int NodeOf(int id) { return J(id).placements.at(0).node; }

  Cluster cluster_;
  Scheduler s_;
  double now_ = 0;
  std::map<int, double> duration_;
  std::map<Decision::Kind, int> count_;
  std::map<int, std::map<Decision::Kind, int>> by_job_;
  std::map<int, int> starts_, preempted_;
  std::function<void(int)> on_finish_;
  struct Due {
    double at;
    int job;
    bool stop;
    double started;
  };
  std::vector<Due> due_;
};

}  // namespace test
}  // namespace berth
