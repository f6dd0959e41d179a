#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include "absl/strings/str_cat.h"

#include "aggregators/dp_fedavg/dp_fedavg_options.pb.h"
#include "fl/aggregator.h"
#include "fl/client_hook.h"
#include "fl/privacy/pld_accountant.h"
#include "fl/privacy/rdp_accountant.h"
#include "fl/registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace aggregators {
namespace {

using ::fedkit::aggregators::DpClipHookOptions;
using ::fedkit::aggregators::DpFedAvgOptions;
using ::fl::privacy::Sampling;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr char kWithin[] = "dp_clip/within_bound";

absl::StatusOr<std::unique_ptr<fl::Aggregator>> Create(const DpFedAvgOptions& options) {
  google::protobuf::Any any;
  any.PackFrom(options);
  return fl::Registry<fl::Aggregator>::Global().Create("dp_fedavg", any);
}

std::unique_ptr<fl::Aggregator> DpFedAvg(const DpFedAvgOptions& options) {
  auto created = Create(options);
  EXPECT_TRUE(created.ok()) << created.status();
  return created.ok() ? *std::move(created) : nullptr;
}

DpFedAvgOptions Fixed(double clip_norm, double noise_multiplier) {
  DpFedAvgOptions options;
  options.set_clip_norm(clip_norm);
  options.set_noise_multiplier(noise_multiplier);
  return options;
}

// A parameter w of `size` entries (the first two given) and a float buffer.
fl::ModelState State(float w0, float w1, float buffer = 0, int64_t size = 2) {
  at::Tensor w = at::zeros({size});
  w[0] = w0;
  w[1] = w1;
  return fl::ModelState({{"w", w, false}, {"bn.running_mean", at::tensor({buffer}), true}});
}

fl::ClientUpdate Update(fl::ModelState delta, int64_t n, int64_t id,
                        std::optional<double> within = std::nullopt) {
  fl::ClientUpdate update;
  update.client_id = id;
  update.delta = std::move(delta);
  update.num_examples = n;
  if (within.has_value()) {
    update.extras[kWithin] =
        fl::ModelState({{"within", at::scalar_tensor(*within, at::kDouble), false}});
  }
  return update;
}

// 10 clients, 2 expected per round, Poisson sampling, 5 rounds planned.
fl::ServerContext Context(int expected = 2, bool poisson = true) {
  fl::ServerContext context;
  context.round = 1;
  context.round_seed = 7;
  context.num_clients = 10;
  context.expected_cohort_size = expected;
  context.poisson_sampling = poisson;
  context.planned_rounds = 5;
  return context;
}

absl::StatusOr<fl::ModelState> Round(fl::Aggregator& aggregator, const fl::ModelState& global,
                                     std::vector<fl::ClientUpdate> updates,
                                     fl::ServerContext& context) {
  auto plan = aggregator.Configure(global, context);
  if (!plan.ok()) return plan.status();
  for (fl::ClientUpdate& u : updates) {
    absl::Status status = aggregator.Accumulate(std::move(u), context);
    if (!status.ok()) return status;
  }
  auto next = aggregator.Finalize(global, context);
  ++context.round;
  ++context.round_seed;
  return next;
}

// The clip norm the round's plan sends to the clients.
double PlannedClipNorm(fl::Aggregator& aggregator, const fl::ModelState& global,
                       fl::ServerContext& context) {
  auto plan = aggregator.Configure(global, context);
  EXPECT_TRUE(plan.ok()) << plan.status();
  if (!plan.ok() || plan->hooks.empty()) return -1;
  EXPECT_EQ(plan->hooks.front().name, "dp_clip");
  DpClipHookOptions options;
  EXPECT_TRUE(plan->hooks.front().options.UnpackTo(&options));
  return options.clip_norm();
}

double StdDev(const at::Tensor& t) { return t.to(at::kDouble).std().item<double>(); }

TEST(DpFedAvgTest, ClipsGivesUniformWeightsAndDividesByTheExpectedCohort) {
  // C = 1, no noise, m = 4 expected: A (3, 4) is clipped to (0.6, 0.8), B (0.3, 0.4)
  // stays; their sizes (1 and 3 examples) do not weigh: (0.9, 1.2) / 4 = (0.225, 0.3).
  fl::ServerContext context = Context(/*expected=*/4);
  std::vector<fl::ClientUpdate> updates;
  updates.push_back(Update(State(3, 4, 100), 1, 0));
  updates.push_back(Update(State(0.3f, 0.4f, 50), 3, 1));
  auto next = Round(*DpFedAvg(Fixed(1.0, 0.0)), State(1, 2, 10), std::move(updates), context);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_TRUE(next->tensor(0).allclose(at::tensor({1.225f, 2.3f}))) << next->tensor(0);
  EXPECT_TRUE(next->tensor(1).equal(at::tensor({10.0f}))) << "buffers stay the global's";
  EXPECT_EQ(context.diagnostics.at("dp_server_clipped"), 1.0);
  // An update the client clipped arrives at C up to rounding: not counted again.
  fl::ServerContext again = Context(4);
  std::vector<fl::ClientUpdate> clipped;
  clipped.push_back(Update(State(0.6000001f, 0.8f), 1, 0));
  ASSERT_TRUE(Round(*DpFedAvg(Fixed(1.0, 0.0)), State(0, 0), std::move(clipped), again).ok());
  EXPECT_EQ(again.diagnostics.at("dp_server_clipped"), 0.0);
  EXPECT_EQ(context.diagnostics.at("dp_clip_norm"), 1.0);
  EXPECT_TRUE(std::isinf(context.diagnostics.at("epsilon"))) << "no noise, no privacy";
}

TEST(DpFedAvgTest, NoiseOnTheSumHasStandardDeviationZTimesCOverTheCohort) {
  // Zero updates: the step is the noise alone, N(0, (z C)^2) / m per coordinate.
  for (const auto& [z, clip, m] : {std::tuple{1.0, 0.5, 2}, std::tuple{3.0, 0.1, 4}}) {
    fl::ServerContext context = Context(m);
    std::vector<fl::ClientUpdate> updates;
    for (int k = 0; k < m; ++k) updates.push_back(Update(State(0, 0, 0, 40000), 1, k));
    const fl::ModelState global = State(0, 0, 0, 40000);
    auto next = Round(*DpFedAvg(Fixed(clip, z)), global, std::move(updates), context);
    ASSERT_TRUE(next.ok()) << next.status();
    const double expected = z * clip / m;
    // The noise is fresh each run: both bounds are about 6 standard errors of
    // their estimate over 40002 coordinates.
    EXPECT_NEAR(StdDev(next->tensor(0)), expected, 0.02 * expected) << "z " << z;
    EXPECT_NEAR(next->tensor(0).to(at::kDouble).mean().item<double>(), 0.0, 0.03 * expected);
  }
}

TEST(DpFedAvgTest, FedExpsTwoNoisedSumsShareTheRoundsMultiplier) {
  // FedExP releases the delta sum and the squared-norm sum: each gets z sqrt(2),
  // so the round as a whole is one Gaussian of multiplier z. Zero updates: eta_g
  // is 1 (the noise's ||mean||^2 dwarfs the noised mean squared norm).
  DpFedAvgOptions options = Fixed(0.5, 1.0);
  options.mutable_base()->set_name("fedexp");
  fl::ServerContext context = Context(2);
  std::vector<fl::ClientUpdate> updates;
  for (int k = 0; k < 2; ++k) updates.push_back(Update(State(0, 0, 0, 40000), 1, k));
  // FedExP's clients send ||delta||^2 (0 here); its hook is planned after dp_clip.
  for (fl::ClientUpdate& u : updates) {
    u.extras["fedexp/sq_norm"] =
        fl::ModelState({{"sq_norm", at::scalar_tensor(0.0, at::kDouble), false}});
  }
  auto next = Round(*DpFedAvg(options), State(0, 0, 0, 40000), std::move(updates), context);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(context.diagnostics.at("eta_g"), 1.0);
  const double expected = std::sqrt(2.0) * 1.0 * 0.5 / 2;
  EXPECT_NEAR(StdDev(next->tensor(0)), expected, 0.02 * expected);
}

TEST(DpFedAvgTest, AdaptiveClippingFollowsTheTargetQuantile) {
  // No noise: b_bar is the realised fraction within C. Both within C = 1:
  // C <- exp(-0.2 (1 - 0.5)) = 0.904837; then neither within: C <- C exp(-0.2 (0 - 0.5)).
  DpFedAvgOptions options;
  options.set_noise_multiplier(0.0);
  options.mutable_adaptive()->set_initial_clip_norm(1.0);
  auto aggregator = DpFedAvg(options);
  fl::ServerContext context = Context(2);
  const fl::ModelState global = State(0, 0);
  EXPECT_EQ(PlannedClipNorm(*aggregator, global, context), 1.0);
  std::vector<fl::ClientUpdate> within;
  within.push_back(Update(State(0.1f, 0), 1, 0, 1.0));
  within.push_back(Update(State(0.2f, 0), 1, 1, 1.0));
  ASSERT_TRUE(Round(*aggregator, global, std::move(within), context).ok());
  EXPECT_EQ(context.diagnostics.at("dp_within_bound"), 1.0);
  const double after_one = std::exp(-0.2 * 0.5);
  EXPECT_NEAR(PlannedClipNorm(*aggregator, global, context), after_one, 1e-12);
  std::vector<fl::ClientUpdate> outside;
  outside.push_back(Update(State(5, 0), 1, 0, 0.0));
  outside.push_back(Update(State(6, 0), 1, 1, 0.0));
  ASSERT_TRUE(Round(*aggregator, global, std::move(outside), context).ok());
  EXPECT_NEAR(PlannedClipNorm(*aggregator, global, context), after_one * std::exp(0.2 * 0.5),
              1e-12);

  // The step size eta_C is the option's: 0.5 gives exp(-0.5 (1 - 0.5)).
  options.mutable_adaptive()->set_learning_rate(0.5);
  auto faster = DpFedAvg(options);
  fl::ServerContext fresh = Context(2);
  std::vector<fl::ClientUpdate> both_within;
  both_within.push_back(Update(State(0.1f, 0), 1, 0, 1.0));
  both_within.push_back(Update(State(0.2f, 0), 1, 1, 1.0));
  ASSERT_TRUE(Round(*faster, global, std::move(both_within), fresh).ok());
  EXPECT_NEAR(PlannedClipNorm(*faster, global, fresh), std::exp(-0.5 * 0.5), 1e-12);
}

TEST(DpFedAvgTest, AdaptiveClippingStopsAtItsCeiling) {
  // No noise, nobody within C = 1: C <- exp(0.2 x 0.5) = 1.105171 per round, so
  // 1.105171, 1.221403, then the ceiling 1.2 and there it stays; the first
  // round within C brings it down from the ceiling, 1.2 exp(-0.1).
  DpFedAvgOptions options;
  options.set_noise_multiplier(0.0);
  options.mutable_adaptive()->set_initial_clip_norm(1.0);
  options.mutable_adaptive()->set_max_clip_norm(1.2);
  auto aggregator = DpFedAvg(options);
  fl::ServerContext context = Context(2);
  const fl::ModelState global = State(0, 0);
  const std::vector<double> expected = {std::exp(0.1), 1.2, 1.2};
  for (double planned : expected) {
    std::vector<fl::ClientUpdate> outside;
    outside.push_back(Update(State(5, 0), 1, 0, 0.0));
    outside.push_back(Update(State(6, 0), 1, 1, 0.0));
    ASSERT_TRUE(Round(*aggregator, global, std::move(outside), context).ok());
    EXPECT_NEAR(PlannedClipNorm(*aggregator, global, context), planned, 1e-12);
  }
  std::vector<fl::ClientUpdate> within;
  within.push_back(Update(State(0.1f, 0), 1, 0, 1.0));
  within.push_back(Update(State(0.2f, 0), 1, 1, 1.0));
  ASSERT_TRUE(Round(*aggregator, global, std::move(within), context).ok());
  EXPECT_NEAR(PlannedClipNorm(*aggregator, global, context), 1.2 * std::exp(-0.1), 1e-12);
}

TEST(DpFedAvgTest, AdaptiveClippingRefusesACeilingBelowItsStart) {
  DpFedAvgOptions options;
  options.set_noise_multiplier(0.0);
  options.mutable_adaptive()->set_initial_clip_norm(1.0);
  options.mutable_adaptive()->set_max_clip_norm(0.5);
  auto created = Create(options);
  ASSERT_FALSE(created.ok());
  EXPECT_THAT(created.status().message(),
              AllOf(HasSubstr("options.adaptive.max_clip_norm"), HasSubstr("got 0.5")));
}

TEST(DpFedAvgTest, AdaptiveClippingConvergesToTheQuantileOfAKnownDistribution) {
  // 100 clients a round whose update norms are uniform on [0, 2]: the gamma-quantile
  // is 2 gamma. From C = 0.1, C settles there (mean of the last 100 of 300 rounds
  // within 5 %), without noise and with the paper's count noise (z 1, sigma_b 5).
  for (const auto& [gamma, z] : {std::pair{0.5, 0.0}, std::pair{0.8, 0.0}, std::pair{0.5, 1.0}}) {
    DpFedAvgOptions options;
    options.set_noise_multiplier(z);
    options.mutable_adaptive()->set_target_quantile(gamma);
    auto aggregator = DpFedAvg(options);
    fl::ServerContext context = Context(100);
    context.num_clients = 1000;
    const fl::ModelState global = State(0, 0);
    at::Generator draws = at::make_generator<at::CPUGeneratorImpl>(17);
    double late_sum = 0;
    for (int round = 1; round <= 300; ++round) {
      const double clip = PlannedClipNorm(*aggregator, global, context);
      const at::Tensor norms = at::empty({100}, at::kDouble).uniform_(0.0, 2.0, draws);
      for (int k = 0; k < 100; ++k) {
        const double r = norms[k].item<double>();
        ASSERT_TRUE(aggregator
                        ->Accumulate(Update(State(static_cast<float>(r), 0), 1, k, r <= clip ? 1.0 : 0.0),
                                     context)
                        .ok());
      }
      ASSERT_TRUE(aggregator->Finalize(global, context).ok());
      ++context.round;
      ++context.round_seed;
      if (round > 200) late_sum += clip;
    }
    EXPECT_NEAR(late_sum / 100, 2 * gamma, 0.05 * 2 * gamma) << "gamma " << gamma << ", z " << z;
  }
}

TEST(DpFedAvgTest, AdaptiveClippingLeavesTheDataSumsTheRestOfTheBudget) {
  // z = 1, sigma_b = 1 on the count (sensitivity 1/2): z_d = (1 - 1/4)^-1/2.
  DpFedAvgOptions options;
  options.set_noise_multiplier(1.0);
  options.mutable_adaptive()->set_initial_clip_norm(0.5);
  options.mutable_adaptive()->set_count_noise_stddev(1.0);
  fl::ServerContext context = Context(2);
  std::vector<fl::ClientUpdate> updates;
  for (int k = 0; k < 2; ++k) updates.push_back(Update(State(0, 0, 0, 40000), 1, k, 1.0));
  auto next = Round(*DpFedAvg(options), State(0, 0, 0, 40000), std::move(updates), context);
  ASSERT_TRUE(next.ok()) << next.status();
  const double expected = (1.0 / std::sqrt(0.75)) * 0.5 / 2;
  EXPECT_NEAR(StdDev(next->tensor(0)), expected, 0.02 * expected);
}

TEST(DpFedAvgTest, AdaptiveClippingRefusesACountNoiseTooSmallForTheBudget) {
  DpFedAvgOptions options;
  options.set_noise_multiplier(1.0);
  options.mutable_adaptive()->set_count_noise_stddev(0.4);  // 2 sigma_b = 0.8 < z
  auto aggregator = DpFedAvg(options);
  fl::ServerContext context = Context(2);
  auto plan = aggregator->Configure(State(0, 0), context);
  EXPECT_THAT(plan.status().message(), HasSubstr("count_noise_stddev"));
}

TEST(DpFedAvgTest, AdaptiveClippingsDefaultCountNoiseFitsSmallCohorts) {
  // m / 20 = 0.1 would be below z / 2; the default is then z: z_d = z (3/4)^-1/2.
  DpFedAvgOptions options;
  options.set_noise_multiplier(2.0);
  options.mutable_adaptive()->set_initial_clip_norm(0.5);
  fl::ServerContext context = Context(2);
  std::vector<fl::ClientUpdate> updates;
  for (int k = 0; k < 2; ++k) updates.push_back(Update(State(0, 0, 0, 40000), 1, k, 1.0));
  auto next = Round(*DpFedAvg(options), State(0, 0, 0, 40000), std::move(updates), context);
  ASSERT_TRUE(next.ok()) << next.status();
  const double expected = (2.0 / std::sqrt(0.75)) * 0.5 / 2;
  EXPECT_NEAR(StdDev(next->tensor(0)), expected, 0.02 * expected);
}

TEST(DpFedAvgTest, AdaptiveClippingRefusesAnUpdateWithoutTheHooksReport) {
  DpFedAvgOptions options;
  options.mutable_adaptive();
  auto aggregator = DpFedAvg(options);
  fl::ServerContext context = Context(2);
  ASSERT_TRUE(aggregator->Configure(State(0, 0), context).ok());
  const absl::Status status = aggregator->Accumulate(Update(State(1, 0), 1, 4), context);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), AllOf(HasSubstr("client 4"), HasSubstr("dp_clip")));
}

// Epsilon after `rounds` rounds of the run in Context(2): q = 0.2, delta = 10^-1.1.
double AccountedEpsilon(double accounted_z, int rounds, Sampling sampling) {
  fl::privacy::RdpAccountant accountant;
  EXPECT_TRUE(accountant.Compose(0.2, accounted_z, rounds, sampling).ok());
  auto spent = accountant.Epsilon(std::pow(10.0, -1.1));
  EXPECT_TRUE(spent.ok()) << spent.status();
  return spent.ok() ? spent->epsilon : -1;
}

TEST(DpFedAvgTest, EpsilonIsTheAccountantsForTheRunsSampling) {
  // Poisson: add/remove-one, multiplier z. Fixed-size: replace-one, whose
  // sensitivity is 2C, so the accountant sees z / 2.
  for (bool poisson : {true, false}) {
    auto aggregator = DpFedAvg(Fixed(1.0, 1.5));
    fl::ServerContext context = Context(2, poisson);
    for (int round = 1; round <= 3; ++round) {
      std::vector<fl::ClientUpdate> updates;
      updates.push_back(Update(State(0.1f, 0), 1, 0));
      ASSERT_TRUE(Round(*aggregator, State(0, 0), std::move(updates), context).ok());
      const double expected = poisson ? AccountedEpsilon(1.5, round, Sampling::kPoisson)
                                      : AccountedEpsilon(0.75, round, Sampling::kFixedSize);
      EXPECT_NEAR(context.diagnostics.at("epsilon"), expected, 1e-9 * expected)
          << (poisson ? "poisson" : "fixed size") << ", round " << round;
      EXPECT_THAT(context.summary.at("privacy"),
                  AllOf(HasSubstr(absl::StrCat("\"rounds\": ", round)),
                        HasSubstr(poisson ? "\"sampling\": \"poisson\"" : "\"sampling\": \"fixed_size\""),
                        HasSubstr("\"noise_multiplier\": 1.5"), HasSubstr("\"sampling_rate\": 0.2"),
                        HasSubstr("\"conversion\": \"cks\"")));
    }
  }
}

// Under either accountant; PLD's tighter epsilon lets the target through with less noise.
TEST(DpFedAvgTest, TargetEpsilonIsMetAtThePlannedRoundsAndNoLater) {
  double noise[2];
  for (bool pld : {false, true}) {
    DpFedAvgOptions options;
    options.set_target_epsilon(2.0);
    options.set_clip_norm(1.0);
    if (pld) options.set_accountant(DpFedAvgOptions::PLD);
    auto aggregator = DpFedAvg(options);
    fl::ServerContext context = Context(2);
    for (int round = 1; round <= context.planned_rounds; ++round) {
      std::vector<fl::ClientUpdate> updates;
      updates.push_back(Update(State(0.1f, 0), 1, 0));
      ASSERT_TRUE(Round(*aggregator, State(0, 0), std::move(updates), context).ok());
    }
    EXPECT_LE(context.diagnostics.at("epsilon"), 2.0) << (pld ? "pld" : "rdp");
    EXPECT_GE(context.diagnostics.at("epsilon"), 2.0 * (1 - 1e-4)) << (pld ? "pld" : "rdp");
    noise[pld] = context.diagnostics.at("dp_noise_multiplier");
  }
  EXPECT_LT(noise[1], noise[0]);
}

TEST(DpFedAvgTest, EpsilonContinuesAcrossSaveAndRestore) {
  std::vector<double> straight;
  auto first = DpFedAvg(Fixed(1.0, 1.0));
  fl::ServerContext context = Context(2);
  for (int round = 1; round <= 3; ++round) {
    std::vector<fl::ClientUpdate> updates;
    updates.push_back(Update(State(0.1f, 0), 1, 0));
    ASSERT_TRUE(Round(*first, State(0, 0), std::move(updates), context).ok());
    straight.push_back(context.diagnostics.at("epsilon"));
  }
  auto second = DpFedAvg(Fixed(1.0, 1.0));
  fl::ServerContext resumed = Context(2);
  std::vector<fl::ClientUpdate> one;
  one.push_back(Update(State(0.1f, 0), 1, 0));
  ASSERT_TRUE(Round(*second, State(0, 0), std::move(one), resumed).ok());
  auto third = DpFedAvg(Fixed(1.0, 1.0));
  ASSERT_TRUE(third->RestoreState(second->SaveState()).ok());
  resumed.round = 2;
  std::vector<fl::ClientUpdate> two;
  two.push_back(Update(State(0.1f, 0), 1, 0));
  ASSERT_TRUE(Round(*third, State(0, 0), std::move(two), resumed).ok());
  EXPECT_DOUBLE_EQ(resumed.diagnostics.at("epsilon"), straight[1]);
}

TEST(DpFedAvgTest, PldAccountantGivesThePldsEpsilonBelowRdps) {
  DpFedAvgOptions options = Fixed(1.0, 1.5);
  options.set_accountant(DpFedAvgOptions::PLD);
  auto aggregator = DpFedAvg(options);
  fl::ServerContext context = Context(2);
  fl::privacy::PldAccountant expected;
  for (int round = 1; round <= 3; ++round) {
    std::vector<fl::ClientUpdate> updates;
    updates.push_back(Update(State(0.1f, 0), 1, 0));
    ASSERT_TRUE(Round(*aggregator, State(0, 0), std::move(updates), context).ok());
    ASSERT_TRUE(expected.Compose(0.2, 1.5, 1, Sampling::kPoisson).ok());
    const double pld = *expected.Epsilon(std::pow(10.0, -1.1));
    EXPECT_NEAR(context.diagnostics.at("epsilon"), pld, 1e-9 * pld) << "round " << round;
    EXPECT_LT(context.diagnostics.at("epsilon"), AccountedEpsilon(1.5, round, Sampling::kPoisson));
    EXPECT_THAT(context.summary.at("privacy"),
                AllOf(HasSubstr("\"accountant\": \"pld\""), HasSubstr("\"grid\": 0.0001")));
  }
}

TEST(DpFedAvgTest, PldEpsilonContinuesAcrossSaveAndRestore) {
  DpFedAvgOptions options = Fixed(1.0, 1.0);
  options.set_accountant(DpFedAvgOptions::PLD);
  std::vector<double> straight;
  auto first = DpFedAvg(options);
  fl::ServerContext context = Context(2);
  for (int round = 1; round <= 3; ++round) {
    std::vector<fl::ClientUpdate> updates;
    updates.push_back(Update(State(0.1f, 0), 1, 0));
    ASSERT_TRUE(Round(*first, State(0, 0), std::move(updates), context).ok());
    straight.push_back(context.diagnostics.at("epsilon"));
  }
  auto second = DpFedAvg(options);
  fl::ServerContext resumed = Context(2);
  for (int round = 1; round <= 2; ++round) {
    std::vector<fl::ClientUpdate> updates;
    updates.push_back(Update(State(0.1f, 0), 1, 0));
    ASSERT_TRUE(Round(*second, State(0, 0), std::move(updates), resumed).ok());
  }
  auto third = DpFedAvg(options);
  ASSERT_TRUE(third->RestoreState(second->SaveState()).ok());
  std::vector<fl::ClientUpdate> last;
  last.push_back(Update(State(0.1f, 0), 1, 0));
  ASSERT_TRUE(Round(*third, State(0, 0), std::move(last), resumed).ok());
  EXPECT_NEAR(resumed.diagnostics.at("epsilon"), straight[2], 1e-9 * straight[2]);
}

TEST(DpFedAvgTest, PldRefusesFixedSizeCohortsNamingTheOption) {
  DpFedAvgOptions options = Fixed(1.0, 1.0);
  options.set_accountant(DpFedAvgOptions::PLD);
  auto aggregator = DpFedAvg(options);
  fl::ServerContext context = Context(2, /*poisson=*/false);
  const auto plan = aggregator->Configure(State(0, 0), context);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(plan.status().message(),
              AllOf(HasSubstr("options.accountant"), HasSubstr("cohort_sampling: POISSON")));
}

TEST(DpFedAvgTest, LocalModeNoisesOnTheClientAndNotAgainOnTheServer) {
  // The hook: clip (3, 4) to C = 1 and add N(0, 0.5^2) to every coordinate.
  DpClipHookOptions hook_options;
  hook_options.set_clip_norm(1.0);
  hook_options.set_local_noise_stddev(0.5);
  hook_options.set_reproducible_noise(true);  // the same draw twice, below
  google::protobuf::Any any;
  any.PackFrom(hook_options);
  auto hook = fl::Registry<fl::ClientHook>::Global().Create("dp_clip", any);
  ASSERT_TRUE(hook.ok()) << hook.status();
  fl::HookContext hook_context;
  hook_context.seed = 3;
  fl::ClientUpdate update = Update(State(3, 4, 0, 40000), 1, 0);
  ASSERT_TRUE((*hook)->AfterTraining(hook_context, update).ok());
  EXPECT_NEAR(StdDev(update.delta.tensor(0)), 0.5, 0.01);
  // The clip, whatever the noise: the same draw on the update already at C, (0.6,
  // 0.8), gives the same words; unclipped, the first two would be off by (2.4, 3.2).
  auto within_hook = fl::Registry<fl::ClientHook>::Global().Create("dp_clip", any);
  ASSERT_TRUE(within_hook.ok());
  fl::ClientUpdate within = Update(State(0.6f, 0.8f, 0, 40000), 1, 0);
  ASSERT_TRUE((*within_hook)->AfterTraining(hook_context, within).ok());
  EXPECT_TRUE(update.delta.tensor(0).allclose(within.delta.tensor(0), 0, 1e-6))
      << (update.delta.tensor(0) - within.delta.tensor(0)).abs().max();

  // The server: sums as they come, divided by m; no noise of its own.
  DpFedAvgOptions options = Fixed(1.0, 2.0);
  options.set_mode(DpFedAvgOptions::LOCAL);
  auto aggregator = DpFedAvg(options);
  fl::ServerContext context = Context(2);
  auto plan = aggregator->Configure(State(0, 0), context);
  ASSERT_TRUE(plan.ok());
  DpClipHookOptions planned;
  ASSERT_TRUE(plan->hooks.front().options.UnpackTo(&planned));
  EXPECT_EQ(planned.local_noise_stddev(), 2.0) << "z C";
  std::vector<fl::ClientUpdate> updates;
  updates.push_back(Update(State(3, 4), 1, 0));  // noised on the client: not clipped again
  updates.push_back(Update(State(1, 0), 1, 1));
  auto next = Round(*aggregator, State(0, 0), std::move(updates), context);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_TRUE(next->tensor(0).allclose(at::tensor({2.0f, 2.0f}))) << next->tensor(0);
  // One participation each: one Gaussian of sensitivity 2C and noise z C.
  fl::privacy::RdpAccountant local;
  ASSERT_TRUE(local.Compose(1.0, 1.0, 1, Sampling::kPoisson).ok());
  EXPECT_DOUBLE_EQ(context.diagnostics.at("epsilon"), local.Epsilon(std::pow(10.0, -1.1))->epsilon);
}

// The released model minus the one released for another update, under the same
// round seed: what a server that knows the seed can compute.
at::Tensor ReleasedDifference(const DpFedAvgOptions& options) {
  std::vector<at::Tensor> released;
  for (const float w0 : {0.3f, 0.6f}) {
    auto aggregator = DpFedAvg(options);
    fl::ServerContext context = Context(2);
    std::vector<fl::ClientUpdate> updates;
    updates.push_back(Update(State(w0, 0.4f, 0, 1000), 1, 0));
    auto next = Round(*aggregator, State(0, 0, 0, 1000), std::move(updates), context);
    EXPECT_TRUE(next.ok()) << next.status();
    released.push_back(next.ok() ? next->tensor(0) : at::zeros({1000}));
  }
  return released[0] - released[1];
}

TEST(DpFedAvgTest, OnlyNoiseFromTheSeedCancelsForWhoeverKnowsTheSeed) {
  // Two rounds under one seed on updates that differ by (-0.3, 0, ...): with
  // noise from the seed the releases differ by exactly that over m = 2, so the
  // noise is gone for anyone who holds the spec; secure noise (sd zC / m each)
  // stays in every coordinate.
  DpFedAvgOptions options = Fixed(1.0, 2.0);
  at::Tensor expected = at::zeros({1000});
  expected[0] = -0.15f;
  options.set_reproducible_noise(true);
  EXPECT_TRUE(ReleasedDifference(options).allclose(expected, 0, 1e-5));
  options.set_reproducible_noise(false);
  const at::Tensor left = ReleasedDifference(options) - expected;
  // Each coordinate of secure noise is N(0, 2) here: it falls within 1e-4 of
  // zero with probability 6e-5, so 11 of 1000 doing so has odds below 1e-30
  // (a bound at 0.01 failed CI about once in 50 runs).
  EXPECT_GT((left.abs() > 1e-4).sum().item<int64_t>(), 990) << "noise cancelled";
  EXPECT_NEAR(left.std().item<double>(), std::sqrt(2.0), 0.2);  // 6 standard errors

  // The same on the client, in LOCAL mode.
  for (const bool reproducible : {true, false}) {
    DpClipHookOptions hook_options;
    hook_options.set_clip_norm(1.0);
    hook_options.set_local_noise_stddev(0.5);
    hook_options.set_reproducible_noise(reproducible);
    google::protobuf::Any any;
    any.PackFrom(hook_options);
    fl::HookContext hook_context;
    hook_context.seed = 3;
    std::vector<at::Tensor> sent;
    for (const float w0 : {0.3f, 0.6f}) {
      auto hook = fl::Registry<fl::ClientHook>::Global().Create("dp_clip", any);
      ASSERT_TRUE(hook.ok());
      fl::ClientUpdate update = Update(State(w0, 0.4f, 0, 1000), 1, 0);
      ASSERT_TRUE((*hook)->AfterTraining(hook_context, update).ok());
      sent.push_back(update.delta.tensor(0));
    }
    at::Tensor exact = at::zeros({1000});
    exact[0] = -0.3f;
    const at::Tensor difference = sent[0] - sent[1];
    EXPECT_EQ(difference.allclose(exact, 0, 1e-5), reproducible) << reproducible;
  }
}

TEST(DpFedAvgTest, TheSummarySaysWhetherTheNoiseIsPrivate) {
  for (const bool reproducible : {false, true}) {
    DpFedAvgOptions options = Fixed(1.0, 2.0);
    options.set_reproducible_noise(reproducible);
    auto aggregator = DpFedAvg(options);
    EXPECT_EQ(aggregator->properties().noise_from_seed, reproducible);
    fl::ServerContext context = Context(2);
    std::vector<fl::ClientUpdate> updates;
    updates.push_back(Update(State(0.3f, 0.4f), 1, 0));
    ASSERT_TRUE(Round(*aggregator, State(0, 0), std::move(updates), context).ok());
    EXPECT_THAT(context.summary.at("privacy"),
                HasSubstr(reproducible ? "NOT private against whoever holds the spec"
                                       : "secure (drawn from the operating system's randomness)"));
  }
}

TEST(DpFedAvgTest, LocalModeCountsParticipationsThatArriveAsPartialSums) {
  // Secure aggregation and a distributed run hand the server its cohort's sums
  // (MergePartialSums), never one update: each client accumulates into its own
  // instance, as SecureAggregationRound::Contribute has it do.
  DpFedAvgOptions options = Fixed(1.0, 2.0);
  options.set_mode(DpFedAvgOptions::LOCAL);
  auto server = DpFedAvg(options);
  fl::ServerContext context = Context(2);
  for (int round = 1; round <= 2; ++round) {
    ASSERT_TRUE(server->Configure(State(0, 0), context).ok());
    std::map<std::string, at::Tensor> total;
    for (int64_t client : {3, 5}) {
      if (round == 2 && client == 5) continue;  // client 3 twice, client 5 once
      auto client_side = DpFedAvg(options);
      ASSERT_TRUE(client_side->Configure(State(0, 0), context).ok());
      ASSERT_TRUE(client_side->Accumulate(Update(State(0.3f, 0.4f), 1, client), context).ok());
      const auto sums = client_side->PartialSums();
      ASSERT_TRUE(sums.has_value());
      for (const auto& [name, sum] : *sums) {
        total[name] = total.count(name) > 0 ? total[name] + sum : sum.clone();
      }
    }
    ASSERT_TRUE(server->MergePartialSums(std::move(total)).ok());
    ASSERT_TRUE(server->Finalize(State(0, 0), context).ok());
    ++context.round;
  }
  // The most frequent participant took part twice: two Gaussians of sensitivity
  // 2C and noise zC.
  fl::privacy::RdpAccountant local;
  ASSERT_TRUE(local.Compose(1.0, 1.0, 2, Sampling::kPoisson).ok());
  EXPECT_DOUBLE_EQ(context.diagnostics.at("epsilon"), local.Epsilon(std::pow(10.0, -1.1))->epsilon);
}

TEST(DpFedAvgTest, CohortsDrawnAmongOnlineClientsGetNoAmplificationBySampling) {
  // A client trace: whoever is online is drawn, so q = m / N would understate
  // epsilon. Replace-one sensitivity 2C, every round a plain Gaussian.
  for (const bool pld : {false, true}) {
    DpFedAvgOptions options = Fixed(1.0, 2.0);
    if (pld) options.set_accountant(DpFedAvgOptions::PLD);
    auto aggregator = DpFedAvg(options);
    fl::ServerContext context = Context(2, /*poisson=*/false);
    context.uniform_cohorts = false;
    std::vector<fl::ClientUpdate> updates;
    updates.push_back(Update(State(0.3f, 0.4f), 1, 0));
    ASSERT_TRUE(Round(*aggregator, State(0, 0), std::move(updates), context).ok());
    double expected = 0;
    if (pld) {
      fl::privacy::PldAccountant plain;
      ASSERT_TRUE(plain.Compose(1.0, 1.0, 1, Sampling::kPoisson).ok());
      expected = *plain.Epsilon(std::pow(10.0, -1.1));
    } else {
      fl::privacy::RdpAccountant plain;
      ASSERT_TRUE(plain.Compose(1.0, 1.0, 1, Sampling::kPoisson).ok());
      expected = plain.Epsilon(std::pow(10.0, -1.1))->epsilon;
    }
    EXPECT_DOUBLE_EQ(context.diagnostics.at("epsilon"), expected) << (pld ? "pld" : "rdp");
    EXPECT_THAT(context.summary.at("privacy"), HasSubstr("\"amplified_by_sampling\": false"));
  }
}

TEST(DpFedAvgTest, CentralModeRefusesAsynchronousModeNamingTheField) {
  fl::ServerContext context = Context(2, /*poisson=*/false);
  context.asynchronous = true;
  auto central = DpFedAvg(Fixed(1.0, 2.0));
  const auto plan = central->Configure(State(0, 0), context);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(plan.status().message(), AllOf(HasSubstr("server.async"), HasSubstr("LOCAL")));
  DpFedAvgOptions options = Fixed(1.0, 2.0);
  options.set_mode(DpFedAvgOptions::LOCAL);
  EXPECT_TRUE(DpFedAvg(options)->Configure(State(0, 0), context).ok());
}

TEST(DpFedAvgTest, TheHookClipsAndReportsWhetherTheUpdateWasWithinTheBound) {
  DpClipHookOptions options;
  options.set_clip_norm(1.0);
  options.set_report_within_bound(true);
  google::protobuf::Any any;
  any.PackFrom(options);
  fl::HookContext context;
  for (const auto& [w0, w1, within] : {std::tuple{3.0f, 4.0f, 0.0}, std::tuple{0.3f, 0.4f, 1.0}}) {
    auto hook = fl::Registry<fl::ClientHook>::Global().Create("dp_clip", any);
    ASSERT_TRUE(hook.ok());
    fl::ClientUpdate update = Update(State(w0, w1, 7), 1, 0);
    ASSERT_TRUE((*hook)->AfterTraining(context, update).ok());
    const float scale = within > 0 ? 1.0f : 0.2f;  // (3, 4) has norm 5
    EXPECT_TRUE(update.delta.tensor(0).allclose(at::tensor({w0 * scale, w1 * scale})))
        << update.delta.tensor(0);
    EXPECT_TRUE(update.delta.tensor(1).equal(at::tensor({7.0f}))) << "buffers are not scaled";
    EXPECT_EQ(update.extras.at(kWithin).tensor(0).item<double>(), within);
  }
}

TEST(DpFedAvgTest, RefusesABaseWithoutDpSumsAndListsThoseWithThem) {
  DpFedAvgOptions options;
  options.mutable_base()->set_name("krum");
  auto created = Create(options);
  EXPECT_EQ(created.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(created.status().message(),
              AllOf(HasSubstr("options.base"), HasSubstr("\"krum\" cannot run under differential"),
                    HasSubstr("fedavg"), HasSubstr("fedexp"), HasSubstr("fedadam")));
}

TEST(DpFedAvgTest, RefusesBadOptionsNamingTheField) {
  DpFedAvgOptions bad_noise = Fixed(1.0, -1.0);
  EXPECT_THAT(Create(bad_noise).status().message(), HasSubstr("options.noise_multiplier"));
  DpFedAvgOptions bad_delta = Fixed(1.0, 1.0);
  bad_delta.set_delta(1.5);
  EXPECT_THAT(Create(bad_delta).status().message(), HasSubstr("options.delta"));
  DpFedAvgOptions bad_quantile;
  bad_quantile.mutable_adaptive()->set_target_quantile(1.0);
  EXPECT_THAT(Create(bad_quantile).status().message(), HasSubstr("options.adaptive.target_quantile"));
  DpFedAvgOptions local_adaptive;
  local_adaptive.set_mode(DpFedAvgOptions::LOCAL);
  EXPECT_THAT(Create(local_adaptive).status().message(), HasSubstr("fixed clip_norm"));
  DpFedAvgOptions local_fedexp = Fixed(1.0, 1.0);
  local_fedexp.set_mode(DpFedAvgOptions::LOCAL);
  local_fedexp.mutable_base()->set_name("fedexp");
  EXPECT_THAT(Create(local_fedexp).status().message(), HasSubstr("squared update norms"));
  DpFedAvgOptions bad_epsilon;
  bad_epsilon.set_target_epsilon(0);
  EXPECT_THAT(Create(bad_epsilon).status().message(), HasSubstr("options.target_epsilon"));
}

}  // namespace
}  // namespace aggregators
