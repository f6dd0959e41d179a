// Coordinate-wise trimmed mean (Yin, Chen, Ramchandran & Bartlett, "Byzantine-Robust
// Distributed Learning: Towards Optimal Statistical Rates", ICML 2018, Algorithm 1
// with option II), applied to the clients' model updates rather than to gradients.
// For every coordinate, of the round's K values the b = floor(beta K) largest and
// the b smallest are dropped and the remaining K - 2b averaged:
//
//   w <- w + eta * trmean_beta(delta_1, ..., delta_K),
//
// with a server learning rate eta (default 1, the paper's rule). The paper's beta
// is the fraction of Byzantine machines one expects (beta >= that fraction); here
// it is an option in [0, 0.5), default 0.1. Since 2 floor(beta K) <= 2 beta K < K,
// at least one value always remains, whatever K the round has. The rule is
// unweighted: num_examples is ignored.
//
// Memory: every update of the round is held until Finalize (K models, O(K P)),
// since trimming needs all K values of a coordinate at once. Buffers take the
// trimmed mean of the clients' values too, never scaled by eta; integer buffers
// (num_batches_tracked) are rounded once, when added to the global model.
// Distributed runs gather the round's updates to one process (no partial sums).
//
//   aggregator {
//     name: "trimmed_mean"
//     options { [type.googleapis.com/fedkit.aggregators.TrimmedMeanOptions] { beta: 0.2 } }
//   }

#include <cmath>
#include <memory>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "aggregators/common/conformance_reasons.h"
#include "aggregators/common/held_updates.h"
#include "aggregators/trimmed_mean/trimmed_mean_options.pb.h"
#include "fl/aggregator.h"
#include "fl/errors.h"
#include "fl/registry.h"
#include "fl/status_macros.h"
#include "glog/logging.h"

namespace aggregators {
namespace {

constexpr double kDefaultBeta = 0.1;

class TrimmedMean : public fl::Aggregator {
 public:
  TrimmedMean(double beta, double server_lr) : beta_(beta), server_lr_(server_lr) {}

  fl::AggregatorProperties properties() const override {
    fl::AggregatorProperties properties;
    // Sorting sees the same values whatever order they arrive in.
    properties.order_invariant = true;
    // One value per coordinate: floor(beta) = 0 are trimmed.
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
    const auto k = static_cast<int64_t>(updates.size());
    const auto trimmed = static_cast<int64_t>(std::floor(beta_ * static_cast<double>(k)));
    CHECK_LT(2 * trimmed, k) << "beta < 0.5 leaves at least one value";
    const fl::ModelState mean = CoordinateWise(updates, [&](const at::Tensor& values) {
      return at::msort(values).narrow(0, trimmed, k - 2 * trimmed).mean(0);
    });
    return fl::ModelState::Sum(global, server_lr_, 1.0, mean);
  }

 private:
  const double beta_;
  const double server_lr_;
  HeldUpdates held_;
};

absl::StatusOr<std::unique_ptr<fl::Aggregator>> CreateTrimmedMean(
    const fedkit::aggregators::TrimmedMeanOptions& options, const fl::Aggregator::CreateArgs&) {
  fl::ErrorList errors;
  const double beta = options.has_beta() ? options.beta() : kDefaultBeta;
  if (!(beta >= 0.0 && beta < 0.5)) {
    errors.Add("options.beta", absl::StrCat("must be in [0, 0.5), got ", beta));
  }
  const double server_lr = options.has_server_lr() ? options.server_lr() : 1.0;
  if (!(server_lr > 0) || !std::isfinite(server_lr)) {
    errors.Add("options.server_lr", absl::StrCat("must be > 0, got ", server_lr));
  }
  FL_RETURN_IF_ERROR(errors.ToStatus());
  return std::make_unique<TrimmedMean>(beta, server_lr);
}

FL_REGISTER_PLUGIN(fl::Aggregator, "trimmed_mean", fedkit::aggregators::TrimmedMeanOptions,
                   CreateTrimmedMean);
FL_CONFORMANCE_REASON("trimmed_mean", kNoPartialSums,
                      "which values are trimmed at each coordinate depends on every update's "
                      "value there (order statistics), not on sums over updates");

}  // namespace
}  // namespace aggregators
