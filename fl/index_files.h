#ifndef FL_INDEX_FILES_H_
#define FL_INDEX_FILES_H_

// Reading and writing the index files of fl/partition_file.proto: a split of the
// training set over clients (partition.json) and the server's proxy set
// (proxy.json). docs/identical-inputs.md describes both. Every error names the
// file, and where it applies the client and the offending index.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "fl/partition_file.pb.h"

namespace fl {

// A path from a spec: relative ones are relative to the folder `bazel run` was
// started in ($BUILD_WORKING_DIRECTORY), as output.dir is; without that variable
// (bazel test, a binary run directly) to the working directory.
std::string ResolveUserPath(const std::string& path);

// The file's text, or NotFound naming it ("cannot read <what> <path>: <reason>").
absl::StatusOr<std::string> ReadTextFile(const std::string& path, absl::string_view what);

// `json` parsed as a PartitionFile; `path` names it in errors.
absl::StatusOr<fedkit::PartitionFile> ParsePartitionFile(absl::string_view json,
                                                         const std::string& path);

// The clients' index lists of `file`, checked against the run: num_examples equal
// to the training set's, exactly `num_clients` clients, none empty, every index in
// [0, num_examples) and owned once.
absl::StatusOr<std::vector<std::vector<int64_t>>> PartitionFromFile(
    const fedkit::PartitionFile& file, const std::string& path, int64_t num_examples,
    int num_clients);

// The JSON of a PartitionFile, with plain numbers, one client per line.
std::string PartitionFileJson(int64_t num_examples,
                              const std::vector<std::vector<int64_t>>& shares);

// The indices of proxy file `json`, checked: at least one, each in
// [0, split_size) and none twice. `split` names the split in errors.
absl::StatusOr<std::vector<int64_t>> ParseProxyFile(absl::string_view json,
                                                    const std::string& path, int64_t split_size,
                                                    absl::string_view split);

// The JSON of a ProxyFile, with plain numbers.
std::string ProxyFileJson(const std::vector<int64_t>& indices);

}  // namespace fl

#endif  // FL_INDEX_FILES_H_
