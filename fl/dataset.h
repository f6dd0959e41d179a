#ifndef FL_DATASET_H_
#define FL_DATASET_H_

// A dataset plugin turns its options into in-memory tensors. Data lives in memory
// once; clients hold index lists into it, never copies.

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace fl {

// Inputs and integer class labels, first dimension = examples.
struct Examples {
  at::Tensor x;
  at::Tensor y;
  int64_t size() const { return y.defined() ? y.size(0) : 0; }
};

// Random augmentation of training image batches {N, C, H, W}, drawn anew for every
// batch; the local trainer applies it to training batches only (fl/augmentation.h).
struct ImageAugmentation {
  // Crop H x W at a random offset from the image zero-padded by this on each side;
  // 0 = no crop.
  int64_t crop_padding = 0;
  // Mirror left-right with probability 1/2.
  bool horizontal_flip = false;
  // One crop offset and one flip for the whole batch (FedExP's official code),
  // rather than one per image.
  bool per_batch = false;
  bool enabled() const { return crop_padding > 0 || horizontal_flip; }
};

// What a model needs to know about the data before any of it is loaded.
struct DatasetInfo {
  std::vector<int64_t> input_shape;  // of one example, e.g. {1, 28, 28}
  int64_t num_classes = 0;
  ImageAugmentation train_augmentation;
};

struct DatasetSplits {
  Examples train;
  Examples test;
  // int64 owner id per training example (the natural split: LEAF users, writers),
  // aligned with train; undefined when the dataset has none.
  at::Tensor train_owners;
};

class Dataset {
 public:
  static constexpr char kRegistryKind[] = "dataset";
  struct CreateArgs {};

  virtual ~Dataset() = default;

  virtual DatasetInfo info() const = 0;
  // OK when every file the dataset needs is present; otherwise NotFound naming the
  // files and where they must go. Cheap: nothing is read.
  virtual absl::Status CheckAvailable() const = 0;
  // Reads and validates the data (CPU tensors, inputs float32 normalised, labels int64).
  virtual absl::StatusOr<DatasetSplits> Load() const = 0;
};

}  // namespace fl

#endif  // FL_DATASET_H_
