#include "tools/sweep/report.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "fl/json.h"
#include "fl/report/units.h"

namespace sweep {
namespace {

using fedkit::sweep::SweepSpec;
using fl::report::FormatSeconds;
using fl::report::Point;
using fl::report::Series;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

bool IsRoundsTo(const Metric& metric) { return metric.kind() == Metric::ROUNDS_TO; }

// A ROUNDS_TO metric that gives the round (not reached_at's column).
bool CountsRounds(const Metric& metric) {
  return IsRoundsTo(metric) && metric.reached_at().empty();
}

// Shown as a percentage: an accuracy (not a count or a total of one) without a
// scale of its own.
bool IsPercent(const Metric& metric) {
  return !IsRoundsTo(metric) && metric.kind() != Metric::SUM && IsAccuracyColumn(metric.column()) &&
         !metric.has_scale();
}

// How a metric's numbers are shown: times `scale`, with `decimals` decimals.
struct Display {
  double scale = 1.0;
  int decimals = 0;
};

// Percent with 2 decimals for accuracies, rounds with 1 (means over seeds), else
// (reached_at's values too) times the metric's scale with the decimals that give
// `shown` (the number the others go with, as the table shows it) 4 significant
// digits, so that a mean's sd and range share them.
Display DisplayAround(const Metric& metric, double shown) {
  if (CountsRounds(metric)) return {1.0, 1};
  if (IsPercent(metric)) return {100.0, 2};
  Display display{metric.has_scale() ? metric.scale() : 1.0, 0};
  shown = std::fabs(shown);
  if (shown > 0 && std::isfinite(shown)) {
    display.decimals = std::clamp(3 - static_cast<int>(std::floor(std::log10(shown))), 0, 9);
  }
  return display;
}

// How the numbers that go with `mean` (in the column's own units) are shown.
Display DisplayOf(const Metric& metric, double mean) {
  return DisplayAround(metric, (metric.has_scale() ? metric.scale() : 1.0) * mean);
}

std::string Format(const Display& display, double value, bool sign = false) {
  return absl::StrFormat(sign ? "%+.*f" : "%.*f", display.decimals, display.scale * value);
}

// The value `variant`'s references give for `metric` (named by its label), if any.
std::optional<double> ReferenceOf(const SweepSpec::Variant& variant, const Metric& metric) {
  for (const SweepSpec::Variant::Reference& reference : variant.references()) {
    if (reference.metric() == metric.label()) return reference.value();
  }
  return std::nullopt;
}

// Per metric, whether a variant has a reference for it: those get a column.
std::vector<bool> ReferenceColumns(const SweepSpec& spec) {
  std::vector<bool> columns;
  for (const Metric& metric : spec.metrics()) {
    bool any = false;
    for (const auto& variant : spec.variants()) any |= ReferenceOf(variant, metric).has_value();
    columns.push_back(any);
  }
  return columns;
}

// A reference is already in the table's units: only its decimals to choose, those
// the metric's own numbers of its size get.
std::string ReferenceCell(const Metric& metric, std::optional<double> value) {
  if (!value.has_value()) return "";
  return absl::StrFormat("%.*f", DisplayAround(metric, *value).decimals, *value);
}

// The variant `variant`'s paired differences are to.
const std::string& BaselineOf(const SweepSpec& spec, const SweepSpec::Variant& variant) {
  return variant.baseline().empty() ? spec.baseline() : variant.baseline();
}

std::string Cell(absl::string_view text) { return absl::StrReplaceAll(text, {{"|", "\\|"}}); }

std::string Row(const std::vector<std::string>& cells) {
  std::vector<std::string> escaped;
  for (const std::string& cell : cells) escaped.push_back(Cell(cell));
  return absl::StrCat("| ", absl::StrJoin(escaped, " | "), " |\n");
}

// The header rule: the first `text` columns left-aligned, the numbers right.
std::string Rule(size_t columns, size_t text = 1) {
  std::vector<std::string> cells(columns, "---:");
  for (size_t i = 0; i < text; ++i) cells[i] = "---";
  return Row(cells);
}

// The runs of one variant, by seed.
std::map<uint64_t, const RunRecord*> RunsOf(const std::vector<RunRecord>& runs,
                                            const std::string& variant) {
  std::map<uint64_t, const RunRecord*> by_seed;
  for (const RunRecord& run : runs) {
    if (run.variant == variant) by_seed[run.seed] = &run;
  }
  return by_seed;
}

// Metric `m` by seed over the finished runs that give it; for ROUNDS_TO only the
// seeds that reached the target.
std::map<uint64_t, double> ValuesBySeed(const std::map<uint64_t, const RunRecord*>& runs, int m) {
  std::map<uint64_t, double> values;
  for (const auto& [seed, run] : runs) {
    if (run->status != RunStatus::kFinished) continue;
    const MetricValue& value = run->data.metrics[m];
    if (value.available && value.value.has_value()) values[seed] = *value.value;
  }
  return values;
}

std::vector<double> Values(const std::map<uint64_t, double>& by_seed) {
  std::vector<double> values;
  for (const auto& [seed, value] : by_seed) values.push_back(value);
  return values;
}

std::string MeanSd(const Metric& metric, const SeedStats& stats) {
  const Display display = DisplayOf(metric, stats.mean);
  std::string text = Format(display, stats.mean);
  if (stats.n >= 2) absl::StrAppend(&text, " ± ", Format(display, stats.sd));
  return text;
}

// The results-table cell of metric `m` for one variant's runs.
std::string ResultCell(const Metric& metric, int m,
                       const std::map<uint64_t, const RunRecord*>& runs, size_t seeds) {
  const std::map<uint64_t, double> by_seed = ValuesBySeed(runs, m);
  if (IsRoundsTo(metric)) {
    int available = 0;
    for (const auto& [seed, run] : runs) {
      available += run->status == RunStatus::kFinished && run->data.metrics[m].available;
    }
    if (available == 0) return "n/a";
    if (by_seed.empty()) return absl::StrCat("not reached (0/", available, ")");
    return absl::StrCat(MeanSd(metric, Summarize(Values(by_seed))), " (", by_seed.size(), "/",
                        available, " reached)");
  }
  if (by_seed.empty()) return "n/a";
  std::string text = MeanSd(metric, Summarize(Values(by_seed)));
  if (by_seed.size() < seeds) absl::StrAppend(&text, " (n=", by_seed.size(), ")");
  return text;
}

std::set<uint64_t> FinishedSeeds(const std::map<uint64_t, const RunRecord*>& runs) {
  std::set<uint64_t> seeds;
  for (const auto& [seed, run] : runs) {
    if (run->status == RunStatus::kFinished) seeds.insert(seed);
  }
  return seeds;
}

// A variant's row of the results table: each metric over its seeds (and its
// reference where the metric has a reference column), wall time, peak memory.
std::vector<std::string> ResultRow(const SweepSpec& spec, const SweepSpec::Variant& variant,
                                   const std::map<uint64_t, const RunRecord*>& by_seed,
                                   bool is_baseline, size_t seeds,
                                   const std::vector<bool>& reference_columns) {
  std::string label = variant.label();
  std::vector<double> walls;
  std::optional<double> peak;
  for (const auto& [seed, run] : by_seed) {
    if (!run->stale.empty()) label = absl::StrCat(variant.label(), " †");
    if (run->status != RunStatus::kFinished) continue;
    if (run->data.wall_seconds.has_value()) walls.push_back(*run->data.wall_seconds);
    if (run->data.peak_rss_mb.has_value()) {
      peak = std::max(peak.value_or(0), *run->data.peak_rss_mb);
    }
  }
  if (is_baseline) absl::StrAppend(&label, " (baseline)");
  std::vector<std::string> cells = {label};
  for (int m = 0; m < spec.metrics_size(); ++m) {
    cells.push_back(ResultCell(spec.metrics(m), m, by_seed, seeds));
    if (reference_columns[m]) {
      cells.push_back(ReferenceCell(spec.metrics(m), ReferenceOf(variant, spec.metrics(m))));
    }
  }
  cells.push_back(walls.empty() ? "n/a" : FormatSeconds(Summarize(walls).mean));
  cells.push_back(peak.has_value() ? absl::StrFormat("%.0f MB", *peak) : "n/a");
  return cells;
}

// The differences-table cell of metric `m`: mean [min, max] over the seeds both
// have it; `both`: how many seeds both finished.
std::string DifferenceCell(const Metric& metric, int m,
                           const std::map<uint64_t, const RunRecord*>& variant,
                           const std::map<uint64_t, const RunRecord*>& baseline, size_t both) {
  const PairedDifference d = PairedDifferences(ValuesBySeed(variant, m), ValuesBySeed(baseline, m));
  if (d.n == 0) return "n/a";
  const Display display = DisplayOf(metric, d.mean);
  std::string text = Format(display, d.mean, /*sign=*/true);
  if (d.n >= 2) {
    // Each difference of rounds is one of two rounds: a whole number.
    const Display bounds = CountsRounds(metric) ? Display{1.0, 0} : display;
    absl::StrAppend(&text, " [", Format(bounds, d.min, true), ", ", Format(bounds, d.max, true),
                    "]");
  }
  if (static_cast<size_t>(d.n) < both) absl::StrAppend(&text, " (n=", d.n, ")");
  return text;
}

// The stale, failed, missing and unreadable runs.
void ListRuns(const std::vector<RunRecord>& runs, SweepTables& tables) {
  for (const RunRecord& run : runs) {
    if (!run.stale.empty()) tables.stale.push_back({run.variant, run.seed, run.stale, ""});
    if (run.status != RunStatus::kFinished) {
      tables.missing.push_back({run.variant, run.seed, StatusText(run.status),
                                run.status != RunStatus::kNotRun ? run.log : ""});
    }
    for (const std::string& problem : run.data.problems) {
      tables.problems.push_back({run.variant, run.seed, problem, ""});
    }
  }
}

std::string MarkdownTable(const TextTable& table) {
  std::string md = Row(table.header);
  absl::StrAppend(&md, Rule(table.header.size(), table.text_columns));
  for (const std::vector<std::string>& row : table.rows) absl::StrAppend(&md, Row(row));
  return md;
}

// A list of runs under `heading` (with `note` first), nothing when empty.
std::string MarkdownRunList(absl::string_view heading, absl::string_view note,
                            const std::vector<RunNote>& notes) {
  if (notes.empty()) return "";
  std::string md = absl::StrCat("\n## ", heading, "\n\n");
  if (!note.empty()) absl::StrAppend(&md, note, "\n\n");
  for (const RunNote& run : notes) {
    absl::StrAppend(&md, "- `", run.variant, "` seed ", run.seed, ": ", run.text);
    if (!run.log.empty()) absl::StrAppend(&md, ", see [", run.log, "](", run.log, ")");
    absl::StrAppend(&md, "\n");
  }
  return md;
}

// JSON has no infinity or NaN (an epsilon without noise is infinite): null then.
std::string Json(double value) {
  return std::isfinite(value) ? absl::StrFormat("%.6g", value) : std::string("null");
}

template <typename T>
std::string JsonArray(const std::vector<T>& values) {
  std::vector<std::string> cells;
  for (const T& value : values) cells.push_back(Json(value));
  return absl::StrCat("[", absl::StrJoin(cells, ", "), "]");
}

// `ys` combined over the rounds they all have (CombineSeries) and drawn against
// the round, or, with `xs` (the runs' x columns, in the same order), against the
// mean of xs over the runs at each of those rounds that every x column has too.
VariantCurve CurveOf(const std::string& label, int variant, const std::vector<const Series*>& ys,
                     const std::vector<const Series*>& xs) {
  VariantCurve curve{label, variant, static_cast<int>(ys.size()), CombineSeries(ys), {}};
  if (xs.empty()) {
    curve.x.assign(curve.band.rounds.begin(), curve.band.rounds.end());
    return curve;
  }
  const Band x_band = CombineSeries(xs);
  std::map<int, double> x_at;
  for (size_t i = 0; i < x_band.rounds.size(); ++i) x_at[x_band.rounds[i]] = x_band.mean[i];
  Band kept;
  const Band& band = curve.band;
  for (size_t i = 0; i < band.rounds.size(); ++i) {
    auto it = x_at.find(band.rounds[i]);
    if (it == x_at.end()) continue;
    kept.rounds.push_back(band.rounds[i]);
    kept.mean.push_back(band.mean[i]);
    kept.min.push_back(band.min[i]);
    kept.max.push_back(band.max[i]);
    curve.x.push_back(it->second);
  }
  curve.band = std::move(kept);
  return curve;
}

}  // namespace

std::string CurveXColumn(const SweepSpec& spec) {
  return spec.curve_x_column().empty() ? std::string("round") : spec.curve_x_column();
}

const char* StatusText(RunStatus status) {
  switch (status) {
    case RunStatus::kFailed:
      return "failed";
    case RunStatus::kIncomplete:
      return "incomplete (no summary.json)";
    case RunStatus::kNotRun:
      return "not run";
    case RunStatus::kFinished:
      break;
  }
  return "finished";
}

SeedStats Summarize(const std::vector<double>& values) {
  SeedStats stats;
  stats.n = static_cast<int>(values.size());
  stats.mean = stats.sd = kNaN;
  if (values.empty()) return stats;
  double sum = 0.0;
  for (double value : values) sum += value;
  stats.mean = sum / stats.n;
  if (stats.n < 2) return stats;
  double squares = 0.0;
  for (double value : values) squares += (value - stats.mean) * (value - stats.mean);
  stats.sd = std::sqrt(squares / (stats.n - 1));
  return stats;
}

PairedDifference PairedDifferences(const std::map<uint64_t, double>& variant,
                                   const std::map<uint64_t, double>& baseline) {
  std::vector<double> differences;
  for (const auto& [seed, value] : variant) {
    auto it = baseline.find(seed);
    if (it != baseline.end()) differences.push_back(value - it->second);
  }
  PairedDifference result;
  result.n = static_cast<int>(differences.size());
  if (differences.empty()) return result;
  result.mean = Summarize(differences).mean;
  result.min = *std::min_element(differences.begin(), differences.end());
  result.max = *std::max_element(differences.begin(), differences.end());
  return result;
}

Band CombineSeries(const std::vector<const Series*>& series) {
  Band band;
  if (series.empty()) return band;
  std::vector<std::map<int, double>> by_round;
  for (const Series* one : series) {
    std::map<int, double>& values = by_round.emplace_back();
    for (const Point& point : *one) values[point.round] = point.value;
  }
  for (const auto& [round, first] : by_round[0]) {
    double sum = 0.0;
    double low = first;
    double high = first;
    bool everywhere = true;
    for (const std::map<int, double>& values : by_round) {
      auto it = values.find(round);
      if (it == values.end()) {
        everywhere = false;
        break;
      }
      sum += it->second;
      low = std::min(low, it->second);
      high = std::max(high, it->second);
    }
    if (!everywhere) continue;
    band.rounds.push_back(round);
    band.mean.push_back(sum / series.size());
    band.min.push_back(low);
    band.max.push_back(high);
  }
  return band;
}

std::string RunsCsv(const SweepSpec& spec, const std::vector<RunRecord>& runs) {
  std::vector<std::string> header = {"variant", "seed"};
  for (const Metric& metric : spec.metrics()) header.push_back(MetricName(metric));
  header.insert(header.end(), {"wall_seconds", "peak_rss_mb", "stale"});
  std::string csv = absl::StrCat(absl::StrJoin(header, ","), "\n");
  // Enough digits that counts (bytes) and metrics.csv's values come back exactly.
  const auto number = [](const std::optional<double>& value) {
    return value.has_value() ? absl::StrFormat("%.10g", *value) : std::string();
  };
  for (const RunRecord& run : runs) {
    if (run.status != RunStatus::kFinished) continue;
    std::vector<std::string> cells = {run.variant, absl::StrCat(run.seed)};
    // Empty cells: not reached (ROUNDS_TO), or not available.
    for (const MetricValue& value : run.data.metrics) cells.push_back(number(value.value));
    cells.push_back(number(run.data.wall_seconds));
    cells.push_back(number(run.data.peak_rss_mb));
    cells.push_back(run.stale.empty() ? "false" : "true");
    absl::StrAppend(&csv, absl::StrJoin(cells, ","), "\n");
  }
  return csv;
}

SweepTables ComputeTables(const SweepSpec& spec, const TableContext& context,
                          const std::vector<RunRecord>& runs) {
  const size_t seeds = context.seeds.size();
  std::map<std::string, std::string> labels;
  for (const auto& variant : spec.variants()) labels[variant.name()] = variant.label();

  int finished = 0;
  int failed = 0;
  int stale = 0;
  for (const RunRecord& run : runs) {
    finished += run.status == RunStatus::kFinished;
    failed += run.status == RunStatus::kFailed;
    stale += !run.stale.empty();
  }
  SweepTables tables;
  tables.overview = absl::StrCat(
      "Seeds: ", absl::StrJoin(context.seeds, ", "), ". ", spec.variants_size(), " variants x ",
      seeds, " seeds: ", finished, " of ", runs.size(), " runs finished",
      failed > 0 ? absl::StrCat(", ", failed, " failed") : "",
      stale > 0 ? absl::StrCat(", ", stale, " stale (marked †)") : "", ".");

  bool accuracy = false;
  bool rounds_to = false;
  bool reached_at = false;
  for (const Metric& metric : spec.metrics()) {
    accuracy |= IsPercent(metric);
    rounds_to |= IsRoundsTo(metric);
    reached_at |= IsRoundsTo(metric) && !CountsRounds(metric);
  }
  // What a ROUNDS_TO metric's values are called in the notes.
  const std::string to_target =
      reached_at ? "Rounds (or a column's value at that round) to a target" : "Rounds to a target";
  // The variants others are compared to (none when every variant is its own
  // reference: then there are no differences to show), and whether that is not
  // the sweep's baseline alone (then the differences table names each row's).
  std::set<std::string> baselines;
  bool own_baselines = false;
  for (const auto& variant : spec.variants()) {
    if (BaselineOf(spec, variant) == variant.name()) continue;
    baselines.insert(BaselineOf(spec, variant));
    own_baselines |= BaselineOf(spec, variant) != spec.baseline();
  }

  const std::vector<bool> reference_columns = ReferenceColumns(spec);
  const bool references = std::count(reference_columns.begin(), reference_columns.end(), true) > 0;
  tables.results_note = absl::StrCat(
      "Mean ± sample standard deviation over the seeds; (n=k): only k of the ", seeds,
      " seeds finished.", accuracy ? " Accuracies in %." : "",
      rounds_to ? absl::StrCat(" ", to_target, ": mean over the seeds that reached it.") : "",
      references ? absl::StrCat(" ", spec.reference_label(),
                                " (…): the sweep file's numbers, not these runs'.")
                 : "",
      " Wall time: mean per run; peak RSS: the largest.");
  std::vector<std::string>& header = tables.results.header;
  header = {"variant"};
  for (int m = 0; m < spec.metrics_size(); ++m) {
    const std::string& label = spec.metrics(m).label();
    header.push_back(label);
    if (reference_columns[m]) {
      header.push_back(absl::StrCat(spec.reference_label(), " (", label, ")"));
    }
  }
  header.insert(header.end(), {"wall time", "peak RSS"});
  for (const auto& variant : spec.variants()) {
    tables.results.rows.push_back(ResultRow(spec, variant, RunsOf(runs, variant.name()),
                                            baselines.count(variant.name()) > 0, seeds,
                                            reference_columns));
  }
  ListRuns(runs, tables);
  if (baselines.empty()) return tables;

  const std::string baseline_label =
      own_baselines ? std::string("its baseline") : labels[spec.baseline()];
  tables.differences_heading = absl::StrCat(
      "Paired differences", own_baselines ? "" : absl::StrCat(" to ", baseline_label));
  tables.differences_note = absl::StrCat(
      "Seed by seed, variant − ", baseline_label, own_baselines ? " (column vs)" : "",
      " on the same seed (same partition, initialisation and client sampling): "
      "mean [min, max] over the seeds both finished (n=k where fewer have the metric).",
      accuracy ? " Accuracies in percentage points." : "",
      rounds_to ? absl::StrCat(" ", to_target, ": over the seeds where both reached it.") : "");
  TextTable& differences = tables.differences;
  differences.header = {"variant"};
  if (own_baselines) differences.header.push_back("vs");
  differences.header.push_back("seeds");
  for (const Metric& metric : spec.metrics()) differences.header.push_back(metric.label());
  differences.text_columns = own_baselines ? 2 : 1;
  for (const auto& variant : spec.variants()) {
    const std::string& baseline = BaselineOf(spec, variant);
    if (baseline == variant.name()) continue;
    const std::map<uint64_t, const RunRecord*> baseline_runs = RunsOf(runs, baseline);
    const std::set<uint64_t> baseline_seeds = FinishedSeeds(baseline_runs);
    const std::map<uint64_t, const RunRecord*> by_seed = RunsOf(runs, variant.name());
    size_t both = 0;
    for (uint64_t seed : FinishedSeeds(by_seed)) both += baseline_seeds.count(seed);
    std::vector<std::string>& cells = differences.rows.emplace_back();
    cells.push_back(variant.label());
    if (own_baselines) cells.push_back(labels[baseline]);
    cells.push_back(absl::StrCat(both));
    for (int m = 0; m < spec.metrics_size(); ++m) {
      cells.push_back(DifferenceCell(spec.metrics(m), m, by_seed, baseline_runs, both));
    }
  }
  return tables;
}

std::string TableMarkdown(const SweepSpec& spec, const TableContext& context,
                          const std::vector<RunRecord>& runs) {
  const SweepTables tables = ComputeTables(spec, context, runs);
  std::string md = absl::StrCat("# ", spec.title(), "\n\n");
  for (const std::string& note : spec.notes()) absl::StrAppend(&md, note, "\n\n");
  absl::StrAppend(&md, "Reproduce: `", context.command, "`\n\n", "Base spec: `", context.base_spec,
                  "`. ", tables.overview, "\n\n", "## Results\n\n", tables.results_note,
                  "\n\n", MarkdownTable(tables.results));
  if (!tables.differences_heading.empty()) {
    absl::StrAppend(&md, "\n## ", tables.differences_heading, "\n\n", tables.differences_note,
                    "\n\n", MarkdownTable(tables.differences));
  }
  absl::StrAppend(&md, MarkdownRunList("Stale runs", kStaleRunsNote, tables.stale),
                  MarkdownRunList("Failed and missing runs", "", tables.missing),
                  MarkdownRunList("Unreadable results", "", tables.problems));
  return md;
}

SweepCurves ComputeCurves(const SweepSpec& spec, const std::vector<RunRecord>& runs) {
  SweepCurves curves;
  curves.x_column = CurveXColumn(spec);
  const bool by_round = curves.x_column == "round";
  std::map<std::string, std::vector<VariantCurve>> diagnostics;
  for (int v = 0; v < spec.variants_size(); ++v) {
    const SweepSpec::Variant& variant = spec.variants(v);
    std::vector<const Series*> series;
    std::vector<const Series*> xs;
    std::map<std::string, std::vector<const Series*>> diagnostic_series;
    for (const auto& [seed, run] : RunsOf(runs, variant.name())) {
      if (run->status != RunStatus::kFinished) continue;
      // A run without the x column has no curve (LoadRunData lists the problem).
      if (!by_round && run->data.curve_x.empty()) continue;
      series.push_back(&run->data.curve);
      xs.push_back(&run->data.curve_x);
      for (const auto& [name, values] : run->data.diagnostics) {
        diagnostic_series[name].push_back(&values);
      }
    }
    if (series.empty()) continue;
    curves.variants.push_back(
        CurveOf(variant.label(), v, series, by_round ? std::vector<const Series*>{} : xs));
    for (const auto& [name, values] : diagnostic_series) {
      diagnostics[name].push_back(CurveOf(variant.label(), v, values, {}));
    }
  }
  for (const std::string& name : spec.diagnostics()) {
    auto it = diagnostics.find(name);
    if (it != diagnostics.end()) curves.diagnostics.push_back({name, std::move(it->second)});
  }
  return curves;
}

std::string CurvesJson(const SweepSpec& spec, const std::vector<RunRecord>& runs) {
  const SweepCurves curves = ComputeCurves(spec, runs);
  std::vector<std::string> variants;
  for (const VariantCurve& curve : curves.variants) {
    const Band& band = curve.band;
    variants.push_back(absl::StrCat(
        "{\"label\": ", fl::JsonString(curve.label), ", \"runs\": ", curve.runs,
        ", \"rounds\": ", JsonArray(band.rounds), ", \"x\": ", JsonArray(curve.x),
        ", \"mean\": ", JsonArray(band.mean), ", \"min\": ", JsonArray(band.min),
        ", \"max\": ", JsonArray(band.max), "}"));
  }
  std::vector<std::string> panels;
  for (const DiagnosticCurves& panel : curves.diagnostics) {
    std::vector<std::string> means;
    for (const VariantCurve& curve : panel.variants) {
      means.push_back(absl::StrCat("{\"label\": ", fl::JsonString(curve.label),
                                   ", \"runs\": ", curve.runs, ", \"rounds\": ",
                                   JsonArray(curve.band.rounds), ", \"mean\": ",
                                   JsonArray(curve.band.mean), "}"));
    }
    panels.push_back(absl::StrCat("{\"name\": ", fl::JsonString(panel.name), ", \"variants\": [",
                                  absl::StrJoin(means, ", "), "]}"));
  }
  return absl::StrCat("{\"title\": ", fl::JsonString(spec.title()),
                      ",\n \"column\": ", fl::JsonString(spec.curve_column()),
                      ",\n \"percent\": ", IsAccuracyColumn(spec.curve_column()) ? "true" : "false",
                      ",\n \"x_column\": ", fl::JsonString(curves.x_column),
                      ",\n \"x_label\": ", fl::JsonString(AxisLabel(curves.x_column)),
                      ",\n \"x_integer\": ", IsWholeNumberAxis(curves.x_column) ? "true" : "false",
                      ",\n \"variants\": [", absl::StrJoin(variants, ",\n  "),
                      "],\n \"diagnostics\": [", absl::StrJoin(panels, ",\n  "), "]}\n");
}

}  // namespace sweep
