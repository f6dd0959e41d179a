#include "aggregators/common/proxy_training.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "fl/errors.h"
#include "fl/status_macros.h"
#include "glog/logging.h"

namespace aggregators {

constexpr char kMomentumPrefix[] = "momentum/";
constexpr char kAdamMeanPrefix[] = "adam_m/";
constexpr char kAdamSquarePrefix[] = "adam_v/";
constexpr char kAdamStepsKey[] = "adam_steps";

absl::Status RequireProxy(const fl::ServerContext& context, absl::string_view method) {
  if (context.proxy == nullptr || context.proxy->size() == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(method, " trains on the server's proxy set: server.proxy.size must be > 0"));
  }
  return absl::OkStatus();
}

std::vector<at::Tensor> OrderedBatches(const std::vector<int64_t>& order, int64_t batch_size,
                                      at::Device device) {
  const auto n = static_cast<int64_t>(order.size());
  const at::Tensor all = at::tensor(order, at::kLong).to(device);
  std::vector<at::Tensor> batches;
  for (int64_t begin = 0; begin < n; begin += batch_size) {
    batches.push_back(all.narrow(0, begin, std::min(batch_size, n - begin)));
  }
  return batches;
}

std::vector<int64_t> EpochOrder(int64_t n, std::mt19937_64* rng) {
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  if (rng != nullptr) std::shuffle(order.begin(), order.end(), *rng);
  return order;
}

std::vector<at::Tensor> ShuffledBatches(int64_t n, int64_t batch_size, std::mt19937_64& rng,
                                        at::Device device) {
  return OrderedBatches(EpochOrder(n, &rng), batch_size, device);
}

double ProxyLoss(fl::Model& model, const fl::Examples& examples) {
  at::NoGradGuard no_grad;
  model.eval();
  const double loss = at::cross_entropy_loss(model.Forward(examples.x), examples.y).item<double>();
  model.train();
  return loss;
}

absl::StatusOr<ServerSgdConfig> ServerSgdConfigFromOptions(
    const fedkit::aggregators::ServerSgdOptions& options, const std::string& path) {
  ServerSgdConfig config;
  fl::ErrorList errors;
  auto field = [&path](const char* name) { return absl::StrCat(path, ".", name); };
  if (options.budget_case() == fedkit::aggregators::ServerSgdOptions::kEpochs) {
    config.epochs = options.epochs();
    if (config.epochs < 1) {
      errors.Add(field("epochs"), absl::StrCat("must be >= 1, got ", config.epochs));
    }
  } else if (options.budget_case() == fedkit::aggregators::ServerSgdOptions::kSteps) {
    config.steps = options.steps();
    if (config.steps < 1) errors.Add(field("steps"), absl::StrCat("must be >= 1, got ", config.steps));
  }
  if (options.has_batch_size()) config.batch_size = options.batch_size();
  if (config.batch_size < 1) {
    errors.Add(field("batch_size"), absl::StrCat("must be >= 1, got ", config.batch_size));
  }
  if (!fedkit::aggregators::ServerSgdOptions::Optimizer_IsValid(options.optimizer())) {
    errors.Add(field("optimizer"), absl::StrCat("must be SGD or ADAM, got ", options.optimizer()));
  }
  config.adam = options.optimizer() == fedkit::aggregators::ServerSgdOptions::ADAM;
  if (config.adam) {
    config.lr = 0.001;
    config.weight_decay = 0.0;
  }
  if (options.has_lr()) config.lr = options.lr();
  if (!(config.lr > 0) || !std::isfinite(config.lr)) {
    errors.Add(field("lr"), absl::StrCat("must be > 0, got ", config.lr));
  }
  if (options.has_momentum()) {
    config.momentum = options.momentum();
    if (config.adam) errors.Add(field("momentum"), "not used by optimizer ADAM; remove it");
  }
  if (!(config.momentum >= 0 && config.momentum < 1)) {
    errors.Add(field("momentum"), absl::StrCat("must be in [0, 1), got ", config.momentum));
  }
  if (options.has_weight_decay()) config.weight_decay = options.weight_decay();
  if (!(config.weight_decay >= 0) || !std::isfinite(config.weight_decay)) {
    errors.Add(field("weight_decay"), absl::StrCat("must be >= 0, got ", config.weight_decay));
  }
  if (!config.adam && (options.has_beta1() || options.has_beta2() || options.has_eps())) {
    errors.Add(field("optimizer"), "beta1, beta2 and eps are Adam's: set optimizer: ADAM");
  }
  if (options.has_beta1()) config.beta1 = options.beta1();
  if (options.has_beta2()) config.beta2 = options.beta2();
  for (const auto& [name, beta] : {std::make_pair("beta1", config.beta1),
                                   std::make_pair("beta2", config.beta2)}) {
    if (!(beta >= 0 && beta < 1)) {
      errors.Add(field(name), absl::StrCat("must be in [0, 1), got ", beta));
    }
  }
  if (options.has_eps()) config.eps = options.eps();
  if (!(config.eps > 0) || !std::isfinite(config.eps)) {
    errors.Add(field("eps"), absl::StrCat("must be > 0, got ", config.eps));
  }
  if (options.has_persist_momentum()) config.persist_momentum = options.persist_momentum();
  FL_RETURN_IF_ERROR(errors.ToStatus());
  return config;
}

absl::StatusOr<at::Tensor> ProxySgd::Direction(const std::string& name, const at::Tensor& p,
                                               const at::Tensor& d) {
  // A slot's tensor, created by `init` at its first use.
  auto slot = [&](const char* prefix, auto init) -> absl::StatusOr<at::Tensor*> {
    auto it = state_.find(prefix + name);
    if (it == state_.end()) it = state_.emplace(prefix + name, init()).first;
    if (!it->second.sizes().equals(p.sizes())) {
      return absl::FailedPreconditionError(
          absl::StrCat("optimiser state \"", it->first, "\" has shape ",
                       c10::str(it->second.sizes()), ", the parameter ", c10::str(p.sizes())));
    }
    if (it->second.device() != p.device()) it->second = it->second.to(p.device());
    return &it->second;
  };
  if (config_.adam) {
    FL_ASSIGN_OR_RETURN(at::Tensor * m, slot(kAdamMeanPrefix, [&] { return at::zeros_like(p); }));
    FL_ASSIGN_OR_RETURN(at::Tensor * v,
                        slot(kAdamSquarePrefix, [&] { return at::zeros_like(p); }));
    m->mul_(config_.beta1).add_(d, 1.0 - config_.beta1);
    v->mul_(config_.beta2).addcmul_(d, d, 1.0 - config_.beta2);
    const double correction1 = 1.0 - std::pow(config_.beta1, adam_steps_);
    const double correction2 = 1.0 - std::pow(config_.beta2, adam_steps_);
    const at::Tensor denominator = (v->sqrt() / std::sqrt(correction2)).add_(config_.eps);
    return *m / denominator / correction1;
  }
  if (config_.momentum == 0) return d;
  const bool first = state_.count(kMomentumPrefix + name) == 0;
  FL_ASSIGN_OR_RETURN(at::Tensor * b, slot(kMomentumPrefix, [&] { return d.clone(); }));
  if (!first) b->mul_(config_.momentum).add_(d);
  return *b;
}

absl::Status ProxySgd::Train(fl::Model& model, int64_t proxy_size, uint64_t seed,
                             const LossFn& loss) {
  if (!config_.persist_momentum) {
    state_.clear();
    adam_steps_ = 0;
  }
  const int64_t batch_size = std::min(config_.batch_size, proxy_size);
  const int64_t per_epoch = (proxy_size + batch_size - 1) / batch_size;
  const int64_t total = config_.steps > 0 ? config_.steps : config_.epochs * per_epoch;
  std::vector<std::pair<std::string, at::Tensor>> parameters;
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    parameters.emplace_back(item.key(), item.value());
  }
  std::mt19937_64 rng(seed);
  model.train();
  std::vector<at::Tensor> batches;
  for (int64_t step = 0; step < total; ++step) {
    if (step % per_epoch == 0) {
      batches = ShuffledBatches(proxy_size, batch_size, rng, parameters.front().second.device());
    }
    for (auto& [name, p] : parameters) {
      if (p.grad().defined()) p.mutable_grad().zero_();
    }
    at::Tensor value = loss(model, batches[step % per_epoch]);
    value.backward();
    at::NoGradGuard no_grad;
    ++adam_steps_;
    for (auto& [name, p] : parameters) {
      if (!p.grad().defined()) continue;
      at::Tensor d = p.grad();
      if (config_.weight_decay != 0) d = d.add(p, config_.weight_decay);
      FL_ASSIGN_OR_RETURN(at::Tensor direction, Direction(name, p, d));
      p.sub_(direction, config_.lr);
    }
  }
  for (auto& [name, p] : parameters) p.mutable_grad() = at::Tensor();
  return absl::OkStatus();
}

std::map<std::string, at::Tensor> ProxySgd::SaveState() const {
  std::map<std::string, at::Tensor> state;
  for (const auto& [key, tensor] : state_) state[key] = tensor.clone();
  if (config_.adam && adam_steps_ > 0) {
    state[kAdamStepsKey] = at::scalar_tensor(adam_steps_, at::kLong);
  }
  return state;
}

absl::Status ProxySgd::RestoreState(const std::map<std::string, at::Tensor>& state) {
  std::map<std::string, at::Tensor> restored;
  int64_t adam_steps = 0;
  std::vector<std::string> prefixes = {kMomentumPrefix};
  if (config_.adam) prefixes = {kAdamMeanPrefix, kAdamSquarePrefix};
  for (const auto& [key, tensor] : state) {
    if (config_.adam && key == kAdamStepsKey) {
      if (!tensor.defined() || tensor.numel() != 1) {
        return absl::InvalidArgumentError(absl::StrCat("state: \"", key, "\" is not a scalar"));
      }
      adam_steps = tensor.item<int64_t>();
      continue;
    }
    // A structured binding cannot be captured before C++20 (clang refuses it).
    const bool known = absl::c_any_of(prefixes, [&name = key](const std::string& prefix) {
      return name.rfind(prefix, 0) == 0 && name.size() > prefix.size();
    });
    if (!known) {
      return absl::InvalidArgumentError(absl::StrCat(
          "state: unexpected key \"", key, "\"; expected \"", absl::StrJoin(prefixes, "\" or \""),
          "<parameter name>\"", config_.adam ? " or \"adam_steps\"" : ""));
    }
    if (!tensor.defined() || !at::isFloatingType(tensor.scalar_type())) {
      return absl::InvalidArgumentError(
          absl::StrCat("state: \"", key, "\" is not a floating-point tensor"));
    }
    restored[key] = tensor.detach().clone();
  }
  state_ = std::move(restored);
  adam_steps_ = adam_steps;
  return absl::OkStatus();
}

fl::AggregatorProperties ProxyTunedFedAvg::properties() const {
  fl::AggregatorProperties properties;
  properties.order_invariant = true;
  properties.single_client_identity = false;  // the proxy training moves the model
  properties.uses_proxy = true;
  properties.sums_only = true;  // the proxy training follows the merged sum
  return properties;
}

absl::StatusOr<fl::RoundPlan> ProxyTunedFedAvg::Configure(const fl::ModelState& global,
                                                          fl::ServerContext& context) {
  FL_RETURN_IF_ERROR(RequireProxy(context, method_));
  global_ = global;
  mean_.Reset();
  StartRound();
  return fl::RoundPlan();
}

absl::Status ProxyTunedFedAvg::Accumulate(fl::ClientUpdate update, fl::ServerContext& context) {
  if (!global_.has_value()) return absl::FailedPreconditionError("Accumulate called before Configure");
  if (absl::Status s = global_->CheckSameLayout(update.delta); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("delta: ", s.message()));
  }
  if (update.num_examples < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_examples is ", update.num_examples, ": no weight in the mean"));
  }
  try {
    FL_RETURN_IF_ERROR(Inspect(update, context));
  } catch (const c10::Error& e) {
    return absl::InternalError(e.what_without_backtrace());
  }
  return mean_.Add(update.delta, WeightOf(update, ClientWeighting::kNumExamples));
}

absl::StatusOr<fl::ModelState> ProxyTunedFedAvg::Finalize(const fl::ModelState& global,
                                                          fl::ServerContext& context) {
  FL_RETURN_IF_ERROR(RequireProxy(context, method_));
  absl::StatusOr<fl::ModelState> next;
  try {
    next = FinalizeUnguarded(global, context);
  } catch (const c10::Error& e) {
    next = absl::InternalError(e.what_without_backtrace());
  }
  mean_.Reset();
  global_.reset();
  return next;
}

std::optional<NamedSums> ProxyTunedFedAvg::PartialSums() const {
  CHECK(global_.has_value()) << "PartialSums before Configure";
  NamedSums sums;
  mean_.AddPartialSums("", *global_, sums);
  return sums;
}

absl::Status ProxyTunedFedAvg::MergePartialSums(NamedSums sums) {
  FL_RETURN_IF_ERROR(CheckMergeable(*this, global_.has_value(), sums));
  mean_.MergePartialSums("", *global_, sums);
  return absl::OkStatus();
}

absl::StatusOr<fl::ModelState> ProxyTunedFedAvg::FinalizeUnguarded(const fl::ModelState& global,
                                                                   fl::ServerContext& context) {
  FL_ASSIGN_OR_RETURN(const fl::ModelState average, mean_.StepFrom(global, 1.0));
  if (model_ == nullptr) {
    FL_ASSIGN_OR_RETURN(model_, context.new_model());
  }
  FL_RETURN_IF_ERROR(average.LoadInto(*model_));
  const fl::Examples& proxy = *context.proxy;
  context.diagnostics["proxy_loss_before"] = ProxyLoss(*model_, proxy);
  FL_ASSIGN_OR_RETURN(const ProxySgd::LossFn loss, RoundLoss(context));
  FL_RETURN_IF_ERROR(sgd_.Train(*model_, proxy.size(), context.round_seed, loss));
  context.diagnostics["proxy_loss_after"] = ProxyLoss(*model_, proxy);
  return fl::ModelState::FromModule(*model_);
}

}  // namespace aggregators
