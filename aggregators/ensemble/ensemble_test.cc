#include <memory>

#include <ATen/ATen.h>

#include "aggregators/common/class_aware_mean.h"
#include "aggregators/ensemble/ensemble_options.pb.h"
#include "fl/aggregator.h"
#include "fl/model.h"
#include "fl/registry.h"
#include "gtest/gtest.h"

namespace aggregators {
namespace {

class Linear : public fl::Model {
 public:
  Linear() { w_ = register_parameter("w", at::zeros({2, 2})); }
  at::Tensor Forward(const at::Tensor& x) override { return at::linear(x, w_); }

 private:
  at::Tensor w_;
};

fl::ClientUpdate Update(at::Tensor w, std::vector<int64_t> counts) {
  fl::ClientUpdate update;
  update.num_examples = 10;
  update.delta = fl::ModelState({{"w", w, false}});
  update.extras[kClassCountsExtra] = fl::ModelState({{"counts", at::tensor(counts, at::kLong), false}});
  return update;
}

TEST(EnsembleTest, MaskedLogitsAveragedOverTheHoldersOfEachClass) {
  auto aggregator = fl::Registry<fl::Aggregator>::Global().Create("ensemble", google::protobuf::Any());
  ASSERT_TRUE(aggregator.ok()) << aggregator.status();
  const fl::ModelState global({{"w", at::zeros({2, 2}), false}});
  fl::ServerContext context;
  context.new_model = [] { return absl::StatusOr<std::unique_ptr<fl::Model>>(std::make_unique<Linear>()); };
  ASSERT_TRUE((*aggregator)->Configure(global, context).ok());
  // Client A holds class 0 only, client B both.
  const at::Tensor wa = at::tensor({1.0f, 2.0f, 3.0f, 4.0f}).view({2, 2});
  const at::Tensor wb = at::tensor({5.0f, 6.0f, 7.0f, 8.0f}).view({2, 2});
  ASSERT_TRUE((*aggregator)->Accumulate(Update(wa, {4, 0}), context).ok());
  ASSERT_TRUE((*aggregator)->Accumulate(Update(wb, {4, 4}), context).ok());
  auto model = (*aggregator)->Finalize(global, context);
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_TRUE(context.evaluation_predictor);
  // x = [1, 1]: A's logits [3, 7] masked to [3, 0]; B's [11, 15]. Class 0: (3 + 11) / 2,
  // class 1: 15 / 1.
  const at::Tensor logits = context.evaluation_predictor(at::ones({1, 2}));
  EXPECT_TRUE(at::allclose(logits, at::tensor({7.0f, 15.0f}).view({1, 2})));
  // The returned model is the split average: row 0 (1+5)/2, (2+6)/2; row 1 B's.
  EXPECT_TRUE(at::allclose(model->tensor(0), at::tensor({3.0f, 4.0f, 7.0f, 8.0f}).view({2, 2})));
}

TEST(EnsembleTest, RejectsANonPositiveThreshold) {
  fedkit::aggregators::EnsembleOptions options;
  options.set_min_class_examples(0);
  google::protobuf::Any any;
  any.PackFrom(options);
  EXPECT_EQ(fl::Registry<fl::Aggregator>::Global().Create("ensemble", any).status().message(),
            "options.min_class_examples: must be >= 1, got 0");
}

}  // namespace
}  // namespace aggregators
