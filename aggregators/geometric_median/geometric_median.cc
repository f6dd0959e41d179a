// RFA, robust federated aggregation by the geometric median (Pillutla, Kakade &
// Harchaoui, "Robust Aggregation for Federated Learning", IEEE TSP 2022). The
// server moves to an approximate weighted geometric median of the clients' updates,
//
//   v* = argmin_v sum_i alpha_i ||v - delta_i||,   alpha_i = n_i / sum_j n_j,
//   w <- w + eta * v*,
//
// found by the smoothed Weiszfeld algorithm (their Algorithm 2): from v_0, the
// alpha-weighted mean (FedAvg's aggregate, where the authors' code starts),
//
//   beta_i = alpha_i / max(nu, ||v_t - delta_i||),
//   v_{t+1} = sum_i beta_i delta_i / sum_i beta_i,
//
// for at most `iterations` steps (default 3), stopping earlier once a step changes
// the objective sum_i alpha_i ||v - delta_i|| by at most `tolerance` (default 1e-6)
// of its new value. nu (default 1e-6) bounds the weight of a client that v has
// reached, instead of dividing by zero. Norms run over parameters (buffers
// excluded), accumulated in float64; server_lr eta defaults to 1. Diagnostic:
// rfa_iterations, the steps taken this round.
//
// Memory: every update of the round is held until Finalize (K models, O(K P)), and
// each step takes two passes over them (the weighted sum, then the K distances).
// Buffers take the last step's weights beta_i too, never scaled by eta; integer
// buffers (num_batches_tracked) are rounded once, when added to the global model.
// Distributed runs gather the round's updates to one process (no partial sums).
//
//   aggregator {
//     name: "geometric_median"
//     options {
//       [type.googleapis.com/fedkit.aggregators.GeometricMedianOptions] { iterations: 3 nu: 1e-6 }
//     }
//   }

#include <algorithm>
#include <cmath>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "aggregators/common/conformance_reasons.h"
#include "aggregators/geometric_median/geometric_median_options.pb.h"
#include "aggregators/common/held_updates.h"
#include "fl/aggregator.h"
#include "fl/errors.h"
#include "fl/registry.h"
#include "fl/status_macros.h"

namespace aggregators {
namespace {

struct Config {
  int iterations = 3;
  double nu = 1e-6;
  double tolerance = 1e-6;
  double server_lr = 1.0;
};

// ||v - delta_i|| over parameters, for every update.
std::vector<double> Distances(const fl::ModelState& v,
                              const std::vector<fl::ClientUpdate>& updates) {
  std::vector<double> distances;
  distances.reserve(updates.size());
  for (const fl::ClientUpdate& u : updates) {
    distances.push_back(std::sqrt(fl::ModelState::Difference(v, u.delta).SquaredNorm()));
  }
  return distances;
}

double Objective(const std::vector<double>& alpha, const std::vector<double>& distances) {
  double sum = 0.0;
  for (size_t i = 0; i < alpha.size(); ++i) sum += alpha[i] * distances[i];
  return sum;
}

class GeometricMedian : public fl::Aggregator {
 public:
  explicit GeometricMedian(Config config) : config_(config) {}

  fl::AggregatorProperties properties() const override {
    fl::AggregatorProperties properties;
    properties.order_invariant = true;
    // One client: every step returns its own delta.
    properties.single_client_identity = config_.server_lr == 1.0;
    return properties;
  }

  absl::Status Accumulate(fl::ClientUpdate update, fl::ServerContext& context) override {
    if (update.num_examples < 1) {
      return absl::InvalidArgumentError(absl::StrCat("num_examples is ", update.num_examples,
                                                     ": RFA weighs each client by its data size"));
    }
    update.extras.clear();  // the rule reads deltas only: hold no more than they
    return held_.Add(std::move(update));
  }

  absl::StatusOr<fl::ModelState> Finalize(const fl::ModelState& global,
                                          fl::ServerContext& context) override {
    FL_ASSIGN_OR_RETURN(std::vector<fl::ClientUpdate> updates, held_.Take(global));
    std::vector<double> alpha;
    double total = 0.0;
    for (const fl::ClientUpdate& u : updates) total += static_cast<double>(u.num_examples);
    for (const fl::ClientUpdate& u : updates) alpha.push_back(u.num_examples / total);

    fl::ModelState v = WeightedCombination(updates, alpha);
    std::vector<double> distances = Distances(v, updates);
    double objective = Objective(alpha, distances);
    int steps = 0;
    while (steps < config_.iterations) {
      std::vector<double> beta;
      for (size_t i = 0; i < updates.size(); ++i) {
        beta.push_back(alpha[i] / std::max(config_.nu, distances[i]));
      }
      v = WeightedCombination(updates, beta);
      ++steps;
      if (steps == config_.iterations) break;  // no stopping test to feed
      distances = Distances(v, updates);
      const double previous = objective;
      objective = Objective(alpha, distances);
      if (std::abs(previous - objective) <= config_.tolerance * objective) break;
    }
    context.diagnostics["rfa_iterations"] = steps;
    return fl::ModelState::Sum(global, config_.server_lr, 1.0, v);
  }

 private:
  const Config config_;
  HeldUpdates held_;
};

absl::StatusOr<std::unique_ptr<fl::Aggregator>> CreateGeometricMedian(
    const fedkit::aggregators::GeometricMedianOptions& options, const fl::Aggregator::CreateArgs&) {
  fl::ErrorList errors;
  Config config;
  if (options.has_iterations()) {
    config.iterations = options.iterations();
    if (config.iterations < 1) {
      errors.Add("options.iterations", absl::StrCat("must be >= 1, got ", config.iterations));
    }
  }
  if (options.has_nu()) {
    config.nu = options.nu();
    if (!(config.nu > 0) || !std::isfinite(config.nu)) {
      errors.Add("options.nu", absl::StrCat("must be > 0, got ", config.nu));
    }
  }
  if (options.has_tolerance()) {
    config.tolerance = options.tolerance();
    if (!(config.tolerance >= 0) || !std::isfinite(config.tolerance)) {
      errors.Add("options.tolerance", absl::StrCat("must be >= 0, got ", config.tolerance));
    }
  }
  if (options.has_server_lr()) {
    config.server_lr = options.server_lr();
    if (!(config.server_lr > 0) || !std::isfinite(config.server_lr)) {
      errors.Add("options.server_lr", absl::StrCat("must be > 0, got ", config.server_lr));
    }
  }
  FL_RETURN_IF_ERROR(errors.ToStatus());
  return std::make_unique<GeometricMedian>(config);
}

FL_REGISTER_PLUGIN(fl::Aggregator, "geometric_median", fedkit::aggregators::GeometricMedianOptions,
                   CreateGeometricMedian);
FL_CONFORMANCE_REASON("geometric_median", kNoPartialSums,
                      "every Weiszfeld step reweighs each update by its distance to the "
                      "current estimate: several passes over every update");

}  // namespace
}  // namespace aggregators
