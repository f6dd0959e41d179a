#include "data/cifar_reader.h"

#include <algorithm>
#include <fstream>

#include <ATen/ATen.h>
#include <glog/logging.h>

#include "absl/strings/str_cat.h"
#include "data/dataset_files.h"
#include "fl/status_macros.h"

namespace data {
namespace {

absl::Status AppendFile(const std::string& path, const CifarFormat& format, CifarRecords& records) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in.good()) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
  const int64_t bytes = in.tellg();
  const int64_t record = format.record_bytes();
  if (bytes == 0 || bytes % record != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", bytes, " bytes is not a whole number of ", record, "-byte ",
                     format.name, " records (truncated, or not a ", format.name, " binary file)"));
  }
  std::vector<uint8_t> data(bytes);
  in.seekg(0);
  in.read(reinterpret_cast<char*>(data.data()), bytes);
  if (!in.good()) return absl::InvalidArgumentError(absl::StrCat(path, ": read error"));

  const int64_t n = bytes / record;
  const int64_t label_bytes = static_cast<int64_t>(format.label_classes.size());
  records.images.reserve(records.images.size() + n * kCifarImageBytes);
  records.labels.reserve(records.labels.size() + n);
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* r = data.data() + i * record;
    for (int64_t b = 0; b < label_bytes; ++b) {
      if (r[b] >= format.label_classes[b]) {
        return absl::InvalidArgumentError(absl::StrCat(path, ": record ", i, ": label byte ", b,
                                                       " is ", static_cast<int>(r[b]),
                                                       ", out of [0, ", format.label_classes[b] - 1,
                                                       "] (not a ", format.name, " binary file?)"));
      }
    }
    records.labels.push_back(r[format.label_index]);
    records.images.insert(records.images.end(), r + label_bytes, r + record);
  }
  return absl::OkStatus();
}

class CifarDataset : public fl::Dataset {
 public:
  explicit CifarDataset(CifarDatasetConfig config) : config_(std::move(config)) {}

  fl::DatasetInfo info() const override {
    return {{3, 32, 32},
            config_.format.label_classes[config_.format.label_index],
            config_.augmentation};
  }

  absl::Status CheckAvailable() const override { return Resolve().status(); }

  absl::StatusOr<fl::DatasetSplits> Load() const override {
    FL_ASSIGN_OR_RETURN(std::vector<std::string> paths, Resolve());
    const auto middle = paths.begin() + config_.train_files.size();
    fl::DatasetSplits splits;
    {
      FL_ASSIGN_OR_RETURN(CifarRecords train,
                          ReadCifarRecords({paths.begin(), middle}, config_.format));
      splits.train = CifarToExamples(train, config_.train_limit, config_.stats, config_.normalize);
    }
    FL_ASSIGN_OR_RETURN(CifarRecords test, ReadCifarRecords({middle, paths.end()}, config_.format));
    splits.test = CifarToExamples(test, config_.test_limit, config_.stats, config_.normalize);
    return splits;
  }

 private:
  absl::StatusOr<std::vector<std::string>> Resolve() const {
    std::vector<std::string> files = config_.train_files;
    files.insert(files.end(), config_.test_files.begin(), config_.test_files.end());
    return ResolveDatasetFiles(config_.name, config_.dir, files, /*gzip_ok=*/false,
                               config_.missing_hint);
  }

  CifarDatasetConfig config_;
};

}  // namespace

absl::StatusOr<CifarRecords> ReadCifarRecords(const std::vector<std::string>& paths,
                                              const CifarFormat& format) {
  CHECK_GE(format.label_index, 0);
  CHECK_LT(format.label_index, static_cast<int>(format.label_classes.size()));
  CifarRecords records;
  for (const std::string& path : paths) {
    absl::Status status = AppendFile(path, format, records);
    if (!status.ok()) return status;
  }
  return records;
}

fl::Examples CifarToExamples(const CifarRecords& records, int64_t limit, const ChannelStats& stats,
                             bool normalize) {
  const int64_t n = limit > 0 ? std::min(limit, records.size()) : records.size();
  // from_blob only borrows the bytes; both conversions below copy.
  auto* images = const_cast<uint8_t*>(records.images.data());
  auto* labels = const_cast<uint8_t*>(records.labels.data());
  at::Tensor x = BytesToInputs(at::from_blob(images, {n, 3, 32, 32}, at::kByte), stats, normalize);
  at::Tensor y = at::from_blob(labels, {n}, at::kByte).to(at::kLong);
  return fl::Examples{x, y};
}

absl::StatusOr<fl::ImageAugmentation> AugmentationFromOptions(
    const fedkit::data::ImageAugmentationOptions& options, const std::string& path) {
  if (options.crop_padding() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ".crop_padding: must be >= 0, got ", options.crop_padding()));
  }
  return fl::ImageAugmentation{options.crop_padding(), options.horizontal_flip(),
                               options.per_batch()};
}

std::unique_ptr<fl::Dataset> MakeCifarDataset(CifarDatasetConfig config) {
  CHECK_GE(config.format.label_index, 0);
  CHECK_LT(config.format.label_index, static_cast<int>(config.format.label_classes.size()));
  return std::make_unique<CifarDataset>(std::move(config));
}

}  // namespace data
