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

#include "fl/model_state.h"

namespace aggregators {

struct FedExpStepConfig {
  double epsilon = 1e-3;
  double epsilon_decay = 0.998;
  // true: eps_eff = eps_t (paper); false: eps_eff = M * eps_t (official code).
  bool paper_form = false;
};

// Running sum_i p_i ||Delta_i||^2 over parameters, in float64.
class SquaredNormMean {
 public:
  void Add(const fl::ModelState& delta, double weight);
  // sum_i p_i ||Delta_i||^2 / sum_i p_i; 0 when empty.
  double Mean() const { return total_weight_ > 0 ? weighted_sum_ / total_weight_ : 0.0; }
  void Reset() { weighted_sum_ = total_weight_ = 0.0; }

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

}  // namespace aggregators

#endif  // AGGREGATORS_COMMON_FEDEXP_STEP_H_
