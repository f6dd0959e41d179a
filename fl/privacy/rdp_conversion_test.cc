#include "fl/privacy/rdp_conversion.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace fl::privacy {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

std::vector<double> Range(int from, int to) {
  std::vector<double> values;
  for (int i = from; i < to; ++i) values.push_back(i);
  return values;
}

// dp_accounting's test_compute_epsilon_delta_pure_dp: constant RDP 1.1 at orders
// 2..32 is pure DP; "epsilon computed by hand" 1.32783806176 at order 32, and back.
TEST(RdpConversionTest, CksMatchesDpAccountingPureDpExample) {
  const std::vector<double> orders = Range(2, 33);
  const std::vector<double> rdp(orders.size(), 1.1);
  const absl::StatusOr<EpsilonAndOrder> eps = EpsilonFromRdp(orders, rdp, 1e-5);
  ASSERT_TRUE(eps.ok()) << eps.status();
  EXPECT_NEAR(eps->epsilon, 1.32783806176, 1e-10);
  EXPECT_EQ(eps->order, 32);
  const absl::StatusOr<DeltaAndOrder> delta = DeltaFromRdp(orders, rdp, 1.32783806176);
  ASSERT_TRUE(delta.ok()) << delta.status();
  EXPECT_NEAR(delta->delta, 1e-5, 1e-9 * 1e-5);  // the epsilon has 12 digits
  EXPECT_EQ(delta->order, 32);
}

// Mironov's bound on the same input: 1.1 - log(1e-5) / 31 at order 32, and its
// inverse exp(31 (1.1 - epsilon)).
TEST(RdpConversionTest, ClassicIsMironovsBound) {
  const std::vector<double> orders = Range(2, 33);
  const std::vector<double> rdp(orders.size(), 1.1);
  const absl::StatusOr<EpsilonAndOrder> eps =
      EpsilonFromRdp(orders, rdp, 1e-5, Conversion::kClassic);
  ASSERT_TRUE(eps.ok()) << eps.status();
  EXPECT_NEAR(eps->epsilon, 1.4713846924183946, 1e-12);
  EXPECT_EQ(eps->order, 32);
  const absl::StatusOr<DeltaAndOrder> delta =
      DeltaFromRdp(orders, rdp, 1.4713846924183946, Conversion::kClassic);
  ASSERT_TRUE(delta.ok()) << delta.status();
  EXPECT_NEAR(delta->delta, 1e-5, 1e-15);
}

TEST(RdpConversionTest, CksIsTighterThanClassicAboveOrder1_01) {
  const std::vector<double> orders = {1.5, 2, 4, 8, 16, 32};
  const std::vector<double> rdp = {0.01, 0.02, 0.05, 0.2, 0.7, 2.0};
  for (double delta : {1e-3, 1e-5, 1e-9}) {
    const double cks = EpsilonFromRdp(orders, rdp, delta, Conversion::kCks)->epsilon;
    const double classic = EpsilonFromRdp(orders, rdp, delta, Conversion::kClassic)->epsilon;
    EXPECT_LT(cks, classic) << delta;
  }
}

// Below order 1.01 the CKS bound is not used (dp_accounting: unstable as
// alpha -> 1); the classic one is.
TEST(RdpConversionTest, CksSkipsOrdersUpTo1_01) {
  const std::vector<double> orders = {1.005};
  const std::vector<double> rdp = {0.5};
  EXPECT_EQ(EpsilonFromRdp(orders, rdp, 1e-5, Conversion::kCks)->epsilon, kInf);
  EXPECT_NEAR(EpsilonFromRdp(orders, rdp, 1e-5, Conversion::kClassic)->epsilon,
              0.5 - std::log(1e-5) / 0.005, 1e-9);
}

// delta^2 + expm1(-r) > 0: the KL bound already gives epsilon 0.
TEST(RdpConversionTest, TinyRdpGivesEpsilonZeroThroughTheKlBound) {
  const std::vector<double> orders = {2, 3};
  const std::vector<double> rdp = {1e-12, 2e-12};
  const absl::StatusOr<EpsilonAndOrder> eps = EpsilonFromRdp(orders, rdp, 1e-5);
  ASSERT_TRUE(eps.ok());
  EXPECT_EQ(eps->epsilon, 0);
  EXPECT_EQ(eps->order, 2);  // the first of the tied orders
}

TEST(RdpConversionTest, NoRdpGivesZeroAndUnboundedRdpGivesInfinity) {
  const std::vector<double> orders = {1.5, 2, 3};
  const std::vector<double> zero(3, 0.0);
  const std::vector<double> inf(3, kInf);
  for (Conversion conversion : {Conversion::kCks, Conversion::kClassic}) {
    EXPECT_EQ(EpsilonFromRdp(orders, zero, 1e-5, conversion)->epsilon,
              conversion == Conversion::kCks ? 0 : -std::log(1e-5) / 2);
    // CKS's KL bound knows zero RDP leaks nothing; Mironov's formula does not:
    // exp((3 - 1)(0 - 0.5)) at order 3.
    EXPECT_DOUBLE_EQ(DeltaFromRdp(orders, zero, 0.5, conversion)->delta,
                     conversion == Conversion::kCks ? 0 : std::exp(-1.0));
    const EpsilonAndOrder unbounded = *EpsilonFromRdp(orders, inf, 1e-5, conversion);
    EXPECT_EQ(unbounded.epsilon, kInf);
    EXPECT_EQ(unbounded.order, 1.5);
    EXPECT_EQ(DeltaFromRdp(orders, inf, 10, conversion)->delta, 1);
  }
}

// Epsilon then delta round-trips wherever epsilon is positive and finite
// (dp_accounting's test_epsilon_delta_consistency, for both conversions).
TEST(RdpConversionTest, DeltaInvertsEpsilon) {
  const std::vector<double> orders = Range(2, 50);
  for (double scale : {1e-3, 0.1, 1.0, 30.0}) {
    std::vector<double> rdp;
    for (double order : orders) rdp.push_back(scale * order);
    for (Conversion conversion : {Conversion::kCks, Conversion::kClassic}) {
      for (double delta : {0.1, 1e-3, 1e-5, 1e-9, 1e-12}) {
        const EpsilonAndOrder eps = *EpsilonFromRdp(orders, rdp, delta, conversion);
        if (eps.epsilon == 0) continue;
        EXPECT_NEAR(DeltaFromRdp(orders, rdp, eps.epsilon, conversion)->delta, delta,
                    1e-9 * delta)
            << "scale " << scale << " delta " << delta;
      }
    }
  }
}

TEST(RdpConversionTest, RefusesBadInputNamingTheArgument) {
  const std::vector<double> orders = {2, 3};
  const std::vector<double> rdp = {0.1, 0.2};
  const auto message = [](const absl::Status& status) { return std::string(status.message()); };

  EXPECT_EQ(message(EpsilonFromRdp(orders, rdp, 0).status()), "delta: must be in (0, 1), got 0");
  EXPECT_EQ(message(EpsilonFromRdp(orders, rdp, 1).status()), "delta: must be in (0, 1), got 1");
  EXPECT_EQ(message(EpsilonFromRdp(orders, rdp, std::nan("")).status()),
            "delta: must be in (0, 1), got nan");
  EXPECT_EQ(message(EpsilonFromRdp(orders, {0.1}, 1e-5).status()),
            "rdp: must have one value per order (2), got 1");
  EXPECT_EQ(message(EpsilonFromRdp({}, {}, 1e-5).status()), "orders: must not be empty");
  EXPECT_EQ(message(EpsilonFromRdp({2, 0.5}, rdp, 1e-5).status()),
            "orders[1]: must be >= 1, got 0.5");
  EXPECT_EQ(message(EpsilonFromRdp(orders, {0.1, std::nan("")}, 1e-5).status()),
            "rdp[1]: must not be NaN");
  EXPECT_EQ(message(DeltaFromRdp(orders, rdp, -1).status()),
            "epsilon: must be finite and >= 0, got -1");
  EXPECT_EQ(EpsilonFromRdp(orders, rdp, 2).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(RdpConversionTest, NamesParseBack) {
  for (Conversion conversion : {Conversion::kCks, Conversion::kClassic}) {
    EXPECT_EQ(*ParseConversion(ConversionName(conversion)), conversion);
  }
  EXPECT_EQ(ParseConversion("mironov").status().message(),
            "conversion: must be cks or classic, got \"mironov\"");
}

}  // namespace
}  // namespace fl::privacy
