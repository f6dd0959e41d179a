#include "fl/privacy/rdp_accountant.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "fl/privacy/rdp_orders.h"
#include "gtest/gtest.h"

namespace fl::privacy {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The order grid of TF Privacy's compute_dp_sgd_privacy_lib.
const std::vector<double> kTfPrivacyOrders = {
    1.25, 1.5, 1.75, 2., 2.25, 2.5, 3., 3.5, 4., 4.5, 5,  6,  7,  8,  9,  10, 11, 12,
    13,   14,  15,   16, 17,   18,  19, 20,  21, 22,  23, 24, 25, 26, 27, 28, 29, 30,
    31,   32,  33,   34, 35,   36,  37, 38,  39, 40,  41, 42, 43, 44, 45, 46, 47, 48,
    49,   50,  51,   52, 53,   54,  55, 56,  57, 58,  59, 60, 61, 62, 63, 128, 256, 512};

// DP-SGD as TF Privacy's compute_dp_sgd_privacy accounts it: n examples, batches of
// `batch`, Poisson sampling, ceil(epochs n / batch) steps.
RdpAccountant DpSgd(const std::vector<double>& orders, double n, double batch, double sigma,
                    double epochs) {
  RdpAccountant accountant = *RdpAccountant::Create(orders);
  const auto steps = static_cast<int64_t>(std::ceil(epochs * n / batch));
  EXPECT_TRUE(accountant.Compose(batch / n, sigma, steps, Sampling::kPoisson).ok());
  return accountant;
}

std::vector<double> DefaultOrders() {
  return std::vector<double>(kDefaultRdpOrders.begin(), kDefaultRdpOrders.end());
}

TEST(RdpOrdersTest, DefaultOrdersAreDpAccountingsGrid) {
  ASSERT_EQ(kDefaultRdpOrders.size(), 155u);
  EXPECT_EQ(kDefaultRdpOrders[0], 1.1);
  EXPECT_EQ(kDefaultRdpOrders[9], 2.0);  // exactly, so it is an integer order
  EXPECT_EQ(kDefaultRdpOrders[98], 10.9);
  EXPECT_EQ(kDefaultRdpOrders[99], 11);
  EXPECT_EQ(kDefaultRdpOrders[151], 63);
  EXPECT_EQ(kDefaultRdpOrders[152], 128);
  EXPECT_EQ(kDefaultRdpOrders[153], 256);
  EXPECT_EQ(kDefaultRdpOrders[154], 512);
  EXPECT_EQ(RdpAccountant().orders(), DefaultOrders());
}

// dp_accounting's test_compute_rdp_poisson_sampled_gaussian, through the accountant.
TEST(RdpAccountantTest, ComposesDpAccountingsPoissonExample) {
  RdpAccountant accountant = *RdpAccountant::Create({1.5, 2.5, 5, 50, 100});
  ASSERT_TRUE(accountant.Compose(0.01, 2.5, 50, Sampling::kPoisson).ok());
  const std::vector<double> expected = {6.70579741e-04, 1.08548710e-03, 2.18075656e-03,
                                        2.38460375e-02, 1.67416308e02};
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR(accountant.rdp()[i], expected[i], 1e-8 * expected[i]) << i;
  }
}

// TF Privacy's compute_dp_sgd_privacy_test (Test0, Test1). Its current values,
// 0.7242234026109595 and 1.4154988495444845, come from the CKS conversion
// (dp_accounting's compute_epsilon); its early releases expected 0.941870567 and
// 1.70928734, which the classic conversion reproduces. Both are checked, with
// TF Privacy's own orders and with ours (the best orders, 19 and 13, are in both).
TEST(RdpAccountantTest, ReproducesTfPrivacyDpSgdExamples) {
  for (const auto& orders : {kTfPrivacyOrders, DefaultOrders()}) {
    const RdpAccountant mnist = DpSgd(orders, 60000, 150, 1.3, 15);
    EpsilonAndOrder eps = *mnist.Epsilon(1e-5);
    EXPECT_NEAR(eps.epsilon, 0.7242234026109595, 1e-9 * 0.72);
    EXPECT_EQ(eps.order, 19);
    eps = *mnist.Epsilon(1e-5, Conversion::kClassic);
    EXPECT_NEAR(eps.epsilon, 0.941870567, 1e-8 * 0.94);
    EXPECT_EQ(eps.order, 19);

    const RdpAccountant big = DpSgd(orders, 100000, 100, 1.0, 30);
    eps = *big.Epsilon(1e-7);
    EXPECT_NEAR(eps.epsilon, 1.4154988495444845, 1e-9 * 1.4);
    EXPECT_EQ(eps.order, 13);
    eps = *big.Epsilon(1e-7, Conversion::kClassic);
    EXPECT_NEAR(eps.epsilon, 1.70928734, 1e-8 * 1.7);
    EXPECT_EQ(eps.order, 13);
  }
}

// TF Privacy's Test2: sigma 0.1, so the best order is its smallest, the
// fractional 1.25 (CKS 5907982.31138195; early releases, classic: 5907984.81339406).
TEST(RdpAccountantTest, ReproducesTfPrivacyLowNoiseExample) {
  const RdpAccountant accountant = DpSgd(kTfPrivacyOrders, 1e8, 1024, 0.1, 10);
  EpsilonAndOrder eps = *accountant.Epsilon(1e-7);
  EXPECT_NEAR(eps.epsilon, 5907982.31138195, 1e-9 * 5.9e6);
  EXPECT_EQ(eps.order, 1.25);
  eps = *accountant.Epsilon(1e-7, Conversion::kClassic);
  EXPECT_NEAR(eps.epsilon, 5907984.81339406, 1e-9 * 5.9e6);
  EXPECT_EQ(eps.order, 1.25);
}

// Oracle: dp_accounting 0.6.0, RdpAccountant(orders=<our default orders>,
// neighboring_relation=REPLACE_ONE) composing SelfComposedDpEvent(
// SampledWithoutReplacementDpEvent(n, m, GaussianDpEvent(z)), T), then
// get_epsilon_and_optimal_order(delta) / get_delta_and_optimal_order(epsilon).
// A resumed run: the RDP restored into a fresh accountant gives the same epsilon
// and goes on composing as the original does; a wrong size or a negative value is
// refused and changes nothing.
TEST(RdpAccountantTest, RestoredRdpContinuesTheOriginal) {
  RdpAccountant original;
  ASSERT_TRUE(original.Compose(0.01, 1.1, 500, Sampling::kPoisson).ok());
  RdpAccountant restored;
  ASSERT_TRUE(restored.RestoreRdp(original.rdp()).ok());
  ASSERT_TRUE(original.Compose(0.01, 1.1, 500, Sampling::kPoisson).ok());
  ASSERT_TRUE(restored.Compose(0.01, 1.1, 500, Sampling::kPoisson).ok());
  EXPECT_EQ(restored.Epsilon(1e-5)->epsilon, original.Epsilon(1e-5)->epsilon);
  std::vector<double> short_rdp(original.rdp().begin(), original.rdp().end() - 1);
  EXPECT_EQ(restored.RestoreRdp(short_rdp).code(), absl::StatusCode::kInvalidArgument);
  std::vector<double> negative = original.rdp();
  negative[3] = -1;
  EXPECT_EQ(restored.RestoreRdp(negative).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(restored.rdp(), original.rdp());
}

TEST(RdpAccountantTest, FixedSizeMatchesDpAccounting) {
  RdpAccountant accountant;  // n = 1000 clients, 10 per round, z = 1, 1000 rounds
  ASSERT_TRUE(accountant.Compose(10.0 / 1000, 1.0, 1000, Sampling::kFixedSize).ok());
  EpsilonAndOrder eps = *accountant.Epsilon(1e-5);
  EXPECT_NEAR(eps.epsilon, 3.576111482350549, 1e-9 * 3.6);
  EXPECT_EQ(eps.order, 6);
  DeltaAndOrder delta = *accountant.Delta(2.0);
  EXPECT_NEAR(delta.delta, 0.008030400242513294, 1e-9 * 0.008);
  EXPECT_EQ(delta.order, 4);

  RdpAccountant large_cohorts;  // n = 500, m = 50, z = 0.8, 200 rounds
  ASSERT_TRUE(large_cohorts.Compose(50.0 / 500, 0.8, 200, Sampling::kFixedSize).ok());
  eps = *large_cohorts.Epsilon(1e-6);
  EXPECT_NEAR(eps.epsilon, 30.655812164700322, 1e-9 * 30.7);
  EXPECT_EQ(eps.order, 2);
}

// Oracle as above with PoissonSampledDpEvent(0.01, GaussianDpEvent(1.0)) x 1000
// under ADD_OR_REMOVE_ONE: the same cohort fraction, noise and rounds.
TEST(RdpAccountantTest, PoissonMatchesDpAccountingWithDefaultOrders) {
  RdpAccountant accountant;
  ASSERT_TRUE(accountant.Compose(0.01, 1.0, 1000, Sampling::kPoisson).ok());
  EpsilonAndOrder eps = *accountant.Epsilon(1e-5);
  EXPECT_NEAR(eps.epsilon, 2.101366525420273, 1e-9 * 2.1);
  EXPECT_EQ(eps.order, 7.8);
  DeltaAndOrder delta = *accountant.Delta(2.0);
  EXPECT_NEAR(delta.delta, 1.9812564713985378e-05, 1e-9 * 2e-5);
  EXPECT_EQ(delta.order, 7.7);
}

TEST(RdpAccountantTest, RoundByRoundEqualsAllAtOnce) {
  for (Sampling sampling : {Sampling::kPoisson, Sampling::kFixedSize}) {
    RdpAccountant per_round;
    for (int round = 0; round < 20; ++round) {
      ASSERT_TRUE(per_round.Compose(0.02, 1.1, 1, sampling).ok());
    }
    RdpAccountant at_once;
    ASSERT_TRUE(at_once.Compose(0.02, 1.1, 20, sampling).ok());
    for (size_t i = 0; i < at_once.rdp().size(); ++i) {
      EXPECT_NEAR(per_round.rdp()[i], at_once.rdp()[i], 1e-12 * at_once.rdp()[i]);
    }
  }
}

TEST(RdpAccountantTest, HeterogeneousRoundsAdd) {
  RdpAccountant both;
  ASSERT_TRUE(both.Compose(0.01, 1.0, 10, Sampling::kPoisson).ok());
  ASSERT_TRUE(both.Compose(0.05, 2.0, 5, Sampling::kPoisson).ok());
  RdpAccountant first, second;
  ASSERT_TRUE(first.Compose(0.01, 1.0, 10, Sampling::kPoisson).ok());
  ASSERT_TRUE(second.Compose(0.05, 2.0, 5, Sampling::kPoisson).ok());
  for (size_t i = 0; i < both.rdp().size(); ++i) {
    EXPECT_DOUBLE_EQ(both.rdp()[i], first.rdp()[i] + second.rdp()[i]);
  }
}

TEST(RdpAccountantTest, EdgeCases) {
  RdpAccountant fresh;
  EXPECT_EQ(fresh.Epsilon(1e-5)->epsilon, 0);
  EXPECT_FALSE(fresh.sampling().has_value());

  RdpAccountant no_sampling;
  ASSERT_TRUE(no_sampling.Compose(0, 0, 100, Sampling::kPoisson).ok());
  EXPECT_EQ(no_sampling.Epsilon(1e-5)->epsilon, 0);

  for (Sampling sampling : {Sampling::kPoisson, Sampling::kFixedSize}) {
    RdpAccountant no_noise;
    ASSERT_TRUE(no_noise.Compose(0.01, 0, 1, sampling).ok());
    EXPECT_EQ(no_noise.Epsilon(1e-5)->epsilon, kInf);
    EXPECT_EQ(no_noise.Delta(100)->delta, 1);

    // q = 1 is the plain Gaussian mechanism, alpha / (2 z^2) per step.
    RdpAccountant everyone;
    ASSERT_TRUE(everyone.Compose(1, 2.0, 3, sampling).ok());
    for (size_t i = 0; i < everyone.orders().size(); ++i) {
      EXPECT_DOUBLE_EQ(everyone.rdp()[i], 3 * everyone.orders()[i] / 8);
    }

    // Zero steps change nothing, and do not fix the relation.
    RdpAccountant zero_steps;
    ASSERT_TRUE(zero_steps.Compose(0.5, 0, 0, sampling).ok());
    EXPECT_EQ(zero_steps.rdp(), std::vector<double>(kDefaultRdpOrders.size(), 0.0));
    EXPECT_FALSE(zero_steps.sampling().has_value());
  }
}

double EpsilonOf(double q, double z, int64_t steps, Sampling sampling) {
  RdpAccountant accountant;
  EXPECT_TRUE(accountant.Compose(q, z, steps, sampling).ok());
  return accountant.Epsilon(1e-5)->epsilon;
}

TEST(RdpAccountantTest, EpsilonFallsWithNoiseAndRisesWithStepsAndSamplingRate) {
  for (Sampling sampling : {Sampling::kPoisson, Sampling::kFixedSize}) {
    double last = kInf;
    for (double z : {0.6, 0.8, 1.0, 1.5, 3.0, 10.0}) {
      const double eps = EpsilonOf(0.01, z, 500, sampling);
      EXPECT_LT(eps, last) << "z " << z;
      last = eps;
    }
    last = 0;
    for (int64_t steps : {1, 10, 100, 1000, 10000}) {
      const double eps = EpsilonOf(0.01, 1.0, steps, sampling);
      EXPECT_GT(eps, last) << "steps " << steps;
      last = eps;
    }
    last = 0;
    for (double q : {0.001, 0.01, 0.05, 0.2, 1.0}) {
      const double eps = EpsilonOf(q, 1.0, 100, sampling);
      EXPECT_GT(eps, last) << "q " << q;
      last = eps;
    }
  }
}

TEST(RdpAccountantTest, RefusesBadInputNamingTheArgumentAndKeepsItsState) {
  RdpAccountant accountant;
  ASSERT_TRUE(accountant.Compose(0.01, 1.0, 10, Sampling::kPoisson).ok());
  const std::vector<double> before = accountant.rdp();
  const auto message = [](const absl::Status& status) { return std::string(status.message()); };

  EXPECT_EQ(message(accountant.Compose(1.5, 1.0, 1, Sampling::kPoisson)),
            "sampling_rate: must be in [0, 1], got 1.5");
  EXPECT_EQ(message(accountant.Compose(-0.1, 1.0, 1, Sampling::kPoisson)),
            "sampling_rate: must be in [0, 1], got -0.1");
  EXPECT_EQ(message(accountant.Compose(std::nan(""), 1.0, 1, Sampling::kPoisson)),
            "sampling_rate: must be in [0, 1], got nan");
  EXPECT_EQ(message(accountant.Compose(0.01, -1.0, 1, Sampling::kPoisson)),
            "noise_multiplier: must be finite and >= 0, got -1");
  EXPECT_EQ(message(accountant.Compose(0.01, kInf, 1, Sampling::kPoisson)),
            "noise_multiplier: must be finite and >= 0, got inf");
  EXPECT_EQ(message(accountant.Compose(0.01, 1.0, -3, Sampling::kPoisson)),
            "steps: must be >= 0, got -3");
  const absl::Status mixed = accountant.Compose(0.01, 1.0, 1, Sampling::kFixedSize);
  EXPECT_EQ(mixed.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(message(mixed),
            "sampling: this accountant already holds poisson steps (add/remove-one "
            "guarantee); fixed_size steps bound another neighbouring relation and cannot be "
            "added to it");
  EXPECT_EQ(accountant.rdp(), before);

  EXPECT_EQ(message(accountant.Epsilon(0).status()), "delta: must be in (0, 1), got 0");
  EXPECT_EQ(message(accountant.Delta(-1).status()), "epsilon: must be finite and >= 0, got -1");

  EXPECT_EQ(message(RdpAccountant::Create({2, 1}).status()),
            "orders[1]: must be in (1, 100000], got 1");
  EXPECT_EQ(message(RdpAccountant::Create({}).status()), "orders: must not be empty");
  EXPECT_EQ(message(RdpAccountant::Create({2, 1e6}).status()),
            "orders[1]: must be in (1, 100000], got 1e+06");
}

TEST(RdpAccountantTest, SamplingNamesParseBack) {
  for (Sampling sampling : {Sampling::kPoisson, Sampling::kFixedSize}) {
    EXPECT_EQ(*ParseSampling(SamplingName(sampling)), sampling);
  }
  EXPECT_EQ(ParseSampling("uniform").status().message(),
            "sampling: must be poisson or fixed_size, got \"uniform\"");
}

}  // namespace
}  // namespace fl::privacy
