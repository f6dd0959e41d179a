#include <vector>

#include <ATen/ATen.h>

#include "aggregators/common/class_aware_mean.h"
#include "fl/client_hook.h"
#include "fl/registry.h"
#include "gtest/gtest.h"

namespace aggregators {
namespace {

TEST(ClassCountsTest, CountsTheClientsWholeShareUpToTheFederationsLargestLabel) {
  auto hook = fl::Registry<fl::ClientHook>::Global().Create("class_counts", google::protobuf::Any());
  ASSERT_TRUE(hook.ok()) << hook.status();
  fl::Examples examples{at::zeros({7, 2}), at::tensor({0, 1, 1, 2, 2, 2, 4}, at::kLong)};
  const std::vector<int64_t> share = {1, 2, 3, 6};
  std::vector<int64_t> train = {1, 6};  // another hook held 2 and 3 out: still counted
  fl::HookContext context;
  context.examples = &examples;
  context.client_indices = &share;
  context.train_indices = &train;
  fl::ClientUpdate update;
  ASSERT_TRUE((*hook)->AfterTraining(context, update).ok());
  ASSERT_EQ(update.extras.count(kClassCountsExtra), 1u);
  EXPECT_TRUE(at::equal(update.extras.at(kClassCountsExtra).tensor(0),
                        at::tensor({0, 2, 1, 0, 1}, at::kLong)));
}

}  // namespace
}  // namespace aggregators
