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

struct MetricValue {
  // False when the run cannot give the metric (its series is empty): "n/a".
  bool available = false;
  // The value; for ROUNDS_TO the round, empty when the target was not reached.
  std::optional<double> value;
};

// `metric` (filled) over the evaluated rounds of a run's column.
MetricValue ComputeMetric(const Metric& metric, const fl::report::Series& series);

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
  // Diagnostic name (as the sweep gives it) -> its series, for those the run has.
  std::map<std::string, fl::report::Series> diagnostics;
  // What could not be read, each naming the file.
  std::vector<std::string> problems;
};

// Reads the run folder `dir` (which holds summary.json) and its `log` for
// `spec`'s metrics (filled; from metrics.csv, or one_shot.csv for one-shot ones),
// curve column and diagnostics.
RunData LoadRunData(const std::string& dir, const std::string& log,
                    const fedkit::sweep::SweepSpec& spec);

}  // namespace sweep

#endif  // TOOLS_SWEEP_METRICS_H_
