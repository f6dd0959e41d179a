#ifndef FL_PARTITIONER_H_
#define FL_PARTITIONER_H_

#include <cstdint>
#include <random>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace fl {

// What a partitioner sees of the training set: never the inputs themselves.
struct PartitionInput {
  // One label per training example, each in [0, num_classes).
  absl::Span<const int64_t> labels;
  int64_t num_classes = 0;
  // Per-example owner id (the user, writer or device the example came from), for
  // datasets that have a natural split; empty when the dataset has none.
  // When not empty, owners.size() == labels.size().
  absl::Span<const int64_t> owners;
};

// Splits a training set over clients. Works on labels (and owner ids) only, so it
// never touches the data itself; the result is one list of example indices per client.
class Partitioner {
 public:
  static constexpr char kRegistryKind[] = "partitioner";
  struct CreateArgs {};

  virtual ~Partitioner() = default;

  // REQUIRES: every label is in [0, input.num_classes).
  // Every returned index is in [0, input.labels.size()) and appears at most once.
  // An impossible request (more clients than examples, ...) is an InvalidArgument.
  virtual absl::StatusOr<std::vector<std::vector<int64_t>>> Partition(
      const PartitionInput& input, int num_clients, std::mt19937_64& rng) const = 0;
};

}  // namespace fl

#endif  // FL_PARTITIONER_H_
