#include "fl/client_sampler.h"

#include <algorithm>
#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fl {
namespace {

TEST(SampleCohortTest, DistinctSortedInRange) {
  std::vector<int> cohort = SampleCohort(100, 10, 7, 3);
  ASSERT_EQ(cohort.size(), 10);
  EXPECT_TRUE(std::is_sorted(cohort.begin(), cohort.end()));
  EXPECT_EQ(std::set<int>(cohort.begin(), cohort.end()).size(), 10);
  for (int id : cohort) {
    EXPECT_GE(id, 0);
    EXPECT_LT(id, 100);
  }
}

TEST(SampleCohortTest, FullCohortIsEveryone) {
  std::vector<int> cohort = SampleCohort(5, 5, 1, 1);
  EXPECT_THAT(cohort, ::testing::ElementsAre(0, 1, 2, 3, 4));
}

TEST(SampleCohortTest, SameSeedAndRoundSameCohortOtherRoundsDiffer) {
  EXPECT_EQ(SampleCohort(1000, 10, 42, 5), SampleCohort(1000, 10, 42, 5));
  EXPECT_NE(SampleCohort(1000, 10, 42, 5), SampleCohort(1000, 10, 42, 6));
  EXPECT_NE(SampleCohort(1000, 10, 42, 5), SampleCohort(1000, 10, 43, 5));
}

TEST(SampleCohortTest, EveryClientEquallyLikely) {
  // 20000 draws of 3 out of 10: each client expected 6000 times; a 5-sigma band
  // (sigma ~ 65) catches a biased sampler without flaking (the stream is fixed anyway).
  std::vector<int> counts(10, 0);
  for (int round = 0; round < 20000; ++round) {
    for (int id : SampleCohort(10, 3, 9, round)) ++counts[id];
  }
  for (int c : counts) EXPECT_NEAR(c, 6000, 325);
}

TEST(SamplePoissonCohortTest, SortedDistinctAndFixedBySeedAndRound) {
  const std::vector<int> cohort = SamplePoissonCohort(1000, 0.05, 42, 5);
  EXPECT_TRUE(std::is_sorted(cohort.begin(), cohort.end()));
  EXPECT_EQ(std::adjacent_find(cohort.begin(), cohort.end()), cohort.end());
  for (int id : cohort) {
    EXPECT_GE(id, 0);
    EXPECT_LT(id, 1000);
  }
  EXPECT_EQ(cohort, SamplePoissonCohort(1000, 0.05, 42, 5));
  EXPECT_NE(cohort, SamplePoissonCohort(1000, 0.05, 42, 6));
  EXPECT_NE(cohort, SamplePoissonCohort(1000, 0.05, 43, 5));
}

TEST(SamplePoissonCohortTest, RatesZeroAndOneAreNobodyAndEveryone) {
  EXPECT_TRUE(SamplePoissonCohort(50, 0.0, 1, 1).empty());
  EXPECT_THAT(SamplePoissonCohort(5, 1.0, 1, 1), ::testing::ElementsAre(0, 1, 2, 3, 4));
}

TEST(SamplePoissonCohortTest, SizesAreBinomialAndClientsIndependent) {
  // 20000 rounds of 10 clients at rate 0.3. Each client: 6000 expected joins, sd 65.
  // Cohort size: mean 3, variance 10 * 0.3 * 0.7 = 2.1 (a fixed-size sampler of 3
  // would give variance 0); clients 0 and 1 together: 0.09 * 20000 = 1800, sd 40,
  // which a sampler that correlated them would miss. 5-sigma bands.
  std::vector<int> counts(10, 0);
  int both = 0;
  double sum = 0.0, sum_sq = 0.0;
  const int rounds = 20000;
  for (int round = 0; round < rounds; ++round) {
    const std::vector<int> cohort = SamplePoissonCohort(10, 0.3, 9, round);
    for (int id : cohort) ++counts[id];
    both += cohort.size() >= 2 && cohort[0] == 0 && cohort[1] == 1;
    sum += cohort.size();
    sum_sq += cohort.size() * cohort.size();
  }
  for (int c : counts) EXPECT_NEAR(c, 6000, 325);
  EXPECT_NEAR(both, 1800, 200);
  const double mean = sum / rounds;
  EXPECT_NEAR(mean, 3.0, 0.06);
  EXPECT_NEAR(sum_sq / rounds - mean * mean, 2.1, 0.15);
}

}  // namespace
}  // namespace fl
