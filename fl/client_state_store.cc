#include "fl/client_state_store.h"

namespace fl {

TensorMap& ClientStateStore::Get(int64_t client_id, const std::string& hook) {
  absl::MutexLock lock(&mutex_);
  // std::map never moves its nodes, so the reference outlives the lock.
  return states_[{client_id, hook}];
}

size_t ClientStateStore::size() const {
  absl::MutexLock lock(&mutex_);
  return states_.size();
}

}  // namespace fl
