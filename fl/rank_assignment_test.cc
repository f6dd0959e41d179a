#include "fl/rank_assignment.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fl {
namespace {

using ::testing::ElementsAre;

TEST(AssignClientsToRanksTest, LargestFirstToTheLeastLoadedRank) {
  // Sorted: 9 (c1) -> r0, 7 (c3) -> r1, 5 (c0) -> r1 (7 < 9), 3 (c2) -> r0 (9 < 12),
  // 3 (c4) -> r0 (12 = 12, lower rank).
  EXPECT_THAT(AssignClientsToRanks({5, 9, 3, 7, 3}, 2), ElementsAre(1, 0, 0, 1, 0));
}

TEST(AssignClientsToRanksTest, EqualCostsRoundRobin) {
  EXPECT_THAT(AssignClientsToRanks({4, 4, 4, 4, 4}, 3), ElementsAre(0, 1, 2, 0, 1));
}

TEST(AssignClientsToRanksTest, OneRankOwnsAll) {
  EXPECT_THAT(AssignClientsToRanks({1, 2, 3}, 1), ElementsAre(0, 0, 0));
}

TEST(AssignClientsToRanksTest, MoreRanksThanClientsLeavesSomeIdle) {
  EXPECT_THAT(AssignClientsToRanks({2, 1}, 4), ElementsAre(0, 1));
}

TEST(AssignClientsToRanksTest, BalancesSkewedSizes) {
  std::vector<int64_t> costs;
  for (int k = 0; k < 100; ++k) costs.push_back(1 + (k * 37) % 200);
  const std::vector<int> ranks = AssignClientsToRanks(costs, 4);
  std::vector<int64_t> load(4, 0);
  int64_t largest = 0;
  for (size_t k = 0; k < costs.size(); ++k) {
    load[ranks[k]] += costs[k];
    largest = std::max(largest, costs[k]);
  }
  const auto [low, high] = std::minmax_element(load.begin(), load.end());
  // LPT leaves the loads at most one client's cost apart.
  EXPECT_LE(*high - *low, largest);
}

}  // namespace
}  // namespace fl
