// Multi-layer perceptron: flatten, then Linear (+ BatchNorm with batch_norm) +
// ReLU per hidden layer, then a Linear classifier. Used by FedLAW (784-200-200-10), MA-Echo (bias-free
// 784-400-200-100-10) and FedExP's Fashion-MNIST runs.
//
//   model {
//     name: "mlp"
//     options { [type.googleapis.com/fedkit.models.MlpOptions] { hidden: [200, 200] } }
//   }

#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include <torch/nn/functional/batchnorm.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/activation.h>

#include "absl/strings/str_cat.h"
#include "fl/errors.h"
#include "fl/model.h"
#include "fl/registry.h"
#include "fl/status_macros.h"
#include "models/mlp/mlp_options.pb.h"

namespace models {
namespace {

class Mlp : public fl::Model {
 public:
  Mlp(int64_t inputs, const std::vector<int64_t>& hidden, int64_t classes, bool bias,
      bool batch_norm) {
    int64_t width = inputs;
    for (size_t i = 0; i < hidden.size(); ++i) {
      layers_->push_back(torch::nn::Linear(torch::nn::LinearOptions(width, hidden[i]).bias(bias)));
      if (batch_norm) layers_->push_back(torch::nn::BatchNorm1d(hidden[i]));
      layers_->push_back(torch::nn::ReLU());
      width = hidden[i];
    }
    layers_->push_back(torch::nn::Linear(torch::nn::LinearOptions(width, classes).bias(bias)));
    register_module("layers", layers_);
  }

  at::Tensor Forward(const at::Tensor& x) override { return layers_->forward(x.flatten(1)); }

  absl::StatusOr<std::vector<LayerInput>> LayerInputs(const at::Tensor& x) override {
    std::vector<LayerInput> inputs;
    at::Tensor h = x.flatten(1);
    size_t index = 0;
    for (torch::nn::AnyModule& layer : *layers_) {
      if (auto* linear = layer.ptr()->as<torch::nn::Linear>()) {
        const std::string prefix = absl::StrCat("layers.", index, ".");
        inputs.push_back({prefix + "weight", linear->bias.defined() ? prefix + "bias" : "", h, {}});
      }
      h = layer.forward(h);
      ++index;
    }
    return inputs;
  }

 private:
  torch::nn::Sequential layers_;
};

absl::StatusOr<std::unique_ptr<fl::Model>> CreateMlp(const fedkit::models::MlpOptions& options,
                                                     const fl::Model::CreateArgs& args) {
  fl::ErrorList errors;
  std::vector<int64_t> hidden;
  for (int i = 0; i < options.hidden_size(); ++i) {
    if (options.hidden(i) < 1) {
      errors.Add(absl::StrCat("options.hidden[", i, "]"),
                 absl::StrCat("must be >= 1, got ", options.hidden(i)));
    }
    hidden.push_back(options.hidden(i));
  }
  if (args.num_classes < 2) {
    errors.Add("", absl::StrCat("needs a classification dataset, got ", args.num_classes, " classes"));
  }
  FL_RETURN_IF_ERROR(errors.ToStatus());
  const int64_t inputs = std::accumulate(args.input_shape.begin(), args.input_shape.end(),
                                         int64_t{1}, std::multiplies<int64_t>());
  return std::make_unique<Mlp>(inputs, hidden, args.num_classes,
                               options.has_bias() ? options.bias() : true, options.batch_norm());
}

FL_REGISTER_PLUGIN(fl::Model, "mlp", fedkit::models::MlpOptions, CreateMlp);

}  // namespace
}  // namespace models
