#include "fl/index_files.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <google/protobuf/util/json_util.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace fl {
namespace {

// Protobuf's JSON parser, strict: a misspelt field is an error, not ignored.
absl::Status ParseJson(absl::string_view json, const std::string& path, absl::string_view what,
                       google::protobuf::Message& message) {
  const google::protobuf::util::Status status = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(json.data(), json.size()), &message);
  if (!status.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a ", what, ": ", status.message().ToString()));
  }
  return absl::OkStatus();
}

}  // namespace

std::string ResolveUserPath(const std::string& path) {
  if (path.empty() || std::filesystem::path(path).is_absolute()) return path;
  const char* user_dir = std::getenv("BUILD_WORKING_DIRECTORY");
  return user_dir == nullptr ? path : (std::filesystem::path(user_dir) / path).string();
}

absl::StatusOr<std::string> ReadTextFile(const std::string& path, absl::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("cannot read ", what, " ", path, ": ",
                                            std::strerror(errno)));
  }
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

absl::StatusOr<fedkit::PartitionFile> ParsePartitionFile(absl::string_view json,
                                                         const std::string& path) {
  fedkit::PartitionFile file;
  if (absl::Status status = ParseJson(json, path, "partition file", file); !status.ok()) {
    return status;
  }
  return file;
}

absl::StatusOr<std::vector<std::vector<int64_t>>> PartitionFromFile(
    const fedkit::PartitionFile& file, const std::string& path, int64_t num_examples,
    int num_clients) {
  if (file.num_examples() != num_examples) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": num_examples is ", file.num_examples(),
                                                   ", but the training set has ", num_examples,
                                                   " examples"));
  }
  if (file.clients_size() != num_clients) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", file.clients_size(),
                                                   " clients, but partition.num_clients is ",
                                                   num_clients));
  }
  // owner[i] = the client holding example i, or -1.
  std::vector<int> owner(num_examples, -1);
  std::vector<std::vector<int64_t>> shares(num_clients);
  for (int k = 0; k < num_clients; ++k) {
    const auto& indices = file.clients(k).indices();
    if (indices.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": client ", k, " has no examples"));
    }
    for (int64_t i : indices) {
      if (i < 0 || i >= num_examples) {
        return absl::InvalidArgumentError(absl::StrCat(path, ": client ", k, ": index ", i,
                                                       " is outside [0, ", num_examples, ")"));
      }
      if (owner[i] >= 0) {
        return absl::InvalidArgumentError(
            owner[i] == k
                ? absl::StrCat(path, ": client ", k, ": index ", i, " appears twice")
                : absl::StrCat(path, ": client ", k, ": index ", i, " is also client ",
                               owner[i], "'s"));
      }
      owner[i] = k;
    }
    shares[k].assign(indices.begin(), indices.end());
  }
  return shares;
}

std::string PartitionFileJson(int64_t num_examples,
                              const std::vector<std::vector<int64_t>>& shares) {
  std::string json = absl::StrCat("{\"num_examples\": ", num_examples, ", \"clients\": [\n");
  for (size_t k = 0; k < shares.size(); ++k) {
    absl::StrAppend(&json, "{\"indices\": [", absl::StrJoin(shares[k], ", "), "]}",
                    k + 1 < shares.size() ? ",\n" : "\n");
  }
  json += "]}\n";
  return json;
}

absl::StatusOr<std::vector<int64_t>> ParseProxyFile(absl::string_view json,
                                                    const std::string& path, int64_t split_size,
                                                    absl::string_view split) {
  fedkit::ProxyFile file;
  if (absl::Status status = ParseJson(json, path, "proxy file", file); !status.ok()) {
    return status;
  }
  if (file.indices().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": no indices"));
  }
  std::vector<bool> taken(split_size, false);
  for (int64_t i : file.indices()) {
    if (i < 0 || i >= split_size) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": index ", i, " is outside [0, ",
                                                     split_size, "), the ", split,
                                                     " split's size"));
    }
    if (taken[i]) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": index ", i, " appears twice"));
    }
    taken[i] = true;
  }
  return std::vector<int64_t>(file.indices().begin(), file.indices().end());
}

std::string ProxyFileJson(const std::vector<int64_t>& indices) {
  return absl::StrCat("{\"indices\": [", absl::StrJoin(indices, ", "), "]}\n");
}

}  // namespace fl
