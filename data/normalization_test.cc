#include "data/normalization.h"

#include <ATen/ATen.h>

#include "gtest/gtest.h"

namespace data {
namespace {

TEST(NormalizationTest, NormalisesEachChannelWithItsOwnConstants) {
  // One 3-channel 1x2 image: channel c holds {0, 255}, then 51 * (c + 1) in both.
  at::Tensor images = at::tensor({0, 255, 51, 51, 102, 102}, at::kByte).view({1, 3, 1, 2});
  at::Tensor x = BytesToInputs(images, kCifar10Stats, /*normalize=*/true);
  EXPECT_EQ(x.scalar_type(), at::kFloat);
  EXPECT_NEAR(x[0][0][0][0].item<float>(), (0.0 - 0.4914) / 0.2470, 1e-5);
  EXPECT_NEAR(x[0][0][0][1].item<float>(), (1.0 - 0.4914) / 0.2470, 1e-5);
  EXPECT_NEAR(x[0][1][0][0].item<float>(), (0.2 - 0.4822) / 0.2435, 1e-5);
  EXPECT_NEAR(x[0][2][0][1].item<float>(), (0.4 - 0.4465) / 0.2616, 1e-5);
}

TEST(NormalizationTest, WithoutNormalisingScalesToUnitInterval) {
  at::Tensor images = at::tensor({0, 51, 255}, at::kByte).view({1, 1, 1, 3});
  at::Tensor x = BytesToInputs(images, kMnistStats, /*normalize=*/false);
  EXPECT_FLOAT_EQ(x[0][0][0][1].item<float>(), 0.2f);
  EXPECT_FLOAT_EQ(x[0][0][0][2].item<float>(), 1.0f);
  // The input bytes are left alone.
  EXPECT_EQ(images[0][0][0][2].item<uint8_t>(), 255);
}

}  // namespace
}  // namespace data
