#include "fl/report/run_report.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "fl/atomic_file.h"
#include "fl/index_files.h"
#include "fl/report/class_counts.h"
#include "fl/report/html.h"
#include "fl/report/result_files.h"
#include "fl/report/svg_chart.h"
#include "fl/report/units.h"
#include "fl/status_macros.h"

namespace fl::report {
namespace {

constexpr char kSpecFile[] = "spec.textproto";
constexpr char kMetricsFile[] = "metrics.csv";
constexpr char kDiagnosticsFile[] = "diagnostics.csv";
constexpr char kSummaryFile[] = "summary.json";
constexpr char kClassCountsFile[] = "class_counts.csv";

// metrics.csv's leading columns (fl/metrics_sink.h). After them come the
// diagnostics, then the rejected_<reason> counters.
constexpr const char* kLeadingColumns[] = {
    "round",      "test_accuracy", "test_loss", "train_loss", "clients", "rejected",
    "incomplete", "dropped",       "bytes_up",  "bytes_down", "seconds",
    "virtual_seconds"};
constexpr char kRejectedPrefix[] = "rejected_";
// Per-client accuracy (server.client_evaluation): drawn with test accuracy.
constexpr char kClientAccuracyPrefix[] = "client_acc_";

constexpr int kSmallWidth = 360;
constexpr int kSmallHeight = 230;

// What curves are drawn against: a column of the files. Every chart takes the
// round; test accuracy is drawn against the virtual clock too, when the run has
// one (HasVirtualClock).
struct XAxis {
  std::string column;
  std::string label;
  bool integer = true;
};

// A CSV file's columns as numbers, by name.
struct Columns {
  std::vector<std::string> names;  // in file order
  std::map<std::string, std::vector<double>> values;
  bool Has(const std::string& name) const { return values.count(name) > 0; }
};

absl::StatusOr<Columns> ReadColumns(const std::string& path, absl::string_view what) {
  FL_ASSIGN_OR_RETURN(const std::string text, ReadTextFile(path, what));
  FL_ASSIGN_OR_RETURN(const CsvTable table, ParseCsv(text, path));
  Columns columns;
  for (const std::string& name : table.header) {
    FL_ASSIGN_OR_RETURN(std::vector<double> values, ColumnValues(table, name, path));
    columns.names.push_back(name);
    columns.values[name] = std::move(values);
  }
  if (!columns.Has("round")) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": no column \"round\""));
  }
  return columns;
}

// Everything the page shows, read once. Optional files are either there
// (parsed) or not, with the reason when one is there but unreadable.
struct RunFiles {
  std::string dir;
  std::string spec;
  Columns metrics;
  std::optional<std::string> summary;
  std::optional<Columns> diagnostics;
  std::string diagnostics_problem;
  std::optional<ClassCounts> class_counts;
  std::string class_counts_problem;
};

std::string PathIn(const std::string& dir, const char* file) {
  return (std::filesystem::path(dir) / file).string();
}

bool Exists(const std::string& path) {
  std::error_code error;
  return std::filesystem::exists(path, error);
}

absl::StatusOr<RunFiles> ReadRunFiles(const std::string& dir) {
  RunFiles run;
  run.dir = dir;
  FL_ASSIGN_OR_RETURN(run.spec, ReadTextFile(PathIn(dir, kSpecFile), "the run's spec"));
  const std::string metrics = PathIn(dir, kMetricsFile);
  FL_ASSIGN_OR_RETURN(run.metrics, ReadColumns(metrics, "the run's metrics"));
  for (const std::string column : {"test_accuracy", "test_loss"}) {
    if (!run.metrics.Has(column)) {
      return absl::InvalidArgumentError(
          absl::StrCat(metrics, ": no column \"", column, "\" (see fl/metrics_sink.h)"));
    }
  }
  const std::string summary = PathIn(dir, kSummaryFile);
  if (absl::StatusOr<std::string> text = ReadTextFile(summary, "the run's summary"); text.ok()) {
    run.summary = *std::move(text);
  }
  if (const std::string path = PathIn(dir, kDiagnosticsFile); Exists(path)) {
    absl::StatusOr<Columns> diagnostics = ReadColumns(path, "the run's diagnostics");
    if (diagnostics.ok()) {
      run.diagnostics = *std::move(diagnostics);
    } else {
      run.diagnostics_problem = std::string(diagnostics.status().message());
    }
  }
  if (const std::string path = PathIn(dir, kClassCountsFile); Exists(path)) {
    absl::StatusOr<ClassCounts> counts = [&]() -> absl::StatusOr<ClassCounts> {
      FL_ASSIGN_OR_RETURN(const std::string text, ReadTextFile(path, "the partition's counts"));
      return ParseClassCounts(text, path);
    }();
    if (counts.ok()) {
      run.class_counts = *std::move(counts);
    } else {
      run.class_counts_problem = std::string(counts.status().message());
    }
  }
  return run;
}

// The spec's top-level `name: "..."` (the runner writes nested fields indented);
// empty when it has none.
std::string SpecName(absl::string_view spec) {
  for (absl::string_view line : absl::StrSplit(spec, '\n')) {
    if (!absl::ConsumePrefix(&line, "name:")) continue;
    line = absl::StripAsciiWhitespace(line);
    std::string name;
    if (absl::ConsumePrefix(&line, "\"") && absl::ConsumeSuffix(&line, "\"") &&
        absl::CUnescape(line, &name)) {
      return name;
    }
    return std::string(line);
  }
  return "";
}

// `column` of `table` against `axis`, its values times `scale`.
ChartSeries Curve(const Columns& table, const XAxis& axis, const std::string& column,
                  std::string name, double scale = 1.0) {
  ChartSeries series;
  series.name = std::move(name);
  series.x = table.values.at(axis.column);
  series.y = table.values.at(column);
  for (double& value : series.y) value *= scale;
  return series;
}

LineChartOptions ChartOptions(std::string title, std::string y_label, const XAxis& axis,
                              bool small = false) {
  LineChartOptions options;
  options.title = std::move(title);
  options.y_label = std::move(y_label);
  options.x_label = axis.label;
  options.integer_x = axis.integer;
  if (small) {
    options.width = kSmallWidth;
    options.height = kSmallHeight;
  }
  return options;
}

std::string Figure(absl::string_view id, absl::string_view svg) {
  return absl::StrCat("<figure", id.empty() ? "" : absl::StrCat(" id=\"", id, "\""), ">\n", svg,
                      "</figure>\n");
}

std::string Charts(absl::string_view figures) {
  return absl::StrCat("<div class=\"charts\">\n", figures, "</div>\n");
}

std::string Percent(double fraction) { return absl::StrFormat("%.2f %%", 100 * fraction); }

constexpr char kVirtualSeconds[] = "virtual_seconds";

// Whether metrics.csv has a virtual clock that moved: a virtual_seconds column
// (runs before the clock have none) with a value other than 0.
bool HasVirtualClock(const Columns& metrics) {
  if (!metrics.Has(kVirtualSeconds)) return false;
  const std::vector<double>& values = metrics.values.at(kVirtualSeconds);
  return std::any_of(values.begin(), values.end(),
                     [](double value) { return std::isfinite(value) && value != 0; });
}

std::string NumbersSection(const RunFiles& run) {
  if (!run.summary.has_value()) {
    return Section("numbers", "Key numbers",
                   Paragraph("No summary.json: the run has not finished (the runner writes it "
                             "at the end). The curves below show the rounds so far."));
  }
  const auto number = [&](absl::string_view key) { return SummaryNumber(*run.summary, key); };
  std::vector<std::pair<std::string, std::string>> tiles;
  if (std::optional<double> value = number("final_test_accuracy")) {
    tiles.emplace_back("final test accuracy", Percent(*value));
  }
  if (std::optional<double> value = number("best_test_accuracy")) {
    std::string text = Percent(*value);
    if (std::optional<double> round = number("best_round")) {
      absl::StrAppend(&text, " (round ", *round, ")");
    }
    tiles.emplace_back("best test accuracy", text);
  }
  if (std::optional<double> value = number("mean_test_accuracy_last_10")) {
    tiles.emplace_back("mean of the last 10 evaluations", Percent(*value));
  }
  if (std::optional<double> value = number("final_test_loss")) {
    tiles.emplace_back("final test loss", absl::StrFormat("%.4g", *value));
  }
  if (std::optional<double> value = number("rounds")) {
    tiles.emplace_back("rounds", absl::StrFormat("%.0f", *value));
  }
  if (std::optional<double> value = number("wall_seconds")) {
    tiles.emplace_back("wall time", FormatSeconds(*value));
  }
  if (std::optional<double> value = number("peak_rss_mb")) {
    tiles.emplace_back("peak RSS", absl::StrFormat("%.0f MB", *value));
  }
  for (const auto& [key, label] : {std::pair<const char*, const char*>{"bytes_up", "bytes up"},
                                   {"bytes_down", "bytes down"}}) {
    if (std::optional<double> value = number(key)) tiles.emplace_back(label, FormatBytes(*value));
  }
  if (std::optional<double> value = number("local_steps")) {
    tiles.emplace_back("local steps", absl::StrFormat("%.0f", *value));
  }
  return Section("numbers", "Key numbers",
                 absl::StrCat(KeyNumbers(tiles), "<details><summary>summary.json</summary>\n",
                              Preformatted(*run.summary), "</details>\n"));
}

std::string CurvesSection(const RunFiles& run, const XAxis& axis) {
  std::vector<ChartSeries> losses = {Curve(run.metrics, axis, "test_loss", "test loss")};
  if (run.metrics.Has("train_loss")) {
    losses.push_back(Curve(run.metrics, axis, "train_loss", "train loss"));
  }
  std::vector<ChartSeries> accuracy = {
      Curve(run.metrics, axis, "test_accuracy", "test accuracy", 100)};
  for (const auto& [column, label] : {std::pair{"client_acc_mean", "client mean"},
                                      std::pair{"client_acc_p10", "client 10th percentile"},
                                      std::pair{"client_acc_worst", "worst client"}}) {
    if (run.metrics.Has(column)) accuracy.push_back(Curve(run.metrics, axis, column, label, 100));
  }
  std::string figures = Figure(
      "accuracy", LineChart(ChartOptions("Test accuracy", "test accuracy (%)", axis), accuracy));
  // Asynchronous rounds are server steps of a few updates each: the virtual
  // clock is what compares runs.
  if (HasVirtualClock(run.metrics)) {
    const XAxis virtual_time{kVirtualSeconds, "virtual seconds", false};
    absl::StrAppend(
        &figures,
        Figure("accuracy_virtual",
               LineChart(ChartOptions("Test accuracy against virtual time", "test accuracy (%)",
                                      virtual_time),
                         {Curve(run.metrics, virtual_time, "test_accuracy", "test accuracy",
                                100)})));
  }
  absl::StrAppend(&figures, Figure("loss", LineChart(ChartOptions("Loss", "loss", axis), losses)));
  return Section("curves", "Accuracy and loss", Charts(figures));
}

bool IsLeadingColumn(const std::string& name) {
  return std::find(std::begin(kLeadingColumns), std::end(kLeadingColumns), name) !=
         std::end(kLeadingColumns);
}

std::string DiagnosticsSection(const RunFiles& run, const XAxis& axis) {
  // diagnostics.csv has every round. Without it (older runs; an aggregator that
  // reports nothing writes none) metrics.csv's trailing columns, evaluated rounds only.
  const Columns& source = run.diagnostics.has_value() ? *run.diagnostics : run.metrics;
  std::string html;
  if (!run.diagnostics_problem.empty()) html = Paragraph(run.diagnostics_problem);
  std::string figures;
  for (const std::string& name : source.names) {
    if (IsLeadingColumn(name) || absl::StartsWith(name, kRejectedPrefix) ||
        absl::StartsWith(name, kClientAccuracyPrefix)) {
      continue;
    }
    absl::StrAppend(&figures, Figure("", LineChart(ChartOptions(name, "", axis, /*small=*/true),
                                                   {Curve(source, axis, name, name)})));
  }
  if (figures.empty()) {
    absl::StrAppend(&html, Paragraph("The aggregator reported no diagnostics."));
  } else {
    absl::StrAppend(&html,
                    Paragraph(run.diagnostics.has_value()
                                  ? "The aggregator's diagnostics, every round (diagnostics.csv)."
                                  : "The aggregator's diagnostics on the evaluated rounds "
                                    "(metrics.csv; this run has no diagnostics.csv)."),
                    Charts(figures));
  }
  return Section("diagnostics", "Diagnostics", html);
}

// The largest finite value of `values`; 0 for none.
double Largest(const std::vector<double>& values) {
  double largest = 0;
  for (double value : values) {
    if (std::isfinite(value)) largest = std::max(largest, value);
  }
  return largest;
}

std::string CommunicationSection(const RunFiles& run, const XAxis& axis) {
  std::string figures;
  std::vector<ChartSeries> bytes;
  double largest = 0;
  for (const auto& [column, name] : {std::pair<std::string, std::string>{"bytes_up", "up"},
                                     {"bytes_down", "down"}}) {
    if (!run.metrics.Has(column)) continue;
    largest = std::max(largest, Largest(run.metrics.values.at(column)));
    bytes.push_back(Curve(run.metrics, axis, column, name));
  }
  if (!bytes.empty()) {
    const ByteUnit unit = ByteUnitFor(largest);
    for (ChartSeries& series : bytes) {
      for (double& value : series.y) value /= unit.size;
    }
    absl::StrAppend(&figures, Figure("bytes", LineChart(ChartOptions("Bytes sent, cumulative",
                                                                     unit.name, axis),
                                                        bytes)));
  }
  std::vector<ChartSeries> updates;
  for (const auto& [column, name] :
       {std::pair<std::string, std::string>{"clients", "accepted"},
        {"rejected", "rejected"}, {"incomplete", "incomplete"}, {"dropped", "dropped"}}) {
    if (run.metrics.Has(column)) updates.push_back(Curve(run.metrics, axis, column, name));
  }
  for (const std::string& column : run.metrics.names) {
    if (!absl::StartsWith(column, kRejectedPrefix)) continue;
    const std::string reason = column.substr(sizeof(kRejectedPrefix) - 1);
    updates.push_back(Curve(run.metrics, axis, column, absl::StrCat("rejected: ", reason)));
  }
  if (!updates.empty()) {
    absl::StrAppend(&figures,
                    Figure("updates", LineChart(ChartOptions("Updates since the previous "
                                                             "evaluation",
                                                             "updates", axis),
                                                updates)));
  }
  if (figures.empty()) {
    return Section("communication", "Communication and clients",
                   Paragraph("metrics.csv has no bytes or client columns."));
  }
  return Section("communication", "Communication and clients", Charts(figures));
}

// A tile with the virtual clock's last finite reading (cumulative: the run's
// virtual time), when the run has a clock that moved.
void AddVirtualTime(const Columns& metrics,
                    std::vector<std::pair<std::string, std::string>>& tiles) {
  if (!HasVirtualClock(metrics)) return;
  const std::vector<double>& values = metrics.values.at(kVirtualSeconds);
  for (auto it = values.rbegin(); it != values.rend(); ++it) {
    if (!std::isfinite(*it)) continue;
    tiles.emplace_back("virtual time (metrics.csv)", FormatSeconds(*it));
    return;
  }
}

std::string TimingSection(const RunFiles& run, const XAxis& axis) {
  if (!run.metrics.Has("seconds")) {
    std::vector<std::pair<std::string, std::string>> tiles;
    AddVirtualTime(run.metrics, tiles);
    return Section("timing", "Timing",
                   absl::StrCat(tiles.empty() ? "" : KeyNumbers(tiles),
                                Paragraph("metrics.csv has no seconds column.")));
  }
  // `seconds` is cumulative and rows may be several rounds apart (eval_every).
  const std::vector<double>& rounds = run.metrics.values.at("round");
  const std::vector<double>& seconds = run.metrics.values.at("seconds");
  ChartSeries per_round;
  per_round.name = "seconds per round";
  per_round.x = run.metrics.values.at(axis.column);
  double previous_round = 0;
  double previous_seconds = 0;
  for (size_t i = 0; i < rounds.size(); ++i) {
    const double elapsed = rounds[i] - previous_round;
    per_round.y.push_back(elapsed > 0 ? (seconds[i] - previous_seconds) / elapsed : NAN);
    previous_round = rounds[i];
    previous_seconds = seconds[i];
  }
  std::vector<std::pair<std::string, std::string>> tiles;
  if (!seconds.empty() && std::isfinite(seconds.back()) && rounds.back() > 0) {
    tiles.emplace_back("time in rounds (metrics.csv)", FormatSeconds(seconds.back()));
    tiles.emplace_back("mean per round", absl::StrFormat("%.3g s", seconds.back() / rounds.back()));
  }
  AddVirtualTime(run.metrics, tiles);
  if (run.summary.has_value()) {
    if (std::optional<double> wall = SummaryNumber(*run.summary, "wall_seconds")) {
      tiles.emplace_back("wall time (summary.json)", FormatSeconds(*wall));
    }
  }
  return Section("timing", "Timing",
                 absl::StrCat(KeyNumbers(tiles),
                              Charts(Figure("seconds", LineChart(ChartOptions("Seconds per round",
                                                                              "seconds", axis),
                                                                 {per_round})))));
}

std::string MemorySection(const RunFiles& run) {
  std::optional<double> peak;
  if (run.summary.has_value()) peak = SummaryNumber(*run.summary, "peak_rss_mb");
  if (!peak.has_value()) {
    return Section("memory", "Memory",
                   Paragraph("No peak memory: summary.json, written when the run ends, has none "
                             "yet."));
  }
  return Section("memory", "Memory",
                 absl::StrCat(KeyNumbers({{"peak RSS", absl::StrFormat("%.0f MB", *peak)}}),
                              Paragraph("The process's peak resident set size over the whole run "
                                        "(summary.json's peak_rss_mb), data and models included; "
                                        "memory is not recorded per round.")));
}

std::string PartitionSection(const RunFiles& run) {
  if (!run.class_counts.has_value()) {
    return Section("partition", "Partition",
                   Paragraph(run.class_counts_problem.empty()
                                 ? "No partition file: this folder has no class_counts.csv (a run "
                                   "writes it when it starts; older runs have none)."
                                 : run.class_counts_problem));
  }
  HeatmapOptions options;
  options.title = "Training examples per client and class";
  options.column_names = run.class_counts->classes;
  return Section("partition", "Partition",
                 Figure("heatmap", Heatmap(options, run.class_counts->counts)));
}

}  // namespace

absl::StatusOr<std::string> RunReportHtml(const std::string& run_dir) {
  FL_ASSIGN_OR_RETURN(const RunFiles run, ReadRunFiles(run_dir));
  const XAxis rounds{"round", "round", true};
  std::string name = SpecName(run.spec);
  if (name.empty()) name = std::filesystem::path(run_dir).filename().string();
  std::string body = absl::StrCat(
      "<header>\n<h1>", HtmlEscape(name), "</h1>\n<p class=\"sub\">Results folder: <code>",
      HtmlEscape(run_dir), "</code></p>\n",
      Contents({{"numbers", "Key numbers"},
                {"curves", "Accuracy and loss"},
                {"diagnostics", "Diagnostics"},
                {"communication", "Communication"},
                {"timing", "Timing"},
                {"memory", "Memory"},
                {"partition", "Partition"},
                {"spec", "Spec"}}),
      "</header>\n");
  absl::StrAppend(&body, NumbersSection(run), CurvesSection(run, rounds),
                  DiagnosticsSection(run, rounds), CommunicationSection(run, rounds),
                  TimingSection(run, rounds), MemorySection(run), PartitionSection(run),
                  Section("spec", "Spec (spec.textproto)", Preformatted(run.spec)));
  return HtmlPage(absl::StrCat(name, ": run report"), body);
}

absl::Status WriteRunReport(const std::string& run_dir) {
  FL_ASSIGN_OR_RETURN(const std::string html, RunReportHtml(run_dir));
  return WriteFileAtomically(PathIn(run_dir, "report.html"), html);
}

}  // namespace fl::report
