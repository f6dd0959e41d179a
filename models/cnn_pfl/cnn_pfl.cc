// The small CNN that pfl-research benchmarks CIFAR-10 with (apple/pfl-research,
// benchmarks/model/pytorch/cnn.py, simple_cnn) and that FedExP (Jhunjhunwala et al.,
// ICLR 2023) trains on EMNIST (Divyansh03/FedExP, util_models.py, EMNIST_CNN; the same
// layers): conv 3x3 32 -> ReLU -> conv 3x3 64 -> ReLU -> max-pool 2 -> dropout 0.25 ->
// Linear 128 -> ReLU -> dropout 0.5 -> Linear to the classes. Convolutions are
// unpadded: an H x W image reaches the classifier as 64 x (H-4)/2 x (W-4)/2.
//
// Which paper uses it where: FedExP's EMNIST runs use this network (62 classes,
// 1,206,590 parameters); its CIFAR-10/100 and CINIC-10 runs use ResNet-18 with
// GroupNorm (model `resnet18_gn`; its code's other CIFAR option, "CNN"/FedNet, is a
// different 5x5-conv network not provided here). pfl-research uses this network for
// CIFAR-10 (~1.6M parameters).
//
// Parameters at {3, 32, 32}, 10 classes: conv1 3*32*9+32 = 896, conv2 32*64*9+64 =
// 18,496, fc1 (64*14*14)*128+128 = 1,605,760, fc2 128*10+10 = 1,290: 1,626,442.
// At {1, 28, 28}, 62 classes (FedExP EMNIST): 320 + 18,496 + 9216*128+128 + 128*62+62
// = 1,206,590.
//
//   model {
//     name: "cnn_pfl"
//     options { [type.googleapis.com/fedkit.models.CnnPflOptions] { hidden: 128 } }
//   }

#include <memory>
#include <optional>

#include <ATen/ATen.h>
#include <torch/nn/init.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include "absl/strings/str_cat.h"
#include "fl/errors.h"
#include "fl/model.h"
#include "fl/registry.h"
#include "fl/status_macros.h"
#include "models/cnn_pfl/cnn_pfl_options.pb.h"
#include "models/common/model_args.h"

namespace models {
namespace {

using fedkit::models::CnnPflOptions;

class CnnPfl : public fl::Model {
 public:
  CnnPfl(const ImageShape& image, int64_t hidden, int64_t classes, CnnPflOptions::Init init)
      : conv1_(register_module("conv1", torch::nn::Conv2d(image.channels, 32, 3))),
        conv2_(register_module("conv2", torch::nn::Conv2d(32, 64, 3))),
        fc1_(register_module(
            "fc1",
            torch::nn::Linear(64 * ((image.height - 4) / 2) * ((image.width - 4) / 2), hidden))),
        fc2_(register_module("fc2", torch::nn::Linear(hidden, classes))) {
    if (init == CnnPflOptions::XAVIER_UNIFORM) {
      for (at::Tensor* w : {&conv1_->weight, &conv2_->weight, &fc1_->weight, &fc2_->weight}) {
        torch::nn::init::xavier_uniform_(*w);
      }
    }
  }

  at::Tensor Forward(const at::Tensor& x) override {
    at::Tensor h = at::relu(conv2_->forward(at::relu(conv1_->forward(x))));
    h = Dropout(at::max_pool2d(h, 2), 0.25);
    h = Dropout(at::relu(fc1_->forward(h.flatten(1))), 0.5);
    return fc2_->forward(h);
  }

 private:
  torch::nn::Conv2d conv1_, conv2_;
  torch::nn::Linear fc1_, fc2_;
};

absl::StatusOr<std::unique_ptr<fl::Model>> CreateCnnPfl(const CnnPflOptions& options,
                                                        const fl::Model::CreateArgs& args) {
  constexpr char kExample[] = "{3, 32, 32}";
  fl::ErrorList errors;
  const int64_t hidden = options.has_hidden() ? options.hidden() : 128;
  if (hidden < 1) errors.Add("options.hidden", absl::StrCat("must be >= 1, got ", hidden));
  std::optional<ImageShape> image = ImageInput(args, kExample, errors);
  // Two valid 3x3 convolutions and a 2x2 pooling must leave one pixel.
  if (image) CheckMinImageSize(*image, 6, "cnn_pfl", kExample, errors);
  CheckNumClasses(args.num_classes, errors);
  FL_RETURN_IF_ERROR(errors.ToStatus());
  return MakeModel<CnnPfl>(*image, hidden, args.num_classes, options.init());
}

FL_REGISTER_PLUGIN(fl::Model, "cnn_pfl", CnnPflOptions, CreateCnnPfl);

}  // namespace
}  // namespace models
