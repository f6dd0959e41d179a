#ifndef FL_EXPERIMENT_H_
#define FL_EXPERIMENT_H_

// From a spec to a finished run. BuildExperiment validates the whole spec before
// anything is loaded or trained (core fields and every plugin, which it creates),
// reporting every problem at once, one per line, each naming its field path:
//
//   server.rounds: must be >= 1, got 0
//   aggregator.name: aggregator "fedavgg" is not registered; known: fedavg
//   client.optimizer.lr: must be > 0, got -0.1
//
// RunExperiment then loads the data, partitions it, builds the model and clients,
// and runs the server, writing results to the output folder (see metrics_sink.h).

#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <c10/core/Device.h>

#include "absl/status/statusor.h"
#include "fl/aggregator.h"
#include "fl/client.h"
#include "fl/dataset.h"
#include "fl/evaluator.h"
#include "fl/metrics_sink.h"
#include "fl/model_state.h"
#include "fl/one_shot_report.h"
#include "fl/partitioner.h"
#include "fl/spec.pb.h"
#include "fl/thread_budget.h"

namespace fl {

class Federation;

struct Experiment {
  fedkit::ExperimentSpec spec;
  c10::Device device = c10::kCPU;
  DatasetInfo data_info;
  std::unique_ptr<Dataset> dataset;
  std::unique_ptr<Partitioner> partitioner;
  std::unique_ptr<Aggregator> aggregator;
  std::vector<HookRequest> spec_hooks;
  // One-shot runs: the aggregators of server.compare, in order.
  std::vector<OneShotComparison> comparisons;
  // How the run spends the cores: chosen here, applied by RunExperiment.
  ThreadBudget threads;
  // The model of spec.initial_model_path (on the CPU), read and checked here.
  std::optional<ModelState> initial_model;
  // The tensors each client keeps for itself (the aggregator's personal_groups
  // resolved against the model's groups: fl/personalization.h); empty: all shared.
  std::vector<std::string> personal_tensors;
  // The tensors no client trains (the aggregator's frozen_groups); kept out of
  // the update and of what the aggregator sees, as personal ones are.
  std::vector<std::string> frozen_tensors;
  // The aggregator's local training phases (FedRep's) and whether its clients
  // keep a whole model of their own (Ditto's), from its properties.
  std::vector<LocalPhase> local_phases;
  bool personal_model = false;
};

absl::StatusOr<Experiment> BuildExperiment(const fedkit::ExperimentSpec& spec);

// personal_tensors and frozen_tensors together: what the server never sees.
std::set<std::string> UnsharedTensorNames(const Experiment& experiment);

struct ExperimentResult {
  ModelState final_model;
  std::vector<MetricsRow> rows;
  // In a distributed run, this process's rank: only rank 0 writes results (and
  // has rows).
  int rank = 0;
};

struct Checkpoint;

// Also fails, with the files named, when the dataset is not on disk. With
// `resume` (read from a checkpoint of this spec: see CheckResumable), continues
// that run after its last completed round, from the checkpoint's model whatever
// initial_model_path says. With output.write_inputs, writes the run's inputs
// (docs/identical-inputs.md) before the first round (not on resume). Writes
// model.pt (and best_model.pt with output.save_best_model) at the end. A run stopped by SIGINT or SIGTERM, after
// fl::InstallStopHandlers, fails with kCancelled once its checkpoint is written.
//
// `on_round`, when given, is called after each evaluated round with its metrics
// row and the global model; returning false ends the run there, normally (its
// summary covers the rounds run). Only for single-process runs: a C10D spec with
// `on_round` is refused (FailedPrecondition).
//
// `reach_clients`, when given, receives the federation's in-process clients (in
// id order) and returns the clients the server runs instead, one per id in the
// same order: a deployment's stand-ins for clients in other processes
// (fl/deploy/remote_client.h). Single-process runs only.
using RoundObserver = std::function<bool(const MetricsRow&, const ModelState&)>;
using ClientReach = std::function<absl::StatusOr<std::vector<std::unique_ptr<Client>>>(
    std::vector<std::unique_ptr<Client>> in_process)>;
absl::StatusOr<ExperimentResult> RunExperiment(Experiment& experiment,
                                               const std::string& output_dir,
                                               const Checkpoint* resume = nullptr,
                                               RoundObserver on_round = nullptr,
                                               ClientReach reach_clients = nullptr);

// A client process of a deployment: the spec's data, partition and clients
// assembled as the server's run assembles them, of which it trains one. The model
// layout is the spec's model's, to check the server's tasks against.
struct HostedClient {
  HostedClient();
  HostedClient(HostedClient&&);
  ~HostedClient();
  std::unique_ptr<Federation> federation;
  std::unique_ptr<Client> client;
  ModelState layout;
};
// `own_data`, when given, replaces the spec's data: the client trains on all of
// its training split (LoadOwnData); the spec's dataset files are not read.
absl::StatusOr<HostedClient> HostClient(Experiment& experiment, int64_t client_id,
                                        Dataset* own_data = nullptr);

// The accuracy and mean loss on the spec's test split of a model of the spec's
// architecture, as a run evaluates its global model each round. `read` gets a
// freshly built model's state as the layout and returns the state to evaluate
// (ReadModelFile for a run's model.pt, ...); its errors pass through.
absl::StatusOr<Evaluation> EvaluateOnTestSplit(
    Experiment& experiment,
    const std::function<absl::StatusOr<ModelState>(const ModelState& layout)>& read);

}  // namespace fl

#endif  // FL_EXPERIMENT_H_
