// EMNIST (Cohen, Afshar, Tapson & van Schaik 2017, "EMNIST: an extension of MNIST
// to handwritten letters"): 28x28 grey images of handwritten digits and letters
// from NIST Special Database 19, in six splits (byclass 62 classes, bymerge 47,
// balanced 47, letters 26, digits 10, mnist 10), as the IDX files of EMNIST's
// gzip.zip. FedExP's EMNIST runs use 62 classes (byclass).
//
// EMNIST stores each image transposed relative to MNIST; this reader transposes
// it back so characters are upright, as MNIST's are. The letters split stores
// labels 1..26; they are loaded as 0..25. Inputs are float32 {1, 28, 28}, scaled to
// [0, 1] and normalised with the split's training mean and std
// (data/normalization.h) unless options.normalize is false.
//
//   dataset {
//     name: "emnist"
//     options { [type.googleapis.com/fedkit.data.EmnistOptions] { split: BYCLASS } }
//   }

#include <memory>
#include <string>

#include <glog/logging.h>

#include "absl/strings/str_cat.h"
#include "data/dataset_files.h"
#include "data/emnist/emnist_options.pb.h"
#include "data/idx_dataset.h"
#include "data/normalization.h"
#include "fl/dataset.h"
#include "fl/errors.h"
#include "fl/registry.h"
#include "fl/status_macros.h"

namespace data {
namespace {

using fedkit::data::EmnistOptions;

struct SplitInfo {
  const char* name;  // as in the file names
  int64_t num_classes;
  int64_t first_label;
  ChannelStats stats;
};

SplitInfo InfoOf(EmnistOptions::Split split) {
  switch (split) {
    case EmnistOptions::BYCLASS:
      return {"byclass", 62, 0, kEmnistByclassStats};
    case EmnistOptions::BYMERGE:
      return {"bymerge", 47, 0, kEmnistBymergeStats};
    case EmnistOptions::BALANCED:
      return {"balanced", 47, 0, kEmnistBalancedStats};
    case EmnistOptions::LETTERS:
      return {"letters", 26, 1, kEmnistLettersStats};
    case EmnistOptions::DIGITS:
      return {"digits", 10, 0, kEmnistDigitsStats};
    case EmnistOptions::MNIST:
      return {"mnist", 10, 0, kEmnistMnistStats};
    default:
      LOG(FATAL) << "unvalidated EMNIST split " << split;
  }
}

absl::StatusOr<std::unique_ptr<fl::Dataset>> CreateEmnist(const EmnistOptions& options,
                                                          const fl::Dataset::CreateArgs&) {
  fl::ErrorList errors;
  if (options.split() == EmnistOptions::SPLIT_UNSPECIFIED) {
    errors.Add("options.split",
               "must be set: BYCLASS, BYMERGE, BALANCED, LETTERS, DIGITS or MNIST");
  }
  CheckExampleLimits(options.train_limit(), options.test_limit(), errors);
  FL_RETURN_IF_ERROR(errors.ToStatus());

  const SplitInfo split = InfoOf(options.split());
  const std::string prefix = absl::StrCat("emnist-", split.name, "-");
  IdxDatasetConfig config;
  config.name = "emnist";
  config.dir = options.dir().empty() ? DefaultDatasetDir("emnist") : options.dir();
  config.files = {prefix + "train-images-idx3-ubyte", prefix + "train-labels-idx1-ubyte",
                  prefix + "test-images-idx3-ubyte", prefix + "test-labels-idx1-ubyte"};
  config.missing_hint =
      absl::StrCat("Unzip the gzip/ folder of EMNIST's gzip.zip (NIST's IDX release) into ",
                   config.dir, ", or set options.dir to the folder holding them");
  config.spec.num_classes = split.num_classes;
  config.spec.first_label = split.first_label;
  config.spec.transposed = true;
  config.spec.stats = split.stats;
  config.spec.normalize = !options.has_normalize() || options.normalize();
  config.train_limit = options.train_limit();
  config.test_limit = options.test_limit();
  return MakeIdxDataset(std::move(config));
}

FL_REGISTER_PLUGIN(fl::Dataset, "emnist", EmnistOptions, CreateEmnist);

}  // namespace
}  // namespace data
