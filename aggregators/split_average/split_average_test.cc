#include <ATen/ATen.h>

#include "aggregators/common/class_aware_mean.h"
#include "aggregators/split_average/split_average_options.pb.h"
#include "fl/aggregator.h"
#include "fl/registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace aggregators {
namespace {

std::unique_ptr<fl::Aggregator> Create(int min_class_examples) {
  fedkit::aggregators::SplitAverageOptions options;
  options.set_min_class_examples(min_class_examples);
  google::protobuf::Any any;
  any.PackFrom(options);
  auto aggregator = fl::Registry<fl::Aggregator>::Global().Create("split_average", any);
  EXPECT_TRUE(aggregator.ok()) << aggregator.status();
  return aggregator.ok() ? *std::move(aggregator) : nullptr;
}

fl::ClientUpdate Update(float hidden, float out, std::vector<int64_t> counts) {
  fl::ClientUpdate update;
  update.num_examples = 10;
  update.delta = fl::ModelState({{"hidden", at::full({2, 3}, hidden), false},
                                 {"out", at::full({2, 2}, out), false}});
  update.extras[kClassCountsExtra] = fl::ModelState({{"counts", at::tensor(counts, at::kLong), false}});
  return update;
}

TEST(SplitAverageTest, UniformHiddenMeanAndPerClassClassifierRows) {
  auto aggregator = Create(2);
  const fl::ModelState global({{"hidden", at::zeros({2, 3}), false}, {"out", at::ones({2, 2}), false}});
  fl::ServerContext context;
  auto plan = aggregator->Configure(global, context);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->hooks.size(), 1u);
  EXPECT_EQ(plan->hooks[0].name, "class_counts");
  // Sizes do not weigh: 10 and 1000 examples alike. Class 1 of the first client has a
  // single example, below the threshold of 2.
  fl::ClientUpdate a = Update(1, 2, {5, 1});
  fl::ClientUpdate b = Update(4, 6, {3, 3});
  b.num_examples = 1000;
  ASSERT_TRUE(aggregator->Accumulate(a, context).ok());
  ASSERT_TRUE(aggregator->Accumulate(b, context).ok());
  auto result = aggregator->Finalize(global, context);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(at::equal(result->tensor(0), at::full({2, 3}, 2.5f)));
  // Row 0: 1 + (2 + 6) / 2 = 5; row 1: client b only, 1 + 6 = 7.
  EXPECT_TRUE(at::equal(result->tensor(1), at::tensor({5.0f, 5.0f, 7.0f, 7.0f}).view({2, 2})));
}

TEST(SplitAverageTest, RefusesAnUpdateWithoutClassCounts) {
  auto aggregator = Create(2);
  const fl::ModelState global({{"out", at::ones({2, 2}), false}});
  fl::ServerContext context;
  ASSERT_TRUE(aggregator->Configure(global, context).ok());
  fl::ClientUpdate update;
  update.delta = global;
  EXPECT_THAT(std::string(aggregator->Accumulate(update, context).message()),
              ::testing::HasSubstr("lacks the extra \"class_counts\""));
}

TEST(SplitAverageTest, RejectsANonPositiveThreshold) {
  fedkit::aggregators::SplitAverageOptions options;
  options.set_min_class_examples(0);
  google::protobuf::Any any;
  any.PackFrom(options);
  EXPECT_EQ(fl::Registry<fl::Aggregator>::Global().Create("split_average", any).status().message(),
            "options.min_class_examples: must be >= 1, got 0");
}

}  // namespace
}  // namespace aggregators
