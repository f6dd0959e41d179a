#include "fl/metrics_sink.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "fl/process_stats.h"
#include "google/protobuf/text_format.h"

namespace fl {
namespace {

absl::Status WriteFile(const std::string& path, const std::string& contents) {
  const std::string temp = path + ".tmp";
  {
    std::ofstream out(temp, std::ios::trunc);
    out << contents;
    if (!out.good()) return absl::UnavailableError(absl::StrCat("cannot write ", temp));
  }
  // Rename, so a reader (or a crash) never sees a half-written file.
  std::error_code error;
  std::filesystem::rename(temp, path, error);
  if (error) return absl::UnavailableError(absl::StrCat("cannot write ", path, ": ", error.message()));
  return absl::OkStatus();
}

std::string Number(double v) { return absl::StrFormat("%.6g", v); }

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsSink>> MetricsSink::Open(
    const std::string& dir, const fedkit::ExperimentSpec& spec) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    return absl::UnavailableError(
        absl::StrCat("cannot create output directory ", dir, ": ", error.message()));
  }
  std::string text;
  google::protobuf::TextFormat::Printer printer;
  printer.SetExpandAny(true);
  printer.PrintToString(spec, &text);
  auto status = WriteFile(dir + "/spec.textproto", text);
  if (!status.ok()) return status;
  return std::unique_ptr<MetricsSink>(new MetricsSink(dir));
}

namespace {

// The sorted union of the diagnostics' names over `rows`.
template <typename Rows, typename GetDiagnostics>
std::set<std::string> DiagnosticNames(const Rows& rows, GetDiagnostics get) {
  std::set<std::string> names;
  for (const auto& r : rows) {
    for (const auto& [name, value] : get(r)) names.insert(name);
  }
  return names;
}

// ",v1,v2,..." for `names`, empty cells where a row lacks one.
std::string DiagnosticCells(const std::set<std::string>& names,
                            const std::map<std::string, double>& diagnostics) {
  std::string cells;
  for (const std::string& name : names) {
    auto it = diagnostics.find(name);
    absl::StrAppend(&cells, ",", it == diagnostics.end() ? "" : Number(it->second));
  }
  return cells;
}

}  // namespace

absl::Status MetricsSink::AddRow(const MetricsRow& row) {
  rows_.push_back(row);
  const std::set<std::string> diagnostic_names =
      DiagnosticNames(rows_, [](const MetricsRow& r) { return r.diagnostics; });
  std::string csv = "round,test_accuracy,test_loss,train_loss,clients,rejected,bytes_up,"
                    "bytes_down,seconds";
  for (const std::string& name : diagnostic_names) absl::StrAppend(&csv, ",", name);
  csv += "\n";
  for (const MetricsRow& r : rows_) {
    absl::StrAppend(&csv, r.round, ",", Number(r.test_accuracy), ",", Number(r.test_loss), ",",
                    Number(r.train_loss), ",", r.clients, ",", r.rejected, ",", r.bytes_up, ",",
                    r.bytes_down, ",", absl::StrFormat("%.3f", r.seconds),
                    DiagnosticCells(diagnostic_names, r.diagnostics), "\n");
  }
  return WriteFile(dir_ + "/metrics.csv", csv);
}

absl::Status MetricsSink::AddDiagnostics(int round,
                                         const std::map<std::string, double>& diagnostics) {
  if (diagnostics.empty()) return absl::OkStatus();
  diagnostics_.emplace_back(round, diagnostics);
  const std::set<std::string> names =
      DiagnosticNames(diagnostics_, [](const auto& r) { return r.second; });
  std::string csv = "round";
  for (const std::string& name : names) absl::StrAppend(&csv, ",", name);
  csv += "\n";
  for (const auto& [r, values] : diagnostics_) {
    absl::StrAppend(&csv, r, DiagnosticCells(names, values), "\n");
  }
  return WriteFile(dir_ + "/diagnostics.csv", csv);
}

absl::Status MetricsSink::WriteSummary(double wall_seconds, int rounds) const {
  if (rows_.empty()) return absl::FailedPreconditionError("no evaluated round to summarise");
  const MetricsRow* best = &rows_.front();
  for (const MetricsRow& r : rows_) {
    if (r.test_accuracy > best->test_accuracy) best = &r;
  }
  const size_t last_n = std::min<size_t>(10, rows_.size());
  double last_sum = 0.0;
  for (size_t i = rows_.size() - last_n; i < rows_.size(); ++i) last_sum += rows_[i].test_accuracy;
  const MetricsRow& final_row = rows_.back();
  const std::string json = absl::StrCat(
      "{\n", "  \"rounds\": ", rounds, ",\n",
      "  \"final_test_accuracy\": ", Number(final_row.test_accuracy), ",\n",
      "  \"final_test_loss\": ", Number(final_row.test_loss), ",\n",
      "  \"best_test_accuracy\": ", Number(best->test_accuracy), ",\n",
      "  \"best_round\": ", best->round, ",\n",
      "  \"mean_test_accuracy_last_10\": ", Number(last_sum / last_n), ",\n",
      "  \"bytes_up\": ", final_row.bytes_up, ",\n",
      "  \"bytes_down\": ", final_row.bytes_down, ",\n",
      "  \"local_steps\": ", final_row.local_steps, ",\n",
      "  \"wall_seconds\": ", absl::StrFormat("%.3f", wall_seconds), ",\n",
      "  \"peak_rss_mb\": ", absl::StrFormat("%.1f", PeakRssBytes() / 1048576.0), "\n}\n");
  return WriteFile(dir_ + "/summary.json", json);
}

}  // namespace fl
