// Multinomial logistic regression: flatten the example, one Linear layer to the
// class logits (softmax lives in the cross-entropy loss). The convex model of the
// Elastic-aggregation paper's MNIST row (Chen et al., CVPR 2023, Table 1) and of
// FedProx's / EFL's convex experiments. Any input shape; 784 x 10 + 10 = 7,850
// parameters on 28x28 images with 10 classes.
//
//   model {
//     name: "logreg"
//     options { [type.googleapis.com/fedkit.models.LogregOptions] { bias: true } }
//   }

#include <functional>
#include <memory>
#include <numeric>

#include <torch/nn/modules/linear.h>

#include "absl/strings/str_cat.h"
#include "fl/errors.h"
#include "fl/model.h"
#include "fl/registry.h"
#include "fl/status_macros.h"
#include "models/common/model_args.h"
#include "models/logreg/logreg_options.pb.h"

namespace models {
namespace {

class Logreg : public fl::Model {
 public:
  Logreg(int64_t inputs, int64_t classes, bool bias)
      : linear_(register_module(
            "linear", torch::nn::Linear(torch::nn::LinearOptions(inputs, classes).bias(bias)))) {}

  at::Tensor Forward(const at::Tensor& x) override { return linear_->forward(x.flatten(1)); }

 private:
  torch::nn::Linear linear_;
};

absl::StatusOr<std::unique_ptr<fl::Model>> CreateLogreg(
    const fedkit::models::LogregOptions& options, const fl::Model::CreateArgs& args) {
  fl::ErrorList errors;
  bool positive = !args.input_shape.empty();
  for (int64_t d : args.input_shape) positive = positive && d >= 1;
  if (!positive) {
    errors.Add("input_shape", absl::StrCat("must be one or more positive sizes (e.g. {1, 28, 28}), got ",
                                           ShapeString(args.input_shape)));
  }
  CheckNumClasses(args.num_classes, errors);
  FL_RETURN_IF_ERROR(errors.ToStatus());
  const int64_t inputs = std::accumulate(args.input_shape.begin(), args.input_shape.end(),
                                         int64_t{1}, std::multiplies<int64_t>());
  return MakeModel<Logreg>(inputs, args.num_classes, options.has_bias() ? options.bias() : true);
}

FL_REGISTER_PLUGIN(fl::Model, "logreg", fedkit::models::LogregOptions, CreateLogreg);

}  // namespace
}  // namespace models
