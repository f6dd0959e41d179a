#include "aggregators/common/mean_delta_aggregator.h"

#include "fl/status_macros.h"
#include "glog/logging.h"

namespace aggregators {

fl::AggregatorProperties MeanDeltaAggregator::properties() const {
  fl::AggregatorProperties properties;
  properties.dp_sums = WeightedMean::DpSums("");
  properties.sums_only = true;
  return properties;
}

absl::StatusOr<fl::RoundPlan> MeanDeltaAggregator::Configure(const fl::ModelState& global,
                                                             fl::ServerContext& context) {
  global_ = global;
  mean_.Reset();
  return fl::RoundPlan();
}

absl::Status MeanDeltaAggregator::Accumulate(fl::ClientUpdate update, fl::ServerContext& context) {
  return mean_.Add(update.delta, WeightOf(update, ClientWeighting::kNumExamples));
}

absl::StatusOr<fl::ModelState> MeanDeltaAggregator::Finalize(const fl::ModelState& global,
                                                             fl::ServerContext& context) {
  global_.reset();
  FL_ASSIGN_OR_RETURN(fl::ModelState next, mean_.StepFrom(global, server_lr_));
  mean_.Reset();
  return next;
}

std::optional<NamedSums> MeanDeltaAggregator::PartialSums() const {
  CHECK(global_.has_value()) << "PartialSums before Configure";
  NamedSums sums;
  mean_.AddPartialSums("", *global_, sums);
  return sums;
}

absl::Status MeanDeltaAggregator::MergePartialSums(NamedSums sums) {
  FL_RETURN_IF_ERROR(CheckMergeable(*this, global_.has_value(), sums));
  mean_.MergePartialSums("", *global_, sums);
  return absl::OkStatus();
}

}  // namespace aggregators
