#ifndef FL_LOCAL_TRAINER_H_
#define FL_LOCAL_TRAINER_H_

// One client's local training: load the global model, run the round's hooks'
// BeforeTraining, take optimiser steps on cross-entropy plus every hook's loss term,
// run AfterTraining, and return delta = w_local - w_global with the hooks' extras.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "fl/aggregator.h"
#include "fl/client_state_store.h"
#include "fl/client_update.h"
#include "fl/dataset.h"
#include "fl/flat_parameters.h"
#include "fl/model_state.h"
#include "fl/spec.pb.h"

namespace fl {

class ClientHook;
class Model;
class FaultModel;
class SystemModel;

struct LocalTrainingInput {
  int64_t client_id = -1;
  int round = 0;
  // Fixes the batch order and the hooks' randomness for this (client, round).
  uint64_t seed = 0;
  const ModelState* global = nullptr;
  // Where training starts when not from `global` (same layout); the update is
  // still w_local - w_global.
  const ModelState* start = nullptr;
  const RoundPlan* plan = nullptr;
  // The federation's training examples, on the training device.
  const Examples* examples = nullptr;
  const std::vector<int64_t>* indices = nullptr;
  // A hook the caller made and owns, run after the requested ones; its state is
  // not kept (a hook's own training: Ditto's proximal term).
  ClientHook* caller_hook = nullptr;
};

// How the trainer lays out the parameters for `spec`'s optimiser: one buffer, unless
// it is plain SGD (one kernel per tensor, where one buffer saves no launches and
// would cost a copy of every gradient into it) without gradient clipping (whose
// norm over one buffer rounds differently from its norm over the tensors).
FlatParameters::Layout OptimizerLayout(const fedkit::ClientTrainingSpec& spec);

// The local steps `spec` asks of a client with `num_examples` training examples:
// client.steps, or client.epochs passes of ceil(num_examples / batch) batches.
int64_t PlannedSteps(const fedkit::ClientTrainingSpec& spec, int64_t num_examples);

class LocalTrainer {
 public:
  // `spec_hooks` run on every client after the plan's hooks. `state_store` must
  // outlive the trainer. `augmentation` is applied to every training batch, drawn
  // from a stream seeded per (client, round).
  LocalTrainer(fedkit::ClientTrainingSpec spec, std::vector<HookRequest> spec_hooks,
               ClientStateStore* state_store, ImageAugmentation augmentation = {});

  // Trains `model` (a replica; its weights and generator are overwritten) on the
  // client's data. The hooks' new per-client state is staged in the store: the
  // caller commits it (ClientStateStore::Commit) once the server accepts the
  // update, or discards it. Errors (a hook failing or requested twice, a shape
  // mismatch, a LibTorch error) name the client.
  absl::StatusOr<ClientUpdate> Train(Model& model, const LocalTrainingInput& input) const;

  ClientStateStore& state_store() const { return *state_store_; }

  // Simulated system heterogeneity: each client completes only the steps `system`
  // allows (it must outlive the trainer); a client that completes none returns an
  // update with local_steps 0 and nothing else. Default: every step.
  void set_system_model(const SystemModel* system) { system_ = system; }
  // Faulty clients (client.faults): they train on flipped labels or corrupt what
  // they send, as `faults` says (it must outlive the trainer). Default: none.
  void set_fault_model(const FaultModel* faults) { faults_ = faults; }
  // Personalised FL: the tensors (by ModelState name) each client keeps for
  // itself. A client trains from the global model with its own values of them
  // (from the state store, slot kPersonalSlot; the global model's until it has
  // any), its hooks see that model as the global one, and they are left out of
  // the update (not sent, not counted in bytes_sent) and staged in the store.
  void set_personal_tensors(std::vector<std::string> names) { personal_ = std::move(names); }
  // Tensors no client trains (FedBABU's head): out of the optimiser, so they keep
  // the global model's values, and left out of the update like personal ones.
  void set_frozen_tensors(std::vector<std::string> names) { frozen_ = std::move(names); }
  // Local training in phases (AggregatorProperties::local_phases), each with an
  // optimiser of its own over the part it trains; the system model cuts the last
  // phases first. Default: one phase over everything not frozen.
  void set_phases(std::vector<LocalPhase> phases) { phases_ = std::move(phases); }

 private:
  absl::StatusOr<ClientUpdate> TrainUnguarded(Model& model, const LocalTrainingInput& input) const;

  fedkit::ClientTrainingSpec spec_;
  std::vector<HookRequest> spec_hooks_;
  ClientStateStore* state_store_;
  ImageAugmentation augmentation_;
  const SystemModel* system_ = nullptr;
  const FaultModel* faults_ = nullptr;
  std::vector<std::string> personal_;
  std::vector<std::string> frozen_;
  std::vector<LocalPhase> phases_;
};

}  // namespace fl

#endif  // FL_LOCAL_TRAINER_H_
