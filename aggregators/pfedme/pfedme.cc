// pFedMe (T. Dinh, N. Tran & T. D. Nguyen, "Personalized Federated Learning
// with Moreau Envelopes", NeurIPS 2020, Algorithm 1). Each client keeps a local
// model w and, at every local step, on one batch D, solves for its personalised
// model
//   theta = argmin_theta f(theta; D) + (lambda / 2) ||theta - w||^2
// approximately, by K gradient steps theta <- theta - p_lr (grad f(theta; D) +
// lambda (theta - w)) (theta carried from step to step, starting the round at
// the global model, as in the official code), then moves w towards it:
//   w <- w - eta lambda (w - theta),
// eta the client's learning rate. It uploads w; theta is its personalised model,
// kept (kPersonalSlot) and evaluated. The server step is the base's: FedAvg with
// server_lr beta is the paper's w <- (1 - beta) w + beta mean_k w_k.
//
// Two plugins: the aggregator "pfedme" and the client hook "pfedme", which takes
// the local steps itself (ClientHook::takes_local_steps).
//
//   aggregator {
//     name: "pfedme"
//     options {
//       [type.googleapis.com/fedkit.aggregators.PFedMeOptions] {
//         client { lambda: 15 personal_steps: 5 personal_learning_rate: 0.09 }
//       }
//     }
//   }
//   client { optimizer { kind: SGD lr: 0.005 } }   # eta

#include <cmath>
#include <memory>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "absl/strings/str_cat.h"
#include "aggregators/common/personalized_base.h"
#include "aggregators/common/step_tensors.h"
#include "aggregators/pfedme/pfedme_options.pb.h"
#include "fl/aggregator.h"
#include "fl/client_hook.h"
#include "fl/errors.h"
#include "fl/model.h"
#include "fl/model_state.h"
#include "fl/registry.h"
#include "fl/status_macros.h"

namespace aggregators {
namespace {

constexpr char kName[] = "pfedme";

struct Settings {
  double lambda = 15;
  int personal_steps = 5;
  double personal_learning_rate = 0.09;
};

Settings Resolve(const fedkit::aggregators::PFedMeHookOptions& options) {
  Settings s;
  if (options.has_lambda()) s.lambda = options.lambda();
  if (options.has_personal_steps()) s.personal_steps = options.personal_steps();
  if (options.has_personal_learning_rate()) s.personal_learning_rate = options.personal_learning_rate();
  return s;
}

void Check(const Settings& s, const std::string& prefix, fl::ErrorList& errors) {
  if (!(s.lambda > 0 && std::isfinite(s.lambda))) {
    errors.Add(prefix + "lambda", absl::StrCat("must be > 0, got ", s.lambda));
  }
  if (s.personal_steps < 1) {
    errors.Add(prefix + "personal_steps", absl::StrCat("must be >= 1, got ", s.personal_steps));
  }
  if (!(s.personal_learning_rate > 0 && std::isfinite(s.personal_learning_rate))) {
    errors.Add(prefix + "personal_learning_rate",
               absl::StrCat("must be > 0, got ", s.personal_learning_rate));
  }
}

class PFedMeHook : public fl::ClientHook {
 public:
  explicit PFedMeHook(Settings settings) : s_(settings) {}

  bool planned_only() const override { return true; }
  bool takes_local_steps() const override { return true; }

  absl::Status BeforeTraining(fl::HookContext& context) override {
    theta_ = TrainedParameters(*context.model);
    w_ = Values(theta_);
    return absl::OkStatus();
  }

  absl::StatusOr<at::Tensor> LocalStep(fl::HookContext& context, fl::LocalSteps& steps) override {
    FL_ASSIGN_OR_RETURN(fl::Examples batch, steps.NextBatch());
    at::Tensor loss;
    for (int k = 0; k < s_.personal_steps; ++k) {
      at::Tensor task = steps.Backward(batch);
      if (k == 0) loss = task;
      at::NoGradGuard no_grad;
      for (size_t i = 0; i < theta_.size(); ++i) {
        at::Tensor theta = theta_[i];
        theta.sub_((theta_[i].grad() + (theta_[i] - w_[i]) * s_.lambda) *
                   s_.personal_learning_rate);
      }
    }
    at::NoGradGuard no_grad;
    for (size_t i = 0; i < w_.size(); ++i) {
      w_[i].sub_((w_[i] - theta_[i]) * (context.learning_rate * s_.lambda));
    }
    return loss;
  }

  absl::Status FinishLocalSteps(fl::HookContext& context) override {
    *context.personal = fl::ModelState::FromModule(*context.model).TensorsByName();
    Assign(theta_, w_);
    return absl::OkStatus();
  }

 private:
  const Settings s_;
  std::vector<at::Tensor> theta_;  // the model's own parameters
  std::vector<at::Tensor> w_;      // the local model
};

absl::StatusOr<std::unique_ptr<fl::ClientHook>> CreateHook(
    const fedkit::aggregators::PFedMeHookOptions& options, const fl::ClientHook::CreateArgs&) {
  const Settings settings = Resolve(options);
  fl::ErrorList errors;
  Check(settings, "options.", errors);
  FL_RETURN_IF_ERROR(errors.ToStatus());
  return std::make_unique<PFedMeHook>(settings);
}

FL_REGISTER_PLUGIN(fl::ClientHook, kName, fedkit::aggregators::PFedMeHookOptions, CreateHook);

absl::StatusOr<std::unique_ptr<fl::Aggregator>> Create(
    const fedkit::aggregators::PFedMeOptions& options, const fl::Aggregator::CreateArgs&) {
  fl::ErrorList errors;
  Check(Resolve(options.client()), "options.client.", errors);
  FL_RETURN_IF_ERROR(errors.ToStatus());
  Personalization shape;
  shape.personal_model = true;
  shape.own_local_step = true;
  return CreatePersonalizedWithHook(options.base(), std::move(shape), kName, options.client());
}

FL_REGISTER_PLUGIN(fl::Aggregator, kName, fedkit::aggregators::PFedMeOptions, Create);

}  // namespace
}  // namespace aggregators
