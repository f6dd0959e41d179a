// "FedNet", the CIFAR CNN of FedExP's official code (Divyansh03/FedExP,
// util_models.py, FedNet; Jhunjhunwala et al., ICLR 2023): conv 5x5 32 -> ReLU ->
// max-pool 2 -> conv 5x5 64 -> ReLU -> max-pool 2 -> Linear 384 -> ReLU -> Linear
// 192 -> ReLU -> Linear to the classes. No padding: a 32x32 image leaves 64 maps of
// 5x5.
//
// Parameters at {3, 32, 32}, 10 classes: conv1 3*32*25+32 = 2,432, conv2
// 32*64*25+64 = 51,264, fc1 1600*384+384 = 614,784, fc2 384*192+192 = 73,920, fc3
// 192*10+10 = 1,930: 744,330.
//
//   model { name: "fednet" }

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
#include "models/fednet/fednet_options.pb.h"

namespace models {
namespace {

// Side of the maps after a 5x5 convolution and a 2x2 pooling, twice.
int64_t FeatureSide(int64_t side) { return ((side - 4) / 2 - 4) / 2; }

class Fednet : public fl::Model {
 public:
  Fednet(const ImageShape& image, int64_t classes)
      : conv1_(register_module("conv1", torch::nn::Conv2d(image.channels, 32, 5))),
        conv2_(register_module("conv2", torch::nn::Conv2d(32, 64, 5))),
        fc1_(register_module(
            "fc1", torch::nn::Linear(64 * FeatureSide(image.height) * FeatureSide(image.width),
                                     384))),
        fc2_(register_module("fc2", torch::nn::Linear(384, 192))),
        fc3_(register_module("fc3", torch::nn::Linear(192, classes))) {}

  at::Tensor Forward(const at::Tensor& x) override {
    at::Tensor h = at::max_pool2d(at::relu(conv1_->forward(x)), 2);
    h = at::max_pool2d(at::relu(conv2_->forward(h)), 2);
    h = at::relu(fc1_->forward(h.flatten(1)));
    return fc3_->forward(at::relu(fc2_->forward(h)));
  }

 private:
  torch::nn::Conv2d conv1_, conv2_;
  torch::nn::Linear fc1_, fc2_, fc3_;
};

absl::StatusOr<std::unique_ptr<fl::Model>> CreateFednet(const fedkit::models::FednetOptions&,
                                                        const fl::Model::CreateArgs& args) {
  constexpr char kExample[] = "{3, 32, 32}";
  fl::ErrorList errors;
  std::optional<ImageShape> image = ImageInput(args, kExample, errors);
  // Two unpadded 5x5 convolutions, each followed by a 2x2 pooling, must leave a pixel.
  if (image) CheckMinImageSize(*image, 16, "fednet", kExample, errors);
  CheckNumClasses(args.num_classes, errors);
  FL_RETURN_IF_ERROR(errors.ToStatus());
  return MakeModel<Fednet>(*image, args.num_classes);
}

FL_REGISTER_PLUGIN(fl::Model, "fednet", fedkit::models::FednetOptions, CreateFednet);

}  // namespace
}  // namespace models
