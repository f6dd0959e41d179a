#include "aggregators/common/mean_delta_aggregator.h"

#include "fl/status_macros.h"

namespace aggregators {

absl::Status MeanDeltaAggregator::Accumulate(fl::ClientUpdate update, fl::ServerContext& context) {
  return mean_.Add(update.delta, WeightOf(update, ClientWeighting::kNumExamples));
}

absl::StatusOr<fl::ModelState> MeanDeltaAggregator::Finalize(const fl::ModelState& global,
                                                             fl::ServerContext& context) {
  FL_ASSIGN_OR_RETURN(fl::ModelState mean_delta, mean_.Mean());
  mean_.Reset();
  fl::ModelState next = global.Clone();
  next.Axpy(server_lr_, 1.0, mean_delta);
  return next;
}

}  // namespace aggregators
