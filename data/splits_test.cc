#include "data/splits.h"

#include <ATen/ATen.h>

#include "gtest/gtest.h"

namespace data {
namespace {

fl::Examples ThreeClasses() {
  // 30 examples, labels 0,1,2,0,1,2,...; x[i] = i so positions can be traced.
  at::Tensor x = at::arange(30, at::kFloat).reshape({30, 1});
  at::Tensor y = at::arange(30, at::kLong).remainder(3);
  return {x, y};
}

TEST(TakeClassBalancedTest, TakesEqualCountsPerClassAndKeepsTheRest) {
  auto split = TakeClassBalanced(ThreeClasses(), 9, 3, 1);
  ASSERT_TRUE(split.ok()) << split.status();
  const auto& [taken, rest] = *split;
  ASSERT_EQ(taken.size(), 9);
  ASSERT_EQ(rest.size(), 21);
  EXPECT_TRUE(at::bincount(taken.y, {}, 3).equal(at::tensor({3, 3, 3}, at::kLong)));
  // Together they are the original examples, each once.
  at::Tensor all = std::get<0>(at::cat({taken.x, rest.x}).flatten().sort());
  EXPECT_TRUE(all.equal(at::arange(30, at::kFloat)));
  // Labels stay with their inputs.
  EXPECT_TRUE(taken.x.flatten().to(at::kLong).remainder(3).equal(taken.y));
}

TEST(TakeClassBalancedTest, RemainderGoesToLowestClasses) {
  auto split = TakeClassBalanced(ThreeClasses(), 5, 3, 1);
  ASSERT_TRUE(split.ok());
  EXPECT_TRUE(at::bincount(split->first.y, {}, 3).equal(at::tensor({2, 2, 1}, at::kLong)));
}

TEST(TakeClassBalancedTest, SeedChangesTheChoice) {
  auto a = TakeClassBalanced(ThreeClasses(), 6, 3, 1);
  auto b = TakeClassBalanced(ThreeClasses(), 6, 3, 2);
  EXPECT_TRUE(a->first.x.equal(TakeClassBalanced(ThreeClasses(), 6, 3, 1)->first.x));
  EXPECT_FALSE(a->first.x.equal(b->first.x));
}

TEST(TakeClassBalancedTest, TooFewOfAClassIsAnError) {
  fl::Examples skewed{at::zeros({10, 1}), at::tensor({0, 0, 0, 0, 0, 0, 0, 0, 1, 2}, at::kLong)};
  auto split = TakeClassBalanced(skewed, 6, 3, 1);
  EXPECT_EQ(split.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(split.status().message(), "class 1 has 1 examples, a balanced set of 6 needs 2");
  auto too_many = TakeClassBalanced(ThreeClasses(), 31, 3, 1);
  EXPECT_EQ(too_many.status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace data
