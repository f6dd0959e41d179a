#ifndef FL_FEDERATION_H_
#define FL_FEDERATION_H_

// The client side of a run, assembled once from an Experiment for whichever loop
// runs it (today the synchronous rounds of fl/server.h): the data on the run's
// device, and one client per share of the training set with what the clients
// share (model replicas, the client-state store, the local trainer, the system
// and fault models).
//
//   FL_ASSIGN_OR_RETURN(RunData data, LoadRunData(experiment));
//   ... the global model (it draws from LibTorch's global generator first) ...
//   FL_ASSIGN_OR_RETURN(auto federation, Federation::Assemble(experiment, std::move(data), group));
//   Server server(..., federation->TakeClients(), ...);

#include <cstdint>
#include <memory>
#include <vector>

#include <c10/core/Device.h>

#include "absl/status/statusor.h"
#include "fl/client.h"
#include "fl/client_state_store.h"
#include "fl/collective.h"
#include "fl/dataset.h"
#include "fl/experiment.h"
#include "fl/fault_model.h"
#include "fl/local_trainer.h"
#include "fl/model.h"
#include "fl/replica_pool.h"
#include "fl/system_model.h"

namespace fl {

// Whether server.proxy asks for a proxy set.
bool HasProxy(const fedkit::ProxySpec& proxy);

// The spec's model, on `device`, initialised from LibTorch's global generator.
absl::StatusOr<std::unique_ptr<Model>> NewModel(const fedkit::ExperimentSpec& spec,
                                                const DatasetInfo& info,
                                                const c10::Device& device);

// An error naming `split` when a label lies outside [0, num_classes).
absl::Status CheckLabels(const Examples& examples, int64_t num_classes, const char* split);

// The run's data on its device: the training and test sets, the server's proxy
// set (and which examples it took), and each client's share of the training set.
struct RunData {
  Examples train;
  Examples test;
  Examples proxy;
  std::vector<int64_t> proxy_indices;
  std::vector<std::vector<int64_t>> shares;
};

// Loads the dataset, checks its labels, takes the proxy set (server.proxy) and
// partitions the rest (seeded), no share empty.
absl::StatusOr<RunData> LoadRunData(Experiment& experiment);

// A deployed client's own data (fl_client --data_dir): `own`'s training split is
// all client `client_id`'s share (the other clients' shares are empty), with its
// test split and no proxy set. Errors: LoadRunData's, and an empty training split.
absl::StatusOr<RunData> LoadOwnData(const Experiment& experiment, Dataset& own,
                                    int64_t client_id);

class Federation {
 public:
  // `data` from LoadRunData: its shares become the clients. `group` (null for one
  // process) assigns each client to a rank. Creates one model replica per worker,
  // which draws from LibTorch's global generator: after the global model, so that
  // the generator's stream is the one runs have always used.
  static absl::StatusOr<std::unique_ptr<Federation>> Assemble(const Experiment& experiment,
                                                              RunData data,
                                                              const Collective* group);

  // The clients point into it.
  Federation(const Federation&) = delete;
  Federation& operator=(const Federation&) = delete;

  // The data; its shares have gone to the clients.
  const RunData& data() const { return data_; }
  // Client k's number of training examples, and their sum.
  const std::vector<int64_t>& client_sizes() const { return client_sizes_; }
  int64_t num_examples() const { return num_examples_; }
  // Client k's rank in a distributed run; empty in a single process.
  const std::vector<int>& client_ranks() const { return client_ranks_; }
  ClientStateStore& state_store() { return state_store_; }

  // The clients, in id order, for the loop that runs them; once.
  std::vector<std::unique_ptr<Client>> TakeClients();

  // Client `client`'s time on the virtual clock for its task in `round`
  // (SystemModel::TaskSeconds): its planned local steps from its data and
  // client.epochs or client.steps (a hook that holds examples out is not
  // counted), and an upload the size of the model under client.upload (a hook's
  // extra tensors are not counted), so that a client's time is known when it
  // starts and is the same in every mode.
  double TaskSeconds(int64_t client, int round, int64_t bytes_down) const;
  // With client.system.trace_path: when client `client` is online (see
  // SystemModel::NextWindow); false without one (always online).
  bool has_availability() const { return system_.has_availability(); }
  OnlineWindow NextWindow(int64_t client, double at) const { return system_.NextWindow(client, at); }

 private:
  Federation(const Experiment& experiment, RunData data,
             std::vector<std::unique_ptr<Model>> replicas, std::shared_ptr<const ClientTrace> trace,
             const Collective* group);

  RunData data_;
  ReplicaPool pool_;
  ClientStateStore state_store_;
  LocalTrainer trainer_;
  const SystemModel system_;
  const FaultModel faults_;
  std::vector<int64_t> client_sizes_;
  int64_t num_examples_ = 0;
  const fedkit::ClientTrainingSpec training_;
  // An update's size on the virtual clock (see TaskSeconds).
  int64_t upload_bytes_ = 0;
  std::vector<int> client_ranks_;
  std::vector<std::unique_ptr<Client>> clients_;
};

}  // namespace fl

#endif  // FL_FEDERATION_H_
