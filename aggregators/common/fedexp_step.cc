#include "aggregators/common/fedexp_step.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "fl/errors.h"
#include "fl/status_macros.h"

namespace aggregators {

void SquaredNormMean::Add(double squared_norm, double weight) {
  weighted_sum_ += weight * squared_norm;
  total_weight_ += weight;
}

void SquaredNormMean::AddPartialSums(absl::string_view prefix, NamedSums& sums) const {
  sums[absl::StrCat(prefix, "weighted_sum")] = ScalarSum(weighted_sum_);
  sums[absl::StrCat(prefix, "total_weight")] = ScalarSum(total_weight_);
}

std::vector<fl::DpSum> SquaredNormMean::DpSums(absl::string_view prefix) {
  return {{absl::StrCat(prefix, "weighted_sum"), fl::DpSum::Role::kSquaredNormSum},
          {absl::StrCat(prefix, "total_weight"), fl::DpSum::Role::kWeightTotal}};
}

void SquaredNormMean::MergePartialSums(absl::string_view prefix, const NamedSums& sums) {
  weighted_sum_ = sums.at(absl::StrCat(prefix, "weighted_sum")).item<double>();
  total_weight_ = sums.at(absl::StrCat(prefix, "total_weight")).item<double>();
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

absl::StatusOr<FedExpStepConfig> FedExpStepConfigFromOptions(
    const fedkit::aggregators::FedExpOptions& options, absl::string_view path) {
  FedExpStepConfig config;
  if (options.has_epsilon()) config.epsilon = options.epsilon();
  config.paper_form = options.epsilon_form() == fedkit::aggregators::FedExpOptions::PAPER;
  // The paper's eps is a constant; the code decays it with its local lr.
  config.epsilon_decay = options.has_epsilon_decay() ? options.epsilon_decay()
                         : config.paper_form     ? 1.0
                                                 : 0.998;
  if (options.has_evaluate_last_two_average()) {
    config.evaluate_last_two_average = options.evaluate_last_two_average();
  }
  fl::ErrorList errors;
  if (!(config.epsilon >= 0) || !std::isfinite(config.epsilon)) {
    errors.Add(absl::StrCat(path, ".epsilon"), absl::StrCat("must be >= 0, got ", config.epsilon));
  }
  if (!(config.epsilon_decay > 0 && config.epsilon_decay <= 1)) {
    errors.Add(absl::StrCat(path, ".epsilon_decay"),
               absl::StrCat("must be in (0, 1], got ", config.epsilon_decay));
  }
  FL_RETURN_IF_ERROR(errors.ToStatus());
  return config;
}

fl::ModelState TakeFedExpStep(const fl::ModelState& global, const fl::ModelState& mean_delta,
                              double mean_sq_norm, int num_clients,
                              const FedExpStepConfig& config, fl::ServerContext& context) {
  const double mean_update_sq_norm = mean_delta.SquaredNorm();
  const FedExpStep step =
      ComputeFedExpStep(mean_sq_norm, mean_update_sq_norm, num_clients, context.round, config);
  context.diagnostics["eta_g"] = step.eta_g;
  context.diagnostics["fedexp_epsilon"] = step.epsilon_t;
  context.diagnostics["fedexp_mean_sq_norm"] = mean_sq_norm;
  context.diagnostics["fedexp_mean_update_sq_norm"] = mean_update_sq_norm;
  fl::ModelState next = global.Clone();
  next.Axpy(step.eta_g, 1.0, mean_delta);
  if (config.evaluate_last_two_average && context.round > 1) {
    // Parameters (w_{t+1} + w_t) / 2; buffers w_{t+1}'s, whose statistics belong
    // to no average of weights.
    fl::ModelState average = next.Clone();
    average.Axpy(1.0, 0.0, global);
    for (size_t i = 0; i < average.size(); ++i) {
      if (!average.entries()[i].is_buffer) average.mutable_tensor(i).mul_(0.5);
    }
    context.evaluation_model = std::move(average);
  }
  return next;
}

}  // namespace aggregators
