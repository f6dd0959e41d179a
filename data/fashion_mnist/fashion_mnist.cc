// Fashion-MNIST (Xiao, Rasul & Vollgraf 2017): 70,000 28x28 grey images of 10
// clothing classes, 60,000 for training and 10,000 for test, in IDX files. Debian's
// `dataset-fashion-mnist` installs them (tools/setup.sh does).
//
// Inputs are float32 of shape {1, 28, 28}, scaled to [0, 1] and normalised with the
// training set's mean 0.2860 and standard deviation 0.3530.
//
//   dataset {
//     name: "fashion_mnist"
//     options { [type.googleapis.com/fedkit.data.FashionMnistOptions] { train_limit: 6000 } }
//   }

#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "data/fashion_mnist/fashion_mnist_options.pb.h"
#include "data/idx_reader.h"
#include "fl/dataset.h"
#include "fl/errors.h"
#include "fl/registry.h"
#include "fl/status_macros.h"

namespace data {
namespace {

constexpr char kDefaultDir[] = "/usr/share/datasets/fashion-mnist";
constexpr float kMean = 0.2860f;
constexpr float kStd = 0.3530f;
constexpr int64_t kSide = 28;
constexpr int64_t kTrainSize = 60000;
constexpr int64_t kTestSize = 10000;

class FashionMnist : public fl::Dataset {
 public:
  explicit FashionMnist(const fedkit::data::FashionMnistOptions& options)
      : dir_(options.dir().empty() ? kDefaultDir : options.dir()),
        train_limit_(options.train_limit()),
        test_limit_(options.test_limit()) {}

  fl::DatasetInfo info() const override { return {{1, kSide, kSide}, 10}; }

  absl::Status CheckAvailable() const override {
    std::vector<std::string> missing;
    for (const char* base : {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                             "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"}) {
      if (Resolve(base).empty()) missing.push_back(absl::StrCat(dir_, "/", base, "[.gz]"));
    }
    if (missing.empty()) return absl::OkStatus();
    return absl::NotFoundError(absl::StrCat(
        "dataset (fashion_mnist): missing ", absl::StrJoin(missing, ", "),
        ". Install Debian's dataset-fashion-mnist (tools/setup.sh does) or set "
        "options.dir to a folder holding the four IDX files"));
  }

  absl::StatusOr<fl::DatasetSplits> Load() const override {
    fl::DatasetSplits splits;
    FL_ASSIGN_OR_RETURN(splits.train, LoadSplit("train", kTrainSize, train_limit_));
    FL_ASSIGN_OR_RETURN(splits.test, LoadSplit("t10k", kTestSize, test_limit_));
    return splits;
  }

 private:
  // The path of `base` with or without .gz; empty when neither exists.
  std::string Resolve(const std::string& base) const {
    for (const std::string& path : {absl::StrCat(dir_, "/", base, ".gz"), absl::StrCat(dir_, "/", base)}) {
      if (FILE* f = std::fopen(path.c_str(), "rb")) {
        std::fclose(f);
        return path;
      }
    }
    return "";
  }

  absl::StatusOr<fl::Examples> LoadSplit(const std::string& prefix, int64_t expected,
                                         int64_t limit) const {
    FL_RETURN_IF_ERROR(CheckAvailable());
    const std::string images_path = Resolve(prefix + "-images-idx3-ubyte");
    const std::string labels_path = Resolve(prefix + "-labels-idx1-ubyte");
    FL_ASSIGN_OR_RETURN(IdxArray images, ReadIdx(images_path));
    FL_ASSIGN_OR_RETURN(IdxArray labels, ReadIdx(labels_path));
    if (images.dims != std::vector<int64_t>{expected, kSide, kSide}) {
      return absl::InvalidArgumentError(absl::StrCat(
          images_path, ": expected ", expected, " images of 28x28, got dims ",
          absl::StrJoin(images.dims, "x")));
    }
    if (labels.dims != std::vector<int64_t>{expected}) {
      return absl::InvalidArgumentError(absl::StrCat(labels_path, ": expected ", expected,
                                                     " labels, got dims ",
                                                     absl::StrJoin(labels.dims, "x")));
    }
    const int64_t n = limit > 0 ? std::min(limit, expected) : expected;
    at::Tensor x = at::from_blob(images.values.data(), {n, 1, kSide, kSide}, at::kByte)
                       .to(at::kFloat)
                       .div_(255.0f)
                       .sub_(kMean)
                       .div_(kStd);
    at::Tensor y = at::from_blob(labels.values.data(), {n}, at::kByte).to(at::kLong);
    if (y.max().item<int64_t>() > 9) {
      return absl::InvalidArgumentError(absl::StrCat(labels_path, ": label ",
                                                     y.max().item<int64_t>(), " out of [0, 9]"));
    }
    return fl::Examples{x, y};
  }

  std::string dir_;
  int64_t train_limit_;
  int64_t test_limit_;
};

absl::StatusOr<std::unique_ptr<fl::Dataset>> CreateFashionMnist(
    const fedkit::data::FashionMnistOptions& options, const fl::Dataset::CreateArgs&) {
  fl::ErrorList errors;
  if (options.train_limit() < 0) {
    errors.Add("options.train_limit", absl::StrCat("must be >= 0, got ", options.train_limit()));
  }
  if (options.test_limit() < 0) {
    errors.Add("options.test_limit", absl::StrCat("must be >= 0, got ", options.test_limit()));
  }
  FL_RETURN_IF_ERROR(errors.ToStatus());
  return std::make_unique<FashionMnist>(options);
}

FL_REGISTER_PLUGIN(fl::Dataset, "fashion_mnist", fedkit::data::FashionMnistOptions,
                   CreateFashionMnist);

}  // namespace
}  // namespace data
