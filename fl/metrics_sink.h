#ifndef FL_METRICS_SINK_H_
#define FL_METRICS_SINK_H_

// Writes an experiment's results to its output folder:
//   spec.textproto  the resolved spec (after --set overrides), written first
//   metrics.csv     one row per evaluated round: round, test_accuracy, test_loss,
//                   train_loss, clients, rejected, bytes_up, bytes_down, seconds,
//                   then any aggregator diagnostics (sorted by name)
//   summary.json    final and best test accuracy, mean over the last 10 evaluated
//                   rounds, wall seconds, rounds, the process's peak RSS
//   diagnostics.csv  every round's aggregator diagnostics, evaluated or not
//                   (round, then one column per diagnostic), when there are any
// bytes_up, bytes_down and seconds are cumulative since the start; the others
// describe the row's round. The CSVs are rewritten whole after each row, so a
// diagnostic that first appears in a later round still gets its column.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "fl/spec.pb.h"

namespace fl {

struct MetricsRow {
  int round = 0;
  double test_accuracy = 0.0;
  double test_loss = 0.0;
  double train_loss = 0.0;
  int clients = 0;   // updates accepted this round
  int rejected = 0;  // updates rejected this round
  int64_t bytes_up = 0;
  int64_t bytes_down = 0;
  double seconds = 0.0;
  // Local optimiser steps of the accepted updates, cumulative (summary.json only).
  int64_t local_steps = 0;
  std::map<std::string, double> diagnostics;
};

class MetricsSink {
 public:
  // Creates `dir` (and parents) and writes spec.textproto.
  static absl::StatusOr<std::unique_ptr<MetricsSink>> Open(const std::string& dir,
                                                           const fedkit::ExperimentSpec& spec);

  absl::Status AddRow(const MetricsRow& row);
  // Records round `round`'s diagnostics in diagnostics.csv; nothing when empty.
  absl::Status AddDiagnostics(int round, const std::map<std::string, double>& diagnostics);
  absl::Status WriteSummary(double wall_seconds, int rounds) const;

  const std::vector<MetricsRow>& rows() const { return rows_; }

 private:
  explicit MetricsSink(std::string dir) : dir_(std::move(dir)) {}

  std::string dir_;
  std::vector<MetricsRow> rows_;
  std::vector<std::pair<int, std::map<std::string, double>>> diagnostics_;
};

}  // namespace fl

#endif  // FL_METRICS_SINK_H_
