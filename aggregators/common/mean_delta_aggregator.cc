#include "aggregators/common/mean_delta_aggregator.h"

#include "fl/status_macros.h"

namespace aggregators {

absl::Status MeanDeltaAggregator::Accumulate(fl::ClientUpdate update, fl::ServerContext& context) {
  return mean_.Add(update.delta, WeightOf(update, ClientWeighting::kNumExamples));
}

absl::StatusOr<fl::ModelState> MeanDeltaAggregator::Finalize(const fl::ModelState& global,
                                                             fl::ServerContext& context) {
  FL_ASSIGN_OR_RETURN(fl::ModelState next, mean_.StepFrom(global, server_lr_));
  mean_.Reset();
  return next;
}

}  // namespace aggregators
