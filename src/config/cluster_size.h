// What a loader has put into a cluster so far, against the cluster bounds of limits.h: shared by
// the cluster file, the openb node list and the Tiresias cluster, so that every format is
// bounded alike before its nodes are made.
#pragma once

#include <cstdint>
#include <string>

#include "core/cluster.h"

namespace berth {

class ClusterSize {
 public:
  // Counts `count` more nodes like `node` (names aside); on exceeding a bound, counts nothing
  // and returns what is wrong ("more than the limit of ..."), else "".
  std::string Add(const Node& node, int64_t count);

 private:
  int64_t nodes_ = 0, gpus_ = 0, listed_cpus_ = 0, labels_ = 0;
};

}  // namespace berth
