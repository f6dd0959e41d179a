// ResNet-18 with GroupNorm, as FedExP (Jhunjhunwala et al., ICLR 2023) trains it on
// CIFAR-10/100 and CINIC-10 (Divyansh03/FedExP, util_models.py, resnet18): the CIFAR
// stem (3x3 convolution, 64 channels, stride 1, no max-pool), four stages of two
// basic blocks (64, 128, 256, 512 channels; stages 2-4 halve the resolution, with
// 1x1-projection shortcuts), every BatchNorm replaced by GroupNorm(2 groups), then a
// Linear classifier. GroupNorm keeps no running statistics, so the model has no
// buffers and client models average without BatchNorm's statistics problem.
//
// FedExP's code pools with avg_pool2d(out, 3) where the usual code has 4: on a 32x32
// image that averages the top-left 3x3 of the final 4x4 map. That is the default
// (`pool: FEDEXP_AVG3`); `pool: GLOBAL_AVERAGE` averages the whole map.
//
// Parameters at {3, 32, 32}, 10 classes (hand count in resnet18_gn_test.cc):
// 11,173,962, the same as the BatchNorm ResNet-18 (GroupNorm has the same affine
// parameters).
//
//   model {
//     name: "resnet18_gn"
//     options { [type.googleapis.com/fedkit.models.Resnet18GnOptions] { groups: 2 } }
//   }

#include <memory>
#include <optional>

#include <ATen/ATen.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include "absl/strings/str_cat.h"
#include "fl/errors.h"
#include "fl/model.h"
#include "fl/registry.h"
#include "fl/status_macros.h"
#include "models/common/model_args.h"
#include "models/common/resnet_block.h"
#include "models/resnet18_gn/resnet18_gn_options.pb.h"

namespace models {
namespace {

using fedkit::models::Resnet18GnOptions;

// Side of the last feature map: three stride-2, padding-1 3x3 convolutions.
int64_t LastMapSide(int64_t side) {
  for (int i = 0; i < 3; ++i) side = (side - 1) / 2 + 1;
  return side;
}

class Resnet18Gn : public fl::Model {
 public:
  Resnet18Gn(const ImageShape& image, int64_t classes, const NormSpec& norm, bool fedexp_pool)
      : fedexp_pool_(fedexp_pool) {
    conv1_ = register_module(
        "conv1", torch::nn::Conv2d(
                     torch::nn::Conv2dOptions(image.channels, 64, 3).padding(1).bias(false)));
    bn1_ = MakeNorm(64, norm);
    register_module("bn1", bn1_.ptr());
    int64_t in_planes = 64;
    for (int stage = 0; stage < 4; ++stage) {
      const int64_t planes = int64_t{64} << stage;
      torch::nn::Sequential layer;
      for (int b = 0; b < 2; ++b) {
        layer->push_back(std::make_shared<BasicBlock>(
            in_planes, planes, b == 0 && stage > 0 ? 2 : 1, norm, Shortcut::kProjection));
        in_planes = planes;
      }
      layers_[stage] = register_module(absl::StrCat("layer", stage + 1), layer);
    }
    linear_ = register_module("linear", torch::nn::Linear(512, classes));
  }

  at::Tensor Forward(const at::Tensor& x) override {
    at::Tensor out = at::relu(bn1_.forward(conv1_->forward(x)));
    for (torch::nn::Sequential& layer : layers_) out = layer->forward(out);
    out = fedexp_pool_ ? at::avg_pool2d(out, 3) : out.mean({2, 3}, /*keepdim=*/true);
    return linear_->forward(out.flatten(1));
  }

 private:
  bool fedexp_pool_;
  torch::nn::Conv2d conv1_{nullptr};
  torch::nn::AnyModule bn1_;
  torch::nn::Sequential layers_[4] = {nullptr, nullptr, nullptr, nullptr};
  torch::nn::Linear linear_{nullptr};
};

absl::StatusOr<std::unique_ptr<fl::Model>> CreateResnet18Gn(const Resnet18GnOptions& options,
                                                            const fl::Model::CreateArgs& args) {
  constexpr char kExample[] = "{3, 32, 32}";
  fl::ErrorList errors;
  NormSpec norm;
  norm.groups = options.has_groups() ? options.groups() : 2;
  if (options.norm() == Resnet18GnOptions::GROUP_NORM) {
    norm.kind = NormSpec::Kind::kGroupNorm;
    // Every stage's channel count is a multiple of 64.
    if (norm.groups < 1 || 64 % norm.groups != 0) {
      errors.Add("options.groups",
                 absl::StrCat("must be >= 1 and divide 64, got ", norm.groups));
    }
  } else if (options.has_groups()) {
    errors.Add("options.groups", "only applies to norm: GROUP_NORM");
  }
  const bool fedexp_pool = options.pool() == Resnet18GnOptions::FEDEXP_AVG3;
  std::optional<ImageShape> image = ImageInput(args, kExample, errors);
  if (image && fedexp_pool) {
    // The 3x3 window must fit once and only once in the last map.
    const int64_t h = LastMapSide(image->height);
    const int64_t w = LastMapSide(image->width);
    if (h < 3 || h > 5 || w < 3 || w > 5) {
      errors.Add("input_shape",
                 absl::StrCat("resnet18_gn with pool: FEDEXP_AVG3 needs height and width in "
                              "[17, 40] (e.g. ", kExample, "), got ", ShapeString(args.input_shape),
                              "; pool: GLOBAL_AVERAGE takes any size"));
    }
  }
  CheckNumClasses(args.num_classes, errors);
  FL_RETURN_IF_ERROR(errors.ToStatus());
  return MakeModel<Resnet18Gn>(*image, args.num_classes, norm, fedexp_pool);
}

FL_REGISTER_PLUGIN(fl::Model, "resnet18_gn", Resnet18GnOptions, CreateResnet18Gn);

}  // namespace
}  // namespace models
