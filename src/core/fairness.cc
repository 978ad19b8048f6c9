#include "core/fairness.h"

#include <algorithm>

namespace berth {

std::vector<double> WaterFill(double capacity, const std::vector<FairClaim>& claims) {
  const size_t n = claims.size();
  std::vector<double> share(n, 0);
  std::vector<double> limit(n);
  double guaranteed = 0;
  for (size_t i = 0; i < n; ++i) {
    limit[i] = std::max(0.0, std::min(claims[i].demand, claims[i].cap));
    share[i] = std::min(claims[i].guarantee, limit[i]);
    guaranteed += share[i];
  }
  if (guaranteed >= capacity) {
    const double scale = guaranteed > 0 ? capacity / guaranteed : 0;
    for (double& s : share) s *= scale;
    return share;
  }
  double left = capacity - guaranteed;
  // Each round raises every unsatisfied claimant by the same amount per unit of weight, until
  // the next claimant is satisfied or the capacity is gone.
  std::vector<bool> open(n);
  for (size_t i = 0; i < n; ++i) open[i] = share[i] < limit[i] && claims[i].weight > 0;
  while (left > 1e-9) {
    double weights = 0, step = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < n; ++i) {
      if (!open[i]) continue;
      weights += claims[i].weight;
      step = std::min(step, (limit[i] - share[i]) / claims[i].weight);
    }
    if (weights == 0) break;
    step = std::min(step, left / weights);
    for (size_t i = 0; i < n; ++i) {
      if (!open[i]) continue;
      share[i] += step * claims[i].weight;
      if (share[i] >= limit[i] - 1e-9) open[i] = false;
    }
    left -= step * weights;
  }
  return share;
}

double DominantShare(const ResourceVector& usage, const ResourceVector& capacity) {
  double share = 0;
  if (capacity.gpu > 0) share = std::max(share, usage.gpu / capacity.gpu);
  if (capacity.cpu_milli > 0) share = std::max(share, usage.cpu_milli / capacity.cpu_milli);
  if (capacity.memory_mib > 0) share = std::max(share, usage.memory_mib / capacity.memory_mib);
  return share;
}

}  // namespace berth
