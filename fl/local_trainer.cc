#include "fl/local_trainer.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>

#include <ATen/ATen.h>
#include <torch/optim/adam.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/sgd.h>

#include "absl/strings/str_cat.h"
#include "fl/client_hook.h"
#include "fl/model.h"
#include "fl/registry.h"
#include "fl/seeding.h"
#include "fl/status_macros.h"

namespace fl {
namespace {

std::unique_ptr<torch::optim::Optimizer> MakeOptimizer(const fedkit::OptimizerSpec& spec,
                                                       double lr, Model& model) {
  switch (spec.kind()) {
    case fedkit::OptimizerSpec::ADAM:
      return std::make_unique<torch::optim::Adam>(
          model.parameters(), torch::optim::AdamOptions(lr).weight_decay(spec.weight_decay()));
    default:
      return std::make_unique<torch::optim::SGD>(
          model.parameters(), torch::optim::SGDOptions(lr)
                                  .momentum(spec.momentum())
                                  .weight_decay(spec.weight_decay()));
  }
}

struct ActiveHook {
  std::string name;
  std::unique_ptr<ClientHook> hook;
  HookContext context;
};

absl::StatusOr<ClientUpdate> TrainUnguarded(const fedkit::ClientTrainingSpec& spec,
                                            const std::vector<HookRequest>& spec_hooks,
                                            ClientStateStore& state_store, Model& model,
                                            const LocalTrainingInput& input) {
  FL_RETURN_IF_ERROR(input.global->LoadInto(model));
  std::vector<int64_t> train_indices = *input.indices;
  const double lr = spec.optimizer().lr() *
                    std::pow(spec.has_lr_decay() ? spec.lr_decay() : 1.0, input.round - 1);

  std::vector<ActiveHook> hooks;
  std::vector<const HookRequest*> requests;
  for (const HookRequest& r : input.plan->hooks) requests.push_back(&r);
  for (const HookRequest& r : spec_hooks) requests.push_back(&r);
  for (const HookRequest* request : requests) {
    FL_ASSIGN_OR_RETURN(std::unique_ptr<ClientHook> hook,
                        Registry<ClientHook>::Global().Create(request->name, request->options));
    HookContext context;
    context.client_id = input.client_id;
    context.round = input.round;
    context.model = &model;
    context.global = input.global;
    context.broadcast = &input.plan->broadcast;
    context.state = &state_store.Get(input.client_id, request->name);
    context.examples = input.examples;
    context.train_indices = &train_indices;
    context.seed = DeriveSeed(input.seed, SeedStream::kHook, {hooks.size()});
    context.learning_rate = lr;
    context.batch_size = spec.batch_size();
    hooks.push_back({request->name, std::move(hook), context});
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

  const auto num_examples = static_cast<int64_t>(train_indices.size());
  const int64_t batch_size = std::min<int64_t>(spec.batch_size(), num_examples);
  const int64_t batches_per_epoch = (num_examples + batch_size - 1) / batch_size;
  const int64_t total_steps =
      spec.has_steps() ? spec.steps() : static_cast<int64_t>(spec.epochs()) * batches_per_epoch;

  model.train();
  std::unique_ptr<torch::optim::Optimizer> optimizer = MakeOptimizer(spec.optimizer(), lr, model);
  std::mt19937_64 rng(input.seed);
  const at::Device device = input.examples->x.device();
  double loss_sum = 0.0;
  at::Tensor order;
  for (int64_t step = 0; step < total_steps; ++step) {
    const int64_t batch_in_epoch = step % batches_per_epoch;
    if (batch_in_epoch == 0) {
      std::shuffle(train_indices.begin(), train_indices.end(), rng);
      order = at::tensor(train_indices, at::kLong).to(device);
    }
    const int64_t begin = batch_in_epoch * batch_size;
    const at::Tensor batch = order.narrow(0, begin, std::min(batch_size, num_examples - begin));
    const at::Tensor x = input.examples->x.index_select(0, batch);
    const at::Tensor y = input.examples->y.index_select(0, batch);

    optimizer->zero_grad();
    at::Tensor task_loss = at::cross_entropy_loss(model.Forward(x), y);
    at::Tensor loss = task_loss;
    for (ActiveHook& h : hooks) {
      at::Tensor term = h.hook->LossTerm(h.context);
      if (term.defined()) loss = loss + term;
    }
    loss.backward();
    if (spec.max_grad_norm() > 0) torch::nn::utils::clip_grad_norm_(model.parameters(), spec.max_grad_norm());
    optimizer->step();
    loss_sum += task_loss.item<double>();
  }

  ClientUpdate update;
  update.client_id = input.client_id;
  update.num_examples = num_examples;
  update.local_steps = total_steps;
  update.delta = ModelState::DifferenceFromModule(model, *input.global);
  update.metrics["train_loss"] = total_steps > 0 ? loss_sum / total_steps : 0.0;
  for (ActiveHook& h : hooks) {
    absl::Status status = h.hook->AfterTraining(h.context, update);
    if (!status.ok()) {
      return absl::Status(status.code(), absl::StrCat("client hook \"", h.name,
                                                      "\" after training: ", status.message()));
    }
  }
  update.bytes_sent = update.delta.NumBytes() + NumBytes(update.extras);
  return update;
}

}  // namespace

LocalTrainer::LocalTrainer(fedkit::ClientTrainingSpec spec, std::vector<HookRequest> spec_hooks,
                           ClientStateStore* state_store)
    : spec_(std::move(spec)), spec_hooks_(std::move(spec_hooks)), state_store_(state_store) {}

absl::StatusOr<ClientUpdate> LocalTrainer::Train(Model& model,
                                                 const LocalTrainingInput& input) const {
  absl::StatusOr<ClientUpdate> update;
  try {
    update = TrainUnguarded(spec_, spec_hooks_, *state_store_, model, input);
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
