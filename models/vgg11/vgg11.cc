// VGG-11 for 32x32 images (Simonyan & Zisserman, ICLR 2015, configuration A), as the
// federated-learning code EFL builds on defines it (Sattler et al., "Robust and
// communication-efficient federated learning from non-iid data", felisat/
// federated-learning, neural_nets.py, vgg11 / vgg11s): 3x3 convolutions with ReLU and
// five 2x2 max-pools, then a classifier head of Linear(w, w) -> ReLU -> Linear(w, w)
// -> ReLU -> Linear(w, classes) without dropout, w being the last convolution's width.
// Convolution weights are drawn from N(0, 2 / (9 * out_channels)) with zero biases,
// as that code does. EFL (Ma et al., 2021) trains "a simplified version of the
// well-studied 11-layer VGG11 network" on CIFAR-100: `variant: VGG11_SIMPLIFIED`,
// Sattler's VGG11*. Torchvision's ImageNet head (4096-4096, dropout) is not offered;
// kuangliu/pytorch-cifar's single Linear(512, classes) head is not either.
//
// Parameters at {3, 32, 32}, 10 classes: VGG11 convolutions 9,220,480 + head
// 2 * (512*512+512) + 512*10+10 = 530,442: 9,750,922 (9,797,092 with 100 classes).
// VGG11_SIMPLIFIED: convolutions 831,168 + head 2 * (128*128+128) + 128*10+10 =
// 34,314: 865,482. Hand counts in vgg11_test.cc.
//
//   model {
//     name: "vgg11"
//     options { [type.googleapis.com/fedkit.models.Vgg11Options] { variant: VGG11_SIMPLIFIED } }
//   }

#include <cmath>
#include <memory>
#include <optional>
#include <vector>

#include <ATen/ATen.h>
#include <torch/nn/init.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/pooling.h>

#include "fl/errors.h"
#include "fl/model.h"
#include "fl/registry.h"
#include "fl/status_macros.h"
#include "models/common/model_args.h"
#include "models/vgg11/vgg11_options.pb.h"

namespace models {
namespace {

using fedkit::models::Vgg11Options;

constexpr int kPool = 0;  // a 2x2 max-pool in a configuration

const std::vector<int>& Configuration(Vgg11Options::Variant variant) {
  static const auto* const kVgg11 =
      new std::vector<int>{64, kPool, 128, kPool, 256, 256, kPool, 512, 512, kPool, 512, 512, kPool};
  static const auto* const kSimplified =
      new std::vector<int>{32, kPool, 64, kPool, 128, 128, kPool, 128, 128, kPool, 128, 128, kPool};
  return variant == Vgg11Options::VGG11_SIMPLIFIED ? *kSimplified : *kVgg11;
}

class Vgg11 : public fl::Model {
 public:
  Vgg11(const ImageShape& image, int64_t classes, Vgg11Options::Variant variant,
        bool batch_norm) {
    int64_t channels = image.channels;
    for (int v : Configuration(variant)) {
      if (v == kPool) {
        features_->push_back(torch::nn::MaxPool2d(2));
        continue;
      }
      torch::nn::Conv2d conv(torch::nn::Conv2dOptions(channels, v, 3).padding(1));
      torch::nn::init::normal_(conv->weight, 0.0, std::sqrt(2.0 / (9.0 * v)));
      torch::nn::init::zeros_(conv->bias);
      features_->push_back(conv);
      if (batch_norm) features_->push_back(torch::nn::BatchNorm2d(v));
      features_->push_back(torch::nn::ReLU());
      channels = v;
    }
    register_module("features", features_);
    const int64_t width = channels;
    classifier_->push_back(torch::nn::Linear(width * (image.height / 32) * (image.width / 32), width));
    classifier_->push_back(torch::nn::ReLU());
    classifier_->push_back(torch::nn::Linear(width, width));
    classifier_->push_back(torch::nn::ReLU());
    classifier_->push_back(torch::nn::Linear(width, classes));
    register_module("classifier", classifier_);
  }

  at::Tensor Forward(const at::Tensor& x) override {
    return classifier_->forward(features_->forward(x).flatten(1));
  }

 private:
  torch::nn::Sequential features_;
  torch::nn::Sequential classifier_;
};

absl::StatusOr<std::unique_ptr<fl::Model>> CreateVgg11(const Vgg11Options& options,
                                                       const fl::Model::CreateArgs& args) {
  constexpr char kExample[] = "{3, 32, 32}";
  fl::ErrorList errors;
  std::optional<ImageShape> image = ImageInput(args, kExample, errors);
  // Five 2x2 poolings must leave one pixel.
  if (image) CheckMinImageSize(*image, 32, "vgg11", kExample, errors);
  CheckNumClasses(args.num_classes, errors);
  FL_RETURN_IF_ERROR(errors.ToStatus());
  return MakeModel<Vgg11>(*image, args.num_classes, options.variant(), options.batch_norm());
}

FL_REGISTER_PLUGIN(fl::Model, "vgg11", Vgg11Options, CreateVgg11);

}  // namespace
}  // namespace models
