#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "aggregators/fedopt/fedopt_options.pb.h"
#include "fl/aggregator.h"
#include "fl/registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace aggregators {
namespace {

using ::fedkit::aggregators::FedAdagradOptions;
using ::fedkit::aggregators::FedAdamOptions;
using ::fedkit::aggregators::FedAvgMOptions;
using ::fedkit::aggregators::FedYogiOptions;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Key;

const char* const kAllNames[] = {"fedavgm", "fedadagrad", "fedadam", "fedyogi"};

absl::StatusOr<std::unique_ptr<fl::Aggregator>> TryCreate(const std::string& name,
                                                          const google::protobuf::Message& options) {
  google::protobuf::Any any;
  any.PackFrom(options);
  return fl::Registry<fl::Aggregator>::Global().Create(name, any);
}

std::unique_ptr<fl::Aggregator> Create(const std::string& name,
                                       const google::protobuf::Message& options) {
  auto aggregator = TryCreate(name, options);
  EXPECT_TRUE(aggregator.ok()) << aggregator.status();
  return aggregator.ok() ? *std::move(aggregator) : nullptr;
}

// Default options.
std::unique_ptr<fl::Aggregator> Create(const std::string& name) {
  auto aggregator = fl::Registry<fl::Aggregator>::Global().Create(name, google::protobuf::Any());
  EXPECT_TRUE(aggregator.ok()) << aggregator.status();
  return aggregator.ok() ? *std::move(aggregator) : nullptr;
}

fl::ModelState Params(std::vector<float> w) {
  return fl::ModelState({{"w", at::tensor(w), false}});
}

// A parameter plus a float and an integer buffer, like a BatchNorm layer's.
fl::ModelState WithBuffers(std::vector<float> w, std::vector<float> running, int64_t count) {
  return fl::ModelState({{"w", at::tensor(w), false},
                         {"bn.running_mean", at::tensor(running), true},
                         {"bn.num_batches_tracked", at::tensor({count}, at::kLong), true}});
}

fl::ClientUpdate Update(fl::ModelState delta, int64_t n) {
  fl::ClientUpdate update;
  update.delta = std::move(delta);
  update.num_examples = n;
  return update;
}

// One round: Accumulate each (delta, n), then Finalize from `global`.
fl::ModelState Round(fl::Aggregator& aggregator, const fl::ModelState& global,
                     std::vector<std::pair<fl::ModelState, int64_t>> updates) {
  fl::ServerContext context;
  for (auto& [delta, n] : updates) {
    absl::Status status = aggregator.Accumulate(Update(delta.Clone(), n), context);
    EXPECT_TRUE(status.ok()) << status;
  }
  auto next = aggregator.Finalize(global, context);
  EXPECT_TRUE(next.ok()) << next.status();
  return next.ok() ? *std::move(next) : global.Clone();
}

void ExpectTensor(const at::Tensor& actual, std::vector<float> expected, double tol = 1e-6) {
  EXPECT_TRUE(actual.allclose(at::tensor(expected), tol, tol))
      << "got " << actual << "\nexpected " << at::tensor(expected);
}

TEST(FedAdamTest, FirstStepAgainstHandComputation) {
  // Global x = (0, 0); one client, delta (0.5, -1); beta1 0.9, beta2 0.99, tau 1e-3, eta 0.1.
  // m_0 = 0.9 * 0 + 0.1 * delta = (0.05, -0.1)
  // v_0 = 0.99 * tau^2 + 0.01 * delta^2 = 0.99e-6 + (0.0025, 0.01) = (0.00250099, 0.01000099)
  // sqrt(v_0) + tau = (0.0500098990 + 0.001, 0.1000049499 + 0.001) = (0.0510098990, 0.1010049499)
  // x_1 = 0.1 * m_0 / (sqrt(v_0) + tau) = (0.005 / 0.0510098990, -0.01 / 0.1010049499)
  //     = (0.0980201901, -0.0990050489).
  // (With bias correction the step would be ~eta * sign = 0.1 per coordinate; the paper has none.)
  FedAdamOptions options;
  options.set_server_lr(0.1);
  options.set_beta1(0.9);
  options.set_beta2(0.99);
  options.set_tau(1e-3);
  auto fedadam = Create("fedadam", options);
  fl::ModelState next = Round(*fedadam, Params({0, 0}), {{Params({0.5, -1}), 7}});
  ExpectTensor(next.tensor(0), {0.0980201901f, -0.0990050489f});
  std::map<std::string, at::Tensor> state = fedadam->SaveState();
  ASSERT_THAT(state, ElementsAre(Key("m/w"), Key("v/w")));
  ExpectTensor(state["m/w"], {0.05f, -0.1f});
  ExpectTensor(state["v/w"], {0.00250099f, 0.01000099f}, 1e-9);
}

TEST(FedAdamTest, DefaultsAreTheDocumentedOnes) {
  // Same client as above with default options gives the same numbers.
  auto fedadam = Create("fedadam");
  fl::ModelState next = Round(*fedadam, Params({0, 0}), {{Params({0.5, -1}), 7}});
  ExpectTensor(next.tensor(0), {0.0980201901f, -0.0990050489f});
}

TEST(FedAdagradTest, TwoRoundsAgainstHandComputation) {
  // eta 1, beta1 0.5, tau 0.5 (v_{-1} = 0.25); global x_0 = (1, 0).
  // Round 1: client A (n = 1) delta (2.4, 0), client B (n = 3) delta (0.8, -1.6):
  //   Delta_0 = (1/4)(2.4, 0) + (3/4)(0.8, -1.6) = (1.2, -1.2)
  //   m_0 = 0.5 * Delta_0 = (0.6, -0.6);  v_0 = 0.25 + 1.44 = (1.69, 1.69), sqrt 1.3
  //   x_1 = (1, 0) + (0.6, -0.6) / 1.8 = (4/3, -1/3).
  // Round 2: one client, delta (0, 8.4):
  //   m_1 = 0.5 * (0.6, -0.6) + 0.5 * (0, 8.4) = (0.3, 3.9)
  //   v_1 = (1.69 + 0, 1.69 + 70.56) = (1.69, 72.25), sqrt (1.3, 8.5)
  //   x_2 = (4/3, -1/3) + (0.3 / 1.8, 3.9 / 9) = (4/3 + 1/6, -1/3 + 13/30) = (1.5, 0.1).
  // Coordinate 0 moves with a zero delta (momentum) and its v does not decay (Adagrad).
  FedAdagradOptions options;
  options.set_server_lr(1);
  options.set_beta1(0.5);
  options.set_tau(0.5);
  auto fedadagrad = Create("fedadagrad", options);
  fl::ModelState x1 = Round(*fedadagrad, Params({1, 0}),
                            {{Params({2.4, 0}), 1}, {Params({0.8, -1.6}), 3}});
  ExpectTensor(x1.tensor(0), {4.0f / 3, -1.0f / 3});
  fl::ModelState x2 = Round(*fedadagrad, x1, {{Params({0, 8.4}), 5}});
  ExpectTensor(x2.tensor(0), {1.5f, 0.1f}, 1e-5);
  std::map<std::string, at::Tensor> state = fedadagrad->SaveState();
  ExpectTensor(state["m/w"], {0.3f, 3.9f}, 1e-5);
  ExpectTensor(state["v/w"], {1.69f, 72.25f}, 1e-4);
}

TEST(FedAdagradTest, FedExpCodeFormAgainstHandComputation) {
  // FedExP's code: no momentum, v from 0, tau inside the root. eta 1, tau 0.25,
  // global (1, 0).
  // Round 1: Delta_0 = (1.2, -1.2) as above; v_0 = (1.44, 1.44);
  //   x_1 = (1, 0) + (1.2, -1.2) / sqrt(1.69) = (1 + 12/13, -12/13).
  // Round 2: Delta_1 = (0, 8.4); v_1 = (1.44, 72); x_2 = x_1 + (0, 8.4 / sqrt(72.25))
  //   = (1 + 12/13, -12/13 + 84/85).
  // Reddi's form with the same eta and tau would move coordinate 0 by
  // 0.1 * 1.2 / (1.2 + 0.25) in round 1 (beta1 0.9): about 10x less.
  FedAdagradOptions options;
  options.set_server_lr(1);
  options.set_tau(0.25);
  options.set_form(FedAdagradOptions::FEDEXP_CODE);
  auto fedadagrad = Create("fedadagrad", options);
  fl::ModelState x1 = Round(*fedadagrad, Params({1, 0}),
                            {{Params({2.4, 0}), 1}, {Params({0.8, -1.6}), 3}});
  ExpectTensor(x1.tensor(0), {1.0f + 12.0f / 13, -12.0f / 13});
  fl::ModelState x2 = Round(*fedadagrad, x1, {{Params({0, 8.4}), 5}});
  ExpectTensor(x2.tensor(0), {1.0f + 12.0f / 13, -12.0f / 13 + 84.0f / 85}, 1e-5);
  std::map<std::string, at::Tensor> state = fedadagrad->SaveState();
  ExpectTensor(state["v/w"], {1.44f, 72.0f}, 1e-4);
}

TEST(FedYogiTest, SignRuleAgainstHandComputation) {
  // eta 1, beta1 0 (m_0 = Delta_0), beta2 0.5, tau 0.5 (v_{-1} = 0.25); global 0.
  // One client, delta (1, 0.3, 0.5), so Delta^2 = (1, 0.09, 0.25):
  //   coordinate 0: v_{-1} = 0.25 < 1:    sign(0.25 - 1) = -1 -> v_0 = 0.25 + 0.5 * 1    = 0.75
  //   coordinate 1: v_{-1} = 0.25 > 0.09: sign(+)        = +1 -> v_0 = 0.25 - 0.5 * 0.09 = 0.205
  //   coordinate 2: v_{-1} = 0.25 = 0.25: sign(0)        =  0 -> v_0 = 0.25
  //   (FedAdam would give 0.5 * 0.25 + 0.5 * Delta^2 = (0.625, 0.17, 0.25).)
  //   x_1 = Delta / (sqrt(v_0) + 0.5) = (1 / 1.3660254, 0.3 / 0.9527693, 0.5 / 1.0)
  //       = (0.7320508, 0.3148716, 0.5).
  FedYogiOptions options;
  options.set_server_lr(1);
  options.set_beta1(0);
  options.set_beta2(0.5);
  options.set_tau(0.5);
  auto fedyogi = Create("fedyogi", options);
  fl::ModelState next = Round(*fedyogi, Params({0, 0, 0}), {{Params({1, 0.3, 0.5}), 2}});
  std::map<std::string, at::Tensor> state = fedyogi->SaveState();
  ExpectTensor(state["v/w"], {0.75f, 0.205f, 0.25f});
  ExpectTensor(next.tensor(0), {0.7320508f, 0.3148716f, 0.5f});

  // Round 2, delta (0, 0, 0): every v_{-1} > 0 = Delta^2, sign +1, but (1 - beta2) * 0
  // removes nothing: v stays (0.75, 0.205, 0.25), unlike FedAdam's halving.
  Round(*fedyogi, next, {{Params({0, 0, 0}), 2}});
  ExpectTensor(fedyogi->SaveState()["v/w"], {0.75f, 0.205f, 0.25f});
}

TEST(FedAvgMTest, TwoRoundMomentumTraceWithDefaults) {
  // Defaults: eta 1, beta 0.9. Global x_0 = (1, 2).
  // Round 1: A (n = 1) delta (4, 0), B (n = 3) delta (0, -4): Delta_0 = (1, -3).
  //   m_0 = 0.9 * 0 + (1, -3) = (1, -3); x_1 = (1, 2) + (1, -3) = (2, -1), FedAvg's result.
  // Round 2: one client, delta (2, 2):
  //   m_1 = 0.9 * (1, -3) + (2, 2) = (2.9, -0.7); x_2 = (2, -1) + (2.9, -0.7) = (4.9, -1.7).
  auto fedavgm = Create("fedavgm");
  auto fedavg = Create("fedavg");
  std::vector<std::pair<fl::ModelState, int64_t>> round1 = {{Params({4, 0}), 1},
                                                            {Params({0, -4}), 3}};
  fl::ModelState x1 = Round(*fedavgm, Params({1, 2}), round1);
  ExpectTensor(x1.tensor(0), {2, -1});
  EXPECT_TRUE(x1.tensor(0).equal(Round(*fedavg, Params({1, 2}), round1).tensor(0)));
  fl::ModelState x2 = Round(*fedavgm, x1, {{Params({2, 2}), 4}});
  ExpectTensor(x2.tensor(0), {4.9f, -1.7f});
  ExpectTensor(fedavgm->SaveState()["m/w"], {2.9f, -0.7f});
}

TEST(FedAvgMTest, ServerLrScalesTheMomentumBuffer) {
  // eta 0.5, beta 0.5; same rounds: m_0 = (1, -3), x_1 = (1, 2) + 0.5 (1, -3) = (1.5, 0.5);
  // m_1 = 0.5 (1, -3) + (2, 2) = (2.5, 0.5), x_2 = (1.5, 0.5) + 0.5 (2.5, 0.5) = (2.75, 0.75).
  FedAvgMOptions options;
  options.set_server_lr(0.5);
  options.set_momentum(0.5);
  auto fedavgm = Create("fedavgm", options);
  fl::ModelState x1 = Round(*fedavgm, Params({1, 2}), {{Params({4, 0}), 1}, {Params({0, -4}), 3}});
  ExpectTensor(x1.tensor(0), {1.5f, 0.5f});
  fl::ModelState x2 = Round(*fedavgm, x1, {{Params({2, 2}), 4}});
  ExpectTensor(x2.tensor(0), {2.75f, 0.75f});
}

TEST(FedAvgMTest, ZeroMomentumIsAccepted) {
  FedAvgMOptions options;
  options.set_momentum(0);
  EXPECT_TRUE(TryCreate("fedavgm", options).ok());
}

TEST(FedOptTest, BuffersAreAveragedNotOptimised) {
  // Global running_mean 10, num_batches_tracked 5; A (n = 1) buffer deltas (8, 4),
  // B (n = 3) (0, 8): running_mean 10 + 8/4 = 12; count 5 + (4 + 24)/4 = 12.
  // Round 2, one client with buffer deltas (2, 3): 14 and 15, whatever the moments of
  // round 1 (momentum or an adaptive denominator would give other values).
  for (const char* name : kAllNames) {
    SCOPED_TRACE(name);
    auto aggregator = Create(name);
    fl::ModelState x1 = Round(*aggregator, WithBuffers({1, 2}, {10}, 5),
                              {{WithBuffers({4, 0}, {8}, 4), 1}, {WithBuffers({0, -4}, {0}, 8), 3}});
    ExpectTensor(x1.tensor(1), {12});
    EXPECT_EQ(x1.tensor(2).item<int64_t>(), 12);
    fl::ModelState x2 = Round(*aggregator, x1, {{WithBuffers({1, 1}, {2}, 3), 2}});
    ExpectTensor(x2.tensor(1), {14});
    EXPECT_EQ(x2.tensor(2).item<int64_t>(), 15);
    // Moments exist for the parameter only.
    std::map<std::string, at::Tensor> state = aggregator->SaveState();
    if (std::string(name) == "fedavgm") {
      EXPECT_THAT(state, ElementsAre(Key("m/w")));
    } else {
      EXPECT_THAT(state, ElementsAre(Key("m/w"), Key("v/w")));
    }
  }
}

TEST(FedOptTest, Properties) {
  for (const char* name : kAllNames) {
    SCOPED_TRACE(name);
    fl::AggregatorProperties properties = Create(name)->properties();
    EXPECT_TRUE(properties.order_invariant);
    EXPECT_EQ(properties.single_client_identity, std::string(name) == "fedavgm");
  }
}

TEST(FedOptTest, SaveAndRestoreContinuesIdentically) {
  const fl::ModelState x0 = Params({1, -2, 3});
  const std::vector<std::pair<fl::ModelState, int64_t>> round1 = {
      {Params({0.5, -1, 0.25}), 3}, {Params({-0.5, 2, 0}), 1}};
  const std::vector<std::pair<fl::ModelState, int64_t>> round2 = {{Params({0.1, 0.2, -0.3}), 2}};
  for (const char* name : kAllNames) {
    SCOPED_TRACE(name);
    auto uninterrupted = Create(name);
    EXPECT_TRUE(uninterrupted->SaveState().empty());  // no moments before the first round
    fl::ModelState x1 = Round(*uninterrupted, x0, round1);
    std::map<std::string, at::Tensor> saved = uninterrupted->SaveState();
    fl::ModelState expected = Round(*uninterrupted, x1, round2);

    auto restored = Create(name);
    ASSERT_TRUE(restored->RestoreState(saved).ok());
    fl::ModelState got = Round(*restored, x1, round2);
    EXPECT_TRUE(got.tensor(0).equal(expected.tensor(0))) << got.tensor(0) << expected.tensor(0);
    // The checkpoint was copied in, not aliased: restoring it again gives the same step.
    auto again = Create(name);
    ASSERT_TRUE(again->RestoreState(saved).ok());
    EXPECT_TRUE(Round(*again, x1, round2).tensor(0).equal(expected.tensor(0)));
    // And restoring an empty checkpoint starts over.
    ASSERT_TRUE(again->RestoreState({}).ok());
    EXPECT_TRUE(again->SaveState().empty());
  }
}

TEST(FedOptTest, RestoreRejectsAWrongState) {
  const at::Tensor two = at::zeros({2});
  // A slot missing.
  EXPECT_EQ(Create("fedadam")->RestoreState({{"m/w", two}}),
            absl::InvalidArgumentError("state \"v/w\": missing"));
  // A slot this method does not have, and a name without a slot.
  EXPECT_EQ(Create("fedavgm")->RestoreState({{"m/w", two}, {"v/w", two}, {"w", two}}),
            absl::InvalidArgumentError(
                "state \"v/w\": expected a name \"<slot>/<entry>\" with slot one of m\n"
                "state \"w\": expected a name \"<slot>/<entry>\" with slot one of m"));
  // Once a round has fixed the layout, shapes and names must match it.
  auto fedyogi = Create("fedyogi");
  Round(*fedyogi, Params({0, 0}), {{Params({1, 1}), 1}});
  const at::Tensor three = at::zeros({3});
  EXPECT_EQ(fedyogi->RestoreState({{"m/w", three}, {"v/w", two}}),
            absl::InvalidArgumentError("state \"m/w\": expected shape [2], got [3]"));
  EXPECT_EQ(fedyogi->RestoreState({{"m/u", two}, {"v/u", two}}),
            absl::InvalidArgumentError("state \"m/w\": missing\n"
                                       "state \"v/w\": missing\n"
                                       "state \"m/u\": unexpected\n"
                                       "state \"v/u\": unexpected"));
  // The rejected checkpoints left the state alone: the next round still works.
  Round(*fedyogi, Params({0, 0}), {{Params({1, 1}), 1}});
  // Before the first round the layout is unknown; Finalize checks it.
  auto fedadagrad = Create("fedadagrad");
  ASSERT_TRUE(fedadagrad->RestoreState({{"m/u", two}, {"v/u", two}}).ok());
  fl::ServerContext context;
  ASSERT_TRUE(fedadagrad->Accumulate(Update(Params({1, 1}), 1), context).ok());
  EXPECT_EQ(fedadagrad->Finalize(Params({0, 0}), context).status(),
            absl::InvalidArgumentError("optimiser state does not fit the model:\n"
                                       "state \"m/w\": missing for the model's parameter\n"
                                       "state \"v/w\": missing for the model's parameter"));
}

TEST(FedOptTest, RejectsBadUpdatesAndEmptyRounds) {
  for (const char* name : kAllNames) {
    SCOPED_TRACE(name);
    auto aggregator = Create(name);
    fl::ServerContext context;
    EXPECT_EQ(aggregator->Finalize(Params({0, 0}), context).status(),
              absl::FailedPreconditionError("no update accumulated this round"));
    ASSERT_TRUE(aggregator->Accumulate(Update(Params({1, 1}), 1), context).ok());
    EXPECT_FALSE(aggregator->Accumulate(Update(Params({1, 1, 1}), 1), context).ok());
    fl::ClientUpdate empty = Update(Params({1, 1}), 0);
    empty.client_id = 4;
    EXPECT_EQ(aggregator->Accumulate(std::move(empty), context),
              absl::InvalidArgumentError("update from client 4: num_examples must be > 0, got 0"));
    // The rejected updates left the accepted one alone.
    EXPECT_TRUE(aggregator->Finalize(Params({0, 0}), context).ok());
  }
}

std::string CreateError(const std::string& name, const google::protobuf::Message& options) {
  auto aggregator = TryCreate(name, options);
  EXPECT_EQ(aggregator.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(aggregator.status().message());
}

TEST(FedOptOptionsTest, FedAvgMErrors) {
  FedAvgMOptions options;
  options.set_server_lr(-0.5);
  EXPECT_EQ(CreateError("fedavgm", options), "options.server_lr: must be > 0, got -0.5");
  options.set_server_lr(0);  // explicitly 0 is not "unset"
  EXPECT_EQ(CreateError("fedavgm", options), "options.server_lr: must be > 0, got 0");
  options.clear_server_lr();
  options.set_momentum(1);
  EXPECT_EQ(CreateError("fedavgm", options), "options.momentum: must be in [0, 1), got 1");
  options.set_momentum(-0.1);
  EXPECT_EQ(CreateError("fedavgm", options), "options.momentum: must be in [0, 1), got -0.1");
  options.set_server_lr(std::numeric_limits<double>::infinity());
  EXPECT_EQ(CreateError("fedavgm", options),
            "options.server_lr: must be > 0, got inf\n"
            "options.momentum: must be in [0, 1), got -0.1");
}

TEST(FedOptOptionsTest, FedAdagradErrors) {
  FedAdagradOptions options;
  options.set_beta1(1);
  EXPECT_EQ(CreateError("fedadagrad", options), "options.beta1: must be in [0, 1), got 1");
  options.clear_beta1();
  options.set_tau(0);
  EXPECT_EQ(CreateError("fedadagrad", options), "options.tau: must be > 0, got 0");
  options.set_server_lr(-1);
  options.set_beta1(-0.5);
  EXPECT_EQ(CreateError("fedadagrad", options),
            "options.server_lr: must be > 0, got -1\n"
            "options.beta1: must be in [0, 1), got -0.5\n"
            "options.tau: must be > 0, got 0");
  FedAdagradOptions code;
  code.set_form(FedAdagradOptions::FEDEXP_CODE);
  code.set_beta1(0.9);
  EXPECT_EQ(CreateError("fedadagrad", code),
            "options.beta1: form FEDEXP_CODE has no momentum: leave beta1 unset");
}

TEST(FedOptOptionsTest, FedAdamErrors) {
  FedAdamOptions options;
  options.set_beta2(0.999);
  EXPECT_TRUE(TryCreate("fedadam", options).ok());
  options.set_beta2(1);
  EXPECT_EQ(CreateError("fedadam", options), "options.beta2: must be in [0, 1), got 1");
  options.set_server_lr(0);
  options.set_beta1(1.5);
  options.set_beta2(-0.01);
  options.set_tau(std::nan(""));
  EXPECT_EQ(CreateError("fedadam", options),
            "options.server_lr: must be > 0, got 0\n"
            "options.beta1: must be in [0, 1), got 1.5\n"
            "options.beta2: must be in [0, 1), got -0.01\n"
            "options.tau: must be > 0, got nan");
}

TEST(FedOptOptionsTest, FedYogiErrors) {
  FedYogiOptions options;
  options.set_server_lr(-0.5);
  EXPECT_EQ(CreateError("fedyogi", options), "options.server_lr: must be > 0, got -0.5");
  options.set_beta1(std::nan(""));
  options.set_beta2(2);
  options.set_tau(-1e-3);
  EXPECT_EQ(CreateError("fedyogi", options),
            "options.server_lr: must be > 0, got -0.5\n"
            "options.beta1: must be in [0, 1), got nan\n"
            "options.beta2: must be in [0, 1), got 2\n"
            "options.tau: must be > 0, got -0.001");
}

}  // namespace
}  // namespace aggregators
