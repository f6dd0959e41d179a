#include "fl/rank_assignment.h"

#include <algorithm>
#include <numeric>

#include "glog/logging.h"

namespace fl {

std::vector<int> AssignClientsToRanks(const std::vector<int64_t>& costs, int world_size) {
  CHECK_GE(world_size, 1);
  std::vector<size_t> order(costs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return costs[a] > costs[b]; });
  std::vector<int64_t> load(world_size, 0);
  std::vector<int> ranks(costs.size(), 0);
  for (size_t k : order) {
    const int rank = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    ranks[k] = rank;
    load[rank] += costs[k];
  }
  return ranks;
}

}  // namespace fl
