#ifndef FL_REPORT_CLASS_COUNTS_H_
#define FL_REPORT_CLASS_COUNTS_H_

// What each client of a partition holds, by class: counted from the shares,
// written as class_counts.csv (a run's output, tools/partition_counts' counts.csv)
// and read back for the report page's heatmap.
//
//   auto counts = fl::report::CountByClass(shares, labels, 10);
//   std::string csv = fl::report::CountsCsv(counts);  // client,0,1,...,9

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace fl::report {

// counts[k][c]: examples of class c held by client k.
// REQUIRES: every index in shares is < labels.size(), every label in [0, num_classes).
std::vector<std::vector<int64_t>> CountByClass(const std::vector<std::vector<int64_t>>& shares,
                                               absl::Span<const int64_t> labels,
                                               int64_t num_classes);

// Header `client,0,1,...,K-1`, then one row per client: its id and its counts.
std::string CountsCsv(const std::vector<std::vector<int64_t>>& counts);

struct ClassCounts {
  std::vector<std::string> classes;  // the header's class names
  std::vector<std::vector<int64_t>> counts;  // one row per client, in file order
};

// A CountsCsv file; `source` names it in errors: a first column other than
// "client", a count that is not a whole number >= 0.
absl::StatusOr<ClassCounts> ParseClassCounts(absl::string_view text, absl::string_view source);

}  // namespace fl::report

#endif  // FL_REPORT_CLASS_COUNTS_H_
