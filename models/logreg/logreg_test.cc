#include <ATen/ATen.h>
#include <torch/utils.h>

#include "fl/model_state.h"
#include "gtest/gtest.h"
#include "models/common/model_test_util.h"
#include "models/logreg/logreg_options.pb.h"

namespace models {
namespace {

fedkit::models::LogregOptions Options(bool bias) {
  fedkit::models::LogregOptions options;
  options.set_bias(bias);
  return options;
}

TEST(LogregTest, ParameterCount) {
  // 28x28 MNIST, 10 classes: 784 * 10 weights + 10 biases.
  auto model = CreateModel("logreg", Options(true), {1, 28, 28}, 10);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(fl::ModelState::FromModule(**model).NumParameters(), 7850);
  EXPECT_TRUE(BufferNames(**model).empty());
  // Without bias, and on the FedProx synthetic data's 60 features.
  EXPECT_EQ(fl::ModelState::FromModule(**CreateModel("logreg", Options(false), {60}, 10))
                .NumParameters(),
            600);
}

TEST(LogregTest, DefaultHasBias) {
  auto model = CreateModel("logreg", fedkit::models::LogregOptions(), {3}, 2);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(fl::ModelState::FromModule(**model).NumParameters(), 3 * 2 + 2);
}

TEST(LogregTest, IsAffineInTheInput) {
  torch::manual_seed(0);
  auto model = *CreateModel("logreg", Options(true), {1, 2, 2}, 3);
  const auto params = model->named_parameters();
  at::Tensor x = at::randn({5, 1, 2, 2});
  at::Tensor expected = at::matmul(x.reshape({5, 4}), params["linear.weight"].t()) +
                        params["linear.bias"];
  EXPECT_TRUE(at::allclose(model->Forward(x), expected));
}

TEST(LogregTest, TrainStep) {
  torch::manual_seed(0);
  auto model = *CreateModel("logreg", Options(true), {1, 28, 28}, 10);
  ExpectTrainStep(*model, at::randn({4, 1, 28, 28}), 10);
}

TEST(LogregTest, RejectsBadShapeAndClasses) {
  EXPECT_EQ(CreateModel("logreg", Options(true), {}, 1).status().message(),
            "input_shape: must be one or more positive sizes (e.g. {1, 28, 28}), got {}\n"
            "num_classes: needs a classification dataset (>= 2 classes), got 1");
  EXPECT_EQ(CreateModel("logreg", Options(true), {1, 0, 28}, 10).status().message(),
            "input_shape: must be one or more positive sizes (e.g. {1, 28, 28}), got {1, 0, 28}");
}

}  // namespace
}  // namespace models
