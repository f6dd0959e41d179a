#include <ATen/ATen.h>
#include <torch/utils.h>

#include "fl/model.h"
#include "fl/model_state.h"
#include "fl/registry.h"
#include "gtest/gtest.h"
#include "models/mlp/mlp_options.pb.h"

namespace models {
namespace {

absl::StatusOr<std::unique_ptr<fl::Model>> Mlp(std::vector<int> hidden, bool bias) {
  fedkit::models::MlpOptions options;
  for (int h : hidden) options.add_hidden(h);
  options.set_bias(bias);
  google::protobuf::Any any;
  any.PackFrom(options);
  return fl::Registry<fl::Model>::Global().Create("mlp", any, {{1, 28, 28}, 10});
}

TEST(MlpTest, ParameterCountsMatchThePapers) {
  // FedLAW's 784-200-200-10 with biases.
  EXPECT_EQ(fl::ModelState::FromModule(**Mlp({200, 200}, true)).NumParameters(),
            784 * 200 + 200 + 200 * 200 + 200 + 200 * 10 + 10);
  // MA-Echo's bias-free 784-400-200-100-10.
  EXPECT_EQ(fl::ModelState::FromModule(**Mlp({400, 200, 100}, false)).NumParameters(),
            784 * 400 + 400 * 200 + 200 * 100 + 100 * 10);
}

TEST(MlpTest, ForwardBackwardOnABatch) {
  torch::manual_seed(0);
  auto model = *Mlp({32}, true);
  at::Tensor x = at::randn({8, 1, 28, 28});
  at::Tensor logits = model->Forward(x);
  ASSERT_EQ(logits.sizes(), (std::vector<int64_t>{8, 10}));
  at::cross_entropy_loss(logits, at::zeros({8}, at::kLong)).backward();
  for (const auto& p : model->parameters()) {
    ASSERT_TRUE(p.grad().defined());
    EXPECT_GT(p.grad().abs().sum().item<double>(), 0.0);
  }
}

TEST(MlpTest, NoHiddenLayerIsLogisticRegression) {
  EXPECT_EQ(fl::ModelState::FromModule(**Mlp({}, true)).NumParameters(), 784 * 10 + 10);
}

TEST(MlpTest, RejectsNonPositiveWidths) {
  auto model = Mlp({200, 0, -3}, true);
  EXPECT_EQ(model.status().message(),
            "options.hidden[1]: must be >= 1, got 0\noptions.hidden[2]: must be >= 1, got -3");
}

}  // namespace
}  // namespace models
