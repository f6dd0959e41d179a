#include "aggregators/common/weighted_mean.h"

#include "fl/status_macros.h"
#include "glog/logging.h"

namespace aggregators {

absl::Status WeightedMean::Add(const fl::ModelState& delta, double weight) {
  CHECK_GT(weight, 0.0);
  if (!sum_.has_value()) {
    sum_ = delta.ZerosLike();
  } else {
    FL_RETURN_IF_ERROR(sum_->CheckSameLayout(delta));
  }
  sum_->Axpy(weight, delta);
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

void WeightedMean::Reset() {
  sum_.reset();
  total_weight_ = 0.0;
  count_ = 0;
}

double WeightOf(const fl::ClientUpdate& update, ClientWeighting weighting) {
  return weighting == ClientWeighting::kUniform ? 1.0 : static_cast<double>(update.num_examples);
}

}  // namespace aggregators
