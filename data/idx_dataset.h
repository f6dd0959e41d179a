#ifndef DATA_IDX_DATASET_H_
#define DATA_IDX_DATASET_H_

// One split of an IDX image dataset (MNIST, Fashion-MNIST, EMNIST): an images file
// of N 28x28 bytes and a labels file of N bytes, gzip-compressed or plain, turned
// into fl::Examples with inputs {N, 1, 28, 28}.

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "data/normalization.h"
#include "fl/dataset.h"

namespace data {

struct IdxSplitSpec {
  // The number of examples the files must hold; 0 accepts any number.
  int64_t expected_size = 0;
  int64_t num_classes = 10;
  // The label stored for class 0 (EMNIST letters stores 1..26); labels become
  // stored - first_label.
  int64_t first_label = 0;
  // EMNIST stores each image transposed (column-major); transposing it back makes
  // digits upright.
  bool transposed = false;
  // Keep only the first `limit` examples; 0 keeps all.
  int64_t limit = 0;
  ChannelStats stats = kMnistStats;
  bool normalize = true;
};

// NotFound or InvalidArgument naming the file for a missing, truncated or
// wrong-format file, a count that disagrees between the files or with
// `expected_size`, or a label out of range.
absl::StatusOr<fl::Examples> LoadIdxSplit(const std::string& images_path,
                                          const std::string& labels_path, const IdxSplitSpec& spec);

// A dataset of four IDX files in one folder, each gzip-compressed or plain.
struct IdxDatasetConfig {
  std::string name;  // the registry name, for messages
  std::string dir;
  // Base names without .gz: train images, train labels, test images, test labels.
  std::array<std::string, 4> files;
  // Ends the NotFound message when files are missing: where to get them.
  std::string missing_hint;
  // Shared by both splits; its expected_size and limit are replaced by these:
  IdxSplitSpec spec;
  int64_t train_size = 0;  // expected sizes, 0 = any
  int64_t test_size = 0;
  int64_t train_limit = 0;  // 0 = all
  int64_t test_limit = 0;
};

// info() is {1, 28, 28} inputs and spec.num_classes classes.
std::unique_ptr<fl::Dataset> MakeIdxDataset(IdxDatasetConfig config);

}  // namespace data

#endif  // DATA_IDX_DATASET_H_
