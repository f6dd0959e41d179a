// Coordinate-wise median (Yin, Chen, Ramchandran & Bartlett, "Byzantine-Robust
// Distributed Learning: Towards Optimal Statistical Rates", ICML 2018, Algorithm 1
// with option I), applied to the clients' model updates rather than to gradients:
//
//   w <- w + eta * med_k(delta_k),   med taken separately for every coordinate,
//
// with a server learning rate eta (default 1, the paper's rule). For an even
// number K of updates a coordinate's median is the mean of its two middle values.
// The rule is unweighted: num_examples is ignored (a client cannot buy influence
// by claiming a large dataset).
//
// Memory: every update of the round is held until Finalize (K models, O(K P)),
// since a median needs all K values of a coordinate at once. Buffers take the
// median of the clients' values too, never scaled by eta; integer buffers
// (num_batches_tracked) are rounded once, when added to the global model.
// Distributed runs gather the round's updates to one process (no partial sums).
//
//   aggregator {
//     name: "median"
//     options { [type.googleapis.com/fedkit.aggregators.MedianOptions] { server_lr: 1.0 } }
//   }

#include <cmath>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "aggregators/common/conformance_reasons.h"
#include "aggregators/median/median_options.pb.h"
#include "aggregators/common/held_updates.h"
#include "fl/aggregator.h"
#include "fl/registry.h"
#include "fl/status_macros.h"

namespace aggregators {
namespace {

class Median : public fl::Aggregator {
 public:
  explicit Median(double server_lr) : server_lr_(server_lr) {}

  fl::AggregatorProperties properties() const override {
    fl::AggregatorProperties properties;
    // Sorting sees the same values whatever order they arrive in.
    properties.order_invariant = true;
    properties.single_client_identity = server_lr_ == 1.0;
    return properties;
  }

  absl::Status Accumulate(fl::ClientUpdate update, fl::ServerContext& context) override {
    update.extras.clear();  // the rule reads deltas only: hold no more than they
    return held_.Add(std::move(update));
  }

  absl::StatusOr<fl::ModelState> Finalize(const fl::ModelState& global,
                                          fl::ServerContext& context) override {
    FL_ASSIGN_OR_RETURN(std::vector<fl::ClientUpdate> updates, held_.Take(global));
    return fl::ModelState::Sum(global, server_lr_, 1.0, CoordinateWise(updates, CoordinateMedian));
  }

 private:
  const double server_lr_;
  HeldUpdates held_;
};

absl::StatusOr<std::unique_ptr<fl::Aggregator>> CreateMedian(
    const fedkit::aggregators::MedianOptions& options, const fl::Aggregator::CreateArgs&) {
  const double server_lr = options.has_server_lr() ? options.server_lr() : 1.0;
  if (!(server_lr > 0) || !std::isfinite(server_lr)) {
    return absl::InvalidArgumentError(
        absl::StrCat("options.server_lr: must be > 0, got ", server_lr));
  }
  return std::make_unique<Median>(server_lr);
}

FL_REGISTER_PLUGIN(fl::Aggregator, "median", fedkit::aggregators::MedianOptions, CreateMedian);
FL_CONFORMANCE_REASON("median", kNoPartialSums,
                      "the coordinate-wise median is an order statistic of every update's "
                      "value at each coordinate, not a sum over updates");

}  // namespace
}  // namespace aggregators
