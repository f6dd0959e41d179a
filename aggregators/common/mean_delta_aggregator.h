#ifndef AGGREGATORS_COMMON_MEAN_DELTA_AGGREGATOR_H_
#define AGGREGATORS_COMMON_MEAN_DELTA_AGGREGATOR_H_

// The FedAvg server step, for the plugins built on it (fedavg, fedprox):
//   w <- w + server_lr * sum_k (n_k / n) delta_k
// over parameters, and the plain weighted mean of the clients' values for buffers.
// Updates are accumulated in place (O(P) memory); the accumulation is a sum,
// all-reduced in distributed runs. Subclasses add what their method needs around
// it, e.g. a RoundPlan asking for client hooks, and call this Configure.

#include <optional>

#include "aggregators/common/weighted_mean.h"
#include "fl/aggregator.h"

namespace aggregators {

class MeanDeltaAggregator : public fl::Aggregator {
 public:
  explicit MeanDeltaAggregator(double server_lr) : server_lr_(server_lr) {}

  fl::AggregatorProperties properties() const override;

  absl::StatusOr<fl::RoundPlan> Configure(const fl::ModelState& global,
                                          fl::ServerContext& context) override;
  absl::Status Accumulate(fl::ClientUpdate update, fl::ServerContext& context) override;
  absl::StatusOr<fl::ModelState> Finalize(const fl::ModelState& global,
                                          fl::ServerContext& context) override;
  std::optional<NamedSums> PartialSums() const override;
  absl::Status MergePartialSums(NamedSums sums) override;

 private:
  double server_lr_;
  WeightedMean mean_;
  // This round's global model (sharing the server's storage): the layout of the
  // partial sums of a process that accumulated nothing.
  std::optional<fl::ModelState> global_;
};

}  // namespace aggregators

#endif  // AGGREGATORS_COMMON_MEAN_DELTA_AGGREGATOR_H_
