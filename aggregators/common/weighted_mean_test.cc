#include "aggregators/common/weighted_mean.h"

#include <ATen/ATen.h>

#include "aggregators/common/partial_sums.h"
#include "gtest/gtest.h"

namespace aggregators {
namespace {

fl::ModelState State(std::vector<float> w) { return fl::ModelState({{"w", at::tensor(w), false}}); }

TEST(WeightedMeanTest, MeanOfWeightedDeltas) {
  WeightedMean mean;
  ASSERT_TRUE(mean.Add(State({4, 0}), 1).ok());
  ASSERT_TRUE(mean.Add(State({0, -4}), 3).ok());
  EXPECT_EQ(mean.count(), 2);
  EXPECT_DOUBLE_EQ(mean.total_weight(), 4);
  // (1 * (4, 0) + 3 * (0, -4)) / 4 = (1, -3)
  EXPECT_TRUE(mean.Mean()->tensor(0).allclose(at::tensor({1.0f, -3.0f})));
}

TEST(WeightedMeanTest, LayoutMismatchIsRejectedAndNotAdded) {
  WeightedMean mean;
  ASSERT_TRUE(mean.Add(State({1, 1}), 1).ok());
  EXPECT_FALSE(mean.Add(State({1, 1, 1}), 1).ok());
  EXPECT_EQ(mean.count(), 1);
  EXPECT_TRUE(mean.Mean()->tensor(0).allclose(at::tensor({1.0f, 1.0f})));
}

TEST(WeightedMeanTest, StepFromScalesParametersButNotBuffers) {
  // Mean delta over (w, buffer) = (1 * (4, 8) + 3 * (0, 0)) / 4 = (1, 2);
  // global (10, 10) + 0.5 * 1 for w, + 2 for the buffer.
  auto state = [](float w, float b) {
    return fl::ModelState({{"w", at::tensor({w}), false}, {"b", at::tensor({b}), true}});
  };
  WeightedMean mean;
  ASSERT_TRUE(mean.Add(state(4, 8), 1).ok());
  ASSERT_TRUE(mean.Add(state(0, 0), 3).ok());
  auto next = mean.StepFrom(state(10, 10), 0.5);
  ASSERT_TRUE(next.ok());
  EXPECT_FLOAT_EQ(next->tensor(0).item<float>(), 10.5f);
  EXPECT_FLOAT_EQ(next->tensor(1).item<float>(), 12.0f);
  EXPECT_FALSE(mean.StepFrom(State({1, 2, 3}), 1.0).ok());
  EXPECT_EQ(WeightedMean().StepFrom(state(0, 0), 1.0).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(WeightedMeanTest, NonPositiveWeightIsRejected) {
  WeightedMean mean;
  EXPECT_EQ(mean.Add(State({1}), 0).message(), "weight must be > 0, got 0");
  EXPECT_TRUE(mean.empty());
}

TEST(WeightedMeanTest, EmptyAndReset) {
  WeightedMean mean;
  EXPECT_EQ(mean.Mean().status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(mean.Add(State({1}), 2).ok());
  mean.Reset();
  EXPECT_TRUE(mean.empty());
  EXPECT_EQ(mean.total_weight(), 0);
}

TEST(WeightedMeanTest, PartialSumsOfSharesMergeToTheWholeMean) {
  const fl::ModelState global = State({0, 0});
  WeightedMean first, second, none;
  ASSERT_TRUE(first.Add(State({4, 0}), 1).ok());
  ASSERT_TRUE(second.Add(State({0, -4}), 3).ok());
  NamedSums a, b, empty;
  first.AddPartialSums("m/", global, a);
  second.AddPartialSums("m/", global, b);
  none.AddPartialSums("m/", global, empty);
  ASSERT_TRUE(CheckPartialSums(a, empty).ok());
  EXPECT_EQ(a.size(), 3u);  // m/sum/w, m/total_weight, m/count
  for (const auto& [name, tensor] : empty) EXPECT_TRUE(tensor.eq(0).all().item<bool>()) << name;
  NamedSums sums;
  for (const auto& [name, tensor] : a) sums[name] = tensor + b.at(name) + empty.at(name);
  WeightedMean merged;
  merged.MergePartialSums("m/", global, sums);
  EXPECT_EQ(merged.count(), 2);
  EXPECT_DOUBLE_EQ(merged.total_weight(), 4);
  EXPECT_TRUE(merged.Mean()->tensor(0).allclose(at::tensor({1.0f, -3.0f})));
  // No update on any process: as empty as one that saw none.
  merged.MergePartialSums("m/", global, empty);
  EXPECT_TRUE(merged.empty());
}

TEST(WeightedMeanTest, Weighting) {
  fl::ClientUpdate update;
  update.num_examples = 7;
  EXPECT_EQ(WeightOf(update, ClientWeighting::kNumExamples), 7.0);
  EXPECT_EQ(WeightOf(update, ClientWeighting::kUniform), 1.0);
}

}  // namespace
}  // namespace aggregators
