#include "fl/federation.h"

#include <random>
#include <set>
#include <string>
#include <utility>

#include <ATen/ATen.h>
#include <torch/utils.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "fl/codec.h"
#include "fl/data_splits.h"
#include "fl/local_client.h"
#include "fl/rank_assignment.h"
#include "fl/registry.h"
#include "fl/seeding.h"
#include "fl/status_macros.h"
#include "glog/logging.h"

namespace fl {
namespace {

// The clients' shares of the training set, as the spec's partitioner splits it
// (seeded), none empty.
absl::StatusOr<std::vector<std::vector<int64_t>>> PartitionTrainingSet(
    const Experiment& experiment, const DatasetSplits& data) {
  const fedkit::ExperimentSpec& spec = experiment.spec;
  std::vector<int64_t> labels(data.train.y.data_ptr<int64_t>(),
                              data.train.y.data_ptr<int64_t>() + data.train.size());
  std::vector<int64_t> owners;
  if (data.train_owners.defined()) {
    const at::Tensor o = data.train_owners.to(at::kCPU, at::kLong).contiguous();
    CHECK_EQ(o.numel(), data.train.size()) << "train_owners not aligned with train";
    owners.assign(o.data_ptr<int64_t>(), o.data_ptr<int64_t>() + o.numel());
  }
  std::mt19937_64 partition_rng(DeriveSeed(spec.seed(), SeedStream::kPartition));
  absl::StatusOr<std::vector<std::vector<int64_t>>> shares = experiment.partitioner->Partition(
      {labels, experiment.data_info.num_classes, owners}, spec.partition().num_clients(),
      partition_rng);
  if (!shares.ok()) {
    return absl::Status(shares.status().code(),
                        absl::StrCat("partition (", spec.partition().name(), "): ",
                                     shares.status().message()));
  }
  for (size_t k = 0; k < shares->size(); ++k) {
    if ((*shares)[k].empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("partition (", spec.partition().name(), "): client ", k,
                       " got no examples; use fewer clients or a different partition"));
    }
  }
  return shares;
}

// One model replica per worker thread.
absl::StatusOr<std::vector<std::unique_ptr<Model>>> NewReplicas(const Experiment& experiment) {
  std::vector<std::unique_ptr<Model>> replicas;
  for (int w = 0; w < experiment.threads.workers; ++w) {
    FL_ASSIGN_OR_RETURN(std::unique_ptr<Model> replica,
                        NewModel(experiment.spec, experiment.data_info, experiment.device));
    replicas.push_back(std::move(replica));
  }
  return replicas;
}

// The federation: one LocalClient per share (the shares are moved out of `shares`).
std::vector<std::unique_ptr<Client>> NewClients(const Experiment& experiment,
                                                std::vector<std::vector<int64_t>>& shares,
                                                const Examples* train, LocalTrainer* trainer,
                                                ReplicaPool* pool) {
  const fedkit::ExperimentSpec& spec = experiment.spec;
  std::vector<std::unique_ptr<Client>> clients;
  for (size_t k = 0; k < shares.size(); ++k) {
    auto client = std::make_unique<LocalClient>(k, std::move(shares[k]), train, trainer, pool,
                                                spec.seed());
    if (spec.server().independent_init()) {
      const DatasetInfo* info = &experiment.data_info;
      const c10::Device device = experiment.device;
      client->set_initial_weights([&spec, info, device, k]() -> absl::StatusOr<ModelState> {
        // LibTorch's initialisers draw from the global generator: one client at a time.
        static absl::Mutex mutex;
        absl::MutexLock lock(&mutex);
        torch::manual_seed(DeriveSeed(spec.seed(), SeedStream::kInitialModel,
                                      {static_cast<uint64_t>(k) + 1}));
        FL_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, NewModel(spec, *info, device));
        return ModelState::FromModule(*model);
      });
    }
    clients.push_back(std::move(client));
  }
  return clients;
}

}  // namespace

bool HasProxy(const fedkit::ProxySpec& proxy) {
  return proxy.size() > 0 || !proxy.indices_path().empty();
}

absl::StatusOr<std::unique_ptr<Model>> NewModel(const fedkit::ExperimentSpec& spec,
                                                const DatasetInfo& info,
                                                const c10::Device& device) {
  FL_ASSIGN_OR_RETURN(std::unique_ptr<Model> model,
                      Registry<Model>::Global().Create(spec.model().name(), spec.model().options(),
                                                       {info.input_shape, info.num_classes}));
  model->to(device);
  return model;
}

absl::Status CheckLabels(const Examples& examples, int64_t num_classes, const char* split) {
  if (examples.size() == 0) return absl::OkStatus();
  const int64_t lo = examples.y.min().item<int64_t>();
  const int64_t hi = examples.y.max().item<int64_t>();
  if (lo < 0 || hi >= num_classes) {
    return absl::InvalidArgumentError(absl::StrCat("dataset ", split, " labels span [", lo, ", ",
                                                   hi, "], expected [0, ", num_classes, ")"));
  }
  return absl::OkStatus();
}

namespace {

// `dataset`'s splits, their labels checked against the spec's classes.
absl::StatusOr<DatasetSplits> LoadCheckedSplits(const Experiment& experiment, Dataset& dataset) {
  const int64_t num_classes = experiment.data_info.num_classes;
  FL_RETURN_IF_ERROR(dataset.CheckAvailable());
  FL_ASSIGN_OR_RETURN(DatasetSplits data, dataset.Load());
  FL_RETURN_IF_ERROR(CheckLabels(data.train, num_classes, "train"));
  FL_RETURN_IF_ERROR(CheckLabels(data.test, num_classes, "test"));
  return data;
}

}  // namespace

absl::StatusOr<RunData> LoadRunData(Experiment& experiment) {
  const fedkit::ExperimentSpec& spec = experiment.spec;
  const int64_t num_classes = experiment.data_info.num_classes;
  FL_ASSIGN_OR_RETURN(DatasetSplits data, LoadCheckedSplits(experiment, *experiment.dataset));
  RunData run;
  if (HasProxy(spec.server().proxy())) {
    FL_ASSIGN_OR_RETURN(run.proxy, TakeProxy(spec.server().proxy(), num_classes,
                                             DeriveSeed(spec.seed(), SeedStream::kProxySplit),
                                             data, &run.proxy_indices));
    run.proxy = {run.proxy.x.to(experiment.device), run.proxy.y.to(experiment.device)};
  }
  FL_ASSIGN_OR_RETURN(run.shares, PartitionTrainingSet(experiment, data));
  run.train = {data.train.x.to(experiment.device), data.train.y.to(experiment.device)};
  run.test = {data.test.x.to(experiment.device), data.test.y.to(experiment.device)};
  return run;
}

absl::StatusOr<RunData> LoadOwnData(const Experiment& experiment, Dataset& own,
                                    int64_t client_id) {
  FL_ASSIGN_OR_RETURN(DatasetSplits data, LoadCheckedSplits(experiment, own));
  if (data.train.size() == 0) return absl::InvalidArgumentError("the training split is empty");
  RunData run;
  run.shares.resize(static_cast<size_t>(experiment.spec.partition().num_clients()));
  std::vector<int64_t>& share = run.shares.at(static_cast<size_t>(client_id));
  share.resize(static_cast<size_t>(data.train.size()));
  std::iota(share.begin(), share.end(), int64_t{0});
  run.train = {data.train.x.to(experiment.device), data.train.y.to(experiment.device)};
  run.test = {data.test.x.to(experiment.device), data.test.y.to(experiment.device)};
  return run;
}

absl::StatusOr<std::unique_ptr<Federation>> Federation::Assemble(const Experiment& experiment,
                                                                 RunData data,
                                                                 const Collective* group) {
  std::shared_ptr<const ClientTrace> trace;
  if (const std::string& path = experiment.spec.client().system().trace_path(); !path.empty()) {
    absl::StatusOr<ClientTrace> loaded = ClientTrace::Load(path);
    if (!loaded.ok()) {
      return absl::Status(loaded.status().code(), absl::StrCat("client.system.trace_path: ",
                                                               loaded.status().message()));
    }
    trace = std::make_shared<const ClientTrace>(*std::move(loaded));
  }
  FL_ASSIGN_OR_RETURN(std::vector<std::unique_ptr<Model>> replicas, NewReplicas(experiment));
  return std::unique_ptr<Federation>(
      new Federation(experiment, std::move(data), std::move(replicas), std::move(trace), group));
}

Federation::Federation(const Experiment& experiment, RunData data,
                       std::vector<std::unique_ptr<Model>> replicas,
                       std::shared_ptr<const ClientTrace> trace, const Collective* group)
    : data_(std::move(data)),
      pool_(std::move(replicas)),
      trainer_(experiment.spec.client(), experiment.spec_hooks, &state_store_,
               experiment.data_info.train_augmentation),
      system_(experiment.spec.client().system(), experiment.spec.seed(),
              experiment.spec.server().rounds(), std::move(trace)),
      faults_(experiment.spec.client().faults(), experiment.spec.seed(),
              experiment.spec.partition().num_clients(), experiment.data_info.num_classes),
      training_(experiment.spec.client()) {
  const fedkit::ExperimentSpec& spec = experiment.spec;
  if (spec.client().has_system()) trainer_.set_system_model(&system_);
  if (spec.client().faults_size() > 0) trainer_.set_fault_model(&faults_);
  trainer_.set_personal_tensors(experiment.personal_tensors);
  trainer_.set_frozen_tensors(experiment.frozen_tensors);
  trainer_.set_phases(experiment.local_phases);
  for (const std::vector<int64_t>& share : data_.shares) {
    client_sizes_.push_back(static_cast<int64_t>(share.size()));
    num_examples_ += static_cast<int64_t>(share.size());
  }
  if (group != nullptr) client_ranks_ = AssignClientsToRanks(client_sizes_, group->world_size());
  {
    // What a client uploads: the model without its personal and frozen tensors.
    const ModelState shape =
        ModelState::FromModule(pool_.Acquire()->model()).Without(UnsharedTensorNames(experiment));
    upload_bytes_ = spec.client().upload().kind() == fedkit::CodecSpec::IDENTITY
                        ? shape.NumBytes()
                        : Encode(shape, CodecFromSpec(spec.client().upload())).bytes;
  }
  clients_ = NewClients(experiment, data_.shares, &data_.train, &trainer_, &pool_);
}

double Federation::TaskSeconds(int64_t client, int round, int64_t bytes_down) const {
  return system_.TaskSeconds(client, round,
                             PlannedSteps(training_, client_sizes_[static_cast<size_t>(client)]),
                             bytes_down, upload_bytes_);
}

std::vector<std::unique_ptr<Client>> Federation::TakeClients() {
  CHECK(!clients_.empty()) << "the federation's clients were taken already";
  return std::move(clients_);
}

}  // namespace fl
