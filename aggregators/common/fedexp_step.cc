#include "aggregators/common/fedexp_step.h"

#include <algorithm>
#include <cmath>

namespace aggregators {

void SquaredNormMean::Add(const fl::ModelState& delta, double weight) {
  weighted_sum_ += weight * delta.SquaredNorm();
  total_weight_ += weight;
}

FedExpStep ComputeFedExpStep(double mean_sq_norm, double mean_update_sq_norm, int num_clients,
                             int round, const FedExpStepConfig& config) {
  FedExpStep step;
  step.epsilon_t = config.epsilon * std::pow(config.epsilon_decay, 2.0 * round);
  const double eps_eff = config.paper_form ? step.epsilon_t : num_clients * step.epsilon_t;
  const double denominator = 2.0 * (mean_update_sq_norm + eps_eff);
  // Every update zero and eps = 0: nothing to extrapolate.
  step.eta_g = denominator > 0 ? std::max(1.0, mean_sq_norm / denominator) : 1.0;
  return step;
}

}  // namespace aggregators
