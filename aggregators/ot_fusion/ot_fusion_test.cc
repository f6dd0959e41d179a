#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <torch/utils.h>

#include "aggregators/common/class_aware_mean.h"
#include "aggregators/ot_fusion/ot_fusion_options.pb.h"
#include "fl/aggregator.h"
#include "fl/registry.h"
#include "gtest/gtest.h"

namespace aggregators {
namespace {

fl::ClientUpdate Update(const fl::ModelState& model, const fl::ModelState& global,
                        std::vector<int64_t> counts = {5, 5}) {
  fl::ClientUpdate update;
  update.num_examples = 10;
  update.delta = fl::ModelState::Difference(model, global);
  update.extras[kClassCountsExtra] = fl::ModelState({{"counts", at::tensor(counts, at::kLong), false}});
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

TEST(OtFusionTest, MinClassExamplesDecidesWhichClassifierRowsAClientAveragesInto) {
  // Two clients with the same hidden layer (so the alignment keeps every neuron in
  // place) and classifiers of all 1s and all 3s. Client A has 2 examples of class 1,
  // client B 5: at the default threshold 2 both hold class 1 and its row is the mean
  // 2; at 3 only B holds it and the row is B's 3. Class 0 (5 examples each) is held
  // by both either way.
  torch::manual_seed(7);
  const fl::ModelState global({{"w0", at::zeros({4, 3}), false}, {"w1", at::zeros({2, 4}), false}});
  const at::Tensor hidden = at::randn({4, 3});
  const fl::ModelState a({{"w0", hidden, false}, {"w1", at::ones({2, 4}), false}});
  const fl::ModelState b({{"w0", hidden, false}, {"w1", at::full({2, 4}, 3.0f), false}});
  auto fuse = [&](const fedkit::aggregators::OtFusionOptions& options) {
    google::protobuf::Any any;
    any.PackFrom(options);
    auto aggregator = fl::Registry<fl::Aggregator>::Global().Create("ot_fusion", any);
    EXPECT_TRUE(aggregator.ok()) << aggregator.status();
    fl::ServerContext context;
    EXPECT_TRUE((*aggregator)->Configure(global, context).ok());
    EXPECT_TRUE((*aggregator)->Accumulate(Update(a, global, {5, 2}), context).ok());
    EXPECT_TRUE((*aggregator)->Accumulate(Update(b, global, {5, 5}), context).ok());
    auto fused = (*aggregator)->Finalize(global, context);
    EXPECT_TRUE(fused.ok()) << fused.status();
    return *std::move(fused);
  };
  fedkit::aggregators::OtFusionOptions options;
  const fl::ModelState by_default = fuse(options);
  EXPECT_TRUE(at::allclose(by_default.tensor(0), hidden));
  EXPECT_TRUE(at::equal(by_default.tensor(1), at::full({2, 4}, 2.0f)));

  options.set_min_class_examples(3);
  const fl::ModelState stricter = fuse(options);
  EXPECT_TRUE(at::allclose(stricter.tensor(0), hidden));
  EXPECT_TRUE(at::equal(stricter.tensor(1),
                        at::stack({at::full({4}, 2.0f), at::full({4}, 3.0f)})))
      << stricter.tensor(1);

  options.set_min_class_examples(0);
  google::protobuf::Any any;
  any.PackFrom(options);
  EXPECT_EQ(
      std::string(fl::Registry<fl::Aggregator>::Global().Create("ot_fusion", any).status().message()),
      "options.min_class_examples: must be >= 1, got 0");
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
