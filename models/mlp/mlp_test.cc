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

TEST(MlpTest, LayerInputsAreWhatEachLinearLayerReceives) {
  torch::manual_seed(0);
  auto model = *Mlp({5, 4}, true);
  const fl::ModelState state = fl::ModelState::FromModule(*model);
  at::Tensor x = at::randn({3, 1, 28, 28});
  auto inputs = model->LayerInputs(x);
  ASSERT_TRUE(inputs.ok()) << inputs.status();
  ASSERT_EQ(inputs->size(), 3u);
  // Recompute each layer by hand from the named weights.
  auto param = [&](const std::string& name) {
    for (const auto& e : state.entries()) {
      if (e.name == name) return e.tensor;
    }
    ADD_FAILURE() << "no parameter " << name;
    return at::Tensor();
  };
  at::Tensor h = x.flatten(1);
  for (const fl::Model::LayerInput& layer : *inputs) {
    EXPECT_TRUE(layer.kernel.empty());
    EXPECT_TRUE(at::allclose(layer.input, h)) << layer.weight;
    h = at::linear(h, param(layer.weight), param(layer.bias));
    if (&layer != &inputs->back()) h = h.relu();
  }
  EXPECT_EQ((*inputs)[0].weight, "layers.0.weight");
  EXPECT_EQ((*inputs)[2].bias, "layers.4.bias");
  EXPECT_TRUE(at::allclose(h, model->Forward(x)));
  EXPECT_EQ((*Mlp({5}, false))->LayerInputs(x)->front().bias, "");
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
