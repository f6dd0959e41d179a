#ifndef FL_SECURE_AGGREGATION_H_
#define FL_SECURE_AGGREGATION_H_

// Secure aggregation inside a round (ServerSpec.secure_aggregation): the round's
// sum moves through the protocol of fl/secagg/protocol.h, so the server's
// aggregator receives the total of the cohort's partial sums and never one
// client's update.
//
// Each client's half (Contribute) is what its device would run: clip the update
// to the public norm bound, accumulate it alone into a fresh instance of the
// run's aggregator (the same partial sums a distributed run all-reduces), encode
// those sums in Z_2^32 (fl/secagg/fixed_point.h) and mask them. The server's half
// (Unmask) only sums masked vectors and rebuilds the masks of clients that dropped
// out after the key exchange. Fewer contributions than the threshold abort the
// round: the caller keeps the model.
//
// Every value of a client's partial sums must lie in the public range, by default
// [-max_weight x max(1, B)^2, +...] (B the norm bound): a weighted update's
// elements are at most max_weight x B, a weighted squared norm at most
// max_weight x B^2, weights and counts at most max_weight. Other statistics need
// a range of their own (value_range). Values beyond are clipped (saturated_values
// counts them); the decoded sum is the true one to within one quantum per
// contribution (FixedPoint).

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/statusor.h"
#include "fl/aggregator.h"
#include "fl/client_update.h"
#include "fl/model_state.h"
#include "fl/secagg/fixed_point.h"
#include "fl/secagg/protocol.h"

namespace fl {

struct SecureAggregationConfig {
  // Shares needed to rebuild a secret and the fewest contributions; 0: a majority
  // of the neighbourhood (DefaultThreshold).
  int threshold = 0;
  // 0: complete graph; k > 0: SecAgg+ with k neighbours.
  int neighbours = 0;
  // Each client's update is clipped to this L2 norm (over parameters); > 0.
  double update_norm_bound = 0.0;
  // The largest weight one client contributes; > 0.
  double max_weight = 1.0;
  // Every value of one client's partial sums lies in [-value_range, value_range];
  // 0: max_weight x max(1, update_norm_bound)^2.
  double value_range = 0.0;
};

// The clients each client shares with, itself included, in a cohort of n.
int NeighbourhoodSize(int cohort_size, int neighbours);
// floor(m / 2) + 1 for a neighbourhood of m, at least 2.
int DefaultThreshold(int cohort_size, int neighbours);

// One round of secure aggregation over a cohort.
class SecureAggregationRound {
 public:
  // Runs the protocol's key advertisement and share exchange for `cohort` (client
  // ids, distinct). `layout`: the server aggregator's partial sums after Configure,
  // whose names, shapes and dtypes every client's must have. Errors: FailedPrecondition when the cohort is smaller than the
  // threshold or its neighbourhood (the round aborts); InvalidArgument for a bad
  // configuration; Unavailable when the OS gives no randomness for the keys.
  // `seed` drives the encoding's rounding and SecAgg+'s neighbour graph; each
  // client's keys come from the OS, so the total is reproducible and no one can
  // recompute a mask from the spec.
  static absl::StatusOr<std::unique_ptr<SecureAggregationRound>> Start(
      const SecureAggregationConfig& config, const std::vector<int64_t>& cohort,
      const std::map<std::string, at::Tensor>& layout, uint64_t seed);

  // The client's half: `update` clipped, accumulated alone into `client_side` (a
  // fresh instance of the run's aggregator, configured here from `global` and a
  // copy of `context`), encoded and masked, and sent. An error is the client's
  // aggregator refusing the update (it then sends nothing) or a layout mismatch.
  absl::Status Contribute(const ClientUpdate& update, Aggregator& client_side,
                          const ModelState& global, const ServerContext& context);

  // The server's half: the total of the contributions, in `layout`'s tensors.
  // FailedPrecondition when fewer than the threshold contributed (the round
  // aborts). REQUIRES: called once, after every Contribute.
  absl::StatusOr<std::map<std::string, at::Tensor>> Unmask();

  int threshold() const { return threshold_; }
  int contributions() const { return static_cast<int>(contributed_.size()); }
  // Updates whose norm exceeded the bound; values clipped by the encoding.
  int clipped_updates() const { return clipped_updates_; }
  int64_t saturated_values() const { return saturated_values_; }
  // The value of one unit of the encoding: a decoded sum is within
  // contributions() x quantum() of the true one per value.
  double quantum() const { return 1.0 / encoding_.scale(); }
  // What the protocol moved: keys, encrypted shares, masked vectors and revealed
  // shares, summed over the cohort.
  int64_t bytes_up() const { return bytes_up_; }
  int64_t bytes_down() const { return bytes_down_; }
  // The public keys the server received: its view of the key exchange.
  const std::map<int64_t, secagg::PublicKeys>& advertised_keys() const { return server_.keys(); }

 private:
  SecureAggregationRound(const SecureAggregationConfig& config, int threshold,
                         secagg::FixedPoint encoding, std::map<std::string, at::Tensor> layout,
                         uint64_t seed);

  const SecureAggregationConfig config_;
  const int threshold_;
  const secagg::FixedPoint encoding_;
  const std::map<std::string, at::Tensor> layout_;
  const uint64_t seed_;
  int64_t length_ = 0;
  secagg::SecAggServer server_;
  std::map<int64_t, std::unique_ptr<secagg::SecAggClient>> clients_;
  std::set<int64_t> contributed_;
  int clipped_updates_ = 0;
  int64_t saturated_values_ = 0;
  int64_t bytes_up_ = 0;
  int64_t bytes_down_ = 0;
};

}  // namespace fl

#endif  // FL_SECURE_AGGREGATION_H_
