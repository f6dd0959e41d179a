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

void WeightedMean::AddPartialSums(absl::string_view prefix, const fl::ModelState& global,
                                  NamedSums& sums) const {
  AddStateSums(absl::StrCat(prefix, "sum/"), sum_.has_value() ? *sum_ : global.ZerosLike(), sums);
  sums[absl::StrCat(prefix, "total_weight")] = ScalarSum(total_weight_);
  sums[absl::StrCat(prefix, "count")] = CountSum(count_);
}

void WeightedMean::MergePartialSums(absl::string_view prefix, const fl::ModelState& global,
                                    const NamedSums& sums) {
  Reset();
  count_ = static_cast<int>(sums.at(absl::StrCat(prefix, "count")).item<int64_t>());
  // No update on any process: as empty as one that saw none.
  if (count_ == 0) return;
  sum_ = StateFromSums(absl::StrCat(prefix, "sum/"), global, sums);
  total_weight_ = sums.at(absl::StrCat(prefix, "total_weight")).item<double>();
}

std::vector<fl::DpSum> WeightedMean::DpSums(absl::string_view prefix) {
  using Role = fl::DpSum::Role;
  return {{absl::StrCat(prefix, "sum/"), Role::kUpdateSum},
          {absl::StrCat(prefix, "total_weight"), Role::kWeightTotal},
          {absl::StrCat(prefix, "count"), Role::kCount}};
}

double WeightOf(const fl::ClientUpdate& update, ClientWeighting weighting) {
  return weighting == ClientWeighting::kUniform ? 1.0 : static_cast<double>(update.num_examples);
}

}  // namespace aggregators
