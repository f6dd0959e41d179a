#include "fl/local_client.h"

#include <optional>

#include "fl/seeding.h"

namespace fl {

LocalClient::LocalClient(int64_t id, std::vector<int64_t> indices, const Examples* examples,
                         const LocalTrainer* trainer, ReplicaPool* replicas, uint64_t seed)
    : id_(id),
      indices_(std::move(indices)),
      examples_(examples),
      trainer_(trainer),
      replicas_(replicas),
      seed_(seed) {}

absl::StatusOr<ClientUpdate> LocalClient::Train(const ModelState& global, const RoundPlan& plan,
                                                int round) {
  LocalTrainingInput input;
  input.client_id = id_;
  input.round = round;
  input.seed = DeriveSeed(seed_, SeedStream::kLocalTraining,
                          {static_cast<uint64_t>(round), static_cast<uint64_t>(id_)});
  input.global = &global;
  input.plan = &plan;
  input.examples = examples_;
  input.indices = &indices_;
  std::optional<ModelState> start;
  if (initial_weights_) {
    absl::StatusOr<ModelState> initial = initial_weights_();
    if (!initial.ok()) return initial.status();
    start = *std::move(initial);
    input.start = &*start;
  }
  std::unique_ptr<ReplicaPool::Lease> lease = replicas_->Acquire();
  return trainer_->Train(lease->model(), input);
}

void LocalClient::Acknowledge(bool accepted) {
  ClientStateStore& store = trainer_->state_store();
  if (accepted) {
    store.Commit(id_);
  } else {
    store.Discard(id_);
  }
}

}  // namespace fl
