#include "fl/replica_pool.h"

#include "fl/model.h"

namespace fl {

ReplicaPool::ReplicaPool(std::vector<std::unique_ptr<Model>> replicas)
    : replicas_(std::move(replicas)) {
  for (auto& r : replicas_) free_.push_back(r.get());
}

ReplicaPool::~ReplicaPool() = default;

std::unique_ptr<ReplicaPool::Lease> ReplicaPool::Acquire() {
  absl::MutexLock lock(&mutex_);
  mutex_.Await(absl::Condition(
      +[](std::vector<Model*>* free) { return !free->empty(); }, &free_));
  Model* model = free_.back();
  free_.pop_back();
  return std::make_unique<Lease>(this, model);
}

void ReplicaPool::Release(Model* model) {
  absl::MutexLock lock(&mutex_);
  free_.push_back(model);
}

}  // namespace fl
