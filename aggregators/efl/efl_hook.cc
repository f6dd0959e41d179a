// The client half of EFL (Ma et al., "Towards Heterogeneous Clients with Elastic
// Federated Learning", Eq. 2-3), planned by aggregator "efl".
//
// Local objective: h_k(w) = f_k(w) + (lambda / 2) sum_j (w - w_j)^T diag(I_j) (w - w_j)
// over the clients j whose Fisher diagonals I_j at their models w_j the server
// summed. Multiplied out, the other clients enter only through the broadcast sums
// U = sum_j u_j and V = sum_j v_j (u_j = I_j, v_j = I_j (.) w_j):
//   penalty = (lambda / 2) sum(U (.) w^2) - lambda sum(V (.) w) + const,
//   gradient = lambda (U (.) w - V),
// so the hook adds that as its loss term (none in the first round, before any
// client has sent a Fisher). With exclude_self the client subtracts its own last
// (u, v) when they are in the sums. Curvature guard: an SGD step on the penalty is
// stable only while lr * lambda * U < 2, so U is clipped to 1.9 / (lr * lambda)
// element-wise (V with it, keeping each centre V / U).
//
// After training, in evaluation mode, it estimates the diagonal empirical Fisher at
// the client's final weights (options.fisher: per batch or per example) and sends
// u_k = I_k and v_k = I_k (.) w_k as the extras "efl_u" and "efl_v" (parameters
// only, in model order).

#include <algorithm>
#include <memory>
#include <random>
#include <vector>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include "absl/strings/str_cat.h"
#include "aggregators/efl/efl_options.pb.h"
#include "aggregators/efl/efl_settings.h"
#include "fl/client_hook.h"
#include "fl/model.h"
#include "fl/registry.h"
#include "fl/status_macros.h"

namespace aggregators {
namespace {

constexpr char kLastU[] = "last_u/";
constexpr char kLastV[] = "last_v/";
constexpr char kLastRound[] = "last_round";

class EflHook : public fl::ClientHook {
 public:
  explicit EflHook(EflSettings settings) : settings_(settings) {}

  bool planned_only() const override { return true; }

  absl::Status BeforeTraining(fl::HookContext& context) override {
    try {
      return BeforeTrainingUnguarded(context);
    } catch (const c10::Error& e) {
      return absl::InternalError(e.what_without_backtrace());
    }
  }

  at::Tensor LossTerm(fl::HookContext&) override {
    if (u_.empty() || settings_.lambda == 0) return at::Tensor();
    at::Tensor penalty = at::zeros({}, parameters_.front().options());
    for (size_t i = 0; i < parameters_.size(); ++i) {
      const at::Tensor& w = parameters_[i];
      penalty = penalty + (u_[i] * w * w).sum() * 0.5 - (v_[i] * w).sum();
    }
    return penalty * settings_.lambda;
  }

  absl::Status AfterTraining(fl::HookContext& context, fl::ClientUpdate& update) override {
    try {
      return AfterTrainingUnguarded(context, update);
    } catch (const c10::Error& e) {
      return absl::InternalError(e.what_without_backtrace());
    }
  }

 private:
  absl::Status BeforeTrainingUnguarded(fl::HookContext& context) {
    parameters_ = context.model->parameters();
    u_.clear();
    v_.clear();
    auto u = context.broadcast->find(kEflU);
    auto v = context.broadcast->find(kEflV);
    if (u == context.broadcast->end() || v == context.broadcast->end()) return absl::OkStatus();
    if (u->second.size() != parameters_.size() || v->second.size() != parameters_.size()) {
      return absl::InvalidArgumentError(absl::StrCat("the broadcast sums have ", u->second.size(),
                                                     " tensors, the model ", parameters_.size(),
                                                     " parameters"));
    }
    const fl::TensorMap& state = *context.state;
    auto last = state.find(kLastRound);
    // Our own (u, v) are in the sums if we sent them in the round they cover.
    const bool own_included = settings_.exclude_self && last != state.end() &&
                              (settings_.sums_latest_per_client ||
                               last->second.item<int64_t>() == context.round - 1);
    for (size_t i = 0; i < parameters_.size(); ++i) {
      at::Tensor ui = u->second.tensor(i).detach();
      at::Tensor vi = v->second.tensor(i).detach();
      if (own_included) {
        ui = ui - state.at(absl::StrCat(kLastU, i));
        vi = vi - state.at(absl::StrCat(kLastV, i));
      }
      // Clipped where an SGD step on the penalty would not be stable.
      if (settings_.lambda > 0 && context.learning_rate > 0) {
        const double limit = 1.9 / (context.learning_rate * settings_.lambda);
        const at::Tensor clipped = ui.clamp_max(limit);
        vi = at::where(ui.gt(limit), vi * (clipped / ui), vi);
        ui = clipped;
      }
      u_.push_back(ui);
      v_.push_back(vi);
    }
    return absl::OkStatus();
  }

  absl::Status AfterTrainingUnguarded(fl::HookContext& context, fl::ClientUpdate& update) {
    fl::Model& model = *context.model;
    const bool was_training = model.is_training();
    model.eval();
    std::vector<at::Tensor> fisher;
    for (const at::Tensor& p : parameters_) fisher.push_back(at::zeros_like(p).detach());
    const fl::Examples& examples = *context.examples;
    std::vector<int64_t> order = *context.train_indices;
    int64_t groups = 0;
    auto add_squared_gradient = [&](const std::vector<int64_t>& indices) {
      const at::Tensor index = at::tensor(indices, at::kLong).to(examples.x.device());
      const at::Tensor loss = at::cross_entropy_loss(
          model.Forward(examples.x.index_select(0, index)), examples.y.index_select(0, index));
      const std::vector<at::Tensor> grads = torch::autograd::grad({loss}, parameters_);
      for (size_t i = 0; i < grads.size(); ++i) fisher[i].add_(grads[i].detach().square());
      ++groups;
    };
    if (settings_.per_sample) {
      std::mt19937_64 rng(context.seed);
      std::shuffle(order.begin(), order.end(), rng);
      order.resize(std::min<size_t>(order.size(), settings_.fisher_samples));
      for (int64_t index : order) add_squared_gradient({index});
    } else {
      const auto batch = static_cast<size_t>(std::max<int64_t>(1, context.batch_size));
      for (size_t begin = 0; begin < order.size(); begin += batch) {
        add_squared_gradient(std::vector<int64_t>(
            order.begin() + begin, order.begin() + std::min(order.size(), begin + batch)));
      }
    }
    model.train(was_training);
    std::vector<fl::ModelState::Entry> u_entries, v_entries;
    const std::vector<std::string> names = model.named_parameters().keys();
    fl::TensorMap& state = *context.state;
    for (size_t i = 0; i < parameters_.size(); ++i) {
      const at::Tensor u = fisher[i].div_(std::max<int64_t>(1, groups));
      const at::Tensor v = u * parameters_[i].detach();
      u_entries.push_back({names[i], u, false});
      v_entries.push_back({names[i], v, false});
      if (settings_.exclude_self) {
        state[absl::StrCat(kLastU, i)] = u.clone();
        state[absl::StrCat(kLastV, i)] = v.clone();
      }
    }
    if (settings_.exclude_self) state[kLastRound] = at::scalar_tensor(context.round, at::kLong);
    update.extras[kEflU] = fl::ModelState(std::move(u_entries));
    update.extras[kEflV] = fl::ModelState(std::move(v_entries));
    return absl::OkStatus();
  }

  const EflSettings settings_;
  std::vector<at::Tensor> parameters_;
  std::vector<at::Tensor> u_, v_;  // this round's sums, empty in the first round
};

absl::StatusOr<std::unique_ptr<fl::ClientHook>> CreateEflHook(
    const fedkit::aggregators::EflHookOptions& options, const fl::ClientHook::CreateArgs&) {
  FL_ASSIGN_OR_RETURN(EflSettings settings, ResolveEflHook(options, "options"));
  return std::make_unique<EflHook>(settings);
}

FL_REGISTER_PLUGIN(fl::ClientHook, "efl", fedkit::aggregators::EflHookOptions, CreateEflHook);

}  // namespace
}  // namespace aggregators
