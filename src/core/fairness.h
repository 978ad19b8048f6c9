// Fair division of capacity among queues.
//
// WaterFill: weighted max-min fairness over one resource. Every claimant first gets what it is
// guaranteed (up to its demand); the rest is poured in proportion to weight, never past a
// claimant's demand or cap, until the capacity or the demand runs out.
//
// DominantShare: dominant resource fairness (DRF) over several resources: a claimant's share
// is its largest fraction of any one resource; the engine serves the claimant with the
// smallest weighted dominant share first.
#pragma once

#include <limits>
#include <vector>

namespace berth {

struct FairClaim {
  double weight = 1;
  double guarantee = 0;
  double demand = 0;
  double cap = std::numeric_limits<double>::infinity();
};

// Fair share per claimant (same order). Guarantees beyond capacity are scaled down evenly.
std::vector<double> WaterFill(double capacity, const std::vector<FairClaim>& claims);

struct ResourceVector {
  double gpu = 0, cpu_milli = 0, memory_mib = 0;
};
inline ResourceVector& operator+=(ResourceVector& a, const ResourceVector& b) {
  a.gpu += b.gpu;
  a.cpu_milli += b.cpu_milli;
  a.memory_mib += b.memory_mib;
  return a;
}
inline ResourceVector Scaled(const ResourceVector& r, double k) {
  return {r.gpu * k, r.cpu_milli * k, r.memory_mib * k};
}

// max over resources of usage / capacity (resources with zero capacity are ignored).
double DominantShare(const ResourceVector& usage, const ResourceVector& capacity);

}  // namespace berth
