// CIFAR-100 (Krizhevsky 2009, "Learning Multiple Layers of Features from Tiny
// Images"): 60,000 32x32 colour images of 100 fine classes grouped into 20 coarse
// superclasses, 50,000 for training and 10,000 for test, read from the official
// binary version: records of a coarse label byte, a fine label byte and 3072 image
// bytes (data/cifar_reader.h). Labels are the fine ones unless
// options.coarse_labels.
//
// Inputs are float32 {3, 32, 32}, scaled to [0, 1] and normalised per channel with
// mean (0.5071, 0.4865, 0.4409) and std (0.2673, 0.2564, 0.2762)
// (data/normalization.h) unless options.normalize is false.
//
//   dataset {
//     name: "cifar100"
//     options {
//       [type.googleapis.com/fedkit.data.Cifar100Options] { dir: "/data/cifar-100-binary" }
//     }
//   }

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "data/cifar100/cifar100_options.pb.h"
#include "data/cifar_reader.h"
#include "data/dataset_files.h"
#include "data/normalization.h"
#include "fl/dataset.h"
#include "fl/errors.h"
#include "fl/registry.h"
#include "fl/status_macros.h"

namespace data {
namespace {

absl::StatusOr<std::unique_ptr<fl::Dataset>> CreateCifar100(
    const fedkit::data::Cifar100Options& options, const fl::Dataset::CreateArgs&) {
  fl::ErrorList errors;
  CheckExampleLimits(options.train_limit(), options.test_limit(), errors);
  FL_RETURN_IF_ERROR(errors.ToStatus());
  CifarDatasetConfig config;
  config.name = "cifar100";
  config.dir = options.dir().empty() ? DefaultDatasetDir("cifar-100-binary") : options.dir();
  config.train_files = {"train.bin"};
  config.test_files = {"test.bin"};
  config.missing_hint = absl::StrCat(
      "Extract the CIFAR-100 binary version (cifar-100-binary.tar.gz) so that its "
      "cifar-100-binary folder is ",
      config.dir, ", or set options.dir to that folder");
  // Record label bytes: coarse (20 classes), then fine (100).
  config.format = {"CIFAR-100", {20, 100}, options.coarse_labels() ? 0 : 1};
  config.stats = kCifar100Stats;
  config.normalize = !options.has_normalize() || options.normalize();
  config.train_limit = options.train_limit();
  config.test_limit = options.test_limit();
  FL_ASSIGN_OR_RETURN(config.augmentation,
                      AugmentationFromOptions(options.augmentation(), "options.augmentation"));
  return MakeCifarDataset(std::move(config));
}

FL_REGISTER_PLUGIN(fl::Dataset, "cifar100", fedkit::data::Cifar100Options, CreateCifar100);

}  // namespace
}  // namespace data
