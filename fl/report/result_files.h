#ifndef FL_REPORT_RESULT_FILES_H_
#define FL_REPORT_RESULT_FILES_H_

// Reading what a run writes to its results folder (fl/metrics_sink.h): CSV files
// by column name, and numbers from summary.json. The run's report page and the
// sweep tool read them through here.

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fl::report {

// A CSV file without quoting (the runner's): a header and rows of as many cells.
struct CsvTable {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
};

// `source` names the file in errors. A row with another number of cells than the
// header is an error, and so is a file without a header.
absl::StatusOr<CsvTable> ParseCsv(absl::string_view text, absl::string_view source);

// Whether `table` has the column `name`.
bool HasColumn(const CsvTable& table, absl::string_view name);

// One value per row of `column`, in file order: NaN where the cell is empty (a
// diagnostic before its first appearance) or says nan. Errors: no such column, a
// cell that is not a number; both name the file (`source`).
absl::StatusOr<std::vector<double>> ColumnValues(const CsvTable& table, absl::string_view column,
                                                 absl::string_view source);

struct Point {
  int round = 0;
  double value = 0.0;
};
using Series = std::vector<Point>;

// The rows' (round, value) of `column`, in file order; empty and NaN cells are
// skipped. A round that is not a whole number is an error.
absl::StatusOr<Series> ColumnSeries(const CsvTable& table, absl::string_view column,
                                    absl::string_view source);

// The number summary.json holds under the top-level `key` ("wall_seconds",
// "peak_rss_mb"); empty when absent or not a number.
std::optional<double> SummaryNumber(absl::string_view json, absl::string_view key);

}  // namespace fl::report

#endif  // FL_REPORT_RESULT_FILES_H_
