// SCAFFOLD (Karimireddy et al., "SCAFFOLD: Stochastic Controlled Averaging for
// Federated Learning", ICML 2020, Algorithm 1): control variates correct the
// client drift of FedAvg under heterogeneous data. The server keeps c (one tensor
// per model parameter, zeros at first) and each client i keeps its own c_i (zeros
// on its first participation). In a round with sampled clients S, client i starts
// from the global model x and takes K local steps
//   y_i <- y_i - eta_l (g_i(y_i) - c_i + c)                         (Alg. 1, line 10)
// then refreshes its control variate, option I or II (line 12),
//   I:  c_i+ = grad f_i(x)                   (full-batch gradient at x)
//   II: c_i+ = c_i - c + (x - y_i) / (K eta_l) = c_i - c - delta_i / (K eta_l)
// and sends delta_i = y_i - x and Delta c_i = c_i+ - c_i (line 13). The server
// (lines 16-17) moves
//   x <- x + eta_g * mean_{i in S} delta_i
//   c <- c + (1/N) sum_{i in S} Delta c_i,   N = clients in the federation.
// The paper's mean is the plain 1/|S| mean; by default the deltas are weighted by
// data size like FedAvg's (options.weighting). The c update uses 1/N, or n_i / n
// (n = the federation's examples) as FedExP's official code does
// (options.control_variate_weighting).
//
// Both halves live here: the aggregator "scaffold" and the client hook "scaffold",
// which the aggregator's RoundPlan names. The correction -c_i + c is applied through
// the hook's loss term sum_l <w_l, (c - c_i)_l> with (c - c_i) held constant, whose
// gradient is exactly c - c_i, so any optimiser sees g_i(y) - c_i + c (plain SGD
// then follows line 10 exactly). c travels as the broadcast "scaffold/c" and
// Delta c_i comes back as the extra "scaffold/delta_c", both ModelStates over the
// model's parameters; buffers (BatchNorm statistics) carry no control variate and
// take the weighted mean of the clients' values, as in FedAvg. A client's state
// (HookContext::state) maps each parameter name to its c_i.
//
// An update without a matching "scaffold/delta_c" is rejected; Accumulate keeps
// O(P) memory (a weighted sum of deltas and a sum of Delta c_i), sums that
// distributed runs all-reduce.
//
//   aggregator {
//     name: "scaffold"
//     options {
//       [type.googleapis.com/fedkit.aggregators.ScaffoldOptions] {
//         server_lr: 1.0
//         weighting: NUM_EXAMPLES          # or UNIFORM (the paper's 1/|S|)
//         control_variate_update: OPTION_II  # or OPTION_I
//         # extrapolation { epsilon: 0.1 }   # SCAFFOLD(ExP): FedExP's eta_g on the model step
//       }
//     }
//   }

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/autograd.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "aggregators/common/fedexp_step.h"
#include "aggregators/common/partial_sums.h"
#include "aggregators/common/weighted_mean.h"
#include "aggregators/scaffold/scaffold_options.pb.h"
#include "fl/aggregator.h"
#include "fl/client_hook.h"
#include "fl/model.h"
#include "fl/registry.h"
#include "fl/status_macros.h"
#include "glog/logging.h"

namespace aggregators {
namespace {

using ::fedkit::aggregators::ScaffoldHookOptions;
using ::fedkit::aggregators::ScaffoldOptions;

constexpr char kName[] = "scaffold";
constexpr char kBroadcastC[] = "scaffold/c";
constexpr char kDeltaC[] = "scaffold/delta_c";
// Partial-sum names of sum_i Delta c_i: kDeltaCSums + parameter name.
constexpr char kDeltaCSums[] = "delta_c/";
// SaveState keys: kStatePrefix + parameter name.
constexpr char kStatePrefix[] = "c/";
constexpr int kDefaultGradientBatchSize = 256;

// The parameter entries of `state` (sharing its tensors), in order.
fl::ModelState Parameters(const fl::ModelState& state) {
  std::vector<fl::ModelState::Entry> entries;
  for (const auto& e : state.entries()) {
    if (!e.is_buffer) entries.push_back(e);
  }
  return fl::ModelState(std::move(entries));
}

absl::Status CheckGradientBatchSize(const std::optional<int>& value) {
  if (value.has_value() && *value < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("options.gradient_batch_size: must be >= 1, got ", *value));
  }
  return absl::OkStatus();
}

absl::Status CheckControlVariateUpdate(int value) {
  if (!ScaffoldHookOptions::ControlVariateUpdate_IsValid(value)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "options.control_variate_update: must be OPTION_II or OPTION_I, got ", value));
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// The client hook.

class ScaffoldHook : public fl::ClientHook {
 public:
  ScaffoldHook(ScaffoldHookOptions::ControlVariateUpdate rule, int64_t gradient_batch_size)
      : rule_(rule), gradient_batch_size_(gradient_batch_size) {}

  bool planned_only() const override { return true; }

  absl::Status BeforeTraining(fl::HookContext& context) override {
    try {
      return BeforeTrainingUnguarded(context);
    } catch (const c10::Error& e) {
      return absl::InternalError(e.what_without_backtrace());
    }
  }

  // sum_l <w_l, (c - c_i)_l>: its gradient is c - c_i, the paper's correction.
  at::Tensor LossTerm(fl::HookContext& context) override {
    at::Tensor term;
    for (size_t l = 0; l < parameters_.size(); ++l) {
      at::Tensor t = (parameters_[l] * correction_[l]).sum();
      term = term.defined() ? term + t : t;
    }
    return term;
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
    if (context.broadcast == nullptr || !context.broadcast->count(kBroadcastC)) {
      return absl::FailedPreconditionError(
          absl::StrCat("broadcast \"", kBroadcastC,
                       "\" is missing: the \"scaffold\" client hook needs the \"scaffold\" "
                       "aggregator's server control variate"));
    }
    const fl::ModelState& c = context.broadcast->at(kBroadcastC);

    std::vector<fl::ModelState::Entry> model_entries;
    // The shared parameters: the server has no control variate for a client's own
    // or a frozen one.
    for (const auto& item : context.model->named_parameters(/*recurse=*/true)) {
      if (context.unshared != nullptr && context.unshared->count(item.key()) != 0) continue;
      names_.push_back(item.key());
      parameters_.push_back(item.value());
      model_entries.push_back({item.key(), item.value(), false});
    }
    const fl::ModelState model_parameters(std::move(model_entries));
    if (absl::Status s = model_parameters.CheckSameLayout(c); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "broadcast \"", kBroadcastC, "\" does not fit the model's parameters: ", s.message()));
    }

    // c_i: zeros on the client's first participation, else what its last round stored.
    fl::TensorMap& state = *context.state;
    if (!state.empty() && state.size() != parameters_.size()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "client state holds ", state.size(), " control-variate tensors, the model has ",
          parameters_.size(), " parameters"));
    }
    for (size_t l = 0; l < parameters_.size(); ++l) {
      const at::Tensor& p = parameters_[l];
      at::Tensor c_i;
      if (state.empty()) {
        c_i = at::zeros_like(p);
      } else {
        auto it = state.find(names_[l]);
        if (it == state.end() || !it->second.sizes().equals(p.sizes()) ||
            it->second.scalar_type() != p.scalar_type()) {
          return absl::FailedPreconditionError(absl::StrCat(
              "client state: no control variate of shape ", c10::str(p.sizes()), " and dtype ",
              c10::toString(p.scalar_type()), " for parameter \"", names_[l], "\""));
        }
        c_i = it->second.to(p.device());
      }
      at::Tensor c_l = c.tensor(l).detach().to(p.device());
      correction_.push_back((c_l - c_i).detach());
      c_.push_back(c_l);
      c_i_.push_back(c_i.detach());
    }

    if (rule_ == ScaffoldHookOptions::OPTION_I) {
      FL_ASSIGN_OR_RETURN(full_gradient_, FullBatchGradient(context));
    }
    return absl::OkStatus();
  }

  // grad f_i(x): the gradient of the mean cross-entropy over the client's training
  // examples at the model as received, summed over batches with weights
  // (batch size / n). Buffers that a train-mode forward pass updates (BatchNorm's
  // running statistics) are put back, so local training starts from x exactly.
  absl::StatusOr<std::vector<at::Tensor>> FullBatchGradient(fl::HookContext& context) {
    const std::vector<int64_t>& indices = *context.train_indices;
    if (indices.empty()) {
      return absl::FailedPreconditionError(
          "option I: no training examples to take the full-batch gradient over");
    }
    fl::Model& model = *context.model;
    std::vector<std::pair<at::Tensor, at::Tensor>> buffers;
    for (const auto& item : model.named_buffers(/*recurse=*/true)) {
      buffers.emplace_back(item.value(), item.value().detach().clone());
    }
    model.train();
    at::AutoGradMode grad_mode(true);
    std::vector<at::Tensor> gradient;
    for (const at::Tensor& p : parameters_) {
      gradient.push_back(at::zeros_like(p));
    }
    const auto n = static_cast<int64_t>(indices.size());
    const at::Tensor all = at::tensor(indices, at::kLong).to(context.examples->x.device());
    for (int64_t begin = 0; begin < n; begin += gradient_batch_size_) {
      const int64_t size = std::min(gradient_batch_size_, n - begin);
      const at::Tensor batch = all.narrow(0, begin, size);
      const at::Tensor loss =
          at::cross_entropy_loss(model.Forward(context.examples->x.index_select(0, batch)),
                                 context.examples->y.index_select(0, batch))
              .mul(static_cast<double>(size) / static_cast<double>(n));
      const std::vector<at::Tensor> grads = torch::autograd::grad(
          {loss}, parameters_, /*grad_outputs=*/{}, /*retain_graph=*/false,
          /*create_graph=*/false, /*allow_unused=*/true);
      for (size_t l = 0; l < grads.size(); ++l) {
        if (grads[l].defined()) gradient[l].add_(grads[l]);
      }
    }
    at::NoGradGuard no_grad;
    for (auto& [buffer, saved] : buffers) buffer.copy_(saved);
    return gradient;
  }

  absl::Status AfterTrainingUnguarded(fl::HookContext& context, fl::ClientUpdate& update) {
    if (update.extras.count(kDeltaC)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "extra \"", kDeltaC, "\" is already set: is the \"scaffold\" hook requested twice?"));
    }
    const fl::ModelState delta = Parameters(update.delta);
    if (delta.size() != parameters_.size()) {
      return absl::InvalidArgumentError(absl::StrCat("the update's delta has ", delta.size(),
                                                     " parameters, the model ", parameters_.size()));
    }
    double scale = 0.0;  // option II: 1 / (K eta_l)
    if (rule_ == ScaffoldHookOptions::OPTION_II) {
      const int64_t k = update.local_steps;
      const double lr = context.learning_rate;
      if (k < 1) {
        return absl::FailedPreconditionError(
            absl::StrCat("option II divides by the local steps K, got K = ", k));
      }
      if (!(lr > 0) || !std::isfinite(lr)) {
        return absl::FailedPreconditionError(
            absl::StrCat("option II divides by the local learning rate, got ", lr));
      }
      scale = 1.0 / (static_cast<double>(k) * lr);
    }
    std::vector<fl::ModelState::Entry> delta_c;
    fl::TensorMap next_state;
    for (size_t l = 0; l < parameters_.size(); ++l) {
      at::Tensor dc;
      if (rule_ == ScaffoldHookOptions::OPTION_II) {
        // c_i+ - c_i = -c - delta / (K eta_l)
        dc = -c_[l] - delta.tensor(l).to(c_[l].device()) * scale;
      } else {
        dc = full_gradient_[l] - c_i_[l];
      }
      next_state[names_[l]] = (c_i_[l] + dc).detach();
      delta_c.push_back({names_[l], dc.detach(), false});
    }
    *context.state = std::move(next_state);
    update.extras[kDeltaC] = fl::ModelState(std::move(delta_c));
    return absl::OkStatus();
  }

  const ScaffoldHookOptions::ControlVariateUpdate rule_;
  const int64_t gradient_batch_size_;
  // Per model parameter, in registration order.
  std::vector<std::string> names_;
  std::vector<at::Tensor> parameters_;  // the live parameters being trained
  std::vector<at::Tensor> correction_;  // c - c_i, constant
  std::vector<at::Tensor> c_;
  std::vector<at::Tensor> c_i_;
  std::vector<at::Tensor> full_gradient_;  // option I
};

absl::StatusOr<std::unique_ptr<fl::ClientHook>> CreateScaffoldHook(
    const ScaffoldHookOptions& options, const fl::ClientHook::CreateArgs&) {
  FL_RETURN_IF_ERROR(CheckControlVariateUpdate(options.control_variate_update()));
  FL_RETURN_IF_ERROR(CheckGradientBatchSize(
      options.has_gradient_batch_size() ? std::optional<int>(options.gradient_batch_size())
                                        : std::nullopt));
  return std::make_unique<ScaffoldHook>(
      options.control_variate_update(),
      options.has_gradient_batch_size() ? options.gradient_batch_size() : kDefaultGradientBatchSize);
}

// ---------------------------------------------------------------------------
// The aggregator.

class Scaffold : public fl::Aggregator {
 public:
  Scaffold(double server_lr, ClientWeighting weighting, bool c_by_examples,
           google::protobuf::Any hook_options, std::optional<FedExpStepConfig> extrapolation)
      : server_lr_(server_lr),
        weighting_(weighting),
        c_by_examples_(c_by_examples),
        hook_options_(std::move(hook_options)),
        extrapolation_(extrapolation) {}

  fl::AggregatorProperties properties() const override {
    fl::AggregatorProperties properties;
    properties.order_invariant = true;
    properties.single_client_identity = true;  // eta_g = 1: x + delta
    properties.client_hooks = {kName};
    properties.sums_only = true;
    return properties;
  }

  absl::StatusOr<fl::RoundPlan> Configure(const fl::ModelState& global,
                                          fl::ServerContext& context) override {
    FL_RETURN_IF_ERROR(CheckNumClients(context));
    const fl::ModelState parameters = Parameters(global);
    if (!c_.has_value()) {
      if (restored_.has_value()) {
        FL_ASSIGN_OR_RETURN(c_, FromCheckpoint(parameters));
        restored_.reset();
      } else {
        c_ = parameters.ZerosLike();
      }
    } else if (absl::Status s = parameters.CheckSameLayout(*c_); !s.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("the control variate c does not fit the global model: ", s.message()));
    }
    global_ = global;
    ResetRound();
    fl::RoundPlan plan;
    plan.hooks.push_back({kName, hook_options_});
    plan.broadcast[kBroadcastC] = c_->Clone();
    return plan;
  }

  absl::Status Accumulate(fl::ClientUpdate update, fl::ServerContext& context) override {
    if (!global_.has_value()) {
      return absl::FailedPreconditionError("Accumulate called before Configure");
    }
    if (absl::Status s = global_->CheckSameLayout(update.delta); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("delta: ", s.message()));
    }
    auto it = update.extras.find(kDeltaC);
    if (it == update.extras.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("update has no extra \"", kDeltaC,
                       "\" (the \"scaffold\" client hook sends it); rejected"));
    }
    const fl::ModelState& delta_c = it->second;
    if (absl::Status s = c_->CheckSameLayout(delta_c); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("extra \"", kDeltaC, "\": ", s.message()));
    }
    // Non-finite deltas and extras never get here: the server rejects them first.
    const double weight = WeightOf(update, weighting_);
    if (!(weight > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("num_examples is ", update.num_examples, ": no weight in the mean"));
    }
    FL_RETURN_IF_ERROR(mean_.Add(update.delta, weight));
    if (extrapolation_.has_value()) norms_.Add(update.delta, weight);
    if (!delta_c_sum_.has_value()) delta_c_sum_ = c_->ZerosLike();
    // sum_i Delta c_i, or sum_i n_i Delta c_i, scaled by 1/N or 1/n in Finalize.
    delta_c_sum_->Axpy(c_by_examples_ ? static_cast<double>(update.num_examples) : 1.0, delta_c);
    return absl::OkStatus();
  }

  absl::StatusOr<fl::ModelState> Finalize(const fl::ModelState& global,
                                          fl::ServerContext& context) override {
    FL_RETURN_IF_ERROR(CheckNumClients(context));
    FL_ASSIGN_OR_RETURN(fl::ModelState mean_delta, mean_.Mean());
    if (mean_.count() > context.num_clients) {
      return absl::FailedPreconditionError(
          absl::StrCat(mean_.count(), " updates accepted, but the server context counts only ",
                       context.num_clients, " clients (num_clients)"));
    }
    if (absl::Status s = global_->CheckSameLayout(global); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("global model differs from the one configured: ", s.message()));
    }
    fl::ModelState next = global.Clone();
    if (extrapolation_.has_value()) {
      next = TakeFedExpStep(global, mean_delta, norms_.Mean(), mean_.count(), *extrapolation_,
                            context);
    } else {
      // Buffers: the weighted mean of client values, never scaled by eta_g.
      next.Axpy(server_lr_, 1.0, mean_delta);
    }
    c_->Axpy(1.0 / (c_by_examples_ ? static_cast<double>(context.num_examples)
                                   : static_cast<double>(context.num_clients)),
             *delta_c_sum_);
    ResetRound();
    global_.reset();
    return next;
  }

  std::optional<NamedSums> PartialSums() const override {
    CHECK(global_.has_value()) << "PartialSums before Configure";
    NamedSums sums;
    mean_.AddPartialSums("", *global_, sums);
    if (extrapolation_.has_value()) norms_.AddPartialSums("sq_norm/", sums);
    AddStateSums(kDeltaCSums, delta_c_sum_.has_value() ? *delta_c_sum_ : c_->ZerosLike(), sums);
    return sums;
  }

  absl::Status MergePartialSums(NamedSums sums) override {
    FL_RETURN_IF_ERROR(CheckMergeable(*this, global_.has_value(), sums));
    mean_.MergePartialSums("", *global_, sums);
    if (extrapolation_.has_value()) norms_.MergePartialSums("sq_norm/", sums);
    delta_c_sum_ = StateFromSums(kDeltaCSums, *c_, sums);
    return absl::OkStatus();
  }

  std::map<std::string, at::Tensor> SaveState() const override {
    std::map<std::string, at::Tensor> state;
    if (c_.has_value()) {
      for (const auto& e : c_->entries()) state[kStatePrefix + e.name] = e.tensor.clone();
    } else if (restored_.has_value()) {
      for (const auto& [key, tensor] : *restored_) state[key] = tensor.clone();
    }
    return state;
  }

  absl::Status RestoreState(const std::map<std::string, at::Tensor>& state) override {
    std::map<std::string, at::Tensor> restored;
    for (const auto& [key, tensor] : state) {
      if (!absl::StartsWith(key, kStatePrefix) || key.size() == sizeof(kStatePrefix) - 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            "state: unexpected key \"", key, "\"; SCAFFOLD keeps only \"", kStatePrefix,
            "<parameter name>\""));
      }
      if (!tensor.defined() || !at::isFloatingType(tensor.scalar_type())) {
        return absl::InvalidArgumentError(
            absl::StrCat("state: \"", key, "\" is not a floating-point tensor"));
      }
      restored[key] = tensor.detach().clone();
    }
    // Checked against the model at the next Configure; an empty state means c = 0.
    c_.reset();
    restored_.reset();
    if (!restored.empty()) restored_ = std::move(restored);
    ResetRound();
    global_.reset();
    return absl::OkStatus();
  }

 private:
  absl::Status CheckNumClients(const fl::ServerContext& context) const {
    if (context.num_clients < 1) {
      return absl::FailedPreconditionError(absl::StrCat(
          "SCAFFOLD scales c's update by 1/N: server context num_clients must be >= 1, got ",
          context.num_clients));
    }
    if (c_by_examples_ && context.num_examples < 1) {
      return absl::FailedPreconditionError(absl::StrCat(
          "control_variate_weighting FEDERATION_NUM_EXAMPLES scales c's update by 1/n: server "
          "context num_examples must be >= 1, got ",
          context.num_examples));
    }
    return absl::OkStatus();
  }

  // c from a restored checkpoint, in the order of the model's parameters.
  absl::StatusOr<fl::ModelState> FromCheckpoint(const fl::ModelState& parameters) const {
    std::vector<fl::ModelState::Entry> entries;
    for (const auto& e : parameters.entries()) {
      const std::string key = kStatePrefix + e.name;
      auto it = restored_->find(key);
      if (it == restored_->end()) {
        return absl::InvalidArgumentError(
            absl::StrCat("checkpoint: no control variate \"", key, "\""));
      }
      if (!it->second.sizes().equals(e.tensor.sizes()) ||
          it->second.scalar_type() != e.tensor.scalar_type()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "checkpoint: control variate \"", key, "\" has shape ", c10::str(it->second.sizes()),
            " and dtype ", c10::toString(it->second.scalar_type()), ", the model's parameter ",
            c10::str(e.tensor.sizes()), " and ", c10::toString(e.tensor.scalar_type())));
      }
      entries.push_back({e.name, it->second.to(e.tensor.device()), false});
    }
    if (restored_->size() != entries.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint: ", restored_->size(), " control-variate tensors, the model has ",
                       entries.size(), " parameters"));
    }
    return fl::ModelState(std::move(entries));
  }

  void ResetRound() {
    mean_.Reset();
    norms_.Reset();
    delta_c_sum_.reset();
  }

  const double server_lr_;
  const ClientWeighting weighting_;
  const bool c_by_examples_;
  const google::protobuf::Any hook_options_;
  // The server control variate c over the model's parameters; created at the first
  // Configure (from restored_ when a checkpoint was restored).
  std::optional<fl::ModelState> c_;
  std::optional<std::map<std::string, at::Tensor>> restored_;
  // This round's global model (sharing the server's storage), for checking updates
  // and as the layout of the partial sums of a process that accumulated nothing.
  std::optional<fl::ModelState> global_;
  const std::optional<FedExpStepConfig> extrapolation_;
  WeightedMean mean_;
  SquaredNormMean norms_;  // for SCAFFOLD(ExP)'s eta_g
  std::optional<fl::ModelState> delta_c_sum_;
};

absl::StatusOr<std::unique_ptr<fl::Aggregator>> CreateScaffold(const ScaffoldOptions& options,
                                                               const fl::Aggregator::CreateArgs&) {
  const double server_lr = options.has_server_lr() ? options.server_lr() : 1.0;
  if (!(server_lr > 0) || !std::isfinite(server_lr)) {
    return absl::InvalidArgumentError(
        absl::StrCat("options.server_lr: must be > 0, got ", server_lr));
  }
  if (!ScaffoldOptions::Weighting_IsValid(options.weighting())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "options.weighting: must be NUM_EXAMPLES or UNIFORM, got ", options.weighting()));
  }
  if (!ScaffoldOptions::ControlVariateWeighting_IsValid(options.control_variate_weighting())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "options.control_variate_weighting: must be FEDERATION_UNIFORM or "
        "FEDERATION_NUM_EXAMPLES, got ",
        options.control_variate_weighting()));
  }
  FL_RETURN_IF_ERROR(CheckControlVariateUpdate(options.control_variate_update()));
  FL_RETURN_IF_ERROR(CheckGradientBatchSize(
      options.has_gradient_batch_size() ? std::optional<int>(options.gradient_batch_size())
                                        : std::nullopt));
  ScaffoldHookOptions hook;
  hook.set_control_variate_update(options.control_variate_update());
  if (options.has_gradient_batch_size()) hook.set_gradient_batch_size(options.gradient_batch_size());
  google::protobuf::Any hook_options;
  hook_options.PackFrom(hook);
  std::optional<FedExpStepConfig> extrapolation;
  if (options.has_extrapolation()) {
    // FedExP's eta_g is the model step then; a server_lr would be silently unused.
    if (options.has_server_lr()) {
      return absl::InvalidArgumentError(
          "options.server_lr: not used with options.extrapolation, whose adaptive eta_g is the "
          "model's step size; remove one of them");
    }
    FL_ASSIGN_OR_RETURN(extrapolation,
                        FedExpStepConfigFromOptions(options.extrapolation(), "options.extrapolation"));
  }
  return std::make_unique<Scaffold>(
      server_lr,
      options.weighting() == ScaffoldOptions::UNIFORM ? ClientWeighting::kUniform
                                                      : ClientWeighting::kNumExamples,
      options.control_variate_weighting() == ScaffoldOptions::FEDERATION_NUM_EXAMPLES,
      std::move(hook_options), extrapolation);
}

FL_REGISTER_PLUGIN(fl::Aggregator, "scaffold", fedkit::aggregators::ScaffoldOptions,
                   CreateScaffold);
FL_REGISTER_PLUGIN(fl::ClientHook, "scaffold", fedkit::aggregators::ScaffoldHookOptions,
                   CreateScaffoldHook);

}  // namespace
}  // namespace aggregators
