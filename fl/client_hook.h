#ifndef FL_CLIENT_HOOK_H_
#define FL_CLIENT_HOOK_H_

// The client-side half of a federated method: extra loss terms (FedProx, EFL,
// SCAFFOLD's correction as a linear term), computations before and after local
// training (Elastic's sensitivity, EFL's Fisher, MA-Echo's projections) and extra
// tensors added to the update. Hooks are registered by name like aggregators; an
// aggregator names the hooks it needs in its RoundPlan and a spec may add more in
// `client.hooks`, so a remote client can build the same hooks from its own registry.
//
// A hook object lives for one client's round; anything that must survive to the
// client's next round goes in HookContext::state.

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "fl/client_state_store.h"
#include "fl/client_update.h"
#include "fl/dataset.h"
#include "fl/model_state.h"

namespace fl {

class Model;

struct HookContext {
  int64_t client_id = -1;
  int round = 0;
  // The local replica being trained; holds the global weights before training.
  Model* model = nullptr;
  // The server's model with this client's own personal tensors, if it keeps any.
  const ModelState* global = nullptr;
  // The tensors (by name) the server does not see (fl/personalization.h): the
  // client's own personal ones and the frozen ones, which nobody trains; null or
  // empty: none. The server's broadcasts and the update's delta lack them, and any
  // extra's entries of these names are dropped.
  const std::set<std::string>* unshared = nullptr;
  // The client's own tensors (the client state store's kPersonalSlot), as of its
  // last accepted update: its personal tensors, or the whole personal model a hook
  // trains (Ditto's). What a hook leaves here is kept with the rest.
  TensorMap* personal = nullptr;
  // Tensors the aggregator broadcast this round (RoundPlan::broadcast).
  const ExtraStates* broadcast = nullptr;
  // This hook's persistent state on this client, as of its last accepted update.
  // The hook may change it freely: what it leaves is kept only if the server
  // accepts this round's update (see ClientStateStore).
  TensorMap* state = nullptr;
  // The training examples of the whole federation (on the training device), the
  // indices of this client's whole share, and those local training will use.
  // BeforeTraining may remove indices from `train_indices` (a held-out subset);
  // local training uses what is left. A hook that holds examples out draws them
  // from `client_indices`, never from `train_indices`: another hook may already
  // have removed some, and the draw must not depend on hook order.
  const Examples* examples = nullptr;
  const std::vector<int64_t>* client_indices = nullptr;
  std::vector<int64_t>* train_indices = nullptr;
  // Seed for the hook's own randomness, fixed by (spec seed, round, client).
  uint64_t seed = 0;
  // The local learning rate in force this round (after any per-round decay), for
  // methods whose client-side update divides by it (SCAFFOLD's option II).
  double learning_rate = 0.0;
  // The client's local minibatch size (client.batch_size), for hooks that run
  // their own passes over data (Elastic's sensitivity, SCAFFOLD's option I).
  int64_t batch_size = 0;
  // The dataset's training augmentation, for hooks that train on their own.
  ImageAugmentation augmentation;
};

// What the trainer lends a hook that takes the local steps itself.
class LocalSteps {
 public:
  virtual ~LocalSteps() = default;
  // The client's next training batch (fl/batch_stream.h): augmented, relabelled
  // for a label-flipping client, epochs continuing as batches are drawn.
  virtual absl::StatusOr<Examples> NextBatch() = 0;
  // Cross-entropy on `batch` at the model's current values plus every other
  // hook's loss term, backpropagated into the trainable parameters' grad()
  // (zeroed first, clipped to client.max_grad_norm). Returns the cross-entropy.
  virtual at::Tensor Backward(const Examples& batch) = 0;
};

class ClientHook {
 public:
  static constexpr char kRegistryKind[] = "client_hook";
  struct CreateArgs {};

  virtual ~ClientHook() = default;

  // True for the client half of an aggregator that only works when that aggregator
  // plans it (it needs the aggregator's broadcast, e.g. SCAFFOLD's c): such a hook
  // is refused in a spec's client.hooks.
  virtual bool planned_only() const { return false; }

  virtual absl::Status BeforeTraining(HookContext& context) { return absl::OkStatus(); }

  // Added to the task loss at every local step; an undefined tensor adds nothing.
  virtual at::Tensor LossTerm(HookContext& context) { return at::Tensor(); }

  // True for a hook that takes each local step itself (pFedMe, APFL, Per-FedAvg)
  // in place of the trainer's loss, backward pass and optimiser step. At most one
  // hook of a round may; its aggregator declares own_local_step, so that
  // validation refuses optimiser settings it would not apply.
  virtual bool takes_local_steps() const { return false; }
  // One local step: draws its batches from `steps`, moves the model's trainable
  // parameters (those with requires_grad) in place, and returns the step's task
  // loss, for train_loss.
  virtual absl::StatusOr<at::Tensor> LocalStep(HookContext& context, LocalSteps& steps) {
    return absl::UnimplementedError("this hook does not take local steps");
  }
  // After the last local step, before the update is read from the model: leaves
  // in the model what the client uploads (pFedMe's w, not its personalised theta).
  virtual absl::Status FinishLocalSteps(HookContext& context) { return absl::OkStatus(); }

  // After local training; may add extras to `update` (and count their bytes).
  virtual absl::Status AfterTraining(HookContext& context, ClientUpdate& update) {
    return absl::OkStatus();
  }
};

}  // namespace fl

#endif  // FL_CLIENT_HOOK_H_
