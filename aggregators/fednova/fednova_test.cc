// FedNova against values computed by hand from the paper's Eq. 7 (tau_eff =
// sum_i p_i ||a_i||_1). The shared suites check what every aggregator must do
// (step_aware among it); this file checks what only FedNova does.
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include <ATen/ATen.h>

#include "aggregators/fednova/fednova_options.pb.h"
#include "fl/aggregator.h"
#include "fl/registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace aggregators {
namespace {

using ::fedkit::aggregators::FedNovaOptions;

std::unique_ptr<fl::Aggregator> Create(FedNovaOptions options) {
  google::protobuf::Any any;
  any.PackFrom(options);
  auto created = fl::Registry<fl::Aggregator>::Global().Create("fednova", any);
  EXPECT_TRUE(created.ok()) << created.status();
  return created.ok() ? *std::move(created) : nullptr;
}

fl::ModelState State(std::vector<float> w, float running) {
  return fl::ModelState(
      {{"w", at::tensor(w), false}, {"bn.running_mean", at::tensor({running}), true}});
}

fl::ClientUpdate Update(int64_t id, fl::ModelState delta, int64_t n, int64_t steps) {
  fl::ClientUpdate update;
  update.client_id = id;
  update.delta = std::move(delta);
  update.num_examples = n;
  update.local_steps = steps;
  update.planned_steps = 4;
  return update;
}

// Global w = (1, 2); client 0 (n = 1, 2 local steps) delta (4, 0); client 1 (n = 3,
// 4 local steps) delta (0, -4); p = (1/4, 3/4).
absl::StatusOr<fl::ModelState> RoundOfTwo(fl::Aggregator& aggregator, double momentum,
                                          fl::ServerContext& context) {
  context.round = 1;
  context.client_momentum = momentum;
  const fl::ModelState global = State({1, 2}, 10);
  if (auto plan = aggregator.Configure(global, context); !plan.ok()) return plan.status();
  for (fl::ClientUpdate update : {Update(0, State({4, 0}, 8), 1, 2),
                                  Update(1, State({0, -4}, 0), 3, 4)}) {
    if (absl::Status s = aggregator.Accumulate(std::move(update), context); !s.ok()) return s;
  }
  return aggregator.Finalize(global, context);
}

// Plain SGD: ||a|| = (2, 4), tau_eff = 1/4 * 2 + 3/4 * 4 = 3.5; normalised deltas
// (2, 0) and (0, -1); sum_i p_i d_i = (0.5, -0.75); w = (1, 2) + 3.5 (0.5, -0.75) =
// (2.75, -0.625). (FedAvg would give (2, -1).) The buffer is the plain weighted
// mean of the clients' values: 10 + (8 + 3 * 0) / 4 = 12, not normalised.
TEST(FedNovaTest, SgdRoundAgainstHandComputation) {
  auto fednova = Create(FedNovaOptions());
  fl::ServerContext context;
  auto next = RoundOfTwo(*fednova, 0.0, context);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_NEAR(next->tensor(0)[0].item<double>(), 2.75, 1e-6);
  EXPECT_NEAR(next->tensor(0)[1].item<double>(), -0.625, 1e-6);
  EXPECT_NEAR(next->tensor(1)[0].item<double>(), 12.0, 1e-6);
  EXPECT_NEAR(context.diagnostics.at("tau_eff"), 3.5, 1e-12);
}

// Momentum r = 0.5: step j's gradient enters with weight (1 - r^(tau - j + 1)) / (1 - r),
//   tau = 2: 1.5 + 1 = 2.5;   tau = 4: 1.875 + 1.75 + 1.5 + 1 = 6.125,
// as the closed form (tau - r (1 - r^tau) / (1 - r)) / (1 - r) gives.
// tau_eff = 1/4 * 2.5 + 3/4 * 6.125 = 5.21875; d = (1.6, 0), (0, -4 / 6.125);
// w = (1 + 5.21875 * 0.4, 2 - 5.21875 * 0.75 * 4 / 6.125) = (3.0875, -0.5561224...).
TEST(FedNovaTest, MomentumRoundAgainstHandComputation) {
  auto fednova = Create(FedNovaOptions());
  fl::ServerContext context;
  auto next = RoundOfTwo(*fednova, 0.5, context);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_NEAR(next->tensor(0)[0].item<double>(), 3.0875, 1e-6);
  EXPECT_NEAR(next->tensor(0)[1].item<double>(), -0.556122448979592, 1e-6);
  EXPECT_NEAR(context.diagnostics.at("tau_eff"), 5.21875, 1e-12);
}

// eta scales the parameters' step only: w = (1, 2) + 0.5 * 3.5 (0.5, -0.75).
TEST(FedNovaTest, ServerLrScalesTheStepNotTheBuffers) {
  FedNovaOptions options;
  options.set_server_lr(0.5);
  auto fednova = Create(options);
  fl::ServerContext context;
  auto next = RoundOfTwo(*fednova, 0.0, context);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_NEAR(next->tensor(0)[0].item<double>(), 1.875, 1e-6);
  EXPECT_NEAR(next->tensor(0)[1].item<double>(), 0.6875, 1e-6);
  EXPECT_NEAR(next->tensor(1)[0].item<double>(), 12.0, 1e-6);
}

// An update that took no step cannot be normalised; the server rejects it alone.
TEST(FedNovaTest, RefusesAnUpdateWithoutSteps) {
  auto fednova = Create(FedNovaOptions());
  fl::ServerContext context;
  ASSERT_TRUE(fednova->Configure(State({1, 2}, 10), context).ok());
  absl::Status status = fednova->Accumulate(Update(0, State({4, 0}, 8), 1, 0), context);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), ::testing::HasSubstr("local_steps is 0"));
}

TEST(FedNovaTest, DeclaresWhatValidationChecks) {
  const fl::AggregatorProperties properties = Create(FedNovaOptions())->properties();
  EXPECT_TRUE(properties.step_aware);
  EXPECT_TRUE(properties.needs_local_sgd);
}

TEST(FedNovaTest, RejectsBadOptionsNamingTheField) {
  FedNovaOptions options;
  options.set_server_lr(std::numeric_limits<double>::infinity());
  google::protobuf::Any any;
  any.PackFrom(options);
  auto created = fl::Registry<fl::Aggregator>::Global().Create("fednova", any);
  ASSERT_FALSE(created.ok());
  EXPECT_THAT(std::string(created.status().message()),
              ::testing::HasSubstr("options.server_lr: must be finite and > 0, got inf"));
}

}  // namespace
}  // namespace aggregators
