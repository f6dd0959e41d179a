#include "fl/privacy/log_space.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "gtest/gtest.h"

namespace fl::privacy {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(LogSpaceTest, LogAddAddsAndTreatsMinusInfinityAsZero) {
  EXPECT_NEAR(LogAdd(std::log(2.0), std::log(3.0)), std::log(5.0), 1e-15);
  EXPECT_EQ(LogAdd(-kInf, 1.5), 1.5);
  EXPECT_EQ(LogAdd(1.5, -kInf), 1.5);
  EXPECT_EQ(LogAdd(-kInf, -kInf), -kInf);
  // No overflow where exp() alone would overflow.
  EXPECT_NEAR(LogAdd(1000.0, 1000.0), 1000.0 + std::log(2.0), 1e-12);
}

TEST(LogSpaceTest, LogSubSignGivesSignAndMagnitude) {
  const SignedLog five_minus_two = LogSubSign(std::log(5.0), std::log(2.0));
  EXPECT_TRUE(five_minus_two.positive);
  EXPECT_NEAR(five_minus_two.log_magnitude, std::log(3.0), 1e-15);
  const SignedLog two_minus_five = LogSubSign(std::log(2.0), std::log(5.0));
  EXPECT_FALSE(two_minus_five.positive);
  EXPECT_NEAR(two_minus_five.log_magnitude, std::log(3.0), 1e-15);
  const SignedLog zero = LogSubSign(0.7, 0.7);
  EXPECT_TRUE(zero.positive);
  EXPECT_EQ(zero.log_magnitude, -kInf);
}

TEST(LogSpaceTest, LogCombIsTheBinomialCoefficient) {
  EXPECT_NEAR(LogComb(10, 3), std::log(120.0), 1e-13);
  EXPECT_NEAR(LogComb(7, 0), 0.0, 1e-14);
  // Non-integer n: C(2.5, 4) = 2.5 * 1.5 * 0.5 * (-0.5) / 24 = -0.0390625; the
  // magnitude is returned.
  EXPECT_NEAR(LogComb(2.5, 4), std::log(0.0390625), 1e-13);
}

// log(erfc(x)) from mpmath at 50 digits (mpmath 1.4.1: mp.log(mp.erfc(x))), on
// every branch: x < -3, the direct one, and the asymptotic series from 26 on.
TEST(LogSpaceTest, LogErfcMatchesMultiPrecisionValues) {
  const struct {
    double x;
    double log_erfc;
  } kCases[] = {
      {-10, 0.6931471805599453},     {-3.5, 0.6931468090106901},
      {-1, 0.6112323176780705},      {0, 0.0},
      {0.5, -0.7350111298370844},    {3, -10.720363041981113},
      {10, -102.87988902484489},     {25.9, -674.6373518953192},
      {26, -679.8311997631943},      {26.1, -685.0450329033094},
      {30, -903.9741171106439},      {100, -10005.177585122665},
      {1e4, -100000009.78270532},
  };
  for (const auto& c : kCases) {
    EXPECT_NEAR(LogErfc(c.x), c.log_erfc, 1e-13 * std::max(1.0, std::abs(c.log_erfc)))
        << "x = " << c.x;
  }
}

}  // namespace
}  // namespace fl::privacy
