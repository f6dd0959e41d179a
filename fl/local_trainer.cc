#include "fl/local_trainer.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <type_traits>
#include <utility>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/optim/adam.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/sgd.h>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "fl/batch_stream.h"
#include "fl/codec.h"
#include "fl/client_hook.h"
#include "fl/flat_parameters.h"
#include "fl/model.h"
#include "fl/personalization.h"
#include "fl/registry.h"
#include "fl/seeding.h"
#include "fl/status_macros.h"
#include "fl/fault_model.h"
#include "fl/system_model.h"

namespace fl {
namespace {

std::unique_ptr<torch::optim::Optimizer> MakeOptimizer(const fedkit::OptimizerSpec& spec,
                                                       double lr,
                                                       const std::vector<at::Tensor>& params) {
  switch (spec.kind()) {
    case fedkit::OptimizerSpec::ADAM:
      return std::make_unique<torch::optim::Adam>(
          params, torch::optim::AdamOptions(lr).weight_decay(spec.weight_decay()));
    default:
      return std::make_unique<torch::optim::SGD>(
          params, torch::optim::SGDOptions(lr)
                                  .momentum(spec.momentum())
                                  .weight_decay(spec.weight_decay()));
  }
}

// The client state store's slots for the optimiser and the upload's error-feedback
// residual; '@' cannot start a plugin name.
constexpr char kOptimizerSlot[] = "@optimizer";
constexpr char kUploadResidualSlot[] = "@upload_residual";

// The key of `param`'s entry in an optimiser's state map: LibTorch 1.13 keys it by
// the printed TensorImpl address, 2.x by the address itself. A template, so that
// only the branch for this LibTorch's key type is compiled.
template <typename StateMap>
typename StateMap::key_type OptimizerStateKey(const StateMap&, const at::Tensor& param) {
  using Key = typename StateMap::key_type;
  void* impl = param.unsafeGetTensorImpl();
  if constexpr (std::is_same_v<Key, std::string>) {
    return c10::str(impl);
  } else {
    return Key(impl);
  }
}

// `optimizer`'s state over `params` (one entry per tensor, by its index).
TensorMap SaveOptimizerState(torch::optim::Optimizer& optimizer,
                             const std::vector<at::Tensor>& params) {
  TensorMap saved;
  for (size_t i = 0; i < params.size(); ++i) {
    auto it = optimizer.state().find(OptimizerStateKey(optimizer.state(), params[i]));
    if (it == optimizer.state().end()) continue;
    const std::string prefix = absl::StrCat(i, "/");
    if (auto* sgd = dynamic_cast<torch::optim::SGDParamState*>(it->second.get())) {
      saved[prefix + "momentum"] = sgd->momentum_buffer().detach().clone();
    } else if (auto* adam = dynamic_cast<torch::optim::AdamParamState*>(it->second.get())) {
      saved[prefix + "exp_avg"] = adam->exp_avg().detach().clone();
      saved[prefix + "exp_avg_sq"] = adam->exp_avg_sq().detach().clone();
      saved[prefix + "step"] = at::scalar_tensor(adam->step(), at::kLong);
    }
  }
  return saved;
}

// Puts `saved` (from SaveOptimizerState over tensors of the same shapes) back.
absl::Status RestoreOptimizerState(const TensorMap& saved, torch::optim::Optimizer& optimizer,
                                   const std::vector<at::Tensor>& params, bool adam) {
  for (size_t i = 0; i < params.size(); ++i) {
    const std::string prefix = absl::StrCat(i, "/");
    auto get = [&](const char* name) -> absl::StatusOr<at::Tensor> {
      auto it = saved.find(prefix + name);
      if (it == saved.end()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "kept optimiser state lacks \"", prefix, name, "\" (did the optimizer change?)"));
      }
      return it->second;
    };
    const bool any = absl::c_any_of(saved, [&prefix](const auto& entry) {
      return entry.first.rfind(prefix, 0) == 0;
    });
    if (!any) continue;
    const auto key = OptimizerStateKey(optimizer.state(), params[i]);
    auto fits = [&](const at::Tensor& t) -> absl::Status {
      if (t.sizes() == params[i].sizes()) return absl::OkStatus();
      return absl::FailedPreconditionError(absl::StrCat(
          "kept optimiser state of shape ", c10::str(t.sizes()), " for parameters of shape ",
          c10::str(params[i].sizes())));
    };
    if (adam) {
      FL_ASSIGN_OR_RETURN(at::Tensor exp_avg, get("exp_avg"));
      FL_ASSIGN_OR_RETURN(at::Tensor exp_avg_sq, get("exp_avg_sq"));
      FL_ASSIGN_OR_RETURN(at::Tensor step, get("step"));
      FL_RETURN_IF_ERROR(fits(exp_avg));
      FL_RETURN_IF_ERROR(fits(exp_avg_sq));
      auto state = std::make_unique<torch::optim::AdamParamState>();
      state->step(step.item<int64_t>());
      state->exp_avg(exp_avg.to(params[i].device()).clone());
      state->exp_avg_sq(exp_avg_sq.to(params[i].device()).clone());
      optimizer.state()[key] = std::move(state);
    } else {
      FL_ASSIGN_OR_RETURN(at::Tensor momentum, get("momentum"));
      FL_RETURN_IF_ERROR(fits(momentum));
      auto state = std::make_unique<torch::optim::SGDParamState>();
      state->momentum_buffer(momentum.to(params[i].device()).clone());
      optimizer.state()[key] = std::move(state);
    }
  }
  return absl::OkStatus();
}

// The sum of `losses` (scalars) in double precision, added in their order: what
// adding each into a double tensor gives, bit for bit.
double SumInOrder(const std::vector<at::Tensor>& losses) {
  if (losses.empty()) return 0.0;
  const at::Tensor host = at::stack(losses).to(at::kCPU, at::kDouble).contiguous();
  const double* values = host.data_ptr<double>();
  double sum = 0.0;
  for (int64_t i = 0; i < host.numel(); ++i) sum += values[i];
  return sum;
}

struct ActiveHook {
  std::string name;  // empty for the caller's hook, whose state is not kept
  std::unique_ptr<ClientHook> owned;
  ClientHook* hook = nullptr;
  TensorMap state;
  HookContext context;
};

// Sets which of `model`'s parameters the optimiser may move; restores every
// parameter's own setting when destroyed (the replica serves other clients).
class TrainableParameters {
 public:
  explicit TrainableParameters(Model& model) {
    for (const auto& item : model.named_parameters(/*recurse=*/true)) {
      parameters_.push_back({item.key(), item.value(), item.value().requires_grad()});
    }
  }
  ~TrainableParameters() {
    for (Parameter& p : parameters_) p.tensor.requires_grad_(p.originally);
  }
  template <typename Predicate>
  void TrainOnly(Predicate trains) {
    for (Parameter& p : parameters_) p.tensor.requires_grad_(p.originally && trains(p.name));
  }

 private:
  struct Parameter {
    std::string name;
    at::Tensor tensor;
    bool originally;
  };
  std::vector<Parameter> parameters_;
};

// A generator of `device`'s kind seeded with `seed`, for the model's dropout.
at::Generator SeededGenerator(const at::Device& device, uint64_t seed) {
  // LibTorch 1.13's Generator::clone never frees its copy (the copy's weak count
  // starts at 0, so releasing the last reference skips the delete): 2.6 KB per
  // client and round, found by LeakSanitizer. A CPU generator is made afresh; its
  // state is the seed's alone, as the clone's is after set_current_seed.
  if (device.is_cpu()) return at::make_generator<at::CPUGeneratorImpl>(seed);
  at::Generator global = at::globalContext().defaultGenerator(device);  // a handle
  at::Generator generator;
  {
    std::lock_guard<std::mutex> lock(global.mutex());
    generator = global.clone();
  }
  generator.set_current_seed(seed);
  return generator;
}

// The trainer's half of a local step, for itself and for a hook that takes the
// steps: batches, and gradients of the task loss plus the other hooks' terms.
class TrainerSteps : public LocalSteps {
 public:
  TrainerSteps(BatchStream& stream, Model& model, const std::unique_ptr<FlatParameters>& flat,
               std::vector<ActiveHook>& hooks, const ActiveHook* stepper, double max_grad_norm)
      : stream_(stream),
        model_(model),
        flat_(flat),
        hooks_(hooks),
        stepper_(stepper),
        max_grad_norm_(max_grad_norm) {}

  absl::StatusOr<Examples> NextBatch() override { return stream_.Next(); }

  at::Tensor Backward(const Examples& batch) override {
    flat_->ClearGradients();
    at::Tensor task_loss = at::cross_entropy_loss(model_.Forward(batch.x), batch.y);
    at::Tensor loss = task_loss;
    for (ActiveHook& h : hooks_) {
      if (&h == stepper_) continue;
      at::Tensor term = h.hook->LossTerm(h.context);
      if (term.defined()) loss = loss + term;
    }
    loss.backward();
    flat_->RelinkGradients();
    if (max_grad_norm_ > 0) {
      torch::nn::utils::clip_grad_norm_(flat_->optimizer_tensors(), max_grad_norm_);
    }
    return task_loss.detach();
  }

 private:
  BatchStream& stream_;
  Model& model_;
  const std::unique_ptr<FlatParameters>& flat_;  // replaced at each phase
  std::vector<ActiveHook>& hooks_;
  const ActiveHook* stepper_;
  const double max_grad_norm_;
};

}  // namespace

absl::StatusOr<ClientUpdate> LocalTrainer::TrainUnguarded(Model& model,
                                                         const LocalTrainingInput& input) const {
  const fedkit::ClientTrainingSpec& spec = spec_;
  const std::vector<std::string>& personal = personal_;
  const std::vector<std::string>& frozen = frozen_;
  ClientStateStore& state_store = *state_store_;
  if (input.start != nullptr) {
    if (absl::Status layout = input.global->CheckSameLayout(*input.start); !layout.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("initial weights: ", layout.message()));
    }
    if (!personal.empty()) {
      return absl::FailedPreconditionError(
          "a client with personal tensors starts from the global model and its own");
    }
  }
  const std::set<std::string> personal_names(personal.begin(), personal.end());
  // What the server does not see: the personal tensors and the frozen ones.
  std::set<std::string> unshared = personal_names;
  unshared.insert(frozen.begin(), frozen.end());
  // The global model with the client's own personal tensors: what it trains from,
  // what its hooks see as the global model and what its update is relative to.
  ModelState own_global;
  const ModelState* global = input.global;
  TensorMap own = state_store.Checkout(input.client_id, kPersonalSlot);
  if (!personal.empty()) {
    if (!own.empty()) {
      absl::StatusOr<ModelState> replaced = input.global->WithReplaced(own);
      if (!replaced.ok()) {
        return absl::Status(replaced.status().code(),
                            absl::StrCat("its kept personal tensors: ", replaced.status().message()));
      }
      own_global = *std::move(replaced);
      global = &own_global;
    }
  }
  FL_RETURN_IF_ERROR((input.start != nullptr ? input.start : global)->LoadInto(model));
  // Frozen tensors stay out of the optimiser (FlatParameters lays out only those
  // that require gradients) for this client's round, and so does what a phase
  // does not train.
  const std::set<std::string> frozen_names(frozen.begin(), frozen.end());
  TrainableParameters trainable(model);
  trainable.TrainOnly([&](const std::string& name) { return frozen_names.count(name) == 0; });
  const at::Device device = input.examples->x.device();
  model.set_generator(
      SeededGenerator(device, DeriveSeed(input.seed, SeedStream::kModelNoise)));
  std::vector<int64_t> train_indices = *input.indices;
  const double lr = spec.optimizer().lr() *
                    std::pow(spec.has_lr_decay() ? spec.lr_decay() : 1.0, input.round - 1);

  // The plan's hooks, then the spec's. A hook runs at most once per client: twice
  // would apply its loss term twice and share one state slot.
  std::vector<std::pair<const HookRequest*, const char*>> requests;
  for (const HookRequest& r : input.plan->hooks) {
    requests.push_back({&r, "the aggregator's round plan"});
  }
  for (const HookRequest& r : spec_hooks_) requests.push_back({&r, "client.hooks"});
  std::vector<ActiveHook> hooks;
  hooks.reserve(requests.size() + 1);  // contexts point into the elements
  for (const auto& [request, source] : requests) {
    for (size_t j = 0; j < hooks.size(); ++j) {
      if (hooks[j].name == request->name) {
        return absl::InvalidArgumentError(absl::StrCat(
            "client hook \"", request->name, "\" is requested twice: by ",
            requests[j].second, " and by ", source));
      }
    }
    FL_ASSIGN_OR_RETURN(std::unique_ptr<ClientHook> hook,
                        Registry<ClientHook>::Global().Create(request->name, request->options));
    ActiveHook& h = hooks.emplace_back();
    h.name = request->name;
    h.owned = std::move(hook);
    h.hook = h.owned.get();
    h.state = state_store.Checkout(input.client_id, request->name);
  }
  if (input.caller_hook != nullptr) hooks.emplace_back().hook = input.caller_hook;
  for (ActiveHook& h : hooks) {
    HookContext& context = h.context;
    context.client_id = input.client_id;
    context.round = input.round;
    context.model = &model;
    context.global = global;
    context.unshared = &unshared;
    context.personal = &own;
    context.broadcast = &input.plan->broadcast;
    context.state = &h.state;
    context.examples = input.examples;
    context.client_indices = input.indices;
    context.train_indices = &train_indices;
    context.seed = DeriveSeed(input.seed, SeedStream::kHook,
                              {static_cast<uint64_t>(&h - hooks.data())});
    context.learning_rate = lr;
    context.batch_size = spec.batch_size();
    context.augmentation = augmentation_;
  }
  for (ActiveHook& h : hooks) {
    absl::Status status = h.hook->BeforeTraining(h.context);
    if (!status.ok()) {
      return absl::Status(status.code(), absl::StrCat("client hook \"", h.name,
                                                      "\" before training: ", status.message()));
    }
  }
  if (train_indices.empty()) {
    return absl::FailedPreconditionError("no training examples left");
  }
  ActiveHook* stepper = nullptr;
  for (ActiveHook& h : hooks) {
    if (!h.hook->takes_local_steps()) continue;
    if (stepper != nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("client hooks \"", stepper->name, "\" and \"",
                                                     h.name, "\" both take the local steps"));
    }
    stepper = &h;
  }

  const auto num_examples = static_cast<int64_t>(train_indices.size());
  const int64_t batch_size = std::min<int64_t>(spec.batch_size(), num_examples);
  const int64_t batches_per_epoch = (num_examples + batch_size - 1) / batch_size;
  // Each phase's last step (exclusive), counted from the round's first.
  const std::vector<LocalPhase> phases = phases_.empty() ? std::vector<LocalPhase>(1) : phases_;
  std::vector<int64_t> phase_ends;
  for (const LocalPhase& phase : phases) {
    phase_ends.push_back((phase_ends.empty() ? 0 : phase_ends.back()) +
                         (phase.epochs > 0 ? phase.epochs * batches_per_epoch
                                           : PlannedSteps(spec, num_examples)));
  }
  const int64_t planned_steps = phase_ends.back();
  const int64_t total_steps =
      system_ == nullptr ? planned_steps
                         : system_->CompletedSteps(input.client_id, input.round, planned_steps);
  if (total_steps == 0) {
    // Dropped out of the round: nothing trained, nothing sent, no state kept.
    ClientUpdate dropped;
    dropped.client_id = input.client_id;
    dropped.num_examples = num_examples;
    dropped.planned_steps = planned_steps;
    return dropped;
  }

  model.train();
  if (spec.keep_optimizer_state() && phases.size() > 1) {
    return absl::FailedPreconditionError(
        "client.keep_optimizer_state: local training in phases has an optimiser per phase");
  }
  std::unique_ptr<FlatParameters> flat;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  size_t phase = 0;
  auto begin_phase = [&]() -> absl::Status {
    if (!phases_.empty()) {
      const bool personal_part = phases[phase].part == LocalPhase::Part::kPersonal;
      trainable.TrainOnly([&](const std::string& name) {
        return frozen_names.count(name) == 0 &&
               (personal_names.count(name) != 0) == personal_part;
      });
    }
    flat = std::make_unique<FlatParameters>(model, OptimizerLayout(spec));
    optimizer = MakeOptimizer(spec.optimizer(), lr, flat->optimizer_tensors());
    if (!spec.keep_optimizer_state()) return absl::OkStatus();
    absl::Status restored = RestoreOptimizerState(
        state_store.Checkout(input.client_id, kOptimizerSlot), *optimizer,
        flat->optimizer_tensors(), spec.optimizer().kind() == fedkit::OptimizerSpec::ADAM);
    if (restored.ok()) return restored;
    return absl::Status(restored.code(),
                        absl::StrCat("client.keep_optimizer_state: ", restored.message()));
  };
  FL_RETURN_IF_ERROR(begin_phase());
  FL_ASSIGN_OR_RETURN(
      BatchStream stream,
      BatchStream::Create(spec, {input.client_id, input.round, input.seed, input.examples,
                                 train_indices, augmentation_, faults_},
                          total_steps));
  TrainerSteps steps(stream, model, flat, hooks, stepper, spec.max_grad_norm());
  // Kept on the device and read once: .item() each step would wait for the device,
  // and adding each into a double on the device costs a kernel with a type
  // conversion per step.
  std::vector<at::Tensor> task_losses;
  task_losses.reserve(total_steps);
  for (int64_t step = 0; step < total_steps; ++step) {
    if (step == phase_ends[phase]) {
      ++phase;
      FL_RETURN_IF_ERROR(begin_phase());
    }
    at::Tensor task_loss;
    if (stepper != nullptr) {
      FL_ASSIGN_OR_RETURN(task_loss, stepper->hook->LocalStep(stepper->context, steps));
    } else {
      FL_ASSIGN_OR_RETURN(Examples batch, steps.NextBatch());
      task_loss = steps.Backward(batch);
      optimizer->step();
    }
    task_losses.push_back(task_loss.detach());
  }
  // Hooks after training see the indices in the order of the last epoch, as the
  // stream left them.
  train_indices = stream.indices();
  if (stepper != nullptr) {
    absl::Status finished = stepper->hook->FinishLocalSteps(stepper->context);
    if (!finished.ok()) {
      return absl::Status(finished.code(), absl::StrCat("client hook \"", stepper->name,
                                                        "\" after its local steps: ",
                                                        finished.message()));
    }
  }

  ClientUpdate update;
  update.client_id = input.client_id;
  update.num_examples = num_examples;
  update.local_steps = total_steps;
  update.planned_steps = planned_steps;
  update.metrics["train_loss"] = SumInOrder(task_losses) / total_steps;
  std::map<std::string, TensorMap> states;
  update.delta = unshared.empty() ? ModelState::DifferenceFromModule(model, *global)
                                  : ModelState::DifferenceFromModule(model, *global).Without(unshared);
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    if (personal_names.count(item.key()) != 0) own[item.key()] = item.value().detach().clone();
  }
  for (const auto& item : model.named_buffers(/*recurse=*/true)) {
    if (personal_names.count(item.key()) != 0) own[item.key()] = item.value().detach().clone();
  }
  if (faults_ != nullptr) faults_->Corrupt(input.client_id, input.round, update.delta);
  // Encoded before the hooks' AfterTraining, so that they see the delta as sent.
  int64_t delta_bytes = update.delta.NumBytes();
  if (spec.upload().kind() != fedkit::CodecSpec::IDENTITY) {
    const CodecConfig codec = CodecFromSpec(spec.upload());
    EncodedState encoded;
    if (spec.upload().error_feedback()) {
      TensorMap& kept = states[kUploadResidualSlot];
      kept = state_store.Checkout(input.client_id, kUploadResidualSlot);
      ModelState residual;
      if (!kept.empty()) {
        residual = update.delta.ZerosLike();
        for (auto& entry : residual.mutable_entries()) {
          auto it = kept.find(entry.name);
          if (it == kept.end() || it->second.sizes() != entry.tensor.sizes()) {
            return absl::FailedPreconditionError(absl::StrCat(
                "client.upload: the kept residual does not fit \"", entry.name, "\""));
          }
          entry.tensor = it->second.to(entry.tensor.device());
        }
      }
      encoded = EncodeWithErrorFeedback(update.delta, codec, residual);
      kept.clear();
      for (const auto& entry : residual.entries()) kept[entry.name] = entry.tensor;
    } else {
      encoded = Encode(update.delta, codec);
    }
    update.delta = std::move(encoded.decoded);
    delta_bytes = encoded.bytes;
  }
  for (ActiveHook& h : hooks) {
    absl::Status status = h.hook->AfterTraining(h.context, update);
    if (!status.ok()) {
      return absl::Status(status.code(), absl::StrCat("client hook \"", h.name,
                                                      "\" after training: ", status.message()));
    }
  }
  if (!unshared.empty()) {
    // What a hook computed over the whole model leaves the unshared tensors'
    // entries behind too.
    for (auto& [name, extra] : update.extras) extra = extra.Without(unshared);
  }
  update.bytes_sent = delta_bytes + NumBytes(update.extras);
  for (ActiveHook& h : hooks) {
    if (!h.name.empty()) states[h.name] = std::move(h.state);
  }
  if (!own.empty()) states[kPersonalSlot] = std::move(own);
  if (spec.keep_optimizer_state()) {
    states[kOptimizerSlot] = SaveOptimizerState(*optimizer, flat->optimizer_tensors());
  }
  state_store.Stage(input.client_id, std::move(states));
  return update;
}

FlatParameters::Layout OptimizerLayout(const fedkit::ClientTrainingSpec& spec) {
  const fedkit::OptimizerSpec& optimizer = spec.optimizer();
  const bool plain_sgd = optimizer.kind() != fedkit::OptimizerSpec::ADAM &&
                         optimizer.momentum() == 0 && optimizer.weight_decay() == 0;
  // Clipping takes the norm of what the optimiser steps: of one buffer, as always.
  return plain_sgd && spec.max_grad_norm() == 0 ? FlatParameters::Layout::kPerTensor
                                                : FlatParameters::Layout::kOneBuffer;
}

int64_t PlannedSteps(const fedkit::ClientTrainingSpec& spec, int64_t num_examples) {
  if (spec.has_steps()) return spec.steps();
  if (num_examples <= 0) return 0;
  const int64_t batch_size = std::min<int64_t>(spec.batch_size(), num_examples);
  return static_cast<int64_t>(spec.epochs()) * ((num_examples + batch_size - 1) / batch_size);
}

LocalTrainer::LocalTrainer(fedkit::ClientTrainingSpec spec, std::vector<HookRequest> spec_hooks,
                           ClientStateStore* state_store, ImageAugmentation augmentation)
    : spec_(std::move(spec)),
      spec_hooks_(std::move(spec_hooks)),
      state_store_(state_store),
      augmentation_(augmentation) {}

absl::StatusOr<ClientUpdate> LocalTrainer::Train(Model& model,
                                                 const LocalTrainingInput& input) const {
  absl::StatusOr<ClientUpdate> update;
  try {
    update = TrainUnguarded(model, input);
  } catch (const c10::Error& e) {
    update = absl::InternalError(e.what_without_backtrace());
  }
  if (!update.ok()) {
    return absl::Status(update.status().code(), absl::StrCat("client ", input.client_id,
                                                             ": ", update.status().message()));
  }
  return update;
}

}  // namespace fl
