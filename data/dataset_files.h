#ifndef DATA_DATASET_FILES_H_
#define DATA_DATASET_FILES_H_

// Where dataset files live. Datasets that no Debian package ships default to a
// folder under one data root:
//   $FEDKIT_DATA_DIR/<name> when FEDKIT_DATA_DIR is set,
//   else $HOME/.cache/fedkit/<name>
// (tools/setup.sh writes the MNIST subset to <root>/mnist). A plugin's `dir`
// option overrides it.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "fl/errors.h"

namespace data {

// True when `path` can be opened for reading.
bool FileExists(const std::string& path);

// The default folder of dataset `name` under the data root (see above).
std::string DefaultDatasetDir(const std::string& name);

// The path of each of `bases` in `dir` (each either plain or, when `gzip_ok`, with
// .gz added). NotFound listing every missing file, then `hint`:
//   dataset (mnist): missing /d/train-images-idx3-ubyte[.gz], /d/...[.gz]. <hint>
absl::StatusOr<std::vector<std::string>> ResolveDatasetFiles(const std::string& dataset,
                                                             const std::string& dir,
                                                             const std::vector<std::string>& bases,
                                                             bool gzip_ok, const std::string& hint);

// Adds "options.train_limit: must be >= 0, got -1" (and the same for test_limit)
// to `errors` for the train_limit/test_limit options the file datasets share.
void CheckExampleLimits(int64_t train_limit, int64_t test_limit, fl::ErrorList& errors);

}  // namespace data

#endif  // DATA_DATASET_FILES_H_
