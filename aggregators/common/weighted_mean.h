#ifndef AGGREGATORS_COMMON_WEIGHTED_MEAN_H_
#define AGGREGATORS_COMMON_WEIGHTED_MEAN_H_

// The running weighted mean of client deltas that most aggregators start from:
// Add() accumulates w_k * delta_k in place (O(P) memory whatever the cohort),
// Mean() returns sum_k w_k delta_k / sum_k w_k. Not a plugin: a library the
// aggregator plugins share.

#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "aggregators/common/partial_sums.h"
#include "fl/aggregator.h"
#include "fl/client_update.h"
#include "fl/model_state.h"

namespace aggregators {

class WeightedMean {
 public:
  // An error (and nothing added) when weight <= 0 (e.g. a client with no data) or
  // when `delta`'s layout differs from the earlier ones'.
  absl::Status Add(const fl::ModelState& delta, double weight);

  bool empty() const { return !sum_.has_value(); }
  double total_weight() const { return total_weight_; }
  int count() const { return count_; }

  // FailedPrecondition when nothing was added.
  absl::StatusOr<fl::ModelState> Mean() const;
  // global + server_lr * Mean() over parameters, global + Mean() over buffers (the
  // clients' weighted mean values): FedAvg's step, in one pass over the sums.
  // FailedPrecondition when nothing was added.
  absl::StatusOr<fl::ModelState> StepFrom(const fl::ModelState& global, double server_lr) const;

  void Reset();

  // For distributed runs (fl::Aggregator::PartialSums): the accumulation as
  // "<prefix>sum/<entry name>", "<prefix>total_weight" (float64) and
  // "<prefix>count" (int64), added to `sums`; the sum is zeros laid out as
  // `global` (this round's global model) when nothing was added.
  void AddPartialSums(absl::string_view prefix, const fl::ModelState& global,
                      NamedSums& sums) const;
  // Replaces the accumulation by the processes' summed AddPartialSums.
  // REQUIRES: `sums` passed CheckPartialSums against them.
  void MergePartialSums(absl::string_view prefix, const fl::ModelState& global,
                        const NamedSums& sums);
  // What those sums are under differential privacy (fl::DpSum): the weighted sum
  // of deltas, the total weight and the count.
  static std::vector<fl::DpSum> DpSums(absl::string_view prefix);

 private:
  std::optional<fl::ModelState> sum_;
  double total_weight_ = 0.0;
  int count_ = 0;
};

// How the cohort's updates are weighted in the mean.
enum class ClientWeighting {
  kNumExamples,  // w_k = n_k, renormalised over the participants (FedAvg)
  kUniform,      // w_k = 1 (SCAFFOLD's paper form)
};

double WeightOf(const fl::ClientUpdate& update, ClientWeighting weighting);

}  // namespace aggregators

#endif  // AGGREGATORS_COMMON_WEIGHTED_MEAN_H_
