#include <ATen/ATen.h>
#include <torch/utils.h>

#include "fl/model_state.h"
#include "gtest/gtest.h"
#include "models/cnn_emnist/cnn_emnist_options.pb.h"
#include "models/common/model_test_util.h"

namespace models {
namespace {

fedkit::models::CnnEmnistOptions Options(int hidden) {
  fedkit::models::CnnEmnistOptions options;
  options.set_hidden(hidden);
  return options;
}

TEST(CnnEmnistTest, ParameterCountIsFedAvgs) {
  // conv1 1*32*25+32 = 832, conv2 32*64*25+64 = 51,264, fc1 (64*7*7)*512+512 =
  // 1,606,144, fc2 512*10+10 = 5,130: the 1,663,370 of McMahan et al. 2017.
  auto model = CreateModel("cnn_emnist", fedkit::models::CnnEmnistOptions(), {1, 28, 28}, 10);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(fl::ModelState::FromModule(**model).NumParameters(), 1663370);
  EXPECT_TRUE(BufferNames(**model).empty());
  // EMNIST's 62 classes: fc2 512*62+62 = 31,806.
  EXPECT_EQ(fl::ModelState::FromModule(
                **CreateModel("cnn_emnist", fedkit::models::CnnEmnistOptions(), {1, 28, 28}, 62))
                .NumParameters(),
            832 + 51264 + 1606144 + 31806);
  // LEAF's FEMNIST width: fc1 3136*2048+2048, fc2 2048*62+62.
  EXPECT_EQ(fl::ModelState::FromModule(**CreateModel("cnn_emnist", Options(2048), {1, 28, 28}, 62))
                .NumParameters(),
            832 + 51264 + 3136 * 2048 + 2048 + 2048 * 62 + 62);
}

TEST(CnnEmnistTest, UnpaddedIsPfllibsFedAvgCnn) {
  // 28 -> 24 -> 12 -> 8 -> 4: fc1 (64*4*4)*512+512 = 524,800 beside conv1 832, conv2
  // 51,264 and fc2 5,130.
  fedkit::models::CnnEmnistOptions options;
  options.set_padding(fedkit::models::CnnEmnistOptions::VALID);
  auto model = CreateModel("cnn_emnist", options, {1, 28, 28}, 10);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(fl::ModelState::FromModule(**model).NumParameters(), 582026);
  torch::manual_seed(0);
  ExpectTrainStep(**model, at::randn({2, 1, 28, 28}), 10);
  // 16 -> 12 -> 6 -> 2 -> 1 is the smallest input; 15 leaves nothing.
  EXPECT_TRUE(CreateModel("cnn_emnist", options, {1, 16, 16}, 10).ok());
  EXPECT_EQ(CreateModel("cnn_emnist", options, {1, 15, 16}, 10).status().message(),
            "input_shape: cnn_emnist needs height and width >= 16 (e.g. {1, 28, 28}), got {1, 15, 16}");
}

TEST(CnnEmnistTest, TrainStep) {
  torch::manual_seed(0);
  auto model = *CreateModel("cnn_emnist", Options(16), {1, 28, 28}, 10);
  ExpectTrainStep(*model, at::randn({3, 1, 28, 28}), 10);
}

TEST(CnnEmnistTest, TakesOtherImageSizes) {
  torch::manual_seed(0);
  auto model = CreateModel("cnn_emnist", Options(16), {3, 32, 30}, 10);
  ASSERT_TRUE(model.ok()) << model.status();
  ExpectTrainStep(**model, at::randn({2, 3, 32, 30}), 10);
}

TEST(CnnEmnistTest, RejectsBadOptionsAndShapes) {
  EXPECT_EQ(CreateModel("cnn_emnist", Options(0), {784}, 10).status().message(),
            "options.hidden: must be >= 1, got 0\n"
            "input_shape: must be {channels, height, width} (e.g. {1, 28, 28}), got {784}");
  EXPECT_EQ(CreateModel("cnn_emnist", Options(8), {1, 3, 28}, 1).status().message(),
            "input_shape: cnn_emnist needs height and width >= 4 (e.g. {1, 28, 28}), got {1, 3, 28}\n"
            "num_classes: needs a classification dataset (>= 2 classes), got 1");
}

}  // namespace
}  // namespace models
