// CIFAR-10 (Krizhevsky 2009, "Learning Multiple Layers of Features from Tiny
// Images"): 60,000 32x32 colour images of 10 classes, 50,000 for training (five
// batches) and 10,000 for test, read from the official binary version: records of 1
// label byte and 3072 image bytes (data/cifar_reader.h).
//
// Inputs are float32 {3, 32, 32}, scaled to [0, 1] and normalised per channel with
// mean (0.4914, 0.4822, 0.4465) and std (0.2470, 0.2435, 0.2616)
// (data/normalization.h) unless options.normalize is false.
//
//   dataset {
//     name: "cifar10"
//     options {
//       [type.googleapis.com/fedkit.data.Cifar10Options] { dir: "/data/cifar-10-batches-bin" }
//     }
//   }

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "data/cifar10/cifar10_options.pb.h"
#include "data/cifar_reader.h"
#include "data/dataset_files.h"
#include "data/normalization.h"
#include "fl/dataset.h"
#include "fl/errors.h"
#include "fl/registry.h"
#include "fl/status_macros.h"

namespace data {
namespace {

absl::StatusOr<std::unique_ptr<fl::Dataset>> CreateCifar10(
    const fedkit::data::Cifar10Options& options, const fl::Dataset::CreateArgs&) {
  fl::ErrorList errors;
  CheckExampleLimits(options.train_limit(), options.test_limit(), errors);
  FL_RETURN_IF_ERROR(errors.ToStatus());
  CifarDatasetConfig config;
  config.name = "cifar10";
  config.dir = options.dir().empty() ? DefaultDatasetDir("cifar-10-batches-bin") : options.dir();
  config.train_files = {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                        "data_batch_4.bin", "data_batch_5.bin"};
  config.test_files = {"test_batch.bin"};
  config.missing_hint = absl::StrCat(
      "Extract the CIFAR-10 binary version (cifar-10-binary.tar.gz) so that its "
      "cifar-10-batches-bin folder is ",
      config.dir, ", or set options.dir to that folder");
  config.format = {"CIFAR-10", {10}, 0};
  config.stats = kCifar10Stats;
  config.normalize = !options.has_normalize() || options.normalize();
  config.train_limit = options.train_limit();
  config.test_limit = options.test_limit();
  FL_ASSIGN_OR_RETURN(config.augmentation,
                      AugmentationFromOptions(options.augmentation(), "options.augmentation"));
  return MakeCifarDataset(std::move(config));
}

FL_REGISTER_PLUGIN(fl::Dataset, "cifar10", fedkit::data::Cifar10Options, CreateCifar10);

}  // namespace
}  // namespace data
