#include "fl/report/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "fl/report/html.h"

namespace fl::report {
namespace {

constexpr int kFontSize = 12;
// A generous average glyph width at kFontSize: for layout only, so that labels
// get room in any sans-serif font.
constexpr double kCharWidth = 7.0;
constexpr int kTitleHeight = 28;
constexpr int kLegendRowHeight = 18;
constexpr char kFontFamily[] = "system-ui, DejaVu Sans, sans-serif";
constexpr char kAxisColor[] = "#444";
constexpr char kGridColor[] = "#e8e8e8";
constexpr double kBandOpacity = 0.18;

std::string Px(double value) { return absl::StrFormat("%.1f", value); }

double TextWidth(const std::string& text) { return kCharWidth * text.size(); }

std::string SvgOpen(absl::string_view css_class, double width, double height,
                    absl::string_view label, absl::string_view attributes = "") {
  return absl::StrCat("<svg class=\"", css_class, "\" ", attributes, attributes.empty() ? "" : " ",
                      "xmlns=\"http://www.w3.org/2000/svg\" width=\"",
                      Px(width), "\" height=\"", Px(height), "\" viewBox=\"0 0 ", Px(width), " ",
                      Px(height), "\" font-family=\"", kFontFamily, "\" font-size=\"", kFontSize,
                      "\" role=\"img\" aria-label=\"", HtmlEscape(label), "\">\n");
}

// <text> at (x, y), escaped; `attributes` as they are.
std::string Text(double x, double y, absl::string_view text, absl::string_view attributes = "") {
  return absl::StrCat("<text x=\"", Px(x), "\" y=\"", Px(y), "\"",
                      attributes.empty() ? "" : " ", attributes, ">", HtmlEscape(text),
                      "</text>\n");
}

std::string Title(double x, absl::string_view title) {
  return Text(x, 18, title, "text-anchor=\"middle\" font-size=\"14\" font-weight=\"600\"");
}

// A label along a vertical axis, read bottom to top, centred on `y`.
std::string VerticalLabel(double y, absl::string_view text) {
  return absl::StrFormat(
      "<text transform=\"translate(14,%s) rotate(-90)\" text-anchor=\"middle\" "
      "fill=\"#333\">%s</text>\n",
      Px(y), HtmlEscape(text));
}

std::string Line(double x1, double y1, double x2, double y2, absl::string_view color) {
  return absl::StrCat("<line x1=\"", Px(x1), "\" y1=\"", Px(y1), "\" x2=\"", Px(x2), "\" y2=\"",
                      Px(y2), "\" stroke=\"", color, "\"/>\n");
}

struct Range {
  double lo = std::numeric_limits<double>::infinity();
  double hi = -std::numeric_limits<double>::infinity();
  void Add(double value) {
    if (!std::isfinite(value)) return;
    lo = std::min(lo, value);
    hi = std::max(hi, value);
  }
  bool empty() const { return lo > hi; }
};

// Data coordinates to pixels inside the plot area.
struct Frame {
  double left = 0, top = 0, width = 0, height = 0;
  double x0 = 0, x1 = 1, y0 = 0, y1 = 1;
  double X(double x) const { return left + (x - x0) / (x1 - x0) * width; }
  double Y(double y) const { return top + height - (y - y0) / (y1 - y0) * height; }
};

// How a series is drawn: its palette colour and, once the palette has gone
// round, a dash pattern, so that series 0 and 10 still differ.
struct Style {
  const char* color;
  const char* dash;  // a stroke-dasharray; empty: solid
};

Style StyleOf(const ChartSeries& series, size_t position) {
  static constexpr const char* kDashes[] = {"", "7 4", "2 3"};
  const size_t index = series.color >= 0 ? static_cast<size_t>(series.color) : position;
  return {kPalette[index % kPalette.size()],
          kDashes[index / kPalette.size() % (sizeof(kDashes) / sizeof(kDashes[0]))]};
}

std::string DashAttribute(const Style& style) {
  return *style.dash == '\0' ? "" : absl::StrCat(" stroke-dasharray=\"", style.dash, "\"");
}

bool HasBand(const ChartSeries& series) {
  return !series.low.empty() && series.low.size() == series.x.size() &&
         series.high.size() == series.x.size();
}

bool Drawn(const ChartSeries& series, size_t i) {
  return i < series.y.size() && std::isfinite(series.x[i]) && std::isfinite(series.y[i]);
}

bool BandDrawn(const ChartSeries& series, size_t i) {
  return std::isfinite(series.x[i]) && std::isfinite(series.low[i]) &&
         std::isfinite(series.high[i]);
}

// The maximal runs [begin, end) of consecutive indices below `n` where `ok` holds.
template <typename Predicate>
std::vector<std::pair<size_t, size_t>> Runs(size_t n, Predicate ok) {
  std::vector<std::pair<size_t, size_t>> runs;
  for (size_t i = 0; i < n;) {
    if (!ok(i)) {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < n && ok(end)) ++end;
    runs.emplace_back(i, end);
    i = end;
  }
  return runs;
}

// The line of `series` (a run of one point is a dot instead); nothing when it
// has no point to draw.
std::string SeriesMarkup(const Frame& frame, const ChartSeries& series, const Style& style) {
  std::string path;
  std::string dots;
  int points = 0;
  for (const auto& [begin, end] :
       Runs(series.x.size(), [&](size_t i) { return Drawn(series, i); })) {
    points += static_cast<int>(end - begin);
    if (end - begin == 1) {
      absl::StrAppend(&dots, "<circle class=\"dot\" cx=\"", Px(frame.X(series.x[begin])),
                      "\" cy=\"", Px(frame.Y(series.y[begin])), "\" r=\"2.5\" fill=\"",
                      style.color, "\"/>\n");
    }
    for (size_t i = begin; i < end; ++i) {
      absl::StrAppend(&path, path.empty() ? "" : " ", i == begin ? "M" : "L",
                      Px(frame.X(series.x[i])), ",", Px(frame.Y(series.y[i])));
    }
  }
  if (points == 0) return "";
  const std::string name = HtmlEscape(series.name);
  return absl::StrCat("<path class=\"series\" data-series=\"", name, "\" data-points=\"", points,
                      "\" d=\"", path, "\" fill=\"none\" stroke=\"", style.color, "\"",
                      DashAttribute(style),
                      " stroke-width=\"1.8\" stroke-linejoin=\"round\"><title>", name,
                      "</title></path>\n", dots);
}

std::string BandMarkup(const Frame& frame, const ChartSeries& series, const char* color) {
  std::string path;
  for (const auto& [begin, end] :
       Runs(series.x.size(), [&](size_t i) { return BandDrawn(series, i); })) {
    for (size_t i = begin; i < end; ++i) {
      absl::StrAppend(&path, i == begin ? (path.empty() ? "M" : " M") : " L",
                      Px(frame.X(series.x[i])), ",", Px(frame.Y(series.high[i])));
    }
    for (size_t i = end; i-- > begin;) {
      absl::StrAppend(&path, " L", Px(frame.X(series.x[i])), ",", Px(frame.Y(series.low[i])));
    }
    absl::StrAppend(&path, " Z");
  }
  if (path.empty()) return "";
  return absl::StrCat("<path class=\"band\" data-series=\"", HtmlEscape(series.name), "\" d=\"",
                      path, "\" fill=\"", color, "\" fill-opacity=\"", kBandOpacity,
                      "\" stroke=\"none\"/>\n");
}

// The legend below the plot, wrapped to `width`: the markup and the rows it takes.
std::pair<std::string, int> Legend(const std::vector<ChartSeries>& series,
                                   const std::vector<bool>& empty, double left, double top,
                                   double width) {
  std::string markup;
  double x = left;
  int rows = series.empty() ? 0 : 1;
  for (size_t i = 0; i < series.size(); ++i) {
    const std::string name =
        empty[i] ? absl::StrCat(series[i].name, " (no data)") : series[i].name;
    const double item = 24 + TextWidth(name) + 18;
    if (x > left && x + item > left + width) {
      x = left;
      ++rows;
    }
    const double y = top + (rows - 0.5) * kLegendRowHeight;
    const Style style = StyleOf(series[i], i);
    if (HasBand(series[i])) {
      absl::StrAppend(&markup, "<rect x=\"", Px(x), "\" y=\"", Px(y - 5), "\" width=\"18\" ",
                      "height=\"10\" fill=\"", style.color, "\" fill-opacity=\"", kBandOpacity,
                      "\"/>\n");
    }
    absl::StrAppend(&markup, "<line x1=\"", Px(x), "\" y1=\"", Px(y), "\" x2=\"", Px(x + 18),
                    "\" y2=\"", Px(y), "\" stroke=\"", style.color, "\"", DashAttribute(style),
                    " stroke-width=\"2.5\"/>\n", Text(x + 24, y, name, "dy=\"0.35em\""));
    x += item;
  }
  return {markup, rows};
}

// Widens a range of one value (or none) so that it can be an axis.
void Widen(Range& range) {
  if (range.empty()) {
    range.lo = 0;
    range.hi = 1;
  } else if (range.lo == range.hi) {
    const double pad = range.lo == 0 ? 1.0 : std::fabs(range.lo) * 0.1;
    range.lo -= pad;
    range.hi += pad;
  }
}

// The 1, 2, 2.5 or 5 times a power of ten that is the smallest >= `raw`.
double NiceStep(double raw) {
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double multiple : {1.0, 2.0, 2.5, 5.0}) {
    if (multiple * power >= raw * (1 - 1e-9)) return multiple * power;
  }
  return 10 * power;
}

// The smallest 1, 2 or 5 times a power of ten (>= 1) that is >= `raw`.
size_t WholeStep(double raw) {
  for (size_t power = 1;; power *= 10) {
    for (size_t multiple : {1, 2, 5}) {
      if (multiple * power >= raw) return multiple * power;
    }
  }
}

// The fewest decimals (up to 9) that write `value` exactly.
int DecimalsOf(double value) {
  for (int decimals = 0; decimals < 9; ++decimals) {
    const double scaled = std::fabs(value) * std::pow(10.0, decimals);
    if (std::fabs(scaled - std::round(scaled)) < 1e-6 * std::max(1.0, scaled)) return decimals;
  }
  return 9;
}

// Three stops from near white to deep purple (not a series colour).
std::string CellColor(double t) {
  static constexpr double kStops[3][3] = {{252, 251, 253}, {158, 154, 200}, {63, 0, 125}};
  t = std::clamp(t, 0.0, 1.0);
  const int segment = t < 0.5 ? 0 : 1;
  const double u = t < 0.5 ? t * 2 : (t - 0.5) * 2;
  int rgb[3];
  for (int c = 0; c < 3; ++c) {
    rgb[c] = static_cast<int>(std::lround(kStops[segment][c] +
                                          u * (kStops[segment + 1][c] - kStops[segment][c])));
  }
  return absl::StrFormat("#%02x%02x%02x", rgb[0], rgb[1], rgb[2]);
}

}  // namespace

std::vector<double> NiceTicks(double lo, double hi, int target, double min_step) {
  if (!std::isfinite(lo) || !std::isfinite(hi) || hi < lo) return {};
  if (hi == lo) return {lo};
  const double step = std::max(NiceStep((hi - lo) / std::max(1, target)), min_step);
  const double first = std::floor(lo / step + 1e-9);
  std::vector<double> ticks;
  // Multiples of the step (not sums of it), so that 0.1 * 3 is the tick nearest 0.3.
  for (double k = first; ticks.size() < 1000; ++k) {
    const double tick = std::fabs(k) < 1e-9 ? 0.0 : k * step;
    ticks.push_back(tick);
    if (tick >= hi - step * 1e-9) break;
  }
  return ticks;
}

std::vector<std::string> TickLabels(const std::vector<double>& ticks) {
  if (ticks.empty()) return {};
  double largest = 0;
  for (double tick : ticks) largest = std::max(largest, std::fabs(tick));
  std::vector<std::string> labels;
  if (largest > 0 && largest < 1e-3) {
    for (double tick : ticks) labels.push_back(absl::StrFormat("%g", tick));
    return labels;
  }
  double unit = 1;
  const char* suffix = "";
  if (largest >= 1e4) {
    for (const auto& [size, name] : {std::pair<double, const char*>{1e3, "k"},
                                     {1e6, "M"}, {1e9, "G"}, {1e12, "T"}}) {
      if (largest >= size) {
        unit = size;
        suffix = name;
      }
    }
  }
  const double step = ticks.size() > 1 ? ticks[1] - ticks[0] : ticks[0];
  const int decimals = DecimalsOf(step / unit);
  for (double tick : ticks) {
    labels.push_back(absl::StrFormat("%.*f%s", decimals, tick / unit, tick == 0 ? "" : suffix));
  }
  return labels;
}

std::string LineChart(const LineChartOptions& options, const std::vector<ChartSeries>& series) {
  Range x_range;
  Range y_range;
  std::vector<bool> empty;
  for (const ChartSeries& one : series) {
    bool any = false;
    for (size_t i = 0; i < one.x.size(); ++i) {
      if (!Drawn(one, i)) continue;
      any = true;
      x_range.Add(one.x[i]);
      y_range.Add(one.y[i]);
      if (HasBand(one) && BandDrawn(one, i)) {
        y_range.Add(one.low[i]);
        y_range.Add(one.high[i]);
      }
    }
    empty.push_back(!any);
  }
  const bool no_data = x_range.empty();
  Widen(x_range);
  Widen(y_range);
  const std::vector<double> y_ticks = NiceTicks(y_range.lo, y_range.hi, 5);
  const std::vector<std::string> y_labels = TickLabels(y_ticks);
  double widest = 0;
  for (const std::string& label : y_labels) widest = std::max(widest, TextWidth(label));

  Frame frame;
  frame.left = 26 + widest + 8;
  frame.top = kTitleHeight + 4;
  frame.width = options.width - frame.left - 18;
  frame.height = options.height - frame.top - 42;
  frame.x0 = x_range.lo;
  frame.x1 = x_range.hi;
  frame.y0 = y_ticks.front();
  frame.y1 = y_ticks.back();
  std::vector<double> x_ticks;
  for (double tick : NiceTicks(frame.x0, frame.x1, std::max(2, static_cast<int>(frame.width / 90)),
                               options.integer_x ? 1.0 : 0.0)) {
    const double slack = (frame.x1 - frame.x0) * 1e-9;
    if (tick >= frame.x0 - slack && tick <= frame.x1 + slack) x_ticks.push_back(tick);
  }
  const std::vector<std::string> x_labels = TickLabels(x_ticks);

  // One series needs no legend: the title names it.
  const auto [legend, legend_rows] =
      options.legend && series.size() > 1
          ? Legend(series, empty, frame.left, options.height, options.width - 8 - frame.left)
          : std::pair<std::string, int>{"", 0};
  const double height = options.height + legend_rows * kLegendRowHeight + 4;
  std::string svg = SvgOpen("chart", options.width, height, options.title);
  absl::StrAppend(&svg, Title(frame.left + frame.width / 2, options.title));
  for (size_t i = 0; i < y_ticks.size(); ++i) {
    const double y = frame.Y(y_ticks[i]);
    absl::StrAppend(&svg, Line(frame.left, y, frame.left + frame.width, y, kGridColor),
                    Line(frame.left - 4, y, frame.left, y, kAxisColor),
                    Text(frame.left - 7, y, y_labels[i], "text-anchor=\"end\" dy=\"0.35em\""));
  }
  const double bottom = frame.top + frame.height;
  for (size_t i = 0; i < x_ticks.size(); ++i) {
    const double x = frame.X(x_ticks[i]);
    absl::StrAppend(&svg, Line(x, frame.top, x, bottom, kGridColor),
                    Line(x, bottom, x, bottom + 4, kAxisColor),
                    Text(x, bottom + 17, x_labels[i], "text-anchor=\"middle\""));
  }
  absl::StrAppend(&svg, Line(frame.left, frame.top, frame.left, bottom, kAxisColor),
                  Line(frame.left, bottom, frame.left + frame.width, bottom, kAxisColor),
                  Text(frame.left + frame.width / 2, bottom + 34, options.x_label,
                       "text-anchor=\"middle\" fill=\"#333\""),
                  VerticalLabel(frame.top + frame.height / 2, options.y_label));
  // Bands first, so that no band covers another series' line.
  for (size_t i = 0; i < series.size(); ++i) {
    if (HasBand(series[i])) {
      absl::StrAppend(&svg, BandMarkup(frame, series[i], StyleOf(series[i], i).color));
    }
  }
  for (size_t i = 0; i < series.size(); ++i) {
    absl::StrAppend(&svg, SeriesMarkup(frame, series[i], StyleOf(series[i], i)));
  }
  if (no_data) {
    absl::StrAppend(&svg, Text(frame.left + frame.width / 2, frame.top + frame.height / 2,
                               "no data", "class=\"empty\" text-anchor=\"middle\" fill=\"#888\""));
  }
  return absl::StrCat(svg, legend, "</svg>\n");
}

std::string Heatmap(const HeatmapOptions& options,
                    const std::vector<std::vector<int64_t>>& counts) {
  constexpr double kMinRowHeight = 2;
  constexpr double kMaxRowHeight = 16;
  const size_t rows = counts.size();
  size_t columns = 0;
  for (const std::vector<int64_t>& row : counts) columns = std::max(columns, row.size());
  // Rows per drawn row: as few as keep every drawn row kMinRowHeight high.
  const size_t fit = std::max<size_t>(1, static_cast<size_t>(options.max_height / kMinRowHeight));
  const size_t bin = rows <= fit ? 1 : (rows + fit - 1) / fit;
  const size_t drawn = (rows + bin - 1) / bin;
  std::vector<std::vector<int64_t>> cells(drawn, std::vector<int64_t>(columns, 0));
  int64_t largest = 0;
  for (size_t r = 0; r < rows; ++r) {
    for (size_t c = 0; c < counts[r].size(); ++c) {
      cells[r / bin][c] += counts[r][c];
      largest = std::max(largest, cells[r / bin][c]);
    }
  }
  const double row_height =
      drawn == 0 ? 0
                 : std::clamp(static_cast<double>(options.max_height) / drawn, kMinRowHeight,
                              kMaxRowHeight);
  const std::string last_row = absl::StrCat(rows == 0 ? 0 : rows - 1);
  const double left = 26 + TextWidth(last_row) + 8;
  const double top = kTitleHeight + 18;
  const double scale_width = 90;
  const double plot_width = options.width - left - scale_width;
  const double cell_width = columns == 0 ? 0 : plot_width / columns;
  const double plot_height = drawn * row_height;
  // The colour scale keeps a readable size beside a plot of a few rows.
  const double scale_height = std::clamp(plot_height, 60.0, 140.0);
  const double height = top + std::max(plot_height, scale_height) + 48;

  // The data attributes are for tests and scripts reading the page.
  std::string svg = SvgOpen("heatmap", options.width, height, options.title,
                            absl::StrCat("data-rows=\"", rows, "\" data-columns=\"", columns,
                                         "\" data-drawn-rows=\"", drawn, "\""));
  absl::StrAppend(&svg, Title(left + plot_width / 2, options.title));
  // A label every so many columns and rows, so that neighbours never overlap.
  const size_t column_every = cell_width <= 0 ? 1 : WholeStep(24 / cell_width);
  for (size_t c = 0; c < columns; c += column_every) {
    const std::string name =
        c < options.column_names.size() ? options.column_names[c] : absl::StrCat(c);
    absl::StrAppend(&svg, Text(left + (c + 0.5) * cell_width, top - 5, name,
                               "text-anchor=\"middle\" font-size=\"11\""));
  }
  // Row labels on the rows' own scale (binned or not), a round number apart.
  const double row_pixels = bin == 0 || row_height <= 0 ? 1 : row_height / bin;
  const size_t row_every = WholeStep(14 / row_pixels);
  for (size_t r = 0; r < rows; r += row_every) {
    absl::StrAppend(&svg, Text(left - 5, top + (r + 0.5) * row_pixels, absl::StrCat(r),
                               "text-anchor=\"end\" dy=\"0.35em\" font-size=\"11\""));
  }
  absl::StrAppend(&svg, "<g shape-rendering=\"crispEdges\">\n");
  for (size_t d = 0; d < drawn; ++d) {
    const size_t first = d * bin;
    const size_t last = std::min(rows, first + bin) - 1;
    int64_t total = 0;
    for (int64_t count : cells[d]) total += count;
    absl::StrAppend(&svg, "<g><title>",
                    HtmlEscape(absl::StrCat(first, last > first ? absl::StrCat("-", last) : "",
                                            ": ", total, " ", options.value_label)),
                    "</title>");
    for (size_t c = 0; c < columns; ++c) {
      const double t = largest == 0 ? 0 : static_cast<double>(cells[d][c]) / largest;
      absl::StrAppend(&svg, "<rect class=\"cell\" x=\"", Px(left + c * cell_width), "\" y=\"",
                      Px(top + d * row_height), "\" width=\"", Px(cell_width), "\" height=\"",
                      Px(row_height), "\" fill=\"", CellColor(t), "\"/>");
    }
    absl::StrAppend(&svg, "</g>\n");
  }
  absl::StrAppend(&svg, "</g>\n<rect x=\"", Px(left), "\" y=\"", Px(top), "\" width=\"",
                  Px(plot_width), "\" height=\"", Px(plot_height),
                  "\" fill=\"none\" stroke=\"#bbb\"/>\n");
  // The colour scale: `steps` blocks from the largest count (top) down to 0.
  constexpr int kSteps = 10;
  const double scale_left = left + plot_width + 14;
  const double block = scale_height / kSteps;
  for (int i = 0; i < kSteps; ++i) {
    absl::StrAppend(&svg, "<rect x=\"", Px(scale_left), "\" y=\"", Px(top + i * block),
                    "\" width=\"12\" height=\"", Px(block + 0.5), "\" fill=\"",
                    CellColor(1.0 - (i + 0.5) / kSteps), "\"/>\n");
  }
  absl::StrAppend(&svg, Text(scale_left + 16, top + 4, absl::StrCat(largest), "dy=\"0.35em\""),
                  Text(scale_left + 16, top + kSteps * block - 4, "0", "dy=\"0.35em\""),
                  Text(scale_left, top - 5, options.value_label, "font-size=\"11\""));
  absl::StrAppend(&svg,
                  Text(left + plot_width / 2, top + plot_height + 16, options.columns,
                       "text-anchor=\"middle\" fill=\"#333\""),
                  VerticalLabel(top + plot_height / 2, options.rows));
  std::string caption = absl::StrCat(rows, " ", options.rows, " \u00d7 ", columns, " ",
                                     options.columns);
  if (bin > 1) {
    absl::StrAppend(&caption, ", in ", drawn, " rows that each sum ", bin, " consecutive ",
                    options.rows);
  }
  absl::StrAppend(&caption, "; colour: ", options.value_label, ", 0 to ", largest);
  absl::StrAppend(&svg, Text(left, height - 10, caption,
                             "class=\"caption\" fill=\"#555\""),
                  "</svg>\n");
  return svg;
}

}  // namespace fl::report
