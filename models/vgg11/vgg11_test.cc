#include <cmath>
#include <string>

#include <ATen/ATen.h>
#include <torch/utils.h>

#include "fl/model_state.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/common/model_test_util.h"
#include "models/vgg11/vgg11_options.pb.h"

namespace models {
namespace {

using fedkit::models::Vgg11Options;
using ::testing::Contains;
using ::testing::IsEmpty;
using ::testing::SizeIs;

// VGG-11 convolutions, weights 3*3*in*out + out biases:
//   3->64 1,792; 64->128 73,856; 128->256 295,168; 256->256 590,080;
//   256->512 1,180,160; 3 x 512->512 3 x 2,359,808 = 7,079,424      -> 9,220,480
// head: 2 x (512*512+512) = 525,312, 512*10+10 = 5,130               ->   530,442
constexpr int64_t kVgg11 = 9220480 + 530442;
// VGG11*: 3->32 896; 32->64 18,496; 64->128 73,856; 5 x 128->128 5 x 147,584 = 737,920
//   -> 831,168; head 2 x (128*128+128) = 33,024, 128*10+10 = 1,290    -> 34,314
constexpr int64_t kVgg11Simplified = 831168 + 34314;

Vgg11Options Options(Vgg11Options::Variant variant, bool batch_norm) {
  Vgg11Options options;
  options.set_variant(variant);
  options.set_batch_norm(batch_norm);
  return options;
}

TEST(Vgg11Test, ParameterCounts) {
  static_assert(kVgg11 == 9750922 && kVgg11Simplified == 865482);
  auto model = CreateModel("vgg11", Vgg11Options(), {3, 32, 32}, 10);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(fl::ModelState::FromModule(**model).NumParameters(), kVgg11);
  EXPECT_THAT(BufferNames(**model), IsEmpty());
  EXPECT_EQ(fl::ModelState::FromModule(
                **CreateModel("vgg11", Options(Vgg11Options::VGG11_SIMPLIFIED, false),
                              {3, 32, 32}, 10))
                .NumParameters(),
            kVgg11Simplified);
  // CIFAR-100: the last layer grows by 512 * 90 + 90.
  EXPECT_EQ(fl::ModelState::FromModule(**CreateModel("vgg11", Vgg11Options(), {3, 32, 32}, 100))
                .NumParameters(),
            kVgg11 + 512 * 90 + 90);
}

TEST(Vgg11Test, BatchNormAddsAffineParametersAndBuffers) {
  auto model =
      *CreateModel("vgg11", Options(Vgg11Options::VGG11, true), {3, 32, 32}, 10);
  // 2 per channel over 64 + 128 + 256 + 256 + 4 * 512 = 2,752 channels.
  EXPECT_EQ(fl::ModelState::FromModule(*model).NumParameters(), kVgg11 + 2 * 2752);
  const std::vector<std::string> buffers = BufferNames(*model);
  EXPECT_THAT(buffers, SizeIs(8 * 3));
  // features: conv 0, bn 1, relu 2, pool 3, conv 4, bn 5, ...
  EXPECT_THAT(buffers, Contains("features.1.running_mean"));
  EXPECT_THAT(buffers, Contains("features.5.running_var"));
}

TEST(Vgg11Test, ConvolutionInitialisation) {
  torch::manual_seed(0);
  auto model = *CreateModel("vgg11", Vgg11Options(), {3, 32, 32}, 10);
  const auto params = model->named_parameters();
  // The last convolution is features.18 (8 conv + 8 ReLU + 5 pool modules, the last
  // two after it): 512 * 512 * 9 draws from N(0, 2 / (9 * 512)).
  at::Tensor w = params["features.18.weight"];
  ASSERT_EQ(w.sizes(), (std::vector<int64_t>{512, 512, 3, 3}));
  EXPECT_NEAR(w.std().item<double>(), std::sqrt(2.0 / (9 * 512)), 1e-3);
  EXPECT_EQ(params["features.18.bias"].abs().sum().item<double>(), 0.0);
}

TEST(Vgg11Test, TrainStep) {
  torch::manual_seed(0);
  auto model = *CreateModel("vgg11", Options(Vgg11Options::VGG11_SIMPLIFIED, true),
                            {3, 32, 32}, 10);
  ExpectTrainStep(*model, at::randn({2, 3, 32, 32}), 10);
}

TEST(Vgg11Test, RejectsSmallImages) {
  EXPECT_EQ(CreateModel("vgg11", Vgg11Options(), {1, 28, 28}, 10).status().message(),
            "input_shape: vgg11 needs height and width >= 32 (e.g. {3, 32, 32}), got {1, 28, 28}");
  EXPECT_EQ(CreateModel("vgg11", Vgg11Options(), {3, 32}, 10).status().message(),
            "input_shape: must be {channels, height, width} (e.g. {3, 32, 32}), got {3, 32}");
}

}  // namespace
}  // namespace models
