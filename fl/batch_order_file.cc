#include "fl/batch_order_file.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace fl {

absl::StatusOr<std::vector<std::vector<int64_t>>> ReadBatchOrders(
    const std::string& dir, int round, const std::string& name,
    const std::vector<int64_t>& examples) {
  const std::string path = absl::StrCat(dir, "/", round, "/", name, ".txt");
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("batch order file ", path, " cannot be read"));
  std::vector<int64_t> expected = examples;
  std::sort(expected.begin(), expected.end());
  std::vector<std::vector<int64_t>> orders;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::vector<int64_t> order;
    order.reserve(examples.size());
    for (absl::string_view token : absl::StrSplit(line, ' ', absl::SkipEmpty())) {
      int64_t value = 0;
      if (!absl::SimpleAtoi(token, &value)) {
        return absl::InvalidArgumentError(absl::StrCat(path, ", line ", orders.size() + 1,
                                                       ": \"", token, "\" is not an integer"));
      }
      order.push_back(value);
    }
    std::vector<int64_t> sorted = order;
    std::sort(sorted.begin(), sorted.end());
    if (sorted != expected) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ", line ", orders.size() + 1, ": ", order.size(),
          " indices that are not a permutation of the ", examples.size(), " expected"));
    }
    orders.push_back(std::move(order));
  }
  if (orders.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": no order in it"));
  return orders;
}

absl::Status CheckBatchOrderRecordFolder(const std::string& dir) {
  if (dir.empty() || !std::filesystem::exists(dir)) return absl::OkStatus();
  std::error_code error;
  if (!std::filesystem::is_directory(dir) || !std::filesystem::is_empty(dir, error)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", dir, "\" must be a new or empty folder: recorded orders are appended to its files"));
  }
  return absl::OkStatus();
}

absl::Status AppendBatchOrder(const std::string& dir, int round, const std::string& name,
                              const std::vector<int64_t>& order) {
  const std::string folder = absl::StrCat(dir, "/", round);
  std::error_code error;
  std::filesystem::create_directories(folder, error);
  // Another writer may have created it meanwhile: only a missing folder is an error.
  if (!std::filesystem::is_directory(folder)) {
    return absl::PermissionDeniedError(absl::StrCat("batch order folder ", folder,
                                                    " cannot be created: ", error.message()));
  }
  const std::string path = absl::StrCat(folder, "/", name, ".txt");
  std::ofstream out(path, std::ios::app);
  out << absl::StrJoin(order, " ") << '\n';
  out.flush();
  if (!out) return absl::DataLossError(absl::StrCat("batch order file ", path, " cannot be written"));
  return absl::OkStatus();
}

}  // namespace fl
