#include "tools/sweep/metrics.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sweep {
namespace {

using ::testing::HasSubstr;

// The runner's layout: fixed columns, then diagnostics sorted by name; a
// diagnostic that appeared at round 2 is empty in round 1's row.
constexpr char kMetricsCsv[] =
    "round,test_accuracy,test_loss,train_loss,clients,seconds,eta_g\n"
    "1,0.70,0.90,1.2,4,0.5,\n"
    "2,0.84,0.60,0.8,4,1.0,1.5\n"
    "3,0.82,0.55,0.7,4,1.5,2\n"
    "4,0.86,0.58,0.6,4,2.0,nan\n";

Series Column(absl::string_view csv, absl::string_view column) {
  absl::StatusOr<CsvTable> table = ParseCsv(csv, "metrics.csv");
  EXPECT_TRUE(table.ok()) << table.status();
  absl::StatusOr<Series> series = ColumnSeries(*table, column, "metrics.csv");
  EXPECT_TRUE(series.ok()) << series.status();
  return series.value_or(Series{});
}

Metric MakeMetric(Metric::Kind kind, absl::string_view column = "") {
  Metric metric;
  metric.set_kind(kind);
  metric.set_column(std::string(column));
  FillDefaults(metric);
  return metric;
}

double Value(const Metric& metric, const Series& series) {
  MetricValue value = ComputeMetric(metric, series);
  EXPECT_TRUE(value.available);
  return value.value.value_or(NAN);
}

TEST(MetricsTest, ReadsColumnsByNameAndSkipsEmptyAndNanCells) {
  const Series accuracy = Column(kMetricsCsv, "test_accuracy");
  ASSERT_EQ(accuracy.size(), 4u);
  EXPECT_EQ(accuracy[3].round, 4);
  EXPECT_DOUBLE_EQ(accuracy[3].value, 0.86);
  const Series eta = Column(kMetricsCsv, "eta_g");
  ASSERT_EQ(eta.size(), 2u);
  EXPECT_EQ(eta[0].round, 2);
  EXPECT_DOUBLE_EQ(eta[1].value, 2.0);
}

TEST(MetricsTest, ErrorsNameTheFileAndTheProblem) {
  absl::StatusOr<CsvTable> ragged = ParseCsv("round,test_accuracy\n1,0.5\n2,0.6,7\n", "m.csv");
  ASSERT_FALSE(ragged.ok());
  EXPECT_EQ(ragged.status().message(), "m.csv:3: 3 cells, the header has 2");
  absl::StatusOr<CsvTable> table = ParseCsv(kMetricsCsv, "m.csv");
  ASSERT_TRUE(table.ok());
  EXPECT_EQ(ColumnSeries(*table, "gamma", "m.csv").status().message(),
            "m.csv: no column \"gamma\"");
}

TEST(MetricsTest, FinalBestAndLastKMean) {
  const Series accuracy = Column(kMetricsCsv, "test_accuracy");
  EXPECT_DOUBLE_EQ(Value(MakeMetric(Metric::FINAL), accuracy), 0.86);
  EXPECT_DOUBLE_EQ(Value(MakeMetric(Metric::BEST), accuracy), 0.86);
  Metric last2 = MakeMetric(Metric::LAST_K_MEAN);
  last2.set_k(2);
  EXPECT_DOUBLE_EQ(Value(last2, accuracy), (0.82 + 0.86) / 2);
  // k = 10 (the default) over 4 rows: the mean of all 4.
  EXPECT_DOUBLE_EQ(Value(MakeMetric(Metric::LAST_K_MEAN), accuracy),
                   (0.70 + 0.84 + 0.82 + 0.86) / 4);
}

TEST(MetricsTest, BestOfALossIsItsMinimum) {
  const Series loss = Column(kMetricsCsv, "test_loss");
  EXPECT_DOUBLE_EQ(Value(MakeMetric(Metric::BEST, "test_loss"), loss), 0.55);
  Metric highest = MakeMetric(Metric::BEST, "test_loss");
  highest.set_lower_is_better(false);
  EXPECT_DOUBLE_EQ(Value(highest, loss), 0.90);
}

TEST(MetricsTest, RoundsToIsTheFirstEvaluatedRoundThatReachesTheTarget) {
  const Series accuracy = Column(kMetricsCsv, "test_accuracy");
  Metric metric = MakeMetric(Metric::ROUNDS_TO);
  metric.set_target(0.83);
  EXPECT_EQ(Value(metric, accuracy), 2);
  metric.set_target(0.86);  // reached exactly, at the last round
  EXPECT_EQ(Value(metric, accuracy), 4);
  metric.set_target(0.87);
  const MetricValue never = ComputeMetric(metric, accuracy);
  EXPECT_TRUE(never.available);
  EXPECT_FALSE(never.value.has_value());

  Metric loss = MakeMetric(Metric::ROUNDS_TO, "test_loss");
  loss.set_target(0.58);
  EXPECT_EQ(Value(loss, Column(kMetricsCsv, "test_loss")), 3);
}

TEST(MetricsTest, SumIsTheTotalOverTheRows) {
  const Metric sum = MakeMetric(Metric::SUM, "clients");
  EXPECT_EQ(sum.label(), "total clients");
  EXPECT_EQ(MetricName(sum), "sum_clients");
  EXPECT_DOUBLE_EQ(Value(sum, Column(kMetricsCsv, "clients")), 16);
  // eta_g: empty in round 1, NaN in round 4.
  EXPECT_DOUBLE_EQ(Value(MakeMetric(Metric::SUM, "eta_g"), Column(kMetricsCsv, "eta_g")), 3.5);
}

TEST(MetricsTest, NoRowsIsNotAvailable) {
  EXPECT_FALSE(ComputeMetric(MakeMetric(Metric::FINAL), {}).available);
  EXPECT_FALSE(ComputeMetric(MakeMetric(Metric::LAST_K_MEAN), {}).available);
}

TEST(MetricsTest, DefaultsLabelsAndNames) {
  Metric rounds = MakeMetric(Metric::ROUNDS_TO);
  rounds.set_target(0.85);
  rounds.clear_label();
  FillDefaults(rounds);
  EXPECT_EQ(rounds.label(), "rounds to 85%");
  EXPECT_EQ(MetricName(rounds), "rounds_to_0.85_test_accuracy");
  const Metric last = MakeMetric(Metric::LAST_K_MEAN);
  EXPECT_EQ(last.label(), "last 10 mean");
  EXPECT_EQ(MetricName(last), "last10_mean_test_accuracy");
  const Metric loss = MakeMetric(Metric::FINAL, "test_loss");
  EXPECT_EQ(loss.label(), "final test_loss");
  EXPECT_TRUE(loss.lower_is_better());
  EXPECT_EQ(MetricName(loss), "final_test_loss");
  Metric least_accuracy;
  least_accuracy.set_kind(Metric::BEST);
  least_accuracy.set_lower_is_better(true);
  FillDefaults(least_accuracy);
  EXPECT_EQ(MetricName(least_accuracy), "min_test_accuracy");
}

TEST(MetricsTest, DiagnosticsMatchByNameOrPrefixedName) {
  const std::vector<std::string> header = {"round", "elastic/zeta_max", "elastic/zeta_mean",
                                           "eta_g"};
  EXPECT_EQ(FindDiagnosticColumn(header, "zeta_mean"), "elastic/zeta_mean");
  EXPECT_EQ(FindDiagnosticColumn(header, "eta_g"), "eta_g");
  EXPECT_EQ(FindDiagnosticColumn(header, "gamma"), std::nullopt);
}

TEST(MetricsTest, SummaryNumbers) {
  constexpr char kSummary[] =
      "{\n  \"rounds\": 200,\n  \"wall_seconds\": 114.369,\n  \"peak_rss_mb\": 399.0,\n"
      "  \"threads\": {\"cores\": 2}\n}\n";
  EXPECT_EQ(SummaryNumber(kSummary, "wall_seconds"), 114.369);
  EXPECT_EQ(SummaryNumber(kSummary, "peak_rss_mb"), 399.0);
  EXPECT_EQ(SummaryNumber(kSummary, "best_round"), std::nullopt);
}

TEST(MetricsTest, LoadsARunFolder) {
  const std::filesystem::path dir = std::filesystem::path(std::getenv("TEST_TMPDIR")) / "run";
  const std::string log = dir.string() + ".log";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "metrics.csv") << kMetricsCsv;
  std::ofstream(dir / "summary.json") << "{\"wall_seconds\": 3.5, \"peak_rss_mb\": 120.0}";
  std::ofstream(dir / "diagnostics.csv") << "round,elastic/zeta_mean\n1,1.25\n2,1.5\n";
  fedkit::sweep::SweepSpec spec;
  *spec.add_metrics() = MakeMetric(Metric::FINAL);
  *spec.add_metrics() = MakeMetric(Metric::FINAL, "no_such_column");
  spec.set_curve_column("test_accuracy");
  spec.add_diagnostics("zeta_mean");
  spec.add_diagnostics("gamma");
  // Without the sweep's trailer in a log (a run it did not start): summary.json's.
  RunData data = LoadRunData(dir.string(), log, spec);
  EXPECT_EQ(data.wall_seconds, 3.5);
  EXPECT_EQ(data.peak_rss_mb, 120.0);
  EXPECT_DOUBLE_EQ(data.metrics[0].value.value_or(0), 0.86);
  EXPECT_FALSE(data.metrics[1].available);
  ASSERT_EQ(data.problems.size(), 1u);
  EXPECT_THAT(data.problems[0], HasSubstr("metrics.csv: no column \"no_such_column\""));
  EXPECT_EQ(data.curve.size(), 4u);
  ASSERT_EQ(data.diagnostics.count("zeta_mean"), 1u);
  EXPECT_EQ(data.diagnostics.at("zeta_mean").size(), 2u);
  EXPECT_EQ(data.diagnostics.count("gamma"), 0u);

  // The process's wall time from the trailer; the peak RSS still from the summary.
  std::ofstream(log) << "round 1/4 ...\n" << LogTrailer("exit 0", 9.25, 250.0);
  data = LoadRunData(dir.string(), log, spec);
  EXPECT_EQ(data.wall_seconds, 9.25);
  EXPECT_EQ(data.peak_rss_mb, 120.0);
  std::ofstream(dir / "summary.json") << "{\"wall_seconds\": 3.5}";
  EXPECT_EQ(LoadRunData(dir.string(), log, spec).peak_rss_mb, 250.0);
}

}  // namespace
}  // namespace sweep
