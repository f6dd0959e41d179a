#ifndef DATA_CIFAR_READER_H_
#define DATA_CIFAR_READER_H_

// The binary CIFAR format (CIFAR-10, CIFAR-100, and CINIC-10 converted to it):
// headerless files of fixed-size records, each some label bytes followed by one
// 32x32 RGB image as 1024 red, 1024 green, then 1024 blue bytes, rows top to
// bottom. CIFAR-10 records have 1 label byte (3073 bytes); CIFAR-100 records have
// 2, coarse then fine (3074 bytes).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/normalization.h"
#include "data/augmentation_options.pb.h"
#include "fl/dataset.h"

namespace data {

inline constexpr int64_t kCifarImageBytes = 3 * 32 * 32;

struct CifarFormat {
  // Names the format in messages, e.g. "CIFAR-10".
  std::string name;
  // The number of classes of each label byte, in record order: {10} for CIFAR-10,
  // {20, 100} for CIFAR-100 (coarse, fine). Every label byte is range-checked.
  std::vector<int64_t> label_classes;
  // Which label byte is the example's label.
  int label_index = 0;

  int64_t record_bytes() const {
    return static_cast<int64_t>(label_classes.size()) + kCifarImageBytes;
  }
};

struct CifarRecords {
  std::vector<uint8_t> images;  // size() * kCifarImageBytes, channel-major per image
  std::vector<uint8_t> labels;  // the selected label byte of each record
  int64_t size() const { return static_cast<int64_t>(labels.size()); }
};

// Reads the files in order and concatenates their records. NotFound for a missing
// file; InvalidArgument naming the file for an empty file, a size that is not a
// whole number of records (truncated, or another format) or a label out of range.
absl::StatusOr<CifarRecords> ReadCifarRecords(const std::vector<std::string>& paths,
                                              const CifarFormat& format);

// Examples with inputs {n, 3, 32, 32} from the first `limit` records (0 = all).
fl::Examples CifarToExamples(const CifarRecords& records, int64_t limit, const ChannelStats& stats,
                             bool normalize);

// A dataset of CIFAR-format files in one folder.
struct CifarDatasetConfig {
  std::string name;  // the registry name, for messages
  std::string dir;
  // File names in `dir`, concatenated in this order.
  std::vector<std::string> train_files;
  std::vector<std::string> test_files;
  // Ends the NotFound message when files are missing: where to get them.
  std::string missing_hint;
  CifarFormat format;
  ChannelStats stats;
  bool normalize = true;
  int64_t train_limit = 0;  // 0 = all
  int64_t test_limit = 0;
  fl::ImageAugmentation augmentation;
};

// The augmentation `options` ask for; errors name fields under `path`.
absl::StatusOr<fl::ImageAugmentation> AugmentationFromOptions(
    const fedkit::data::ImageAugmentationOptions& options, const std::string& path);

// info() is {3, 32, 32} inputs and the selected label byte's number of classes.
std::unique_ptr<fl::Dataset> MakeCifarDataset(CifarDatasetConfig config);

}  // namespace data

#endif  // DATA_CIFAR_READER_H_
