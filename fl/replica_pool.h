#ifndef FL_REPLICA_POOL_H_
#define FL_REPLICA_POOL_H_

// A fixed set of model replicas shared by the in-process clients: a worker
// borrows one for a client's training and gives it back, so memory holds one
// model per worker, not one per client.

#include <memory>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace fl {

class Model;

class ReplicaPool {
 public:
  // Returns the replica to the pool when destroyed.
  class Lease {
   public:
    Lease(ReplicaPool* pool, Model* model) : pool_(pool), model_(model) {}
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() { pool_->Release(model_); }
    Model& model() { return *model_; }

   private:
    ReplicaPool* pool_;
    Model* model_;
  };

  explicit ReplicaPool(std::vector<std::unique_ptr<Model>> replicas);
  ~ReplicaPool();

  // Blocks until a replica is free.
  std::unique_ptr<Lease> Acquire();

 private:
  void Release(Model* model);

  std::vector<std::unique_ptr<Model>> replicas_;
  absl::Mutex mutex_;
  std::vector<Model*> free_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace fl

#endif  // FL_REPLICA_POOL_H_
