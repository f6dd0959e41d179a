#include "fl/report/class_counts.h"

#include <numeric>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "fl/report/result_files.h"

namespace fl::report {

std::vector<std::vector<int64_t>> CountByClass(const std::vector<std::vector<int64_t>>& shares,
                                               absl::Span<const int64_t> labels,
                                               int64_t num_classes) {
  std::vector<std::vector<int64_t>> counts(shares.size(), std::vector<int64_t>(num_classes, 0));
  for (size_t k = 0; k < shares.size(); ++k) {
    for (int64_t i : shares[k]) ++counts[k][labels[i]];
  }
  return counts;
}

std::string CountsCsv(const std::vector<std::vector<int64_t>>& counts) {
  const size_t classes = counts.empty() ? 0 : counts[0].size();
  std::vector<size_t> ids(classes);
  std::iota(ids.begin(), ids.end(), 0);
  std::string csv = absl::StrCat("client,", absl::StrJoin(ids, ","), "\n");
  for (size_t k = 0; k < counts.size(); ++k) {
    absl::StrAppend(&csv, k, ",", absl::StrJoin(counts[k], ","), "\n");
  }
  return csv;
}

absl::StatusOr<ClassCounts> ParseClassCounts(absl::string_view text, absl::string_view source) {
  absl::StatusOr<CsvTable> table = ParseCsv(text, source);
  if (!table.ok()) return table.status();
  if (table->header[0] != "client") {
    return absl::InvalidArgumentError(absl::StrCat(source, ": the first column is \"",
                                                   table->header[0], "\", not \"client\""));
  }
  ClassCounts result;
  result.classes.assign(table->header.begin() + 1, table->header.end());
  for (size_t r = 0; r < table->rows.size(); ++r) {
    std::vector<int64_t>& counts = result.counts.emplace_back();
    for (size_t c = 1; c < table->header.size(); ++c) {
      int64_t count = 0;
      if (!absl::SimpleAtoi(table->rows[r][c], &count) || count < 0) {
        return absl::InvalidArgumentError(absl::StrCat(source, ": row ", r + 1, ", class ",
                                                       table->header[c], ": \"", table->rows[r][c],
                                                       "\" is not a count"));
      }
      counts.push_back(count);
    }
  }
  return result;
}

}  // namespace fl::report
