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

}  // namespace
}  // namespace aggregators
