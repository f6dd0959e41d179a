#include "fl/privacy/poisson_subsampled_gaussian.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace fl::privacy {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

void ExpectRelativelyNear(double actual, double expected, double tolerance,
                          const std::string& what) {
  if (std::isinf(expected)) {
    EXPECT_EQ(actual, expected) << what;
  } else {
    EXPECT_NEAR(actual, expected, tolerance * std::abs(expected)) << what;
  }
}

// dp_accounting's test_compute_rdp_poisson_sampled_gaussian
// (rdp/rdp_privacy_accountant_test.py): q = 0.01, sigma = 2.5, 50 steps. Its
// values have 9 significant digits, hence the tolerance.
TEST(PoissonSubsampledGaussianTest, MatchesDpAccountingPublishedValues) {
  const std::vector<double> orders = {1.5, 2.5, 5, 50, 100};
  const std::vector<double> expected = {6.70579741e-04, 1.08548710e-03, 2.18075656e-03,
                                        2.38460375e-02, 1.67416308e02};
  for (size_t i = 0; i < orders.size(); ++i) {
    ExpectRelativelyNear(50 * PoissonSubsampledGaussianRdp(0.01, 2.5, orders[i]), expected[i],
                         1e-8, "order " + std::to_string(orders[i]));
  }
}

// log(A_alpha) at the points dp_accounting checks against multi-precision
// arithmetic (test_compute_log_a_equals_mp): tiny and large q, sigma from 0.1 to
// 100, orders just above 1 and above 256. Oracle: dp_accounting 0.6.0,
// rdp_privacy_accountant._compute_log_a(q, sigma, order).
TEST(PoissonSubsampledGaussianTest, LogAMatchesDpAccounting) {
  const struct {
    double q, sigma, order, log_a;
  } kCases[] = {
      {1e-7, 0.1, 1.01, 4.0034136195371197e-08}, {1e-6, 0.1, 256, 3260463.2292971606},
      {1e-5, 0.1, 256.1, 3263607.039788421},     {1e-6, 1, 27, 8.769511303101142e-10},
      {1e-4, 1.0, 1.5, 6.445198025030585e-09},   {1e-3, 1.0, 2, 1.718280352214069e-06},
      {0.01, 10, 20, 0.00019129699912839754},    {0.1, 100, 20.5, 0.0001999181845791853},
      {0.99, 0.1, 256, 3263997.427114021},       {0.999, 100, 256.1, 3.260108037973145},
  };
  for (const auto& c : kCases) {
    const double log_a = c.order == std::floor(c.order)
                             ? internal::LogAInt(c.q, c.sigma, static_cast<int>(c.order))
                             : internal::LogAFrac(c.q, c.sigma, c.order);
    ExpectRelativelyNear(log_a, c.log_a, 1e-9,
                         "q " + std::to_string(c.q) + " order " + std::to_string(c.order));
  }
}

// One step's RDP at integer and fractional orders up to 512. Oracle: dp_accounting
// 0.6.0, rdp_privacy_accountant._compute_rdp_poisson_subsampled_gaussian(q, z, orders).
// At q = 0.5, z = 4 the fractional series for orders 1.1 and 1.5 does not converge
// in 1000 terms, and dp_accounting (like us) gives those orders +infinity.
TEST(PoissonSubsampledGaussianTest, MatchesDpAccountingAtManyOrders) {
  const std::vector<double> orders = {1.1, 1.5, 2.0, 3.7, 10.0, 10.5, 32, 63, 128, 256, 512};
  const struct {
    double q, z;
    std::vector<double> rdp;
  } kCases[] = {
      {0.1, 1.5, {0.004514929078485687, 0.005198554713449524, 0.0055806342296798525,
                  0.011456865133188113, 0.07542105395889256, 0.09782469540863424,
                  4.7342587279404205, 11.660276437773977, 26.12372876016698,
                  54.57727405043212, 111.47068664741975}},
      {0.001, 0.8, {2.0947982310711697e-06, 2.8436732035742298e-06, 3.7707260727706643e-06,
                    7.078818130076688e-06, 0.16626922163075425, 0.569108494612289,
                    17.869413905566823, 42.19957931329234, 93.0378529471676,
                    193.06515548462966, 393.0787266089258}},
      {0.5, 4.0, {kInf, kInf, 0.01599500979614632, 0.031408000429734156, 0.09147363021067612,
                  0.0969070669584139, 0.4447794819714108, 1.2862115443285287,
                  3.301755340825066, 7.304134715465523, 15.305496367031928}},
  };
  for (const auto& c : kCases) {
    for (size_t i = 0; i < orders.size(); ++i) {
      ExpectRelativelyNear(PoissonSubsampledGaussianRdp(c.q, c.z, orders[i]), c.rdp[i], 1e-9,
                           "q " + std::to_string(c.q) + " order " + std::to_string(orders[i]));
    }
  }
}

TEST(PoissonSubsampledGaussianTest, NoSamplingIsFreeEvenWithoutNoise) {
  EXPECT_EQ(PoissonSubsampledGaussianRdp(0, 1.0, 2.5), 0);
  EXPECT_EQ(PoissonSubsampledGaussianRdp(0, 0, 32), 0);
}

TEST(PoissonSubsampledGaussianTest, FullSamplingIsThePlainGaussian) {
  for (double order : {1.5, 2.0, 7.3, 64.0}) {
    EXPECT_DOUBLE_EQ(PoissonSubsampledGaussianRdp(1.0, 1.7, order), order / (2 * 1.7 * 1.7));
  }
}

TEST(PoissonSubsampledGaussianTest, NoNoiseIsUnbounded) {
  EXPECT_EQ(PoissonSubsampledGaussianRdp(0.01, 0, 2.0), kInf);
  EXPECT_EQ(PoissonSubsampledGaussianRdp(0.01, 0, 2.5), kInf);
}

// The integer formula is the fractional series' value at an integer order: the
// series converges to the same A_alpha, which pins the two-series code to the
// exact binomial sum.
TEST(PoissonSubsampledGaussianTest, FractionalSeriesAgreesWithIntegerSumNearIntegers) {
  for (int order : {2, 3, 8, 20}) {
    const double integer = internal::LogAInt(0.05, 1.2, order);
    const double fractional = internal::LogAFrac(0.05, 1.2, order + 1e-9);
    EXPECT_NEAR(fractional, integer, 1e-6 * integer) << "order " << order;
  }
}

TEST(PoissonSubsampledGaussianTest, GrowsWithSamplingRateAndFallsWithNoise) {
  for (double order : {1.5, 2.0, 4.5, 16.0, 128.0}) {
    EXPECT_LT(PoissonSubsampledGaussianRdp(0.01, 1.0, order),
              PoissonSubsampledGaussianRdp(0.02, 1.0, order))
        << order;
    EXPECT_GT(PoissonSubsampledGaussianRdp(0.01, 1.0, order),
              PoissonSubsampledGaussianRdp(0.01, 1.1, order))
        << order;
  }
}

TEST(PoissonSubsampledGaussianDeathTest, RefusesOrdersAtOrBelowOne) {
  EXPECT_DEATH(PoissonSubsampledGaussianRdp(0.1, 1.0, 1.0), "order");
}

}  // namespace
}  // namespace fl::privacy
