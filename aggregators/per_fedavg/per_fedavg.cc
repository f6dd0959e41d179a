// Per-FedAvg (Fallah, Mokhtari & Ozdaglar, "Personalized Federated Learning with
// Theoretical Guarantees: A Model-Agnostic Meta-Learning Approach", NeurIPS
// 2020, Algorithm 1): FedAvg on the MAML objective F(w) = f(w - alpha grad f(w)).
// Each local step draws independent batches D, D' (and D''):
//   w_ad = w - alpha grad f(w; D)
//   FO: w <- w - beta grad f(w_ad; D')
//   HF: w <- w - beta (I - alpha H(w; D'')) grad f(w_ad; D'),
//       H(w; D'') g ~ [grad f(w + delta g; D'') - grad f(w - delta g; D'')] / (2 delta)
// beta the client's learning rate. A step takes two (FO) or three (HF) of the
// client's batches, so an epoch budget buys half or a third as many steps. The
// model is personalised at evaluation by one step of adaptation on the client's
// data: server.client_evaluation { fine_tune_steps: 1 fine_tune_learning_rate:
// alpha } (the paper's evaluation). The server step is the base's.
//
// Two plugins: the aggregator "per_fedavg" and the client hook "per_fedavg",
// which takes the local steps itself (ClientHook::takes_local_steps).
//
//   aggregator {
//     name: "per_fedavg"
//     options {
//       [type.googleapis.com/fedkit.aggregators.PerFedAvgOptions] {
//         client { variant: HESSIAN_FREE alpha: 0.01 }
//       }
//     }
//   }
//   client { optimizer { kind: SGD lr: 0.001 } }    # beta

#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "aggregators/common/personalized_base.h"
#include "aggregators/common/step_tensors.h"
#include "aggregators/per_fedavg/per_fedavg_options.pb.h"
#include "fl/aggregator.h"
#include "fl/client_hook.h"
#include "fl/errors.h"
#include "fl/model.h"
#include "fl/registry.h"
#include "fl/status_macros.h"

namespace aggregators {
namespace {

constexpr char kName[] = "per_fedavg";
constexpr double kDefaultAlpha = 0.01;
constexpr double kDefaultDelta = 0.001;

using Options = fedkit::aggregators::PerFedAvgHookOptions;

// w + a * g, tensor by tensor.
std::vector<at::Tensor> Moved(const std::vector<at::Tensor>& w, double a,
                              const std::vector<at::Tensor>& g) {
  std::vector<at::Tensor> moved;
  moved.reserve(w.size());
  for (size_t i = 0; i < w.size(); ++i) moved.push_back(w[i] + g[i] * a);
  return moved;
}

class PerFedAvgHook : public fl::ClientHook {
 public:
  explicit PerFedAvgHook(Options options)
      : options_(std::move(options)),
        alpha_(options_.has_alpha() ? options_.alpha() : kDefaultAlpha),
        delta_(options_.has_delta() ? options_.delta() : kDefaultDelta) {}

  bool planned_only() const override { return true; }
  bool takes_local_steps() const override { return true; }

  absl::Status BeforeTraining(fl::HookContext& context) override {
    parameters_ = TrainedParameters(*context.model);
    return absl::OkStatus();
  }

  absl::StatusOr<at::Tensor> LocalStep(fl::HookContext& context, fl::LocalSteps& steps) override {
    const std::vector<at::Tensor> w = Values(parameters_);
    FL_ASSIGN_OR_RETURN(fl::Examples inner, steps.NextBatch());
    steps.Backward(inner);
    Assign(parameters_, Moved(w, -alpha_, Gradients(parameters_)));
    FL_ASSIGN_OR_RETURN(fl::Examples outer, steps.NextBatch());
    at::Tensor loss = steps.Backward(outer);
    std::vector<at::Tensor> direction = Gradients(parameters_);
    if (options_.variant() == Options::HESSIAN_FREE) {
      FL_ASSIGN_OR_RETURN(fl::Examples curvature, steps.NextBatch());
      Assign(parameters_, Moved(w, delta_, direction));
      steps.Backward(curvature);
      const std::vector<at::Tensor> plus = Gradients(parameters_);
      Assign(parameters_, Moved(w, -delta_, direction));
      steps.Backward(curvature);
      const std::vector<at::Tensor> minus = Gradients(parameters_);
      for (size_t i = 0; i < direction.size(); ++i) {
        direction[i] = direction[i] - (plus[i] - minus[i]) * (alpha_ / (2 * delta_));
      }
    }
    Assign(parameters_, Moved(w, -context.learning_rate, direction));
    return loss;
  }

 private:
  const Options options_;
  const double alpha_;
  const double delta_;
  std::vector<at::Tensor> parameters_;
};

void Check(const Options& options, const std::string& prefix, fl::ErrorList& errors) {
  if (options.has_alpha() && !(options.alpha() > 0 && std::isfinite(options.alpha()))) {
    errors.Add(prefix + "alpha", absl::StrCat("must be > 0, got ", options.alpha()));
  }
  if (options.has_delta() && !(options.delta() > 0 && std::isfinite(options.delta()))) {
    errors.Add(prefix + "delta", absl::StrCat("must be > 0, got ", options.delta()));
  }
}

absl::StatusOr<std::unique_ptr<fl::ClientHook>> CreateHook(const Options& options,
                                                           const fl::ClientHook::CreateArgs&) {
  fl::ErrorList errors;
  Check(options, "options.", errors);
  FL_RETURN_IF_ERROR(errors.ToStatus());
  return std::make_unique<PerFedAvgHook>(options);
}

FL_REGISTER_PLUGIN(fl::ClientHook, kName, Options, CreateHook);

absl::StatusOr<std::unique_ptr<fl::Aggregator>> Create(
    const fedkit::aggregators::PerFedAvgOptions& options, const fl::Aggregator::CreateArgs&) {
  fl::ErrorList errors;
  Check(options.client(), "options.client.", errors);
  FL_RETURN_IF_ERROR(errors.ToStatus());
  Personalization shape;
  shape.own_local_step = true;
  return CreatePersonalizedWithHook(options.base(), std::move(shape), kName, options.client());
}

FL_REGISTER_PLUGIN(fl::Aggregator, kName, fedkit::aggregators::PerFedAvgOptions, Create);

}  // namespace
}  // namespace aggregators
