#include "aggregators/common/weighted_mean.h"

#include "absl/strings/str_cat.h"
#include "fl/status_macros.h"

namespace aggregators {

absl::Status WeightedMean::Add(const fl::ModelState& delta, double weight) {
  if (!(weight > 0)) {
    return absl::InvalidArgumentError(absl::StrCat("weight must be > 0, got ", weight));
  }
  if (!sum_.has_value()) {
    sum_ = delta.Scaled(weight);
  } else {
    FL_RETURN_IF_ERROR(sum_->CheckSameLayout(delta));
    sum_->Axpy(weight, delta);
  }
  total_weight_ += weight;
  ++count_;
  return absl::OkStatus();
}

absl::StatusOr<fl::ModelState> WeightedMean::Mean() const {
  if (!sum_.has_value()) return absl::FailedPreconditionError("no update accumulated this round");
  fl::ModelState mean = sum_->Clone();
  mean.Scale(1.0 / total_weight_);
  return mean;
}

absl::StatusOr<fl::ModelState> WeightedMean::StepFrom(const fl::ModelState& global,
                                                      double server_lr) const {
  if (!sum_.has_value()) return absl::FailedPreconditionError("no update accumulated this round");
  FL_RETURN_IF_ERROR(global.CheckSameLayout(*sum_));
  return fl::ModelState::Sum(global, server_lr / total_weight_, 1.0 / total_weight_, *sum_);
}

void WeightedMean::Reset() {
  sum_.reset();
  total_weight_ = 0.0;
  count_ = 0;
}

double WeightOf(const fl::ClientUpdate& update, ClientWeighting weighting) {
  return weighting == ClientWeighting::kUniform ? 1.0 : static_cast<double>(update.num_examples);
}

}  // namespace aggregators
