#include "tools/sweep/metrics.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "fl/json.h"

namespace sweep {

using fl::report::ColumnSeries;
using fl::report::CsvTable;
using fl::report::ParseCsv;
using fl::report::Point;
using fl::report::Series;
using fl::report::SummaryNumber;

namespace {

constexpr char kDefaultColumn[] = "test_accuracy";
constexpr int kDefaultK = 10;

// The columns that measure a run's progress (IsProgressColumn), how an axis
// names them, and how a ROUNDS_TO label does ("virtual s to 80%").
struct ProgressColumn {
  const char* name;
  bool counter;  // counts the rows since the previous one: read as a running sum
  const char* axis_label;
  const char* reached_label;
};
constexpr ProgressColumn kProgressColumns[] = {
    {"virtual_seconds", false, "virtual seconds", "virtual s"},
    {"seconds", false, "seconds", "seconds"},
    {"bytes_up", false, "bytes up", "bytes up"},
    {"bytes_down", false, "bytes down", "bytes down"},
    {"clients", true, "client updates (cumulative)", "updates"},
    {"rejected", true, "rejected updates (cumulative)", "rejected"},
    {"incomplete", true, "incomplete updates (cumulative)", "incomplete"},
    {"dropped", true, "dropouts (cumulative)", "dropouts"},
};

const ProgressColumn* FindProgressColumn(absl::string_view column) {
  for (const ProgressColumn& progress : kProgressColumns) {
    if (column == progress.name) return &progress;
  }
  return nullptr;
}

std::optional<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool IsClientsMetric(const Metric& metric) {
  return metric.one_shot_clients() != Metric::ONE_SHOT_CLIENTS_UNSPECIFIED;
}

// "mean", "min" or "max".
std::string ClientsName(const Metric& metric) {
  return absl::AsciiStrToLower(Metric::OneShotClients_Name(metric.one_shot_clients()));
}

// `label` in lower case, each run of characters other than letters and digits one
// '_': "FedAvg (size-weighted)" -> "fedavg_size_weighted".
std::string LabelName(absl::string_view label) {
  std::string name;
  bool gap = false;
  for (char c : label) {
    if (!absl::ascii_isalnum(c)) {
      gap = true;
      continue;
    }
    if (gap && !name.empty()) name += '_';
    name += absl::ascii_tolower(c);
    gap = false;
  }
  return name;
}

// The default label's first part: what the metric takes of its column.
std::string KindLabel(const Metric& metric) {
  if (!metric.one_shot_row().empty()) return metric.one_shot_row();
  if (IsClientsMetric(metric)) return absl::StrCat("clients ", ClientsName(metric));
  switch (metric.kind()) {
    case Metric::FINAL:
      return "final";
    case Metric::BEST:
      return "best";
    case Metric::LAST_K_MEAN:
      return absl::StrCat("last ", metric.k(), " mean");
    case Metric::SUM:
      return "total";
    case Metric::ROUNDS_TO: {
      const ProgressColumn* at = FindProgressColumn(metric.reached_at());
      const std::string what = at != nullptr ? at->reached_label : "rounds";
      return IsAccuracyColumn(metric.column())
                 ? absl::StrFormat("%s to %g%%", what, 100 * metric.target())
                 : absl::StrFormat("%s to %g", what, metric.target());
    }
    default:
      return "?";
  }
}

// The one-shot metrics of `spec` from the run folder `dir`'s one_shot.csv.
void LoadOneShotMetrics(const std::string& dir, const fedkit::sweep::SweepSpec& spec,
                        RunData& data) {
  if (std::none_of(spec.metrics().begin(), spec.metrics().end(), IsOneShot)) return;
  const std::string path = dir + "/one_shot.csv";
  std::optional<std::string> text = ReadFile(path);
  if (!text.has_value()) {
    data.problems.push_back(absl::StrCat("cannot read ", path));
    return;
  }
  absl::StatusOr<CsvTable> table = ParseCsv(*text, path);
  if (!table.ok()) {
    data.problems.emplace_back(table.status().message());
    return;
  }
  for (int i = 0; i < spec.metrics_size(); ++i) {
    if (!IsOneShot(spec.metrics(i))) continue;
    absl::StatusOr<MetricValue> value = ComputeOneShotMetric(spec.metrics(i), *table, path);
    if (value.ok()) {
      data.metrics[i] = *value;
    } else {
      data.problems.emplace_back(value.status().message());
    }
  }
}

}  // namespace

std::optional<std::string> FindDiagnosticColumn(const std::vector<std::string>& header,
                                                absl::string_view name) {
  for (const std::string& column : header) {
    if (column == name) return column;
  }
  const std::string suffix = absl::StrCat("/", name);
  for (const std::string& column : header) {
    if (absl::EndsWith(column, suffix)) return column;
  }
  return std::nullopt;
}

void FillDefaults(Metric& metric) {
  if (metric.column().empty()) metric.set_column(kDefaultColumn);
  if (metric.kind() == Metric::LAST_K_MEAN && !metric.has_k()) metric.set_k(kDefaultK);
  if (!metric.has_lower_is_better()) {
    metric.set_lower_is_better(absl::EndsWith(metric.column(), "loss"));
  }
  if (!metric.label().empty()) return;
  std::string label = KindLabel(metric);
  if (metric.column() != kDefaultColumn) absl::StrAppend(&label, " ", metric.column());
  metric.set_label(label);
}

std::string MetricName(const Metric& metric) {
  if (!metric.one_shot_row().empty()) {
    return absl::StrCat("one_shot_", LabelName(metric.one_shot_row()), "_", metric.column());
  }
  if (IsClientsMetric(metric)) {
    return absl::StrCat("one_shot_clients_", ClientsName(metric), "_", metric.column());
  }
  switch (metric.kind()) {
    case Metric::FINAL:
      return absl::StrCat("final_", metric.column());
    case Metric::BEST:
      // A direction other than the column's usual one names itself, so that the
      // minimum and the maximum of one column are two metrics.
      if (metric.lower_is_better() != absl::EndsWith(metric.column(), "loss")) {
        return absl::StrCat(metric.lower_is_better() ? "min_" : "max_", metric.column());
      }
      return absl::StrCat("best_", metric.column());
    case Metric::LAST_K_MEAN:
      return absl::StrCat("last", metric.k(), "_mean_", metric.column());
    case Metric::ROUNDS_TO:
      return absl::StrCat(absl::StrFormat("rounds_to_%g_%s", metric.target(), metric.column()),
                          metric.reached_at().empty() ? "" : "_at_", metric.reached_at());
    case Metric::SUM:
      return absl::StrCat("sum_", metric.column());
    default:
      return metric.column();
  }
}

bool IsAccuracyColumn(absl::string_view column) { return absl::StrContains(column, "accuracy"); }

bool IsProgressColumn(absl::string_view column) { return FindProgressColumn(column) != nullptr; }

bool IsCounterColumn(absl::string_view column) {
  const ProgressColumn* progress = FindProgressColumn(column);
  return progress != nullptr && progress->counter;
}

std::string ProgressColumnList() {
  std::vector<std::string> names;
  for (const ProgressColumn& progress : kProgressColumns) names.push_back(progress.name);
  return absl::StrJoin(names, ", ");
}

std::string AxisLabel(absl::string_view column) {
  const ProgressColumn* progress = FindProgressColumn(column);
  return progress != nullptr ? progress->axis_label : std::string(column);
}

bool IsWholeNumberAxis(absl::string_view column) { return !absl::EndsWith(column, "seconds"); }

absl::StatusOr<Series> ProgressSeries(const CsvTable& table, absl::string_view column,
                                      absl::string_view source) {
  absl::StatusOr<Series> series = ColumnSeries(table, column, source);
  if (!series.ok() || !IsCounterColumn(column)) return series;
  double sum = 0.0;
  for (Point& point : *series) {
    sum += point.value;
    point.value = sum;
  }
  return series;
}

MetricValue ComputeMetric(const Metric& metric, const Series& series, const Series* reached_at) {
  MetricValue result;
  if (metric.kind() == Metric::ROUNDS_TO) {
    const bool at_column = !metric.reached_at().empty();
    if (at_column && reached_at == nullptr) return result;
    // A run with no evaluated round never reached the target either.
    result.available = true;
    for (const Point& point : series) {
      if (metric.lower_is_better() ? point.value <= metric.target()
                                   : point.value >= metric.target()) {
        result.value = point.round;
        break;
      }
    }
    if (at_column && result.value.has_value()) {
      const int round = static_cast<int>(*result.value);
      auto at = std::find_if(reached_at->begin(), reached_at->end(),
                             [&](const Point& point) { return point.round == round; });
      // The column has no value at that round (an empty or NaN cell).
      if (at == reached_at->end()) return MetricValue{};
      result.value = at->value;
    }
    return result;
  }
  if (series.empty()) return result;
  result.available = true;
  switch (metric.kind()) {
    case Metric::FINAL:
      result.value = series.back().value;
      break;
    case Metric::BEST: {
      const auto less = [](const Point& a, const Point& b) { return a.value < b.value; };
      result.value = metric.lower_is_better()
                         ? std::min_element(series.begin(), series.end(), less)->value
                         : std::max_element(series.begin(), series.end(), less)->value;
      break;
    }
    case Metric::LAST_K_MEAN: {
      const size_t count = std::min<size_t>(series.size(), metric.k());
      double sum = 0.0;
      for (size_t i = series.size() - count; i < series.size(); ++i) sum += series[i].value;
      result.value = sum / count;
      break;
    }
    case Metric::SUM: {
      double sum = 0.0;
      for (const Point& point : series) sum += point.value;
      result.value = sum;
      break;
    }
    default:
      result.available = false;
  }
  return result;
}

bool IsOneShot(const Metric& metric) {
  return !metric.one_shot_row().empty() || IsClientsMetric(metric);
}

absl::StatusOr<MetricValue> ComputeOneShotMetric(const Metric& metric, const CsvTable& one_shot,
                                                 absl::string_view source) {
  const std::vector<std::string>& header = one_shot.header;
  const auto find = [&](absl::string_view name) -> size_t {
    return std::find(header.begin(), header.end(), name) - header.begin();
  };
  for (absl::string_view name : {absl::string_view("kind"), absl::string_view("label"),
                                 absl::string_view(metric.column())}) {
    if (find(name) == header.size()) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": no column \"", name, "\""));
    }
  }
  const size_t kind = find("kind");
  const size_t label = find("label");
  const size_t column = find(metric.column());
  const bool clients = IsClientsMetric(metric);
  std::vector<double> values;
  bool missing = false;
  for (size_t i = 0; i < one_shot.rows.size(); ++i) {
    const std::vector<std::string>& row = one_shot.rows[i];
    if (clients ? row[kind] != "client"
                : row[kind] != "aggregate" || row[label] != metric.one_shot_row()) {
      continue;
    }
    double value = NAN;
    if (!row[column].empty() && !absl::SimpleAtod(row[column], &value)) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": row ", i + 1, " (", row[label],
                                                     "): ", metric.column(), " \"", row[column],
                                                     "\" is not a number"));
    }
    missing |= std::isnan(value);
    values.push_back(value);
    // The runner refuses two comparisons of one label, not one labelled as the
    // spec's aggregator, whose row comes first: the first row is the one meant.
    if (!clients) break;
  }
  if (values.empty()) {
    return absl::InvalidArgumentError(
        clients ? absl::StrCat(source, ": no client rows")
                : absl::StrCat(source, ": no aggregate row labelled \"", metric.one_shot_row(),
                               "\""));
  }
  MetricValue result;
  // A reduction over some of the clients would pass for one over all of them.
  if (missing) return result;
  result.available = true;
  switch (metric.one_shot_clients()) {
    case Metric::MEAN: {
      double sum = 0.0;
      for (double value : values) sum += value;
      result.value = sum / values.size();
      break;
    }
    case Metric::MIN:
      result.value = *std::min_element(values.begin(), values.end());
      break;
    case Metric::MAX:
      result.value = *std::max_element(values.begin(), values.end());
      break;
    default:  // one_shot_row: its one row
      result.value = values.front();
  }
  return result;
}

std::string LogTrailer(const std::string& how, double wall_seconds, double max_rss_mb) {
  return absl::StrFormat("%s{\"how\": %s, \"wall_seconds\": %.3f, \"max_rss_mb\": %.1f}\n",
                         kLogTrailerPrefix, fl::JsonString(how), wall_seconds, max_rss_mb);
}

RunData LoadRunData(const std::string& dir, const std::string& log,
                    const fedkit::sweep::SweepSpec& spec) {
  RunData data;
  data.metrics.resize(spec.metrics_size());
  std::optional<double> trailer_rss;
  if (std::optional<std::string> text = ReadFile(log)) {
    // One trailer per attempt: a run interrupted and continued from its
    // checkpoint took the sum of their times.
    const std::string marker = absl::StrCat("\n", kLogTrailerPrefix);
    for (size_t at = text->find(marker); at != std::string::npos; at = text->find(marker, at + 1)) {
      const absl::string_view trailer = absl::string_view(*text).substr(at + 1);
      if (std::optional<double> seconds = SummaryNumber(trailer, "wall_seconds")) {
        data.wall_seconds = data.wall_seconds.value_or(0.0) + *seconds;
      }
      if (std::optional<double> rss = SummaryNumber(trailer, "max_rss_mb")) {
        trailer_rss = std::max(trailer_rss.value_or(0.0), *rss);
      }
    }
  }
  if (std::optional<std::string> summary = ReadFile(dir + "/summary.json")) {
    if (!data.wall_seconds.has_value()) data.wall_seconds = SummaryNumber(*summary, "wall_seconds");
    data.peak_rss_mb = SummaryNumber(*summary, "peak_rss_mb");
  }
  if (!data.peak_rss_mb.has_value()) data.peak_rss_mb = trailer_rss;
  LoadOneShotMetrics(dir, spec, data);

  const std::string metrics_path = dir + "/metrics.csv";
  std::optional<std::string> text = ReadFile(metrics_path);
  if (!text.has_value()) {
    data.problems.push_back(absl::StrCat("cannot read ", metrics_path));
    return data;
  }
  absl::StatusOr<CsvTable> table = ParseCsv(*text, metrics_path);
  if (!table.ok()) {
    data.problems.emplace_back(table.status().message());
    return data;
  }
  // A column several metrics (or the curves) miss is one problem.
  const auto problem = [&data](const absl::Status& status) {
    const std::string text(status.message());
    if (std::find(data.problems.begin(), data.problems.end(), text) == data.problems.end()) {
      data.problems.push_back(text);
    }
  };
  for (int i = 0; i < spec.metrics_size(); ++i) {
    const Metric& metric = spec.metrics(i);
    if (IsOneShot(metric)) continue;
    absl::StatusOr<Series> series = ColumnSeries(*table, metric.column(), metrics_path);
    if (!series.ok()) {
      problem(series.status());
      continue;
    }
    if (metric.kind() != Metric::ROUNDS_TO || metric.reached_at().empty()) {
      data.metrics[i] = ComputeMetric(metric, *series);
      continue;
    }
    absl::StatusOr<Series> at = ProgressSeries(*table, metric.reached_at(), metrics_path);
    if (at.ok()) {
      data.metrics[i] = ComputeMetric(metric, *series, &*at);
    } else {
      problem(at.status());
    }
  }
  absl::StatusOr<Series> curve = ColumnSeries(*table, spec.curve_column(), metrics_path);
  absl::StatusOr<Series> curve_x = Series{};
  const bool by_round = spec.curve_x_column().empty() || spec.curve_x_column() == "round";
  if (!by_round) curve_x = ProgressSeries(*table, spec.curve_x_column(), metrics_path);
  if (!curve.ok()) problem(curve.status());
  if (!curve_x.ok()) problem(curve_x.status());
  if (curve.ok() && curve_x.ok()) {
    data.curve = *std::move(curve);
    data.curve_x = *std::move(curve_x);
  }

  if (spec.diagnostics().empty()) return data;
  const std::string diagnostics_path = dir + "/diagnostics.csv";
  // A run whose aggregator reports nothing has no diagnostics.csv: not a problem.
  std::optional<CsvTable> diagnostics;
  if (std::optional<std::string> diagnostics_text = ReadFile(diagnostics_path)) {
    absl::StatusOr<CsvTable> parsed = ParseCsv(*diagnostics_text, diagnostics_path);
    if (!parsed.ok()) {
      data.problems.emplace_back(parsed.status().message());
      return data;
    }
    diagnostics = *std::move(parsed);
  }
  for (const std::string& name : spec.diagnostics()) {
    // diagnostics.csv has every round; runs older than it kept their diagnostics
    // as metrics.csv columns, on the evaluated rounds.
    const CsvTable* source = nullptr;
    const std::string* path = nullptr;
    std::optional<std::string> column;
    if (diagnostics.has_value()) {
      column = FindDiagnosticColumn(diagnostics->header, name);
      source = &*diagnostics;
      path = &diagnostics_path;
    }
    if (!column.has_value()) {
      column = FindDiagnosticColumn(table->header, name);
      source = &*table;
      path = &metrics_path;
    }
    if (!column.has_value()) continue;
    absl::StatusOr<Series> series = ColumnSeries(*source, *column, *path);
    if (series.ok()) {
      data.diagnostics[name] = *std::move(series);
    } else {
      data.problems.emplace_back(series.status().message());
    }
  }
  return data;
}

}  // namespace sweep
