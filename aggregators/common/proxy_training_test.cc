#include "aggregators/common/proxy_training.h"

#include <cmath>
#include <random>
#include <set>

#include <ATen/ATen.h>
#include <torch/optim/adam.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace aggregators {
namespace {

class Scalar : public fl::Model {
 public:
  Scalar() { w_ = register_parameter("w", at::zeros({1}, at::kDouble)); }
  at::Tensor Forward(const at::Tensor& x) override { return x * w_; }
  double w() const { return w_.item<double>(); }

 private:
  at::Tensor w_;
};

// (w - 3)^2 whatever the batch: gradient 2 (w - 3).
at::Tensor Quadratic(fl::Model& model, const at::Tensor&) {
  return (model.parameters()[0] - 3).pow(2).sum();
}

ServerSgdConfig Sgd(int64_t steps, bool persist) {
  ServerSgdConfig config;
  config.steps = steps;
  config.lr = 0.1;
  config.momentum = 0.9;
  config.weight_decay = 0;
  config.persist_momentum = persist;
  return config;
}

TEST(ProxySgdTest, MomentumAgainstHandComputation) {
  // w0 = 0: g = -6, b = -6, w1 = 0.6; g = -4.8, b = 0.9 * -6 - 4.8 = -10.2, w2 = 1.62.
  ProxySgd sgd(Sgd(2, true));
  Scalar model;
  ASSERT_TRUE(sgd.Train(model, 4, 1, Quadratic).ok());
  EXPECT_NEAR(model.w(), 1.62, 1e-12);
}

TEST(ProxySgdTest, MomentumCarriesIntoTheNextRoundUnlessAsked) {
  // Next round, one step from w = 1.62: g = -2.76.
  //   persisted: b = 0.9 * -10.2 - 2.76 = -11.94, w = 2.814
  //   fresh:     b = -2.76,                         w = 1.896
  for (bool persist : {true, false}) {
    ProxySgd first(Sgd(2, persist));
    Scalar model;
    ASSERT_TRUE(first.Train(model, 4, 1, Quadratic).ok());
    ServerSgdConfig one = Sgd(1, persist);
    ProxySgd second(one);
    ASSERT_TRUE(second.RestoreState(first.SaveState()).ok());  // through a checkpoint
    ASSERT_TRUE(second.Train(model, 4, 2, Quadratic).ok());
    EXPECT_NEAR(model.w(), persist ? 2.814 : 1.896, 1e-12) << persist;
  }
}

TEST(ProxySgdTest, WeightDecayAddsToTheGradient) {
  // wd 0.5, no momentum, from w = 0: d = -6 + 0 = -6, w1 = 0.6; d = -4.8 + 0.3, w2 = 1.05.
  ServerSgdConfig config = Sgd(2, true);
  config.momentum = 0;
  config.weight_decay = 0.5;
  ProxySgd sgd(config);
  Scalar model;
  ASSERT_TRUE(sgd.Train(model, 4, 1, Quadratic).ok());
  EXPECT_NEAR(model.w(), 1.05, 1e-12);
}

// Two rounds of Adam, 2 steps then 1 through a checkpoint, against one
// torch::optim::Adam run of 3 steps on the same quadratic: the same rule, the
// moments and step count carried across rounds.
TEST(ProxySgdTest, AdamFollowsTorchsRuleAcrossRounds) {
  ServerSgdConfig config = Sgd(2, true);
  config.adam = true;
  config.lr = 0.1;
  config.weight_decay = 0.01;
  ProxySgd first(config);
  Scalar model;
  ASSERT_TRUE(first.Train(model, 4, 1, Quadratic).ok());
  config.steps = 1;
  ProxySgd second(config);
  ASSERT_TRUE(second.RestoreState(first.SaveState()).ok());
  ASSERT_TRUE(second.Train(model, 4, 2, Quadratic).ok());

  Scalar reference;
  torch::optim::Adam adam(reference.parameters(), torch::optim::AdamOptions(0.1)
                                                      .betas({0.5, 0.999})
                                                      .eps(1e-8)
                                                      .weight_decay(0.01));
  for (int step = 0; step < 3; ++step) {
    adam.zero_grad();
    Quadratic(reference, at::Tensor()).backward();
    adam.step();
  }
  EXPECT_NEAR(model.w(), reference.w(), 1e-12);
  EXPECT_GT(model.w(), 0.2);  // it moved towards 3

  // Without the first round's state the third step differs: the moments matter.
  ProxySgd fresh(config);  // one step, empty state
  Scalar restarted;
  config.steps = 2;
  ProxySgd fresh_first(config);
  ASSERT_TRUE(fresh_first.Train(restarted, 4, 1, Quadratic).ok());
  ASSERT_TRUE(fresh.Train(restarted, 4, 2, Quadratic).ok());
  EXPECT_GT(std::abs(restarted.w() - model.w()), 1e-6);
}

TEST(ProxySgdTest, EpochsCountMinibatches) {
  // 2 epochs of a 200-example set in batches of 128: 4 steps, each batch seen once per epoch.
  ServerSgdConfig config = Sgd(0, true);
  config.epochs = 2;
  config.batch_size = 128;
  ProxySgd sgd(config);
  Scalar model;
  std::vector<int64_t> sizes;
  std::multiset<int64_t> seen;
  ASSERT_TRUE(sgd.Train(model, 200, 1, [&](fl::Model& m, const at::Tensor& batch) {
                   sizes.push_back(batch.numel());
                   for (int64_t i = 0; i < batch.numel(); ++i) seen.insert(batch[i].item<int64_t>());
                   return Quadratic(m, batch);
                 }).ok());
  EXPECT_THAT(sizes, ::testing::ElementsAre(128, 72, 128, 72));
  for (int64_t i = 0; i < 200; ++i) EXPECT_EQ(seen.count(i), 2u) << i;
}

TEST(ProxySgdTest, RejectsForeignState) {
  ProxySgd sgd(Sgd(1, true));
  EXPECT_FALSE(sgd.RestoreState({{"c/w", at::zeros({1})}}).ok());
}

TEST(ServerSgdConfigTest, DefaultsAreTheOfficialCodes) {
  auto config = ServerSgdConfigFromOptions(fedkit::aggregators::ServerSgdOptions(), "options.sgd");
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->epochs, 20);
  EXPECT_EQ(config->steps, 0);
  EXPECT_EQ(config->batch_size, 128);
  EXPECT_DOUBLE_EQ(config->lr, 0.08);
  EXPECT_DOUBLE_EQ(config->momentum, 0.9);
  EXPECT_DOUBLE_EQ(config->weight_decay, 5e-4);
  EXPECT_TRUE(config->persist_momentum);
}

TEST(ServerSgdConfigTest, ReportsEveryBadFieldWithItsPath) {
  fedkit::aggregators::ServerSgdOptions options;
  options.set_steps(0);
  options.set_lr(0);
  options.set_momentum(1);
  auto config = ServerSgdConfigFromOptions(options, "options.sgd");
  ASSERT_FALSE(config.ok());
  const std::string message(config.status().message());
  EXPECT_THAT(message, ::testing::HasSubstr("options.sgd.steps: must be >= 1, got 0"));
  EXPECT_THAT(message, ::testing::HasSubstr("options.sgd.lr: must be > 0, got 0"));
  EXPECT_THAT(message, ::testing::HasSubstr("options.sgd.momentum: must be in [0, 1), got 1"));
}

TEST(ServerSgdConfigTest, AdamHasItsOwnDefaultsAndFields) {
  fedkit::aggregators::ServerSgdOptions options;
  options.set_optimizer(fedkit::aggregators::ServerSgdOptions::ADAM);
  auto config = ServerSgdConfigFromOptions(options, "options.sgd");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->adam);
  EXPECT_EQ(config->lr, 0.001);
  EXPECT_EQ(config->weight_decay, 0.0);
  EXPECT_EQ(config->beta1, 0.5);
  EXPECT_EQ(config->beta2, 0.999);
  EXPECT_EQ(config->eps, 1e-8);

  options.set_momentum(0.9);
  options.set_beta2(1);
  std::string message(ServerSgdConfigFromOptions(options, "options.sgd").status().message());
  EXPECT_THAT(message, ::testing::HasSubstr("options.sgd.momentum: not used by optimizer ADAM"));
  EXPECT_THAT(message, ::testing::HasSubstr("options.sgd.beta2: must be in [0, 1), got 1"));

  fedkit::aggregators::ServerSgdOptions sgd;
  sgd.set_beta1(0.9);
  message = std::string(ServerSgdConfigFromOptions(sgd, "options.sgd").status().message());
  EXPECT_THAT(message, ::testing::HasSubstr("options.sgd.optimizer: beta1, beta2 and eps are "
                                            "Adam's: set optimizer: ADAM"));
}

// Each field set to a value that neither its default nor any other field has, so
// a field dropped or read into the wrong place shows.
TEST(ServerSgdConfigTest, EveryOptionReachesItsConfigField) {
  fedkit::aggregators::ServerSgdOptions sgd;
  sgd.set_steps(7);
  sgd.set_batch_size(3);
  sgd.set_lr(0.25);
  sgd.set_momentum(0.5);
  sgd.set_weight_decay(0.125);
  sgd.set_persist_momentum(false);
  auto config = ServerSgdConfigFromOptions(sgd, "options.sgd");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->steps, 7);
  EXPECT_EQ(config->batch_size, 3);
  EXPECT_EQ(config->lr, 0.25);
  EXPECT_EQ(config->momentum, 0.5);
  EXPECT_EQ(config->weight_decay, 0.125);
  EXPECT_FALSE(config->persist_momentum);
  EXPECT_FALSE(config->adam);

  fedkit::aggregators::ServerSgdOptions adam;
  adam.set_optimizer(fedkit::aggregators::ServerSgdOptions::ADAM);
  adam.set_epochs(4);
  adam.set_batch_size(5);
  adam.set_lr(0.0625);
  adam.set_weight_decay(0.03125);
  adam.set_beta1(0.25);
  adam.set_beta2(0.75);
  adam.set_eps(0.375);
  adam.set_persist_momentum(false);
  config = ServerSgdConfigFromOptions(adam, "options.sgd");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->adam);
  EXPECT_EQ(config->epochs, 4);
  EXPECT_EQ(config->steps, 0);
  EXPECT_EQ(config->batch_size, 5);
  EXPECT_EQ(config->lr, 0.0625);
  EXPECT_EQ(config->weight_decay, 0.03125);  // over ADAM's default 0
  EXPECT_EQ(config->beta1, 0.25);
  EXPECT_EQ(config->beta2, 0.75);
  EXPECT_EQ(config->eps, 0.375);
  EXPECT_FALSE(config->persist_momentum);
}

TEST(ServerSgdConfigTest, RangeChecksBatchSizeWeightDecayAndEps) {
  fedkit::aggregators::ServerSgdOptions options;
  options.set_optimizer(fedkit::aggregators::ServerSgdOptions::ADAM);
  options.set_batch_size(0);
  options.set_weight_decay(-0.5);
  options.set_eps(0);
  const std::string message(ServerSgdConfigFromOptions(options, "options.sgd").status().message());
  EXPECT_THAT(message, ::testing::HasSubstr("options.sgd.batch_size: must be >= 1, got 0"));
  EXPECT_THAT(message, ::testing::HasSubstr("options.sgd.weight_decay: must be >= 0, got -0.5"));
  EXPECT_THAT(message, ::testing::HasSubstr("options.sgd.eps: must be > 0, got 0"));
}

// Training from a config the options made, so the whole path from the spec's
// message to the optimiser is run.
ProxySgd FromOptions(const fedkit::aggregators::ServerSgdOptions& options) {
  absl::StatusOr<ServerSgdConfig> config = ServerSgdConfigFromOptions(options, "options.sgd");
  EXPECT_TRUE(config.ok()) << config.status();
  return ProxySgd(config.value_or(ServerSgdConfig()));
}

TEST(ProxySgdOptionsTest, BatchSizeCutsEachEpoch) {
  // One epoch of 7 examples in batches of 3: 3, 3 and the remaining 1.
  fedkit::aggregators::ServerSgdOptions options;
  options.set_epochs(1);
  options.set_batch_size(3);
  ProxySgd sgd = FromOptions(options);
  Scalar model;
  std::vector<int64_t> sizes;
  ASSERT_TRUE(sgd.Train(model, 7, 1, [&](fl::Model& m, const at::Tensor& batch) {
                   sizes.push_back(batch.numel());
                   return Quadratic(m, batch);
                 }).ok());
  EXPECT_THAT(sizes, ::testing::ElementsAre(3, 3, 1));
}

TEST(ProxySgdOptionsTest, WeightDecayAddsToTheGradient) {
  // As WeightDecayAddsToTheGradient above: wd 0.5, lr 0.1, no momentum, from w = 0:
  // d = -6, w1 = 0.6; d = -4.8 + 0.5 * 0.6 = -4.5, w2 = 1.05. The default 5e-4
  // would give w2 = 0.6 + 0.1 * (4.8 - 0.0003) = 1.07997.
  fedkit::aggregators::ServerSgdOptions options;
  options.set_steps(2);
  options.set_lr(0.1);
  options.set_momentum(0);
  options.set_weight_decay(0.5);
  ProxySgd sgd = FromOptions(options);
  Scalar model;
  ASSERT_TRUE(sgd.Train(model, 4, 1, Quadratic).ok());
  EXPECT_NEAR(model.w(), 1.05, 1e-12);
}

TEST(ProxySgdOptionsTest, PersistMomentumDecidesWhetherTheNextRoundStartsAfresh) {
  // Two rounds of 2 SGD steps (lr 0.1, momentum 0.9, no decay) on one ProxySgd.
  // Round 1 from w = 0: w = 1.62 with buffer b = -10.2 (MomentumAgainstHandComputation).
  // Round 2, g = 2 (w - 3):
  //   persisted: b = 0.9 * -10.2 - 2.76 = -11.94,  w = 2.814;
  //              b = 0.9 * -11.94 - 0.372 = -11.118, w = 3.9258
  //   afresh:    b = -2.76,                        w = 1.896;
  //              b = 0.9 * -2.76 - 2.208 = -4.692,  w = 2.3652
  for (bool persist : {true, false}) {
    fedkit::aggregators::ServerSgdOptions options;
    options.set_steps(2);
    options.set_lr(0.1);
    options.set_momentum(0.9);
    options.set_weight_decay(0);
    options.set_persist_momentum(persist);
    ProxySgd sgd = FromOptions(options);
    Scalar model;
    ASSERT_TRUE(sgd.Train(model, 4, 1, Quadratic).ok());
    ASSERT_NEAR(model.w(), 1.62, 1e-12);
    ASSERT_TRUE(sgd.Train(model, 4, 2, Quadratic).ok());
    EXPECT_NEAR(model.w(), persist ? 3.9258 : 2.3652, 1e-12) << "persist " << persist;
  }
}

TEST(ProxySgdOptionsTest, AdamEpsDampsTheStep) {
  // Adam's first step is lr * m_hat / (sqrt(v_hat) + eps) with m_hat = g and
  // sqrt(v_hat) = |g|: from w = 0, g = -6, lr 0.1 and eps 6 move w by
  // 0.1 * 6 / (6 + 6) = 0.05 (the default eps 1e-8 would move it by 0.1).
  fedkit::aggregators::ServerSgdOptions options;
  options.set_optimizer(fedkit::aggregators::ServerSgdOptions::ADAM);
  options.set_steps(1);
  options.set_lr(0.1);
  options.set_eps(6);
  ProxySgd sgd = FromOptions(options);
  Scalar model;
  ASSERT_TRUE(sgd.Train(model, 4, 1, Quadratic).ok());
  EXPECT_NEAR(model.w(), 0.05, 1e-12);
}

TEST(RequireProxyTest, NamesTheSpecField) {
  fl::ServerContext context;
  absl::Status status = RequireProxy(context, "feddf");
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()), ::testing::HasSubstr("server.proxy.size must be > 0"));
}

TEST(ShuffledBatchesTest, CoversEveryIndexOnce) {
  std::mt19937_64 rng(3);
  std::vector<at::Tensor> batches = ShuffledBatches(5, 2, rng, at::kCPU);
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[2].numel(), 1);
  EXPECT_TRUE(std::get<0>(at::cat(batches).sort()).equal(at::arange(5, at::kLong)));
}

TEST(EpochOrderTest, InOrderWithoutAStreamAndAsShuffledBatchesWithOne) {
  EXPECT_THAT(EpochOrder(5, nullptr), ::testing::ElementsAre(0, 1, 2, 3, 4));
  std::mt19937_64 a(3);
  std::mt19937_64 b(3);
  const std::vector<int64_t> order = EpochOrder(5, &a);
  EXPECT_TRUE(at::cat(ShuffledBatches(5, 2, b, at::kCPU)).equal(at::tensor(order, at::kLong)));
  EXPECT_NE(order, EpochOrder(5, nullptr));
}

TEST(OrderedBatchesTest, SlicesTheOrder) {
  std::vector<at::Tensor> batches = OrderedBatches({4, 0, 3, 1, 2}, 2, at::kCPU);
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_TRUE(batches[0].equal(at::tensor({4, 0}, at::kLong)));
  EXPECT_TRUE(batches[1].equal(at::tensor({3, 1}, at::kLong)));
  EXPECT_TRUE(batches[2].equal(at::tensor({2}, at::kLong)));
}

}  // namespace
}  // namespace aggregators
