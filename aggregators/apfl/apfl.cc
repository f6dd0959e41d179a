// APFL (Deng, Kamani & Mahdavi, "Adaptive Personalized Federated Learning",
// arXiv 2003.13461, 2020, Algorithm 1). Each client keeps a local version v of the
// model and a mixing weight alpha; its personalised model is
//   v_bar = alpha v + (1 - alpha) w,
// w the global model's local copy. At every local step, on one batch, from the
// previous step's values (as the paper's updates are written):
//   w     <- w - eta grad f(w)
//   v     <- v - eta grad_v f(v_bar)     = v - eta alpha grad f(v_bar)
//   alpha <- alpha - eta_a grad_alpha f(v_bar) = alpha - eta_a <v - w, grad f(v_bar)>
// (alpha clipped to [0, 1], learnt unless learn_alpha is false). It uploads w; v
// and alpha stay in the client's state ("apfl"), and v_bar at the round's end, the
// model it is evaluated with, in kPersonalSlot. The first time, v is the global
// model. The server step is the base's (FedAvg in the paper).
//
// Two plugins: the aggregator "apfl" and the client hook "apfl", which takes the
// local steps itself (ClientHook::takes_local_steps).
//
//   aggregator {
//     name: "apfl"
//     options { [type.googleapis.com/fedkit.aggregators.ApflOptions] { client { alpha: 0.25 } } }
//   }

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "absl/strings/str_cat.h"
#include "aggregators/apfl/apfl_options.pb.h"
#include "aggregators/common/personalized_base.h"
#include "aggregators/common/step_tensors.h"
#include "fl/aggregator.h"
#include "fl/client_hook.h"
#include "fl/errors.h"
#include "fl/model.h"
#include "fl/model_state.h"
#include "fl/registry.h"
#include "fl/status_macros.h"

namespace aggregators {
namespace {

constexpr char kName[] = "apfl";
constexpr char kAlpha[] = "alpha";
constexpr char kLocalPrefix[] = "v/";
constexpr double kDefaultAlpha = 0.25;

class ApflHook : public fl::ClientHook {
 public:
  explicit ApflHook(fedkit::aggregators::ApflHookOptions options) : options_(std::move(options)) {}

  bool planned_only() const override { return true; }
  bool takes_local_steps() const override { return true; }

  absl::Status BeforeTraining(fl::HookContext& context) override {
    w_ = TrainedParameters(*context.model);
    names_.clear();
    for (const auto& item : context.model->named_parameters(/*recurse=*/true)) {
      if (item.value().requires_grad()) names_.push_back(item.key());
    }
    fl::TensorMap& state = *context.state;
    v_.clear();
    for (size_t i = 0; i < w_.size(); ++i) {
      auto kept = state.find(kLocalPrefix + names_[i]);
      if (kept == state.end()) {
        v_.push_back(w_[i].detach().clone());  // the global model, the first time
      } else if (kept->second.sizes() != w_[i].sizes()) {
        return absl::FailedPreconditionError(
            absl::StrCat("the kept local model's \"", names_[i], "\" has shape ",
                         c10::str(kept->second.sizes()), ", the model's ",
                         c10::str(w_[i].sizes())));
      } else {
        v_.push_back(kept->second.to(w_[i].device()).clone());
      }
    }
    auto alpha = state.find(kAlpha);
    alpha_ = alpha != state.end() ? alpha->second.item<double>()
             : options_.has_alpha()  ? options_.alpha()
                                     : kDefaultAlpha;
    return absl::OkStatus();
  }

  absl::StatusOr<at::Tensor> LocalStep(fl::HookContext& context, fl::LocalSteps& steps) override {
    FL_ASSIGN_OR_RETURN(fl::Examples batch, steps.NextBatch());
    const std::vector<at::Tensor> w = Values(w_);
    at::Tensor loss = steps.Backward(batch);
    const std::vector<at::Tensor> grad_w = Gradients(w_);
    Assign(w_, Mixed(w));
    steps.Backward(batch);
    const std::vector<at::Tensor> grad_mixed = Gradients(w_);
    const double eta = context.learning_rate;
    at::NoGradGuard no_grad;
    // Summed on the device, read once a step.
    at::Tensor grad_alpha = at::zeros({}, w[0].options().dtype(at::kDouble));
    for (size_t i = 0; i < w_.size(); ++i) {
      grad_alpha += (v_[i] - w[i]).mul(grad_mixed[i]).sum().to(at::kDouble);
      v_[i].sub_(grad_mixed[i] * (eta * alpha_));
      w_[i].copy_(w[i] - grad_w[i] * eta);
    }
    if (options_.learn_alpha() || !options_.has_learn_alpha()) {
      const double eta_alpha =
          options_.alpha_learning_rate() > 0 ? options_.alpha_learning_rate() : eta;
      alpha_ = std::clamp(alpha_ - eta_alpha * grad_alpha.item<double>(), 0.0, 1.0);
    }
    return loss;
  }

  absl::Status FinishLocalSteps(fl::HookContext& context) override {
    const std::vector<at::Tensor> w = Values(w_);
    Assign(w_, Mixed(w));
    *context.personal = fl::ModelState::FromModule(*context.model).TensorsByName();
    Assign(w_, w);
    fl::TensorMap& state = *context.state;
    state.clear();
    for (size_t i = 0; i < v_.size(); ++i) state[kLocalPrefix + names_[i]] = v_[i];
    state[kAlpha] = at::scalar_tensor(alpha_, at::kDouble);
    return absl::OkStatus();
  }

 private:
  // alpha v + (1 - alpha) w.
  std::vector<at::Tensor> Mixed(const std::vector<at::Tensor>& w) const {
    std::vector<at::Tensor> mixed;
    for (size_t i = 0; i < w.size(); ++i) mixed.push_back(v_[i] * alpha_ + w[i] * (1 - alpha_));
    return mixed;
  }

  const fedkit::aggregators::ApflHookOptions options_;
  std::vector<std::string> names_;
  std::vector<at::Tensor> w_;  // the model's own parameters
  std::vector<at::Tensor> v_;
  double alpha_ = kDefaultAlpha;
};

void Check(const fedkit::aggregators::ApflHookOptions& options, const std::string& prefix,
           fl::ErrorList& errors) {
  if (options.has_alpha() && !(options.alpha() >= 0 && options.alpha() <= 1)) {
    errors.Add(prefix + "alpha", absl::StrCat("must be in [0, 1], got ", options.alpha()));
  }
  if (!(options.alpha_learning_rate() >= 0 && std::isfinite(options.alpha_learning_rate()))) {
    errors.Add(prefix + "alpha_learning_rate",
               absl::StrCat("must be >= 0, got ", options.alpha_learning_rate()));
  }
}

absl::StatusOr<std::unique_ptr<fl::ClientHook>> CreateHook(
    const fedkit::aggregators::ApflHookOptions& options, const fl::ClientHook::CreateArgs&) {
  fl::ErrorList errors;
  Check(options, "options.", errors);
  FL_RETURN_IF_ERROR(errors.ToStatus());
  return std::make_unique<ApflHook>(options);
}

FL_REGISTER_PLUGIN(fl::ClientHook, kName, fedkit::aggregators::ApflHookOptions, CreateHook);

absl::StatusOr<std::unique_ptr<fl::Aggregator>> Create(
    const fedkit::aggregators::ApflOptions& options, const fl::Aggregator::CreateArgs&) {
  fl::ErrorList errors;
  Check(options.client(), "options.client.", errors);
  FL_RETURN_IF_ERROR(errors.ToStatus());
  Personalization shape;
  shape.personal_model = true;
  shape.own_local_step = true;
  return CreatePersonalizedWithHook(options.base(), std::move(shape), kName, options.client());
}

FL_REGISTER_PLUGIN(fl::Aggregator, kName, fedkit::aggregators::ApflOptions, Create);

}  // namespace
}  // namespace aggregators
