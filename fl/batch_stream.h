#ifndef FL_BATCH_STREAM_H_
#define FL_BATCH_STREAM_H_

// A client's local training batches, in order: epoch after epoch over its
// training indices (shuffled per epoch from the round's seed, in partition
// order, or replayed from recorded orders), each batch augmented and, for a
// label-flipping client, relabelled. A local step usually takes one batch; a
// method's own local step may take several (Per-FedAvg's three), and the epochs
// simply continue.

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include "absl/status/statusor.h"
#include "fl/dataset.h"
#include "fl/spec.pb.h"

namespace fl {

class FaultModel;

class BatchStream {
 public:
  struct Source {
    int64_t client_id = -1;
    int round = 0;
    uint64_t seed = 0;  // the client's round seed
    const Examples* examples = nullptr;
    // Non-empty.
    std::vector<int64_t> indices;
    ImageAugmentation augmentation;
    const FaultModel* faults = nullptr;  // may be null
  };

  // Reads the recorded orders when spec.batch_order is FROM_FILE, failing when
  // they cannot cover `min_batches`.
  static absl::StatusOr<BatchStream> Create(const fedkit::ClientTrainingSpec& spec, Source source,
                                            int64_t min_batches);

  // The next batch. Errors: recorded orders run out; the record cannot be written.
  absl::StatusOr<Examples> Next();

  int64_t num_examples() const { return static_cast<int64_t>(source_.indices.size()); }
  // The training indices, in the order of the current epoch when shuffled.
  const std::vector<int64_t>& indices() const { return source_.indices; }

 private:
  BatchStream(const fedkit::ClientTrainingSpec& spec, Source source);

  fedkit::ClientTrainingSpec spec_;
  Source source_;
  int64_t batch_size_;
  int64_t batches_per_epoch_;
  bool flip_labels_;
  std::mt19937_64 rng_;
  at::Generator augmentation_stream_;
  std::vector<std::vector<int64_t>> recorded_;
  at::Tensor order_;
  int64_t next_batch_ = 0;
};

}  // namespace fl

#endif  // FL_BATCH_STREAM_H_
