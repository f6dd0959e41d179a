// A split read from a file: exactly another run's (output { write_inputs: true }
// writes partition.json) or the official code's, so that two implementations can
// be compared on identical inputs (docs/identical-inputs.md). The seed plays no
// part. The file is read and parsed when the spec is validated, and checked against
// the training set (its size, partition.num_clients) when the run partitions it.
//
//   partition { name: "file" num_clients: 20
//     options { [type.googleapis.com/fedkit.data.FilePartitionOptions] {
//       path: "results/first_run/partition.json" } } }

#include <memory>

#include "absl/strings/str_cat.h"
#include "data/partitioners/file/file_options.pb.h"
#include "fl/index_files.h"
#include "fl/partitioner.h"
#include "fl/registry.h"

namespace data {
namespace {

class FilePartitioner : public fl::Partitioner {
 public:
  FilePartitioner(std::string path, fedkit::PartitionFile file)
      : path_(std::move(path)), file_(std::move(file)) {}

  absl::StatusOr<std::vector<std::vector<int64_t>>> Partition(
      const fl::PartitionInput& input, int num_clients, std::mt19937_64&) const override {
    return fl::PartitionFromFile(file_, path_, static_cast<int64_t>(input.labels.size()),
                                 num_clients);
  }

 private:
  const std::string path_;
  const fedkit::PartitionFile file_;
};

absl::StatusOr<std::unique_ptr<fl::Partitioner>> CreateFile(
    const fedkit::data::FilePartitionOptions& options, const fl::Partitioner::CreateArgs&) {
  if (options.path().empty()) {
    return absl::InvalidArgumentError("options.path: required (the partition file)");
  }
  const std::string path = fl::ResolveUserPath(options.path());
  absl::StatusOr<std::string> json = fl::ReadTextFile(path, "partition file");
  absl::StatusOr<fedkit::PartitionFile> file =
      json.ok() ? fl::ParsePartitionFile(*json, path) : json.status();
  if (!file.ok()) {
    return absl::Status(file.status().code(),
                        absl::StrCat("options.path: ", file.status().message()));
  }
  return std::make_unique<FilePartitioner>(path, *std::move(file));
}

FL_REGISTER_PLUGIN(fl::Partitioner, "file", fedkit::data::FilePartitionOptions, CreateFile);

}  // namespace
}  // namespace data
