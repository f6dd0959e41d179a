#ifndef FL_METRICS_SINK_H_
#define FL_METRICS_SINK_H_

// Writes an experiment's results to its output folder:
//   spec.textproto  the resolved spec (after --set overrides), written first
//   metrics.csv     one row per evaluated round: round, test_accuracy, test_loss,
//                   train_loss, clients, rejected, incomplete, dropped, bytes_up,
//                   bytes_down, seconds, virtual_seconds,
//                   then, sorted by name, the aggregator's diagnostics, the
//                   per-client accuracy (client_acc_mean, client_acc_p10,
//                   client_acc_sd, client_acc_worst; server.client_evaluation)
//                   and a rejected_<reason> counter for every reason an update
//                   has been rejected for so far (0 where none)
//   summary.json    final and best test accuracy, mean over the last 10 evaluated
//                   rounds, wall seconds, rounds, the process's peak RSS, and the
//                   fields the runner adds (the thread budget under "threads")
//   diagnostics.csv  every round's aggregator diagnostics, evaluated or not
//                   (round, then one column per diagnostic), when there are any
//   events.out.tfevents.fedkit  (unless output.tensorboard is false) the same
//                   numbers for TensorBoard: metrics/<column> and
//                   rejected/<reason> per evaluated round, diagnostics/<name>
//                   per round, and the spec as text (fl/tensorboard/)
// bytes_up, bytes_down, seconds and virtual_seconds (the virtual clock's time,
// fl/system_model.h) are cumulative since the start; clients and
// rejected count the updates of every round since the previous row (so none is
// lost when eval_every > 1); the rest describe the row's round. Each row is
// appended and flushed as it comes; only a diagnostic's first appearance rewrites
// the file once, to give it a column.

#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "fl/spec.pb.h"
#include "fl/tensorboard/event_writer.h"

namespace fl {

// A CSV file of rows whose leading cells are fixed and whose trailing columns are
// diagnostics by name (sorted), appended to row by row.
class CsvLog {
 public:
  // `header`: the leading columns, comma-separated. Trailing columns whose name
  // starts with `zero_prefix` (when not empty) are counters: 0 where a row lacks them.
  CsvLog(std::string path, std::string header, std::string zero_prefix = "");

  absl::Status Add(std::string leading_cells, const std::map<std::string, double>& diagnostics);

 private:
  struct Row {
    std::string leading_cells;
    std::map<std::string, double> diagnostics;
  };
  std::string Line(const Row& row) const;

  std::string path_;
  std::string header_;
  std::string zero_prefix_;
  std::set<std::string> columns_;
  std::vector<Row> rows_;
  std::ofstream out_;
};

struct MetricsRow {
  int round = 0;
  double test_accuracy = 0.0;
  double test_loss = 0.0;
  double train_loss = 0.0;
  // Updates accepted and rejected in the rounds since the previous row; of the
  // cohort, those that completed fewer local steps than planned (accepted or left
  // out) and those that dropped out (completed none, sent nothing).
  int clients = 0;
  int rejected = 0;
  int incomplete = 0;
  int dropped = 0;
  int64_t bytes_up = 0;
  int64_t bytes_down = 0;
  double seconds = 0.0;
  double virtual_seconds = 0.0;
  // Local optimiser steps of the accepted updates, cumulative (summary.json only).
  int64_t local_steps = 0;
  // `rejected` by reason (see Server): a column rejected_<reason> each, from the
  // first rejection for that reason on.
  std::map<std::string, int> rejected_by_reason;
  std::map<std::string, double> diagnostics;
  // Per-client accuracy (server.client_evaluation): client_acc_mean, _sd, _p10
  // and _worst, columns of their own; empty when it is off.
  std::map<std::string, double> client_accuracy;
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
  // Adds "name": json (a JSON value) to summary.json.
  void AddSummaryField(std::string name, std::string json);
  // Writes `contents` to the file `name` in the output folder (atomically).
  absl::Status WriteOutputFile(const std::string& name, const std::string& contents) const;

  const std::vector<MetricsRow>& rows() const { return rows_; }
  struct DiagnosticsRow {
    int round = 0;
    std::map<std::string, double> values;
  };
  const std::vector<DiagnosticsRow>& diagnostic_rows() const { return diagnostic_rows_; }

 private:
  explicit MetricsSink(std::string dir)
      : dir_(dir),
        metrics_(dir + "/metrics.csv",
                 "round,test_accuracy,test_loss,train_loss,clients,rejected,incomplete,dropped,"
                 "bytes_up,bytes_down,seconds,virtual_seconds",
                 "rejected_"),
        diagnostics_(dir + "/diagnostics.csv", "round") {}

  // The row's TensorBoard scalars (its metrics.csv cells but the diagnostics,
  // which AddDiagnostics writes every round).
  std::map<std::string, double> ScalarsOf(const MetricsRow& row);

  std::string dir_;
  std::vector<MetricsRow> rows_;
  std::vector<DiagnosticsRow> diagnostic_rows_;
  CsvLog metrics_;
  CsvLog diagnostics_;
  std::vector<std::pair<std::string, std::string>> extra_summary_;  // name, JSON value
  std::unique_ptr<tensorboard::EventWriter> events_;                // null: not written
  std::set<std::string> rejection_reasons_;                          // seen so far
};

}  // namespace fl

#endif  // FL_METRICS_SINK_H_
