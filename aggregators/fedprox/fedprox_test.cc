#include <numeric>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/utils.h>

#include "aggregators/fedavg/fedavg_options.pb.h"
#include "aggregators/fedprox/fedprox_options.pb.h"
#include "fl/aggregator.h"
#include "fl/client_hook.h"
#include "fl/local_trainer.h"
#include "fl/model.h"
#include "fl/registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace aggregators {
namespace {

class Linear : public fl::Model {
 public:
  Linear() {
    weight_ = register_parameter("weight", at::zeros({3, 2}));
    bias_ = register_parameter("bias", at::zeros({3}));
  }
  at::Tensor Forward(const at::Tensor& x) override { return at::linear(x, weight_, bias_); }
  at::Tensor weight_, bias_;
};

google::protobuf::Any Pack(const google::protobuf::Message& m) {
  google::protobuf::Any any;
  any.PackFrom(m);
  return any;
}

std::unique_ptr<fl::Aggregator> FedProx(double mu) {
  fedkit::aggregators::FedProxOptions options;
  options.set_mu(mu);
  return *fl::Registry<fl::Aggregator>::Global().Create("fedprox", Pack(options));
}

TEST(FedProxHookTest, GradientOfTheProximalTermIsMuTimesTheDrift) {
  // w_global = 0; local weight = d with d[i][j] = i - j, bias = 1:
  // d/dw (mu / 2) ||w - w_g||^2 = mu (w - w_g), so 0.5 * d and 0.5 * 1.
  fedkit::aggregators::FedProxHookOptions options;
  options.set_mu(0.5);
  auto hook = *fl::Registry<fl::ClientHook>::Global().Create("fedprox", Pack(options));
  Linear model;
  const fl::ModelState global = fl::ModelState::FromModule(model);
  const at::Tensor drift = at::tensor({0.0f, -1.0f, 1.0f, 0.0f, 2.0f, 1.0f}).reshape({3, 2});
  {
    at::NoGradGuard no_grad;
    model.weight_.copy_(drift);
    model.bias_.fill_(1.0);
  }
  fl::HookContext context;
  context.model = &model;
  context.global = &global;
  ASSERT_TRUE(hook->BeforeTraining(context).ok());
  at::Tensor term = hook->LossTerm(context);
  // (0.5 / 2) * (sum d^2 = 7, + 3 bias ones) = 2.5
  EXPECT_FLOAT_EQ(term.item<float>(), 2.5f);
  term.backward();
  EXPECT_TRUE(model.weight_.grad().allclose(drift * 0.5));
  EXPECT_TRUE(model.bias_.grad().allclose(at::full({3}, 0.5f)));
}

// Trains clients 0..2 with the hooks `aggregator` plans and aggregates them.
fl::ModelState TrainRound(fl::Aggregator& aggregator) {
  torch::manual_seed(4);
  Linear model;
  const fl::ModelState global = fl::ModelState::FromModule(model);
  fl::ServerContext context;
  auto plan = aggregator.Configure(global, context);
  EXPECT_TRUE(plan.ok());
  fedkit::ClientTrainingSpec spec;
  spec.set_steps(10);
  spec.set_batch_size(5);
  spec.mutable_optimizer()->set_lr(0.5);
  fl::ClientStateStore store;
  fl::LocalTrainer trainer(spec, {}, &store);
  for (int64_t id = 0; id < 3; ++id) {
    at::manual_seed(10 + id);
    fl::Examples examples{at::randn({20, 2}).add_(id), at::randint(0, 3, {20}, at::kLong)};
    std::vector<int64_t> indices(20);
    std::iota(indices.begin(), indices.end(), 0);
    fl::LocalTrainingInput input;
    input.client_id = id;
    input.round = 1;
    input.seed = 7 + id;
    input.global = &global;
    input.plan = &*plan;
    input.examples = &examples;
    input.indices = &indices;
    auto update = trainer.Train(model, input);
    EXPECT_TRUE(update.ok()) << update.status();
    EXPECT_TRUE(aggregator.Accumulate(*std::move(update), context).ok());
  }
  auto next = aggregator.Finalize(global, context);
  EXPECT_TRUE(next.ok());
  return fl::ModelState::Difference(*next, global);
}

TEST(FedProxTest, MuZeroEqualsFedAvg) {
  auto fedavg =
      *fl::Registry<fl::Aggregator>::Global().Create("fedavg", Pack(fedkit::aggregators::FedAvgOptions()));
  fl::ModelState prox = TrainRound(*FedProx(0.0));
  fl::ModelState avg = TrainRound(*fedavg);
  for (size_t i = 0; i < prox.size(); ++i) EXPECT_TRUE(prox.tensor(i).equal(avg.tensor(i)));
}

TEST(FedProxTest, LargerMuKeepsTheRoundCloserToTheGlobalModel) {
  const double free = TrainRound(*FedProx(0.0)).SquaredNorm();
  const double pulled = TrainRound(*FedProx(1.0)).SquaredNorm();
  EXPECT_LT(pulled, 0.5 * free);
}

TEST(FedProxTest, PlansTheHookWithItsMu) {
  auto fedprox = FedProx(0.25);
  fl::ServerContext context;
  auto plan = fedprox->Configure(fl::ModelState(), context);
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->hooks.size(), 1);
  EXPECT_EQ(plan->hooks[0].name, "fedprox");
  fedkit::aggregators::FedProxHookOptions options;
  ASSERT_TRUE(plan->hooks[0].options.UnpackTo(&options));
  EXPECT_EQ(options.mu(), 0.25);
}

TEST(FedProxTest, InvalidOptionsAreReportedTogether) {
  fedkit::aggregators::FedProxOptions options;
  options.set_mu(-0.1);
  options.set_server_lr(0);
  auto fedprox = fl::Registry<fl::Aggregator>::Global().Create("fedprox", Pack(options));
  EXPECT_EQ(fedprox.status().message(),
            "options.mu: must be >= 0, got -0.1\noptions.server_lr: must be > 0, got 0");
  fedkit::aggregators::FedProxHookOptions hook_options;
  hook_options.set_mu(-2);
  EXPECT_EQ(fl::Registry<fl::ClientHook>::Global().Create("fedprox", Pack(hook_options)).status().message(),
            "options.mu: must be >= 0, got -2");
}

}  // namespace
}  // namespace aggregators
