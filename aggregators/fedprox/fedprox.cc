// FedProx (Li et al., "Federated Optimization in Heterogeneous Networks", MLSys
// 2020, Eq. 2 / Algorithm 2): each client minimises
//   h_k(w) = F_k(w) + (mu / 2) ||w - w_t||^2,
// the proximal term keeping local models near the round's global model w_t. The
// server averages as FedAvg does (data-size weights; buffers plainly averaged), a
// sum that distributed runs all-reduce.
//
// Two plugins: the client hook "fedprox" (the proximal term, over parameters; it
// composes with any aggregator), and the aggregator "fedprox" (FedAvg's averaging
// that asks every client to run the hook with its mu).
//
//   aggregator {
//     name: "fedprox"
//     options { [type.googleapis.com/fedkit.aggregators.FedProxOptions] { mu: 0.01 } }
//   }
//   or, under another aggregator:
//   client { hooks { name: "fedprox"
//                    options { [type.googleapis.com/fedkit.aggregators.FedProxHookOptions] { mu: 0.1 } } } }

#include <cmath>
#include <memory>

#include "absl/strings/str_cat.h"
#include "aggregators/common/mean_delta_aggregator.h"
#include "aggregators/common/proximal_term.h"
#include "aggregators/fedprox/fedprox_options.pb.h"
#include "fl/aggregator.h"
#include "fl/client_hook.h"
#include "fl/errors.h"
#include "fl/registry.h"
#include "fl/status_macros.h"

namespace aggregators {
namespace {

constexpr double kDefaultMu = 0.01;

absl::Status CheckMu(double mu) {
  if (mu >= 0 && std::isfinite(mu)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("options.mu: must be >= 0, got ", mu));
}

absl::StatusOr<std::unique_ptr<fl::ClientHook>> CreateFedProxHook(
    const fedkit::aggregators::FedProxHookOptions& options, const fl::ClientHook::CreateArgs&) {
  const double mu = options.has_mu() ? options.mu() : kDefaultMu;
  FL_RETURN_IF_ERROR(CheckMu(mu));
  return std::make_unique<ProximalTerm>(mu);
}

FL_REGISTER_PLUGIN(fl::ClientHook, "fedprox", fedkit::aggregators::FedProxHookOptions,
                   CreateFedProxHook);

class FedProx : public MeanDeltaAggregator {
 public:
  FedProx(double mu, double server_lr) : MeanDeltaAggregator(server_lr) {
    fedkit::aggregators::FedProxHookOptions hook_options;
    hook_options.set_mu(mu);
    hook_.name = "fedprox";
    hook_.options.PackFrom(hook_options);
  }

  fl::AggregatorProperties properties() const override {
    fl::AggregatorProperties properties = MeanDeltaAggregator::properties();
    properties.client_hooks = {hook_.name};
    return properties;
  }

  absl::StatusOr<fl::RoundPlan> Configure(const fl::ModelState& global,
                                          fl::ServerContext& context) override {
    FL_ASSIGN_OR_RETURN(fl::RoundPlan plan, MeanDeltaAggregator::Configure(global, context));
    plan.hooks.push_back(hook_);
    return plan;
  }

 private:
  fl::HookRequest hook_;
};

absl::StatusOr<std::unique_ptr<fl::Aggregator>> CreateFedProx(
    const fedkit::aggregators::FedProxOptions& options, const fl::Aggregator::CreateArgs&) {
  fl::ErrorList errors;
  const double mu = options.has_mu() ? options.mu() : kDefaultMu;
  errors.AddStatus("", CheckMu(mu));
  const double server_lr = options.has_server_lr() ? options.server_lr() : 1.0;
  if (!(server_lr > 0) || !std::isfinite(server_lr)) {
    errors.Add("options.server_lr", absl::StrCat("must be > 0, got ", server_lr));
  }
  FL_RETURN_IF_ERROR(errors.ToStatus());
  return std::make_unique<FedProx>(mu, server_lr);
}

FL_REGISTER_PLUGIN(fl::Aggregator, "fedprox", fedkit::aggregators::FedProxOptions, CreateFedProx);

}  // namespace
}  // namespace aggregators
