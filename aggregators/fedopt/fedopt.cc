// Server optimisers: the server treats the round's data-size weighted mean client
// delta Delta_t (w_local - w_global, weights renormalised over the accepted updates)
// as a pseudo-gradient pointing downhill and feeds it to a stateful optimiser whose
// moment buffers persist across rounds. Four methods share this file:
//
//   "fedavgm"    server momentum (Hsu, Qi & Brown, "Measuring the Effects of
//                Non-Identical Data Distribution for Federated Visual Classification",
//                2019, in the form of Reddi et al. 2021):
//                  m_t = beta m_{t-1} + Delta_t;   x_{t+1} = x_t + eta m_t.
//                With m_{-1} = 0 and eta = 1 the first round is FedAvg.
//   "fedadagrad", "fedadam", "fedyogi"  (Reddi et al., "Adaptive Federated
//                Optimization", ICLR 2021, Algorithm 2):
//                  m_t = beta1 m_{t-1} + (1 - beta1) Delta_t
//                  v_t = v_{t-1} + Delta_t^2                                   (Adagrad)
//                  v_t = beta2 v_{t-1} + (1 - beta2) Delta_t^2                 (Adam)
//                  v_t = v_{t-1} - (1 - beta2) Delta_t^2 sign(v_{t-1} - Delta_t^2) (Yogi)
//                  x_{t+1} = x_t + eta m_t / (sqrt(v_t) + tau)
//                with m_{-1} = 0, v_{-1} = tau^2 element-wise and no bias correction,
//                as in the paper.
//
// Only parameters go through the optimiser. Buffers (BatchNorm running statistics)
// are set to the weighted mean of the clients' values, exactly as FedAvg does: they
// are statistics, not descent directions. Memory is O(P): the running weighted sum of
// deltas plus one (FedAvgM) or two moment tensors per parameter; distributed runs
// all-reduce the processes' weighted sums before the step. The moments are
// created at the first Finalize from the global model's layout and checkpointed by
// SaveState as "m/<entry name>" and "v/<entry name>".
//
// FedExP's paper (Jhunjhunwala et al. 2023) tuned its FedAdam/FedAdagrad baselines to
// eta = 0.1, tau = 0.01 (CIFAR) and eta = 0.316, tau = 0.0316 (EMNIST); its FedAvgM
// used eta = 1.
//
//   aggregator {
//     name: "fedadam"
//     options {
//       [type.googleapis.com/fedkit.aggregators.FedAdamOptions] {
//         server_lr: 0.1 beta1: 0.9 beta2: 0.99 tau: 0.01
//       }
//     }
//   }
//   aggregator {
//     name: "fedavgm"
//     options { [type.googleapis.com/fedkit.aggregators.FedAvgMOptions] { server_lr: 1 momentum: 0.9 } }
//   }
//
// ("fedadagrad" takes FedAdagradOptions {server_lr, beta1, tau}; "fedyogi" takes
// FedYogiOptions {server_lr, beta1, beta2, tau}.)

#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "aggregators/common/partial_sums.h"
#include "aggregators/common/weighted_mean.h"
#include "aggregators/fedopt/fedopt_options.pb.h"
#include "fl/aggregator.h"
#include "fl/errors.h"
#include "fl/registry.h"
#include "fl/status_macros.h"
#include "glog/logging.h"

namespace aggregators {
namespace {

// The shared skeleton: accumulate the weighted mean delta, average buffers, keep
// named moment buffers ("slots") per parameter and let the subclass step.
class ServerOptimizer : public fl::Aggregator {
 public:
  absl::StatusOr<fl::RoundPlan> Configure(const fl::ModelState& global,
                                          fl::ServerContext& context) override {
    global_ = global;
    mean_.Reset();
    return fl::RoundPlan();
  }

  absl::Status Accumulate(fl::ClientUpdate update, fl::ServerContext& context) override {
    // WeightedMean CHECKs a positive weight; a client without data is its input to
    // reject, not our invariant to crash on.
    if (update.num_examples <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("update from client ", update.client_id, ": num_examples must be > 0, got ",
                       update.num_examples));
    }
    return mean_.Add(update.delta, WeightOf(update, ClientWeighting::kNumExamples));
  }

  absl::StatusOr<fl::ModelState> Finalize(const fl::ModelState& global,
                                          fl::ServerContext& context) override {
    absl::StatusOr<fl::ModelState> mean_delta = mean_.Mean();
    mean_.Reset();
    global_.reset();
    if (!mean_delta.ok()) return mean_delta.status();
    FL_RETURN_IF_ERROR(global.CheckSameLayout(*mean_delta));
    FL_RETURN_IF_ERROR(PrepareSlots(global));

    fl::ModelState next = global.Clone();
    try {
      at::NoGradGuard no_grad;
      // Buffers: global + weighted mean delta = weighted mean of the clients' values.
      // Parameters are stepped below instead (their alpha here is 0).
      next.Axpy(0.0, 1.0, *mean_delta);
      for (size_t i = 0; i < next.size(); ++i) {
        const fl::ModelState::Entry& entry = next.entries()[i];
        if (entry.is_buffer) continue;
        std::vector<at::Tensor> slots;
        for (const std::string& slot : slot_names_) slots.push_back(state_.at(Key(slot, entry.name)));
        Step(mean_delta->tensor(i), slots, next.mutable_tensor(i));
      }
    } catch (const c10::Error& e) {
      return absl::InternalError(absl::StrCat("server optimiser step failed: ", e.what_without_backtrace()));
    }
    return next;
  }

  // Only the mean delta's sums: the moments are server state, stepped at Finalize.
  std::optional<NamedSums> PartialSums() const override {
    CHECK(global_.has_value()) << "PartialSums before Configure";
    NamedSums sums;
    mean_.AddPartialSums("", *global_, sums);
    return sums;
  }

  absl::Status MergePartialSums(NamedSums sums) override {
    FL_RETURN_IF_ERROR(CheckMergeable(*this, global_.has_value(), sums));
    mean_.MergePartialSums("", *global_, sums);
    return absl::OkStatus();
  }

  std::map<std::string, at::Tensor> SaveState() const override {
    std::map<std::string, at::Tensor> saved;
    // Copies: the live buffers are updated in place next round.
    for (const auto& [key, tensor] : state_) saved.emplace(key, tensor.clone());
    return saved;
  }

  absl::Status RestoreState(const std::map<std::string, at::Tensor>& state) override {
    fl::ErrorList errors;
    // Entry names seen under each slot; every slot must name the same entries.
    std::map<std::string, std::set<std::string>> names;
    for (const std::string& slot : slot_names_) names[slot];
    for (const auto& [key, tensor] : state) {
      const size_t slash = key.find('/');
      const std::string slot = slash == std::string::npos ? "" : key.substr(0, slash);
      if (slash == std::string::npos || slash + 1 == key.size() || names.count(slot) == 0) {
        errors.Add(absl::StrCat("state \"", key, "\""),
                   absl::StrCat("expected a name \"<slot>/<entry>\" with slot one of ",
                                absl::StrJoin(slot_names_, ", ")));
        continue;
      }
      if (!tensor.defined()) errors.Add(absl::StrCat("state \"", key, "\""), "undefined tensor");
      names[slot].insert(key.substr(slash + 1));
    }
    std::set<std::string> all;
    for (const auto& [slot, entries] : names) all.insert(entries.begin(), entries.end());
    for (const auto& [slot, entries] : names) {
      for (const std::string& entry : all) {
        if (entries.count(entry) == 0) {
          errors.Add(absl::StrCat("state \"", Key(slot, entry), "\""), "missing");
        }
      }
    }
    // Once the layout is known (after a round), the checkpoint must match it too.
    if (errors.empty() && !state_.empty() && !state.empty()) {
      for (const auto& [key, tensor] : state_) {
        auto it = state.find(key);
        if (it == state.end()) {
          errors.Add(absl::StrCat("state \"", key, "\""), "missing");
        } else if (!it->second.sizes().equals(tensor.sizes())) {
          errors.Add(absl::StrCat("state \"", key, "\""),
                     absl::StrCat("expected shape ", c10::str(tensor.sizes()), ", got ",
                                  c10::str(it->second.sizes())));
        }
      }
      for (const auto& [key, tensor] : state) {
        if (state_.count(key) == 0) errors.Add(absl::StrCat("state \"", key, "\""), "unexpected");
      }
    }
    FL_RETURN_IF_ERROR(errors.ToStatus());
    state_.clear();
    for (const auto& [key, tensor] : state) state_.emplace(key, tensor.detach().clone());
    return absl::OkStatus();
  }

 protected:
  explicit ServerOptimizer(std::vector<std::string> slot_names)
      : slot_names_(std::move(slot_names)) {}

  // The value slot `slot` starts from, for a parameter shaped like `parameter`.
  virtual at::Tensor InitialSlot(const std::string& slot, const at::Tensor& parameter) const = 0;

  // One optimiser step on one parameter tensor `x`, in place, with the pseudo-gradient
  // `delta` and this parameter's slots (in slot_names_ order), also updated in place.
  virtual void Step(const at::Tensor& delta, std::vector<at::Tensor>& slots,
                    at::Tensor& x) const = 0;

 private:
  static std::string Key(const std::string& slot, const std::string& entry) {
    return absl::StrCat(slot, "/", entry);
  }

  // Creates the slots at the first round; afterwards (or after RestoreState) checks
  // they fit `global`'s parameters and moves them to its device.
  absl::Status PrepareSlots(const fl::ModelState& global) {
    if (state_.empty()) {
      for (const fl::ModelState::Entry& entry : global.entries()) {
        if (entry.is_buffer) continue;
        for (const std::string& slot : slot_names_) {
          state_.emplace(Key(slot, entry.name), InitialSlot(slot, entry.tensor));
        }
      }
      return absl::OkStatus();
    }
    fl::ErrorList errors;
    size_t expected = 0;
    for (const fl::ModelState::Entry& entry : global.entries()) {
      if (entry.is_buffer) continue;
      for (const std::string& slot : slot_names_) {
        ++expected;
        const std::string key = Key(slot, entry.name);
        auto it = state_.find(key);
        if (it == state_.end()) {
          errors.Add(absl::StrCat("state \"", key, "\""), "missing for the model's parameter");
        } else if (!it->second.sizes().equals(entry.tensor.sizes())) {
          errors.Add(absl::StrCat("state \"", key, "\""),
                     absl::StrCat("expected shape ", c10::str(entry.tensor.sizes()), ", got ",
                                  c10::str(it->second.sizes())));
        } else if (it->second.device() != entry.tensor.device() ||
                   it->second.scalar_type() != entry.tensor.scalar_type()) {
          it->second = it->second.to(entry.tensor.device(), entry.tensor.scalar_type());
        }
      }
    }
    if (errors.empty() && state_.size() != expected) {
      errors.Add("state", absl::StrCat("holds ", state_.size(), " tensors, the model needs ",
                                       expected));
    }
    if (!errors.empty()) {
      absl::Status status = errors.ToStatus();
      return absl::InvalidArgumentError(
          absl::StrCat("optimiser state does not fit the model:\n", status.message()));
    }
    return absl::OkStatus();
  }

  std::vector<std::string> slot_names_;
  WeightedMean mean_;
  // This round's global model (sharing the server's storage): the layout of the
  // partial sums of a process that accumulated nothing.
  std::optional<fl::ModelState> global_;
  std::map<std::string, at::Tensor> state_;
};

class FedAvgM : public ServerOptimizer {
 public:
  FedAvgM(double server_lr, double momentum)
      : ServerOptimizer({"m"}), server_lr_(server_lr), momentum_(momentum) {}

  fl::AggregatorProperties properties() const override {
    fl::AggregatorProperties properties;
    properties.order_invariant = true;
    properties.single_client_identity = true;  // m_0 = Delta_0, and eta = 1 by default
    properties.dp_sums = WeightedMean::DpSums("");
    properties.sums_only = true;
    return properties;
  }

 protected:
  at::Tensor InitialSlot(const std::string& slot, const at::Tensor& parameter) const override {
    return at::zeros_like(parameter);
  }

  void Step(const at::Tensor& delta, std::vector<at::Tensor>& slots,
            at::Tensor& x) const override {
    at::Tensor& m = slots[0];
    m.mul_(momentum_).add_(delta);  // m_t = beta m_{t-1} + Delta_t
    x.add_(m, server_lr_);          // x_{t+1} = x_t + eta m_t
  }

 private:
  double server_lr_;
  double momentum_;
};

enum class SecondMoment { kAdagrad, kAdam, kYogi };

class AdaptiveServerOptimizer : public ServerOptimizer {
 public:
  // `tau_inside_root`: FedExP's code form, v_{-1} = 0 and x += eta m / sqrt(v + tau).
  AdaptiveServerOptimizer(SecondMoment rule, double server_lr, double beta1, double beta2,
                          double tau, bool tau_inside_root = false)
      : ServerOptimizer({"m", "v"}),
        rule_(rule),
        server_lr_(server_lr),
        beta1_(beta1),
        beta2_(beta2),
        tau_(tau),
        tau_inside_root_(tau_inside_root) {}

  // One client in does not give that client's update out: the step is normalised
  // per coordinate.
  fl::AggregatorProperties properties() const override {
    fl::AggregatorProperties properties;
    properties.order_invariant = true;
    properties.single_client_identity = false;
    properties.dp_sums = WeightedMean::DpSums("");
    properties.sums_only = true;
    return properties;
  }

 protected:
  at::Tensor InitialSlot(const std::string& slot, const at::Tensor& parameter) const override {
    if (slot == "v" && !tau_inside_root_) return at::full_like(parameter, tau_ * tau_);
    return at::zeros_like(parameter);
  }

  void Step(const at::Tensor& delta, std::vector<at::Tensor>& slots,
            at::Tensor& x) const override {
    at::Tensor& m = slots[0];
    at::Tensor& v = slots[1];
    m.mul_(beta1_).add_(delta, 1.0 - beta1_);
    switch (rule_) {
      case SecondMoment::kAdagrad:
        v.addcmul_(delta, delta);
        break;
      case SecondMoment::kAdam:
        v.mul_(beta2_).addcmul_(delta, delta, 1.0 - beta2_);
        break;
      case SecondMoment::kYogi: {
        const at::Tensor delta_sq = delta * delta;
        v.addcmul_(delta_sq, at::sign(v - delta_sq), -(1.0 - beta2_));
        break;
      }
    }
    x.addcdiv_(m, tau_inside_root_ ? v.add(tau_).sqrt_() : v.sqrt().add_(tau_), server_lr_);
  }

 private:
  SecondMoment rule_;
  double server_lr_;
  double beta1_;
  double beta2_;
  double tau_;
  bool tau_inside_root_;
};

// Option checks, each recorded with its path so all problems are reported together.
void CheckPositive(absl::string_view field, double value, fl::ErrorList& errors) {
  if (!(value > 0) || !std::isfinite(value)) {
    errors.Add(absl::StrCat("options.", field), absl::StrCat("must be > 0, got ", value));
  }
}

void CheckUnitInterval(absl::string_view field, double value, fl::ErrorList& errors) {
  if (!(value >= 0 && value < 1)) {
    errors.Add(absl::StrCat("options.", field), absl::StrCat("must be in [0, 1), got ", value));
  }
}

absl::StatusOr<std::unique_ptr<fl::Aggregator>> CreateFedAvgM(
    const fedkit::aggregators::FedAvgMOptions& options, const fl::Aggregator::CreateArgs&) {
  const double server_lr = options.has_server_lr() ? options.server_lr() : 1.0;
  const double momentum = options.has_momentum() ? options.momentum() : 0.9;
  fl::ErrorList errors;
  CheckPositive("server_lr", server_lr, errors);
  CheckUnitInterval("momentum", momentum, errors);
  FL_RETURN_IF_ERROR(errors.ToStatus());
  return std::make_unique<FedAvgM>(server_lr, momentum);
}

// The defaults the three adaptive methods share (Reddi et al. 2021 tune per task;
// these are this project's starting point).
constexpr double kAdaptiveServerLr = 0.1;
constexpr double kBeta1 = 0.9;
constexpr double kBeta2 = 0.99;
constexpr double kTau = 1e-3;

absl::StatusOr<std::unique_ptr<fl::Aggregator>> CreateAdaptive(
    SecondMoment rule, double server_lr, double beta1, double beta2, double tau,
    bool tau_inside_root = false, fl::ErrorList errors = {}) {
  CheckPositive("server_lr", server_lr, errors);
  CheckUnitInterval("beta1", beta1, errors);
  if (rule != SecondMoment::kAdagrad) CheckUnitInterval("beta2", beta2, errors);
  CheckPositive("tau", tau, errors);
  FL_RETURN_IF_ERROR(errors.ToStatus());
  return std::make_unique<AdaptiveServerOptimizer>(rule, server_lr, beta1, beta2, tau,
                                                   tau_inside_root);
}

absl::StatusOr<std::unique_ptr<fl::Aggregator>> CreateFedAdagrad(
    const fedkit::aggregators::FedAdagradOptions& options, const fl::Aggregator::CreateArgs&) {
  using fedkit::aggregators::FedAdagradOptions;
  fl::ErrorList errors;
  if (!FedAdagradOptions::Form_IsValid(options.form())) {
    errors.Add("options.form",
               absl::StrCat("must be REDDI or FEDEXP_CODE, got ", options.form()));
  }
  const bool code_form = options.form() == FedAdagradOptions::FEDEXP_CODE;
  if (code_form && options.has_beta1()) {
    errors.Add("options.beta1", "form FEDEXP_CODE has no momentum: leave beta1 unset");
  }
  return CreateAdaptive(SecondMoment::kAdagrad,
                        options.has_server_lr() ? options.server_lr() : kAdaptiveServerLr,
                        code_form ? 0.0 : (options.has_beta1() ? options.beta1() : kBeta1),
                        /*beta2=*/0.0, options.has_tau() ? options.tau() : kTau, code_form,
                        std::move(errors));
}

absl::StatusOr<std::unique_ptr<fl::Aggregator>> CreateFedAdam(
    const fedkit::aggregators::FedAdamOptions& options, const fl::Aggregator::CreateArgs&) {
  return CreateAdaptive(SecondMoment::kAdam,
                        options.has_server_lr() ? options.server_lr() : kAdaptiveServerLr,
                        options.has_beta1() ? options.beta1() : kBeta1,
                        options.has_beta2() ? options.beta2() : kBeta2,
                        options.has_tau() ? options.tau() : kTau);
}

absl::StatusOr<std::unique_ptr<fl::Aggregator>> CreateFedYogi(
    const fedkit::aggregators::FedYogiOptions& options, const fl::Aggregator::CreateArgs&) {
  return CreateAdaptive(SecondMoment::kYogi,
                        options.has_server_lr() ? options.server_lr() : kAdaptiveServerLr,
                        options.has_beta1() ? options.beta1() : kBeta1,
                        options.has_beta2() ? options.beta2() : kBeta2,
                        options.has_tau() ? options.tau() : kTau);
}

FL_REGISTER_PLUGIN(fl::Aggregator, "fedavgm", fedkit::aggregators::FedAvgMOptions, CreateFedAvgM);
FL_REGISTER_PLUGIN(fl::Aggregator, "fedadagrad", fedkit::aggregators::FedAdagradOptions,
                   CreateFedAdagrad);
FL_REGISTER_PLUGIN(fl::Aggregator, "fedadam", fedkit::aggregators::FedAdamOptions, CreateFedAdam);
FL_REGISTER_PLUGIN(fl::Aggregator, "fedyogi", fedkit::aggregators::FedYogiOptions, CreateFedYogi);

}  // namespace
}  // namespace aggregators
