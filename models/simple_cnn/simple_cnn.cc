// FedLAW's SimpleCNN for CIFAR-10/100 (Li et al., ICML 2023, Appendix: "3
// convolutional layers followed by 2 fully connected layers"), as its official code
// defines it (ZexiLee/ICML-2023-FedLAW, models_dict/cnn.py, CNNCifar10): conv 3x3 32
// -> ReLU -> max-pool 2 -> conv 3x3 64 -> ReLU -> max-pool 2 -> conv 3x3 64 -> ReLU ->
// Linear 64 -> ReLU -> Linear to the classes. Convolutions are unpadded, so a 32x32
// image reaches the classifier as 64 x 4 x 4; other sizes get their own flatten width.
//
// Parameters at {3, 32, 32}, 10 classes: conv1 3*32*9+32 = 896, conv2 32*64*9+64 =
// 18,496, conv3 64*64*9+64 = 36,928, fc1 1024*64+64 = 65,600, fc2 64*10+10 = 650:
// 122,570 (128,420 with CIFAR-100's 100 classes).
//
//   model { name: "simple_cnn" }

#include <memory>
#include <optional>

#include <ATen/ATen.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include "fl/errors.h"
#include "fl/model.h"
#include "fl/registry.h"
#include "fl/status_macros.h"
#include "models/common/model_args.h"
#include "models/simple_cnn/simple_cnn_options.pb.h"

namespace models {
namespace {

// Side length after conv3 (valid) -> pool -> conv3 -> pool -> conv3.
int64_t FeatureSize(int64_t side) { return ((side - 2) / 2 - 2) / 2 - 2; }

class SimpleCnn : public fl::Model {
 public:
  SimpleCnn(const ImageShape& image, int64_t classes)
      : conv1_(register_module("conv1", torch::nn::Conv2d(image.channels, 32, 3))),
        conv2_(register_module("conv2", torch::nn::Conv2d(32, 64, 3))),
        conv3_(register_module("conv3", torch::nn::Conv2d(64, 64, 3))),
        fc1_(register_module(
            "fc1",
            torch::nn::Linear(64 * FeatureSize(image.height) * FeatureSize(image.width), 64))),
        fc2_(register_module("fc2", torch::nn::Linear(64, classes))) {}

  at::Tensor Forward(const at::Tensor& x) override {
    at::Tensor h = at::max_pool2d(at::relu(conv1_->forward(x)), 2);
    h = at::max_pool2d(at::relu(conv2_->forward(h)), 2);
    h = at::relu(conv3_->forward(h));
    return fc2_->forward(at::relu(fc1_->forward(h.flatten(1))));
  }

 private:
  torch::nn::Conv2d conv1_, conv2_, conv3_;
  torch::nn::Linear fc1_, fc2_;
};

absl::StatusOr<std::unique_ptr<fl::Model>> CreateSimpleCnn(
    const fedkit::models::SimpleCnnOptions&, const fl::Model::CreateArgs& args) {
  constexpr char kExample[] = "{3, 32, 32}";
  fl::ErrorList errors;
  std::optional<ImageShape> image = ImageInput(args, kExample, errors);
  // 18 is the smallest side that leaves conv3 one pixel (16, 8, 6, 3, 1).
  if (image) CheckMinImageSize(*image, 18, "simple_cnn", kExample, errors);
  CheckNumClasses(args.num_classes, errors);
  FL_RETURN_IF_ERROR(errors.ToStatus());
  return MakeModel<SimpleCnn>(*image, args.num_classes);
}

FL_REGISTER_PLUGIN(fl::Model, "simple_cnn", fedkit::models::SimpleCnnOptions, CreateSimpleCnn);

}  // namespace
}  // namespace models
