#ifndef FL_LOCAL_CLIENT_H_
#define FL_LOCAL_CLIENT_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"

#include "fl/client.h"
#include "fl/dataset.h"
#include "fl/local_trainer.h"
#include "fl/model_state.h"
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

  // Where local training starts instead of the broadcast model (one-shot runs with
  // independent initialisations). Called on the training thread; must be
  // thread-safe. The update stays relative to the broadcast model.
  using InitialWeights = std::function<absl::StatusOr<ModelState>()>;
  void set_initial_weights(InitialWeights initial_weights) {
    initial_weights_ = std::move(initial_weights);
  }

 private:
  int64_t id_;
  std::vector<int64_t> indices_;
  const Examples* examples_;
  const LocalTrainer* trainer_;
  ReplicaPool* replicas_;
  uint64_t seed_;
  InitialWeights initial_weights_;
};

}  // namespace fl

#endif  // FL_LOCAL_CLIENT_H_
