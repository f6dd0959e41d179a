#include "tools/sweep/html_report.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "fl/report/html.h"
#include "fl/report/svg_chart.h"
#include "tools/sweep/metrics.h"

namespace sweep {
namespace {

using fedkit::sweep::SweepSpec;
using fl::report::ChartSeries;
using fl::report::HtmlEscape;
using fl::report::LineChart;
using fl::report::LineChartOptions;
using fl::report::Paragraph;
using fl::report::Section;

constexpr int kCurvesWidth = 1000;
constexpr int kCurvesHeight = 440;
constexpr int kDiagnosticWidth = 540;
constexpr int kDiagnosticHeight = 280;

// A variant's curve as a chart series in its own colour, against its x values:
// the mean over its seeds and, with `band`, their min and max; values times
// `scale`.
ChartSeries CurveSeries(const VariantCurve& curve, double scale, bool band) {
  ChartSeries series;
  series.name = absl::StrCat(curve.label, " (", curve.runs, curve.runs == 1 ? " seed)" : " seeds)");
  series.color = curve.variant;
  const Band& values = curve.band;
  for (size_t i = 0; i < values.rounds.size(); ++i) {
    series.x.push_back(curve.x[i]);
    series.y.push_back(scale * values.mean[i]);
    if (band) {
      series.low.push_back(scale * values.min[i]);
      series.high.push_back(scale * values.max[i]);
    }
  }
  return series;
}

std::string TableSection(absl::string_view id, absl::string_view heading,
                         absl::string_view note, const TextTable& table) {
  return Section(id, heading,
                 absl::StrCat("<p class=\"note\">", HtmlEscape(note), "</p>\n",
                              fl::report::Table(table.header, table.rows, table.text_columns)));
}

std::string Figure(absl::string_view svg) { return absl::StrCat("<figure>\n", svg, "</figure>\n"); }

std::string CurvesSection(const SweepSpec& spec, const SweepCurves& curves,
                          const std::vector<RunRecord>& runs) {
  if (curves.variants.empty()) {
    const bool finished = std::any_of(runs.begin(), runs.end(), [](const RunRecord& run) {
      return run.status == RunStatus::kFinished;
    });
    return Section("curves", "Curves",
                   Paragraph(finished ? absl::StrCat("No finished run has a curve against ",
                                                     curves.x_column,
                                                     ": see the unreadable results under Runs.")
                                      : std::string("No run has finished yet.")));
  }
  const bool percent = IsAccuracyColumn(spec.curve_column());
  LineChartOptions options;
  const std::string against =
      curves.x_column == "round" ? "" : absl::StrCat(" against ", AxisLabel(curves.x_column));
  options.title = absl::StrCat(spec.curve_column(), against,
                               ": mean over the seeds, band from min to max");
  options.y_label = absl::StrCat(spec.curve_column(), percent ? " (%)" : "");
  options.x_label = AxisLabel(curves.x_column);
  options.integer_x = IsWholeNumberAxis(curves.x_column);
  options.width = kCurvesWidth;
  options.height = kCurvesHeight;
  std::vector<ChartSeries> series;
  for (const VariantCurve& curve : curves.variants) {
    series.push_back(CurveSeries(curve, percent ? 100 : 1, /*band=*/curve.runs > 1));
  }
  std::string note;
  if (curves.x_column != "round") {
    note = Paragraph(absl::StrCat(
        "Each point is an evaluated round: the mean over the seeds of ", curves.x_column,
        IsCounterColumn(curves.x_column) ? " (its running sum)" : "", " and of ",
        spec.curve_column(), " there; the band spans ", spec.curve_column(),
        "'s min to max over the seeds."));
  }
  return Section("curves", "Curves", absl::StrCat(note, Figure(LineChart(options, series))));
}

std::string DiagnosticsSection(const SweepCurves& curves) {
  std::string figures;
  for (const DiagnosticCurves& panel : curves.diagnostics) {
    LineChartOptions options;
    options.title = absl::StrCat(panel.name, ": mean over the seeds");
    options.width = kDiagnosticWidth;
    options.height = kDiagnosticHeight;
    // The curves' legend above names the variants, in the same colours.
    options.legend = false;
    std::vector<ChartSeries> series;
    for (const VariantCurve& curve : panel.variants) {
      series.push_back(CurveSeries(curve, 1, /*band=*/false));
    }
    absl::StrAppend(&figures, Figure(LineChart(options, series)));
  }
  return Section("diagnostics", "Diagnostics",
                 absl::StrCat(Paragraph("Each variant in its colour of the curves above (hover "
                                        "over a line for its name); a variant whose runs lack "
                                        "the diagnostic has no line."),
                              "<div class=\"charts\">\n", figures, "</div>\n"));
}

// The runs under `heading` (with `note` first), each with a link to its log
// where it has one; nothing when there are none.
std::string RunList(absl::string_view heading, absl::string_view note,
                    const std::vector<RunNote>& notes) {
  if (notes.empty()) return "";
  std::string html = absl::StrCat("<h3>", HtmlEscape(heading), "</h3>\n");
  if (!note.empty()) absl::StrAppend(&html, "<p class=\"note\">", HtmlEscape(note), "</p>\n");
  absl::StrAppend(&html, "<ul>\n");
  for (const RunNote& run : notes) {
    absl::StrAppend(&html, "<li><code>", HtmlEscape(run.variant), "</code> seed ", run.seed, ": ",
                    HtmlEscape(run.text));
    if (!run.log.empty()) {
      absl::StrAppend(&html, ", see <a href=\"", HtmlEscape(run.log), "\">", HtmlEscape(run.log),
                      "</a>");
    }
    absl::StrAppend(&html, "</li>\n");
  }
  return absl::StrCat(html, "</ul>\n");
}

// A row per variant, a column per seed: each run's own report page, or what
// became of the run.
std::string RunsSection(const SweepSpec& spec, const TableContext& context,
                        const std::vector<RunRecord>& runs, const SweepTables& tables) {
  std::map<std::pair<std::string, uint64_t>, const RunRecord*> by_run;
  for (const RunRecord& run : runs) by_run[{run.variant, run.seed}] = &run;
  std::string html =
      "<p class=\"note\">Each run's own page: its curves, diagnostics, partition and spec.</p>\n"
      "<table>\n<thead><tr><th>variant</th>";
  for (uint64_t seed : context.seeds) absl::StrAppend(&html, "<th>seed ", seed, "</th>");
  absl::StrAppend(&html, "</tr></thead>\n<tbody>\n");
  for (const SweepSpec::Variant& variant : spec.variants()) {
    absl::StrAppend(&html, "<tr><td>", HtmlEscape(variant.label()), "</td>");
    for (uint64_t seed : context.seeds) {
      auto it = by_run.find({variant.name(), seed});
      std::string cell = StatusText(RunStatus::kNotRun);
      if (it != by_run.end()) {
        const RunRecord& run = *it->second;
        cell = run.report.empty()
                   ? HtmlEscape(StatusText(run.status))
                   : absl::StrCat("<a href=\"", HtmlEscape(run.report), "\">report</a>",
                                  run.stale.empty() ? "" : " †");
      }
      absl::StrAppend(&html, "<td>", cell, "</td>");
    }
    absl::StrAppend(&html, "</tr>\n");
  }
  absl::StrAppend(&html, "</tbody>\n</table>\n",
                  RunList("Stale runs", kStaleRunsNote, tables.stale),
                  RunList("Failed and missing runs", "", tables.missing),
                  RunList("Unreadable results", "", tables.problems));
  return Section("runs", "Runs", html);
}

}  // namespace

std::string SweepReportHtml(const SweepSpec& spec, const TableContext& context,
                            const std::vector<RunRecord>& runs) {
  const SweepTables tables = ComputeTables(spec, context, runs);
  const SweepCurves curves = ComputeCurves(spec, runs);
  std::vector<std::pair<std::string, std::string>> contents = {{"results", "Results"}};
  if (!tables.differences_heading.empty()) contents.emplace_back("differences", "Differences");
  contents.emplace_back("curves", "Curves");
  if (!curves.diagnostics.empty()) contents.emplace_back("diagnostics", "Diagnostics");
  contents.emplace_back("runs", "Runs");

  std::string body = absl::StrCat("<header>\n<h1>", HtmlEscape(spec.title()), "</h1>\n");
  for (const std::string& note : spec.notes()) absl::StrAppend(&body, Paragraph(note));
  absl::StrAppend(&body, "<p class=\"sub\">Reproduce: <code>", HtmlEscape(context.command),
                  "</code><br>Base spec: <code>", HtmlEscape(context.base_spec), "</code>. ",
                  HtmlEscape(tables.overview), "</p>\n", fl::report::Contents(contents),
                  "</header>\n");
  absl::StrAppend(&body, TableSection("results", "Results", tables.results_note, tables.results));
  if (!tables.differences_heading.empty()) {
    absl::StrAppend(&body, TableSection("differences", tables.differences_heading,
                                        tables.differences_note, tables.differences));
  }
  absl::StrAppend(&body, CurvesSection(spec, curves, runs));
  if (!curves.diagnostics.empty()) absl::StrAppend(&body, DiagnosticsSection(curves));
  absl::StrAppend(&body, RunsSection(spec, context, runs, tables));
  return fl::report::HtmlPage(absl::StrCat(spec.title(), ": sweep report"), body);
}

}  // namespace sweep
