// SCAFFOLD against values computed by hand from Algorithm 1 of Karimireddy et al.
// (ICML 2020), plus the hook's correction, option I's gradient, checkpoints and
// rejection of bad updates.

#include <numeric>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/utils.h>

#include "aggregators/scaffold/scaffold_options.pb.h"
#include "fl/aggregator.h"
#include "fl/client_hook.h"
#include "fl/client_state_store.h"
#include "fl/local_trainer.h"
#include "fl/model.h"
#include "fl/registry.h"
#include "fl/spec.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace aggregators {
namespace {

using ::fedkit::aggregators::ScaffoldHookOptions;
using ::fedkit::aggregators::ScaffoldOptions;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// One 2-vector parameter "w" and a buffer, which carries no control variate.
class VectorModel : public fl::Model {
 public:
  VectorModel() {
    w_ = register_parameter("w", at::zeros({2}));
    running_ = register_buffer("running", at::zeros({1}));
  }
  at::Tensor Forward(const at::Tensor& x) override { return x * w_; }
  at::Tensor w_, running_;
};

class LinearModel : public fl::Model {
 public:
  LinearModel() {
    weight_ = register_parameter("weight", at::randn({3, 4}));
    bias_ = register_parameter("bias", at::randn({3}));
  }
  at::Tensor Forward(const at::Tensor& x) override { return at::linear(x, weight_, bias_); }
  at::Tensor weight_, bias_;
};

// A BatchNorm in front of a linear layer: a train-mode forward pass moves its
// running statistics.
class NormModel : public fl::Model {
 public:
  NormModel() {
    bn_ = register_module("bn", torch::nn::BatchNorm1d(4));
    weight_ = register_parameter("weight", at::randn({3, 4}));
  }
  at::Tensor Forward(const at::Tensor& x) override { return at::linear(bn_->forward(x), weight_); }
  torch::nn::BatchNorm1d bn_{nullptr};
  at::Tensor weight_;
};

absl::StatusOr<std::unique_ptr<fl::Aggregator>> Create(const ScaffoldOptions& options) {
  google::protobuf::Any any;
  any.PackFrom(options);
  return fl::Registry<fl::Aggregator>::Global().Create("scaffold", any);
}

std::unique_ptr<fl::Aggregator> Scaffold(ScaffoldOptions options = {}) {
  auto aggregator = Create(options);
  EXPECT_TRUE(aggregator.ok()) << aggregator.status();
  return *std::move(aggregator);
}

std::unique_ptr<fl::ClientHook> Hook(const fl::HookRequest& request) {
  EXPECT_EQ(request.name, "scaffold");
  auto hook = fl::Registry<fl::ClientHook>::Global().Create(request.name, request.options);
  EXPECT_TRUE(hook.ok()) << hook.status();
  return *std::move(hook);
}

std::unique_ptr<fl::ClientHook> Hook(const ScaffoldHookOptions& options) {
  fl::HookRequest request{"scaffold", {}};
  request.options.PackFrom(options);
  return Hook(request);
}

void ExpectValues(const at::Tensor& actual, std::vector<float> expected) {
  EXPECT_TRUE(actual.allclose(at::tensor(expected), 1e-6, 1e-6)) << actual;
}

void ExpectClose(const at::Tensor& actual, const at::Tensor& expected) {
  EXPECT_TRUE(actual.allclose(expected, 1e-5, 1e-6)) << actual << "\nexpected\n" << expected;
}

// A client of the hand-computed tests: loss f(w) = 1/2 ||w - target||^2 (gradient
// w - target), plain SGD, the hook driven directly.
struct QuadraticClient {
  std::vector<float> target;
  int64_t num_examples = 1;
  VectorModel model;
  fl::TensorMap state;  // the hook's per-client state: c_i

  fl::ClientUpdate Train(const fl::ModelState& global, const fl::RoundPlan& plan, double lr,
                         int steps) {
    EXPECT_TRUE(global.LoadInto(model).ok());
    EXPECT_EQ(plan.hooks.size(), 1u);
    std::unique_ptr<fl::ClientHook> hook = Hook(plan.hooks.at(0));
    fl::Examples no_examples;
    std::vector<int64_t> indices;
    fl::HookContext context;
    context.model = &model;
    context.global = &global;
    context.broadcast = &plan.broadcast;
    context.state = &state;
    context.examples = &no_examples;
    context.train_indices = &indices;
    context.learning_rate = lr;
    EXPECT_TRUE(hook->BeforeTraining(context).ok());
    const at::Tensor a = at::tensor(target);
    for (int k = 0; k < steps; ++k) {
      at::Tensor loss = (model.w_ - a).pow(2).sum().mul(0.5) + hook->LossTerm(context);
      loss.backward();
      at::NoGradGuard no_grad;
      model.w_.sub_(model.w_.grad() * lr);
      model.w_.mutable_grad().zero_();
    }
    fl::ClientUpdate update;
    update.delta = fl::ModelState::Difference(fl::ModelState::FromModule(model), global);
    update.num_examples = num_examples;
    update.local_steps = steps;
    absl::Status status = hook->AfterTraining(context, update);
    EXPECT_TRUE(status.ok()) << status;
    return update;
  }
};

fl::ModelState VectorState(std::vector<float> w, float running) {
  return fl::ModelState({{"w", at::tensor(w), false}, {"running", at::tensor({running}), true}});
}

TEST(ScaffoldTest, OneClientFullParticipationTwoRoundsByHand) {
  // N = 1, one client with f(w) = 1/2 ||w - (4, -2)||^2, eta_l = 0.5, K = 2,
  // eta_g = 1, option II, x = c = c_i = 0 at the start.
  auto scaffold = Scaffold();
  fl::ServerContext context;
  context.num_clients = 1;
  QuadraticClient client{{4, -2}};
  fl::ModelState x = VectorState({0, 0}, 7);

  // Round 1. c - c_i = 0, so plain SGD: y = 0 -> 0 - 0.5 (0 - 4) = 2 -> 2 - 0.5 (2 - 4) = 3;
  // second coordinate 0 -> 0 - 0.5 (0 + 2) = -1 -> -1 - 0.5 (-1 + 2) = -1.5.
  // delta = (3, -1.5). c_i+ = c_i - c - delta / (K eta_l) = -(3, -1.5) / 1 = (-3, 1.5),
  // Delta c_i = (-3, 1.5). x = 0 + 1 * delta = (3, -1.5); c = 0 + (1/1)(-3, 1.5).
  auto plan = scaffold->Configure(x, context);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->broadcast.count("scaffold/c"), 1u);
  ASSERT_EQ(plan->broadcast.at("scaffold/c").size(), 1u);  // the parameter only
  ExpectValues(plan->broadcast.at("scaffold/c").tensor(0), {0, 0});
  fl::ClientUpdate update = client.Train(x, *plan, 0.5, 2);
  ExpectValues(update.delta.tensor(0), {3, -1.5});
  const fl::ModelState& delta_c = update.extras.at("scaffold/delta_c");
  ASSERT_EQ(delta_c.size(), 1u);  // no control variate for the buffer
  EXPECT_EQ(delta_c.entries()[0].name, "w");
  ExpectValues(delta_c.tensor(0), {-3, 1.5});
  ExpectValues(client.state.at("w"), {-3, 1.5});
  ASSERT_TRUE(scaffold->Accumulate(update, context).ok());
  auto next = scaffold->Finalize(x, context);
  ASSERT_TRUE(next.ok()) << next.status();
  x = *next;
  ExpectValues(x.tensor(0), {3, -1.5});
  ExpectValues(x.tensor(1), {7});  // buffer: the client's value, unchanged

  // Round 2. c = c_i = (-3, 1.5): with one client the correction cancels.
  // y = 3 -> 3 - 0.5 (3 - 4) = 3.5 -> 3.5 - 0.5 (3.5 - 4) = 3.75;
  // -1.5 -> -1.5 - 0.5 (-1.5 + 2) = -1.75 -> -1.75 - 0.5 (-1.75 + 2) = -1.875.
  // delta = (0.75, -0.375). c_i+ = (-3, 1.5) - (-3, 1.5) - (0.75, -0.375) / 1 = (-0.75, 0.375);
  // Delta c_i = (-0.75, 0.375) - (-3, 1.5) = (2.25, -1.125).
  // x = (3, -1.5) + (0.75, -0.375) = (3.75, -1.875); c = (-3, 1.5) + (2.25, -1.125) = (-0.75, 0.375).
  plan = scaffold->Configure(x, context);
  ASSERT_TRUE(plan.ok());
  ExpectValues(plan->broadcast.at("scaffold/c").tensor(0), {-3, 1.5});
  update = client.Train(x, *plan, 0.5, 2);
  ExpectValues(update.delta.tensor(0), {0.75, -0.375});
  ExpectValues(update.extras.at("scaffold/delta_c").tensor(0), {2.25, -1.125});
  ExpectValues(client.state.at("w"), {-0.75, 0.375});
  ASSERT_TRUE(scaffold->Accumulate(update, context).ok());
  next = scaffold->Finalize(x, context);
  ASSERT_TRUE(next.ok());
  ExpectValues(next->tensor(0), {3.75, -1.875});
  plan = scaffold->Configure(*next, context);
  ExpectValues(plan->broadcast.at("scaffold/c").tensor(0), {-0.75, 0.375});
}

TEST(ScaffoldTest, TwoClientsCorrectionCancelsDriftByHand) {
  // N = 2, full participation, uniform weights (the paper's mean; the sizes 1 and 3
  // would give other numbers), eta_l = 0.5, K = 2, eta_g = 1, option II.
  // A: f_A = 1/2 ||w - (4, 0)||^2;  B: f_B = 1/2 ||w - (0, 4)||^2.
  // The coordinates are independent and mirror each other, so per coordinate
  // (client with target 4 = "far", target 0 = "near"):
  // Round 1 (c = c_i = 0): far 0 -> 2 -> 3, delta 3, c_far = -3; near stays 0, c_near = 0.
  //   x = 0 + (3 + 0) / 2 = 1.5; c = 0 + (1/2)(-3 + 0) = -1.5.
  // Round 2: far: c - c_far = 1.5; y = 1.5 -> 1.5 - 0.5 (1.5 - 4 + 1.5) = 2
  //   -> 2 - 0.5 (2 - 4 + 1.5) = 2.25; delta 0.75; c_far+ = -3 + 1.5 - 0.75 = -2.25, Dc = 0.75.
  //   near: c - c_near = -1.5; y = 1.5 -> 1.5 - 0.5 (1.5 - 1.5) = 1.5: the correction
  //   cancels the near client's pull to 0 (no drift); delta 0; c_near+ = 0 + 1.5 - 0 = 1.5,
  //   Dc = 1.5.
  //   x = 1.5 + (0.75 + 0) / 2 = 1.875; c = -1.5 + (1/2)(0.75 + 1.5) = -0.375 (= mean of
  //   c_far+ and c_near+, as it stays under full participation).
  ScaffoldOptions options;
  options.set_weighting(ScaffoldOptions::UNIFORM);
  auto scaffold = Scaffold(options);
  fl::ServerContext context;
  context.num_clients = 2;
  QuadraticClient a{{4, 0}, 1};
  QuadraticClient b{{0, 4}, 3};
  fl::ModelState x = VectorState({0, 0}, 0);
  for (int round = 1; round <= 2; ++round) {
    auto plan = scaffold->Configure(x, context);
    ASSERT_TRUE(plan.ok());
    ASSERT_TRUE(scaffold->Accumulate(a.Train(x, *plan, 0.5, 2), context).ok());
    ASSERT_TRUE(scaffold->Accumulate(b.Train(x, *plan, 0.5, 2), context).ok());
    auto next = scaffold->Finalize(x, context);
    ASSERT_TRUE(next.ok()) << next.status();
    x = *next;
    if (round == 1) {
      ExpectValues(x.tensor(0), {1.5, 1.5});
      ExpectValues(a.state.at("w"), {-3, 0});
      ExpectValues(b.state.at("w"), {0, -3});
    }
  }
  ExpectValues(x.tensor(0), {1.875, 1.875});
  ExpectValues(a.state.at("w"), {-2.25, 1.5});
  ExpectValues(b.state.at("w"), {1.5, -2.25});
  auto plan = scaffold->Configure(x, context);
  ExpectValues(plan->broadcast.at("scaffold/c").tensor(0), {-0.375, -0.375});
}

fl::ClientUpdate Update(fl::ModelState delta, int64_t n, std::vector<float> delta_c) {
  fl::ClientUpdate update;
  update.delta = std::move(delta);
  update.num_examples = n;
  update.local_steps = 1;
  update.extras["scaffold/delta_c"] = fl::ModelState({{"w", at::tensor(delta_c), false}});
  return update;
}

TEST(ScaffoldTest, PartialParticipationMovesCByOneOverN) {
  // N = 4, S = {A, B}. Global w = (1, 2), buffer 10.
  // A: n = 1, delta (4, 0), buffer delta 8, Dc (4, -8); B: n = 3, delta (0, -4),
  // buffer delta 0, Dc (0, 4).
  // Size weights (1/4, 3/4): mean delta = (1, -3); eta_g = 0.5: w = (1.5, 0.5).
  // Buffer: 10 + 8/4 = 12 (the weighted mean of client values, not scaled by eta_g).
  // c = 0 + (1/4)((4, -8) + (0, 4)) = (1, -1): 1/N, not 1/|S|.
  ScaffoldOptions options;
  options.set_server_lr(0.5);
  auto scaffold = Scaffold(options);
  fl::ServerContext context;
  context.num_clients = 4;
  const fl::ModelState global = VectorState({1, 2}, 10);
  ASSERT_TRUE(scaffold->Configure(global, context).ok());
  ASSERT_TRUE(scaffold->Accumulate(Update(VectorState({4, 0}, 8), 1, {4, -8}), context).ok());
  ASSERT_TRUE(scaffold->Accumulate(Update(VectorState({0, -4}, 0), 3, {0, 4}), context).ok());
  auto next = scaffold->Finalize(global, context);
  ASSERT_TRUE(next.ok()) << next.status();
  ExpectValues(next->tensor(0), {1.5, 0.5});
  ExpectValues(next->tensor(1), {12});
  ExpectValues(global.tensor(0), {1, 2});  // left untouched
  auto plan = scaffold->Configure(*next, context);
  ExpectValues(plan->broadcast.at("scaffold/c").tensor(0), {1, -1});

  // Uniform weights: mean delta = (2, -2), w = (1, 2) + 0.5 (2, -2) = (2, 1); buffer
  // 10 + (8 + 0)/2 = 14. c moves the same way.
  options.set_weighting(ScaffoldOptions::UNIFORM);
  auto uniform = Scaffold(options);
  ASSERT_TRUE(uniform->Configure(global, context).ok());
  ASSERT_TRUE(uniform->Accumulate(Update(VectorState({4, 0}, 8), 1, {4, -8}), context).ok());
  ASSERT_TRUE(uniform->Accumulate(Update(VectorState({0, -4}, 0), 3, {0, 4}), context).ok());
  next = uniform->Finalize(global, context);
  ExpectValues(next->tensor(0), {2, 1});
  ExpectValues(next->tensor(1), {14});
  plan = uniform->Configure(*next, context);
  ExpectValues(plan->broadcast.at("scaffold/c").tensor(0), {1, -1});
}

TEST(ScaffoldTest, ControlVariateWeightedByTheFederationsExamples) {
  // FedExP's code: c <- c + sum_i (n_i / n) Delta c_i, n = 10 examples in the
  // federation. A: n = 1, Dc (4, -8); B: n = 3, Dc (0, 4):
  // c = (1 * (4, -8) + 3 * (0, 4)) / 10 = (0.4, 0.4). The model step is unchanged.
  ScaffoldOptions options;
  options.set_control_variate_weighting(ScaffoldOptions::FEDERATION_NUM_EXAMPLES);
  auto scaffold = Scaffold(options);
  fl::ServerContext context;
  context.num_clients = 4;
  context.num_examples = 10;
  const fl::ModelState global = VectorState({1, 2}, 10);
  ASSERT_TRUE(scaffold->Configure(global, context).ok());
  ASSERT_TRUE(scaffold->Accumulate(Update(VectorState({4, 0}, 8), 1, {4, -8}), context).ok());
  ASSERT_TRUE(scaffold->Accumulate(Update(VectorState({0, -4}, 0), 3, {0, 4}), context).ok());
  auto next = scaffold->Finalize(global, context);
  ASSERT_TRUE(next.ok()) << next.status();
  ExpectValues(next->tensor(0), {2, -1});  // (1, 2) + (1, -3)
  auto plan = scaffold->Configure(*next, context);
  ExpectValues(plan->broadcast.at("scaffold/c").tensor(0), {0.4, 0.4});

  // Without the federation's size the weights are undefined: an error, not 1/0.
  auto unsized = Scaffold(options);
  fl::ServerContext no_size;
  no_size.num_clients = 4;
  EXPECT_THAT(std::string(unsized->Configure(global, no_size).status().message()),
              HasSubstr("num_examples must be >= 1"));
}

TEST(ScaffoldTest, ExtrapolationTakesFedExpsStepOnTheModelOnly) {
  // SCAFFOLD(ExP), eps 0, N = 4, round 2. Global w = (1, 2), buffer 10.
  // A: n = 1, delta (4, 0), buffer delta 8, Dc (4, -8); B: n = 1, delta (-2, 0),
  // buffer delta 0, Dc (0, 4). Mean delta (1, 0), ||mean||^2 = 1; A = (16 + 4) / 2 = 10;
  // eta_g = max(1, 10 / (2 * 1)) = 5: w = (1, 2) + 5 (1, 0) = (6, 2).
  // Buffer: 10 + (8 + 0) / 2 = 14. Evaluated: ((6, 2) + (1, 2)) / 2 = (3.5, 2).
  // c = (1/4)((4, -8) + (0, 4)) = (1, -1), as without extrapolation.
  ScaffoldOptions options;
  options.mutable_extrapolation()->set_epsilon(0);
  auto scaffold = Scaffold(options);
  fl::ServerContext context;
  context.num_clients = 4;
  context.round = 2;
  const fl::ModelState global = VectorState({1, 2}, 10);
  ASSERT_TRUE(scaffold->Configure(global, context).ok());
  ASSERT_TRUE(scaffold->Accumulate(Update(VectorState({4, 0}, 8), 1, {4, -8}), context).ok());
  ASSERT_TRUE(scaffold->Accumulate(Update(VectorState({-2, 0}, 0), 1, {0, 4}), context).ok());
  auto next = scaffold->Finalize(global, context);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_DOUBLE_EQ(context.diagnostics.at("eta_g"), 5.0);
  ExpectValues(next->tensor(0), {6, 2});
  ExpectValues(next->tensor(1), {14});
  ASSERT_TRUE(context.evaluation_model.has_value());
  ExpectValues(context.evaluation_model->tensor(0), {3.5, 2});
  auto plan = scaffold->Configure(*next, context);
  ExpectValues(plan->broadcast.at("scaffold/c").tensor(0), {1, -1});

  options.mutable_extrapolation()->set_epsilon(-1);
  EXPECT_EQ(Create(options).status().message(),
            "options.extrapolation.epsilon: must be >= 0, got -1");
}

// Regression: with extrapolation the model step is FedExP's eta_g, and a server_lr
// was silently ignored. The combination is refused, naming the field.
TEST(ScaffoldTest, ServerLrWithExtrapolationIsRefused) {
  ScaffoldOptions options;
  options.mutable_extrapolation()->set_epsilon(0.1);
  ASSERT_TRUE(Create(options).ok());
  options.set_server_lr(1.0);
  const absl::Status status = Create(options).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              ::testing::StartsWith("options.server_lr: not used with options.extrapolation"));
}

TEST(ScaffoldTest, PlanAsksForTheHookAndBroadcastsZerosOverParameters) {
  ScaffoldOptions options;
  options.set_control_variate_update(ScaffoldHookOptions::OPTION_I);
  options.set_gradient_batch_size(32);
  auto scaffold = Scaffold(options);
  EXPECT_TRUE(scaffold->properties().order_invariant);
  EXPECT_TRUE(scaffold->properties().single_client_identity);
  fl::ServerContext context;
  context.num_clients = 3;
  auto plan = scaffold->Configure(VectorState({1, 2}, 10), context);
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->hooks.size(), 1u);
  EXPECT_EQ(plan->hooks[0].name, "scaffold");
  ScaffoldHookOptions hook_options;
  ASSERT_TRUE(plan->hooks[0].options.UnpackTo(&hook_options));
  EXPECT_EQ(hook_options.control_variate_update(), ScaffoldHookOptions::OPTION_I);
  EXPECT_EQ(hook_options.gradient_batch_size(), 32);
  const fl::ModelState& c = plan->broadcast.at("scaffold/c");
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c.entries()[0].name, "w");
  EXPECT_FALSE(c.entries()[0].is_buffer);
  ExpectValues(c.tensor(0), {0, 0});
}

// A hook context over `model` with the given broadcast c and client state.
struct HookFixture {
  fl::ExtraStates broadcast;
  fl::TensorMap state;
  fl::Examples examples;
  std::vector<int64_t> indices;
  fl::ModelState global;
  fl::HookContext context;

  explicit HookFixture(fl::Model& model) {
    global = fl::ModelState::FromModule(model);
    context.model = &model;
    context.global = &global;
    context.broadcast = &broadcast;
    context.state = &state;
    context.examples = &examples;
    context.train_indices = &indices;
    context.learning_rate = 0.1;
  }
  // Random c and c_i over the model's parameters.
  void RandomControlVariates(fl::Model& model) {
    std::vector<fl::ModelState::Entry> c;
    for (const auto& item : model.named_parameters()) {
      c.push_back({item.key(), at::randn_like(item.value()), false});
      state[item.key()] = at::randn_like(item.value());
    }
    broadcast["scaffold/c"] = fl::ModelState(std::move(c));
  }
  at::Tensor C(size_t l) const { return broadcast.at("scaffold/c").tensor(l); }
};

TEST(ScaffoldTest, CorrectionTermsGradientIsCMinusCi) {
  torch::manual_seed(1);
  LinearModel model;
  HookFixture f(model);
  f.RandomControlVariates(model);
  auto hook = Hook(ScaffoldHookOptions());
  ASSERT_TRUE(hook->BeforeTraining(f.context).ok());
  at::Tensor term = hook->LossTerm(f.context);
  // The term's value is sum_l <w_l, c_l - c_i,l>.
  const double expected = (model.weight_ * (f.C(0) - f.state.at("weight"))).sum().item<double>() +
                          (model.bias_ * (f.C(1) - f.state.at("bias"))).sum().item<double>();
  EXPECT_NEAR(term.item<double>(), expected, 1e-5);
  const std::vector<at::Tensor> grads = torch::autograd::grad({term}, {model.weight_, model.bias_});
  ExpectClose(grads[0], f.C(0) - f.state.at("weight"));
  ExpectClose(grads[1], f.C(1) - f.state.at("bias"));
}

TEST(ScaffoldTest, OptionIComputesTheFullBatchGradientAtTheReceivedModel) {
  torch::manual_seed(2);
  LinearModel model;
  HookFixture f(model);
  f.RandomControlVariates(model);
  f.examples = {at::randn({13, 4}), at::randint(0, 3, {13}, at::kLong)};
  f.indices = {0, 2, 3, 5, 7, 8, 9, 11, 12};  // 9 examples: batches of 4, 4 and 1
  const fl::ModelState x = fl::ModelState::FromModule(model);
  const at::Tensor c_i_weight = f.state.at("weight").clone();
  const at::Tensor c_i_bias = f.state.at("bias").clone();

  // The reference: one pass over all nine examples at x.
  const at::Tensor chosen = at::tensor(f.indices, at::kLong);
  const at::Tensor loss = at::cross_entropy_loss(model.Forward(f.examples.x.index_select(0, chosen)),
                                                 f.examples.y.index_select(0, chosen));
  const std::vector<at::Tensor> gradient =
      torch::autograd::grad({loss}, {model.weight_, model.bias_});

  ScaffoldHookOptions options;
  options.set_control_variate_update(ScaffoldHookOptions::OPTION_I);
  options.set_gradient_batch_size(4);
  auto hook = Hook(options);
  ASSERT_TRUE(hook->BeforeTraining(f.context).ok());
  // It left the model as received, and what training does later does not matter.
  EXPECT_TRUE(fl::ModelState::FromModule(model).tensor(0).equal(x.tensor(0)));
  {
    at::NoGradGuard no_grad;
    model.weight_.add_(1.0);
  }
  fl::ClientUpdate update;
  update.delta = fl::ModelState::Difference(fl::ModelState::FromModule(model), x);
  update.local_steps = 3;
  ASSERT_TRUE(hook->AfterTraining(f.context, update).ok());
  ExpectClose(f.state.at("weight"), gradient[0]);  // c_i+ = grad f_i(x)
  ExpectClose(f.state.at("bias"), gradient[1]);
  const fl::ModelState& delta_c = update.extras.at("scaffold/delta_c");
  ExpectClose(delta_c.tensor(0), gradient[0] - c_i_weight);  // Delta c_i = c_i+ - c_i
  ExpectClose(delta_c.tensor(1), gradient[1] - c_i_bias);
}

TEST(ScaffoldTest, OptionIPutsBackTheBuffersItsForwardPassesMove) {
  torch::manual_seed(3);
  NormModel model;
  HookFixture f(model);
  f.RandomControlVariates(model);
  f.examples = {at::randn({10, 4}).add(3.0), at::randint(0, 3, {10}, at::kLong)};
  f.indices = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  ScaffoldHookOptions options;
  options.set_control_variate_update(ScaffoldHookOptions::OPTION_I);
  auto hook = Hook(options);
  ASSERT_TRUE(hook->BeforeTraining(f.context).ok());
  const fl::ModelState after = fl::ModelState::FromModule(model);
  for (size_t i = 0; i < after.size(); ++i) {
    EXPECT_TRUE(after.tensor(i).equal(f.global.tensor(i))) << after.entries()[i].name;
  }
}

class ScaffoldTrainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    torch::manual_seed(4);
    examples_ = {at::randn({8, 4}), at::randint(0, 3, {8}, at::kLong)};
    indices_.resize(8);
    std::iota(indices_.begin(), indices_.end(), 0);
    global_ = fl::ModelState::FromModule(LinearModel());
    context_.num_clients = 5;
    // A nonzero server c, as if restored from a checkpoint, and a nonzero c_i on client 3.
    std::map<std::string, at::Tensor> c = {{"c/weight", at::randn({3, 4})},
                                           {"c/bias", at::randn({3})}};
    c_ = c;
    fl::TensorMap c_i;
    c_i["weight"] = at::randn({3, 4});
    c_i["bias"] = at::randn({3});
    for (const auto& [name, t] : c_i) c_i_[name] = t.clone();
    store_.Stage(3, {{"scaffold", std::move(c_i)}});
    store_.Commit(3);
  }

  fl::ClientUpdate Train(const fl::RoundPlan& plan, const fedkit::ClientTrainingSpec& spec,
                         int round) {
    fl::LocalTrainer trainer(spec, {}, &store_);
    fl::LocalTrainingInput input;
    input.client_id = 3;
    input.round = round;
    input.seed = 9;
    input.global = &global_;
    input.plan = &plan;
    input.examples = &examples_;
    input.indices = &indices_;
    LinearModel model;
    auto update = trainer.Train(model, input);
    EXPECT_TRUE(update.ok()) << update.status();
    return *std::move(update);
  }

  fl::Examples examples_;
  std::vector<int64_t> indices_;
  fl::ModelState global_;
  fl::ServerContext context_;
  fl::ClientStateStore store_;
  std::map<std::string, at::Tensor> c_;
  fl::TensorMap c_i_;
};

TEST_F(ScaffoldTrainerTest, OneFullBatchSgdStepFollowsTheCorrectedGradient) {
  // Option I with one full-batch plain SGD step: the step is
  //   delta = -eta_l (grad f_i(x) - c_i + c),
  // and option I stores c_i+ = grad f_i(x), so delta = -eta_l (c_i+ - c_i + c).
  ScaffoldOptions options;
  options.set_control_variate_update(ScaffoldHookOptions::OPTION_I);
  auto scaffold = Scaffold(options);
  ASSERT_TRUE(scaffold->RestoreState(c_).ok());
  auto plan = scaffold->Configure(global_, context_);
  ASSERT_TRUE(plan.ok()) << plan.status();
  fedkit::ClientTrainingSpec spec;
  spec.set_steps(1);
  spec.set_batch_size(8);
  spec.mutable_optimizer()->set_lr(0.1);
  fl::ClientUpdate update = Train(*plan, spec, 1);

  LinearModel reference;
  ASSERT_TRUE(global_.LoadInto(reference).ok());
  const at::Tensor loss = at::cross_entropy_loss(reference.Forward(examples_.x), examples_.y);
  const std::vector<at::Tensor> gradient =
      torch::autograd::grad({loss}, {reference.weight_, reference.bias_});
  // Staged until the server accepts the update; the committed c_i is unchanged.
  ExpectClose(store_.Committed(3, "scaffold").at("weight"), c_i_.at("weight"));
  store_.Commit(3);
  const fl::TensorMap& c_i_next = store_.Committed(3, "scaffold");
  ExpectClose(c_i_next.at("weight"), gradient[0]);
  ExpectClose(c_i_next.at("bias"), gradient[1]);
  ExpectClose(update.delta.tensor(0), (gradient[0] - c_i_.at("weight") + c_.at("c/weight")) * -0.1);
  ExpectClose(update.delta.tensor(1), (gradient[1] - c_i_.at("bias") + c_.at("c/bias")) * -0.1);
  ExpectClose(update.extras.at("scaffold/delta_c").tensor(0), gradient[0] - c_i_.at("weight"));
  // The extra is counted in the bytes sent: delta and Delta c, (12 + 3) floats each.
  EXPECT_EQ(update.bytes_sent, 2 * (12 + 3) * 4);
  ASSERT_TRUE(scaffold->Accumulate(update, context_).ok());
}

TEST_F(ScaffoldTrainerTest, OptionIIUsesTheStepsTakenAndTheDecayedLearningRate) {
  // Round 2 with lr 0.1 and lr_decay 0.5: eta_l = 0.05; K = 3 steps.
  // Delta c_i = c_i+ - c_i = -c - delta / (K eta_l) = -c - delta / 0.15.
  auto scaffold = Scaffold();
  ASSERT_TRUE(scaffold->RestoreState(c_).ok());
  auto plan = scaffold->Configure(global_, context_);
  ASSERT_TRUE(plan.ok());
  fedkit::ClientTrainingSpec spec;
  spec.set_steps(3);
  spec.set_batch_size(3);
  spec.set_lr_decay(0.5);
  spec.mutable_optimizer()->set_lr(0.1);
  fl::ClientUpdate update = Train(*plan, spec, 2);
  ASSERT_EQ(update.local_steps, 3);
  const fl::ModelState& delta_c = update.extras.at("scaffold/delta_c");
  ExpectClose(delta_c.tensor(0), -c_.at("c/weight") - update.delta.tensor(0) / 0.15);
  ExpectClose(delta_c.tensor(1), -c_.at("c/bias") - update.delta.tensor(1) / 0.15);
  store_.Commit(3);
  ExpectClose(store_.Committed(3, "scaffold").at("bias"), c_i_.at("bias") + delta_c.tensor(1));
}

TEST(ScaffoldTest, StateSurvivesSaveAndRestore) {
  fl::ServerContext context;
  context.num_clients = 4;
  const fl::ModelState global = VectorState({1, 2}, 10);
  auto original = Scaffold();
  EXPECT_TRUE(original->SaveState().empty());  // c = 0, not yet created
  ASSERT_TRUE(original->Configure(global, context).ok());
  ASSERT_TRUE(original->Accumulate(Update(VectorState({4, 0}, 0), 1, {4, -8}), context).ok());
  ASSERT_TRUE(original->Finalize(global, context).ok());
  std::map<std::string, at::Tensor> saved = original->SaveState();
  ASSERT_EQ(saved.size(), 1u);  // c over the parameter "w" only
  ExpectValues(saved.at("c/w"), {1, -2});

  auto restored = Scaffold();
  ASSERT_TRUE(restored->RestoreState(saved).ok());
  EXPECT_EQ(restored->SaveState().size(), 1u);  // still held before the next Configure
  for (auto* scaffold : {original.get(), restored.get()}) {
    auto plan = scaffold->Configure(global, context);
    ASSERT_TRUE(plan.ok()) << plan.status();
    ExpectValues(plan->broadcast.at("scaffold/c").tensor(0), {1, -2});
    ASSERT_TRUE(scaffold->Accumulate(Update(VectorState({0, 4}, 0), 1, {8, 4}), context).ok());
    ASSERT_TRUE(scaffold->Finalize(global, context).ok());
    // c = (1, -2) + (1/4)(8, 4) = (3, -1) on both.
    ExpectValues(scaffold->SaveState().at("c/w"), {3, -1});
  }
  // SaveState returned copies: later rounds did not change them.
  ExpectValues(saved.at("c/w"), {1, -2});
}

TEST(ScaffoldTest, RestoredStateMustFitTheModel) {
  fl::ServerContext context;
  context.num_clients = 4;
  auto scaffold = Scaffold();
  ASSERT_TRUE(scaffold->RestoreState({{"c/w", at::zeros({3})}}).ok());
  auto plan = scaffold->Configure(VectorState({1, 2}, 10), context);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(plan.status().message()),
            "checkpoint: control variate \"c/w\" has shape [3] and dtype Float, the model's "
            "parameter [2] and Float");

  EXPECT_THAT(std::string(scaffold->RestoreState({{"m/w", at::zeros({2})}}).message()),
              HasSubstr("state: unexpected key \"m/w\""));
  ASSERT_TRUE(scaffold->RestoreState({{"c/w", at::zeros({2})}, {"c/v", at::zeros({2})}}).ok());
  EXPECT_THAT(std::string(scaffold->Configure(VectorState({1, 2}, 10), context).status().message()),
              HasSubstr("checkpoint: 2 control-variate tensors, the model has 1 parameters"));
}

TEST(ScaffoldTest, UpdateWithoutOrWithMismatchedDeltaCIsRejected) {
  fl::ServerContext context;
  context.num_clients = 4;
  const fl::ModelState global = VectorState({1, 2}, 10);
  auto scaffold = Scaffold();
  ASSERT_TRUE(scaffold->Configure(global, context).ok());

  fl::ClientUpdate missing = Update(VectorState({4, 0}, 0), 1, {0, 0});
  missing.extras.clear();
  absl::Status status = scaffold->Accumulate(missing, context);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(status.message()),
            "update has no extra \"scaffold/delta_c\" (the \"scaffold\" client hook sends it); "
            "rejected");

  status = scaffold->Accumulate(Update(VectorState({4, 0}, 0), 1, {1, 2, 3}), context);
  EXPECT_EQ(std::string(status.message()),
            "extra \"scaffold/delta_c\": tensor \"w\": expected shape [2], got [3]");

  fl::ClientUpdate with_buffer = Update(VectorState({4, 0}, 0), 1, {0, 0});
  with_buffer.extras["scaffold/delta_c"] = VectorState({0, 0}, 0);
  EXPECT_THAT(std::string(scaffold->Accumulate(with_buffer, context).message()),
              HasSubstr("expected 1 tensors, got 2"));

  fl::ClientUpdate bad_delta = Update(VectorState({4, 0}, 0), 1, {0, 0});
  bad_delta.delta.mutable_entries().pop_back();
  EXPECT_THAT(std::string(scaffold->Accumulate(bad_delta, context).message()),
              HasSubstr("delta: expected 2 tensors, got 1"));

  // Nothing of the rejected updates was added: one good update alone decides.
  // w = (1, 2) + (0, 4); c = (1/4)(8, 4) = (2, 1).
  ASSERT_TRUE(scaffold->Accumulate(Update(VectorState({0, 4}, 0), 1, {8, 4}), context).ok());
  auto next = scaffold->Finalize(global, context);
  ASSERT_TRUE(next.ok());
  ExpectValues(next->tensor(0), {1, 6});
  ExpectValues(scaffold->SaveState().at("c/w"), {2, 1});
}

TEST(ScaffoldTest, MissingBroadcastIsAnErrorNamingIt) {
  VectorModel model;
  HookFixture f(model);
  auto hook = Hook(ScaffoldHookOptions());
  absl::Status status = hook->BeforeTraining(f.context);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()), HasSubstr("broadcast \"scaffold/c\" is missing"));

  f.broadcast["scaffold/c"] = fl::ModelState({{"v", at::zeros({2}), false}});
  EXPECT_THAT(std::string(Hook(ScaffoldHookOptions())->BeforeTraining(f.context).message()),
              HasSubstr("does not fit the model's parameters: tensor 0: expected \"w\", got \"v\""));
}

TEST(ScaffoldTest, NumClientsMustBePositive) {
  fl::ServerContext context;  // num_clients = 0
  auto plan = Scaffold()->Configure(VectorState({1, 2}, 10), context);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(plan.status().message()),
              HasSubstr("server context num_clients must be >= 1, got 0"));
}

TEST(ScaffoldTest, OptionValidationNamesTheField) {
  auto message = [](const ScaffoldOptions& options) {
    return std::string(Create(options).status().message());
  };
  ScaffoldOptions options;
  options.set_server_lr(-0.5);
  EXPECT_EQ(message(options), "options.server_lr: must be > 0, got -0.5");
  options.set_server_lr(0);
  EXPECT_EQ(message(options), "options.server_lr: must be > 0, got 0");
  options = {};
  options.set_weighting(static_cast<ScaffoldOptions::Weighting>(7));
  EXPECT_EQ(message(options), "options.weighting: must be NUM_EXAMPLES or UNIFORM, got 7");
  options = {};
  options.set_control_variate_update(static_cast<ScaffoldHookOptions::ControlVariateUpdate>(5));
  EXPECT_EQ(message(options),
            "options.control_variate_update: must be OPTION_II or OPTION_I, got 5");
  options = {};
  options.set_gradient_batch_size(0);
  EXPECT_EQ(message(options), "options.gradient_batch_size: must be >= 1, got 0");

  auto hook_message = [](const ScaffoldHookOptions& options) {
    google::protobuf::Any any;
    any.PackFrom(options);
    return std::string(
        fl::Registry<fl::ClientHook>::Global().Create("scaffold", any).status().message());
  };
  ScaffoldHookOptions hook;
  hook.set_gradient_batch_size(-1);
  EXPECT_EQ(hook_message(hook), "options.gradient_batch_size: must be >= 1, got -1");
  hook = {};
  hook.set_control_variate_update(static_cast<ScaffoldHookOptions::ControlVariateUpdate>(9));
  EXPECT_EQ(hook_message(hook),
            "options.control_variate_update: must be OPTION_II or OPTION_I, got 9");
}

TEST(ScaffoldTest, RegisteredAsAggregatorAndClientHook) {
  EXPECT_NE(fl::Registry<fl::Aggregator>::Global().Find("scaffold"), nullptr);
  EXPECT_NE(fl::Registry<fl::ClientHook>::Global().Find("scaffold"), nullptr);
  EXPECT_THAT(fl::Registry<fl::ClientHook>::Global().Names(), ElementsAre("scaffold"));
}

}  // namespace
}  // namespace aggregators
