#include <string>

#include <ATen/ATen.h>
#include <torch/utils.h>

#include "fl/model_state.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/common/model_test_util.h"
#include "models/resnet20/resnet20_options.pb.h"

namespace models {
namespace {

using fedkit::models::Resnet20Options;
using ::testing::Contains;
using ::testing::IsEmpty;
using ::testing::SizeIs;

// He et al.'s ResNet-20 on CIFAR-10, option A:
//   conv1 3*16*9 = 432, bn1 2*16 = 32
//   stage 1: 3 blocks x (2 * 16*16*9 + 2 * 2*16)                   = 3 * 4,672 = 14,016
//   stage 2: (16*32*9 + 32*32*9 + 2*64) + 2 x (2 * 32*32*9 + 2*64) = 13,952 + 37,120 = 51,072
//   stage 3: (32*64*9 + 64*64*9 + 2*128) + 2 x (2 * 64*64*9 + 2*128) = 55,552 + 147,968 = 203,520
//   linear 64*10+10 = 650
constexpr int64_t kOptionA = 432 + 32 + 14016 + 51072 + 203520 + 650;
// Option B adds two 1x1 projections with their norm: 16*32 + 2*32 and 32*64 + 2*64.
constexpr int64_t kOptionB = kOptionA + 576 + 2176;

TEST(Resnet20Test, ParameterCounts) {
  static_assert(kOptionA == 269722 && kOptionB == 272474);
  auto model = CreateModel("resnet20", Resnet20Options(), {3, 32, 32}, 10);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(fl::ModelState::FromModule(**model).NumParameters(), kOptionA);
  Resnet20Options projection;
  projection.set_shortcut(Resnet20Options::PROJECTION);
  EXPECT_EQ(fl::ModelState::FromModule(**CreateModel("resnet20", projection, {3, 32, 32}, 10))
                .NumParameters(),
            kOptionB);
  // CIFAR-100: linear 64*100+100 = 6,500.
  EXPECT_EQ(
      fl::ModelState::FromModule(**CreateModel("resnet20", Resnet20Options(), {3, 32, 32}, 100))
          .NumParameters(),
      kOptionA - 650 + 6500);
  // GroupNorm has as many affine parameters as BatchNorm.
  Resnet20Options group;
  group.set_norm(Resnet20Options::GROUP_NORM);
  EXPECT_EQ(fl::ModelState::FromModule(**CreateModel("resnet20", group, {3, 32, 32}, 10))
                .NumParameters(),
            kOptionA);
}

TEST(Resnet20Test, BatchNormStatisticsAreBuffers) {
  Resnet20Options projection;
  projection.set_shortcut(Resnet20Options::PROJECTION);
  auto model = *CreateModel("resnet20", projection, {3, 32, 32}, 10);
  const std::vector<std::string> buffers = BufferNames(*model);
  // 19 BatchNorm layers (stem + 2 per block) + 2 in the projections, 3 buffers each.
  EXPECT_THAT(buffers, SizeIs(21 * 3));
  EXPECT_THAT(buffers, Contains("bn1.running_mean"));
  EXPECT_THAT(buffers, Contains("layer3.2.bn2.running_var"));
  EXPECT_THAT(buffers, Contains("layer2.0.shortcut.1.num_batches_tracked"));
  for (const auto& p : model->named_parameters()) {
    EXPECT_EQ(p.key().find("running"), std::string::npos) << p.key();
  }
  Resnet20Options group;
  group.set_norm(Resnet20Options::GROUP_NORM);
  EXPECT_THAT(BufferNames(**CreateModel("resnet20", group, {3, 32, 32}, 10)), IsEmpty());
}

TEST(Resnet20Test, TrainStepUpdatesRunningStatistics) {
  torch::manual_seed(0);
  auto model = *CreateModel("resnet20", Resnet20Options(), {3, 32, 32}, 10);
  at::Tensor before = model->named_buffers()["bn1.running_mean"].clone();
  ExpectTrainStep(*model, at::randn({4, 3, 32, 32}), 10);
  EXPECT_FALSE(at::equal(before, model->named_buffers()["bn1.running_mean"]));
  EXPECT_EQ(model->named_buffers()["bn1.num_batches_tracked"].item<int64_t>(), 1);
}

TEST(Resnet20Test, WideGroupNormProjectionTrains) {
  torch::manual_seed(0);
  Resnet20Options options;
  options.set_shortcut(Resnet20Options::PROJECTION);
  options.set_norm(Resnet20Options::GROUP_NORM);
  options.set_groups(4);
  options.set_width(2);
  auto model = CreateModel("resnet20", options, {1, 28, 28}, 10);
  ASSERT_TRUE(model.ok()) << model.status();
  ExpectTrainStep(**model, at::randn({2, 1, 28, 28}), 10);
}

TEST(Resnet20Test, RejectsBadOptionsAndShapes) {
  Resnet20Options options;
  options.set_norm(Resnet20Options::GROUP_NORM);
  options.set_groups(3);
  EXPECT_EQ(CreateModel("resnet20", options, {32, 32}, 10).status().message(),
            "options.groups: must be >= 1 and divide 16 * width = 16, got 3\n"
            "input_shape: must be {channels, height, width} (e.g. {3, 32, 32}), got {32, 32}");
  Resnet20Options batch;
  batch.set_groups(2);
  batch.set_width(0);
  EXPECT_EQ(CreateModel("resnet20", batch, {3, 32, 32}, 10).status().message(),
            "options.width: must be >= 1, got 0\n"
            "options.groups: only applies to norm: GROUP_NORM");
}

}  // namespace
}  // namespace models
