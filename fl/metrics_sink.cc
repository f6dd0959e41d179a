#include "fl/metrics_sink.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
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

absl::Status MetricsSink::AddRow(const MetricsRow& row) {
  rows_.push_back(row);
  std::set<std::string> diagnostic_names;
  for (const MetricsRow& r : rows_) {
    for (const auto& [name, value] : r.diagnostics) diagnostic_names.insert(name);
  }
  std::string csv = "round,test_accuracy,test_loss,train_loss,clients,rejected,bytes_up,"
                    "bytes_down,seconds";
  for (const std::string& name : diagnostic_names) absl::StrAppend(&csv, ",", name);
  csv += "\n";
  for (const MetricsRow& r : rows_) {
    absl::StrAppend(&csv, r.round, ",", Number(r.test_accuracy), ",", Number(r.test_loss), ",",
                    Number(r.train_loss), ",", r.clients, ",", r.rejected, ",", r.bytes_up, ",",
                    r.bytes_down, ",", absl::StrFormat("%.3f", r.seconds));
    for (const std::string& name : diagnostic_names) {
      auto it = r.diagnostics.find(name);
      absl::StrAppend(&csv, ",", it == r.diagnostics.end() ? "" : Number(it->second));
    }
    csv += "\n";
  }
  return WriteFile(dir_ + "/metrics.csv", csv);
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
      "  \"wall_seconds\": ", absl::StrFormat("%.3f", wall_seconds), "\n}\n");
  return WriteFile(dir_ + "/summary.json", json);
}

}  // namespace fl
