#include "tools/partition_stats.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tools {
namespace {

// "min M  median D  max X": the median of an even count is the mean of the middle two.
std::string MinMedianMax(std::vector<int64_t> values) {
  if (values.empty()) return "none";
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  const double median = n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2.0;
  return absl::StrFormat("min %d  median %g  max %d", values.front(), median, values.back());
}

}  // namespace

std::string SummaryText(const std::vector<std::vector<int64_t>>& counts, int max_class_columns) {
  std::vector<int64_t> sizes, held;
  for (const auto& row : counts) {
    sizes.push_back(std::accumulate(row.begin(), row.end(), int64_t{0}));
    held.push_back(std::count_if(row.begin(), row.end(), [](int64_t c) { return c > 0; }));
  }
  const int64_t total = std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
  std::string text = absl::StrFormat(
      "%d clients, %d examples\nclient sizes: %s  mean %.1f\nclasses per client: %s\n",
      counts.size(), total, MinMedianMax(sizes),
      counts.empty() ? 0.0 : static_cast<double>(total) / counts.size(), MinMedianMax(held));
  const size_t classes = counts.empty() ? 0 : counts[0].size();
  const bool per_class = classes <= static_cast<size_t>(max_class_columns);
  absl::StrAppendFormat(&text, "\n%6s %8s %7s", "client", "size", "classes");
  if (per_class) {
    absl::StrAppend(&text, "  |");
    for (size_t c = 0; c < classes; ++c) absl::StrAppendFormat(&text, " %6d", c);
  }
  absl::StrAppend(&text, "\n");
  for (size_t k = 0; k < counts.size(); ++k) {
    absl::StrAppendFormat(&text, "%6d %8d %7d", k, sizes[k], held[k]);
    if (per_class) {
      absl::StrAppend(&text, "  |");
      for (int64_t c : counts[k]) absl::StrAppendFormat(&text, " %6d", c);
    }
    absl::StrAppend(&text, "\n");
  }
  return text;
}

}  // namespace tools
