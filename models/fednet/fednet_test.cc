#include <ATen/ATen.h>
#include <torch/utils.h>

#include "fl/model_state.h"
#include "gtest/gtest.h"
#include "models/common/model_test_util.h"
#include "models/fednet/fednet_options.pb.h"

namespace models {
namespace {

TEST(FednetTest, ParameterCountIsFedExpsFedNet) {
  // 2,432 + 51,264 + 614,784 + 73,920 + 1,930 (see fednet.cc).
  auto model = CreateModel("fednet", fedkit::models::FednetOptions(), {3, 32, 32}, 10);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(fl::ModelState::FromModule(**model).NumParameters(), 744330);
  EXPECT_TRUE(BufferNames(**model).empty());
}

TEST(FednetTest, TrainStep) {
  torch::manual_seed(0);
  auto model = *CreateModel("fednet", fedkit::models::FednetOptions(), {3, 32, 32}, 100);
  ExpectTrainStep(*model, at::randn({3, 3, 32, 32}), 100);
}

TEST(FednetTest, RejectsImagesTooSmallForItsConvolutions) {
  EXPECT_EQ(
      CreateModel("fednet", fedkit::models::FednetOptions(), {3, 15, 32}, 10).status().message(),
      "input_shape: fednet needs height and width >= 16 (e.g. {3, 32, 32}), got {3, 15, 32}");
  EXPECT_TRUE(CreateModel("fednet", fedkit::models::FednetOptions(), {1, 16, 16}, 10).ok());
}

}  // namespace
}  // namespace models
