#include <cmath>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

#include "aggregators/fedavg/fedavg_options.pb.h"
#include "aggregators/fedexp/fedexp_options.pb.h"
#include "fl/aggregator.h"
#include "fl/client_hook.h"
#include "fl/registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace aggregators {
namespace {

using Options = fedkit::aggregators::FedExpOptions;

std::unique_ptr<fl::Aggregator> Create(const std::string& name,
                                       const google::protobuf::Message& options) {
  google::protobuf::Any any;
  any.PackFrom(options);
  auto aggregator = fl::Registry<fl::Aggregator>::Global().Create(name, any);
  EXPECT_TRUE(aggregator.ok()) << aggregator.status();
  return *std::move(aggregator);
}

Options Epsilon(double epsilon, Options::EpsilonForm form = Options::CODE) {
  Options options;
  options.set_epsilon(epsilon);
  options.set_epsilon_decay(1.0);
  options.set_epsilon_form(form);
  return options;
}

// An update as a client running the "fedexp" hook sends it.
fl::ClientUpdate Update(std::vector<float> delta, int64_t n, float buffer = 0) {
  fl::ClientUpdate update;
  update.delta = fl::ModelState({{"w", at::tensor(delta), false},
                                 {"running_mean", at::tensor({buffer}), true}});
  update.num_examples = n;
  auto hook = fl::Registry<fl::ClientHook>::Global().Create("fedexp", google::protobuf::Any());
  fl::HookContext context;
  EXPECT_TRUE(hook.ok() && (*hook)->AfterTraining(context, update).ok());
  return update;
}

fl::ModelState Zero(int dims) {
  return fl::ModelState({{"w", at::zeros({dims}), false}, {"running_mean", at::zeros({1}), true}});
}

fl::ModelState Round(fl::Aggregator& aggregator, const fl::ModelState& global,
                     std::vector<fl::ClientUpdate> updates, fl::ServerContext& context) {
  for (auto& u : updates) EXPECT_TRUE(aggregator.Accumulate(std::move(u), context).ok());
  auto next = aggregator.Finalize(global, context);
  EXPECT_TRUE(next.ok()) << next.status();
  return *std::move(next);
}

std::vector<fl::ClientUpdate> Orthogonal() {
  return {Update({1, 0, 0, 0}, 1), Update({0, 1, 0, 0}, 1), Update({0, 0, 1, 0}, 1),
          Update({0, 0, 0, 1}, 1)};
}

TEST(FedExpTest, CodeFormStepAgainstHandComputation) {
  // Four orthogonal unit updates: A = 1, Delta_bar = (1/4)(1, 1, 1, 1), ||Delta_bar||^2 = 1/4.
  // Code form, eps 0.01, M = 4: eta_g = 1 / (2 (0.25 + 0.04)) = 1.724137...
  fl::ServerContext context;
  context.round = 1;
  auto fedexp = Create("fedexp", Epsilon(0.01));
  fl::ModelState next = Round(*fedexp, Zero(4), Orthogonal(), context);
  const double eta = 1.0 / (2 * (0.25 + 0.04));
  EXPECT_NEAR(context.diagnostics.at("eta_g"), eta, 1e-9);
  EXPECT_NEAR(context.diagnostics.at("fedexp_mean_sq_norm"), 1.0, 1e-12);
  EXPECT_NEAR(context.diagnostics.at("fedexp_mean_update_sq_norm"), 0.25, 1e-12);
  EXPECT_TRUE(next.tensor(0).allclose(at::full({4}, static_cast<float>(eta * 0.25))));
}

TEST(FedExpTest, PaperFormAddsEpsilonOnce) {
  // eta_g = 1 / (2 (0.25 + 0.01)) = 1.923...
  fl::ServerContext context;
  context.round = 1;
  auto fedexp = Create("fedexp", Epsilon(0.01, Options::PAPER));
  Round(*fedexp, Zero(4), Orthogonal(), context);
  EXPECT_NEAR(context.diagnostics.at("eta_g"), 1.0 / (2 * 0.26), 1e-9);
}

TEST(FedExpTest, SizeWeightsRenormalisedOverParticipants) {
  // (2, 0) with n = 1 and (-2, 0) with n = 3: Delta_bar = (2 - 6) / 4 = (-1, 0),
  // A = (4 + 3 * 4) / 4 = 4, eps 0: eta_g = 4 / (2 * 1) = 2, w = 2 * (-1, 0).
  fl::ServerContext context;
  context.round = 1;
  auto fedexp = Create("fedexp", Epsilon(0));
  fl::ModelState next =
      Round(*fedexp, Zero(2), {Update({2, 0}, 1, 4.0f), Update({-2, 0}, 3, 0.0f)}, context);
  EXPECT_DOUBLE_EQ(context.diagnostics.at("eta_g"), 2.0);
  EXPECT_TRUE(next.tensor(0).allclose(at::tensor({-2.0f, 0.0f})));
  // The buffer is the plain weighted mean, (4 * 1 + 0 * 3) / 4 = 1, never scaled by eta_g.
  EXPECT_TRUE(next.tensor(1).allclose(at::tensor({1.0f})));
}

TEST(FedExpTest, IdenticalClientUpdatesEqualFedAvg) {
  fl::ServerContext context;
  context.round = 3;
  auto fedexp = Create("fedexp", Options());
  auto fedavg = Create("fedavg", fedkit::aggregators::FedAvgOptions());
  auto updates = [] {
    return std::vector<fl::ClientUpdate>{Update({0.3f, -1.2f, 2.0f}, 10, 1.0f),
                                         Update({0.3f, -1.2f, 2.0f}, 30, 1.0f),
                                         Update({0.3f, -1.2f, 2.0f}, 20, 1.0f)};
  };
  fl::ModelState global = Zero(3);
  global.mutable_tensor(0) = at::tensor({1.0f, 2.0f, 3.0f});
  fl::ModelState a = Round(*fedexp, global, updates(), context);
  EXPECT_EQ(context.diagnostics.at("eta_g"), 1.0);
  fl::ServerContext avg_context;
  fl::ModelState b = Round(*fedavg, global, updates(), avg_context);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(a.tensor(i).allclose(b.tensor(i)));
}

TEST(FedExpTest, EvaluatesTheAverageOfTheLastTwoIteratesFromRoundTwo) {
  auto fedexp = Create("fedexp", Epsilon(0.01));
  fl::ServerContext context;
  context.round = 1;
  fl::ModelState w1 = Round(*fedexp, Zero(4), Orthogonal(), context);
  EXPECT_FALSE(context.evaluation_model.has_value());
  context.round = 2;
  fl::ModelState w2 = Round(*fedexp, w1, Orthogonal(), context);
  ASSERT_TRUE(context.evaluation_model.has_value());
  EXPECT_TRUE(context.evaluation_model->tensor(0).allclose((w1.tensor(0) + w2.tensor(0)) / 2));
  // Training continues from the iterate, not the average.
  EXPECT_FALSE(w2.tensor(0).allclose(context.evaluation_model->tensor(0)));

  Options off = Epsilon(0.01);
  off.set_evaluate_last_two_average(false);
  auto plain = Create("fedexp", off);
  fl::ServerContext plain_context;
  plain_context.round = 2;
  Round(*plain, w1, Orthogonal(), plain_context);
  EXPECT_FALSE(plain_context.evaluation_model.has_value());
}

TEST(FedExpTest, EpsilonDecaysWithTheRound) {
  Options options;
  options.set_epsilon(0.1);
  options.set_epsilon_decay(0.998);
  auto fedexp = Create("fedexp", options);
  fl::ServerContext context;
  context.round = 10;
  Round(*fedexp, Zero(4), Orthogonal(), context);
  EXPECT_NEAR(context.diagnostics.at("fedexp_epsilon"), 0.1 * std::pow(0.998, 20), 1e-15);
}

TEST(FedExpTest, EpsilonDecaysByDefaultOnlyInTheCodesForm) {
  // Round 10, eps 0.1: the code's form decays it to 0.1 * 0.998^20, the paper's
  // (a constant eps) keeps 0.1 unless a decay is set.
  for (auto [form, expected] : std::vector<std::pair<Options::EpsilonForm, double>>{
           {Options::CODE, 0.1 * std::pow(0.998, 20)}, {Options::PAPER, 0.1}}) {
    Options options;
    options.set_epsilon(0.1);
    options.set_epsilon_form(form);
    auto fedexp = Create("fedexp", options);
    fl::ServerContext context;
    context.round = 10;
    Round(*fedexp, Zero(4), Orthogonal(), context);
    EXPECT_NEAR(context.diagnostics.at("fedexp_epsilon"), expected, 1e-15) << form;
  }
}

TEST(FedExpTest, UniformWeightingIsThePapersPlainMean) {
  // (2, 0) with n = 1 and (-2, 0) with n = 3, uniform: Delta_bar = (0, 0),
  // A = (4 + 4) / 2 = 4, eps 0.5 (paper form): eta_g = 4 / (2 (0 + 0.5)) = 4,
  // w = 4 * (0, 0); the buffer is the plain mean (4 + 0) / 2 = 2.
  Options options = Epsilon(0.5, Options::PAPER);
  options.set_weighting(Options::UNIFORM);
  auto fedexp = Create("fedexp", options);
  fl::ServerContext context;
  context.round = 1;
  fl::ModelState next =
      Round(*fedexp, Zero(2), {Update({2, 0}, 1, 4.0f), Update({-2, 0}, 3, 0.0f)}, context);
  EXPECT_DOUBLE_EQ(context.diagnostics.at("eta_g"), 4.0);
  EXPECT_DOUBLE_EQ(context.diagnostics.at("fedexp_mean_sq_norm"), 4.0);
  EXPECT_TRUE(next.tensor(0).allclose(at::zeros({2})));
  EXPECT_TRUE(next.tensor(1).allclose(at::tensor({2.0f})));
}

TEST(FedExpTest, TheTwoIterateAverageLeavesBuffersAtTheIterate) {
  // Round 2 from a global whose buffer is 6; both clients report buffer 2, so the
  // iterate's buffer is 2, and so is the evaluated model's (not (2 + 6) / 2).
  auto fedexp = Create("fedexp", Epsilon(0.01));
  fl::ServerContext context;
  context.round = 2;
  fl::ModelState global = Zero(4);
  global.mutable_tensor(1) = at::tensor({6.0f});
  std::vector<fl::ClientUpdate> updates = Orthogonal();
  for (fl::ClientUpdate& u : updates) u.delta.mutable_tensor(1) = at::tensor({2.0f});
  fl::ModelState next = Round(*fedexp, global, std::move(updates), context);
  ASSERT_TRUE(context.evaluation_model.has_value());
  EXPECT_TRUE(context.evaluation_model->tensor(1).equal(next.tensor(1)));
  EXPECT_TRUE(context.evaluation_model->tensor(0).allclose(next.tensor(0) / 2));
}

TEST(FedExpTest, HookSendsTheSquaredNormOverParametersOnly) {
  // ||(3, 4)||^2 = 25; the buffer (9) is not counted.
  fl::ClientUpdate update = Update({3, 4}, 1, 9.0f);
  const fl::ModelState& extra = update.extras.at("fedexp/sq_norm");
  ASSERT_EQ(extra.size(), 1);
  EXPECT_EQ(extra.tensor(0).scalar_type(), at::kDouble);
  EXPECT_DOUBLE_EQ(extra.tensor(0).item<double>(), 25.0);
}

TEST(FedExpTest, PlansItsHookAndRejectsUpdatesWithoutTheNorm) {
  auto fedexp = Create("fedexp", Options());
  fl::ServerContext context;
  auto plan = fedexp->Configure(Zero(2), context);
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->hooks.size(), 1);
  EXPECT_EQ(plan->hooks[0].name, "fedexp");
  fl::ClientUpdate bare = Update({1, 1}, 1);
  bare.extras.clear();
  absl::Status status = fedexp->Accumulate(std::move(bare), context);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), ::testing::HasSubstr("fedexp/sq_norm"));
}

TEST(FedExpTest, InvalidOptionsAreReportedTogether) {
  Options options;
  options.set_epsilon(-1);
  options.set_epsilon_decay(1.5);
  google::protobuf::Any any;
  any.PackFrom(options);
  auto fedexp = fl::Registry<fl::Aggregator>::Global().Create("fedexp", any);
  EXPECT_EQ(fedexp.status().message(),
            "options.epsilon: must be >= 0, got -1\noptions.epsilon_decay: must be in (0, 1], got 1.5");
}

}  // namespace
}  // namespace aggregators
