#include <ATen/ATen.h>
#include <torch/utils.h>

#include "fl/model_state.h"
#include "gtest/gtest.h"
#include "models/common/model_test_util.h"
#include "models/simple_cnn/simple_cnn_options.pb.h"

namespace models {
namespace {

using Options = fedkit::models::SimpleCnnOptions;

TEST(SimpleCnnTest, ParameterCountIsFedLaws) {
  // conv1 3*32*9+32 = 896, conv2 32*64*9+64 = 18,496, conv3 64*64*9+64 = 36,928,
  // fc1 (64*4*4)*64+64 = 65,600, fc2 64*10+10 = 650.
  auto model = CreateModel("simple_cnn", Options(), {3, 32, 32}, 10);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(fl::ModelState::FromModule(**model).NumParameters(), 122570);
  EXPECT_TRUE(BufferNames(**model).empty());
  // CIFAR-100: fc2 64*100+100 = 6,500.
  EXPECT_EQ(
      fl::ModelState::FromModule(**CreateModel("simple_cnn", Options(), {3, 32, 32}, 100))
          .NumParameters(),
      896 + 18496 + 36928 + 65600 + 6500);
  // 28x28 grey images: 26, 13, 11, 5, 3 -> fc1 (64*3*3)*64+64 = 36,928.
  EXPECT_EQ(
      fl::ModelState::FromModule(**CreateModel("simple_cnn", Options(), {1, 28, 28}, 10))
          .NumParameters(),
      320 + 18496 + 36928 + 36928 + 650);
}

TEST(SimpleCnnTest, TrainStep) {
  torch::manual_seed(0);
  auto model = *CreateModel("simple_cnn", Options(), {3, 32, 32}, 10);
  ExpectTrainStep(*model, at::randn({3, 3, 32, 32}), 10);
}

TEST(SimpleCnnTest, SmallestImage) {
  torch::manual_seed(0);
  auto model = CreateModel("simple_cnn", Options(), {3, 18, 18}, 10);
  ASSERT_TRUE(model.ok()) << model.status();
  ExpectTrainStep(**model, at::randn({2, 3, 18, 18}), 10);
  EXPECT_EQ(CreateModel("simple_cnn", Options(), {3, 17, 32}, 10).status().message(),
            "input_shape: simple_cnn needs height and width >= 18 (e.g. {3, 32, 32}), got "
            "{3, 17, 32}");
}

TEST(SimpleCnnTest, RejectsBadShapes) {
  EXPECT_EQ(CreateModel("simple_cnn", Options(), {3072}, 0).status().message(),
            "input_shape: must be {channels, height, width} (e.g. {3, 32, 32}), got {3072}\n"
            "num_classes: needs a classification dataset (>= 2 classes), got 0");
}

}  // namespace
}  // namespace models
