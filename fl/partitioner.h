#ifndef FL_PARTITIONER_H_
#define FL_PARTITIONER_H_

#include <cstdint>
#include <random>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace fl {

// Splits a training set over clients. Works on labels only, so it never touches
// the data itself; the result is one list of example indices per client.
class Partitioner {
 public:
  static constexpr char kRegistryKind[] = "partitioner";
  struct CreateArgs {};

  virtual ~Partitioner() = default;

  // REQUIRES: every label is in [0, num_classes).
  // Every returned index is in [0, labels.size()) and appears at most once.
  // An impossible request (more clients than examples, ...) is an InvalidArgument.
  virtual absl::StatusOr<std::vector<std::vector<int64_t>>> Partition(
      absl::Span<const int64_t> labels, int64_t num_classes, int num_clients,
      std::mt19937_64& rng) const = 0;
};

}  // namespace fl

#endif  // FL_PARTITIONER_H_
