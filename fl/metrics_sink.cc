#include "fl/metrics_sink.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "fl/atomic_file.h"
#include "fl/process_stats.h"
#include "fl/spec_loader.h"
#include "fl/status_macros.h"

namespace fl {
namespace {

std::string Number(double v) { return absl::StrFormat("%.6g", v); }

// The trailing columns of a metrics row: diagnostics and rejection counters.
std::map<std::string, double> ColumnsOf(const MetricsRow& row) {
  std::map<std::string, double> columns = row.diagnostics;
  columns.insert(row.client_accuracy.begin(), row.client_accuracy.end());
  for (const auto& [reason, count] : row.rejected_by_reason) {
    columns["rejected_" + reason] = count;
  }
  return columns;
}

// Markdown shows a block indented by four spaces verbatim.
std::string IndentedAsCode(const std::string& text) {
  std::string indented;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    absl::StrAppend(&indented, "    ", line, "\n");
  }
  return indented;
}

}  // namespace

CsvLog::CsvLog(std::string path, std::string header, std::string zero_prefix)
    : path_(std::move(path)), header_(std::move(header)), zero_prefix_(std::move(zero_prefix)) {}

absl::StatusOr<std::unique_ptr<MetricsSink>> MetricsSink::Open(
    const std::string& dir, const fedkit::ExperimentSpec& spec) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    return absl::UnavailableError(
        absl::StrCat("cannot create output directory ", dir, ": ", error.message()));
  }
  const std::string spec_text = SpecToText(spec);
  FL_RETURN_IF_ERROR(WriteFileAtomically(dir + "/spec.textproto", spec_text));
  std::unique_ptr<MetricsSink> sink(new MetricsSink(dir));
  if (!spec.output().has_tensorboard() || spec.output().tensorboard()) {
    FL_ASSIGN_OR_RETURN(sink->events_, tensorboard::EventWriter::Create(dir));
    FL_RETURN_IF_ERROR(sink->events_->AddText(0, "spec", IndentedAsCode(spec_text)));
  }
  return sink;
}

absl::Status CsvLog::Add(std::string leading_cells,
                         const std::map<std::string, double>& diagnostics) {
  rows_.push_back({std::move(leading_cells), diagnostics});
  bool new_column = !out_.is_open();
  for (const auto& [name, value] : diagnostics) new_column |= columns_.insert(name).second;
  if (new_column) {
    // Rare (a diagnostic's first appearance): rewrite once under the wider header.
    out_.close();
    std::string csv = header_;
    for (const std::string& name : columns_) absl::StrAppend(&csv, ",", name);
    csv += "\n";
    for (const Row& row : rows_) absl::StrAppend(&csv, Line(row));
    FL_RETURN_IF_ERROR(WriteFileAtomically(path_, csv));
    out_.open(path_, std::ios::app);
  } else {
    out_ << Line(rows_.back());
  }
  // Flushed per row, so a killed run keeps every finished row.
  out_.flush();
  if (!out_.good()) return absl::UnavailableError(absl::StrCat("cannot append to ", path_));
  return absl::OkStatus();
}

std::string CsvLog::Line(const Row& row) const {
  std::string line = row.leading_cells;
  for (const std::string& name : columns_) {
    auto it = row.diagnostics.find(name);
    if (it != row.diagnostics.end()) {
      absl::StrAppend(&line, ",", Number(it->second));
    } else {
      const bool counter = !zero_prefix_.empty() && absl::StartsWith(name, zero_prefix_);
      absl::StrAppend(&line, counter ? ",0" : ",");
    }
  }
  return line + "\n";
}

absl::Status MetricsSink::AddRow(const MetricsRow& row) {
  rows_.push_back(row);
  if (events_ != nullptr) FL_RETURN_IF_ERROR(events_->AddScalars(row.round, ScalarsOf(row)));
  return metrics_.Add(
      absl::StrCat(row.round, ",", Number(row.test_accuracy), ",", Number(row.test_loss), ",",
                   Number(row.train_loss), ",", row.clients, ",", row.rejected, ",",
                   row.incomplete, ",", row.dropped, ",", row.bytes_up, ",", row.bytes_down, ",", absl::StrFormat("%.3f", row.seconds), ",",
                   absl::StrFormat("%.3f", row.virtual_seconds)),
      ColumnsOf(row));
}

std::map<std::string, double> MetricsSink::ScalarsOf(const MetricsRow& row) {
  std::map<std::string, double> scalars = {
      {"metrics/test_accuracy", row.test_accuracy},
      {"metrics/test_loss", row.test_loss},
      {"metrics/train_loss", row.train_loss},
      {"metrics/clients", row.clients},
      {"metrics/rejected", row.rejected},
      {"metrics/incomplete", row.incomplete},
      {"metrics/dropped", row.dropped},
      {"metrics/bytes_up", static_cast<double>(row.bytes_up)},
      {"metrics/bytes_down", static_cast<double>(row.bytes_down)},
      {"metrics/seconds", row.seconds},
      {"metrics/virtual_seconds", row.virtual_seconds}};
  for (const auto& [name, value] : row.client_accuracy) scalars["metrics/" + name] = value;
  // As in metrics.csv: a reason's counter from its first rejection on, 0 where
  // a row has none.
  for (const auto& [reason, count] : row.rejected_by_reason) rejection_reasons_.insert(reason);
  for (const std::string& reason : rejection_reasons_) {
    auto it = row.rejected_by_reason.find(reason);
    scalars["rejected/" + reason] = it == row.rejected_by_reason.end() ? 0 : it->second;
  }
  return scalars;
}

absl::Status MetricsSink::AddDiagnostics(int round,
                                         const std::map<std::string, double>& diagnostics) {
  if (diagnostics.empty()) return absl::OkStatus();
  diagnostic_rows_.push_back({round, diagnostics});
  if (events_ != nullptr) {
    std::map<std::string, double> scalars;
    for (const auto& [name, value] : diagnostics) scalars["diagnostics/" + name] = value;
    FL_RETURN_IF_ERROR(events_->AddScalars(round, scalars));
  }
  return diagnostics_.Add(absl::StrCat(round), diagnostics);
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
  std::string json = absl::StrCat(
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
      "  \"virtual_seconds\": ", absl::StrFormat("%.3f", final_row.virtual_seconds), ",\n",
      "  \"peak_rss_mb\": ", absl::StrFormat("%.1f", PeakRssBytes() / 1048576.0));
  for (const auto& [name, value] : extra_summary_) {
    absl::StrAppend(&json, ",\n  \"", name, "\": ", value);
  }
  return WriteFileAtomically(dir_ + "/summary.json", json + "\n}\n");
}

void MetricsSink::AddSummaryField(std::string name, std::string json) {
  extra_summary_.emplace_back(std::move(name), std::move(json));
}

absl::Status MetricsSink::WriteOutputFile(const std::string& name,
                                          const std::string& contents) const {
  return WriteFileAtomically(dir_ + "/" + name, contents);
}

}  // namespace fl
