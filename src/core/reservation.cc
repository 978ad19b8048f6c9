#include "core/reservation.h"

namespace berth {

std::vector<int> Reservations::Reserve(int job, const std::vector<std::pair<int, int>>& gpus,
                                       Reservation kind, size_t nodes) {
  if (reserved_on_.size() < nodes) reserved_on_.resize(nodes, 0);
  Drop(job);
  std::vector<int> dropped;
  kind.gpus.clear();
  for (const auto& [node, gpu] : gpus) {
    const int owner = OwnerOf(node, gpu);
    if (owner == job) continue;
    if (owner >= 0) {
      Drop(owner);
      dropped.push_back(owner);
    }
    owners_[{node, gpu}] = job;
    ++reserved_on_[node];
    kind.gpus.push_back({node, gpu});
  }
  if (kind.starving()) ++starving_;
  by_job_[job] = std::move(kind);
  return dropped;
}

void Reservations::Drop(int job) {
  auto it = by_job_.find(job);
  if (it == by_job_.end()) return;
  for (const auto& [node, gpu] : it->second.gpus) {
    owners_.erase({node, gpu});
    --reserved_on_[node];
  }
  if (it->second.starving()) --starving_;
  by_job_.erase(it);
}

bool Reservations::BlocksOnNode(const Candidate& c, int job, int queue, bool guaranteed,
                                double priority) const {
  for (int g : c.gpus) {
    auto it = owners_.find({c.node, g});
    if (it == owners_.end() || it->second == job) continue;
    const Reservation& r = by_job_.at(it->second);
    const bool outranks = queue == r.queue && priority > r.priority;
    if ((guaranteed && r.yields && (queue != r.queue || !r.for_preemption || outranks)) ||
        (r.starving() && outranks))
      continue;
    return true;
  }
  return false;
}

int Reservations::OwnerOf(int node, int gpu) const {
  auto it = owners_.find({node, gpu});
  return it == owners_.end() ? -1 : it->second;
}

const Reservations::Reservation* Reservations::Of(int job) const {
  auto it = by_job_.find(job);
  return it == by_job_.end() ? nullptr : &it->second;
}

}  // namespace berth
