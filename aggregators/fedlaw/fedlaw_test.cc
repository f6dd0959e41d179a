#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/nn/modules/batchnorm.h>

#include "aggregators/common/proxy_training.h"
#include "aggregators/common/scalar_toy.h"
#include "aggregators/fedlaw/fedlaw_options.pb.h"
#include "aggregators/fedlaw/fedlaw_weights.h"
#include "fl/aggregator.h"
#include "fl/batch_order_file.h"
#include "fl/model.h"
#include "fl/registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace aggregators {
namespace {

using ::fedkit::aggregators::FedLawOptions;
using fedlaw::Cohort;
using fedlaw::Parameterization;
using fedlaw::Weights;

// A small float64 network for the finite-difference check.
class DoubleMlp : public fl::Model {
 public:
  DoubleMlp() {
    w1_ = register_parameter("w1", at::randn({4, 3}, at::kDouble));
    b1_ = register_parameter("b1", at::randn({4}, at::kDouble));
    w2_ = register_parameter("w2", at::randn({3, 4}, at::kDouble));
    b2_ = register_parameter("b2", at::randn({3}, at::kDouble));
  }
  at::Tensor Forward(const at::Tensor& x) override {
    return at::linear(at::tanh(at::linear(x, w1_, b1_)), w2_, b2_);
  }

 private:
  at::Tensor w1_, b1_, w2_, b2_;
};

// A linear layer followed by BatchNorm, whose running statistics move in train mode.
class NormModel : public fl::Model {
 public:
  NormModel() {
    weight_ = register_parameter("weight", at::ones({2, 2}));
    norm_ = register_module("norm", torch::nn::BatchNorm1d(2));
  }
  at::Tensor Forward(const at::Tensor& x) override { return norm_->forward(at::linear(x, weight_)); }

 private:
  at::Tensor weight_;
  torch::nn::BatchNorm1d norm_{nullptr};
};

std::unique_ptr<fl::Aggregator> Create(const std::string& name,
                                       const google::protobuf::Message& options) {
  google::protobuf::Any any;
  any.PackFrom(options);
  auto aggregator = fl::Registry<fl::Aggregator>::Global().Create(name, any);
  EXPECT_TRUE(aggregator.ok()) << aggregator.status();
  return aggregator.ok() ? *std::move(aggregator) : nullptr;
}

template <typename M>
fl::ServerContext ContextFor(const fl::Examples* proxy) {
  fl::ServerContext context;
  context.round = 1;
  context.round_seed = 3;
  context.proxy = proxy;
  context.new_model = [] { return absl::StatusOr<std::unique_ptr<fl::Model>>(std::make_unique<M>()); };
  return context;
}

fl::ClientUpdate Update(int64_t id, int64_t n, fl::ModelState delta) {
  fl::ClientUpdate update;
  update.client_id = id;
  update.num_examples = n;
  update.delta = std::move(delta);
  return update;
}

absl::StatusOr<fl::ModelState> Round(fl::Aggregator& aggregator, const fl::ModelState& global,
                                     std::vector<fl::ClientUpdate> updates,
                                     fl::ServerContext& context) {
  auto plan = aggregator.Configure(global, context);
  if (!plan.ok()) return plan.status();
  for (auto& u : updates) {
    absl::Status s = aggregator.Accumulate(std::move(u), context);
    if (!s.ok()) return s;
  }
  return aggregator.Finalize(global, context);
}

FedLawOptions Options(FedLawOptions::Learn learn, int epochs = 1) {
  FedLawOptions options;
  options.set_learn(learn);
  options.set_server_epochs(epochs);
  options.set_client_holdout_fraction(0);
  return options;
}

// The toy of scalar_toy.h: FedAvg's w is 2.5, the proxy loss L(w) has dL/dw = tanh(w).
class FedLawToyTest : public ::testing::Test {
 protected:
  absl::StatusOr<fl::ModelState> Run(fl::Aggregator& aggregator) {
    return toy::ScalarToy::Round(aggregator, context_);
  }
  toy::ScalarToy toy_;
  fl::ServerContext context_ = toy_.Context();
};

TEST_F(FedLawToyTest, OneAdamStepAgainstHandComputation) {
  // Start: lambda = (1/4, 3/4), gamma = 1, theta_hat = 2.5, G = tanh(2.5).
  // d_i = G theta_i = (G, 3G), D = sum lambda_i d_i = 2.5 G.
  //   dL/dg   = gamma D = 2.5 G
  //   dL/da_1 = gamma lambda_1 (d_1 - D) = 0.25 (G - 2.5 G) = -0.375 G
  //   dL/da_2 = gamma lambda_2 (d_2 - D) = 0.75 (3G - 2.5 G) = +0.375 G
  // Adam's first step moves each variable by -lr * grad / (|grad| + eps) (m_hat = grad,
  // sqrt(v_hat) = |grad|): g' = -0.005 (1 - eps'), a' = (log 0.25 + s, log 0.75 - s) with
  // s = 0.005 * 0.375G / (0.375G + 1e-8). New model: exp(g') (lambda'_1 * 1 + lambda'_2 * 3).
  const double G = std::tanh(2.5);
  const double step_g = 0.005 * (2.5 * G) / (2.5 * G + 1e-8);
  const double step_a = 0.005 * (0.375 * G) / (0.375 * G + 1e-8);
  const double gamma = std::exp(-step_g);
  const double e1 = 0.25 * std::exp(step_a), e2 = 0.75 * std::exp(-step_a);
  const double l1 = e1 / (e1 + e2), l2 = e2 / (e1 + e2);
  const double expected = gamma * (l1 * 1 + l2 * 3);

  auto fedlaw = Create("fedlaw", Options(FedLawOptions::BOTH, /*epochs=*/1));
  auto next = Run(*fedlaw);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_NEAR(next->tensor(0).item<double>(), expected, 1e-12);
  EXPECT_NEAR(context_.diagnostics.at("gamma"), gamma, 1e-12);
  EXPECT_NEAR(context_.diagnostics.at("lambda_max"), l2, 1e-12);
  EXPECT_NEAR(context_.diagnostics.at("lambda_entropy"), -l1 * std::log(l1) - l2 * std::log(l2),
              1e-12);
  EXPECT_NEAR(context_.diagnostics.at("proxy_loss_before"), toy::ScalarToyLoss(2.5), 1e-12);
  EXPECT_NEAR(context_.diagnostics.at("proxy_loss_after"), toy::ScalarToyLoss(expected), 1e-12);
  EXPECT_LT(gamma, 1.0);  // the toy's optimum is theta = 0: shrink
}

// GAMMA_ONLY on the toy for one epoch in proxy minibatches of one example: two
// Adam steps on g, lambda held at (1/4, 3/4), so theta_hat = 2.5 gamma with gamma =
// e^g. Example b's loss has l_b'(w) = -(1 - tanh w) for label 0 and 1 + tanh w for
// label 1 (the toy's two halves), so dL_b/dg = gamma D = gamma * 2.5 l_b'(2.5 gamma).
// Adam's two bias-corrected steps in closed form:
//   g1 = -lr q1 / (|q1| + eps)
//   g2 = g1 - lr m / (sqrt(v) + eps),  m = (b1 q1 + q2) / (1 + b1),
//                                      v = (b2 q1^2 + q2^2) / (1 + b2).
// Returns gamma = e^{g2} for the batches' labels in the order given.
double GammaAfterTwoSteps(const std::vector<int64_t>& labels, double lr, double beta1,
                          double beta2, double eps) {
  auto slope = [&labels](int step, double gamma) {
    const double w = 2.5 * gamma;
    const double dl = labels[step] == 0 ? -(1 - std::tanh(w)) : 1 + std::tanh(w);
    return gamma * 2.5 * dl;
  };
  const double q1 = slope(0, 1.0);
  const double g1 = -lr * q1 / (std::abs(q1) + eps);
  const double q2 = slope(1, std::exp(g1));
  const double m = (beta1 * q1 + q2) / (1 + beta1);
  const double v = (beta2 * q1 * q1 + q2 * q2) / (1 + beta2);
  return std::exp(g1 - lr * m / (std::sqrt(v) + eps));
}

// The labels of the toy's two proxy examples in the order FedLAW's one-example
// minibatches visit them: ShuffledBatches' first shuffle from the round seed.
std::vector<int64_t> ShuffledToyLabels(const toy::ScalarToy& toy,
                                       const fl::ServerContext& context) {
  std::mt19937_64 rng(context.round_seed);
  std::vector<int64_t> labels;
  for (const at::Tensor& batch : ShuffledBatches(2, 1, rng, at::kCPU)) {
    labels.push_back(toy.proxy.y[batch.item<int64_t>()].item<int64_t>());
  }
  return labels;
}

TEST_F(FedLawToyTest, BatchSizeSetsTheStepsPerEpoch) {
  const std::vector<int64_t> labels = ShuffledToyLabels(toy_, context_);
  ASSERT_THAT(labels, ::testing::UnorderedElementsAre(0, 1));
  // Default lr and Adam (0.005; 0.5, 0.999, 1e-8): two steps of one example each.
  const double gamma = GammaAfterTwoSteps(labels, 0.005, 0.5, 0.999, 1e-8);
  FedLawOptions options = Options(FedLawOptions::GAMMA_ONLY, /*epochs=*/1);
  options.set_batch_size(1);
  auto fedlaw = Create("fedlaw", options);
  auto next = Run(*fedlaw);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_NEAR(context_.diagnostics.at("gamma"), gamma, 1e-12);
  EXPECT_NEAR(next->tensor(0).item<double>(), 2.5 * gamma, 1e-12);

  // Both examples in one batch (2, as the default 128 on this proxy set): one step
  // on the mean slope 2.5 tanh(2.5), gamma = e^{-lr (1 - eps')}.
  const double q = 2.5 * std::tanh(2.5);
  options.set_batch_size(2);
  auto whole = Create("fedlaw", options);
  ASSERT_TRUE(Run(*whole).ok());
  EXPECT_NEAR(context_.diagnostics.at("gamma"), std::exp(-0.005 * q / (q + 1e-8)), 1e-12);
}

TEST_F(FedLawToyTest, ProxyInOrderVisitsTheProxySetInItsOrderWhateverTheSeed) {
  // The two one-example steps of BatchSizeSetsTheStepsPerEpoch, with the labels in
  // the proxy set's own order rather than a shuffle's.
  const std::vector<int64_t> in_order = {toy_.proxy.y[0].item<int64_t>(),
                                         toy_.proxy.y[1].item<int64_t>()};
  ASSERT_NE(in_order[0], in_order[1]);
  const double gamma = GammaAfterTwoSteps(in_order, 0.005, 0.5, 0.999, 1e-8);
  FedLawOptions options = Options(FedLawOptions::GAMMA_ONLY, /*epochs=*/1);
  options.set_batch_size(1);
  options.set_proxy_in_order(true);
  int shuffles_reversed = 0;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    context_.round_seed = seed;
    shuffles_reversed += ShuffledToyLabels(toy_, context_) != in_order;
    auto fedlaw = Create("fedlaw", options);
    ASSERT_TRUE(Run(*fedlaw).ok());
    EXPECT_NEAR(context_.diagnostics.at("gamma"), gamma, 1e-12) << "round seed " << seed;
  }
  // Some of those seeds' shuffles would have visited the examples the other way round.
  EXPECT_GT(shuffles_reversed, 0);
}

TEST_F(FedLawToyTest, RecordedProxyOrdersAreReplayed) {
  // The two one-example steps, in the order a file gives for this round: (1, 0)
  // then (0, 1) for rounds 1 and 2 of one directory.
  const std::string dir = std::string(getenv("TEST_TMPDIR")) + "/proxy_orders";
  for (const auto& [round, line] : {std::pair{1, "1 0"}, std::pair{2, "0 1"}}) {
    std::filesystem::create_directories(dir + "/" + std::to_string(round));
    std::ofstream(dir + "/" + std::to_string(round) + "/proxy.txt") << line << "\n";
  }
  FedLawOptions options = Options(FedLawOptions::GAMMA_ONLY, /*epochs=*/1);
  options.set_batch_size(1);
  options.set_proxy_order_dir(dir);
  const std::vector<int64_t> labels = {toy_.proxy.y[0].item<int64_t>(),
                                       toy_.proxy.y[1].item<int64_t>()};
  ASSERT_NE(labels[0], labels[1]);
  for (int round : {1, 2}) {
    context_.round = round;
    const std::vector<int64_t> visited =
        round == 1 ? std::vector<int64_t>{labels[1], labels[0]} : labels;
    auto fedlaw = Create("fedlaw", options);
    ASSERT_TRUE(Run(*fedlaw).ok());
    EXPECT_NEAR(context_.diagnostics.at("gamma"), GammaAfterTwoSteps(visited, 0.005, 0.5, 0.999, 1e-8),
                1e-12)
        << "round " << round;
  }
  // A round without a file, or fewer recorded epochs than the server runs, fails.
  context_.round = 3;
  auto missing = Create("fedlaw", options);
  EXPECT_EQ(Run(*missing).status().code(), absl::StatusCode::kNotFound);
  context_.round = 1;
  FedLawOptions more = Options(FedLawOptions::GAMMA_ONLY, /*epochs=*/2);
  more.set_proxy_order_dir(dir);
  auto short_file = Create("fedlaw", more);
  EXPECT_THAT(Run(*short_file).status().message(), ::testing::HasSubstr("1 recorded epochs, 2 needed"));
}

TEST_F(FedLawToyTest, ProxyOrdersAreRecordedAsDrawnAndReplayToTheSameGamma) {
  const std::string dir = std::string(getenv("TEST_TMPDIR")) + "/own_proxy_orders";
  FedLawOptions options = Options(FedLawOptions::GAMMA_ONLY, /*epochs=*/3);
  options.set_batch_size(1);
  auto plain = Create("fedlaw", options);
  ASSERT_TRUE(Run(*plain).ok());
  const double gamma = context_.diagnostics.at("gamma");

  options.set_proxy_order_record_dir(dir);
  auto recording = Create("fedlaw", options);
  ASSERT_TRUE(Run(*recording).ok());
  EXPECT_EQ(context_.diagnostics.at("gamma"), gamma);  // recording draws nothing
  auto orders = fl::ReadBatchOrders(dir, context_.round, "proxy", {0, 1});
  ASSERT_TRUE(orders.ok()) << orders.status();
  EXPECT_EQ(orders->size(), 3u);  // one line per server epoch
  std::mt19937_64 rng(context_.round_seed);
  EXPECT_EQ(orders->front(), EpochOrder(2, &rng));

  options.clear_proxy_order_record_dir();
  options.set_proxy_order_dir(dir);
  auto replaying = Create("fedlaw", options);
  ASSERT_TRUE(Run(*replaying).ok());
  EXPECT_EQ(context_.diagnostics.at("gamma"), gamma);

  // A used folder is refused: its files would be appended to.
  options.clear_proxy_order_dir();
  options.set_proxy_order_record_dir(dir);
  google::protobuf::Any any;
  any.PackFrom(options);
  EXPECT_THAT(fl::Registry<fl::Aggregator>::Global().Create("fedlaw", any).status().message(),
              ::testing::AllOf(::testing::HasSubstr("options.proxy_order_record_dir"),
                               ::testing::HasSubstr("new or empty")));
}

TEST_F(FedLawToyTest, AdamBetasAndEpsReachTheOptimiser) {
  // The two one-example steps above, each of beta1, beta2 and eps away from its
  // default: the second step's m and v mix q1 and q2 (whose signs differ) by the
  // betas, and an eps near |q| damps both steps.
  const std::vector<int64_t> labels = ShuffledToyLabels(toy_, context_);
  FedLawOptions options = Options(FedLawOptions::GAMMA_ONLY, /*epochs=*/1);
  options.set_batch_size(1);
  options.set_lr(0.1);
  options.set_beta1(0.9);
  options.set_beta2(0.6);
  options.set_eps(0.5);
  auto fedlaw = Create("fedlaw", options);
  ASSERT_TRUE(Run(*fedlaw).ok());
  EXPECT_NEAR(context_.diagnostics.at("gamma"), GammaAfterTwoSteps(labels, 0.1, 0.9, 0.6, 0.5),
              1e-12);
  // Each setting matters here (the defaults for one of them give another gamma).
  const double defaults[] = {GammaAfterTwoSteps(labels, 0.1, 0.5, 0.6, 0.5),
                             GammaAfterTwoSteps(labels, 0.1, 0.9, 0.999, 0.5),
                             GammaAfterTwoSteps(labels, 0.1, 0.9, 0.6, 1e-8)};
  for (double other : defaults) {
    EXPECT_GT(std::abs(context_.diagnostics.at("gamma") - other), 1e-4) << other;
  }
}

TEST_F(FedLawToyTest, QuadStartsFromUniformLambdaAndUnitGamma) {
  // quad: a_i = sqrt(1/2), g = 1, so lambda = (1/2, 1/2), gamma = 1: theta_hat = 2.
  FedLawOptions options = Options(FedLawOptions::BOTH);
  options.set_parameterization(FedLawOptions::QUAD);
  auto fedlaw = Create("fedlaw", options);
  ASSERT_TRUE(Run(*fedlaw).ok());
  EXPECT_NEAR(context_.diagnostics.at("proxy_loss_before"), toy::ScalarToyLoss(2.0), 1e-12);

  const Weights start = fedlaw::InitialWeights(Parameterization::kQuad, {0.25, 0.75}, false);
  EXPECT_DOUBLE_EQ(start.Gamma(), 1.0);
  EXPECT_THAT(start.Lambda(), ::testing::ElementsAre(::testing::DoubleNear(0.5, 1e-15),
                                                     ::testing::DoubleNear(0.5, 1e-15)));
  // Held at the size weights (GAMMA_ONLY), quad starts at a_i = sqrt(w_i).
  const Weights sized = fedlaw::InitialWeights(Parameterization::kQuad, {0.25, 0.75}, true);
  EXPECT_THAT(sized.Lambda(), ::testing::ElementsAre(::testing::DoubleNear(0.25, 1e-15),
                                                     ::testing::DoubleNear(0.75, 1e-15)));
}

TEST_F(FedLawToyTest, GammaOnlyKeepsSizeWeights) {
  auto fedlaw = Create("fedlaw", Options(FedLawOptions::GAMMA_ONLY, 3));
  auto next = Run(*fedlaw);
  ASSERT_TRUE(next.ok()) << next.status();
  const double gamma = context_.diagnostics.at("gamma");
  EXPECT_LT(gamma, 1.0);
  EXPECT_NEAR(context_.diagnostics.at("lambda_max"), 0.75, 1e-12);
  EXPECT_NEAR(next->tensor(0).item<double>(), gamma * 2.5, 1e-12);
}

TEST_F(FedLawToyTest, LambdaOnlyKeepsGammaAtOne) {
  auto fedlaw = Create("fedlaw", Options(FedLawOptions::LAMBDA_ONLY, 3));
  ASSERT_TRUE(Run(*fedlaw).ok());
  EXPECT_DOUBLE_EQ(context_.diagnostics.at("gamma"), 1.0);
  EXPECT_LT(context_.diagnostics.at("lambda_max"), 0.75);  // weight moves to w = 1
}

TEST_F(FedLawToyTest, SwaWithFewEpochsKeepsSizeWeights) {
  // Es = 12: the lambda stage runs 6 epochs (0..5), none after kSwaStart = 5, so no
  // snapshot of a is taken and lambda stays at the size weights; gamma still learns.
  FedLawOptions options = Options(FedLawOptions::BOTH, 12);
  options.set_swa(true);
  auto fedlaw = Create("fedlaw", options);
  auto next = Run(*fedlaw);
  ASSERT_TRUE(next.ok()) << next.status();
  const double gamma = context_.diagnostics.at("gamma");
  EXPECT_LT(gamma, 1.0);
  EXPECT_NEAR(context_.diagnostics.at("lambda_max"), 0.75, 1e-12);
  EXPECT_NEAR(next->tensor(0).item<double>(), gamma * 2.5, 1e-12);

  // Es = 14: one snapshot (after epoch 6) and lambda moves.
  options.set_server_epochs(14);
  auto longer = Create("fedlaw", options);
  ASSERT_TRUE(Run(*longer).ok());
  EXPECT_LT(context_.diagnostics.at("lambda_max"), 0.75);
}

TEST_F(FedLawToyTest, SwaOrderDecidesWhichStageLearnsFromTheSizeWeights) {
  // Paper order: gamma's stage runs first, from lambda at the size weights, exactly
  // as GAMMA_ONLY with Es / 2 epochs does (same proxy batches: the stages draw them
  // in turn). The code's order learns gamma after lambda moved, so its gamma differs.
  auto gamma_only = Create("fedlaw", Options(FedLawOptions::GAMMA_ONLY, 7));
  ASSERT_TRUE(Run(*gamma_only).ok());
  const double gamma_alone = context_.diagnostics.at("gamma");

  FedLawOptions options = Options(FedLawOptions::BOTH, 14);
  options.set_swa(true);
  options.set_swa_order(FedLawOptions::GAMMA_FIRST);
  auto paper = Create("fedlaw", options);
  ASSERT_TRUE(Run(*paper).ok());
  EXPECT_DOUBLE_EQ(context_.diagnostics.at("gamma"), gamma_alone);
  EXPECT_LT(context_.diagnostics.at("lambda_max"), 0.75);  // lambda then learns

  options.set_swa_order(FedLawOptions::LAMBDA_FIRST);
  auto code = Create("fedlaw", options);
  ASSERT_TRUE(Run(*code).ok());
  EXPECT_NE(context_.diagnostics.at("gamma"), gamma_alone);
}

TEST_F(FedLawToyTest, WithoutAProxySetFailsNamingTheField) {
  context_.proxy = nullptr;
  auto fedlaw = Create("fedlaw", Options(FedLawOptions::BOTH));
  auto plan = fedlaw->Configure(toy::Scalar(0), context_);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(plan.status().message()), ::testing::HasSubstr("server.proxy.size"));
}

TEST_F(FedLawToyTest, PlansTheHoldoutHook) {
  FedLawOptions options = Options(FedLawOptions::BOTH);
  options.clear_client_holdout_fraction();
  auto plan = Create("fedlaw", options)->Configure(toy::Scalar(0), context_);
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->hooks.size(), 1u);
  EXPECT_EQ(plan->hooks[0].name, "holdout");
  EXPECT_THAT(plan->hooks[0].options.DebugString(), ::testing::HasSubstr("fraction: 0.3"));
  auto none = Create("fedlaw", Options(FedLawOptions::BOTH))->Configure(toy::Scalar(0), context_);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->hooks.empty());
}

TEST(FedLawTest, NothingLearnedIsFedAvg) {
  torch::manual_seed(2);
  fl::Examples proxy{at::randn({6, 2}), at::tensor({0, 1, 0, 1, 1, 0}, at::kLong)};
  fl::ServerContext context = ContextFor<NormModel>(&proxy);
  fl::ModelState global = fl::ModelState::FromModule(NormModel());
  std::vector<fl::ClientUpdate> updates;
  for (int id = 0; id < 3; ++id) {
    fl::ModelState delta = global.ZerosLike();
    for (auto& e : delta.mutable_entries()) {
      if (at::isFloatingType(e.tensor.scalar_type())) e.tensor = at::randn_like(e.tensor);
    }
    updates.push_back(Update(id, 10 * (id + 1), std::move(delta)));
  }
  auto fedavg = fl::Registry<fl::Aggregator>::Global().Create("fedavg", google::protobuf::Any());
  ASSERT_TRUE(fedavg.ok());
  auto expected = Round(**fedavg, global, updates, context);
  auto fedlaw = Create("fedlaw", Options(FedLawOptions::NONE));
  auto next = Round(*fedlaw, global, updates, context);
  ASSERT_TRUE(expected.ok() && next.ok()) << next.status();
  for (size_t i = 0; i < next->size(); ++i) {
    const auto& e = next->entries()[i];
    // Parameters are FedAvg's; buffers are the server's (here still the global's).
    const at::Tensor& want = e.is_buffer ? global.tensor(i) : expected->tensor(i);
    EXPECT_TRUE(e.tensor.allclose(want, 1e-6, 1e-6)) << e.name;
  }
  EXPECT_DOUBLE_EQ(context.diagnostics.at("gamma"), 1.0);
  EXPECT_DOUBLE_EQ(context.diagnostics.at("proxy_loss_before"),
                   context.diagnostics.at("proxy_loss_after"));
}

TEST(FedLawTest, BuffersComeFromTheServersPassesNotTheClients) {
  torch::manual_seed(4);
  fl::Examples proxy{at::randn({8, 2}), at::tensor({0, 1, 0, 1, 1, 0, 0, 1}, at::kLong)};
  fl::ServerContext context = ContextFor<NormModel>(&proxy);
  fl::ModelState global = fl::ModelState::FromModule(NormModel());
  auto run = [&](double buffer_delta) {
    std::vector<fl::ClientUpdate> updates;
    for (int id = 0; id < 2; ++id) {
      fl::ModelState delta = global.ZerosLike();
      for (auto& e : delta.mutable_entries()) {
        if (!at::isFloatingType(e.tensor.scalar_type())) continue;
        e.tensor = e.is_buffer ? at::full_like(e.tensor, buffer_delta)
                               : at::full_like(e.tensor, 0.1 * (id + 1));
      }
      updates.push_back(Update(id, 5, std::move(delta)));
    }
    auto fedlaw = Create("fedlaw", Options(FedLawOptions::BOTH, 2));
    auto next = Round(*fedlaw, global, updates, context);
    EXPECT_TRUE(next.ok()) << next.status();
    return *std::move(next);
  };
  const fl::ModelState a = run(0.0);
  const fl::ModelState b = run(100.0);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(a.tensor(i).equal(b.tensor(i))) << a.entries()[i].name;
    if (a.entries()[i].name == "norm.running_mean") {
      // The train-mode proxy passes moved the statistics away from the global's zeros.
      EXPECT_FALSE(a.tensor(i).equal(global.tensor(i)));
    }
  }
}

double ProxyLossAt(fl::Model& model, const std::vector<at::Tensor>& parameters,
                   const Cohort& cohort, const Weights& w, const fl::Examples& proxy) {
  fedlaw::LoadParameters(fedlaw::Combine(cohort, w.Gamma(), w.Lambda()), parameters);
  at::NoGradGuard no_grad;
  return at::cross_entropy_loss(model.Forward(proxy.x), proxy.y).item<double>();
}

void ExpectGradientMatchesFiniteDifferences(Parameterization parameterization) {
  torch::manual_seed(5);
  DoubleMlp model;
  const std::vector<at::Tensor> parameters = model.parameters();
  const fl::ModelState global = fl::ModelState::FromModule(model);
  Cohort cohort;
  cohort.base = fedlaw::FlattenParameters(global);
  cohort.deltas = at::randn({3, cohort.base.numel()}, at::kDouble).mul_(0.5);
  const fl::Examples proxy{at::randn({10, 3}, at::kDouble),
                           at::tensor({0, 1, 2, 0, 1, 2, 0, 1, 2, 2}, at::kLong)};
  Weights w = fedlaw::InitialWeights(parameterization, {0.2, 0.3, 0.5}, false);
  // Away from the start, so no term vanishes by symmetry.
  w.a = {w.a[0] + 0.3, w.a[1] - 0.2, w.a[2] + 0.1};
  w.g += 0.15;

  at::Tensor gradient;
  fedlaw::LossAndGradient(model, parameters, fedlaw::Combine(cohort, w.Gamma(), w.Lambda()),
                          proxy.x, proxy.y, &gradient);
  const fedlaw::Gradient analytic = fedlaw::ChainRule(w, cohort, gradient);

  const double h = 1e-5;
  auto central = [&](auto perturb) {
    Weights plus = w, minus = w;
    perturb(plus, h);
    perturb(minus, -h);
    return (ProxyLossAt(model, parameters, cohort, plus, proxy) -
            ProxyLossAt(model, parameters, cohort, minus, proxy)) /
           (2 * h);
  };
  EXPECT_NEAR(analytic.g, central([](Weights& v, double d) { v.g += d; }), 1e-8);
  EXPECT_GT(std::abs(analytic.g), 1e-3);
  for (size_t j = 0; j < 3; ++j) {
    EXPECT_NEAR(analytic.a[j], central([j](Weights& v, double d) { v.a[j] += d; }), 1e-8) << j;
    EXPECT_GT(std::abs(analytic.a[j]), 1e-4) << j;
  }
}

TEST(FedLawWeightsTest, ExpGradientMatchesFiniteDifferences) {
  ExpectGradientMatchesFiniteDifferences(Parameterization::kExp);
}

TEST(FedLawWeightsTest, QuadGradientMatchesFiniteDifferences) {
  ExpectGradientMatchesFiniteDifferences(Parameterization::kQuad);
}

TEST(FedLawWeightsTest, LearningRateSchedules) {
  EXPECT_DOUBLE_EQ(fedlaw::StepLr(0.005, 19), 0.005);
  EXPECT_DOUBLE_EQ(fedlaw::StepLr(0.005, 20), 0.0025);
  // SWA lambda stage: cosine (T_max 100) through epoch 6, then SWALR towards 0.05
  // over 10 epochs from the rate at epoch 6.
  const double pi = 3.14159265358979323846;
  const double at6 = 0.005 * (1 + std::cos(pi * 6 / 100)) / 2;
  EXPECT_DOUBLE_EQ(fedlaw::SwaLambdaLr(0.005, 0), 0.005);
  EXPECT_DOUBLE_EQ(fedlaw::SwaLambdaLr(0.005, 6), at6);
  const double alpha1 = (1 - std::cos(pi * 0.1)) / 2;
  EXPECT_DOUBLE_EQ(fedlaw::SwaLambdaLr(0.005, 7), 0.05 * alpha1 + at6 * (1 - alpha1));
  EXPECT_DOUBLE_EQ(fedlaw::SwaLambdaLr(0.005, 16), 0.05);
  EXPECT_DOUBLE_EQ(fedlaw::SwaLambdaLr(0.005, 30), 0.05);
}

TEST(FedLawWeightsTest, AdamMatchesTorchsUpdateRule) {
  // Two steps by hand, lr 0.1, betas (0.5, 0.999), eps 0: grads 2 then -1.
  // t=1: m = 1, v = 0.004; x -= (0.1 / 0.5) * 1 / (sqrt(0.004) / sqrt(0.001)) = 0.1
  // t=2: m = 0.5 - 0.5 = 0, so x stays.
  fedlaw::ScalarAdam adam(1, 0.5, 0.999, 0.0);
  std::vector<double> x = {1.0};
  adam.Step(x, {2.0}, 0.1);
  EXPECT_NEAR(x[0], 0.9, 1e-15);
  adam.Step(x, {-1.0}, 0.1);
  EXPECT_NEAR(x[0], 0.9, 1e-15);
}

TEST(FedLawTest, RejectsBadOptionsAllAtOnce) {
  FedLawOptions options;
  options.set_server_epochs(0);
  options.set_lr(-1);
  options.set_client_holdout_fraction(1.0);
  options.set_beta1(1);
  options.set_beta2(-0.1);
  options.set_eps(0);
  options.set_batch_size(0);
  google::protobuf::Any any;
  any.PackFrom(options);
  auto fedlaw = fl::Registry<fl::Aggregator>::Global().Create("fedlaw", any);
  ASSERT_FALSE(fedlaw.ok());
  const std::string message(fedlaw.status().message());
  EXPECT_THAT(message, ::testing::HasSubstr("options.server_epochs: must be >= 1, got 0"));
  EXPECT_THAT(message, ::testing::HasSubstr("options.lr: must be > 0, got -1"));
  EXPECT_THAT(message, ::testing::HasSubstr("options.client_holdout_fraction: must be in [0, 1)"));
  EXPECT_THAT(message, ::testing::HasSubstr("options.beta1: must be in [0, 1), got 1"));
  EXPECT_THAT(message, ::testing::HasSubstr("options.beta2: must be in [0, 1), got -0.1"));
  EXPECT_THAT(message, ::testing::HasSubstr("options.eps: must be > 0, got 0"));
  EXPECT_THAT(message, ::testing::HasSubstr("options.batch_size: must be >= 1, got 0"));
}

}  // namespace
}  // namespace aggregators
