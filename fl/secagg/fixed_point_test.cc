#include "fl/secagg/fixed_point.h"

#include <cmath>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fl::secagg {
namespace {

TEST(FixedPointTest, TheScaleIsThePowerOfTwoThatCannotOverflow) {
  // 2^31 / 100 - 1 = 21474835.48; / bound 1 -> largest power of two 2^24.
  auto codec = FixedPoint::Create(1.0, 100);
  ASSERT_TRUE(codec.ok());
  EXPECT_EQ(codec->scale(), std::exp2(24));
  auto coarse = FixedPoint::Create(1000.0, 1000);
  ASSERT_TRUE(coarse.ok());
  EXPECT_EQ(coarse->scale(), std::exp2(11));  // 2^31 / 10^6 = 2147 -> 2048
  EXPECT_FALSE(FixedPoint::Create(1e6, 10000).ok()) << "10^10 does not fit 32 bits";
  EXPECT_FALSE(FixedPoint::Create(0, 10).ok());
  EXPECT_FALSE(FixedPoint::Create(1, 0).ok());
}

TEST(FixedPointTest, ASumOfEncodingsDecodesToTheSumWithinOneStepPerSummand) {
  auto codec = FixedPoint::Create(2.0, 50);
  ASSERT_TRUE(codec.ok());
  Prg randomness(SeedFrom(1, 1));
  std::vector<uint32_t> sum(3, 0);
  double expected[3] = {0, 0, 0};
  for (int k = 0; k < 50; ++k) {
    // Extremes included: every client at the bound in coordinate 0.
    const std::vector<double> values = {2.0, -1.0 + 0.037 * k, -2.0 + 0.0001 * k};
    for (int i = 0; i < 3; ++i) expected[i] += values[i];
    int64_t clipped = 0;
    const std::vector<uint32_t> encoded = codec->Encode(values, randomness, &clipped);
    EXPECT_EQ(clipped, 0);
    for (int i = 0; i < 3; ++i) sum[i] += encoded[i];
  }
  const std::vector<double> decoded = codec->DecodeSum(sum);
  for (int i = 0; i < 3; ++i) {
    EXPECT_NEAR(decoded[i], expected[i], 50 / codec->scale()) << i;
  }
}

TEST(FixedPointTest, StochasticRoundingIsUnbiased) {
  // 1/3 sits between two steps of a coarse code; the mean of 100000 decodings is
  // 1/3 within 4 standard errors (each rounding error has sd at most half a step).
  auto codec = FixedPoint::Create(1000.0, 1000);  // scale 2048
  ASSERT_TRUE(codec.ok());
  Prg randomness(SeedFrom(2, 2));
  std::vector<double> values(100000, 1.0 / 3.0);
  const std::vector<uint32_t> encoded = codec->Encode(values, randomness, nullptr);
  double mean = 0;
  for (uint32_t e : encoded) mean += codec->DecodeSum({e})[0];
  mean /= values.size();
  const double standard_error = 0.5 / codec->scale() / std::sqrt(100000.0);
  EXPECT_NEAR(mean, 1.0 / 3.0, 4 * standard_error);
  // Deterministic rounding down would sit a third of a step below.
  EXPECT_GT(std::abs(std::floor(1.0 / 3.0 * 2048) / 2048 - 1.0 / 3.0), 8 * standard_error);
}

TEST(FixedPointTest, ValuesBeyondTheBoundAreClippedAndCounted) {
  auto codec = FixedPoint::Create(1.0, 4);
  ASSERT_TRUE(codec.ok());
  Prg randomness(SeedFrom(3, 3));
  int64_t clipped = 0;
  const std::vector<uint32_t> encoded = codec->Encode({5.0, -7.0, 0.5}, randomness, &clipped);
  EXPECT_EQ(clipped, 2);
  EXPECT_DOUBLE_EQ(codec->DecodeSum({encoded[0]})[0], 1.0);
  EXPECT_DOUBLE_EQ(codec->DecodeSum({encoded[1]})[0], -1.0);
}

}  // namespace
}  // namespace fl::secagg
