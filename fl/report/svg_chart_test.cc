#include "fl/report/svg_chart.h"

#include <cmath>
#include <limits>
#include <regex>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fl::report {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

int Count(const std::string& text, const std::string& pattern) {
  const std::regex re(pattern);
  return static_cast<int>(std::distance(std::sregex_iterator(text.begin(), text.end(), re),
                                        std::sregex_iterator()));
}

// The first match's first group.
std::string Group(const std::string& text, const std::string& pattern) {
  std::smatch match;
  return std::regex_search(text, match, std::regex(pattern)) ? match[1].str() : "";
}

std::vector<double> Near(const std::vector<double>& values) {
  std::vector<double> rounded;
  for (double value : values) rounded.push_back(std::round(value * 1e6) / 1e6);
  return rounded;
}

TEST(NiceTicksTest, StepsOfOneTwoOrFiveCoverTheRange) {
  EXPECT_THAT(Near(NiceTicks(0, 1)), ElementsAre(0, 0.2, 0.4, 0.6, 0.8, 1));
  // 0.08 / 5 = 0.016: a step of 0.02, from below 0.63 to above 0.71.
  EXPECT_THAT(Near(NiceTicks(0.63, 0.71)), ElementsAre(0.62, 0.64, 0.66, 0.68, 0.7, 0.72));
  EXPECT_THAT(Near(NiceTicks(1, 100)), ElementsAre(0, 20, 40, 60, 80, 100));
  EXPECT_THAT(Near(NiceTicks(0, 10, 4)), ElementsAre(0, 2.5, 5, 7.5, 10));
  EXPECT_THAT(Near(NiceTicks(-3, 3, 3)), ElementsAre(-4, -2, 0, 2, 4));
}

TEST(NiceTicksTest, WholeNumberAxesNeverStepBelowTheMinimum) {
  EXPECT_THAT(Near(NiceTicks(1, 3, 5)), ElementsAre(1, 1.5, 2, 2.5, 3));
  EXPECT_THAT(Near(NiceTicks(1, 3, 5, 1.0)), ElementsAre(1, 2, 3));
}

TEST(NiceTicksTest, DegenerateRanges) {
  EXPECT_THAT(NiceTicks(2, 2), ElementsAre(2));
  EXPECT_TRUE(NiceTicks(3, 2).empty());
  EXPECT_TRUE(NiceTicks(kNaN, 2).empty());
  EXPECT_TRUE(NiceTicks(0, kInf).empty());
}

TEST(TickLabelsTest, DecimalsFromTheStepAndSuffixesForLargeNumbers) {
  EXPECT_THAT(TickLabels({0, 0.25, 0.5}), ElementsAre("0.00", "0.25", "0.50"));
  EXPECT_THAT(TickLabels({60, 70, 80}), ElementsAre("60", "70", "80"));
  EXPECT_THAT(TickLabels({0, 2.5, 5}), ElementsAre("0.0", "2.5", "5.0"));
  EXPECT_THAT(TickLabels({0, 5000, 10000}), ElementsAre("0", "5k", "10k"));
  EXPECT_THAT(TickLabels({0, 2e9, 4e9, 6e9}), ElementsAre("0", "2G", "4G", "6G"));
  EXPECT_THAT(TickLabels({0, 2.5e6, 5e6}), ElementsAre("0.0", "2.5M", "5.0M"));
  EXPECT_THAT(TickLabels({0, 1e-4, 2e-4}), ElementsAre("0", "0.0001", "0.0002"));
  EXPECT_THAT(TickLabels({-0.5, 0, 0.5}), ElementsAre("-0.5", "0.0", "0.5"));
  EXPECT_TRUE(TickLabels({}).empty());
}

LineChartOptions Options() {
  LineChartOptions options;
  options.title = "Accuracy";
  options.y_label = "test accuracy (%)";
  return options;
}

TEST(LineChartTest, OnePathPerSeriesWithItsNameColourAndPoints) {
  const std::string svg =
      LineChart(Options(), {{"FedAvg", {1, 2, 3, 4}, {50, 60, 65, 70}},
                            {"FedProx", {1, 2, 3}, {45, 58, 66}}});
  EXPECT_EQ(Count(svg, "<path class=\"series\""), 2);
  EXPECT_THAT(svg, HasSubstr("data-series=\"FedAvg\" data-points=\"4\""));
  EXPECT_THAT(svg, HasSubstr("data-series=\"FedProx\" data-points=\"3\""));
  const std::string fedavg = Group(svg, "data-series=\"FedAvg\"[^>]*d=\"([^\"]*)\"");
  EXPECT_EQ(Count(fedavg, "M"), 1);
  EXPECT_EQ(Count(fedavg, "L"), 3);
  EXPECT_EQ(Group(svg, "data-series=\"FedAvg\"[^>]*stroke=\"(#[0-9a-f]+)\""), kPalette[0]);
  EXPECT_EQ(Group(svg, "data-series=\"FedProx\"[^>]*stroke=\"(#[0-9a-f]+)\""), kPalette[1]);
  // Title, axis labels, a legend entry each.
  EXPECT_THAT(svg, HasSubstr(">Accuracy</text>"));
  EXPECT_THAT(svg, HasSubstr(">round</text>"));
  EXPECT_THAT(svg, HasSubstr(">test accuracy (%)</text>"));
  EXPECT_THAT(svg, HasSubstr(">FedAvg</text>"));
  EXPECT_THAT(svg, HasSubstr(">FedProx</text>"));
  EXPECT_THAT(svg, Not(HasSubstr("<script")));
}

TEST(LineChartTest, EachPointLandsOnTheTicksOfItsValues) {
  // Counting points cannot catch an axis drawn upside down or a scale off by a
  // tick: (2, 60) and (4, 70) must sit where the ticks labelled 2 and 60, 4 and
  // 70 are.
  const std::string svg = LineChart(Options(), {{"FedAvg", {1, 2, 3, 4}, {50, 60, 65, 70}}});
  auto tick_y = [&](const std::string& label) {
    return Group(svg, "<text x=\"[^\"]*\" y=\"([^\"]*)\" text-anchor=\"end\"[^>]*>" + label +
                          "</text>");
  };
  auto tick_x = [&](const std::string& label) {
    return Group(svg, "<text x=\"([^\"]*)\" y=\"[^\"]*\" text-anchor=\"middle\">" + label +
                          "</text>");
  };
  const std::string path = Group(svg, "data-series=\"FedAvg\"[^>]*d=\"([^\"]*)\"");
  std::vector<std::string> points;
  const std::regex point("[ML]([-0-9.]+,[-0-9.]+)");
  for (auto it = std::sregex_iterator(path.begin(), path.end(), point);
       it != std::sregex_iterator(); ++it) {
    points.push_back((*it)[1].str());
  }
  ASSERT_EQ(points.size(), 4u) << path;
  ASSERT_FALSE(tick_y("60").empty()) << svg;
  ASSERT_FALSE(tick_x("2").empty()) << svg;
  EXPECT_EQ(points[1], tick_x("2") + "," + tick_y("60"));
  EXPECT_EQ(points[3], tick_x("4") + "," + tick_y("70"));
  // Larger values higher up: SVG's y grows downwards.
  EXPECT_GT(std::stod(tick_y("60")), std::stod(tick_y("70")));
}

TEST(LineChartTest, ASeriesMayNameItsColour) {
  ChartSeries series{"only", {1, 2}, {1, 2}};
  series.color = 3;
  const std::string svg = LineChart(Options(), {series});
  EXPECT_EQ(Group(svg, "class=\"series\"[^>]*stroke=\"(#[0-9a-f]+)\""), kPalette[3]);
  EXPECT_THAT(svg, Not(HasSubstr("stroke-dasharray")));
}

TEST(LineChartTest, OnceThePaletteHasGoneRoundLinesAreDashed) {
  std::vector<ChartSeries> series;
  for (int i = 0; i < 12; ++i) series.push_back({"s" + std::to_string(i), {1, 2}, {1.0 * i, 2}});
  const std::string svg = LineChart(Options(), series);
  const std::string eleventh = "data-series=\"s10\"[^>]*stroke=\"(#[0-9a-f]+)\" stroke-dasharray";
  EXPECT_EQ(Group(svg, eleventh), kPalette[0]);
  EXPECT_EQ(Count(svg, "<path class=\"series\"[^>]*stroke-dasharray=\"7 4\""), 2);
  // The legend's swatches are dashed alike.
  EXPECT_EQ(Count(svg, "<line[^>]*stroke-dasharray=\"7 4\""), 2);
}

TEST(LineChartTest, TheLegendCanBeLeftToThePage) {
  LineChartOptions options = Options();
  options.legend = false;
  const std::string svg = LineChart(options, {{"a", {1, 2}, {1, 2}}, {"b", {1, 2}, {2, 1}}});
  EXPECT_EQ(Count(svg, "class=\"series\""), 2);
  EXPECT_THAT(svg, Not(HasSubstr(">a</text>")));
}

TEST(LineChartTest, MissingValuesBreakTheLine) {
  // Round 2 is missing and round 5 infinite: the point of round 1 stands alone
  // (a dot), rounds 3-4 are a segment of their own.
  const std::string svg =
      LineChart(Options(), {{"gappy", {1, 2, 3, 4, 5}, {1, kNaN, 3, 4, kInf}}});
  EXPECT_THAT(svg, HasSubstr("data-points=\"3\""));
  const std::string d = Group(svg, "class=\"series\"[^>]*d=\"([^\"]*)\"");
  EXPECT_EQ(Count(d, "M"), 2);
  EXPECT_EQ(Count(d, "L"), 1);
  EXPECT_EQ(Count(svg, "<circle class=\"dot\""), 1);
  EXPECT_THAT(svg, Not(HasSubstr("nan")));
  EXPECT_THAT(svg, Not(HasSubstr("inf")));
}

TEST(LineChartTest, ASeriesWithoutPointsHasNoPathButALegendEntry) {
  const std::string svg =
      LineChart(Options(), {{"empty", {1, 2}, {kNaN, kNaN}}, {"full", {1, 2}, {3, 4}}});
  EXPECT_EQ(Count(svg, "class=\"series\""), 1);
  EXPECT_THAT(svg, HasSubstr(">empty (no data)</text>"));
  // No series has a point: the plot says so.
  EXPECT_THAT(LineChart(Options(), {{"empty", {}, {}}}), HasSubstr(">no data</text>"));
  EXPECT_THAT(LineChart(Options(), {}), HasSubstr(">no data</text>"));
}

TEST(LineChartTest, BandsAreDrawnBeforeTheirLines) {
  ChartSeries series{"mean", {1, 2, 3}, {0.5, 0.6, 0.7}};
  series.low = {0.4, 0.5, 0.6};
  series.high = {0.6, kNaN, 0.8};
  const std::string svg = LineChart(Options(), {series});
  // The missing high at round 2 splits the band into two pieces.
  const std::string band = Group(svg, "class=\"band\"[^>]*d=\"([^\"]*)\"");
  EXPECT_EQ(Count(band, "Z"), 2);
  EXPECT_LT(svg.find("class=\"band\""), svg.find("class=\"series\""));
}

TEST(LineChartTest, EscapesEveryText) {
  LineChartOptions options;
  options.title = "a <b> & \"c\"";
  options.x_label = "x<";
  options.y_label = "y>";
  const std::string svg =
      LineChart(options, {{"<script>'s", {1, 2}, {1, 2}}, {"a&b", {1, 2}, {2, 1}}});
  EXPECT_THAT(svg, Not(HasSubstr("<b>")));
  EXPECT_THAT(svg, Not(HasSubstr("<script")));
  EXPECT_THAT(svg, HasSubstr("a &lt;b&gt; &amp; &quot;c&quot;"));
  EXPECT_THAT(svg, HasSubstr("data-series=\"&lt;script&gt;&#39;s\""));
  EXPECT_THAT(svg, HasSubstr(">x&lt;</text>"));
  EXPECT_THAT(svg, HasSubstr(">y&gt;</text>"));
  EXPECT_THAT(svg, HasSubstr(">&lt;script&gt;&#39;s</text>"));
  EXPECT_THAT(svg, HasSubstr(">a&amp;b</text>"));
}

TEST(LineChartTest, ALongLegendWrapsBelowThePlot) {
  const std::string one = LineChart(Options(), {{"a", {1, 2}, {1, 2}}});
  EXPECT_THAT(one, Not(HasSubstr(">a</text>")));  // the title names a single series
  std::vector<ChartSeries> many;
  for (int i = 0; i < 12; ++i) {
    many.push_back({"a rather long series name " + std::to_string(i), {1, 2}, {1.0 * i, 2.0}});
  }
  const std::string wrapped = LineChart(Options(), many);
  const double one_height = std::stod(Group(one, "height=\"([0-9.]+)\""));
  const double wrapped_height = std::stod(Group(wrapped, "height=\"([0-9.]+)\""));
  // 12 entries of about 235 pixels in a row of about 470: mostly two a row, in
  // rows of 18 pixels.
  EXPECT_GE(wrapped_height - one_height, 6 * 18);
  EXPECT_LE(wrapped_height - one_height, 8 * 18);
}

TEST(HeatmapTest, OneCellPerRowAndColumn) {
  HeatmapOptions options;
  options.title = "Partition";
  const std::string svg = Heatmap(options, {{5, 0, 1, 2}, {0, 3, 0, 0}, {1, 1, 1, 9}});
  EXPECT_THAT(svg, HasSubstr("data-rows=\"3\" data-columns=\"4\" data-drawn-rows=\"3\""));
  EXPECT_EQ(Count(svg, "<rect class=\"cell\""), 12);
  for (const char* label : {">0</text>", ">1</text>", ">2</text>", ">3</text>"}) {
    EXPECT_THAT(svg, HasSubstr(label));  // rows 0-2 and columns 0-3
  }
  EXPECT_THAT(svg, HasSubstr("3 clients \u00d7 4 classes; colour: examples, 0 to 9"));
  // The largest count is the darkest cell, 0 the lightest.
  EXPECT_EQ(Count(svg, "class=\"cell\"[^>]*fill=\"#3f007d\""), 1);
  EXPECT_EQ(Count(svg, "class=\"cell\"[^>]*fill=\"#fcfbfd\""), 4);
}

TEST(HeatmapTest, ManyRowsAreBinnedAndSaySo) {
  HeatmapOptions options;
  std::vector<std::vector<int64_t>> counts(1000, std::vector<int64_t>(10, 1));
  const std::string svg = Heatmap(options, counts);
  // 360 pixels hold 180 rows of 2: bins of 6 clients, 167 rows.
  EXPECT_THAT(svg, HasSubstr("data-rows=\"1000\" data-columns=\"10\" data-drawn-rows=\"167\""));
  EXPECT_EQ(Count(svg, "<rect class=\"cell\""), 1670);
  EXPECT_THAT(svg, HasSubstr("1000 clients \u00d7 10 classes, in 167 rows that each sum 6 "
                             "consecutive clients"));
  EXPECT_LE(std::stod(Group(svg, "height=\"([0-9.]+)\"")), 360 + 100);
  EXPECT_THAT(svg, HasSubstr("<title>0-5: 60 examples</title>"));
  // Row labels a round number of clients apart, wherever the bins fall.
  EXPECT_THAT(svg, HasSubstr(">50</text>"));
  EXPECT_THAT(svg, HasSubstr(">950</text>"));
  EXPECT_THAT(svg, Not(HasSubstr(">42</text>")));
  // The last bin holds the 4 clients left.
  EXPECT_THAT(svg, HasSubstr("<title>996-999: 40 examples</title>"));
}

TEST(HeatmapTest, FewRowsAreTallButNotHuge) {
  const std::string svg = Heatmap(HeatmapOptions(), {{1, 2}, {3, 4}});
  EXPECT_EQ(Group(svg, "<rect class=\"cell\"[^>]*height=\"([0-9.]+)\""), "16.0");
  EXPECT_THAT(Heatmap(HeatmapOptions(), {}), HasSubstr("data-rows=\"0\""));
}

}  // namespace
}  // namespace fl::report
