#include "fl/privacy/pld_accountant.h"

#include <cmath>
#include <limits>
#include <tuple>
#include <utility>

#include "fl/privacy/rdp_accountant.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fl::privacy {
namespace {

using ::testing::HasSubstr;

double NormalCdf(double t) { return 0.5 * std::erfc(-t / std::sqrt(2.0)); }

// The Gaussian mechanism's exact delta(eps) (Balle & Wang 2018, Theorem 8): T
// unsampled steps of noise z are one step of noise z / sqrt(T).
double ExactGaussianDelta(double z, int64_t steps, double eps) {
  const double s = z / std::sqrt(static_cast<double>(steps));
  return NormalCdf(-eps * s + 1 / (2 * s)) - std::exp(eps) * NormalCdf(-eps * s - 1 / (2 * s));
}

double ExactGaussianEpsilon(double z, int64_t steps, double delta) {
  double lo = 0.0;
  double hi = 100.0;
  for (int i = 0; i < 200; ++i) {
    const double mid = 0.5 * (lo + hi);
    (ExactGaussianDelta(z, steps, mid) > delta ? lo : hi) = mid;
  }
  return hi;
}

double PldEpsilon(double q, double z, int64_t steps, double delta) {
  PldAccountant accountant;
  EXPECT_TRUE(accountant.Compose(q, z, steps, Sampling::kPoisson).ok());
  return *accountant.Epsilon(delta);
}

// Without subsampling the answer is known in closed form: the PLD's epsilon lies
// above it (a pessimistic estimate) and within 1e-6 of it, relative.
TEST(PldAccountantTest, UnsampledGaussianMatchesTheExactCurve) {
  for (const auto& [z, steps] : {std::pair{2.0, int64_t{10}}, std::pair{1.0, int64_t{1}},
                                 std::pair{5.0, int64_t{300}}}) {
    for (double delta : {1e-5, 1e-3}) {
      const double exact = ExactGaussianEpsilon(z, steps, delta);
      const double pld = PldEpsilon(1.0, z, steps, delta);
      EXPECT_GE(pld, exact - 1e-9) << "z " << z << " steps " << steps << " delta " << delta;
      EXPECT_NEAR(pld, exact, 1e-6 * exact) << "z " << z << " steps " << steps;
    }
  }
  PldAccountant accountant;
  ASSERT_TRUE(accountant.Compose(1.0, 2.0, 10, Sampling::kPoisson).ok());
  for (double eps : {0.5, 2.0, 5.0}) {
    const double exact = ExactGaussianDelta(2.0, 10, eps);
    EXPECT_GE(*accountant.Delta(eps), exact * (1 - 1e-9));
    EXPECT_NEAR(*accountant.Delta(eps), exact, 1e-3 * exact) << "eps " << eps;
  }
}

// Google's dp_accounting 0.6.0, PLDAccountant() (value_discretization_interval
// 1e-4, connect the dots), composed with
// PoissonSampledDpEvent(q, GaussianDpEvent(z)) T times, get_epsilon(delta).
TEST(PldAccountantTest, MatchesDpAccounting) {
  struct Case {
    double q, z;
    int64_t steps;
    double delta, epsilon;
  };
  for (const Case& c : {Case{0.0025, 1.3, 6000, 1e-5, 0.6401109264445614},
                        Case{0.1, 1.0, 100, 1e-5, 7.04660287720805},
                        Case{0.01, 2.5, 50, 1e-5, 0.09945653984705242},
                        Case{0.1, 0.8, 200, 1e-6, 17.42560257818526},
                        // Long runs at small rates: the composed grid is bounded by
                        // its tails, not its steps (repeated squaring needed 3.4 GB
                        // at 16k steps of the first and died near 23 GB at 100k).
                        Case{0.001, 0.8, 100000, 1e-5, 2.575560086623456},
                        Case{0.01, 1.0, 50000, 1e-6, 17.785811401717197}}) {
    EXPECT_NEAR(PldEpsilon(c.q, c.z, c.steps, c.delta), c.epsilon, 1e-6 * c.epsilon)
        << "q " << c.q << " z " << c.z << " steps " << c.steps;
  }
}

// Each direction on its own, against dp_accounting's
// from_gaussian_mechanism(z, sampling_prob=q).self_compose(T)._pmf_remove and
// ._pmf_add .get_epsilon_for_delta(delta).
TEST(PldAccountantTest, BothDirectionsMatchDpAccounting) {
  struct Case {
    double q, z;
    int64_t steps;
    double delta, removal, addition;
  };
  for (const Case& c : {Case{0.1, 1.0, 100, 1e-5, 7.0466028772116545, 3.989159573754008},
                        Case{0.5, 0.5, 5, 0.1, 7.153971417758653, 2.450374680061732},
                        Case{0.5, 2.0, 10, 0.2, 0.352809272333069, 0.3175006138735707}}) {
    PldAccountant accountant;
    ASSERT_TRUE(accountant.Compose(c.q, c.z, c.steps, Sampling::kPoisson).ok());
    const auto directions = accountant.EpsilonByDirection(c.delta);
    ASSERT_TRUE(directions.ok());
    EXPECT_NEAR(directions->removal, c.removal, 1e-6 * c.removal) << "q " << c.q;
    EXPECT_NEAR(directions->addition, c.addition, 1e-6 * c.addition) << "q " << c.q;
  }
}

TEST(PldAccountantTest, TighterThanRdpOnTheSameSteps) {
  for (const auto& [q, z, steps] : {std::tuple{0.0025, 1.3, int64_t{6000}},
                                    std::tuple{0.1, 1.0, int64_t{100}}}) {
    RdpAccountant rdp;
    ASSERT_TRUE(rdp.Compose(q, z, steps, Sampling::kPoisson).ok());
    const double pld = PldEpsilon(q, z, steps, 1e-5);
    EXPECT_LT(pld, rdp.Epsilon(1e-5)->epsilon) << "q " << q;
    EXPECT_GT(pld, 0.7 * rdp.Epsilon(1e-5)->epsilon) << "q " << q;
  }
}

// Rounds composed one by one, as a server does, give what one Compose of all
// gives; a round of another rate composes in.
TEST(PldAccountantTest, RoundByRoundEqualsAllAtOnce) {
  PldAccountant by_round;
  for (int round = 0; round < 40; ++round) {
    ASSERT_TRUE(by_round.Compose(0.1, 1.0, 1, Sampling::kPoisson).ok());
  }
  const double all_at_once = PldEpsilon(0.1, 1.0, 40, 1e-5);
  EXPECT_NEAR(*by_round.Epsilon(1e-5), all_at_once, 1e-6 * all_at_once);
  const double before = *by_round.Epsilon(1e-5);
  ASSERT_TRUE(by_round.Compose(0.5, 1.0, 1, Sampling::kPoisson).ok());
  EXPECT_GT(*by_round.Epsilon(1e-5), before);
}

TEST(PldAccountantTest, EdgeCases) {
  PldAccountant none;
  EXPECT_EQ(*none.Epsilon(1e-5), 0.0);
  EXPECT_EQ(*none.Delta(0.0), 0.0);
  ASSERT_TRUE(none.Compose(0.0, 1.0, 100, Sampling::kPoisson).ok());  // nobody sampled
  ASSERT_TRUE(none.Compose(0.5, 1.0, 0, Sampling::kPoisson).ok());
  EXPECT_EQ(*none.Epsilon(1e-5), 0.0);

  PldAccountant clear;
  ASSERT_TRUE(clear.Compose(0.1, 0.0, 1, Sampling::kPoisson).ok());
  EXPECT_EQ(*clear.Epsilon(1e-5), std::numeric_limits<double>::infinity());
  EXPECT_EQ(*clear.Delta(10.0), 1.0);
}

TEST(PldAccountantTest, BadArgumentsNameWhatIsWrong) {
  PldAccountant accountant;
  EXPECT_THAT(accountant.Compose(1.5, 1.0, 1, Sampling::kPoisson).message(),
              HasSubstr("sampling_rate: must be in [0, 1], got 1.5"));
  EXPECT_THAT(accountant.Compose(0.1, -1.0, 1, Sampling::kPoisson).message(),
              HasSubstr("noise_multiplier"));
  EXPECT_THAT(accountant.Compose(0.1, 1.0, -1, Sampling::kPoisson).message(), HasSubstr("steps"));
  const absl::Status fixed = accountant.Compose(0.1, 1.0, 1, Sampling::kFixedSize);
  EXPECT_EQ(fixed.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(fixed.message(), HasSubstr("RdpAccountant"));
  EXPECT_THAT(accountant.Epsilon(0.0).status().message(), HasSubstr("delta: must be in (0, 1)"));
  EXPECT_THAT(accountant.Delta(-1.0).status().message(), HasSubstr("epsilon: must be >= 0"));
  EXPECT_EQ(*accountant.Epsilon(1e-5), 0.0);  // nothing above was composed

  PldOptions options;
  options.value_discretization_interval = 0;
  EXPECT_THAT(PldAccountant::Create(options).status().message(),
              HasSubstr("value_discretization_interval"));
  options = PldOptions();
  options.tail_mass_truncation = 0.5;
  EXPECT_THAT(PldAccountant::Create(options).status().message(),
              HasSubstr("tail_mass_truncation"));
  EXPECT_EQ(accountant.Compose(0.1, 0.001, 1, Sampling::kPoisson).code(),
            absl::StatusCode::kResourceExhausted);
  // A million unsampled steps spread the loss over ~1e5 units: refused before
  // anything is allocated, not ended by std::bad_alloc; nothing was composed.
  const absl::Status wide = accountant.Compose(1.0, 1.0, 1'000'000, Sampling::kPoisson);
  EXPECT_EQ(wide.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(wide.message(), HasSubstr("value_discretization_interval"));
  EXPECT_EQ(*accountant.Epsilon(1e-5), 0.0);
}

// The discrete PLD's own functions, by hand: mass 1/2 at loss 1, 1/2 at 0.
TEST(DiscretePldTest, DeltaAndEpsilonByHand) {
  DiscretePld pld;
  pld.lower_index = 0;
  pld.mass = {0.5, 0.0, 0.5};  // interval 0.5: losses 0, 0.5, 1
  const double interval = 0.5;
  EXPECT_DOUBLE_EQ(HockeyStickDivergence(pld, interval, 0.2), 0.5 * (1 - std::exp(0.2 - 1)));
  // delta(eps) = 0.5 (1 - e^(eps - 1)) on [0, 1): eps = 1 + log(1 - 2 delta).
  EXPECT_NEAR(SmallestEpsilon(pld, interval, 0.1), 1 + std::log(0.8), 1e-12);
  pld.infinity_mass = 0.2;
  pld.mass = {0.4, 0.0, 0.4};
  EXPECT_EQ(SmallestEpsilon(pld, interval, 0.1), std::numeric_limits<double>::infinity());
  // 0.2 + 0.4 (1 - e^(eps - 1)) = 0.3 at eps = 1 + log(0.75).
  EXPECT_NEAR(SmallestEpsilon(pld, interval, 0.3), 1 + std::log(0.75), 1e-12);
}

}  // namespace
}  // namespace fl::privacy
