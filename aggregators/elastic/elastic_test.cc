#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <utility>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include "aggregators/elastic/elastic_options.pb.h"
#include "aggregators/fedprox/fedprox_options.pb.h"
#include "fl/aggregator.h"
#include "fl/client_hook.h"
#include "fl/model.h"
#include "fl/registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace aggregators {
namespace {

using ::fedkit::aggregators::ElasticHookOptions;
using ::fedkit::aggregators::ElasticOptions;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::unique_ptr<fl::Aggregator> Create(const ElasticOptions& options) {
  google::protobuf::Any any;
  any.PackFrom(options);
  auto created = fl::Registry<fl::Aggregator>::Global().Create("elastic", any);
  EXPECT_TRUE(created.ok()) << created.status();
  return created.ok() ? *std::move(created) : nullptr;
}

absl::Status CreateError(const ElasticOptions& options) {
  google::protobuf::Any any;
  any.PackFrom(options);
  return fl::Registry<fl::Aggregator>::Global().Create("elastic", any).status();
}

std::unique_ptr<fl::ClientHook> Hook(const ElasticHookOptions& options) {
  google::protobuf::Any any;
  any.PackFrom(options);
  auto created = fl::Registry<fl::ClientHook>::Global().Create("elastic", any);
  EXPECT_TRUE(created.ok()) << created.status();
  return created.ok() ? *std::move(created) : nullptr;
}

fl::ClientUpdate Update(std::vector<float> delta, int64_t n, std::vector<float> omega) {
  fl::ClientUpdate update;
  update.delta = fl::ModelState({{"w", at::tensor(delta), false}});
  update.num_examples = n;
  update.extras["elastic/omega"] = fl::ModelState({{"w", at::tensor(omega), false}});
  return update;
}

// The worked example of the server tests: global w = (1, 2, 3);
// client A: n = 1, delta (3, 0, -3), Omega (0.2, 0.4, 0);
// client B: n = 3, delta (1, 4, -1), Omega (0.6, 0, 0).
// Weights (1/4, 3/4): Omega = (0.05 + 0.45, 0.1, 0) = (0.5, 0.1, 0),
// sum_k w_k delta_k = (0.75 + 0.75, 3, -0.75 - 0.75) = (1.5, 3, -1.5).
fl::ModelState Aggregate(fl::Aggregator& elastic, fl::ServerContext& context) {
  const fl::ModelState global({{"w", at::tensor({1.0f, 2.0f, 3.0f}), false}});
  EXPECT_TRUE(elastic.Configure(global, context).ok());
  EXPECT_TRUE(elastic.Accumulate(Update({3, 0, -3}, 1, {0.2f, 0.4f, 0.0f}), context).ok());
  EXPECT_TRUE(elastic.Accumulate(Update({1, 4, -1}, 3, {0.6f, 0.0f, 0.0f}), context).ok());
  auto next = elastic.Finalize(global, context);
  EXPECT_TRUE(next.ok()) << next.status();
  return next.ok() ? *std::move(next) : fl::ModelState();
}

TEST(ElasticTest, PaperZetaAgainstHandComputation) {
  // max(Omega) = 0.5: zeta = 1.5 - (1, 0.2, 0) = (0.5, 1.3, 1.5);
  // zeta (.) step = (0.75, 3.9, -2.25); w = (1.75, 5.9, 0.75).
  auto elastic = Create(ElasticOptions());
  fl::ServerContext context;
  fl::ModelState next = Aggregate(*elastic, context);
  EXPECT_TRUE(next.tensor(0).allclose(at::tensor({1.75f, 5.9f, 0.75f}), 1e-6, 1e-6))
      << next.tensor(0);
  // zeta is computed in the parameters' float32.
  EXPECT_NEAR(context.diagnostics.at("elastic/zeta_mean"), (0.5 + 1.3 + 1.5) / 3, 1e-6);
  EXPECT_NEAR(context.diagnostics.at("elastic/zeta_min"), 0.5, 1e-6);
  EXPECT_NEAR(context.diagnostics.at("elastic/zeta_max"), 1.5, 1e-6);
}

TEST(ElasticTest, ServerLrScalesTheStep) {
  // eta = 0.5 halves zeta (.) step: w = (1, 2, 3) + (0.375, 1.95, -1.125).
  ElasticOptions options;
  options.set_server_lr(0.5);
  auto elastic = Create(options);
  fl::ServerContext context;
  EXPECT_TRUE(Aggregate(*elastic, context)
                  .tensor(0)
                  .allclose(at::tensor({1.375f, 3.95f, 1.875f}), 1e-6, 1e-6));
}

TEST(ElasticTest, MaxOverClientsAgainstHandComputation) {
  // max_k Omega_k = (0.6, 0.4, 0): zeta = (1.5 - 0.5/0.6, 1.5 - 0.25, 1 (no
  // sensitivity: FedAvg)) = (2/3, 1.25, 1); w = (1 + 1, 2 + 3.75, 3 - 1.5).
  ElasticOptions options;
  options.set_max_over(fedkit::aggregators::CLIENTS);
  auto elastic = Create(options);
  fl::ServerContext context;
  EXPECT_TRUE(Aggregate(*elastic, context)
                  .tensor(0)
                  .allclose(at::tensor({2.0f, 5.75f, 1.5f}), 1e-6, 1e-6));
}

TEST(ElasticTest, PerTensorMaxNormalisesEachTensorAlone) {
  // Two tensors, one client (n = 2): a with Omega (1, 3), b with Omega (0.5).
  // EACH_TENSOR, tau = 0.5: zeta_a = 1.5 - (1/3, 1) = (7/6, 0.5), zeta_b = 0.5.
  // ALL_PARAMETERS would give zeta_b = 1.5 - 0.5/3 = 4/3.
  for (auto [max_over, zeta_b] :
       std::vector<std::pair<fedkit::aggregators::ElasticNormalizer, float>>{
           {fedkit::aggregators::EACH_TENSOR, 0.5f},
           {fedkit::aggregators::ALL_PARAMETERS, 4.0f / 3.0f}}) {
    ElasticOptions options;
    options.set_max_over(max_over);
    auto elastic = Create(options);
    fl::ServerContext context;
    const fl::ModelState global({{"a", at::zeros({2}), false}, {"b", at::zeros({1}), false}});
    ASSERT_TRUE(elastic->Configure(global, context).ok());
    fl::ClientUpdate update;
    update.num_examples = 2;
    update.delta = fl::ModelState({{"a", at::ones({2}), false}, {"b", at::ones({1}), false}});
    update.extras["elastic/omega"] = fl::ModelState(
        {{"a", at::tensor({1.0f, 3.0f}), false}, {"b", at::tensor({0.5f}), false}});
    ASSERT_TRUE(elastic->Accumulate(std::move(update), context).ok());
    auto next = elastic->Finalize(global, context);
    ASSERT_TRUE(next.ok()) << next.status();
    EXPECT_TRUE(next->tensor(0).allclose(at::tensor({7.0f / 6.0f, 0.5f})));
    EXPECT_TRUE(next->tensor(1).allclose(at::tensor({zeta_b})));
  }
}

TEST(ElasticTest, PaperNormalisesWithinEachLayer) {
  // One client (n = 2), all deltas 1, so the new weights are zeta:
  //   fc1.weight Omega (1, 3), fc1.bias Omega (0.5), fc2.weight Omega (0.25, 0.5).
  // EACH_LAYER (PAPER's default): fc1's max 3, fc2's max 0.5, tau = 0.5:
  //   fc1.weight 1.5 - (1/3, 1) = (7/6, 0.5), fc1.bias 1.5 - 0.5/3 = 4/3,
  //   fc2.weight 1.5 - (0.5, 1) = (1, 0.5).
  // ALL_PARAMETERS (max 3): fc2.weight 1.5 - (0.25/3, 0.5/3) = (17/12, 4/3).
  // EACH_TENSOR: fc1.bias 1.5 - 1 = 0.5, fc2.weight as EACH_LAYER.
  struct Case {
    std::optional<fedkit::aggregators::ElasticNormalizer> max_over;
    std::vector<float> fc1_bias, fc2_weight;
  };
  for (const Case& c : std::vector<Case>{
           {std::nullopt, {4.0f / 3.0f}, {1.0f, 0.5f}},
           {fedkit::aggregators::EACH_LAYER, {4.0f / 3.0f}, {1.0f, 0.5f}},
           {fedkit::aggregators::ALL_PARAMETERS, {4.0f / 3.0f}, {17.0f / 12.0f, 4.0f / 3.0f}},
           {fedkit::aggregators::EACH_TENSOR, {0.5f}, {1.0f, 0.5f}}}) {
    ElasticOptions options;
    if (c.max_over.has_value()) options.set_max_over(*c.max_over);
    auto elastic = Create(options);
    fl::ServerContext context;
    const fl::ModelState global({{"fc1.weight", at::zeros({2}), false},
                                 {"fc1.bias", at::zeros({1}), false},
                                 {"fc2.weight", at::zeros({2}), false}});
    ASSERT_TRUE(elastic->Configure(global, context).ok());
    fl::ClientUpdate update;
    update.num_examples = 2;
    update.delta = fl::ModelState({{"fc1.weight", at::ones({2}), false},
                                   {"fc1.bias", at::ones({1}), false},
                                   {"fc2.weight", at::ones({2}), false}});
    update.extras["elastic/omega"] =
        fl::ModelState({{"fc1.weight", at::tensor({1.0f, 3.0f}), false},
                        {"fc1.bias", at::tensor({0.5f}), false},
                        {"fc2.weight", at::tensor({0.25f, 0.5f}), false}});
    ASSERT_TRUE(elastic->Accumulate(std::move(update), context).ok());
    auto next = elastic->Finalize(global, context);
    ASSERT_TRUE(next.ok()) << next.status();
    SCOPED_TRACE(c.max_over.has_value() ? static_cast<int>(*c.max_over) : -1);
    EXPECT_TRUE(next->tensor(0).allclose(at::tensor({7.0f / 6.0f, 0.5f}))) << next->tensor(0);
    EXPECT_TRUE(next->tensor(1).allclose(at::tensor(c.fc1_bias))) << next->tensor(1);
    EXPECT_TRUE(next->tensor(2).allclose(at::tensor(c.fc2_weight))) << next->tensor(2);
  }
}

TEST(ElasticTest, ZetaOfOneIsFedAvgExactlyAndBuffersAreNotScaled) {
  // tau = 1 with equal sensitivities gives zeta = 1 + 1 - 1 = 1 everywhere; the
  // result must be FedAvg's: parameters (1/4)(4, 0) + (3/4)(0, -4) = (1, -3),
  // the buffer the clients' weighted mean 10 + (1/4)8 = 12.
  ElasticOptions options;
  options.set_tau(1.0);
  auto elastic = Create(options);
  fl::ServerContext context;
  const fl::ModelState global({{"w", at::zeros({2}), false}, {"bn", at::tensor({10.0f}), true}});
  ASSERT_TRUE(elastic->Configure(global, context).ok());
  for (auto [delta, bn, n] : std::vector<std::tuple<std::vector<float>, float, int>>{
           {{4, 0}, 8, 1}, {{0, -4}, 0, 3}}) {
    fl::ClientUpdate update;
    update.num_examples = n;
    update.delta = fl::ModelState({{"w", at::tensor(delta), false}, {"bn", at::tensor({bn}), true}});
    update.extras["elastic/omega"] = fl::ModelState({{"w", at::full({2}, 0.7f), false}});
    ASSERT_TRUE(elastic->Accumulate(std::move(update), context).ok());
  }
  auto next = elastic->Finalize(global, context);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_TRUE(next->tensor(0).allclose(at::tensor({1.0f, -3.0f}), 0, 1e-6)) << next->tensor(0);
  EXPECT_TRUE(next->tensor(1).allclose(at::tensor({12.0f})));
  EXPECT_DOUBLE_EQ(context.diagnostics.at("elastic/zeta_mean"), 1.0);
}

TEST(ElasticTest, NoSensitivityAtAllFallsBackToFedAvg) {
  auto elastic = Create(ElasticOptions());
  fl::ServerContext context;
  const fl::ModelState global({{"w", at::tensor({1.0f, 2.0f, 3.0f}), false}});
  ASSERT_TRUE(elastic->Configure(global, context).ok());
  ASSERT_TRUE(elastic->Accumulate(Update({2, 2, 2}, 1, {0, 0, 0}), context).ok());
  auto next = elastic->Finalize(global, context);
  ASSERT_TRUE(next.ok());
  EXPECT_TRUE(next->tensor(0).allclose(at::tensor({3.0f, 4.0f, 5.0f})));
}

TEST(ElasticTest, RejectsBadUpdates) {
  auto elastic = Create(ElasticOptions());
  fl::ServerContext context;
  const fl::ModelState global({{"w", at::zeros({3}), false}});
  ASSERT_TRUE(elastic->Configure(global, context).ok());
  fl::ClientUpdate missing = Update({1, 1, 1}, 1, {0, 0, 0});
  missing.extras.clear();
  EXPECT_THAT(std::string(elastic->Accumulate(missing, context).message()),
              HasSubstr("no extra \"elastic/omega\""));
  EXPECT_FALSE(elastic->Accumulate(Update({1, 1, 1}, 1, {0, 0}), context).ok());
  EXPECT_FALSE(elastic->Accumulate(Update({1, 1, 1}, 0, {0, 0, 0}), context).ok());
}

TEST(ElasticTest, NegativeSensitivitiesCannotPushZetaOutOfRange) {
  // Omega = (0.5, -1, 0) from a faulty client: ratio (1, -2, 0) is clamped to
  // (1, 0, 0), so zeta = (0.5, 1.5, 1.5), inside [tau, 1 + tau].
  auto elastic = Create(ElasticOptions());
  fl::ServerContext context;
  const fl::ModelState global({{"w", at::zeros({3}), false}});
  ASSERT_TRUE(elastic->Configure(global, context).ok());
  ASSERT_TRUE(elastic->Accumulate(Update({1, 1, 1}, 1, {0.5f, -1.0f, 0.0f}), context).ok());
  auto next = elastic->Finalize(global, context);
  ASSERT_TRUE(next.ok());
  EXPECT_TRUE(next->tensor(0).allclose(at::tensor({0.5f, 1.5f, 1.5f})));
}

TEST(ElasticTest, OptionErrorsNameTheirFields) {
  ElasticOptions options;
  options.set_tau(-1);
  options.set_server_lr(0);
  options.mutable_sensitivity()->set_mu(1.0);
  options.mutable_sensitivity()->set_holdout_fraction(1.5);
  options.mutable_sensitivity()->set_mode(fedkit::aggregators::FLBENCH);
  const std::string message(CreateError(options).message());
  EXPECT_THAT(message, HasSubstr("options.tau: must be >= 0, got -1"));
  EXPECT_THAT(message, HasSubstr("options.server_lr: must be > 0, got 0"));
  EXPECT_THAT(message, HasSubstr("options.sensitivity.mu: must be in [0, 1), got 1"));
  EXPECT_THAT(message, HasSubstr("options.sensitivity.holdout_fraction: must be in (0, 1), got 1.5"));
  EXPECT_THAT(message, HasSubstr("options.sensitivity.mode: leave unset"));

  ElasticOptions unknown_base;
  unknown_base.mutable_base()->set_name("fedavgg");
  EXPECT_THAT(std::string(CreateError(unknown_base).message()),
              HasSubstr("options.base.name: aggregator \"fedavgg\" is not registered"));

  ElasticOptions bad_base;
  bad_base.mutable_base()->set_name("fedprox");
  fedkit::aggregators::FedProxOptions prox;
  prox.set_mu(-1);
  bad_base.mutable_base()->mutable_options()->PackFrom(prox);
  EXPECT_THAT(std::string(CreateError(bad_base).message()),
              HasSubstr("options.base.options.mu: must be >= 0"));

  ElasticOptions itself;
  itself.mutable_base()->set_name("elastic");
  EXPECT_THAT(std::string(CreateError(itself).message()), HasSubstr("cannot wrap itself"));
}

TEST(ElasticTest, PlanRunsTheSensitivityHookFirstThenTheBaseHooks) {
  ElasticOptions options;
  options.mutable_base()->set_name("scaffold");
  auto elastic = Create(options);
  fl::ServerContext context;
  context.num_clients = 10;
  auto plan = elastic->Configure(fl::ModelState({{"w", at::zeros({3}), false}}), context);
  ASSERT_TRUE(plan.ok()) << plan.status();
  std::vector<std::string> names;
  for (const auto& hook : plan->hooks) names.push_back(hook.name);
  EXPECT_THAT(names, ElementsAre("elastic", "scaffold"));
  EXPECT_EQ(plan->broadcast.count("scaffold/c"), 1u);
  // SCAFFOLD's control variate is Elastic's saved state.
  EXPECT_EQ(elastic->SaveState().size(), 1u);
}

TEST(ElasticTest, UsesAProxyExactlyWhenItsBaseDoes) {
  EXPECT_FALSE(Create(ElasticOptions())->properties().uses_proxy);
  ElasticOptions over_server_ft;
  over_server_ft.mutable_base()->set_name("server_ft");
  EXPECT_TRUE(Create(over_server_ft)->properties().uses_proxy);
}

// A model with one 3-vector parameter and output F(x) = <w, x>, so that
// d/dw mean_b F(x)^2 = mean_b 2 <w, x> x can be written down by hand.
class DotModel : public fl::Model {
 public:
  DotModel() { w_ = register_parameter("w", at::ones({3})); }
  at::Tensor Forward(const at::Tensor& x) override { return x.matmul(w_).unsqueeze(1); }

 private:
  at::Tensor w_;
};

struct HookFixture {
  DotModel model;
  fl::ModelState global = fl::ModelState::FromModule(model);
  fl::Examples examples;
  fl::TensorMap state;
  std::vector<int64_t> train;
  const std::vector<int64_t> share = {0, 1};

  // Two identical examples x = (1, 2, 0): whichever is held out, <w, x> = 3 and
  // the gradient is 2 * 3 * x = (6, 12, 0).
  HookFixture() {
    examples.x = at::tensor({1.0f, 2.0f, 0.0f}).repeat({2, 1});
    examples.y = at::zeros({2}, at::kLong);
  }

  fl::ModelState RunRound(fl::ClientHook& hook, uint64_t seed) {
    train = {0, 1};
    fl::HookContext context;
    context.client_id = 7;
    context.model = &model;
    context.global = &global;
    context.state = &state;
    context.examples = &examples;
    context.client_indices = &share;
    context.train_indices = &train;
    context.seed = seed;
    context.batch_size = 1;
    EXPECT_TRUE(hook.BeforeTraining(context).ok());
    fl::ClientUpdate update;
    EXPECT_TRUE(hook.AfterTraining(context, update).ok());
    return update.extras.at("elastic/omega");
  }
};

TEST(ElasticHookTest, ElementwiseEmaKeptAcrossRoundsAgainstHandComputation) {
  // Round 1: Omega = 0.95 * 0 + 0.05 * |(6, 12, 0)| = (0.3, 0.6, 0).
  // Round 2 (same model): 0.95 * (0.3, 0.6, 0) + 0.05 * (6, 12, 0) = (0.585, 1.17, 0).
  ElasticHookOptions options;
  options.set_holdout_fraction(0.5);
  options.set_keep_across_rounds(true);
  HookFixture f;
  EXPECT_TRUE(f.RunRound(*Hook(options), 1).tensor(0).allclose(at::tensor({0.3f, 0.6f, 0.0f})));
  EXPECT_EQ(f.train.size(), 1u);  // B_k is not trained on
  EXPECT_TRUE(f.RunRound(*Hook(options), 2).tensor(0).allclose(at::tensor({0.585f, 1.17f, 0.0f})));
  // Omega stays the client's own: the state holds it and the update count.
  EXPECT_EQ(f.state.at("updates").item<int64_t>(), 2);
  EXPECT_TRUE(f.model.is_training());
}

TEST(ElasticHookTest, PaperRestartsTheEmaEveryRoundFlbenchKeepsIt) {
  // Algorithm 1 initialises Omega_k inside the round loop: PAPER's round 2 starts
  // from zeros again, (0.3, 0.6, 0); FLBENCH continues the EMA, (0.585, 1.17, 0).
  for (auto [mode, round2] :
       std::vector<std::pair<fedkit::aggregators::ElasticMode, std::vector<float>>>{
           {fedkit::aggregators::PAPER, {0.3f, 0.6f, 0.0f}},
           {fedkit::aggregators::FLBENCH, {0.585f, 1.17f, 0.0f}}}) {
    ElasticHookOptions options;
    options.set_mode(mode);
    options.set_granularity(fedkit::aggregators::ELEMENT);
    options.set_objective(fedkit::aggregators::OUTPUT_NORM);
    options.set_holdout_fraction(0.5);
    HookFixture f;
    f.RunRound(*Hook(options), 1);
    EXPECT_TRUE(f.RunRound(*Hook(options), 2).tensor(0).allclose(at::tensor(round2)))
        << "mode " << mode;
  }
}

TEST(ElasticHookTest, HeldOutSizeIsTheFloorOfTheFraction) {
  // FL-bench's int(0.3 n): 5 examples hold out floor(1.5) = 1, not round(1.5) = 2.
  fl::Examples examples;
  examples.x = at::randn({5, 3});
  examples.y = at::zeros({5}, at::kLong);
  DotModel model;
  const fl::ModelState global = fl::ModelState::FromModule(model);
  fl::TensorMap state;
  const std::vector<int64_t> share = {0, 1, 2, 3, 4};
  std::vector<int64_t> train = share;
  fl::HookContext context;
  context.model = &model;
  context.global = &global;
  context.state = &state;
  context.examples = &examples;
  context.client_indices = &share;
  context.train_indices = &train;
  context.seed = 3;
  context.batch_size = 2;
  ASSERT_TRUE(Hook(ElasticHookOptions())->BeforeTraining(context).ok());
  EXPECT_EQ(train.size(), 4u);
}

TEST(ElasticHookTest, BiasCorrectionDividesByOneMinusMuToTheM) {
  // m = 1: (0.3, 0.6, 0) / (1 - 0.95) = (6, 12, 0).
  ElasticHookOptions options;
  options.set_holdout_fraction(0.5);
  options.set_bias_correction(true);
  options.set_keep_across_rounds(true);
  HookFixture f;
  EXPECT_TRUE(f.RunRound(*Hook(options), 1).tensor(0).allclose(at::tensor({6.0f, 12.0f, 0.0f})));
  // The state keeps the uncorrected EMA.
  EXPECT_TRUE(f.state.at("omega/w").allclose(at::tensor({0.3f, 0.6f, 0.0f})));
}

TEST(ElasticHookTest, TensorGranularityIsOneSquaredNormPerTensor) {
  // 0.05 * ||(6, 12, 0)||^2 = 0.05 * 180 = 9.
  ElasticHookOptions options;
  options.set_holdout_fraction(0.5);
  options.set_granularity(fedkit::aggregators::TENSOR);
  HookFixture f;
  const fl::ModelState omega = f.RunRound(*Hook(options), 1);
  EXPECT_EQ(omega.tensor(0).dim(), 0);
  EXPECT_NEAR(omega.tensor(0).item<double>(), 9.0, 1e-5);
}

TEST(ElasticHookTest, HeldOutSubsetIsRedrawnOrKept) {
  fl::Examples examples;
  examples.x = at::randn({100, 3});
  examples.y = at::zeros({100}, at::kLong);
  // Explicit, then each mode's default: Algorithm 1 draws B_k once (PAPER),
  // FL-bench every round (FLBENCH).
  std::vector<std::pair<ElasticHookOptions, bool>> cases(4);
  cases[0].first.set_redraw_each_round(true);
  cases[0].second = true;
  cases[1].first.set_redraw_each_round(false);
  cases[1].second = false;
  cases[2].first.set_mode(fedkit::aggregators::PAPER);
  cases[2].second = false;
  cases[3].first.set_mode(fedkit::aggregators::FLBENCH);
  cases[3].second = true;
  for (const auto& [options, redraw] : cases) {
    DotModel model;
    const fl::ModelState global = fl::ModelState::FromModule(model);
    fl::TensorMap state;
    std::vector<std::vector<int64_t>> trained;
    for (uint64_t seed : {11, 12}) {
      std::vector<int64_t> train(100);
      for (int64_t i = 0; i < 100; ++i) train[i] = i;
      const std::vector<int64_t> share = train;
      fl::HookContext context;
      context.model = &model;
      context.global = &global;
      context.state = &state;
      context.examples = &examples;
      context.client_indices = &share;
      context.train_indices = &train;
      context.seed = seed;
      context.batch_size = 10;
      ASSERT_TRUE(Hook(options)->BeforeTraining(context).ok());
      EXPECT_EQ(train.size(), 70u);  // the default 30 % held out
      std::sort(train.begin(), train.end());
      trained.push_back(train);
    }
    EXPECT_EQ(trained[0] == trained[1], !redraw) << "redraw_each_round: " << redraw;
  }
}

// The "elastic" hook as the aggregator plans it for `options` (its mode applied).
std::unique_ptr<fl::ClientHook> PlannedHook(const ElasticOptions& options) {
  auto elastic = Create(options);
  fl::ServerContext context;
  auto plan = elastic->Configure(fl::ModelState({{"w", at::zeros({3}), false}}), context);
  EXPECT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->hooks.at(0).name, "elastic");
  auto hook = fl::Registry<fl::ClientHook>::Global().Create("elastic", plan->hooks.at(0).options);
  EXPECT_TRUE(hook.ok()) << hook.status();
  return hook.ok() ? *std::move(hook) : nullptr;
}

// One client's round of `hook` on `share` of `examples` with client.batch_size
// `batch_size`: returns Omega_k and leaves in `train` what local training would use.
fl::ModelState RunClient(fl::ClientHook& hook, fl::Model& model, const fl::Examples& examples,
                         const std::vector<int64_t>& share, int64_t batch_size,
                         std::vector<int64_t>& train, fl::TensorMap& state) {
  const fl::ModelState global = fl::ModelState::FromModule(model);
  train = share;
  fl::HookContext context;
  context.model = &model;
  context.global = &global;
  context.state = &state;
  context.examples = &examples;
  context.client_indices = &share;
  context.train_indices = &train;
  context.seed = 21;
  context.batch_size = batch_size;
  EXPECT_TRUE(hook.BeforeTraining(context).ok());
  fl::ClientUpdate update;
  EXPECT_TRUE(hook.AfterTraining(context, update).ok());
  return update.extras.at("elastic/omega");
}

TEST(ElasticHookTest, HoldoutBatchesHoldOutThatManyBatchesAndAverageOverEach) {
  // 10 copies of x = (1, 2, 0): every batch's gradient is (6, 12, 0) (HookFixture),
  // so after m EMA updates from zeros Omega = (1 - 0.95^m) (6, 12, 0).
  fl::Examples examples{at::tensor({1.0f, 2.0f, 0.0f}).repeat({10, 1}), at::zeros({10}, at::kLong)};
  std::vector<int64_t> share(10);
  for (int64_t i = 0; i < 10; ++i) share[i] = i;
  struct Case {
    int holdout_batches;
    std::optional<int> sensitivity_batch_size;
    size_t trained;  // 10 - holdout_batches x the batch size
    int updates;     // m
  };
  // Batch size 1 (client.batch_size): 4 batches of 1. sensitivity_batch_size 3:
  // 2 batches of 3. (The default 30 % would hold out 3 examples: m = 3.)
  for (const Case& c : std::vector<Case>{{4, std::nullopt, 6, 4}, {2, 3, 4, 2}}) {
    ElasticHookOptions options;
    options.set_holdout_batches(c.holdout_batches);
    if (c.sensitivity_batch_size.has_value()) {
      options.set_sensitivity_batch_size(*c.sensitivity_batch_size);
    }
    DotModel model;
    fl::TensorMap state;
    std::vector<int64_t> train;
    const fl::ModelState omega = RunClient(*Hook(options), model, examples, share, 1, train, state);
    SCOPED_TRACE(c.holdout_batches);
    EXPECT_EQ(train.size(), c.trained);
    const float scale = 1.0f - std::pow(0.95f, c.updates);
    EXPECT_TRUE(omega.tensor(0).allclose(at::tensor({6.0f * scale, 12.0f * scale, 0.0f}), 1e-5, 1e-6))
        << omega.tensor(0);
  }
}

TEST(ElasticTest, HoldoutBatchesChangeZetaThroughTheSensitivities) {
  // Through the aggregator's plan (client.batch_size 1): client A holds 3 copies of
  // x = (1, 2, 0) (per-batch gradient (6, 12, 0)), client B 7 copies of (0, 1, 1)
  // (F = 2, gradient 2 * 2 * (0, 1, 1) = (0, 4, 4)). Each client sends
  // Omega_k = (1 - 0.95^m_k) |g_k| and trains on the rest, which is its weight.
  //   holdout_batches 3: A holds out min(3, 3 - 1) = 2 (m = 2, weight 1), B 3
  //     (m = 3, weight 4): Omega = (0.0975 (6, 12, 0) + 4 * 0.142625 (0, 4, 4)) / 5
  //     = (0.117, 0.6904, 0.4564), zeta = 1.5 - Omega / 0.6904.
  //   holdout_batches 1: m = 1 for both, weights 2 and 6: Omega = (2 * 0.05 (6, 12, 0)
  //     + 6 * 0.05 (0, 4, 4)) / 8 = (0.075, 0.3, 0.15), zeta = 1.5 - Omega / 0.3.
  fl::Examples examples;
  examples.x = at::cat({at::tensor({1.0f, 2.0f, 0.0f}).repeat({3, 1}),
                        at::tensor({0.0f, 1.0f, 1.0f}).repeat({7, 1})});
  examples.y = at::zeros({10}, at::kLong);
  const std::vector<int64_t> share_a = {0, 1, 2};
  const std::vector<int64_t> share_b = {3, 4, 5, 6, 7, 8, 9};
  struct Case {
    int holdout_batches;
    std::vector<float> zeta;
  };
  for (const Case& c : std::vector<Case>{
           {3, {1.5f - 0.117f / 0.6904f, 0.5f, 1.5f - 0.4564f / 0.6904f}},
           {1, {1.5f - 0.075f / 0.3f, 0.5f, 1.5f - 0.15f / 0.3f}}}) {
    SCOPED_TRACE(c.holdout_batches);
    ElasticOptions options;
    options.mutable_sensitivity()->set_holdout_batches(c.holdout_batches);
    auto elastic = Create(options);
    std::unique_ptr<fl::ClientHook> hook = PlannedHook(options);
    DotModel model;
    const fl::ModelState global = fl::ModelState::FromModule(model);
    fl::ServerContext context;
    ASSERT_TRUE(elastic->Configure(global, context).ok());
    for (const std::vector<int64_t>* share : {&share_a, &share_b}) {
      fl::TensorMap state;
      std::vector<int64_t> train;
      fl::ClientUpdate update;
      update.extras["elastic/omega"] = RunClient(*hook, model, examples, *share, 1, train, state);
      update.num_examples = static_cast<int64_t>(train.size());
      update.delta = fl::ModelState({{"w", at::ones({3}), false}});
      ASSERT_TRUE(elastic->Accumulate(std::move(update), context).ok());
    }
    auto next = elastic->Finalize(global, context);
    ASSERT_TRUE(next.ok()) << next.status();
    // Every delta is 1, so the step is zeta itself.
    const at::Tensor zeta = next->tensor(0) - global.tensor(0);
    EXPECT_TRUE(zeta.allclose(at::tensor(c.zeta), 1e-5, 1e-6)) << zeta;
  }
}

// Two logits F(x) = W x, W = [[1, 0, 0], [0, 0, 0]]: the cross-entropy's gradient
// (softmax(Wx) - onehot(y)) x^T can be written down by hand.
class TwoLogitModel : public fl::Model {
 public:
  TwoLogitModel() {
    w_ = register_parameter("w", at::tensor({1.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f}).view({2, 3}));
  }
  at::Tensor Forward(const at::Tensor& x) override { return x.matmul(w_.t()); }

 private:
  at::Tensor w_;
};

TEST(ElasticHookTest, PaperModeWithLabelledCrossEntropyAgainstHandComputation) {
  // PAPER (the default mode) with objective LABELED_CROSS_ENTROPY, through the
  // aggregator's plan: per-element |g|, EMA from zeros every round. Two copies of
  // x = (1, 2, 0) labelled 1, batch size 1, half held out: one update per round.
  // Logits (1, 0), softmax (s, 1 - s) with s = e / (1 + e); minus onehot(1):
  // (s, -s), so g = [[s, 2s, 0], [-s, -2s, 0]] and Omega = 0.05 |g|, the same in
  // round 2 (PAPER restarts the EMA). The output-norm objective would give
  // 0.05 |2 (Wx) x^T| = [[0.1, 0.2, 0], [0, 0, 0]]; label 0 would give 1 - s for s.
  ElasticOptions options;
  options.mutable_sensitivity()->set_objective(fedkit::aggregators::LABELED_CROSS_ENTROPY);
  options.mutable_sensitivity()->set_holdout_fraction(0.5);
  std::unique_ptr<fl::ClientHook> hook = PlannedHook(options);
  const fl::Examples examples{at::tensor({1.0f, 2.0f, 0.0f}).repeat({2, 1}),
                              at::ones({2}, at::kLong)};
  const float s = std::exp(1.0f) / (1.0f + std::exp(1.0f));
  const at::Tensor expected =
      0.05f * at::tensor({s, 2 * s, 0.0f, s, 2 * s, 0.0f}).view({2, 3});
  TwoLogitModel model;
  fl::TensorMap state;
  for (int round = 1; round <= 2; ++round) {
    std::vector<int64_t> train;
    const fl::ModelState omega = RunClient(*hook, model, examples, {0, 1}, 1, train, state);
    EXPECT_EQ(train.size(), 1u);
    EXPECT_TRUE(omega.tensor(0).allclose(expected, 1e-5, 1e-7))
        << "round " << round << ": " << omega.tensor(0);
  }
}

}  // namespace
}  // namespace aggregators
