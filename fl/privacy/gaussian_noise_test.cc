#include "fl/privacy/gaussian_noise.h"

#include <cmath>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include "gtest/gtest.h"

namespace fl::privacy {
namespace {

TEST(GaussianNoiseTest, SecureNoiseIsBoxMullerOnTheChaChaKeystream) {
  // The all-zero key's keystream is RFC 8439's A.1 vector 1; its first 32 bytes,
  // read as four little-endian 64-bit words, give u1 = (w1 >> 11 + 1) 2^-53,
  // u2 = (w2 >> 11) 2^-53 and so on; the normals r cos(2 pi u2) of both pairs
  // come first, then the r sin(2 pi u2). Computed in Python's math module.
  GaussianNoise noise = GaussianNoise::SecureFromKey(secagg::Seed{});
  const at::Tensor drawn = noise.Like(at::zeros({4}, at::kDouble), 1.0);
  const double expected[] = {0.5788206274578319, 0.36552660580964913, 0.9012974658910811,
                             -2.0905540410649524};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(drawn[i].item<double>(), expected[i], 1e-12) << i;
}

TEST(GaussianNoiseTest, SecureNoiseIsStandardNormalInShapeAndDtype) {
  auto noise = GaussianNoise::Secure();
  ASSERT_TRUE(noise.ok()) << noise.status();
  EXPECT_FALSE(noise->reproducible());
  const at::Tensor drawn = noise->Like(at::zeros({400, 500}, at::kFloat), 2.0);
  EXPECT_EQ(drawn.sizes(), (std::vector<int64_t>{400, 500}));
  EXPECT_EQ(drawn.scalar_type(), at::kFloat);
  const at::Tensor z = drawn.to(at::kDouble) / 2.0;
  const double n = 200000;
  // The draw is fresh each run, so each bound is 6 standard errors (odds of a
  // false failure 2e-9); a wrong transform misses by hundreds of them.
  EXPECT_NEAR(z.mean().item<double>(), 0.0, 6 / std::sqrt(n));
  EXPECT_NEAR(z.var().item<double>(), 1.0, 6 * std::sqrt(2 / n));
  const double within = (z.abs() < 1).to(at::kDouble).mean().item<double>();
  EXPECT_NEAR(within, 0.682689, 6 * std::sqrt(0.682689 * 0.317311 / n));
}

TEST(GaussianNoiseTest, EachSecureSourceDrawsItsOwnNoise) {
  // What the spec's seed was or which round it is does not enter: two sources
  // never agree, while the same key (a test's) repeats its stream.
  auto a = GaussianNoise::Secure();
  auto b = GaussianNoise::Secure();
  ASSERT_TRUE(a.ok() && b.ok());
  const at::Tensor like = at::zeros({1000}, at::kDouble);
  EXPECT_FALSE(a->Like(like, 1.0).equal(b->Like(like, 1.0)));
  secagg::Seed key{};
  key[0] = 7;
  EXPECT_TRUE(GaussianNoise::SecureFromKey(key).Like(like, 1.0).equal(
      GaussianNoise::SecureFromKey(key).Like(like, 1.0)));
}

TEST(GaussianNoiseTest, ReproducibleNoiseIsLibTorchsGeneratorUnderTheSeed) {
  GaussianNoise noise = GaussianNoise::Reproducible(42);
  EXPECT_TRUE(noise.reproducible());
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(42);
  at::Tensor expected = at::empty({3, 5}, at::kFloat);
  expected.normal_(0.0, 0.5, generator);
  EXPECT_TRUE(noise.Like(at::ones({3, 5}, at::kFloat), 0.5).equal(expected));
  at::Generator again = at::make_generator<at::CPUGeneratorImpl>(42);
  at::empty({3, 5}, at::kFloat).normal_(0.0, 0.5, again);
  EXPECT_DOUBLE_EQ(noise.Scalar(3.0),
                   at::empty({}, at::kDouble).normal_(0.0, 3.0, again).item<double>());
}

TEST(GaussianNoiseTest, ScalarsAndEmptyTensors) {
  GaussianNoise noise = GaussianNoise::SecureFromKey(secagg::Seed{});
  EXPECT_NEAR(noise.Scalar(2.0), 2 * 0.5788206274578319, 1e-12);
  EXPECT_EQ(noise.Like(at::zeros({0}, at::kFloat), 1.0).numel(), 0);
}

}  // namespace
}  // namespace fl::privacy
