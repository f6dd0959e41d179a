// FedExP (Jhunjhunwala, Wang & Joshi, "FedExP: Speeding Up Federated Averaging via
// Extrapolation", ICLR 2023): FedAvg whose server step size adapts every round to
// how much the clients' updates disagree, borrowing the extrapolated parallel
// projection method (EPPM) of convex feasibility:
//
//   Delta_bar = sum_i p_i Delta_i / sum_i p_i     (p_i data-size weights, renormalised
//                                                   over the participants)
//   eta_g     = max(1, A / (2 (||Delta_bar||^2 + eps_eff))),  A = sum_i p_i ||Delta_i||^2 / sum p_i
//   w_{t+1}   = w_t + eta_g Delta_bar
//
// eps_eff is M * eps_t as in the official code (default) or eps_t as in the paper;
// eps_t decays per round (see fedexp_options.proto and METHODS.md section 3.3).
// The model evaluated is the average of the last two iterates; training continues
// from w_{t+1}. Norms run over parameters in float64; buffers take the plain
// weighted mean of the clients' values. eta_g, eps_t, A and ||Delta_bar||^2 are
// written to metrics.csv every evaluated round (eta_g, fedexp_epsilon,
// fedexp_mean_sq_norm, fedexp_mean_update_sq_norm).
//
// FedProx(ExP) is this aggregator with the "fedprox" client hook in client.hooks;
// SCAFFOLD(ExP) is SCAFFOLD with its `extrapolation` option.
//
//   aggregator {
//     name: "fedexp"
//     options { [type.googleapis.com/fedkit.aggregators.FedExpOptions] { epsilon: 0.1 } }
//   }

#include <cmath>
#include <memory>

#include "absl/strings/str_cat.h"
#include "aggregators/common/fedexp_step.h"
#include "aggregators/common/weighted_mean.h"
#include "aggregators/fedexp/fedexp_options.pb.h"
#include "fl/aggregator.h"
#include "fl/errors.h"
#include "fl/registry.h"
#include "fl/status_macros.h"

namespace aggregators {
namespace {

class FedExp : public fl::Aggregator {
 public:
  FedExp(FedExpStepConfig config, bool evaluate_average)
      : config_(config), evaluate_average_(evaluate_average) {}

  absl::Status Accumulate(fl::ClientUpdate update, fl::ServerContext& context) override {
    const double weight = WeightOf(update, ClientWeighting::kNumExamples);
    FL_RETURN_IF_ERROR(mean_.Add(update.delta, weight));
    norms_.Add(update.delta, weight);
    return absl::OkStatus();
  }

  absl::StatusOr<fl::ModelState> Finalize(const fl::ModelState& global,
                                          fl::ServerContext& context) override {
    FL_ASSIGN_OR_RETURN(fl::ModelState mean_delta, mean_.Mean());
    const double mean_update_sq_norm = mean_delta.SquaredNorm();
    const FedExpStep step = ComputeFedExpStep(norms_.Mean(), mean_update_sq_norm, mean_.count(),
                                              context.round, config_);
    context.diagnostics["eta_g"] = step.eta_g;
    context.diagnostics["fedexp_epsilon"] = step.epsilon_t;
    context.diagnostics["fedexp_mean_sq_norm"] = norms_.Mean();
    context.diagnostics["fedexp_mean_update_sq_norm"] = mean_update_sq_norm;
    mean_.Reset();
    norms_.Reset();

    fl::ModelState next = global.Clone();
    next.Axpy(step.eta_g, 1.0, mean_delta);
    if (evaluate_average_ && context.round > 1) {
      fl::ModelState average = next.Clone();
      average.Axpy(1.0, global);
      average.Scale(0.5);
      context.evaluation_model = std::move(average);
    }
    return next;
  }

 private:
  FedExpStepConfig config_;
  bool evaluate_average_;
  WeightedMean mean_;
  SquaredNormMean norms_;
};

absl::StatusOr<std::unique_ptr<fl::Aggregator>> CreateFedExp(
    const fedkit::aggregators::FedExpOptions& options, const fl::Aggregator::CreateArgs&) {
  fl::ErrorList errors;
  FedExpStepConfig config;
  if (options.has_epsilon()) config.epsilon = options.epsilon();
  if (options.has_epsilon_decay()) config.epsilon_decay = options.epsilon_decay();
  config.paper_form = options.epsilon_form() == fedkit::aggregators::FedExpOptions::PAPER;
  if (!(config.epsilon >= 0) || !std::isfinite(config.epsilon)) {
    errors.Add("options.epsilon", absl::StrCat("must be >= 0, got ", config.epsilon));
  }
  if (!(config.epsilon_decay > 0 && config.epsilon_decay <= 1)) {
    errors.Add("options.epsilon_decay",
               absl::StrCat("must be in (0, 1], got ", config.epsilon_decay));
  }
  FL_RETURN_IF_ERROR(errors.ToStatus());
  return std::make_unique<FedExp>(
      config, options.has_evaluate_last_two_average() ? options.evaluate_last_two_average() : true);
}

FL_REGISTER_PLUGIN(fl::Aggregator, "fedexp", fedkit::aggregators::FedExpOptions, CreateFedExp);

}  // namespace
}  // namespace aggregators
