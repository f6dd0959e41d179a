#ifndef AGGREGATORS_COMMON_FEDEXP_STEP_H_
#define AGGREGATORS_COMMON_FEDEXP_STEP_H_

// FedExP's server step size (Jhunjhunwala, Wang & Joshi, ICLR 2023, the eta_g rule
// of the paper's Section 3; official code Divyansh03/FedExP main.py L347-410):
//
//   A      = sum_i p_i ||Delta_i||^2 / sum_i p_i          (p_i data-size weights)
//   eta_g  = max(1, A / (2 (||mean Delta||^2 + eps_eff)))
//   eps_t  = epsilon * epsilon_decay^(2 t)                 (t = round, 1-based)
//   eps_eff = M * eps_t (the official code, default) or eps_t (the paper's formula),
//             M = number of participating clients.
//
// With uniform weights the paper form is exactly the paper's
// max(1, sum ||Delta_i||^2 / (2M (||mean Delta||^2 + eps))). Norms run over
// parameters only, accumulated in float64. Shared by the fedexp aggregator and by
// SCAFFOLD(ExP).

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "aggregators/common/partial_sums.h"
#include "aggregators/fedexp/fedexp_options.pb.h"
#include "fl/aggregator.h"
#include "fl/model_state.h"

namespace aggregators {

struct FedExpStepConfig {
  double epsilon = 1e-3;
  double epsilon_decay = 0.998;  // 1 under the paper form unless set
  // true: eps_eff = eps_t (paper); false: eps_eff = M * eps_t (official code).
  bool paper_form = false;
  // Evaluate (w_{t+1} + w_t) / 2 from round 2 on.
  bool evaluate_last_two_average = true;
};

// The config an options message asks for, with defaults filled in; errors name
// their fields under `path` (e.g. "options" or "options.extrapolation").
absl::StatusOr<FedExpStepConfig> FedExpStepConfigFromOptions(
    const fedkit::aggregators::FedExpOptions& options, absl::string_view path);

// Running sum_i p_i ||Delta_i||^2 over parameters, in float64.
class SquaredNormMean {
 public:
  void Add(const fl::ModelState& delta, double weight) { Add(delta.SquaredNorm(), weight); }
  void Add(double squared_norm, double weight);
  // sum_i p_i ||Delta_i||^2 / sum_i p_i; 0 when empty.
  double Mean() const { return total_weight_ > 0 ? weighted_sum_ / total_weight_ : 0.0; }
  void Reset() { weighted_sum_ = total_weight_ = 0.0; }

  // For distributed runs: "<prefix>weighted_sum" and "<prefix>total_weight"
  // (float64 scalars) added to `sums`, and the processes' sums of them taken back.
  // REQUIRES (merge): `sums` passed CheckPartialSums.
  void AddPartialSums(absl::string_view prefix, NamedSums& sums) const;
  void MergePartialSums(absl::string_view prefix, const NamedSums& sums);
  // What those sums are under differential privacy (fl::DpSum).
  static std::vector<fl::DpSum> DpSums(absl::string_view prefix);

 private:
  double weighted_sum_ = 0.0;
  double total_weight_ = 0.0;
};

struct FedExpStep {
  double eta_g = 1.0;
  double epsilon_t = 0.0;  // eps_t, before the M factor
};

// The step for a round with `num_clients` participants, mean squared update norm
// `mean_sq_norm` (A above) and squared norm of the mean update `mean_update_sq_norm`.
FedExpStep ComputeFedExpStep(double mean_sq_norm, double mean_update_sq_norm, int num_clients,
                             int round, const FedExpStepConfig& config);

// The whole server step: w_{t+1} = w_t + eta_g * mean_delta over parameters (buffers
// take mean_delta unscaled, i.e. the clients' weighted mean), eta_g from the round's
// `num_clients` updates with weighted mean squared norm `mean_sq_norm`. Reports
// eta_g, fedexp_epsilon, fedexp_mean_sq_norm and fedexp_mean_update_sq_norm as
// diagnostics and sets the evaluation model when the config asks for the average.
fl::ModelState TakeFedExpStep(const fl::ModelState& global, const fl::ModelState& mean_delta,
                              double mean_sq_norm, int num_clients,
                              const FedExpStepConfig& config, fl::ServerContext& context);

}  // namespace aggregators

#endif  // AGGREGATORS_COMMON_FEDEXP_STEP_H_
