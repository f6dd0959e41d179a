// The "LeNet-5" of FedLAW (Li et al., ICML 2023, Table 3, Fashion-MNIST), as its
// official code defines it (ZexiLee/ICML-2023-FedLAW, models_dict/cnn.py, LeNet5):
// conv 5x5 16 (padding 2) -> ReLU -> max-pool 2 -> conv 5x5 32 (padding 2) -> ReLU ->
// max-pool 2 -> Linear to the classes. This is not LeCun's original (6/16 maps, three
// fully connected layers, tanh): it is the network behind the paper's LeNet numbers.
//
// Parameters at {1, 28, 28}, 10 classes: conv1 1*16*25+16 = 416, conv2 16*32*25+32 =
// 12,832, out (32*7*7)*10+10 = 15,690: 28,938.
//
//   model { name: "lenet5" }

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
#include "models/lenet5/lenet5_options.pb.h"

namespace models {
namespace {

using torch::nn::Conv2dOptions;

class Lenet5 : public fl::Model {
 public:
  Lenet5(const ImageShape& image, int64_t classes)
      : conv1_(register_module("conv1",
                               torch::nn::Conv2d(Conv2dOptions(image.channels, 16, 5).padding(2)))),
        conv2_(register_module("conv2", torch::nn::Conv2d(Conv2dOptions(16, 32, 5).padding(2)))),
        out_(register_module(
            "out", torch::nn::Linear(32 * (image.height / 4) * (image.width / 4), classes))) {}

  at::Tensor Forward(const at::Tensor& x) override {
    at::Tensor h = at::max_pool2d(at::relu(conv1_->forward(x)), 2);
    h = at::max_pool2d(at::relu(conv2_->forward(h)), 2);
    return out_->forward(h.flatten(1));
  }

 private:
  torch::nn::Conv2d conv1_, conv2_;
  torch::nn::Linear out_;
};

absl::StatusOr<std::unique_ptr<fl::Model>> CreateLenet5(const fedkit::models::Lenet5Options&,
                                                        const fl::Model::CreateArgs& args) {
  constexpr char kExample[] = "{1, 28, 28}";
  fl::ErrorList errors;
  std::optional<ImageShape> image = ImageInput(args, kExample, errors);
  // Two 2x2 poolings must leave at least one pixel.
  if (image) CheckMinImageSize(*image, 4, "lenet5", kExample, errors);
  CheckNumClasses(args.num_classes, errors);
  FL_RETURN_IF_ERROR(errors.ToStatus());
  return MakeModel<Lenet5>(*image, args.num_classes);
}

FL_REGISTER_PLUGIN(fl::Model, "lenet5", fedkit::models::Lenet5Options, CreateLenet5);

}  // namespace
}  // namespace models
