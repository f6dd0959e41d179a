#include <string>

#include <ATen/ATen.h>
#include <torch/utils.h>

#include "fl/model_state.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/common/model_test_util.h"
#include "models/resnet18_gn/resnet18_gn_options.pb.h"

namespace models {
namespace {

using fedkit::models::Resnet18GnOptions;
using ::testing::Contains;
using ::testing::IsEmpty;
using ::testing::SizeIs;

// CIFAR ResNet-18, 10 classes (a norm layer has 2 parameters per channel):
//   conv1 3*64*9 = 1,728, bn1 128
//   layer1: 2 x (2 * 64*64*9 + 2*128)                                      =   147,968
//   layer2: (64*128*9 + 128*128*9 + 2*256 + 64*128 + 256) + (2 * 128*128*9 + 2*256)
//           = 230,144 + 295,424                                            =   525,568
//   layer3: (128*256*9 + 256*256*9 + 2*512 + 128*256 + 512) + (2 * 256*256*9 + 2*512)
//           = 919,040 + 1,180,672                                          = 2,099,712
//   layer4: (256*512*9 + 512*512*9 + 2*1024 + 256*512 + 1024) + (2 * 512*512*9 + 2*1024)
//           = 3,673,088 + 4,720,640                                        = 8,393,728
//   linear 512*10+10 = 5,130
constexpr int64_t kResnet18 = 1728 + 128 + 147968 + 525568 + 2099712 + 8393728 + 5130;

TEST(Resnet18GnTest, ParameterCountAndNoBuffers) {
  static_assert(kResnet18 == 11173962);
  auto model = CreateModel("resnet18_gn", Resnet18GnOptions(), {3, 32, 32}, 10);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(fl::ModelState::FromModule(**model).NumParameters(), kResnet18);
  EXPECT_THAT(BufferNames(**model), IsEmpty());
}

TEST(Resnet18GnTest, BatchNormVariantHasBuffers) {
  Resnet18GnOptions options;
  options.set_norm(Resnet18GnOptions::BATCH_NORM);
  auto model = *CreateModel("resnet18_gn", options, {3, 32, 32}, 10);
  EXPECT_EQ(fl::ModelState::FromModule(*model).NumParameters(), kResnet18);
  // 1 + 8 * 2 + 3 projection norm layers, 3 buffers each.
  const std::vector<std::string> buffers = BufferNames(*model);
  EXPECT_THAT(buffers, SizeIs(20 * 3));
  EXPECT_THAT(buffers, Contains("layer4.0.shortcut.1.running_var"));
}

TEST(Resnet18GnTest, TrainStep) {
  torch::manual_seed(0);
  auto model = *CreateModel("resnet18_gn", Resnet18GnOptions(), {3, 32, 32}, 10);
  ExpectTrainStep(*model, at::randn({2, 3, 32, 32}), 10);
}

TEST(Resnet18GnTest, FedExpPoolingIsGlobalOnlyOnAThreeByThreeMap) {
  // The same weights under both poolings: a 17x17 image ends in a 3x3 map, where the
  // 3x3 window is the global mean; a 32x32 image ends in 4x4, where it is not.
  Resnet18GnOptions global_options;
  global_options.set_pool(Resnet18GnOptions::GLOBAL_AVERAGE);
  for (int64_t side : {17, 32}) {
    SCOPED_TRACE(side);
    torch::manual_seed(0);
    auto fedexp = *CreateModel("resnet18_gn", Resnet18GnOptions(), {3, side, side}, 10);
    auto global = *CreateModel("resnet18_gn", global_options, {3, side, side}, 10);
    ASSERT_TRUE(fl::ModelState::FromModule(*fedexp).LoadInto(*global).ok());
    at::Tensor x = at::randn({1, 3, side, side});
    EXPECT_EQ(at::allclose(fedexp->Forward(x), global->Forward(x), 1e-4, 1e-5), side == 17);
  }
}

TEST(Resnet18GnTest, ImageSizes) {
  EXPECT_TRUE(CreateModel("resnet18_gn", Resnet18GnOptions(), {3, 17, 40}, 10).ok());
  EXPECT_EQ(CreateModel("resnet18_gn", Resnet18GnOptions(), {3, 16, 41}, 10).status().message(),
            "input_shape: resnet18_gn with pool: FEDEXP_AVG3 needs height and width in [17, 40] "
            "(e.g. {3, 32, 32}), got {3, 16, 41}; pool: GLOBAL_AVERAGE takes any size");
  Resnet18GnOptions global;
  global.set_pool(Resnet18GnOptions::GLOBAL_AVERAGE);
  auto model = CreateModel("resnet18_gn", global, {3, 8, 8}, 10);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->Forward(at::randn({1, 3, 8, 8})).sizes(), (std::vector<int64_t>{1, 10}));
}

TEST(Resnet18GnTest, RejectsBadOptions) {
  Resnet18GnOptions options;
  options.set_groups(3);
  EXPECT_EQ(CreateModel("resnet18_gn", options, {3, 32, 32}, 1).status().message(),
            "options.groups: must be >= 1 and divide 64, got 3\n"
            "num_classes: needs a classification dataset (>= 2 classes), got 1");
  options.set_norm(Resnet18GnOptions::BATCH_NORM);
  EXPECT_EQ(CreateModel("resnet18_gn", options, {3, 32, 32}, 10).status().message(),
            "options.groups: only applies to norm: GROUP_NORM");
}

}  // namespace
}  // namespace models
