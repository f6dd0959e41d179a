#include "aggregators/common/proximal_term.h"

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "fl/model.h"

namespace aggregators {

absl::Status ProximalTerm::BeforeTraining(fl::HookContext& context) {
  parameters_ = context.model->parameters();
  anchors_.clear();
  for (const auto& entry : context.global->entries()) {
    if (!entry.is_buffer) anchors_.push_back(entry.tensor.detach());
  }
  if (anchors_.size() != parameters_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("the global model has ", anchors_.size(),
                                                   " parameters, the local one ",
                                                   parameters_.size()));
  }
  return absl::OkStatus();
}

at::Tensor ProximalTerm::LossTerm(fl::HookContext&) {
  if (mu_ == 0) return at::Tensor();
  at::Tensor sum = at::zeros({}, parameters_.front().options());
  for (size_t i = 0; i < parameters_.size(); ++i) {
    sum = sum + (parameters_[i] - anchors_[i]).pow(2).sum();
  }
  return sum * (mu_ / 2);
}

}  // namespace aggregators
