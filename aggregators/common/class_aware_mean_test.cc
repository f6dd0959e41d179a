#include "aggregators/common/class_aware_mean.h"

#include <ATen/ATen.h>

#include "gtest/gtest.h"

namespace aggregators {
namespace {

// hidden.weight {2, 2}, out.weight {3, 2}, out.bias {3}, an integer buffer.
fl::ModelState Layout(float value) {
  return fl::ModelState({{"hidden.weight", at::full({2, 2}, value), false},
                         {"out.weight", at::full({3, 2}, value), false},
                         {"out.bias", at::full({3}, value), false},
                         {"count", at::full({1}, static_cast<int64_t>(value), at::kLong), true}});
}

at::Tensor Held(std::vector<int64_t> held) { return at::tensor(held, at::kLong).to(at::kBool); }

fl::ClientUpdate WithCounts(std::vector<int64_t> counts) {
  fl::ClientUpdate update;
  update.extras[kClassCountsExtra] = fl::ModelState({{"counts", at::tensor(counts, at::kLong), false}});
  return update;
}

TEST(ClassAwareMeanTest, FindsTheLastMatrixAndItsBias) {
  auto classifier = FindClassifier(Layout(0));
  ASSERT_TRUE(classifier.ok());
  EXPECT_EQ(classifier->weight, 1u);
  EXPECT_EQ(classifier->bias, 2u);
  EXPECT_EQ(classifier->classes, 3);
  EXPECT_FALSE(FindClassifier(fl::ModelState({{"b", at::zeros({3}), false}})).ok());
}

TEST(ClassAwareMeanTest, ClassesHeldCountsFromTheThreshold) {
  auto held = ClassesHeld(WithCounts({5, 1, 2}), 3, 2);
  ASSERT_TRUE(held.ok()) << held.status();
  EXPECT_TRUE(at::equal(*held, Held({1, 0, 1})));
  // Fewer labels than rows: the rest are not held.
  EXPECT_TRUE(at::equal(*ClassesHeld(WithCounts({3}), 3, 1), Held({1, 0, 0})));
  EXPECT_FALSE(ClassesHeld(WithCounts({1, 1, 1, 4}), 3, 1).ok());
  EXPECT_EQ(ClassesHeld(fl::ClientUpdate(), 3, 1).status().message(),
            "the update lacks the extra \"class_counts\" (the \"class_counts\" client hook's "
            "per-class example counts)");
}

TEST(ClassAwareMeanTest, HandComputedSplitAverage) {
  const fl::ModelState global = Layout(1);
  ClassAwareMean mean(*FindClassifier(global));
  // Client A (delta 2) holds classes 0 and 1, client B (delta 6) class 1 only.
  ASSERT_TRUE(mean.Add(Layout(2), Held({1, 1, 0})).ok());
  ASSERT_TRUE(mean.Add(Layout(6), Held({0, 1, 0})).ok());
  auto result = mean.StepFrom(global);
  ASSERT_TRUE(result.ok()) << result.status();
  // Hidden: 1 + (2 + 6) / 2 = 5 everywhere.
  EXPECT_TRUE(at::equal(result->tensor(0), at::full({2, 2}, 5.0f)));
  // Classifier rows: class 0 = 1 + 2 (A only), class 1 = 1 + (2 + 6) / 2, class 2 held by
  // nobody: zero. The bias likewise.
  EXPECT_TRUE(at::equal(result->tensor(1), at::tensor({3.0f, 3.0f, 5.0f, 5.0f, 0.0f, 0.0f}).view({3, 2})));
  EXPECT_TRUE(at::equal(result->tensor(2), at::tensor({3.0f, 5.0f, 0.0f})));
  // Integer buffer: 1 + round(8 / 2).
  EXPECT_EQ(result->tensor(3).item<int64_t>(), 5);
}

TEST(ClassAwareMeanTest, RefusesADifferentLayout) {
  ClassAwareMean mean(*FindClassifier(Layout(0)));
  ASSERT_TRUE(mean.Add(Layout(1), at::ones({3}, at::kBool)).ok());
  fl::ModelState other({{"x", at::zeros({3, 2}), false}});
  EXPECT_FALSE(mean.Add(other, at::ones({3}, at::kBool)).ok());
  EXPECT_EQ(mean.count(), 1);
  EXPECT_FALSE(ClassAwareMean(*FindClassifier(Layout(0))).StepFrom(Layout(0)).ok());
}

}  // namespace
}  // namespace aggregators
