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

#include <memory>

#include "aggregators/common/fedexp_step.h"
#include "aggregators/common/weighted_mean.h"
#include "aggregators/fedexp/fedexp_options.pb.h"
#include "fl/aggregator.h"
#include "fl/registry.h"
#include "fl/status_macros.h"

namespace aggregators {
namespace {

class FedExp : public fl::Aggregator {
 public:
  explicit FedExp(FedExpStepConfig config) : config_(config) {}

  absl::Status Accumulate(fl::ClientUpdate update, fl::ServerContext& context) override {
    const double weight = WeightOf(update, ClientWeighting::kNumExamples);
    FL_RETURN_IF_ERROR(mean_.Add(update.delta, weight));
    norms_.Add(update.delta, weight);
    return absl::OkStatus();
  }

  absl::StatusOr<fl::ModelState> Finalize(const fl::ModelState& global,
                                          fl::ServerContext& context) override {
    FL_ASSIGN_OR_RETURN(fl::ModelState mean_delta, mean_.Mean());
    fl::ModelState next =
        TakeFedExpStep(global, mean_delta, norms_.Mean(), mean_.count(), config_, context);
    mean_.Reset();
    norms_.Reset();
    return next;
  }

 private:
  FedExpStepConfig config_;
  WeightedMean mean_;
  SquaredNormMean norms_;
};

absl::StatusOr<std::unique_ptr<fl::Aggregator>> CreateFedExp(
    const fedkit::aggregators::FedExpOptions& options, const fl::Aggregator::CreateArgs&) {
  FL_ASSIGN_OR_RETURN(FedExpStepConfig config, FedExpStepConfigFromOptions(options, "options"));
  return std::make_unique<FedExp>(config);
}

FL_REGISTER_PLUGIN(fl::Aggregator, "fedexp", fedkit::aggregators::FedExpOptions, CreateFedExp);

}  // namespace
}  // namespace aggregators
