// The "CNN" of FedAvg (McMahan et al., AISTATS 2017, Sec. 3: "two 5x5 convolution
// layers (the first with 32 channels, the second with 64, each followed with 2x2 max
// pooling), a fully connected layer with 512 units and ReLU activation, and a final
// softmax output layer (total of 1,663,370 parameters)"), the same network LEAF
// trains on FEMNIST (with 2048 hidden units) and the "2 conv + 2 linear" model of the
// Elastic-aggregation paper's EMNIST row. Convolutions are 'same'-padded (TensorFlow
// code of both), so the classifier sees 64 x (H/4) x (W/4) features. FedExP's
// "EMNIST_CNN" is a different network (3x3 convolutions, dropout): model `cnn_pfl`.
// With `padding: VALID` it is PFLlib's FedAvgCNN (TsingZ0/PFLlib,
// system/flcore/trainmodel/models.py), the "4-layer CNN" of its personalised-FL
// benchmark: 832 + 51,264 + (64*4*4)*512+512 + 5,130 = 582,026 parameters at 28x28.
//
// Parameters at {1, 28, 28}, 10 classes: conv1 1*32*25+32 = 832, conv2 32*64*25+64 =
// 51,264, fc1 3136*512+512 = 1,606,144, fc2 512*10+10 = 5,130: 1,663,370 (as the
// paper states). With EMNIST's 62 classes: 1,690,046.
//
//   model {
//     name: "cnn_emnist"
//     options { [type.googleapis.com/fedkit.models.CnnEmnistOptions] { hidden: 512 } }
//   }

#include <memory>
#include <optional>

#include <ATen/ATen.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include "absl/strings/str_cat.h"
#include "fl/errors.h"
#include "fl/model.h"
#include "fl/registry.h"
#include "fl/status_macros.h"
#include "models/cnn_emnist/cnn_emnist_options.pb.h"
#include "models/common/model_args.h"

namespace models {
namespace {

using torch::nn::Conv2dOptions;
using torch::nn::LinearOptions;

class CnnEmnist : public fl::Model {
 public:
  CnnEmnist(const ImageShape& image, int64_t hidden, int64_t classes, int64_t padding)
      : conv1_(register_module(
            "conv1", torch::nn::Conv2d(Conv2dOptions(image.channels, 32, 5).padding(padding)))),
        conv2_(register_module("conv2",
                               torch::nn::Conv2d(Conv2dOptions(32, 64, 5).padding(padding)))),
        fc1_(register_module("fc1", torch::nn::Linear(64 * PooledSide(image.height, padding) *
                                                          PooledSide(image.width, padding),
                                                      hidden))),
        fc2_(register_module("fc2", torch::nn::Linear(hidden, classes))) {}

  // A side after two (5x5 convolution, 2x2 pooling) stages.
  static int64_t PooledSide(int64_t side, int64_t padding) {
    return ((side + 2 * padding - 4) / 2 + 2 * padding - 4) / 2;
  }

  at::Tensor Forward(const at::Tensor& x) override {
    at::Tensor h = at::max_pool2d(at::relu(conv1_->forward(x)), 2);
    h = at::max_pool2d(at::relu(conv2_->forward(h)), 2);
    return fc2_->forward(at::relu(fc1_->forward(h.flatten(1))));
  }

 private:
  torch::nn::Conv2d conv1_, conv2_;
  torch::nn::Linear fc1_, fc2_;
};

absl::StatusOr<std::unique_ptr<fl::Model>> CreateCnnEmnist(
    const fedkit::models::CnnEmnistOptions& options, const fl::Model::CreateArgs& args) {
  constexpr char kExample[] = "{1, 28, 28}";
  fl::ErrorList errors;
  const int64_t hidden = options.has_hidden() ? options.hidden() : 512;
  if (hidden < 1) errors.Add("options.hidden", absl::StrCat("must be >= 1, got ", hidden));
  std::optional<ImageShape> image = ImageInput(args, kExample, errors);
  const bool valid = options.padding() == fedkit::models::CnnEmnistOptions::VALID;
  // Two stages must leave at least one pixel: 4 with padding, 16 without.
  if (image) CheckMinImageSize(*image, valid ? 16 : 4, "cnn_emnist", kExample, errors);
  CheckNumClasses(args.num_classes, errors);
  FL_RETURN_IF_ERROR(errors.ToStatus());
  return MakeModel<CnnEmnist>(*image, hidden, args.num_classes, valid ? 0 : 2);
}

FL_REGISTER_PLUGIN(fl::Model, "cnn_emnist", fedkit::models::CnnEmnistOptions, CreateCnnEmnist);

}  // namespace
}  // namespace models
