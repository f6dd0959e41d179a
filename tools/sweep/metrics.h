#ifndef TOOLS_SWEEP_METRICS_H_
#define TOOLS_SWEEP_METRICS_H_

// What a finished run's files say, and the sweep's metrics computed from them:
// metrics.csv and diagnostics.csv read by column name (fl/metrics_sink.h writes
// them; fl/report/result_files.h reads them), the numbers summary.json holds,
// FINAL, BEST, LAST_K_MEAN, ROUNDS_TO and
// SUM over a column's evaluated rounds, and a one-shot run's aggregates and
// client models from its one_shot.csv (fl/one_shot_report.h).

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "fl/report/result_files.h"
#include "tools/sweep/sweep.pb.h"

namespace sweep {

using Metric = fedkit::sweep::SweepSpec::Metric;

// The column of `header` that diagnostic `name` means: `name` itself, else the
// first ending in "/<name>" (aggregators may prefix theirs: "elastic/zeta_mean").
std::optional<std::string> FindDiagnosticColumn(const std::vector<std::string>& header,
                                                absl::string_view name);

// Sets what `metric` leaves unset to its documented default (sweep.proto): column,
// k (LAST_K_MEAN only), lower_is_better and label, so a filled metric still passes
// the sweep file's checks. The functions below expect a filled metric.
void FillDefaults(Metric& metric);

// A short name for runs.csv's header: final_test_accuracy, best_test_loss,
// last10_mean_test_accuracy, rounds_to_0.85_test_accuracy, sum_incomplete,
// one_shot_split_average_test_accuracy, one_shot_clients_min_test_accuracy.
std::string MetricName(const Metric& metric);

// Whether a column is shown as a percentage: its name contains "accuracy".
bool IsAccuracyColumn(absl::string_view column);

// The metrics.csv columns that measure how far a run has got, which a ROUNDS_TO
// metric's reached_at and the sweep's curve_x_column may name (fl/metrics_sink.h):
// the cumulative virtual_seconds, seconds, bytes_up and bytes_down, and the
// counters of the rows since the previous row, clients, rejected, incomplete and
// dropped, which count as their running sum.
bool IsProgressColumn(absl::string_view column);
// Whether `column` is one of those counters.
bool IsCounterColumn(absl::string_view column);
// Those columns, comma-separated, for error messages.
std::string ProgressColumnList();
// An axis's label for "round" or one of those columns: "round", "virtual
// seconds", "client updates (cumulative)", ...
std::string AxisLabel(absl::string_view column);
// Whether the axis of "round" or one of those columns counts whole things
// (rounds, updates, bytes) rather than seconds.
bool IsWholeNumberAxis(absl::string_view column);

// A progress column's (round, value) per row of metrics.csv, in file order; for
// a counter the running sum up to and including the row. Errors as ColumnSeries'.
absl::StatusOr<fl::report::Series> ProgressSeries(const fl::report::CsvTable& table,
                                                  absl::string_view column,
                                                  absl::string_view source);

struct MetricValue {
  // False when the run cannot give the metric (its series is empty): "n/a".
  bool available = false;
  // The value; for ROUNDS_TO the round (or reached_at's value), empty when the
  // target was not reached.
  std::optional<double> value;
};

// `metric` (filled) over the evaluated rounds of a run's column. A ROUNDS_TO
// metric with reached_at reads the value from `reached_at` (ProgressSeries of
// that column) at the round that reaches the target: not available without it,
// or when it has no value at that round.
MetricValue ComputeMetric(const Metric& metric, const fl::report::Series& series,
                          const fl::report::Series* reached_at = nullptr);

// Whether `metric` reads one_shot.csv (it sets one_shot_row or one_shot_clients).
bool IsOneShot(const Metric& metric);

// One-shot `metric` (filled) from a run's one_shot.csv, `source` naming it in
// errors: its column in the aggregate row labelled one_shot_row, or over the
// client rows. An empty or NaN cell there: not available. Errors: no such column
// or rows, a cell that is not a number.
absl::StatusOr<MetricValue> ComputeOneShotMetric(const Metric& metric,
                                                 const fl::report::CsvTable& one_shot,
                                                 absl::string_view source);

// The line the sweep appends to a run's log when the run ends: how it ended and
// what its process cost, as JSON after the prefix.
inline constexpr char kLogTrailerPrefix[] = "[sweep] ";
std::string LogTrailer(const std::string& how, double wall_seconds, double max_rss_mb);

// Everything the reports use of one finished run.
struct RunData {
  std::vector<MetricValue> metrics;  // one per sweep metric, in order
  // The process's wall time from the log's trailer; for runs the sweep did not
  // start (no trailer), summary.json's wall_seconds (the rounds alone).
  std::optional<double> wall_seconds;
  // summary.json's peak_rss_mb, else the trailer's max_rss_mb (ru_maxrss).
  std::optional<double> peak_rss_mb;
  fl::report::Series curve;
  // The sweep's curve_x_column per evaluated round (ProgressSeries); empty when
  // it is the round. A run without that column has neither this nor `curve`.
  fl::report::Series curve_x;
  // Diagnostic name (as the sweep gives it) -> its series, for those the run has.
  std::map<std::string, fl::report::Series> diagnostics;
  // What could not be read, each naming the file.
  std::vector<std::string> problems;
};

// Reads the run folder `dir` (which holds summary.json) and its `log` for
// `spec`'s metrics (filled; from metrics.csv, or one_shot.csv for one-shot ones),
// curve column (against curve_x_column; empty means the round) and diagnostics.
RunData LoadRunData(const std::string& dir, const std::string& log,
                    const fedkit::sweep::SweepSpec& spec);

}  // namespace sweep

#endif  // TOOLS_SWEEP_METRICS_H_
