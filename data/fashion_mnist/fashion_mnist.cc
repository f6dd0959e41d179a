// Fashion-MNIST (Xiao, Rasul & Vollgraf 2017): 70,000 28x28 grey images of 10
// clothing classes, 60,000 for training and 10,000 for test, in IDX files. Debian's
// `dataset-fashion-mnist` installs them (tools/setup.sh does).
//
// Inputs are float32 of shape {1, 28, 28}, scaled to [0, 1] and normalised with the
// training set's mean 0.2860 and standard deviation 0.3530 (data/normalization.h).
//
//   dataset {
//     name: "fashion_mnist"
//     options { [type.googleapis.com/fedkit.data.FashionMnistOptions] { train_limit: 6000 } }
//   }

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "data/fashion_mnist/fashion_mnist_options.pb.h"
#include "data/idx_dataset.h"
#include "data/normalization.h"
#include "data/dataset_files.h"
#include "fl/dataset.h"
#include "fl/errors.h"
#include "fl/registry.h"
#include "fl/status_macros.h"

namespace data {
namespace {

constexpr char kDefaultDir[] = "/usr/share/datasets/fashion-mnist";

absl::StatusOr<std::unique_ptr<fl::Dataset>> CreateFashionMnist(
    const fedkit::data::FashionMnistOptions& options, const fl::Dataset::CreateArgs&) {
  fl::ErrorList errors;
  CheckExampleLimits(options.train_limit(), options.test_limit(), errors);
  FL_RETURN_IF_ERROR(errors.ToStatus());
  IdxDatasetConfig config;
  config.name = "fashion_mnist";
  config.dir = options.dir().empty() ? kDefaultDir : options.dir();
  config.files = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                  "t10k-labels-idx1-ubyte"};
  config.missing_hint =
      "Install Debian's dataset-fashion-mnist (tools/setup.sh does) or set options.dir to a "
      "folder holding the four IDX files";
  config.spec.num_classes = 10;
  config.spec.stats = kFashionMnistStats;
  config.spec.normalize = !options.has_normalize() || options.normalize();
  if (options.dir().empty()) {  // Debian's files: the whole dataset, nothing less
    config.train_size = 60000;
    config.test_size = 10000;
  }
  config.train_limit = options.train_limit();
  config.test_limit = options.test_limit();
  return MakeIdxDataset(std::move(config));
}

FL_REGISTER_PLUGIN(fl::Dataset, "fashion_mnist", fedkit::data::FashionMnistOptions,
                   CreateFashionMnist);

}  // namespace
}  // namespace data
