// FedNova (Wang, Liu, Liang, Joshi & Poor, "Tackling the Objective Inconsistency
// Problem in Heterogeneous Federated Optimization", NeurIPS 2020, Eq. 7 with the
// paper's choice tau_eff = sum_i p_i ||a_i||_1): clients that take more local
// steps move further, and plain averaging then optimises a surrogate objective
// weighted by step counts. FedNova divides each client's cumulative update by its
// effective step count before averaging and takes one step of the mean length:
//   w <- w + eta * tau_eff * sum_i p_i delta_i / ||a_i||_1,
//   tau_eff = sum_i p_i ||a_i||_1,   p_i = n_i / sum_j n_j over the round's clients,
// where ||a_i||_1 is what the local optimiser made of tau_i steps (tau_i =
// ClientUpdate::local_steps, the steps actually taken):
//   SGD:                 ||a_i||_1 = tau_i;
//   SGD with momentum r: ||a_i||_1 = (tau_i - r (1 - r^tau_i) / (1 - r)) / (1 - r),
// r being client.optimizer.momentum (ServerContext::client_momentum). The
// momentum form assumes the buffer starts from zero every round, as the paper and
// its code (JYWa/FedNova, local_normalizing_vec) do: with
// client.keep_optimizer_state the carried buffer is not counted. Weight decay is
// left out of a_i, as in the paper. A proximal client term (the fedprox hook)
// changes a_i to (1 - (1 - eta_l mu)^tau_i) / (eta_l mu) in the paper; fedkit
// does not model that combination: a_i stays the SGD/momentum form. The official
// code's global momentum (gmf) is not included: use eta for a plain server step.
//
// With every client taking the same number of steps FedNova is FedAvg (with one
// client, w + delta). Buffers take the plain size-weighted mean of the clients'
// values. The accumulation is a sum (sum_i n_i delta_i / ||a_i||_1 and
// sum_i n_i ||a_i||_1), all-reduced in distributed runs. Declared step_aware (it
// corrects incomplete updates itself, so server.incomplete_updates: SCALE is
// refused) and needs_local_sgd (a_i is SGD's). Diagnostic per round: tau_eff.
//
//   aggregator {
//     name: "fednova"
//     options { [type.googleapis.com/fedkit.aggregators.FedNovaOptions] { server_lr: 1.0 } }
//   }

#include <cmath>
#include <memory>
#include <optional>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "aggregators/common/partial_sums.h"
#include "aggregators/common/weighted_mean.h"
#include "aggregators/fednova/fednova_options.pb.h"
#include "fl/aggregator.h"
#include "fl/registry.h"
#include "fl/status_macros.h"
#include "glog/logging.h"

namespace aggregators {
namespace {

using ::fedkit::aggregators::FedNovaOptions;

constexpr char kStepSum[] = "weighted_effective_steps";

// ||a||_1 for `steps` SGD steps with heavy-ball momentum `momentum` (0: plain SGD):
// the gradient of step j enters the update with weight (1 - r^(tau - j + 1)) / (1 - r).
double EffectiveSteps(int64_t steps, double momentum) {
  const double tau = static_cast<double>(steps);
  if (momentum == 0.0) return tau;
  return (tau - momentum * (1.0 - std::pow(momentum, tau)) / (1.0 - momentum)) / (1.0 - momentum);
}

class FedNova : public fl::Aggregator {
 public:
  explicit FedNova(double server_lr) : server_lr_(server_lr) {}

  fl::AggregatorProperties properties() const override {
    fl::AggregatorProperties properties;
    properties.order_invariant = true;
    properties.single_client_identity = true;  // tau_eff = ||a_1||_1: w + delta
    properties.step_aware = true;
    properties.needs_local_sgd = true;
    properties.sums_only = true;
    return properties;
  }

  absl::StatusOr<fl::RoundPlan> Configure(const fl::ModelState& global,
                                          fl::ServerContext& context) override {
    if (!(context.client_momentum >= 0 && context.client_momentum < 1)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "client momentum must be in [0, 1) for FedNova's a_i, got ", context.client_momentum));
    }
    momentum_ = context.client_momentum;
    global_ = global;
    mean_.Reset();
    weighted_steps_ = 0.0;
    return fl::RoundPlan();
  }

  absl::Status Accumulate(fl::ClientUpdate update, fl::ServerContext& context) override {
    if (update.local_steps < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "local_steps is ", update.local_steps, ": FedNova divides by the steps taken"));
    }
    const double steps = EffectiveSteps(update.local_steps, momentum_);
    const double weight = WeightOf(update, ClientWeighting::kNumExamples);
    // Parameters are normalised; buffers keep the client's values for their mean.
    for (fl::ModelState::Entry& entry : update.delta.mutable_entries()) {
      if (!entry.is_buffer) entry.tensor = entry.tensor / steps;
    }
    FL_RETURN_IF_ERROR(mean_.Add(update.delta, weight));
    weighted_steps_ += weight * steps;
    return absl::OkStatus();
  }

  absl::StatusOr<fl::ModelState> Finalize(const fl::ModelState& global,
                                          fl::ServerContext& context) override {
    global_.reset();
    if (mean_.empty()) return absl::FailedPreconditionError("no update accumulated this round");
    const double tau_eff = weighted_steps_ / mean_.total_weight();
    context.diagnostics["tau_eff"] = tau_eff;
    FL_ASSIGN_OR_RETURN(fl::ModelState next, mean_.StepFrom(global, server_lr_ * tau_eff));
    mean_.Reset();
    return next;
  }

  std::optional<NamedSums> PartialSums() const override {
    CHECK(global_.has_value()) << "PartialSums before Configure";
    NamedSums sums;
    mean_.AddPartialSums("", *global_, sums);
    sums[kStepSum] = ScalarSum(weighted_steps_);
    return sums;
  }

  absl::Status MergePartialSums(NamedSums sums) override {
    FL_RETURN_IF_ERROR(CheckMergeable(*this, global_.has_value(), sums));
    mean_.MergePartialSums("", *global_, sums);
    weighted_steps_ = sums.at(kStepSum).item<double>();
    return absl::OkStatus();
  }

 private:
  const double server_lr_;
  double momentum_ = 0.0;
  WeightedMean mean_;
  double weighted_steps_ = 0.0;  // sum_i n_i ||a_i||_1
  // This round's global model: the layout of an empty share's partial sums.
  std::optional<fl::ModelState> global_;
};

absl::StatusOr<std::unique_ptr<fl::Aggregator>> CreateFedNova(const FedNovaOptions& options,
                                                              const fl::Aggregator::CreateArgs&) {
  const double server_lr = options.has_server_lr() ? options.server_lr() : 1.0;
  if (!(server_lr > 0) || !std::isfinite(server_lr)) {
    return absl::InvalidArgumentError(
        absl::StrCat("options.server_lr: must be finite and > 0, got ", server_lr));
  }
  return std::make_unique<FedNova>(server_lr);
}

FL_REGISTER_PLUGIN(fl::Aggregator, "fednova", FedNovaOptions, CreateFedNova);

}  // namespace
}  // namespace aggregators
