#include <numeric>
#include <set>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
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

// Squared gradients of each example's loss alone, at the model's weights.
std::vector<std::vector<at::Tensor>> SquaredExampleGradients(Linear& model,
                                                             const fl::Examples& examples) {
  std::vector<std::vector<at::Tensor>> squared;
  for (int64_t i = 0; i < examples.size(); ++i) {
    const at::Tensor loss =
        at::cross_entropy_loss(model.Forward(examples.x.narrow(0, i, 1)), examples.y.narrow(0, i, 1));
    const auto g = torch::autograd::grad({loss}, {model.weight_, model.bias_});
    squared.push_back({g[0].square(), g[1].square()});
  }
  return squared;
}

// u_k = mean over the drawn examples of each one's squared gradient (the empirical
// Fisher as defined), v_k = u_k (.) w_k. With every example drawn and one batch,
// per batch would be the square of the mean gradient instead.
TEST(EflHookTest, PerSampleFisherAveragesEachDrawnExamplesSquaredGradient) {
  torch::manual_seed(4);
  Linear model;
  fl::Examples examples{at::randn({6, 3}), at::tensor({0, 1, 0, 1, 1, 0}, at::kLong)};
  const std::vector<std::vector<at::Tensor>> squared = SquaredExampleGradients(model, examples);
  std::vector<int64_t> indices(6);
  std::iota(indices.begin(), indices.end(), 0);
  fl::ExtraStates broadcast;
  // u (weight, bias) from `samples` examples drawn with `seed`; v checked to be u (.) w.
  auto fisher = [&](int samples, uint64_t seed) {
    EflHookOptions options;
    options.set_fisher(EflHookOptions::PER_SAMPLE);
    options.set_fisher_samples(samples);
    auto hook = Hook(options);
    fl::TensorMap state;
    fl::HookContext context;
    context.model = &model;
    context.broadcast = &broadcast;
    context.state = &state;
    context.examples = &examples;
    context.client_indices = &indices;
    context.train_indices = &indices;
    context.batch_size = 6;
    context.seed = seed;
    EXPECT_TRUE(hook->BeforeTraining(context).ok());
    fl::ClientUpdate update;
    EXPECT_TRUE(hook->AfterTraining(context, update).ok());
    const fl::ModelState& u = update.extras.at(kEflU);
    const fl::ModelState& v = update.extras.at(kEflV);
    EXPECT_TRUE(at::allclose(v.tensor(0), u.tensor(0) * model.weight_, 1e-5, 1e-7));
    EXPECT_TRUE(at::allclose(v.tensor(1), u.tensor(1) * model.bias_, 1e-5, 1e-7));
    return std::vector<at::Tensor>{u.tensor(0), u.tensor(1)};
  };

  // fisher_samples 500 >= 6: every example, in whatever order.
  std::vector<at::Tensor> mean = {at::zeros({2, 3}), at::zeros({2})};
  for (const auto& s : squared) {
    for (int p = 0; p < 2; ++p) mean[p] += s[p] / 6;
  }
  const std::vector<at::Tensor> all = fisher(500, 1);
  for (int p = 0; p < 2; ++p) EXPECT_TRUE(at::allclose(all[p], mean[p], 1e-5, 1e-8)) << p;
  const at::Tensor batch_loss = at::cross_entropy_loss(model.Forward(examples.x), examples.y);
  const at::Tensor batch_gradient = torch::autograd::grad({batch_loss}, {model.weight_})[0];
  EXPECT_FALSE(at::allclose(all[0], batch_gradient.square(), 1e-2, 1e-6));

  // fisher_samples 2: the mean over one pair of distinct examples, the same pair for
  // the same seed, and not the same pair for every seed.
  std::set<std::pair<int, int>> pairs;
  for (uint64_t seed = 0; seed < 8; ++seed) {
    const std::vector<at::Tensor> two = fisher(2, seed);
    std::vector<std::pair<int, int>> matches;
    for (int i = 0; i < 6; ++i) {
      for (int j = i + 1; j < 6; ++j) {
        if (at::allclose(two[0], (squared[i][0] + squared[j][0]) / 2, 1e-5, 1e-8) &&
            at::allclose(two[1], (squared[i][1] + squared[j][1]) / 2, 1e-5, 1e-8)) {
          matches.push_back({i, j});
        }
      }
    }
    ASSERT_EQ(matches.size(), 1u) << "seed " << seed << ": u = " << two[0];
    pairs.insert(matches[0]);
    EXPECT_TRUE(at::equal(fisher(2, seed)[0], two[0])) << "seed " << seed;
  }
  EXPECT_GT(pairs.size(), 1u);
}

// The planned hook, created from the round plan's options as the local trainer
// creates it.
std::unique_ptr<fl::ClientHook> PlannedHook(const fl::RoundPlan& plan) {
  for (const fl::HookRequest& request : plan.hooks) {
    if (request.name != "efl") continue;
    auto hook = fl::Registry<fl::ClientHook>::Global().Create(request.name, request.options);
    EXPECT_TRUE(hook.ok()) << hook.status();
    return hook.ok() ? *std::move(hook) : nullptr;
  }
  ADD_FAILURE() << "the plan has no efl hook";
  return nullptr;
}

// The gradient of the hook's loss term with respect to (weight, bias).
std::vector<at::Tensor> ElasticGradient(fl::ClientHook& hook, fl::HookContext& context,
                                        Linear& model) {
  const at::Tensor term = hook.LossTerm(context);
  if (!term.defined()) return {at::zeros({2, 3}), at::zeros({2})};
  return torch::autograd::grad({term}, {model.weight_, model.bias_});
}

// Client 0 runs the planned hook (its Fisher from real gradients); client 1's terms
// are set by hand: round 1 (u, v) = weight (0.5, -1), bias (2, 3); round 2 weight
// (0.25, 0.75), bias (1, -2). Client 0 drops out of round 2 (its hook runs
// BeforeTraining, it completes no step, so no state is kept). With exclude_self its
// elastic term must hold client 1's terms only, whichever the sums cover:
//   round 2: lambda (0.5 w + 1) for the weight, lambda (2 b - 3) for the bias;
//   round 3: lambda (0.25 w - 0.75), lambda (b + 2).
// In round 3 the paper's sums (round 2's participants) do not hold client 0's own
// terms, so nothing is subtracted; FedCurv's (every client's latest) hold client
// 0's from round 1 and client 1's second pair in place of its first.
TEST(EflTest, ExcludeSelfLeavesTheClientsOwnTermsOutOfItsElasticTerm) {
  const double lambda = 0.5;
  for (const auto curvature :
       {EflHookOptions::ROUND_PARTICIPANTS, EflHookOptions::LATEST_PER_CLIENT}) {
    SCOPED_TRACE(EflHookOptions::Curvature_Name(curvature));
    torch::manual_seed(3);
    Linear model;
    const fl::ModelState global = fl::ModelState::FromModule(model);
    fl::Examples examples{at::randn({4, 3}), at::tensor({0, 1, 1, 0}, at::kLong)};
    std::vector<int64_t> indices = {0, 1, 2, 3};
    EflOptions options;
    options.mutable_client()->set_lambda(lambda);
    options.mutable_client()->set_exclude_self(true);
    options.mutable_client()->set_curvature(curvature);
    google::protobuf::Any any;
    any.PackFrom(options);
    auto created = fl::Registry<fl::Aggregator>::Global().Create("efl", any);
    ASSERT_TRUE(created.ok()) << created.status();
    fl::Aggregator& aggregator = **created;
    fl::ServerContext server;
    fl::TensorMap state;  // client 0's efl state, as committed after each accepted update
    auto client0 = [&](const fl::RoundPlan& plan, int round) {
      fl::HookContext context;
      context.client_id = 0;
      context.round = round;
      context.model = &model;
      context.broadcast = &plan.broadcast;
      context.state = &state;
      context.examples = &examples;
      context.client_indices = &indices;
      context.train_indices = &indices;
      context.batch_size = 2;
      context.learning_rate = 1e-3;  // far from the curvature guard
      return context;
    };
    auto client1 = [&](float u_weight, float v_weight, float u_bias, float v_bias) {
      fl::ClientUpdate update;
      update.client_id = 1;
      update.num_examples = 4;
      update.delta = global.ZerosLike();
      update.extras[kEflU] = Like(model, {at::full({2, 3}, u_weight), at::full({2}, u_bias)});
      update.extras[kEflV] = Like(model, {at::full({2, 3}, v_weight), at::full({2}, v_bias)});
      return update;
    };

    // Round 1: nothing broadcast yet; both clients send their terms.
    auto plan = aggregator.Configure(global, server);
    ASSERT_TRUE(plan.ok()) << plan.status();
    fl::HookContext context = client0(*plan, 1);
    auto hook = PlannedHook(*plan);
    ASSERT_NE(hook, nullptr);
    ASSERT_TRUE(hook->BeforeTraining(context).ok());
    fl::ClientUpdate update0;
    update0.client_id = 0;
    update0.num_examples = 4;
    update0.delta = global.ZerosLike();
    ASSERT_TRUE(hook->AfterTraining(context, update0).ok());
    const at::Tensor u0 = update0.extras.at(kEflU).tensor(0).clone();
    ASSERT_GT(u0.min().item<double>(), 0);  // its own terms weigh in the sums
    ASSERT_TRUE(aggregator.Accumulate(std::move(update0), server).ok());
    ASSERT_TRUE(aggregator.Accumulate(client1(0.5f, -1.0f, 2.0f, 3.0f), server).ok());
    ASSERT_TRUE(aggregator.Finalize(global, server).ok());
    // Each round starts from new weights: at the weights a client's own terms were
    // measured at, their gradient u_0 (.) w - v_0 vanishes and could not be seen.
    const auto move_weights = [&] {
      at::NoGradGuard no_grad;
      model.weight_.add_(0.5);
      model.bias_.sub_(0.25);
    };
    move_weights();

    // Round 2: U = u_0 + u_1, but client 0's term is client 1's alone.
    plan = aggregator.Configure(global, server);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_TRUE(at::allclose(plan->broadcast.at(kEflU).tensor(0), u0 + 0.5f));
    context = client0(*plan, 2);
    hook = PlannedHook(*plan);
    ASSERT_TRUE(hook->BeforeTraining(context).ok());
    std::vector<at::Tensor> gradient = ElasticGradient(*hook, context, model);
    EXPECT_TRUE(at::allclose(gradient[0], lambda * (0.5 * model.weight_ + 1.0), 1e-5, 1e-6))
        << "round 2, weight: " << gradient[0];
    EXPECT_TRUE(at::allclose(gradient[1], lambda * (2.0 * model.bias_ - 3.0), 1e-5, 1e-6))
        << "round 2, bias: " << gradient[1];
    ASSERT_TRUE(aggregator.Accumulate(client1(0.25f, 0.75f, 1.0f, -2.0f), server).ok());
    ASSERT_TRUE(aggregator.Finalize(global, server).ok());

    // Round 3.
    move_weights();
    plan = aggregator.Configure(global, server);
    ASSERT_TRUE(plan.ok()) << plan.status();
    const at::Tensor expected_u =
        curvature == EflHookOptions::LATEST_PER_CLIENT ? u0 + 0.25f : at::full({2, 3}, 0.25f);
    EXPECT_TRUE(at::allclose(plan->broadcast.at(kEflU).tensor(0), expected_u))
        << plan->broadcast.at(kEflU).tensor(0);
    context = client0(*plan, 3);
    hook = PlannedHook(*plan);
    ASSERT_TRUE(hook->BeforeTraining(context).ok());
    gradient = ElasticGradient(*hook, context, model);
    EXPECT_TRUE(at::allclose(gradient[0], lambda * (0.25 * model.weight_ - 0.75), 1e-5, 1e-6))
        << "round 3, weight: " << gradient[0];
    EXPECT_TRUE(at::allclose(gradient[1], lambda * (model.bias_ + 2.0), 1e-5, 1e-6))
        << "round 3, bias: " << gradient[1];
  }
}

TEST(EflTest, BroadcastsTheParticipantsSumsAndRefusesAnUpdateWithoutThem) {
  Linear model;
  const fl::ModelState global = fl::ModelState::FromModule(model);
  google::protobuf::Any any;
  any.PackFrom(EflOptions());
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
