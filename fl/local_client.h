#ifndef FL_LOCAL_CLIENT_H_
#define FL_LOCAL_CLIENT_H_

#include <cstdint>
#include <vector>

#include "fl/client.h"
#include "fl/dataset.h"
#include "fl/local_trainer.h"
#include "fl/replica_pool.h"

namespace fl {

// An in-process client: an index list into the shared training examples. Holds no
// model and no tensors of its own, so thousands of them cost only their indices.
class LocalClient : public Client {
 public:
  // Pointers must outlive the client.
  LocalClient(int64_t id, std::vector<int64_t> indices, const Examples* examples,
              const LocalTrainer* trainer, ReplicaPool* replicas, uint64_t seed);

  int64_t id() const override { return id_; }
  int64_t num_examples() const override { return static_cast<int64_t>(indices_.size()); }
  absl::StatusOr<ClientUpdate> Train(const ModelState& global, const RoundPlan& plan,
                                     int round) override;
  void Acknowledge(bool accepted) override;

 private:
  int64_t id_;
  std::vector<int64_t> indices_;
  const Examples* examples_;
  const LocalTrainer* trainer_;
  ReplicaPool* replicas_;
  uint64_t seed_;
};

}  // namespace fl

#endif  // FL_LOCAL_CLIENT_H_
