#include "data/idx_dataset.h"

#include <algorithm>
#include <vector>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "data/dataset_files.h"
#include "data/idx_reader.h"
#include "fl/status_macros.h"

namespace data {
namespace {

constexpr int64_t kSide = 28;

class IdxDataset : public fl::Dataset {
 public:
  explicit IdxDataset(IdxDatasetConfig config) : config_(std::move(config)) {}

  fl::DatasetInfo info() const override { return {{1, kSide, kSide}, config_.spec.num_classes}; }

  absl::Status CheckAvailable() const override { return Resolve().status(); }

  absl::StatusOr<fl::DatasetSplits> Load() const override {
    FL_ASSIGN_OR_RETURN(std::vector<std::string> paths, Resolve());
    IdxSplitSpec train = config_.spec;
    train.expected_size = config_.train_size;
    train.limit = config_.train_limit;
    IdxSplitSpec test = config_.spec;
    test.expected_size = config_.test_size;
    test.limit = config_.test_limit;
    fl::DatasetSplits splits;
    FL_ASSIGN_OR_RETURN(splits.train, LoadIdxSplit(paths[0], paths[1], train));
    FL_ASSIGN_OR_RETURN(splits.test, LoadIdxSplit(paths[2], paths[3], test));
    return splits;
  }

 private:
  absl::StatusOr<std::vector<std::string>> Resolve() const {
    return ResolveDatasetFiles(config_.name, config_.dir,
                               {config_.files.begin(), config_.files.end()}, /*gzip_ok=*/true,
                               config_.missing_hint);
  }

  IdxDatasetConfig config_;
};

}  // namespace

absl::StatusOr<fl::Examples> LoadIdxSplit(const std::string& images_path,
                                          const std::string& labels_path,
                                          const IdxSplitSpec& spec) {
  FL_ASSIGN_OR_RETURN(IdxArray images, ReadIdx(images_path));
  FL_ASSIGN_OR_RETURN(IdxArray labels, ReadIdx(labels_path));
  const int64_t n = images.dims.empty() ? 0 : images.dims[0];
  if (images.dims.size() != 3 || images.dims[1] != kSide || images.dims[2] != kSide ||
      (spec.expected_size > 0 && n != spec.expected_size)) {
    return absl::InvalidArgumentError(
        absl::StrCat(images_path, ": expected ",
                     spec.expected_size > 0 ? absl::StrCat(spec.expected_size, " ") : "",
                     "images of 28x28, got dims ", absl::StrJoin(images.dims, "x")));
  }
  if (labels.dims.size() != 1 || labels.dims[0] != n) {
    return absl::InvalidArgumentError(
        absl::StrCat(labels_path, ": expected ", n, " labels (one per image in ", images_path,
                     "), got dims ", absl::StrJoin(labels.dims, "x")));
  }
  for (int64_t i = 0; i < n; ++i) {
    const int64_t label = labels.values[i];
    if (label < spec.first_label || label >= spec.first_label + spec.num_classes) {
      return absl::InvalidArgumentError(absl::StrCat(labels_path, ": label ", label, " at index ",
                                                     i, " out of [", spec.first_label, ", ",
                                                     spec.first_label + spec.num_classes - 1, "]"));
    }
  }
  const int64_t kept = spec.limit > 0 ? std::min(spec.limit, n) : n;
  at::Tensor bytes = at::from_blob(images.values.data(), {kept, 1, kSide, kSide}, at::kByte);
  if (spec.transposed) bytes = bytes.transpose(2, 3);
  at::Tensor x = BytesToInputs(bytes.contiguous(), spec.stats, spec.normalize);
  at::Tensor y = at::from_blob(labels.values.data(), {kept}, at::kByte).to(at::kLong);
  if (spec.first_label != 0) y.sub_(spec.first_label);
  return fl::Examples{x, y};
}

std::unique_ptr<fl::Dataset> MakeIdxDataset(IdxDatasetConfig config) {
  return std::make_unique<IdxDataset>(std::move(config));
}

}  // namespace data
