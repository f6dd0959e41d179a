#include "fl/client_sampler.h"

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

}  // namespace
}  // namespace fl
