// Elastic Aggregation (Chen, Hu, Tan, Wei, Wu, "Elastic Aggregation for Federated
// Optimization", CVPR 2023, Algorithm 1). Each client measures how sensitive the
// received global model is, parameter by parameter, on a held-out subset B_k of
// its data: for every mini-batch b of B_k, g_b = grad_theta ||F(theta; x_b)||^2
// (mean over the batch; no labels needed) and, element-wise,
//   Omega_k <- mu * Omega_k + (1 - mu) * |g_b|,
// an EMA started from zeros every round, as Algorithm 1 initialises it inside the
// round loop (option: kept across the client's rounds). B_k is drawn once, before
// the first round, and never trained on (option: redrawn every round; its size is
// floor(0.3 n_k) by default). The server interpolates each parameter's step by
// its aggregated sensitivity:
//   w_k = n_k / sum_j n_j,  Omega = sum_k w_k Omega_k,
//   zeta = 1 + tau - Omega / max_layer(Omega),
//   theta <- theta + eta * zeta (.) sum_k w_k delta_k       (delta = local - global)
// where max_layer is the largest entry within the parameter's layer (the weight
// and bias of one module), as Algorithm 1 normalises "within a single layer"
// (option: over all parameters, per tensor, or per entry over clients). Sensitive
// parameters move less (zeta -> tau) and insensitive ones more (zeta -> 1 + tau).
// With zeta = 1 and eta = 1 this is FedAvg.
//
// Elastic only replaces the final averaging, so it wraps a `base` aggregator
// (FedAvg by default; FedProx, SCAFFOLD, ...): the base's client hooks and
// broadcasts go out unchanged, its server state (SCAFFOLD's c) is updated by the
// base, and Elastic rescales the base's parameter step by eta * zeta (and the
// step of the base's evaluation model, if it sets one, by the same factors).
// Buffers keep the base's values. Where the normaliser is 0 (no sensitivity measured,
// e.g. clients too small to hold anything out), zeta = 1 there. sum_k n_k Omega_k
// is all-reduced in distributed runs with the base's sums, when the base has them
// and the normaliser is not CLIENTS's max over clients (else the updates are
// gathered to one process).
//
// Mode FLBENCH is FL-bench-like: it makes the public reproduction's choices
// (docs/elastic.md, section 3): one scalar per parameter tensor,
// ||grad CE(F(theta; x), y)||^2, normalised per tensor by the largest client
// value, the EMA kept across rounds, B_k redrawn every round; the reproduction's
// known bugs are deliberately not copied. Every choice is also a separate option.
//
// Two plugins: the client hook "elastic" (sends the extra "elastic/omega") and the
// aggregator "elastic", which requests the hook.
//
//   aggregator {
//     name: "elastic"
//     options {
//       [type.googleapis.com/fedkit.aggregators.ElasticOptions] {
//         mode: PAPER             # or FLBENCH
//         tau: 0.5
//         sensitivity { mu: 0.95 holdout_fraction: 0.3 }
//         # base { name: "scaffold" }   # Elastic on top of SCAFFOLD
//       }
//     }
//   }

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/autograd.h>

#include "absl/strings/str_cat.h"
#include "aggregators/common/conformance_reasons.h"
#include "aggregators/common/held_out.h"
#include "aggregators/common/partial_sums.h"
#include "aggregators/elastic/elastic_options.pb.h"
#include "aggregators/common/base_aggregator.h"
#include "fl/aggregator.h"
#include "fl/client_hook.h"
#include "fl/errors.h"
#include "fl/model.h"
#include "fl/registry.h"
#include "fl/status_macros.h"
#include "glog/logging.h"

namespace aggregators {
namespace {

using ::fedkit::aggregators::ElasticGranularity;
using ::fedkit::aggregators::ElasticHookOptions;
using ::fedkit::aggregators::ElasticMode;
using ::fedkit::aggregators::ElasticNormalizer;
using ::fedkit::aggregators::ElasticObjective;
using ::fedkit::aggregators::ElasticOptions;

constexpr char kName[] = "elastic";
constexpr char kOmegaExtra[] = "elastic/omega";
// Client state keys: kOmegaPrefix + parameter name, the EMA update count, and
// the fixed B_k when it is not redrawn.
constexpr char kOmegaPrefix[] = "omega/";
constexpr char kUpdatesKey[] = "updates";
constexpr char kHoldoutKey[] = "holdout";
// Partial-sum names: kOmegaSums + parameter name (sum_k n_k Omega_k), and sum_k n_k.
constexpr char kOmegaSums[] = "omega/";
constexpr char kOmegaWeightSum[] = "omega_weight";
constexpr double kDefaultMu = 0.95;
constexpr double kDefaultHoldoutFraction = 0.3;
constexpr double kDefaultTau = 0.5;

ElasticGranularity GranularityOf(ElasticMode mode, ElasticGranularity set) {
  if (set != fedkit::aggregators::GRANULARITY_DEFAULT) return set;
  return mode == fedkit::aggregators::FLBENCH ? fedkit::aggregators::TENSOR
                                              : fedkit::aggregators::ELEMENT;
}

ElasticObjective ObjectiveOf(ElasticMode mode, ElasticObjective set) {
  if (set != fedkit::aggregators::OBJECTIVE_DEFAULT) return set;
  return mode == fedkit::aggregators::FLBENCH ? fedkit::aggregators::LABELED_CROSS_ENTROPY
                                              : fedkit::aggregators::OUTPUT_NORM;
}

ElasticNormalizer NormalizerOf(ElasticMode mode, ElasticNormalizer set) {
  if (set != fedkit::aggregators::NORMALIZER_DEFAULT) return set;
  return mode == fedkit::aggregators::FLBENCH ? fedkit::aggregators::CLIENTS
                                              : fedkit::aggregators::EACH_LAYER;
}

// The hook's options with every default filled in.
struct SensitivitySettings {
  ElasticGranularity granularity = fedkit::aggregators::ELEMENT;
  ElasticObjective objective = fedkit::aggregators::OUTPUT_NORM;
  double mu = kDefaultMu;
  // Exactly one is used: holdout_batches > 0, else holdout_fraction.
  double holdout_fraction = kDefaultHoldoutFraction;
  int64_t holdout_batches = 0;
  bool redraw_each_round = false;
  bool bias_correction = false;
  int64_t batch_size = 0;  // 0: the client's batch size
  bool keep_across_rounds = false;
};

// Validates `options`, naming fields under `path` (e.g. "options.sensitivity.").
absl::StatusOr<SensitivitySettings> ResolveSensitivity(const ElasticHookOptions& options,
                                                       const std::string& path) {
  fl::ErrorList errors;
  SensitivitySettings s;
  if (!fedkit::aggregators::ElasticMode_IsValid(options.mode())) {
    errors.Add(path + "mode", absl::StrCat("must be PAPER or FLBENCH, got ", options.mode()));
  }
  if (!fedkit::aggregators::ElasticGranularity_IsValid(options.granularity())) {
    errors.Add(path + "granularity",
               absl::StrCat("must be ELEMENT or TENSOR, got ", options.granularity()));
  }
  if (!fedkit::aggregators::ElasticObjective_IsValid(options.objective())) {
    errors.Add(path + "objective", absl::StrCat("must be OUTPUT_NORM or LABELED_CROSS_ENTROPY, got ",
                                                options.objective()));
  }
  s.granularity = GranularityOf(options.mode(), options.granularity());
  s.objective = ObjectiveOf(options.mode(), options.objective());
  if (options.has_mu()) {
    s.mu = options.mu();
    if (!(s.mu >= 0.0 && s.mu < 1.0)) {
      errors.Add(path + "mu", absl::StrCat("must be in [0, 1), got ", s.mu));
    }
  }
  switch (options.holdout_case()) {
    case ElasticHookOptions::kHoldoutFraction:
      s.holdout_fraction = options.holdout_fraction();
      if (!(s.holdout_fraction > 0.0 && s.holdout_fraction < 1.0)) {
        errors.Add(path + "holdout_fraction",
                   absl::StrCat("must be in (0, 1), got ", s.holdout_fraction));
      }
      break;
    case ElasticHookOptions::kHoldoutBatches:
      s.holdout_batches = options.holdout_batches();
      if (s.holdout_batches < 1) {
        errors.Add(path + "holdout_batches",
                   absl::StrCat("must be >= 1, got ", s.holdout_batches));
      }
      break;
    case ElasticHookOptions::HOLDOUT_NOT_SET:
      break;
  }
  // Algorithm 1 draws B_k once and starts Omega_k from zeros every round;
  // FL-bench redraws B_k and keeps its EMA.
  const bool flbench = options.mode() == fedkit::aggregators::FLBENCH;
  s.redraw_each_round =
      options.has_redraw_each_round() ? options.redraw_each_round() : flbench;
  s.bias_correction = options.bias_correction();
  s.keep_across_rounds =
      options.has_keep_across_rounds() ? options.keep_across_rounds() : flbench;
  if (options.has_sensitivity_batch_size()) {
    s.batch_size = options.sensitivity_batch_size();
    if (s.batch_size < 1) {
      errors.Add(path + "sensitivity_batch_size",
                 absl::StrCat("must be >= 1, got ", s.batch_size));
    }
  }
  FL_RETURN_IF_ERROR(errors.ToStatus());
  return s;
}

// ---------------------------------------------------------------------------
// The client hook.

class ElasticHook : public fl::ClientHook {
 public:
  explicit ElasticHook(SensitivitySettings settings) : settings_(settings) {}

  absl::Status BeforeTraining(fl::HookContext& context) override {
    try {
      return BeforeTrainingUnguarded(context);
    } catch (const c10::Error& e) {
      return absl::InternalError(e.what_without_backtrace());
    }
  }

  absl::Status AfterTraining(fl::HookContext& context, fl::ClientUpdate& update) override {
    if (update.extras.count(kOmegaExtra)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "extra \"", kOmegaExtra, "\" is already set: is the \"elastic\" hook requested twice?"));
    }
    update.extras[kOmegaExtra] = std::move(omega_to_send_);
    return absl::OkStatus();
  }

 private:
  absl::Status BeforeTrainingUnguarded(fl::HookContext& context) {
    std::vector<std::string> names;
    std::vector<at::Tensor> parameters;
    // The shared parameters: the server aggregates no sensitivity of the others
    // (and a frozen one has no gradient).
    for (const auto& item : context.model->named_parameters(/*recurse=*/true)) {
      if (context.unshared != nullptr && context.unshared->count(item.key()) != 0) continue;
      names.push_back(item.key());
      parameters.push_back(item.value());
    }
    fl::TensorMap& state = *context.state;
    const fl::TensorMap no_history;
    FL_ASSIGN_OR_RETURN(
        std::vector<at::Tensor> omega,
        LoadOmega(names, parameters, settings_.keep_across_rounds ? state : no_history));
    int64_t updates = 0;
    if (auto it = state.find(kUpdatesKey); settings_.keep_across_rounds && it != state.end()) {
      updates = it->second.item<int64_t>();
    }

    FL_ASSIGN_OR_RETURN(std::vector<int64_t> holdout, TakeHoldout(context));
    const int64_t batch_size = settings_.batch_size > 0 ? settings_.batch_size : context.batch_size;
    if (!holdout.empty() && batch_size < 1) {
      return absl::FailedPreconditionError(
          "no sensitivity batch size: set options.sensitivity_batch_size or client.batch_size");
    }

    fl::Model& model = *context.model;
    const bool was_training = model.is_training();
    model.eval();
    at::AutoGradMode grad_mode(true);
    const fl::Examples& examples = *context.examples;
    const auto n = static_cast<int64_t>(holdout.size());
    const at::Tensor all = n > 0 ? at::tensor(holdout, at::kLong).to(examples.x.device())
                                 : at::Tensor();
    for (int64_t begin = 0; begin < n; begin += batch_size) {
      const at::Tensor batch = all.narrow(0, begin, std::min(batch_size, n - begin));
      const at::Tensor logits = model.Forward(examples.x.index_select(0, batch));
      const at::Tensor objective =
          settings_.objective == fedkit::aggregators::OUTPUT_NORM
              ? logits.pow(2).sum(1).mean()
              : at::cross_entropy_loss(logits, examples.y.index_select(0, batch));
      const std::vector<at::Tensor> grads = torch::autograd::grad(
          {objective}, parameters, /*grad_outputs=*/{}, /*retain_graph=*/false,
          /*create_graph=*/false, /*allow_unused=*/true);
      at::NoGradGuard no_grad;
      for (size_t l = 0; l < grads.size(); ++l) {
        // An unused parameter has zero gradient.
        if (!grads[l].defined()) {
          omega[l].mul_(settings_.mu);
          continue;
        }
        const at::Tensor s = settings_.granularity == fedkit::aggregators::ELEMENT
                                 ? grads[l].abs()
                                 : grads[l].pow(2).sum();
        omega[l].mul_(settings_.mu).add_(s, 1.0 - settings_.mu);
      }
      ++updates;
    }
    model.train(was_training);

    std::vector<fl::ModelState::Entry> sent;
    const double correction =
        settings_.bias_correction && updates > 0 ? 1.0 - std::pow(settings_.mu, updates) : 1.0;
    for (size_t l = 0; l < names.size(); ++l) {
      if (settings_.keep_across_rounds) state[kOmegaPrefix + names[l]] = omega[l];
      sent.push_back({names[l], correction != 1.0 ? omega[l] / correction : omega[l].clone(),
                      /*is_buffer=*/false});
    }
    if (settings_.keep_across_rounds) state[kUpdatesKey] = at::scalar_tensor(updates, at::kLong);
    omega_to_send_ = fl::ModelState(std::move(sent));
    return absl::OkStatus();
  }

  // This client's EMA so far (zeros on its first participation).
  absl::StatusOr<std::vector<at::Tensor>> LoadOmega(const std::vector<std::string>& names,
                                                    const std::vector<at::Tensor>& parameters,
                                                    const fl::TensorMap& state) const {
    std::vector<at::Tensor> omega;
    for (size_t l = 0; l < names.size(); ++l) {
      const at::Tensor& p = parameters[l];
      const at::Tensor fresh = settings_.granularity == fedkit::aggregators::ELEMENT
                                   ? at::zeros_like(p, at::MemoryFormat::Contiguous)
                                   : at::zeros({}, p.options());
      auto it = state.find(kOmegaPrefix + names[l]);
      if (it == state.end()) {
        omega.push_back(fresh);
        continue;
      }
      if (!it->second.sizes().equals(fresh.sizes())) {
        return absl::FailedPreconditionError(absl::StrCat(
            "client state: sensitivity of \"", names[l], "\" has shape ",
            c10::str(it->second.sizes()), ", expected ", c10::str(fresh.sizes())));
      }
      omega.push_back(it->second.to(p.device(), p.scalar_type()).detach());
    }
    return omega;
  }

  // Draws B_k from the client's whole share (or takes the stored one), removes it
  // from the training indices and returns it.
  absl::StatusOr<std::vector<int64_t>> TakeHoldout(fl::HookContext& context) {
    const std::vector<int64_t>& share = *context.client_indices;
    std::vector<int64_t>& train = *context.train_indices;
    if (!settings_.redraw_each_round) {
      if (auto it = context.state->find(kHoldoutKey); it != context.state->end()) {
        FL_RETURN_IF_ERROR(RemoveHeldOut(it->second, share, train));
        const at::Tensor kept = it->second.to(at::kCPU, at::kLong).contiguous();
        return std::vector<int64_t>(kept.data_ptr<int64_t>(),
                                    kept.data_ptr<int64_t>() + kept.numel());
      }
    }
    const auto n = static_cast<int64_t>(share.size());
    int64_t size = 0;
    if (n >= 2) {
      size = settings_.holdout_batches > 0
                 ? settings_.holdout_batches *
                       (settings_.batch_size > 0 ? settings_.batch_size : context.batch_size)
                 : static_cast<int64_t>(
                       std::floor(settings_.holdout_fraction * static_cast<double>(n)));
      size = std::clamp<int64_t>(size, 1, n - 1);
    }
    std::vector<int64_t> shuffled = share;
    std::mt19937_64 rng(context.seed);
    std::shuffle(shuffled.begin(), shuffled.end(), rng);
    std::vector<int64_t> holdout(shuffled.begin(), shuffled.begin() + size);
    const at::Tensor held = at::tensor(holdout, at::kLong);
    FL_RETURN_IF_ERROR(RemoveHeldOut(held, share, train));
    if (!settings_.redraw_each_round) (*context.state)[kHoldoutKey] = held;
    return holdout;
  }

  const SensitivitySettings settings_;
  fl::ModelState omega_to_send_;
};

absl::StatusOr<std::unique_ptr<fl::ClientHook>> CreateElasticHook(
    const ElasticHookOptions& options, const fl::ClientHook::CreateArgs&) {
  FL_ASSIGN_OR_RETURN(SensitivitySettings settings, ResolveSensitivity(options, "options."));
  return std::make_unique<ElasticHook>(settings);
}

// ---------------------------------------------------------------------------
// The aggregator.

struct ZetaStats {
  double sum = 0.0;
  int64_t count = 0;
  double min = std::numeric_limits<double>::infinity();
  double max = -std::numeric_limits<double>::infinity();

  // `elements` parameters share `zeta` (one value per tensor, or one each).
  void Add(const at::Tensor& zeta, int64_t elements) {
    if (zeta.numel() == 0) return;
    sum += zeta.sum(at::kDouble).item<double>() * static_cast<double>(elements / zeta.numel());
    count += elements;
    const auto [lo, hi] = at::aminmax(zeta);
    min = std::min(min, lo.item<double>());
    max = std::max(max, hi.item<double>());
  }
};

class Elastic : public fl::Aggregator {
 public:
  Elastic(std::unique_ptr<fl::Aggregator> base, ElasticHookOptions hook_options,
          ElasticGranularity granularity, ElasticNormalizer normalizer, double tau,
          double server_lr)
      : base_(std::move(base)),
        granularity_(granularity),
        normalizer_(normalizer),
        tau_(tau),
        server_lr_(server_lr) {
    hook_options_.PackFrom(hook_options);
  }

  fl::AggregatorProperties properties() const override {
    fl::AggregatorProperties properties;
    properties.order_invariant = base_->properties().order_invariant;
    // One client: Omega / max(Omega) varies over the parameters, so zeta != 1.
    properties.single_client_identity = false;
    properties.uses_proxy = base_->properties().uses_proxy;
    properties.step_aware = base_->properties().step_aware;
    properties.needs_local_sgd = base_->properties().needs_local_sgd;
    properties.client_hooks = base_->properties().client_hooks;
    properties.personal_groups = base_->properties().personal_groups;
    properties.frozen_groups = base_->properties().frozen_groups;
    properties.local_phases = base_->properties().local_phases;
    properties.personal_model = base_->properties().personal_model;
    properties.own_local_step = base_->properties().own_local_step;
    properties.client_hooks.insert(properties.client_hooks.begin(), kName);
    properties.sums_only =
        base_->properties().sums_only && normalizer_ != fedkit::aggregators::CLIENTS;
    return properties;
  }

  absl::StatusOr<fl::RoundPlan> Configure(const fl::ModelState& global,
                                          fl::ServerContext& context) override {
    FL_ASSIGN_OR_RETURN(fl::RoundPlan plan, base_->Configure(global, context));
    // First, so B_k is removed before any other hook looks at the training data.
    plan.hooks.insert(plan.hooks.begin(), fl::HookRequest{kName, hook_options_});
    std::vector<fl::ModelState::Entry> layout;
    for (const auto& e : global.entries()) {
      if (e.is_buffer) continue;
      layout.push_back({e.name,
                        granularity_ == fedkit::aggregators::ELEMENT
                            ? at::empty(e.tensor.sizes(), e.tensor.options().device(at::kMeta))
                            : at::empty({}, e.tensor.options().device(at::kMeta)),
                        false});
    }
    omega_layout_ = fl::ModelState(std::move(layout));
    device_ = global.empty() ? at::Device(at::kCPU) : global.tensor(0).device();
    omega_sum_.reset();
    omega_max_.reset();
    total_weight_ = 0.0;
    return plan;
  }

  absl::Status Accumulate(fl::ClientUpdate update, fl::ServerContext& context) override {
    if (!omega_layout_.has_value()) {
      return absl::FailedPreconditionError("Accumulate called before Configure");
    }
    auto it = update.extras.find(kOmegaExtra);
    if (it == update.extras.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "update has no extra \"", kOmegaExtra, "\" (the \"elastic\" client hook sends it); rejected"));
    }
    fl::ModelState omega = std::move(it->second);
    update.extras.erase(it);
    if (absl::Status s = omega_layout_->CheckSameLayout(omega); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("extra \"", kOmegaExtra, "\": ", s.message()));
    }
    const auto weight = static_cast<double>(update.num_examples);
    if (!(weight > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("num_examples is ", update.num_examples, ": no weight in the mean"));
    }
    FL_RETURN_IF_ERROR(base_->Accumulate(std::move(update), context));
    if (omega_sum_.has_value()) {
      omega_sum_->Axpy(weight, omega);
    } else {
      omega_sum_ = omega.Scaled(weight);
    }
    total_weight_ += weight;
    if (normalizer_ == fedkit::aggregators::CLIENTS) {
      if (!omega_max_.has_value()) {
        omega_max_ = std::move(omega);
      } else {
        for (size_t l = 0; l < omega.size(); ++l) {
          at::Tensor& max = omega_max_->mutable_tensor(l);
          at::maximum_out(max, max, omega.tensor(l));
        }
      }
    }
    return absl::OkStatus();
  }

  absl::StatusOr<fl::ModelState> Finalize(const fl::ModelState& global,
                                          fl::ServerContext& context) override {
    if (!omega_sum_.has_value()) {
      return absl::FailedPreconditionError("Finalize: no update was accepted this round");
    }
    FL_ASSIGN_OR_RETURN(fl::ModelState next, base_->Finalize(global, context));
    // A base whose aggregate is a predictor (the logit ensemble) leaves no weights for
    // the interpolation: Elastic's result is the model it returns, evaluated as such.
    context.evaluation_predictor = nullptr;
    if (absl::Status s = global.CheckSameLayout(next); !s.ok()) {
      return absl::InternalError(absl::StrCat("base aggregator's model: ", s.message()));
    }
    // A base that evaluates another model than its iterate (FedExP's two-iterate
    // average) gets the same interpolation on that model's step.
    fl::ModelState* evaluation =
        context.evaluation_model.has_value() ? &*context.evaluation_model : nullptr;
    if (evaluation != nullptr) {
      if (absl::Status s = global.CheckSameLayout(*evaluation); !s.ok()) {
        return absl::InternalError(
            absl::StrCat("base aggregator's evaluation model: ", s.message()));
      }
    }
    at::NoGradGuard no_grad;
    // omega_sum_ = sum_k n_k Omega_k becomes zeta in place, tensor by tensor.
    const std::vector<double> shared_max = SharedMaxima(*omega_sum_);
    ZetaStats stats;
    size_t l = 0;
    for (size_t i = 0; i < next.size(); ++i) {
      if (next.entries()[i].is_buffer) continue;
      at::Tensor& zeta = omega_sum_->mutable_tensor(l);
      ToZeta(zeta, l, shared_max[l]);
      stats.Add(zeta, next.tensor(i).numel());
      if (server_lr_ != 1.0) zeta.mul_(server_lr_);
      at::Tensor& param = next.mutable_tensor(i);
      const at::Tensor weight = zeta.to(param.scalar_type());
      // old + eta * zeta (.) (param - old) in one pass; out of place, as the base
      // may keep `next`.
      param = at::lerp(global.tensor(i), param, weight);
      if (evaluation != nullptr) {
        at::Tensor& evaluated = evaluation->mutable_tensor(i);
        evaluated = at::lerp(global.tensor(i), evaluated, weight);
      }
      ++l;
    }
    if (stats.count > 0) {
      context.diagnostics["elastic/zeta_mean"] = stats.sum / static_cast<double>(stats.count);
      context.diagnostics["elastic/zeta_min"] = stats.min;
      context.diagnostics["elastic/zeta_max"] = stats.max;
    }
    omega_sum_.reset();
    omega_max_.reset();
    return next;
  }

  // The base's sums and sum_k n_k Omega_k; none when the normaliser is the
  // element-wise max over clients (CLIENTS), or when the base has none.
  std::optional<NamedSums> PartialSums() const override {
    if (normalizer_ == fedkit::aggregators::CLIENTS) return std::nullopt;
    std::optional<NamedSums> base = base_->PartialSums();
    if (!base.has_value()) return std::nullopt;
    CHECK(omega_layout_.has_value()) << "PartialSums before Configure";
    NamedSums sums;
    AddPrefixed(kBaseSums, *base, sums);
    if (omega_sum_.has_value()) {
      AddStateSums(kOmegaSums, *omega_sum_, sums);
    } else {
      for (const auto& e : omega_layout_->entries()) {
        sums[kOmegaSums + e.name] = at::zeros(e.tensor.sizes(), e.tensor.options().device(device_));
      }
    }
    sums[kOmegaWeightSum] = ScalarSum(total_weight_);
    return sums;
  }

  absl::Status MergePartialSums(NamedSums sums) override {
    FL_RETURN_IF_ERROR(CheckMergeable(*this, omega_layout_.has_value(), sums));
    FL_RETURN_IF_ERROR(base_->MergePartialSums(WithoutPrefix(kBaseSums, sums)));
    total_weight_ = sums.at(kOmegaWeightSum).item<double>();
    omega_sum_.reset();
    // No update on any process: as empty as one that saw none.
    if (total_weight_ > 0) omega_sum_ = StateFromSums(kOmegaSums, *omega_layout_, sums);
    return absl::OkStatus();
  }

  std::map<std::string, at::Tensor> SaveState() const override { return base_->SaveState(); }
  absl::Status RestoreState(const std::map<std::string, at::Tensor>& state) override {
    return base_->RestoreState(state);
  }

 private:
  // For ALL_PARAMETERS and EACH_LAYER, each tensor's normaliser: the largest entry
  // of all of `omega`, or of the tensors of its layer (names equal up to the last
  // '.'). Zeros otherwise (unused).
  std::vector<double> SharedMaxima(const fl::ModelState& omega) const {
    std::vector<double> max(omega.size(), 0.0);
    if (normalizer_ != fedkit::aggregators::ALL_PARAMETERS &&
        normalizer_ != fedkit::aggregators::EACH_LAYER) {
      return max;
    }
    std::map<std::string, double> group_max;
    auto group_of = [&](size_t l) -> std::string {
      if (normalizer_ == fedkit::aggregators::ALL_PARAMETERS) return "";
      const std::string& name = omega.entries()[l].name;
      return name.substr(0, std::min(name.size(), name.rfind('.')));
    };
    for (size_t l = 0; l < omega.size(); ++l) {
      const at::Tensor& t = omega.tensor(l);
      double& m = group_max[group_of(l)];
      if (t.numel() > 0) m = std::max(m, t.max().item<double>());
    }
    for (size_t l = 0; l < omega.size(); ++l) max[l] = group_max[group_of(l)];
    return max;
  }

  // Turns `omega` (= sum_k n_k Omega_k of parameter tensor l) into
  //   zeta = 1 + tau - clamp(Omega / normaliser, 0, 1),
  // and zeta = 1 wherever the normaliser is 0. The clamp only acts on what no
  // well-behaved client sends (negative sensitivities): it keeps zeta in
  // [tau, 1 + tau] whatever arrives.
  void ToZeta(at::Tensor& omega, size_t l, double shared_max) const {
    if (normalizer_ == fedkit::aggregators::CLIENTS) {
      // max_k Omega_k is per entry: Omega / max = omega / (total * max).
      const at::Tensor& max = omega_max_->tensor(l);
      const at::Tensor positive = max > 0;
      omega.div_(max * total_weight_).clamp_(0.0, 1.0).neg_().add_(1.0 + tau_);
      omega.masked_fill_(positive.logical_not(), 1.0);
      return;
    }
    const double max = normalizer_ == fedkit::aggregators::EACH_TENSOR
                           ? (omega.numel() > 0 ? omega.max().item<double>() : 0.0)
                           : shared_max;
    if (!(max > 0)) {
      omega.fill_(1.0);
      return;
    }
    // 1 + tau - clamp(omega / max, 0, 1), in three passes.
    omega.mul_(-1.0 / max).add_(1.0 + tau_).clamp_(tau_, 1.0 + tau_);
  }

  std::unique_ptr<fl::Aggregator> base_;
  google::protobuf::Any hook_options_;
  const ElasticGranularity granularity_;
  const ElasticNormalizer normalizer_;
  const double tau_;
  const double server_lr_;
  // Per round.
  std::optional<fl::ModelState> omega_layout_;  // storage-free
  at::Device device_ = at::kCPU;                 // the global model's
  std::optional<fl::ModelState> omega_sum_;  // sum_k n_k Omega_k
  std::optional<fl::ModelState> omega_max_;  // max_k Omega_k (CLIENTS)
  double total_weight_ = 0.0;
};

absl::StatusOr<std::unique_ptr<fl::Aggregator>> CreateElastic(const ElasticOptions& options,
                                                              const fl::Aggregator::CreateArgs&) {
  fl::ErrorList errors;
  if (!fedkit::aggregators::ElasticMode_IsValid(options.mode())) {
    errors.Add("options.mode", absl::StrCat("must be PAPER or FLBENCH, got ", options.mode()));
  }
  ElasticHookOptions hook_options = options.sensitivity();
  if (hook_options.mode() != fedkit::aggregators::PAPER && hook_options.mode() != options.mode()) {
    errors.Add("options.sensitivity.mode", "leave unset: options.mode applies to both halves");
  }
  hook_options.set_mode(options.mode());
  absl::StatusOr<SensitivitySettings> settings =
      ResolveSensitivity(hook_options, "options.sensitivity.");
  errors.AddStatus("", settings.status());
  const double tau = options.has_tau() ? options.tau() : kDefaultTau;
  if (!(tau >= 0.0) || !std::isfinite(tau)) {
    errors.Add("options.tau", absl::StrCat("must be >= 0, got ", tau));
  }
  const double server_lr = options.has_server_lr() ? options.server_lr() : 1.0;
  if (!(server_lr > 0.0) || !std::isfinite(server_lr)) {
    errors.Add("options.server_lr", absl::StrCat("must be > 0, got ", server_lr));
  }
  if (!fedkit::aggregators::ElasticNormalizer_IsValid(options.max_over())) {
    errors.Add("options.max_over",
               absl::StrCat("must be EACH_LAYER, ALL_PARAMETERS, EACH_TENSOR or CLIENTS, got ",
                            options.max_over()));
  }
  std::unique_ptr<fl::Aggregator> base = CreateBaseAggregator(options.base(), kName, errors);
  FL_RETURN_IF_ERROR(errors.ToStatus());
  return std::make_unique<Elastic>(std::move(base), hook_options, settings->granularity,
                                   NormalizerOf(options.mode(), options.max_over()), tau,
                                   server_lr);
}

FL_REGISTER_PLUGIN(fl::ClientHook, "elastic", ElasticHookOptions, CreateElasticHook);
FL_REGISTER_PLUGIN(fl::Aggregator, "elastic", ElasticOptions, CreateElastic);
FL_CONFORMANCE_REASON(kName, kNoPartialSums,
                      "max_over CLIENTS (FLBENCH's default) divides by each entry's largest "
                      "client value, a maximum rather than a sum; otherwise it has its base's "
                      "sums when the base has them");

}  // namespace
}  // namespace aggregators
