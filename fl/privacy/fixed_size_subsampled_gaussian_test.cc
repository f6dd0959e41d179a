#include "fl/privacy/fixed_size_subsampled_gaussian.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "fl/privacy/poisson_subsampled_gaussian.h"
#include "gtest/gtest.h"

namespace fl::privacy {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// One step's RDP; orders 2 to 256 take the exact bound, 512 the O(alpha) one, and
// the fractional ones interpolate. Oracle: dp_accounting 0.6.0,
// rdp_privacy_accountant._compute_rdp_sample_wor_gaussian(q, z, orders).
TEST(FixedSizeSubsampledGaussianTest, MatchesDpAccountingAtManyOrders) {
  const std::vector<double> orders = {1.5,  2.0,  2.5,   3.0,   7.0,  10.3,
                                      20.0, 63.0, 128.0, 256.0, 512.0};
  const struct {
    double q, z;
    std::vector<double> rdp;
  } kCases[] = {
      {0.01, 1.0, {0.0005435086381094331, 0.0005435086381094331, 0.0007377513360060864,
                   0.0008348726849544131, 0.002197092036787071, 0.21001864021642175,
                   5.188934456131071, 26.831732668763067, 59.3640264832605,
                   123.37948854732396, 251.38717419169208}},
      {0.1, 0.7, {0.14318026386656316, 0.14318026386656316, 0.3358870372596872,
                  0.43224042395624923, 4.572088562871322, 8.05760270750144, 18.020870913762916,
                  61.95717051671325, 128.29698706549715, 258.9155931816991, 520.1432449138869}},
      {0.5, 2.0, {0.24999999999999997, 0.24999999999999997, 0.32711035468571953,
                  0.3656655320285793, 0.5827815166795515, 0.7975630925491861,
                  1.8258214183828405, 7.181853196504623, 15.306852819440087,
                  31.306852819440056, 63.30685281944005}},
  };
  for (const auto& c : kCases) {
    for (size_t i = 0; i < orders.size(); ++i) {
      const double expected = c.rdp[i];
      EXPECT_NEAR(FixedSizeSubsampledGaussianRdp(c.q, c.z, orders[i]), expected,
                  1e-9 * expected)
          << "q " << c.q << " z " << c.z << " order " << orders[i];
    }
  }
}

// With much noise the exact bound is far below the simple one (at order 256 and
// z = 10: 0.00056 against 0.0103), which pins where one hands over to the other.
// Oracle as above.
TEST(FixedSizeSubsampledGaussianTest, MatchesDpAccountingWithMuchNoise) {
  const std::vector<double> orders = {2.0, 3.0, 10.0, 63.0, 128.0, 200.5, 256.0};
  const struct {
    double q, z;
    std::vector<double> rdp;
  } kCases[] = {
      {0.01, 10.0, {4.020058753220231e-06, 6.0336472273183984e-06, 2.0194354740742122e-05,
                    0.00013081682111666727, 0.000272905232510728, 0.00043567618790875206,
                    0.0005601985590310507}},
      {0.001, 20.0, {1.001251037305533e-08, 1.501920212767116e-08, 5.007418843664066e-08,
                     3.159511531199277e-07, 6.431286188379511e-07, 1.0094776507258558e-06,
                     1.2909070970008439e-06}},
  };
  for (const auto& c : kCases) {
    for (size_t i = 0; i < orders.size(); ++i) {
      const double expected = c.rdp[i];
      EXPECT_NEAR(FixedSizeSubsampledGaussianRdp(c.q, c.z, orders[i]), expected,
                  1e-9 * expected)
          << "q " << c.q << " z " << c.z << " order " << orders[i];
    }
  }
}

// The differences of exp(cgf) in the bound are all positive, so the sign
// bookkeeping is checked on a sequence whose differences are not: 1, 1, e^-1,
// e^-2, e^-3, against the differences taken directly.
TEST(FixedSizeSubsampledGaussianTest, ForwardDifferencesKeepTheirSigns) {
  const std::vector<double> log_values = {0, 0, -1, -2, -3};
  std::vector<double> values;
  for (double v : log_values) values.push_back(std::exp(v));
  const std::vector<SignedLog> differences = internal::LogForwardDifferences(log_values);
  ASSERT_EQ(differences.size(), 4u);
  for (size_t k = 1; k < values.size(); ++k) {
    for (size_t j = 0; j + k < values.size(); ++j) values[j] = values[j + 1] - values[j];
    const SignedLog& got = differences[k - 1];
    if (values[0] == 0) {
      EXPECT_EQ(got.log_magnitude, -kInf) << "order " << k;
      continue;
    }
    EXPECT_EQ(got.positive, values[0] > 0) << "order " << k;
    EXPECT_NEAR(got.log_magnitude, std::log(std::abs(values[0])), 1e-12) << "order " << k;
  }
}

// Between integers the CGF (alpha - 1) RDP is linear (the interpolation of
// Wang et al.'s Corollary 10, as dp_accounting applies it).
TEST(FixedSizeSubsampledGaussianTest, FractionalOrdersInterpolateTheCgf) {
  const double q = 0.02, z = 1.3;
  const double cgf5 = 4 * FixedSizeSubsampledGaussianRdp(q, z, 5);
  const double cgf6 = 5 * FixedSizeSubsampledGaussianRdp(q, z, 6);
  EXPECT_NEAR(4.25 * FixedSizeSubsampledGaussianRdp(q, z, 5.25), 0.75 * cgf5 + 0.25 * cgf6,
              1e-14);
  EXPECT_NEAR(internal::FixedSizeCgfInt(q, z, 5), cgf5, 1e-15);
  EXPECT_EQ(internal::FixedSizeCgfInt(q, z, 1), 0);
}

TEST(FixedSizeSubsampledGaussianTest, EdgeCases) {
  EXPECT_EQ(FixedSizeSubsampledGaussianRdp(0, 1.0, 3.0), 0);
  EXPECT_EQ(FixedSizeSubsampledGaussianRdp(0, 0, 3.5), 0);
  EXPECT_EQ(FixedSizeSubsampledGaussianRdp(0.1, 0, 3.0), kInf);
  for (double order : {1.5, 2.0, 7.3, 64.0}) {
    EXPECT_DOUBLE_EQ(FixedSizeSubsampledGaussianRdp(1.0, 1.7, order), order / (2 * 1.7 * 1.7));
  }
}

TEST(FixedSizeSubsampledGaussianTest, GrowsWithSamplingRateAndFallsWithNoise) {
  for (double order : {1.5, 2.0, 4.5, 16.0, 128.0, 512.0}) {
    EXPECT_LT(FixedSizeSubsampledGaussianRdp(0.01, 1.0, order),
              FixedSizeSubsampledGaussianRdp(0.02, 1.0, order))
        << order;
    EXPECT_GT(FixedSizeSubsampledGaussianRdp(0.01, 1.0, order),
              FixedSizeSubsampledGaussianRdp(0.01, 1.1, order))
        << order;
  }
}

// The subsampling helps: below the plain Gaussian at every order.
TEST(FixedSizeSubsampledGaussianTest, NeverAboveThePlainGaussian) {
  for (double order : {1.5, 2.0, 3.0, 10.0, 63.0}) {
    EXPECT_LT(FixedSizeSubsampledGaussianRdp(0.05, 2.0, order),
              PoissonSubsampledGaussianRdp(1.0, 2.0, order))
        << order;
  }
}

}  // namespace
}  // namespace fl::privacy
