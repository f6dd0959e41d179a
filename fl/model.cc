#include "fl/model.h"

#include <ATen/ATen.h>

#include "absl/status/status.h"

namespace fl {

at::Tensor Model::Dropout(const at::Tensor& x, double p) const {
  if (!is_training() || p == 0.0) return x;
  if (p >= 1.0) return at::zeros_like(x);
  c10::optional<at::Generator> generator;
  if (generator_.defined()) generator = generator_;
  const at::Tensor keep = at::empty_like(x).bernoulli_(1.0 - p, generator);
  return x * keep.div_(1.0 - p);
}

absl::StatusOr<std::vector<Model::LayerInput>> Model::LayerInputs(const at::Tensor&) {
  return absl::UnimplementedError(
      "the model does not expose its layers' inputs (fl::Model::LayerInputs)");
}

}  // namespace fl
