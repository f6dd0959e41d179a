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

using ::fl::report::ColumnSeries;
using ::fl::report::CsvTable;
using ::fl::report::ParseCsv;
using ::fl::report::Series;
using ::testing::HasSubstr;

// The runner's layout: fixed columns, then diagnostics sorted by name; a
// diagnostic that appeared at round 2 is empty in round 1's row.
constexpr char kMetricsCsv[] =
    "round,test_accuracy,test_loss,train_loss,clients,seconds,eta_g\n"
    "1,0.70,0.90,1.2,4,0.5,\n"
    "2,0.84,0.60,0.8,4,1.0,1.5\n"
    "3,0.82,0.55,0.7,4,1.5,2\n"
    "4,0.86,0.58,0.6,4,2.0,nan\n";

// A one-shot run's report (fl/one_shot_report.h): the client models, then the
// spec's aggregator and two comparisons; the diagnostics only MA-Echo has are
// empty in the other rows.
constexpr char kOneShotCsv[] =
    "kind,label,examples,test_accuracy,test_loss,aggregation_seconds,objective_end\n"
    "client,client 0,2435,0.292,7.16,0,\n"
    "client,client 1,1511,0.1815,6.21,0,\n"
    "client,client 2,785,0.098,6.61,0,\n"
    "aggregate,maecho,0,0.616,1.24,0.812,8.95\n"
    "aggregate,split average,0,0.098,2.29,0.0006,\n"
    "aggregate,FedAvg (size-weighted),0,0.15,2.29,0.0004,\n";

// A run with a virtual clock, evaluated every 5 rounds: clients and rejected
// count the updates since the previous row; bytes_up, seconds and
// virtual_seconds are cumulative. 80 % is first reached on the second row.
constexpr char kClockCsv[] =
    "round,test_accuracy,test_loss,clients,rejected,bytes_up,seconds,virtual_seconds\n"
    "5,0.60,1.0,4,1,1000,0.5,12.5\n"
    "10,0.81,0.7,3,0,2000,1.0,30.25\n"
    "15,0.85,0.6,5,2,3000,1.5,41\n";

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

Series Progress(absl::string_view csv, absl::string_view column) {
  absl::StatusOr<CsvTable> table = ParseCsv(csv, "metrics.csv");
  EXPECT_TRUE(table.ok()) << table.status();
  absl::StatusOr<Series> series = ProgressSeries(*table, column, "metrics.csv");
  EXPECT_TRUE(series.ok()) << series.status();
  return series.value_or(Series{});
}

Metric ReachedAt(absl::string_view column, double target, absl::string_view metric_column = "") {
  Metric metric;
  metric.set_kind(Metric::ROUNDS_TO);
  metric.set_target(target);
  metric.set_reached_at(std::string(column));
  metric.set_column(std::string(metric_column));
  FillDefaults(metric);
  return metric;
}

double ValueAt(const Metric& metric, absl::string_view csv = kClockCsv) {
  const Series at = Progress(csv, metric.reached_at());
  const MetricValue value = ComputeMetric(metric, Column(csv, metric.column()), &at);
  EXPECT_TRUE(value.available);
  return value.value.value_or(NAN);
}

TEST(MetricsTest, ProgressSeriesSumsCountersAndKeepsCumulativeColumns) {
  const Series clients = Progress(kClockCsv, "clients");
  ASSERT_EQ(clients.size(), 3u);
  EXPECT_EQ(clients[0].round, 5);
  EXPECT_EQ(clients[1].round, 10);
  EXPECT_EQ(clients[2].round, 15);
  EXPECT_EQ(clients[0].value, 4);
  EXPECT_EQ(clients[1].value, 4 + 3);
  EXPECT_EQ(clients[2].value, 4 + 3 + 5);
  const Series virtual_seconds = Progress(kClockCsv, "virtual_seconds");
  ASSERT_EQ(virtual_seconds.size(), 3u);
  EXPECT_EQ(virtual_seconds[1].value, 30.25);
  EXPECT_EQ(virtual_seconds[2].value, 41);
  EXPECT_TRUE(IsCounterColumn("dropped"));
  EXPECT_FALSE(IsCounterColumn("bytes_down"));
  EXPECT_TRUE(IsProgressColumn("bytes_down"));
  EXPECT_FALSE(IsProgressColumn("round"));
  EXPECT_FALSE(IsProgressColumn("test_accuracy"));
}

TEST(MetricsTest, ReachedAtIsTheColumnAtTheRowThatReachesTheTarget) {
  // The round itself: the second row's.
  Metric rounds = MakeMetric(Metric::ROUNDS_TO);
  rounds.set_target(0.8);
  EXPECT_EQ(Value(rounds, Column(kClockCsv, "test_accuracy")), 10);
  // Cumulative columns: the second row's value.
  EXPECT_EQ(ValueAt(ReachedAt("virtual_seconds", 0.8)), 30.25);
  EXPECT_EQ(ValueAt(ReachedAt("seconds", 0.8)), 1.0);
  EXPECT_EQ(ValueAt(ReachedAt("bytes_up", 0.8)), 2000);
  // Counters: rows 1 and 2 together, not the second row's alone nor the round.
  EXPECT_EQ(ValueAt(ReachedAt("clients", 0.8)), 4 + 3);
  EXPECT_EQ(ValueAt(ReachedAt("rejected", 0.8)), 1 + 0);
  // Reached exactly on the last row; a lower-is-better column.
  EXPECT_EQ(ValueAt(ReachedAt("clients", 0.85)), 4 + 3 + 5);
  EXPECT_EQ(ValueAt(ReachedAt("virtual_seconds", 0.65, "test_loss")), 41);

  const Metric never = ReachedAt("virtual_seconds", 0.9);
  const Series at = Progress(kClockCsv, "virtual_seconds");
  const MetricValue not_reached = ComputeMetric(never, Column(kClockCsv, "test_accuracy"), &at);
  EXPECT_TRUE(not_reached.available);
  EXPECT_FALSE(not_reached.value.has_value());
  // Without the column's values the metric has none ("n/a"), not the round.
  EXPECT_FALSE(
      ComputeMetric(ReachedAt("virtual_seconds", 0.8), Column(kClockCsv, "test_accuracy"))
          .available);
}

TEST(MetricsTest, ReachedAtWithoutAValueAtThatRoundIsNotAvailable) {
  const std::string csv =
      "round,test_accuracy,virtual_seconds\n"
      "1,0.5,10\n"
      "2,0.9,\n";
  const Series at = Progress(csv, "virtual_seconds");
  EXPECT_FALSE(
      ComputeMetric(ReachedAt("virtual_seconds", 0.8), Column(csv, "test_accuracy"), &at)
          .available);
}

TEST(MetricsTest, ReachedAtLabelsAndNames) {
  const Metric virtual_time = ReachedAt("virtual_seconds", 0.8);
  EXPECT_EQ(virtual_time.label(), "virtual s to 80%");
  EXPECT_EQ(MetricName(virtual_time), "rounds_to_0.8_test_accuracy_at_virtual_seconds");
  const Metric updates = ReachedAt("clients", 0.8);
  EXPECT_EQ(updates.label(), "updates to 80%");
  EXPECT_EQ(MetricName(updates), "rounds_to_0.8_test_accuracy_at_clients");
  EXPECT_EQ(ReachedAt("bytes_up", 0.5, "test_loss").label(), "bytes up to 0.5 test_loss");
  EXPECT_EQ(AxisLabel("virtual_seconds"), "virtual seconds");
  EXPECT_EQ(AxisLabel("clients"), "client updates (cumulative)");
  EXPECT_EQ(AxisLabel("round"), "round");
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

Metric OneShotRow(absl::string_view row, absl::string_view column = "") {
  Metric metric;
  metric.set_kind(Metric::FINAL);
  metric.set_one_shot_row(std::string(row));
  metric.set_column(std::string(column));
  FillDefaults(metric);
  return metric;
}

Metric OneShotClients(Metric::OneShotClients clients, absl::string_view column = "") {
  Metric metric;
  metric.set_kind(Metric::FINAL);
  metric.set_one_shot_clients(clients);
  metric.set_column(std::string(column));
  FillDefaults(metric);
  return metric;
}

double OneShotValue(const Metric& metric) {
  absl::StatusOr<CsvTable> table = ParseCsv(kOneShotCsv, "one_shot.csv");
  EXPECT_TRUE(table.ok()) << table.status();
  absl::StatusOr<MetricValue> value = ComputeOneShotMetric(metric, *table, "one_shot.csv");
  EXPECT_TRUE(value.ok()) << value.status();
  EXPECT_TRUE(value->available);
  return value->value.value_or(NAN);
}

std::string OneShotError(const Metric& metric, absl::string_view csv = kOneShotCsv) {
  absl::StatusOr<CsvTable> table = ParseCsv(csv, "one_shot.csv");
  EXPECT_TRUE(table.ok()) << table.status();
  absl::StatusOr<MetricValue> value = ComputeOneShotMetric(metric, *table, "one_shot.csv");
  EXPECT_FALSE(value.ok());
  return std::string(value.status().message());
}

TEST(MetricsTest, OneShotRowsAreReadByLabel) {
  EXPECT_TRUE(IsOneShot(OneShotRow("maecho")));
  EXPECT_FALSE(IsOneShot(MakeMetric(Metric::FINAL)));
  EXPECT_DOUBLE_EQ(OneShotValue(OneShotRow("maecho")), 0.616);
  EXPECT_DOUBLE_EQ(OneShotValue(OneShotRow("split average")), 0.098);
  EXPECT_DOUBLE_EQ(OneShotValue(OneShotRow("FedAvg (size-weighted)", "test_loss")), 2.29);
  EXPECT_DOUBLE_EQ(OneShotValue(OneShotRow("maecho", "aggregation_seconds")), 0.812);
  // The aggregates are not client models, and a client's label is no aggregate's.
  EXPECT_DOUBLE_EQ(OneShotValue(OneShotClients(Metric::MAX)), 0.292);
  EXPECT_EQ(OneShotError(OneShotRow("client 0")),
            "one_shot.csv: no aggregate row labelled \"client 0\"");
}

TEST(MetricsTest, OneShotClientsAreReducedOverTheClientRows) {
  EXPECT_DOUBLE_EQ(OneShotValue(OneShotClients(Metric::MEAN)), (0.292 + 0.1815 + 0.098) / 3);
  EXPECT_DOUBLE_EQ(OneShotValue(OneShotClients(Metric::MIN)), 0.098);
  EXPECT_DOUBLE_EQ(OneShotValue(OneShotClients(Metric::MAX)), 0.292);
  EXPECT_DOUBLE_EQ(OneShotValue(OneShotClients(Metric::MIN, "test_loss")), 6.21);
}

TEST(MetricsTest, AnEmptyOneShotCellIsNotAvailable) {
  absl::StatusOr<CsvTable> table = ParseCsv(kOneShotCsv, "one_shot.csv");
  ASSERT_TRUE(table.ok());
  absl::StatusOr<MetricValue> value =
      ComputeOneShotMetric(OneShotRow("split average", "objective_end"), *table, "one_shot.csv");
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_FALSE(value->available);
  EXPECT_DOUBLE_EQ(OneShotValue(OneShotRow("maecho", "objective_end")), 8.95);
  // Every client row is empty there: no mean of none.
  value = ComputeOneShotMetric(OneShotClients(Metric::MEAN, "objective_end"), *table,
                               "one_shot.csv");
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_FALSE(value->available);
}

TEST(MetricsTest, OneShotErrorsNameTheFileAndWhatIsMissing) {
  EXPECT_EQ(OneShotError(OneShotRow("maecho", "accuracy_iter_001")),
            "one_shot.csv: no column \"accuracy_iter_001\"");
  EXPECT_EQ(OneShotError(OneShotClients(Metric::MEAN),
                         "kind,label,test_accuracy\naggregate,maecho,0.6\n"),
            "one_shot.csv: no client rows");
  EXPECT_EQ(OneShotError(OneShotRow("maecho"), "label,test_accuracy\nmaecho,0.6\n"),
            "one_shot.csv: no column \"kind\"");
  EXPECT_EQ(OneShotError(OneShotRow("maecho"), "kind,label,test_accuracy\naggregate,maecho,x\n"),
            "one_shot.csv: row 1 (maecho): test_accuracy \"x\" is not a number");
}

TEST(MetricsTest, OneShotDefaultsLabelsAndNames) {
  const Metric split = OneShotRow("split average");
  EXPECT_EQ(split.label(), "split average");
  EXPECT_EQ(MetricName(split), "one_shot_split_average_test_accuracy");
  const Metric seconds = OneShotRow("maecho", "aggregation_seconds");
  EXPECT_EQ(seconds.label(), "maecho aggregation_seconds");
  EXPECT_EQ(MetricName(seconds), "one_shot_maecho_aggregation_seconds");
  EXPECT_EQ(MetricName(OneShotRow("FedAvg (size-weighted)")),
            "one_shot_fedavg_size_weighted_test_accuracy");
  EXPECT_EQ(MetricName(OneShotRow("MA-Echo + OT")), "one_shot_ma_echo_ot_test_accuracy");
  const Metric worst = OneShotClients(Metric::MIN);
  EXPECT_EQ(worst.label(), "clients min");
  EXPECT_EQ(MetricName(worst), "one_shot_clients_min_test_accuracy");
  EXPECT_EQ(OneShotClients(Metric::MEAN, "test_loss").label(), "clients mean test_loss");
  EXPECT_EQ(MetricName(OneShotClients(Metric::MAX)), "one_shot_clients_max_test_accuracy");
}

TEST(MetricsTest, DiagnosticsMatchByNameOrPrefixedName) {
  const std::vector<std::string> header = {"round", "elastic/zeta_max", "elastic/zeta_mean",
                                           "eta_g"};
  EXPECT_EQ(FindDiagnosticColumn(header, "zeta_mean"), "elastic/zeta_mean");
  EXPECT_EQ(FindDiagnosticColumn(header, "eta_g"), "eta_g");
  EXPECT_EQ(FindDiagnosticColumn(header, "gamma"), std::nullopt);
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

TEST(MetricsTest, LoadsAOneShotRunsMetricsFromItsReport) {
  const std::filesystem::path dir =
      std::filesystem::path(std::getenv("TEST_TMPDIR")) / "one_shot_run";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "metrics.csv") << "round,test_accuracy,test_loss\n1,0.616,1.24\n";
  std::ofstream(dir / "summary.json") << "{\"wall_seconds\": 6.0}";
  fedkit::sweep::SweepSpec spec;
  *spec.add_metrics() = OneShotClients(Metric::MEAN);
  *spec.add_metrics() = OneShotRow("split average");
  *spec.add_metrics() = OneShotRow("OT fusion");
  *spec.add_metrics() = MakeMetric(Metric::FINAL);
  spec.set_curve_column("test_accuracy");
  // Before the run wrote its report: the one-shot metrics are not available.
  RunData data = LoadRunData(dir.string(), dir.string() + ".log", spec);
  EXPECT_FALSE(data.metrics[0].available);
  EXPECT_FALSE(data.metrics[1].available);
  EXPECT_DOUBLE_EQ(data.metrics[3].value.value_or(0), 0.616);
  ASSERT_EQ(data.problems.size(), 1u);
  EXPECT_THAT(data.problems[0], HasSubstr("cannot read "));
  EXPECT_THAT(data.problems[0], HasSubstr("one_shot_run/one_shot.csv"));

  std::ofstream(dir / "one_shot.csv") << kOneShotCsv;
  data = LoadRunData(dir.string(), dir.string() + ".log", spec);
  EXPECT_DOUBLE_EQ(data.metrics[0].value.value_or(0), (0.292 + 0.1815 + 0.098) / 3);
  EXPECT_DOUBLE_EQ(data.metrics[1].value.value_or(0), 0.098);
  EXPECT_FALSE(data.metrics[2].available);
  EXPECT_DOUBLE_EQ(data.metrics[3].value.value_or(0), 0.616);
  ASSERT_EQ(data.problems.size(), 1u);
  EXPECT_THAT(data.problems[0], HasSubstr("one_shot.csv: no aggregate row labelled \"OT fusion\""));
}

TEST(MetricsTest, LoadsReachedAtAndCurvesAgainstAColumn) {
  const std::filesystem::path dir = std::filesystem::path(std::getenv("TEST_TMPDIR")) / "clock_run";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "metrics.csv") << kClockCsv;
  std::ofstream(dir / "summary.json") << "{\"wall_seconds\": 2.0}";
  fedkit::sweep::SweepSpec spec;
  *spec.add_metrics() = ReachedAt("virtual_seconds", 0.8);
  *spec.add_metrics() = ReachedAt("clients", 0.8);
  spec.set_curve_column("test_accuracy");
  spec.set_curve_x_column("clients");
  RunData data = LoadRunData(dir.string(), dir.string() + ".log", spec);
  EXPECT_TRUE(data.problems.empty()) << data.problems[0];
  EXPECT_EQ(data.metrics[0].value, 30.25);
  EXPECT_EQ(data.metrics[1].value, 7);
  ASSERT_EQ(data.curve.size(), 3u);
  ASSERT_EQ(data.curve_x.size(), 3u);
  EXPECT_EQ(data.curve_x[2].value, 12);
  // Against the round: no x series.
  spec.set_curve_x_column("round");
  EXPECT_TRUE(LoadRunData(dir.string(), dir.string() + ".log", spec).curve_x.empty());
}

TEST(MetricsTest, AnOlderRunWithoutTheColumnHasAProblemNamingTheFile) {
  // kMetricsCsv predates the virtual clock: no virtual_seconds column.
  const std::filesystem::path dir = std::filesystem::path(std::getenv("TEST_TMPDIR")) / "old_run";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "metrics.csv") << kMetricsCsv;
  std::ofstream(dir / "summary.json") << "{\"wall_seconds\": 2.0}";
  fedkit::sweep::SweepSpec spec;
  *spec.add_metrics() = ReachedAt("virtual_seconds", 0.8);
  *spec.add_metrics() = ReachedAt("clients", 0.8);
  *spec.add_metrics() = ReachedAt("virtual_seconds", 0.85);
  spec.set_curve_column("test_accuracy");
  RunData data = LoadRunData(dir.string(), dir.string() + ".log", spec);
  EXPECT_FALSE(data.metrics[0].available);
  EXPECT_EQ(data.metrics[1].value, 8);  // reached on round 2: 4 + 4 clients
  EXPECT_FALSE(data.metrics[2].available);
  // One problem for the column, however many metrics miss it.
  ASSERT_EQ(data.problems.size(), 1u);
  EXPECT_EQ(data.problems[0], (dir / "metrics.csv").string() + ": no column \"virtual_seconds\"");
  // Its curve against the round is still there; against virtual time it has none.
  EXPECT_EQ(data.curve.size(), 4u);
  spec.set_curve_x_column("virtual_seconds");
  data = LoadRunData(dir.string(), dir.string() + ".log", spec);
  EXPECT_TRUE(data.curve.empty());
  EXPECT_TRUE(data.curve_x.empty());
  EXPECT_EQ(data.problems.size(), 1u);
}

}  // namespace
}  // namespace sweep
