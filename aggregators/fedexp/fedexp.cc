// FedExP (Jhunjhunwala, Wang & Joshi, "FedExP: Speeding Up Federated Averaging via
// Extrapolation", ICLR 2023): FedAvg whose server step size adapts every round to
// how much the clients' updates disagree, borrowing the extrapolated parallel
// projection method (EPPM) of convex feasibility:
//
//   Delta_bar = sum_i p_i Delta_i / sum_i p_i     (p_i data-size weights, renormalised
//                                                   over the participants; option:
//                                                   p_i = 1, the paper's plain mean)
//   eta_g     = max(1, A / (2 (||Delta_bar||^2 + eps_eff))),  A = sum_i p_i ||Delta_i||^2 / sum p_i
//   w_{t+1}   = w_t + eta_g Delta_bar
//
// eps_eff is M * eps_t as in the official code (default) or eps_t as in the paper;
// eps_t decays per round with the code's form and is constant with the paper's
// (see fedexp_options.proto and docs/fedexp.md, section 3). The model evaluated is
// the average of the last two iterates' parameters (buffers: w_{t+1}'s); training
// continues from w_{t+1}. Norms run over parameters in float64; buffers take the plain
// weighted mean of the clients' values. eta_g, eps_t, A and ||Delta_bar||^2 are
// written to metrics.csv every evaluated round (eta_g, fedexp_epsilon,
// fedexp_mean_sq_norm, fedexp_mean_update_sq_norm).
//
// Each client sends ||Delta_i||^2 (over parameters, float64) as the extra
// "fedexp/sq_norm", computed by the "fedexp" client hook this aggregator plans, so
// the server reads one scalar per client instead of a second pass over its update.
// Everything accumulated is a sum (weighted deltas, weighted squared norms, weights,
// the count), all-reduced in distributed runs.
//
// FedProx(ExP) is this aggregator with the "fedprox" client hook in client.hooks;
// SCAFFOLD(ExP) is SCAFFOLD with its `extrapolation` option.
//
//   aggregator {
//     name: "fedexp"
//     options { [type.googleapis.com/fedkit.aggregators.FedExpOptions] { epsilon: 0.1 } }
//   }

#include <memory>
#include <optional>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "aggregators/common/fedexp_step.h"
#include "aggregators/common/partial_sums.h"
#include "aggregators/common/weighted_mean.h"
#include "aggregators/fedexp/fedexp_options.pb.h"
#include "fl/aggregator.h"
#include "fl/client_hook.h"
#include "fl/registry.h"
#include "fl/status_macros.h"
#include "glog/logging.h"

namespace aggregators {
namespace {

constexpr char kSquaredNorm[] = "fedexp/sq_norm";

class FedExpHook : public fl::ClientHook {
 public:
  absl::Status AfterTraining(fl::HookContext& context, fl::ClientUpdate& update) override {
    update.extras[kSquaredNorm] = fl::ModelState(
        {{"sq_norm", at::scalar_tensor(update.delta.SquaredNorm(), at::kDouble), false}});
    return absl::OkStatus();
  }
};

absl::StatusOr<std::unique_ptr<fl::ClientHook>> CreateFedExpHook(
    const fedkit::aggregators::FedExpHookOptions&, const fl::ClientHook::CreateArgs&) {
  return std::make_unique<FedExpHook>();
}

FL_REGISTER_PLUGIN(fl::ClientHook, "fedexp", fedkit::aggregators::FedExpHookOptions,
                   CreateFedExpHook);

class FedExp : public fl::Aggregator {
 public:
  FedExp(FedExpStepConfig config, ClientWeighting weighting)
      : config_(config), weighting_(weighting) {
    hook_.name = "fedexp";
    hook_.options.PackFrom(fedkit::aggregators::FedExpHookOptions());
  }

  fl::AggregatorProperties properties() const override {
    fl::AggregatorProperties properties;
    properties.client_hooks = {hook_.name};
    properties.dp_sums = WeightedMean::DpSums("");
    for (fl::DpSum& sum : SquaredNormMean::DpSums("sq_norm/")) {
      properties.dp_sums.push_back(std::move(sum));
    }
    properties.sums_only = true;
    return properties;
  }

  absl::StatusOr<fl::RoundPlan> Configure(const fl::ModelState& global,
                                          fl::ServerContext& context) override {
    global_ = global;
    mean_.Reset();
    norms_.Reset();
    fl::RoundPlan plan;
    plan.hooks.push_back(hook_);
    return plan;
  }

  absl::Status Accumulate(fl::ClientUpdate update, fl::ServerContext& context) override {
    auto it = update.extras.find(kSquaredNorm);
    if (it == update.extras.end() || it->second.size() != 1 || it->second.tensor(0).numel() != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "update has no scalar extra \"", kSquaredNorm,
          "\" (the \"fedexp\" client hook sends it); rejected"));
    }
    const double squared_norm = it->second.tensor(0).item<double>();
    const double weight = WeightOf(update, weighting_);
    FL_RETURN_IF_ERROR(mean_.Add(update.delta, weight));
    norms_.Add(squared_norm, weight);
    return absl::OkStatus();
  }

  absl::StatusOr<fl::ModelState> Finalize(const fl::ModelState& global,
                                          fl::ServerContext& context) override {
    FL_ASSIGN_OR_RETURN(fl::ModelState mean_delta, mean_.Mean());
    fl::ModelState next =
        TakeFedExpStep(global, mean_delta, norms_.Mean(), mean_.count(), config_, context);
    mean_.Reset();
    norms_.Reset();
    global_.reset();
    return next;
  }

  std::optional<NamedSums> PartialSums() const override {
    CHECK(global_.has_value()) << "PartialSums before Configure";
    NamedSums sums;
    mean_.AddPartialSums("", *global_, sums);
    norms_.AddPartialSums("sq_norm/", sums);
    return sums;
  }

  absl::Status MergePartialSums(NamedSums sums) override {
    FL_RETURN_IF_ERROR(CheckMergeable(*this, global_.has_value(), sums));
    mean_.MergePartialSums("", *global_, sums);
    norms_.MergePartialSums("sq_norm/", sums);
    return absl::OkStatus();
  }

 private:
  FedExpStepConfig config_;
  const ClientWeighting weighting_;
  fl::HookRequest hook_;
  WeightedMean mean_;
  SquaredNormMean norms_;
  // This round's global model (sharing the server's storage): the layout of the
  // partial sums of a process that accumulated nothing.
  std::optional<fl::ModelState> global_;
};

absl::StatusOr<std::unique_ptr<fl::Aggregator>> CreateFedExp(
    const fedkit::aggregators::FedExpOptions& options, const fl::Aggregator::CreateArgs&) {
  FL_ASSIGN_OR_RETURN(FedExpStepConfig config, FedExpStepConfigFromOptions(options, "options"));
  if (!fedkit::aggregators::FedExpOptions::Weighting_IsValid(options.weighting())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "options.weighting: must be NUM_EXAMPLES or UNIFORM, got ", options.weighting()));
  }
  return std::make_unique<FedExp>(config, options.weighting() ==
                                                  fedkit::aggregators::FedExpOptions::UNIFORM
                                              ? ClientWeighting::kUniform
                                              : ClientWeighting::kNumExamples);
}

FL_REGISTER_PLUGIN(fl::Aggregator, "fedexp", fedkit::aggregators::FedExpOptions, CreateFedExp);

}  // namespace
}  // namespace aggregators
