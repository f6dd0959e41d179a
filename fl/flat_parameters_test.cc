#include "fl/flat_parameters.h"

#include <memory>
#include <vector>

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adam.h>
#include <torch/optim/sgd.h>
#include <torch/utils.h>

#include "gtest/gtest.h"

namespace fl {
namespace {

// Convolution, bias-free linear layer and a frozen tensor: tensors of several
// shapes, one left out of training.
struct Net : torch::nn::Module {
  Net() {
    conv = register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(2, 3, 3)));
    linear = register_module("linear",
                             torch::nn::Linear(torch::nn::LinearOptions(3 * 4 * 4, 5).bias(false)));
    frozen = register_parameter("frozen", at::ones({5}), /*requires_grad=*/false);
  }
  at::Tensor Forward(const at::Tensor& x) {
    return linear->forward(conv->forward(x).relu().flatten(1)) * frozen;
  }
  torch::nn::Conv2d conv{nullptr};
  torch::nn::Linear linear{nullptr};
  at::Tensor frozen;
};

struct Batch {
  at::Tensor x = at::randn({4, 2, 6, 6});
  at::Tensor y = at::randint(5, {4}, at::kLong);
};

std::vector<at::Tensor> Values(Net& net) {
  std::vector<at::Tensor> values;
  for (const at::Tensor& p : net.parameters()) values.push_back(p.detach().clone());
  return values;
}

TEST(FlatParametersTest, ValuesKeptTrainableTensorsShareOneBufferFrozenOnesDoNot) {
  torch::manual_seed(1);
  Net net;
  const std::vector<at::Tensor> before = Values(net);
  FlatParameters flat(net);
  ASSERT_EQ(flat.optimizer_tensors().size(), 1u);
  const at::Tensor& buffer = flat.optimizer_tensors()[0];
  EXPECT_EQ(buffer.numel(), 3 * 2 * 3 * 3 + 3 + 5 * 48);
  const std::vector<at::Tensor> after = net.parameters();
  for (size_t i = 0; i < after.size(); ++i) EXPECT_TRUE(after[i].equal(before[i])) << i;
  EXPECT_TRUE(net.conv->weight.storage().is_alias_of(buffer.storage()));
  EXPECT_TRUE(net.linear->weight.storage().is_alias_of(buffer.storage()));
  EXPECT_FALSE(net.frozen.storage().is_alias_of(buffer.storage()));
}

TEST(FlatParametersTest, BackwardFillsTheFlatGradient) {
  torch::manual_seed(2);
  Net net;
  FlatParameters flat(net);
  Batch batch;
  at::cross_entropy_loss(net.Forward(batch.x), batch.y).backward();
  flat.RelinkGradients();
  std::vector<at::Tensor> pieces;
  for (const at::Tensor& p : net.parameters()) {
    if (p.requires_grad()) pieces.push_back(p.grad().flatten());
  }
  EXPECT_TRUE(flat.optimizer_tensors()[0].grad().equal(at::cat(pieces)));
  EXPECT_GT(flat.optimizer_tensors()[0].grad().abs().sum().item<double>(), 0.0);
}

TEST(FlatParametersTest, ASecondCallAdoptsTheLayoutInsteadOfCopying) {
  Net net;
  const void* first = FlatParameters(net).optimizer_tensors()[0].data_ptr();
  FlatParameters again(net);
  EXPECT_EQ(again.optimizer_tensors()[0].data_ptr(), first);
  EXPECT_EQ(again.optimizer_tensors()[0].grad().data_ptr(),
            net.conv->weight.grad().data_ptr());
}

// The optimisers' arithmetic is element-wise, so one flat tensor must give exactly
// the per-tensor result, weight decay and momentum included.
void ExpectSameTrajectory(
    const std::function<std::unique_ptr<torch::optim::Optimizer>(std::vector<at::Tensor>)>&
        make_optimizer) {
  torch::manual_seed(3);
  Net per_tensor;
  torch::manual_seed(3);
  Net flat_net;
  FlatParameters flat(flat_net);
  std::unique_ptr<torch::optim::Optimizer> a = make_optimizer(per_tensor.parameters());
  std::unique_ptr<torch::optim::Optimizer> b = make_optimizer(flat.optimizer_tensors());
  for (int step = 0; step < 5; ++step) {
    Batch batch;
    a->zero_grad();
    at::cross_entropy_loss(per_tensor.Forward(batch.x), batch.y).backward();
    a->step();
    flat.ClearGradients();
    at::cross_entropy_loss(flat_net.Forward(batch.x), batch.y).backward();
    flat.RelinkGradients();
    b->step();
  }
  const std::vector<at::Tensor> expected = per_tensor.parameters();
  const std::vector<at::Tensor> actual = flat_net.parameters();
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_TRUE(actual[i].equal(expected[i])) << "parameter " << i;
  }
}

TEST(FlatParametersTest, AdamOnTheFlatTensorMatchesAdamPerTensorExactly) {
  ExpectSameTrajectory([](std::vector<at::Tensor> params) {
    return std::make_unique<torch::optim::Adam>(
        params, torch::optim::AdamOptions(0.01).weight_decay(0.1));
  });
}

TEST(FlatParametersTest, SgdWithMomentumOnTheFlatTensorMatchesSgdPerTensorExactly) {
  ExpectSameTrajectory([](std::vector<at::Tensor> params) {
    return std::make_unique<torch::optim::SGD>(
        params, torch::optim::SGDOptions(0.1).momentum(0.9).weight_decay(0.01));
  });
}

// The gradients of one backward pass of `batch` alone, per trainable parameter.
std::vector<at::Tensor> FreshGradients(Net& net, const Batch& batch) {
  torch::manual_seed(5);
  Net twin;
  torch::NoGradGuard no_grad;
  const std::vector<at::Tensor> from = net.parameters();
  const std::vector<at::Tensor> to = twin.parameters();
  for (size_t i = 0; i < from.size(); ++i) to[i].copy_(from[i]);
  {
    at::AutoGradMode grad(true);
    at::cross_entropy_loss(twin.Forward(batch.x), batch.y).backward();
  }
  std::vector<at::Tensor> gradients;
  for (const at::Tensor& p : twin.parameters()) {
    if (p.requires_grad()) gradients.push_back(p.grad());
  }
  return gradients;
}

// LibTorch 2.x's Optimizer::zero_grad() sets every gradient to none, the flat one
// included, and the optimiser would then skip every parameter. ClearGradients
// keeps the flat gradient, and the next pass's gradient, not the sum, lands in it.
TEST(FlatParametersTest, AfterClearGradientsThePassGradientAloneLandsInTheBuffer) {
  torch::manual_seed(4);
  Net net;
  FlatParameters flat(net);
  Batch first;
  at::cross_entropy_loss(net.Forward(first.x), first.y).backward();
  flat.RelinkGradients();
  const at::Tensor& flat_tensor = flat.optimizer_tensors()[0];
  ASSERT_GT(flat_tensor.grad().abs().sum().item<double>(), 0.0);
  flat.ClearGradients();
  ASSERT_TRUE(flat_tensor.grad().defined());
  Batch second;
  const std::vector<at::Tensor> expected = FreshGradients(net, second);
  at::cross_entropy_loss(net.Forward(second.x), second.y).backward();
  flat.RelinkGradients();
  EXPECT_EQ(net.linear->weight.grad().data_ptr<float>(),
            flat_tensor.grad().data_ptr<float>() + 3 * 2 * 3 * 3 + 3);
  std::vector<at::Tensor> pieces;
  for (const at::Tensor& g : expected) pieces.push_back(g.flatten());
  EXPECT_TRUE(flat_tensor.grad().equal(at::cat(pieces)));
}

TEST(FlatParametersTest, PerTensorLayoutLeavesTheParametersAndTakesThePassGradient) {
  torch::manual_seed(6);
  Net net;
  const std::vector<at::Tensor> before = Values(net);
  FlatParameters flat(net, FlatParameters::Layout::kPerTensor);
  const std::vector<at::Tensor> params = net.parameters();
  ASSERT_EQ(flat.optimizer_tensors().size(), 3u);  // the frozen tensor is left out
  EXPECT_FALSE(params[0].storage().is_alias_of(params[2].storage()));
  for (size_t i = 0; i < params.size(); ++i) EXPECT_TRUE(params[i].equal(before[i])) << i;
  for (int pass = 0; pass < 2; ++pass) {
    Batch batch;
    const std::vector<at::Tensor> expected = FreshGradients(net, batch);
    flat.ClearGradients();
    at::cross_entropy_loss(net.Forward(batch.x), batch.y).backward();
    flat.RelinkGradients();
    for (size_t i = 0; i < expected.size(); ++i) {
      EXPECT_TRUE(flat.optimizer_tensors()[i].grad().equal(expected[i])) << pass << " " << i;
    }
  }
}

// A parameter the pass does not reach must still be stepped, as with a zero
// gradient: weight decay shrinks it. Skipped, it would keep its value.
TEST(FlatParametersTest, AParameterWithoutAGradientGetsZerosInEitherLayout) {
  for (FlatParameters::Layout layout :
       {FlatParameters::Layout::kOneBuffer, FlatParameters::Layout::kPerTensor}) {
    torch::manual_seed(7);
    Net net;
    const at::Tensor bias_before = net.conv->bias.detach().clone();
    FlatParameters flat(net, layout);
    torch::optim::SGD sgd(flat.optimizer_tensors(),
                          torch::optim::SGDOptions(0.1).weight_decay(0.5));
    flat.ClearGradients();
    // Only the linear layer is reached: the convolution's tensors get no gradient.
    const at::Tensor features = at::randn({4, 48});
    at::cross_entropy_loss(net.linear->forward(features), at::randint(5, {4}, at::kLong))
        .backward();
    flat.RelinkGradients();
    ASSERT_TRUE(net.conv->bias.grad().defined());
    EXPECT_EQ(net.conv->bias.grad().abs().sum().item<double>(), 0.0);
    sgd.step();
    EXPECT_TRUE(net.conv->bias.detach().allclose(bias_before * 0.95)) << static_cast<int>(layout);
  }
}

TEST(FlatParametersTest, AGradientAutogradReplacedIsCopiedBackIntoTheBuffer) {
  Net net;
  FlatParameters flat(net);
  // What autograd does when it builds a graph of the gradient: a new tensor.
  net.linear->weight.mutable_grad() = at::full_like(net.linear->weight, 2.0);
  flat.RelinkGradients();
  const at::Tensor& gradient = flat.optimizer_tensors()[0].grad();
  const int64_t offset = 3 * 2 * 3 * 3 + 3;
  EXPECT_TRUE(gradient.narrow(0, offset, 5 * 48).eq(2.0).all().item<bool>());
  EXPECT_EQ(net.linear->weight.grad().data_ptr<float>(), gradient.data_ptr<float>() + offset);
}

TEST(FlatParametersTest, MixedDtypesAreLeftAsTheyAre) {
  Net net;
  net.linear->weight.set_data(net.linear->weight.to(at::kDouble));
  FlatParameters flat(net);
  EXPECT_EQ(flat.optimizer_tensors().size(), 3u);
}

}  // namespace
}  // namespace fl
