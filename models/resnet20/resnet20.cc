// ResNet-20 for CIFAR (He et al., CVPR 2016, Sec. 4.2): a 3x3 convolution with 16
// channels, then three stages of three basic blocks (16, 32, 64 channels; the second
// and third halve the resolution), global average pooling and a Linear classifier.
// The model of the Elastic-aggregation paper's CIFAR-10/100 and CINIC-10 rows (Chen
// et al., CVPR 2023) and of FedLAW's ResNet20 rows (Li et al., ICML 2023). Defaults
// are He et al.'s (option-A shortcuts, BatchNorm); FedLAW's code uses projection
// shortcuts (`shortcut: PROJECTION`). Initialisation is LibTorch's default, as in
// FedLAW's PyTorch code.
//
// BatchNorm's running_mean, running_var and num_batches_tracked are registered as
// buffers: fl::ModelState flags them is_buffer, so aggregators can treat them apart.
//
// Parameters at {3, 32, 32}, 10 classes (hand count in resnet20_test.cc): 269,722
// with IDENTITY_PAD, 272,474 with PROJECTION.
//
//   model {
//     name: "resnet20"
//     options { [type.googleapis.com/fedkit.models.Resnet20Options] { shortcut: PROJECTION } }
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
#include "models/resnet20/resnet20_options.pb.h"

namespace models {
namespace {

using fedkit::models::Resnet20Options;

constexpr int kBlocksPerStage = 3;  // depth 6 * 3 + 2 = 20

class Resnet20 : public fl::Model {
 public:
  Resnet20(const ImageShape& image, int64_t classes, int64_t width, const NormSpec& norm,
           Shortcut shortcut) {
    const int64_t base = 16 * width;
    conv1_ = register_module(
        "conv1", torch::nn::Conv2d(
                     torch::nn::Conv2dOptions(image.channels, base, 3).padding(1).bias(false)));
    bn1_ = MakeNorm(base, norm);
    register_module("bn1", bn1_.ptr());
    int64_t in_planes = base;
    for (int stage = 0; stage < 3; ++stage) {
      const int64_t planes = base << stage;
      torch::nn::Sequential layer;
      for (int b = 0; b < kBlocksPerStage; ++b) {
        layer->push_back(std::make_shared<BasicBlock>(in_planes, planes,
                                                      b == 0 && stage > 0 ? 2 : 1, norm,
                                                      shortcut));
        in_planes = planes;
      }
      layers_[stage] = register_module(absl::StrCat("layer", stage + 1), layer);
    }
    linear_ = register_module("linear", torch::nn::Linear(in_planes, classes));
  }

  at::Tensor Forward(const at::Tensor& x) override {
    at::Tensor out = at::relu(bn1_.forward(conv1_->forward(x)));
    for (torch::nn::Sequential& layer : layers_) out = layer->forward(out);
    // Global average pooling: the reference's avg_pool2d(out, 8) on 32x32 inputs.
    return linear_->forward(out.mean({2, 3}));
  }

 private:
  torch::nn::Conv2d conv1_{nullptr};
  torch::nn::AnyModule bn1_;
  torch::nn::Sequential layers_[3] = {nullptr, nullptr, nullptr};
  torch::nn::Linear linear_{nullptr};
};

absl::StatusOr<std::unique_ptr<fl::Model>> CreateResnet20(const Resnet20Options& options,
                                                          const fl::Model::CreateArgs& args) {
  constexpr char kExample[] = "{3, 32, 32}";
  fl::ErrorList errors;
  const int64_t width = options.has_width() ? options.width() : 1;
  if (width < 1) errors.Add("options.width", absl::StrCat("must be >= 1, got ", width));
  NormSpec norm;
  norm.groups = options.has_groups() ? options.groups() : 2;
  if (options.norm() == Resnet20Options::GROUP_NORM) {
    norm.kind = NormSpec::Kind::kGroupNorm;
    // Every stage's channel count is a multiple of 16 * width.
    if (norm.groups < 1 || (width >= 1 && (16 * width) % norm.groups != 0)) {
      errors.Add("options.groups", absl::StrCat("must be >= 1 and divide 16 * width = ",
                                                16 * width, ", got ", norm.groups));
    }
  } else if (options.has_groups()) {
    errors.Add("options.groups", "only applies to norm: GROUP_NORM");
  }
  std::optional<ImageShape> image = ImageInput(args, kExample, errors);
  CheckNumClasses(args.num_classes, errors);
  FL_RETURN_IF_ERROR(errors.ToStatus());
  return MakeModel<Resnet20>(*image, args.num_classes, width, norm,
                             options.shortcut() == Resnet20Options::PROJECTION
                                 ? Shortcut::kProjection
                                 : Shortcut::kIdentityPad);
}

FL_REGISTER_PLUGIN(fl::Model, "resnet20", Resnet20Options, CreateResnet20);

}  // namespace
}  // namespace models
