#include <ATen/ATen.h>
#include <torch/utils.h>

#include "aggregators/common/class_aware_mean.h"
#include "fl/aggregator.h"
#include "fl/registry.h"
#include "gtest/gtest.h"

namespace aggregators {
namespace {

fl::ClientUpdate Update(const fl::ModelState& model, const fl::ModelState& global) {
  fl::ClientUpdate update;
  update.num_examples = 10;
  update.delta = fl::ModelState::Difference(model, global);
  update.extras[kClassCountsExtra] = fl::ModelState({{"counts", at::tensor({5, 5}, at::kLong), false}});
  return update;
}

TEST(OtFusionTest, FusingAModelWithAPermutedCopyGivesTheModel) {
  torch::manual_seed(6);
  const fl::ModelState global({{"w0", at::zeros({4, 3}), false}, {"w1", at::zeros({2, 4}), false}});
  const fl::ModelState model({{"w0", at::randn({4, 3}), false}, {"w1", at::randn({2, 4}), false}});
  const at::Tensor shuffle = at::tensor({3, 1, 0, 2}, at::kLong);
  const fl::ModelState copy({{"w0", model.tensor(0).index_select(0, shuffle), false},
                             {"w1", model.tensor(1).index_select(1, shuffle), false}});
  auto aggregator = fl::Registry<fl::Aggregator>::Global().Create("ot_fusion", google::protobuf::Any());
  ASSERT_TRUE(aggregator.ok()) << aggregator.status();
  fl::ServerContext context;
  ASSERT_TRUE((*aggregator)->Configure(global, context).ok());
  ASSERT_TRUE((*aggregator)->Accumulate(Update(model, global), context).ok());
  ASSERT_TRUE((*aggregator)->Accumulate(Update(copy, global), context).ok());
  auto fused = (*aggregator)->Finalize(global, context);
  ASSERT_TRUE(fused.ok()) << fused.status();
  // A plain average of the two would mix different neurons.
  EXPECT_TRUE(at::allclose(fused->tensor(0), model.tensor(0)));
  EXPECT_TRUE(at::allclose(fused->tensor(1), model.tensor(1)));
}

TEST(OtFusionTest, RefusesAModelThatIsNotAChainOfLinearLayers) {
  auto aggregator = fl::Registry<fl::Aggregator>::Global().Create("ot_fusion", google::protobuf::Any());
  ASSERT_TRUE(aggregator.ok());
  fl::ServerContext context;
  auto plan = (*aggregator)->Configure(fl::ModelState({{"conv", at::zeros({4, 3, 3, 3}), false},
                                                       {"fc", at::zeros({2, 4}), false}}),
                                       context);
  EXPECT_FALSE(plan.ok());
}

}  // namespace
}  // namespace aggregators
