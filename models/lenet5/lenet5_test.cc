#include <ATen/ATen.h>
#include <torch/utils.h>

#include "fl/model_state.h"
#include "gtest/gtest.h"
#include "models/common/model_test_util.h"
#include "models/lenet5/lenet5_options.pb.h"

namespace models {
namespace {

TEST(Lenet5Test, ParameterCountIsFedLaws) {
  // conv1 1*16*25+16 = 416, conv2 16*32*25+32 = 12,832, out (32*7*7)*10+10 = 15,690.
  auto model = CreateModel("lenet5", fedkit::models::Lenet5Options(), {1, 28, 28}, 10);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(fl::ModelState::FromModule(**model).NumParameters(), 28938);
  EXPECT_TRUE(BufferNames(**model).empty());
}

TEST(Lenet5Test, TrainStep) {
  torch::manual_seed(0);
  auto model = *CreateModel("lenet5", fedkit::models::Lenet5Options(), {1, 28, 28}, 10);
  ExpectTrainStep(*model, at::randn({3, 1, 28, 28}), 10);
}

TEST(Lenet5Test, RejectsBadShapes) {
  EXPECT_EQ(
      CreateModel("lenet5", fedkit::models::Lenet5Options(), {28, 28}, 10).status().message(),
      "input_shape: must be {channels, height, width} (e.g. {1, 28, 28}), got {28, 28}");
  EXPECT_EQ(
      CreateModel("lenet5", fedkit::models::Lenet5Options(), {1, 28, 2}, 10).status().message(),
      "input_shape: lenet5 needs height and width >= 4 (e.g. {1, 28, 28}), got {1, 28, 2}");
}

}  // namespace
}  // namespace models
