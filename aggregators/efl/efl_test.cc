#include <numeric>
#include <vector>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/utils.h>

#include "aggregators/efl/efl_options.pb.h"
#include "aggregators/efl/efl_settings.h"
#include "fl/aggregator.h"
#include "fl/client_hook.h"
#include "fl/model.h"
#include "fl/registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace aggregators {
namespace {

using fedkit::aggregators::EflHookOptions;
using fedkit::aggregators::EflOptions;

class Linear : public fl::Model {
 public:
  Linear() {
    weight_ = register_parameter("weight", at::randn({2, 3}));
    bias_ = register_parameter("bias", at::randn({2}));
  }
  at::Tensor Forward(const at::Tensor& x) override { return at::linear(x, weight_, bias_); }
  at::Tensor weight_, bias_;
};

std::unique_ptr<fl::ClientHook> Hook(const EflHookOptions& options) {
  google::protobuf::Any any;
  any.PackFrom(options);
  auto hook = fl::Registry<fl::ClientHook>::Global().Create("efl", any);
  EXPECT_TRUE(hook.ok()) << hook.status();
  return hook.ok() ? *std::move(hook) : nullptr;
}

fl::ModelState Like(const Linear& model, const std::vector<at::Tensor>& tensors) {
  return fl::ModelState({{"weight", tensors[0], false}, {"bias", tensors[1], false}});
}

// The elastic term's gradient, from the broadcast sums, equals autograd of the
// penalty as the paper writes it: (lambda / 2) sum_j (w - w_j)^T diag(I_j) (w - w_j).
TEST(EflHookTest, TheElasticGradientIsThePapersPenaltysGradient) {
  torch::manual_seed(1);
  Linear model;
  const double lambda = 0.3;
  std::vector<std::vector<at::Tensor>> w_j, i_j;
  for (int j = 0; j < 2; ++j) {
    w_j.push_back({at::randn({2, 3}), at::randn({2})});
    i_j.push_back({at::rand({2, 3}), at::rand({2})});
  }
  std::vector<at::Tensor> u(2), v(2);
  for (int p = 0; p < 2; ++p) {
    u[p] = i_j[0][p] + i_j[1][p];
    v[p] = i_j[0][p] * w_j[0][p] + i_j[1][p] * w_j[1][p];
  }
  fl::ExtraStates broadcast{{kEflU, Like(model, u)}, {kEflV, Like(model, v)}};
  EflHookOptions options;
  options.set_lambda(lambda);
  auto hook = Hook(options);
  fl::TensorMap state;
  fl::HookContext context;
  context.model = &model;
  context.broadcast = &broadcast;
  context.state = &state;
  context.round = 2;
  context.learning_rate = 1e-3;  // far from the curvature guard
  ASSERT_TRUE(hook->BeforeTraining(context).ok());
  const std::vector<at::Tensor> params = {model.weight_, model.bias_};
  const std::vector<at::Tensor> ours = torch::autograd::grad({hook->LossTerm(context)}, params);
  at::Tensor written = at::zeros({});
  for (int j = 0; j < 2; ++j) {
    for (int p = 0; p < 2; ++p) {
      written = written + (i_j[j][p] * (params[p] - w_j[j][p]).square()).sum() * (lambda / 2);
    }
  }
  const std::vector<at::Tensor> expected = torch::autograd::grad({written}, params);
  for (int p = 0; p < 2; ++p) {
    EXPECT_TRUE(at::allclose(ours[p], expected[p], 1e-5, 1e-6)) << p;
    // lambda (U (.) w - V), as the paper's algebra says.
    EXPECT_TRUE(at::allclose(ours[p], lambda * (u[p] * params[p] - v[p]), 1e-5, 1e-6)) << p;
  }
}

TEST(EflHookTest, TheCurvatureGuardClipsUWhereAStepWouldDiverge) {
  Linear model;
  const std::vector<at::Tensor> u = {at::full({2, 3}, 1000.0f), at::full({2}, 1.0f)};
  const std::vector<at::Tensor> v = {at::full({2, 3}, 2000.0f), at::full({2}, 3.0f)};
  fl::ExtraStates broadcast{{kEflU, Like(model, u)}, {kEflV, Like(model, v)}};
  EflHookOptions options;
  options.set_lambda(1.0);
  auto hook = Hook(options);
  fl::TensorMap state;
  fl::HookContext context;
  context.model = &model;
  context.broadcast = &broadcast;
  context.state = &state;
  context.learning_rate = 0.1;  // lr * lambda * 1000 = 100 >= 2: clip U to 19
  ASSERT_TRUE(hook->BeforeTraining(context).ok());
  const std::vector<at::Tensor> grads =
      torch::autograd::grad({hook->LossTerm(context)}, {model.weight_, model.bias_});
  // Clipped U = 19, V scaled alike to 38 (the centre V / U = 2 kept); the bias untouched.
  EXPECT_TRUE(at::allclose(grads[0], 19.0 * model.weight_ - 38.0, 1e-4, 1e-5));
  EXPECT_TRUE(at::allclose(grads[1], model.bias_ - 3.0, 1e-5, 1e-6));
}

TEST(EflHookTest, PerBatchFisherIsTheSquaredBatchGradient) {
  torch::manual_seed(2);
  Linear model;
  fl::Examples examples{at::randn({6, 3}), at::tensor({0, 1, 0, 1, 1, 0}, at::kLong)};
  std::vector<int64_t> indices(6);
  std::iota(indices.begin(), indices.end(), 0);
  fl::ExtraStates broadcast;
  auto hook = Hook(EflHookOptions());
  fl::TensorMap state;
  fl::HookContext context;
  context.model = &model;
  context.broadcast = &broadcast;
  context.state = &state;
  context.examples = &examples;
  context.client_indices = &indices;
  context.train_indices = &indices;
  context.batch_size = 3;  // two batches
  ASSERT_TRUE(hook->BeforeTraining(context).ok());
  EXPECT_FALSE(hook->LossTerm(context).defined());  // nothing broadcast yet
  fl::ClientUpdate update;
  ASSERT_TRUE(hook->AfterTraining(context, update).ok());
  std::vector<at::Tensor> expected = {at::zeros({2, 3}), at::zeros({2})};
  for (int64_t begin : {0, 3}) {
    const at::Tensor loss = at::cross_entropy_loss(model.Forward(examples.x.narrow(0, begin, 3)),
                                                   examples.y.narrow(0, begin, 3));
    const auto g = torch::autograd::grad({loss}, {model.weight_, model.bias_});
    for (int p = 0; p < 2; ++p) expected[p] += g[p].square() / 2;
  }
  const fl::ModelState& u = update.extras.at(kEflU);
  const fl::ModelState& v = update.extras.at(kEflV);
  EXPECT_TRUE(at::allclose(u.tensor(0), expected[0], 1e-5, 1e-7));
  EXPECT_TRUE(at::allclose(u.tensor(1), expected[1], 1e-5, 1e-7));
  EXPECT_TRUE(at::allclose(v.tensor(0), expected[0] * model.weight_, 1e-5, 1e-7));
}

TEST(EflTest, BroadcastsTheParticipantsSumsAndTheClientLeavesItselfOutOnRequest) {
  Linear model;
  const fl::ModelState global = fl::ModelState::FromModule(model);
  EflOptions options;
  options.mutable_client()->set_exclude_self(true);
  google::protobuf::Any any;
  any.PackFrom(options);
  auto aggregator = fl::Registry<fl::Aggregator>::Global().Create("efl", any);
  ASSERT_TRUE(aggregator.ok()) << aggregator.status();
  fl::ServerContext context;
  auto plan = (*aggregator)->Configure(global, context);
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(plan->broadcast.empty());  // round 1: no Fisher yet
  for (int k = 0; k < 2; ++k) {
    fl::ClientUpdate update;
    update.client_id = k;
    update.num_examples = 10;
    update.delta = global.ZerosLike();
    update.extras[kEflU] = Like(model, {at::full({2, 3}, k + 1.0f), at::full({2}, k + 1.0f)});
    update.extras[kEflV] = Like(model, {at::full({2, 3}, 10.0f * (k + 1)), at::full({2}, 1.0f)});
    ASSERT_TRUE((*aggregator)->Accumulate(update, context).ok());
  }
  ASSERT_TRUE((*aggregator)->Finalize(global, context).ok());
  EXPECT_EQ(context.diagnostics.at("max_u"), 3.0);
  plan = (*aggregator)->Configure(global, context);
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(plan->broadcast.at(kEflU).tensor(0).equal(at::full({2, 3}, 3.0f)));
  EXPECT_TRUE(plan->broadcast.at(kEflV).tensor(0).equal(at::full({2, 3}, 30.0f)));
  // A client missing its extras is refused.
  fl::ClientUpdate bare;
  bare.num_examples = 1;
  bare.delta = global.ZerosLike();
  EXPECT_THAT(std::string((*aggregator)->Accumulate(bare, context).message()),
              ::testing::HasSubstr("lacks the extra \"efl_u\""));
}

TEST(EflTest, RejectsBadOptionsNamingThem) {
  EflOptions options;
  options.mutable_client()->set_lambda(-1);
  options.mutable_client()->set_fisher_samples(0);
  google::protobuf::Any any;
  any.PackFrom(options);
  EXPECT_EQ(fl::Registry<fl::Aggregator>::Global().Create("efl", any).status().message(),
            "options.client.lambda: must be >= 0, got -1\n"
            "options.client.fisher_samples: must be >= 1, got 0");
}

}  // namespace
}  // namespace aggregators
