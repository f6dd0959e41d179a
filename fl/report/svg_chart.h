#ifndef FL_REPORT_SVG_CHART_H_
#define FL_REPORT_SVG_CHART_H_

// Charts as inline SVG text, for the report pages: no script, every text
// escaped, sizes in pixels (a page may shrink them, never enlarge them).
//
//   LineChartOptions options;
//   options.title = "Test accuracy";
//   options.y_label = "test accuracy (%)";
//   std::string svg = LineChart(options, {{"FedAvg", rounds, accuracy}});
//
// The x axis is whatever the series' x values are (rounds, seconds): the caller
// names it with x_label.

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace fl::report {

// Series i is drawn in kPalette[i % size] unless it names its colour, dashed
// from i = 10 on (dotted from 20) so that series of one colour still differ. No
// greys: they are the axes' and the grid's.
inline constexpr std::array<const char*, 10> kPalette = {
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
    "#8c564b", "#e377c2", "#bcbd22", "#17becf", "#393b79"};

struct ChartSeries {
  std::string name;
  std::vector<double> x;
  std::vector<double> y;
  // A band around the line (e.g. the min and max over seeds): both empty, or
  // both as long as x.
  std::vector<double> low;
  std::vector<double> high;
  // Index into kPalette; -1: the series' position in the chart.
  int color = -1;
};

struct LineChartOptions {
  std::string title;
  std::string x_label = "round";
  std::string y_label;
  // Whether x holds whole numbers (rounds): then no tick falls between two.
  bool integer_x = true;
  // Whether more than one series get a legend. Off where the page gives it
  // elsewhere (each series' line still names it on hover).
  bool legend = true;
  // The whole picture but the legend, which adds rows below as it needs.
  int width = 540;
  int height = 300;
};

// An <svg class="chart"> of `series` on shared axes, with a title, axis labels,
// "nice" ticks, a grid and, for more than one series, a legend below the plot
// (never over the lines). Each
// series with any point is one <path class="series" data-series="NAME"
// data-points="N">, N its points drawn, with its band (if any) as a path of
// class "band" before it. A point whose x or y is not finite (NaN, a missing
// cell, an infinity) is not drawn and breaks the line; a point alone between
// two breaks is drawn as a dot. A series without points has no path; the legend
// says "(no data)" after its name.
std::string LineChart(const LineChartOptions& options, const std::vector<ChartSeries>& series);

// Tick values for an axis over [lo, hi]: a step of 1, 2, 2.5 or 5 times a power
// of ten, at least `min_step`, giving about `target` intervals; the first tick
// <= lo, the last >= hi. One tick when lo == hi; none for a range that is not
// finite or is reversed.
std::vector<double> NiceTicks(double lo, double hi, int target = 5, double min_step = 0.0);

// The labels of an axis's ticks (as NiceTicks makes them): the decimals the
// step needs, thousands and up with k, M, G or T ("2.5M"), and values below
// 0.001 in %g form.
std::vector<std::string> TickLabels(const std::vector<double>& ticks);

struct HeatmapOptions {
  std::string title;
  // What the rows and the columns are, in the plural: the axes' labels.
  std::string rows = "clients";
  std::string columns = "classes";
  // What a cell counts, for the caption and the colour scale.
  std::string value_label = "examples";
  // The column names along the top; empty: 0, 1, 2, ...
  std::vector<std::string> column_names;
  int width = 720;
  // The cells' total height at most. Rows get between 2 and 16 pixels; more rows
  // than 2-pixel rows fit are summed in bins of consecutive rows.
  int max_height = 360;
};

// An <svg class="heatmap" data-rows="R" data-columns="C" data-drawn-rows="D">
// of counts[r][c] (a row shorter than the longest counts 0 where it ends), one
// <rect class="cell"> per drawn row and column, darker for larger counts, a
// colour scale, and a caption that gives the sizes and, when rows were binned,
// how many each drawn row sums. Each drawn row's tooltip gives its rows and total.
std::string Heatmap(const HeatmapOptions& options,
                    const std::vector<std::vector<int64_t>>& counts);

}  // namespace fl::report

#endif  // FL_REPORT_SVG_CHART_H_
