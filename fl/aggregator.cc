#include "fl/aggregator.h"

#include "absl/strings/str_cat.h"

namespace fl {

absl::StatusOr<RoundPlan> Aggregator::Configure(const ModelState& global,
                                                ServerContext& context) {
  return RoundPlan{};
}

absl::Status Aggregator::MergePartialSums(std::map<std::string, at::Tensor> sums) {
  return absl::UnimplementedError("this aggregator's accumulation is not a sum of partials");
}

absl::Status Aggregator::RestoreState(const std::map<std::string, at::Tensor>& state) {
  if (state.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "this aggregator keeps no state, but the checkpoint holds ", state.size(), " tensors"));
}

}  // namespace fl
