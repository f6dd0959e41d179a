#include "aggregators/common/fedexp_step.h"

#include <ATen/ATen.h>

#include "gtest/gtest.h"

namespace aggregators {
namespace {

TEST(FedExpStepTest, CodeFormAgainstHandComputation) {
  // A = 10, ||mean||^2 = 1, M = 4, eps = 0.1, decay 1: eta = 10 / (2 (1 + 4 * 0.1)) = 3.5714...
  FedExpStepConfig config{.epsilon = 0.1, .epsilon_decay = 1.0, .paper_form = false};
  EXPECT_NEAR(ComputeFedExpStep(10, 1, 4, 1, config).eta_g, 10.0 / 2.8, 1e-12);
}

TEST(FedExpStepTest, PaperFormAddsEpsilonOnce) {
  // eta = 10 / (2 (1 + 0.1)) = 4.5454...
  FedExpStepConfig config{.epsilon = 0.1, .epsilon_decay = 1.0, .paper_form = true};
  EXPECT_NEAR(ComputeFedExpStep(10, 1, 4, 1, config).eta_g, 10.0 / 2.2, 1e-12);
}

TEST(FedExpStepTest, EpsilonDecaysAsTheSquareOfTheLrDecayPerRound) {
  // eps_3 = 0.5 * 0.9^6.
  FedExpStepConfig config{.epsilon = 0.5, .epsilon_decay = 0.9};
  EXPECT_NEAR(ComputeFedExpStep(1, 1, 2, 3, config).epsilon_t, 0.5 * std::pow(0.9, 6), 1e-15);
}

TEST(FedExpStepTest, NeverBelowOne) {
  // Identical updates: A = ||mean||^2, so A / (2 (A + eps)) < 1.
  EXPECT_EQ(ComputeFedExpStep(3, 3, 5, 1, {}).eta_g, 1.0);
  // All-zero updates with eps = 0.
  EXPECT_EQ(ComputeFedExpStep(0, 0, 5, 1, {.epsilon = 0}).eta_g, 1.0);
}

TEST(FedExpStepTest, SquaredNormMeanIsWeightedOverParametersOnly) {
  SquaredNormMean mean;
  // ||(3, 4)||^2 = 25 with weight 1, ||(0, 1)||^2 = 1 with weight 3; the buffer is ignored.
  mean.Add(fl::ModelState({{"w", at::tensor({3.0f, 4.0f}), false}, {"b", at::tensor({9.0f}), true}}), 1);
  mean.Add(fl::ModelState({{"w", at::tensor({0.0f, 1.0f}), false}, {"b", at::tensor({9.0f}), true}}), 3);
  EXPECT_DOUBLE_EQ(mean.Mean(), (25.0 + 3.0) / 4.0);
  mean.Reset();
  EXPECT_EQ(mean.Mean(), 0.0);
}

}  // namespace
}  // namespace aggregators
