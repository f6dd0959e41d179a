#include "fl/rank_set.h"

#include <random>
#include <set>

#include "gtest/gtest.h"

namespace fl {
namespace {

TEST(RankSetTest, NthIsTheKthSmallestMember) {
  RankSet set(10);
  for (int v : {7, 2, 9, 0, 2}) set.Insert(v);
  ASSERT_EQ(set.size(), 4);
  EXPECT_EQ(set.Nth(0), 0);
  EXPECT_EQ(set.Nth(1), 2);
  EXPECT_EQ(set.Nth(2), 7);
  EXPECT_EQ(set.Nth(3), 9);
  set.Erase(2);
  set.Erase(5);  // not a member
  EXPECT_EQ(set.size(), 3);
  EXPECT_EQ(set.Nth(1), 7);
  EXPECT_FALSE(set.contains(2));
  EXPECT_TRUE(set.contains(9));
}

// Against std::set over random inserts and erases, for sizes that are and are not
// powers of two.
TEST(RankSetTest, AgreesWithAnOrderedSet) {
  for (int n : {1, 2, 7, 64, 1000}) {
    RankSet set(n);
    std::set<int> reference;
    std::mt19937 rng(n);
    for (int i = 0; i < 5000; ++i) {
      const int v = static_cast<int>(rng() % n);
      if (rng() % 2) {
        set.Insert(v);
        reference.insert(v);
      } else {
        set.Erase(v);
        reference.erase(v);
      }
      ASSERT_EQ(set.size(), static_cast<int>(reference.size()));
      if (!reference.empty()) {
        const int k = static_cast<int>(rng() % reference.size());
        ASSERT_EQ(set.Nth(k), *std::next(reference.begin(), k)) << n << " " << i;
      }
    }
  }
}

}  // namespace
}  // namespace fl
