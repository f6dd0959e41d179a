#include <cmath>

#include <ATen/ATen.h>
#include <torch/utils.h>

#include "fl/model_state.h"
#include "gtest/gtest.h"
#include "models/cnn_pfl/cnn_pfl_options.pb.h"
#include "models/common/model_test_util.h"

namespace models {
namespace {

using fedkit::models::CnnPflOptions;

TEST(CnnPflTest, ParameterCounts) {
  // CIFAR-10: conv1 3*32*9+32 = 896, conv2 32*64*9+64 = 18,496,
  // fc1 (64*14*14)*128+128 = 1,605,760, fc2 128*10+10 = 1,290.
  auto model = CreateModel("cnn_pfl", CnnPflOptions(), {3, 32, 32}, 10);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(fl::ModelState::FromModule(**model).NumParameters(), 1626442);
  EXPECT_TRUE(BufferNames(**model).empty());
  // FedExP's EMNIST_CNN: conv1 1*32*9+32 = 320, fc1 (64*12*12)*128+128 = 1,179,776,
  // fc2 128*62+62 = 7,998.
  EXPECT_EQ(fl::ModelState::FromModule(**CreateModel("cnn_pfl", CnnPflOptions(), {1, 28, 28}, 62))
                .NumParameters(),
            320 + 18496 + 1179776 + 7998);
}

TEST(CnnPflTest, TrainStep) {
  torch::manual_seed(0);
  CnnPflOptions options;
  options.set_hidden(16);
  auto model = *CreateModel("cnn_pfl", options, {3, 32, 32}, 10);
  ExpectTrainStep(*model, at::randn({3, 3, 32, 32}), 10);
}

TEST(CnnPflTest, DropoutOnlyInTraining) {
  torch::manual_seed(0);
  auto model = *CreateModel("cnn_pfl", CnnPflOptions(), {1, 10, 10}, 10);
  at::Tensor x = at::randn({2, 1, 10, 10});
  model->eval();
  EXPECT_TRUE(at::equal(model->Forward(x), model->Forward(x)));
  model->train();
  EXPECT_FALSE(at::equal(model->Forward(x), model->Forward(x)));
}

// The model's own generator fixes its dropout masks, whatever the global one does.
TEST(CnnPflTest, DropoutDrawsFromTheModelsGenerator) {
  torch::manual_seed(0);
  auto model = *CreateModel("cnn_pfl", CnnPflOptions(), {1, 10, 10}, 10);
  at::Tensor x = at::randn({2, 1, 10, 10});
  model->train();
  auto seeded = [] {
    at::Generator g = at::detail::getDefaultCPUGenerator().clone();
    g.set_current_seed(42);
    return g;
  };
  model->set_generator(seeded());
  const at::Tensor first = model->Forward(x);
  torch::manual_seed(123);  // moves the global generator only
  model->set_generator(seeded());
  EXPECT_TRUE(at::equal(model->Forward(x), first));
}

TEST(CnnPflTest, XavierInitBoundsTheWeights) {
  torch::manual_seed(0);
  CnnPflOptions options;
  options.set_init(CnnPflOptions::XAVIER_UNIFORM);
  auto model = *CreateModel("cnn_pfl", options, {3, 32, 32}, 10);
  // Glorot bound sqrt(6 / (fan_in + fan_out)): fc1 12544 in, 128 out.
  at::Tensor w = model->named_parameters()["fc1.weight"];
  const double bound = std::sqrt(6.0 / (12544 + 128));
  EXPECT_LE(w.abs().max().item<double>(), bound);
  EXPECT_GT(w.abs().max().item<double>(), 0.99 * bound);
  // LibTorch's default bound for the same layer is 1 / sqrt(fan_in), much smaller.
  auto plain = *CreateModel("cnn_pfl", CnnPflOptions(), {3, 32, 32}, 10);
  EXPECT_LE(plain->named_parameters()["fc1.weight"].abs().max().item<double>(),
            1.0 / std::sqrt(12544.0));
}

TEST(CnnPflTest, RejectsBadOptionsAndShapes) {
  CnnPflOptions options;
  options.set_hidden(-1);
  EXPECT_EQ(CreateModel("cnn_pfl", options, {3, 5, 32}, 10).status().message(),
            "options.hidden: must be >= 1, got -1\n"
            "input_shape: cnn_pfl needs height and width >= 6 (e.g. {3, 32, 32}), got {3, 5, 32}");
}

}  // namespace
}  // namespace models
