// CINIC-10 (Darlow, Crowley, Antoniou & Storkey 2018, "CINIC-10 is not ImageNet or
// CIFAR-10"): 270,000 32x32 colour images of CIFAR-10's 10 classes (CIFAR-10 plus
// downsampled ImageNet), split equally into train, valid and test (90,000 each).
//
// The official release is PNG files (<split>/<class>/<name>.png), and the build has
// no image decoder, so this reader takes CINIC-10 converted once to the CIFAR-10
// binary record format (data/cifar_reader.h): options.dir holds train.bin,
// valid.bin and test.bin, each 90,000 records of 1 label byte (the class's index
// in CIFAR-10 order: airplane, automobile, bird, cat, deer, dog, frog, horse, ship,
// truck) and 3072 image bytes (red, green, blue planes, rows top to bottom), i.e.
// 276,570,000 bytes per file. This script (numpy and Pillow), run in the folder
// where CINIC-10.tar.gz was extracted (holding train/, valid/ and test/), writes
// them with the classes interleaved, so any prefix (a train_limit) has every class:
//
//   import os
//   import numpy as np
//   from PIL import Image
//   classes = ["airplane", "automobile", "bird", "cat", "deer",
//              "dog", "frog", "horse", "ship", "truck"]
//   for split in ["train", "valid", "test"]:
//       names = [sorted(os.listdir(os.path.join(split, c))) for c in classes]
//       with open(split + ".bin", "wb") as out:
//           for i in range(max(len(n) for n in names)):
//               for label, c in enumerate(classes):
//                   if i < len(names[label]):
//                       image = Image.open(os.path.join(split, c, names[label][i]))
//                       pixels = np.asarray(image.convert("RGB"), dtype=np.uint8)
//                       out.write(bytes([label]) + pixels.transpose(2, 0, 1).tobytes())
//
// (convert("RGB") matters: a few CINIC-10 images are greyscale.) Inputs are float32
// {3, 32, 32}, scaled to [0, 1] and normalised per channel with CINIC-10's mean
// (0.47889522, 0.47227842, 0.43047404) and std (0.24205776, 0.23828046, 0.25874835)
// (data/normalization.h) unless options.normalize is false.
//
//   dataset {
//     name: "cinic10"
//     options {
//       [type.googleapis.com/fedkit.data.Cinic10Options] { dir: "/data/cinic-10-bin" }
//     }
//   }

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "data/cifar_reader.h"
#include "data/cinic10/cinic10_options.pb.h"
#include "data/dataset_files.h"
#include "data/normalization.h"
#include "fl/dataset.h"
#include "fl/errors.h"
#include "fl/registry.h"
#include "fl/status_macros.h"

namespace data {
namespace {

absl::StatusOr<std::unique_ptr<fl::Dataset>> CreateCinic10(
    const fedkit::data::Cinic10Options& options, const fl::Dataset::CreateArgs&) {
  fl::ErrorList errors;
  CheckExampleLimits(options.train_limit(), options.test_limit(), errors);
  FL_RETURN_IF_ERROR(errors.ToStatus());
  CifarDatasetConfig config;
  config.name = "cinic10";
  config.dir = options.dir().empty() ? DefaultDatasetDir("cinic-10-bin") : options.dir();
  config.train_files = {"train.bin"};
  if (options.include_valid_in_train()) config.train_files.push_back("valid.bin");
  config.test_files = {"test.bin"};
  config.missing_hint = absl::StrCat(
      "Convert the CINIC-10 PNG release to CIFAR-10-format binaries (the script in "
      "data/cinic10/cinic10.cc) and put them in ",
      config.dir, ", or set options.dir to their folder");
  config.format = {"CINIC-10", {10}, 0};
  config.stats = kCinic10Stats;
  config.normalize = !options.has_normalize() || options.normalize();
  config.train_limit = options.train_limit();
  config.test_limit = options.test_limit();
  FL_ASSIGN_OR_RETURN(config.augmentation,
                      AugmentationFromOptions(options.augmentation(), "options.augmentation"));
  return MakeCifarDataset(std::move(config));
}

FL_REGISTER_PLUGIN(fl::Dataset, "cinic10", fedkit::data::Cinic10Options, CreateCinic10);

}  // namespace
}  // namespace data
