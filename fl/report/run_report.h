#ifndef FL_REPORT_RUN_REPORT_H_
#define FL_REPORT_RUN_REPORT_H_

// report.html: one run's results on a page that opens anywhere, without a
// network or JavaScript (docs/report-pages.md). From the files of its results
// folder (fl/metrics_sink.h): the key numbers of summary.json, the accuracy and
// loss curves (accuracy against the virtual clock too, when the run's
// virtual_seconds moved), one chart per diagnostic, communication, timing (with
// the run's virtual time) and memory, the partition (class_counts.csv) as a
// heatmap, and the spec.

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace fl::report {

// The page of the results folder `run_dir`. spec.textproto and metrics.csv are
// required: an error names the one that is missing or unreadable (metrics.csv
// without round, test_accuracy or test_loss, or with a cell that is not a
// number). summary.json, diagnostics.csv and class_counts.csv are optional: the
// page says where one is missing or unreadable.
absl::StatusOr<std::string> RunReportHtml(const std::string& run_dir);

// Writes RunReportHtml(run_dir) to run_dir/report.html, atomically.
absl::Status WriteRunReport(const std::string& run_dir);

}  // namespace fl::report

#endif  // FL_REPORT_RUN_REPORT_H_
