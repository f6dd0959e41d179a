#include "fl/staleness.h"

#include <cmath>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fl {
namespace {

using ::testing::HasSubstr;

TEST(StalenessTest, ConstantCountsEveryUpdateFully) {
  Staleness constant;
  EXPECT_EQ(constant.Weight(0), 1.0);
  EXPECT_EQ(constant.Weight(1000), 1.0);
}

TEST(StalenessTest, PolynomialByHand) {
  // FedBuff's 1 / sqrt(1 + tau): 1, 1/sqrt(2) = 0.707107, 1/2, 1/sqrt(10) = 0.316228.
  Staleness polynomial{Staleness::Kind::kPolynomial, 0.5};
  EXPECT_DOUBLE_EQ(polynomial.Weight(0), 1.0);
  EXPECT_NEAR(polynomial.Weight(1), 0.7071067811865476, 1e-15);
  EXPECT_DOUBLE_EQ(polynomial.Weight(3), 0.5);
  EXPECT_NEAR(polynomial.Weight(9), 0.31622776601683794, 1e-15);
  // a = 2: (1 + 4)^-2 = 0.04.
  EXPECT_NEAR((Staleness{Staleness::Kind::kPolynomial, 2.0}.Weight(4)), 0.04, 1e-15);
}

TEST(StalenessTest, HingeByHand) {
  // a = 10, b = 4 (FedAsync's hinge): full weight up to 4 versions, then
  // 1 / (10 (tau - 4) + 1): tau 5 -> 1/11, tau 7 -> 1/31.
  Staleness hinge{Staleness::Kind::kHinge, 10.0, 4};
  EXPECT_EQ(hinge.Weight(0), 1.0);
  EXPECT_EQ(hinge.Weight(4), 1.0);
  EXPECT_DOUBLE_EQ(hinge.Weight(5), 1.0 / 11.0);
  EXPECT_DOUBLE_EQ(hinge.Weight(7), 1.0 / 31.0);
}

TEST(StalenessTest, BeyondMaxStalenessAnUpdateIsDropped) {
  Staleness polynomial{Staleness::Kind::kPolynomial, 0.5, 0, 3};
  EXPECT_FALSE(polynomial.Drops(3));
  EXPECT_DOUBLE_EQ(polynomial.Weight(3), 0.5);
  EXPECT_TRUE(polynomial.Drops(4));
  EXPECT_EQ(polynomial.Weight(4), 0.0);
}

TEST(StalenessTest, CheckNamesTheOption) {
  Staleness negative{Staleness::Kind::kPolynomial, -1.0};
  EXPECT_THAT(negative.Check("server.async.staleness").message(),
              HasSubstr("server.async.staleness.exponent: must be >= 0, got -1"));
  Staleness knee{Staleness::Kind::kHinge, 1.0, -2};
  EXPECT_THAT(knee.Check("s").message(), HasSubstr("s.knee: must be >= 0, got -2"));
  Staleness cap{Staleness::Kind::kConstant, 0.0, 0, -1};
  EXPECT_THAT(cap.Check("s").message(), HasSubstr("s.max_staleness: must be >= 0, got -1"));
  EXPECT_TRUE((Staleness{Staleness::Kind::kHinge, 10.0, 4, 20}.Check("s").ok()));
}

TEST(StalenessTest, FromTheSpec) {
  fedkit::StalenessSpec spec;
  EXPECT_EQ(StalenessFromSpec(spec).Weight(9), 1.0);  // constant by default
  EXPECT_FALSE(StalenessFromSpec(spec).max_staleness.has_value());
  spec.set_kind(fedkit::StalenessSpec::HINGE);
  spec.set_exponent(10.0);
  spec.set_knee(4);
  spec.set_max_staleness(6);
  const Staleness hinge = StalenessFromSpec(spec);
  EXPECT_DOUBLE_EQ(hinge.Weight(5), 1.0 / 11.0);
  EXPECT_TRUE(hinge.Drops(7));
  spec.set_kind(fedkit::StalenessSpec::POLYNOMIAL);
  spec.set_exponent(0.5);
  EXPECT_DOUBLE_EQ(StalenessFromSpec(spec).Weight(3), 0.5);
}

}  // namespace
}  // namespace fl
