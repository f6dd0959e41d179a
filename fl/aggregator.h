#ifndef FL_AGGREGATOR_H_
#define FL_AGGREGATOR_H_

// The server-side half of a federated method. Each round the server calls
//   Configure -> (clients train) -> Accumulate once per accepted update -> Finalize.
// Accumulate streams: an aggregator that only needs weighted sums (FedAvg and its
// element-wise relatives) keeps O(P) memory however many clients report; one that
// needs every update (FedLAW, MA-Echo) keeps them itself.
//
// An aggregator sees ModelStates and ClientUpdates, never a client's data. What the
// server holds it lends through ServerContext.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "fl/client_update.h"
#include "fl/dataset.h"
#include "fl/model_state.h"
#include "google/protobuf/any.pb.h"

namespace fl {

class Model;

// A client hook the aggregator needs run on every client this round.
struct HookRequest {
  std::string name;
  google::protobuf::Any options;
};

// What the server sends to the cohort besides the global model.
struct RoundPlan {
  std::vector<HookRequest> hooks;
  // Broadcast tensors (SCAFFOLD's server control variate, ...), counted in bytes_down.
  ExtraStates broadcast;
};

// What the server lends an aggregator for one round.
struct ServerContext {
  int round = 0;  // 1-based
  at::Device device = at::kCPU;
  // Seed of this round's random stream; aggregators derive their randomness from it.
  uint64_t round_seed = 0;
  // A fresh instance of the experiment's model architecture, on `device`, for
  // methods that run forward passes on the server (FedLAW, FedDF, Server-FT).
  std::function<absl::StatusOr<std::unique_ptr<Model>>()> new_model;
  // The server-held labelled proxy split; nullptr when the spec asks for none.
  const Examples* proxy = nullptr;
  // Clients registered in the federation (SCAFFOLD scales by |S| / N).
  int num_clients = 0;
  // Training examples over all clients of the federation (for weights n_i / n).
  int64_t num_examples = 0;
  // The clients' SGD momentum (client.optimizer.momentum; 0 for none), for methods
  // whose algebra depends on the local optimiser (FedNova's effective steps).
  double client_momentum = 0.0;
  // How cohorts are drawn, for methods whose guarantees depend on it (privacy
  // accounting): the expected cohort size (server.clients_per_round; every client
  // in one-shot mode), whether each client is drawn independently (Poisson
  // sampling) rather than a fixed number without replacement, and the rounds the
  // run plans.
  int expected_cohort_size = 0;
  bool poisson_sampling = false;
  int planned_rounds = 0;
  // False when cohorts are not such uniform draws: a client trace's online
  // windows decide who can be drawn, so some clients take part far more often
  // than the sampling rate says.
  bool uniform_cohorts = true;
  // Asynchronous mode: no cohorts; each client reports as often as it is fast.
  bool asynchronous = false;
  // The test-split accuracy of a model, lent for diagnostics that trace a method's
  // own iterations (MA-Echo's); never for choosing a model. Empty when the server
  // has none.
  std::function<absl::StatusOr<double>(const ModelState&)> test_accuracy;
  // Per-round scalars the aggregator reports (FedExP's eta_g, FedLAW's gamma, ...);
  // each key becomes a column of metrics.csv.
  std::map<std::string, double> diagnostics;
  // Fields the aggregator adds to summary.json, name -> a JSON value (the privacy
  // spent, ...). Kept across rounds: the values at the end of the run are written.
  std::map<std::string, std::string> summary;
  // Set by Finalize when the model to evaluate is not the training iterate (FedExP
  // evaluates the average of its last two iterates); training always continues
  // from what Finalize returns. Cleared every round.
  std::optional<ModelState> evaluation_model;
  // Set by Finalize when the aggregate is a predictor rather than one model's
  // weights (the logit ensemble: logits for a batch of inputs); evaluation then
  // runs it instead of any model. Cleared every round.
  std::function<at::Tensor(const at::Tensor& inputs)> evaluation_predictor;
};

// How a group of an aggregator's partial sums responds to one client, for running
// the aggregator under differential privacy (the dp_fedavg wrapper), which feeds it
// updates of weight 1 (num_examples 1) whose parameter deltas have L2 norm <= C,
// then noises or replaces these sums before the aggregator finalises from them.
struct DpSum {
  enum class Role {
    // Sum of the clients' deltas: one client moves these sums together by at most
    // C in L2 norm. Noised with standard deviation z C.
    kUpdateSum,
    // Sum of the clients' squared delta norms: one client moves it by at most C^2.
    // Noised with standard deviation z C^2.
    kSquaredNormSum,
    // Sum of the clients' weights: one client adds exactly 1. Replaced by the
    // expected cohort size, so the realised cohort (private) never divides a sum.
    kWeightTotal,
    // Number of updates: one client adds exactly 1. Replaced by the expected
    // cohort size, rounded, at least 1.
    kCount,
  };
  // The partial sums whose names start with this (each sum matches exactly one).
  std::string prefix;
  Role role = Role::kUpdateSum;
};

// One phase of a client's local training (FedRep trains its personal head, then
// the shared body): which part of the model the optimiser moves, for how long.
struct LocalPhase {
  enum class Part { kPersonal, kShared };
  // kPersonal: the personal tensors only; kShared: every trained tensor that is
  // not personal. The rest sit out the phase (out of the optimiser).
  Part part = Part::kShared;
  // Passes over the client's training examples; 0: the client's own local work
  // (client.epochs or client.steps).
  int epochs = 0;
};

// Properties the shared conformance suite checks where they hold.
struct AggregatorProperties {
  // The result does not depend on the order updates arrive in.
  bool order_invariant = true;
  // With default options, one client's update in gives global + that update out.
  bool single_client_identity = true;
  // Trains or evaluates a model on ServerContext::proxy every round, and fails
  // without one. Its cost is then server-side passes over the proxy set rather than
  // one pass over the updates, so the aggregation benchmark times it end to end over
  // K, P and proxy size instead of against the streaming bound. Declared, not
  // inferred from what a round touches: the conformance suite checks the claim.
  bool uses_proxy = false;
  // The client hooks its RoundPlan requests, by name (any order). Declared so that
  // a spec is checked before anything runs: a hook in client.hooks that the
  // aggregator already plans would run twice. The conformance suite checks the
  // claim against Configure.
  std::vector<std::string> client_hooks;
  // The model's parameter groups (Model::ParameterGroups) that each client keeps
  // for itself (personalised FL: FedPer's head, FedBN's normalisation layers). The
  // runner keeps them in the client state store and out of the update, so that
  // they are never uploaded, and lends the aggregator only the shared part of the
  // model: every ModelState it sees (global, deltas) lacks them. Empty: all shared.
  // Wrappers pass their base's on.
  std::vector<std::string> personal_groups;
  // The model's parameter groups no client trains (FedBABU's head): they keep the
  // initial values everywhere, out of the optimiser, the update and what the
  // aggregator sees, as personal groups are. Wrappers pass their base's on.
  std::vector<std::string> frozen_groups;
  // Local training in phases, in order (FedRep); each phase has an optimiser of
  // its own. Empty: one phase training every tensor for the client's local work.
  // Wrappers pass their base's on.
  std::vector<LocalPhase> local_phases;
  // Each client keeps a whole model of its own beside the shared one (Ditto's
  // v_k), which a client hook the aggregator plans trains and leaves in
  // HookContext::personal; per-client evaluation uses it (the server's model for
  // a client that has none yet). Wrappers pass their base's on.
  bool personal_model = false;
  // A client hook it plans takes the local steps itself (ClientHook::
  // takes_local_steps: pFedMe, APFL, Per-FedAvg), as plain SGD at the client's
  // learning rate: validation refuses what it would not apply (another
  // optimiser, momentum, weight decay, a kept optimiser state, local phases).
  // Wrappers pass their base's on.
  bool own_local_step = false;
  // Reads ClientUpdate::local_steps (FedNova's normalisation): it corrects for incomplete updates itself, so validation refuses
  // server.incomplete_updates: SCALE, which would correct them a second time. The
  // conformance suite checks the claim both ways: the result (or the state kept)
  // changes with local_steps exactly when this is true. Wrappers pass their base's on.
  bool step_aware = false;
  // Its algebra assumes the clients run SGD (client.optimizer.kind SGD, momentum
  // allowed): validation refuses another optimiser, naming both.
  bool needs_local_sgd = false;
  // Non-empty when the aggregation is a function of sums each of which has a
  // bounded sensitivity to one client (see DpSum), so that it can run under
  // client-level differential privacy: every partial sum's name matches exactly one
  // entry. Empty: the aggregation is not such a function (medians, Krum, methods
  // that keep every update or read per-client state), and DP refuses it. The
  // conformance suite checks each declared sensitivity.
  std::vector<DpSum> dp_sums;
  // Its accumulation is a sum over updates that PartialSums exports after Configure:
  // a distributed run all-reduces it, and secure aggregation (ServerSpec.
  // secure_aggregation) can run it, the server then seeing only the sum. Declared so
  // that a spec asking for secure aggregation is checked before anything runs; the
  // conformance suite checks the claim against PartialSums. Wrappers pass their
  // base's on where their own sums follow it.
  bool sums_only = false;
  // Draws its privacy noise from the spec's seed (a simulation's explicit choice,
  // reproducible and recomputable by whoever holds the spec): a deployment
  // refuses it.
  bool noise_from_seed = false;
};

class Aggregator {
 public:
  static constexpr char kRegistryKind[] = "aggregator";
  struct CreateArgs {};

  virtual ~Aggregator() = default;

  virtual AggregatorProperties properties() const { return {}; }

  // Starts a round: what clients must run and receive. The default asks for nothing.
  virtual absl::StatusOr<RoundPlan> Configure(const ModelState& global, ServerContext& context);

  // Takes one client's update. A non-OK status rejects that update only: the
  // server counts it and goes on with the others.
  virtual absl::Status Accumulate(ClientUpdate update, ServerContext& context) = 0;

  // The new global model from the updates accumulated since Configure.
  // REQUIRES: at least one update was accepted this round.
  virtual absl::StatusOr<ModelState> Finalize(const ModelState& global,
                                              ServerContext& context) = 0;

  // Distributed runs (simulation.backend C10D), where each process accumulates a
  // share of the round's updates. An aggregator whose accumulation is a sum over
  // updates returns it here as named tensors (0-dimensional ones for counts and
  // scalar sums), with the same names, shapes and dtypes on every process whatever
  // its share, none included. The element-wise sums of all processes' partials,
  // passed to MergePartialSums of one of them, must leave it as if it had
  // accumulated every update itself, up to floating-point summation order; Finalize
  // follows. nullopt (the default): the accumulation is not a sum (coordinate-wise
  // medians, Krum) or needs every update (FedLAW, MA-Echo), and the run sends every
  // update to one process instead. Called after Configure, before Finalize.
  virtual std::optional<std::map<std::string, at::Tensor>> PartialSums() const {
    return std::nullopt;
  }
  virtual absl::Status MergePartialSums(std::map<std::string, at::Tensor> sums);

  // State that persists across rounds (server momentum, control variates, ...), for
  // checkpoints. Stateless aggregators keep the defaults.
  virtual std::map<std::string, at::Tensor> SaveState() const { return {}; }
  virtual absl::Status RestoreState(const std::map<std::string, at::Tensor>& state);
};

}  // namespace fl

#endif  // FL_AGGREGATOR_H_
