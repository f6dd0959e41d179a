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
  const ModelState* global = nullptr;
  // Tensors the aggregator broadcast this round (RoundPlan::broadcast).
  const ExtraStates* broadcast = nullptr;
  // This hook's persistent state on this client.
  TensorMap* state = nullptr;
  // The training examples of the whole federation (on the training device) and the
  // indices of this client's share. BeforeTraining may remove indices (a held-out
  // subset), and local training then uses what is left.
  const Examples* examples = nullptr;
  std::vector<int64_t>* train_indices = nullptr;
  // Seed for the hook's own randomness, fixed by (spec seed, round, client).
  uint64_t seed = 0;
  // The local learning rate in force this round (after any per-round decay), for
  // methods whose client-side update divides by it (SCAFFOLD's option II).
  double learning_rate = 0.0;
  // The client's local minibatch size (client.batch_size), for hooks that run
  // their own passes over data (Elastic's sensitivity, SCAFFOLD's option I).
  int64_t batch_size = 0;
};

class ClientHook {
 public:
  static constexpr char kRegistryKind[] = "client_hook";
  struct CreateArgs {};

  virtual ~ClientHook() = default;

  virtual absl::Status BeforeTraining(HookContext& context) { return absl::OkStatus(); }

  // Added to the task loss at every local step; an undefined tensor adds nothing.
  virtual at::Tensor LossTerm(HookContext& context) { return at::Tensor(); }

  // After local training; may add extras to `update` (and count their bytes).
  virtual absl::Status AfterTraining(HookContext& context, ClientUpdate& update) {
    return absl::OkStatus();
  }
};

}  // namespace fl

#endif  // FL_CLIENT_HOOK_H_
