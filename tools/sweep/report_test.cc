#include "tools/sweep/report.h"

#include <cmath>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sweep {
namespace {

using ::fl::report::ColumnSeries;
using ::fl::report::CsvTable;
using ::fl::report::ParseCsv;
using ::fl::report::Series;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(ReportTest, MeanAndSampleStandardDeviation) {
  const SeedStats stats = Summarize({0.80, 0.82, 0.87});
  EXPECT_EQ(stats.n, 3);
  EXPECT_NEAR(stats.mean, 0.83, 1e-12);
  // sqrt(((-0.03)^2 + (-0.01)^2 + 0.04^2) / (3 - 1)) = sqrt(0.0013)
  EXPECT_NEAR(stats.sd, 0.0360555127546, 1e-12);
  const SeedStats one = Summarize({0.5});
  EXPECT_EQ(one.mean, 0.5);
  EXPECT_TRUE(std::isnan(one.sd));
  EXPECT_TRUE(std::isnan(Summarize({}).mean));
}

TEST(ReportTest, PairedDifferencesUseTheSeedsBothHave) {
  const PairedDifference d =
      PairedDifferences({{1, 0.85}, {2, 0.80}, {3, 0.90}}, {{1, 0.83}, {2, 0.81}, {4, 0.7}});
  EXPECT_EQ(d.n, 2);
  EXPECT_NEAR(d.mean, (0.02 - 0.01) / 2, 1e-12);
  EXPECT_NEAR(d.min, -0.01, 1e-12);
  EXPECT_NEAR(d.max, 0.02, 1e-12);
  EXPECT_EQ(PairedDifferences({{1, 0.5}}, {{2, 0.5}}).n, 0);
}

TEST(ReportTest, BandsCoverTheRoundsEveryRunHas) {
  const Series a = {{1, 0.5}, {2, 0.6}, {3, 0.7}};
  const Series b = {{1, 0.3}, {3, 0.9}};
  const Band band = CombineSeries({&a, &b});
  EXPECT_EQ(band.rounds, (std::vector<int>{1, 3}));
  EXPECT_NEAR(band.mean[0], 0.4, 1e-12);
  EXPECT_NEAR(band.mean[1], 0.8, 1e-12);
  EXPECT_EQ(band.min, (std::vector<double>{0.3, 0.7}));
  EXPECT_EQ(band.max, (std::vector<double>{0.5, 0.9}));
}

// A sweep of a baseline with seeds 1-3 and a variant whose seed 3 failed, its
// metrics computed from hand-written metrics.csv contents.
class TableTest : public ::testing::Test {
 protected:
  TableTest() {
    auto* base = spec_.add_variants();
    base->set_name("base");
    base->set_label("Base");
    auto* variant = spec_.add_variants();
    variant->set_name("new");
    variant->set_label("New");
    spec_.set_baseline("base");
    spec_.set_title("Test sweep");
    spec_.add_notes("A note.");
    spec_.set_curve_column("test_accuracy");
    for (Metric::Kind kind : {Metric::FINAL, Metric::LAST_K_MEAN, Metric::ROUNDS_TO}) {
      Metric* metric = spec_.add_metrics();
      metric->set_kind(kind);
      if (kind == Metric::ROUNDS_TO) metric->set_target(0.85);
      FillDefaults(*metric);
    }
    //         FINAL  last 10 mean  rounds to 85%
    // base 1  0.86   0.80          3
    // base 2  0.82   0.78          not reached
    // base 3  0.81   0.80667       2
    // new 1   0.88   0.85          2
    // new 2   0.85   0.82333       3
    runs_ = {Finished("base", 1, {0.70, 0.84, 0.86}, 10, 300),
             Finished("base", 2, {0.72, 0.80, 0.82}, 12, 310),
             Finished("base", 3, {0.75, 0.86, 0.81}, 14, 305),
             Finished("new", 1, {0.80, 0.87, 0.88}, 20, 400),
             Finished("new", 2, {0.78, 0.84, 0.85}, 22, 400)};
    RunRecord& failed = runs_.emplace_back();
    failed.variant = "new";
    failed.seed = 3;
    failed.status = RunStatus::kFailed;
    failed.log = "new_seed3.log";
  }

  RunRecord Finished(const std::string& variant, uint64_t seed, const std::vector<double>& accuracy,
                     double wall, double rss) {
    std::string csv = "round,test_accuracy,test_loss\n";
    for (size_t i = 0; i < accuracy.size(); ++i) {
      absl::StrAppend(&csv, i + 1, ",", accuracy[i], ",", 1 - accuracy[i], "\n");
    }
    absl::StatusOr<CsvTable> table = ParseCsv(csv, "metrics.csv");
    EXPECT_TRUE(table.ok());
    RunRecord run;
    run.variant = variant;
    run.seed = seed;
    run.status = RunStatus::kFinished;
    run.log = absl::StrCat(variant, "_seed", seed, ".log");
    for (const Metric& metric : spec_.metrics()) {
      absl::StatusOr<Series> series = ColumnSeries(*table, metric.column(), "metrics.csv");
      EXPECT_TRUE(series.ok());
      run.data.metrics.push_back(ComputeMetric(metric, *series));
    }
    run.data.wall_seconds = wall;
    run.data.peak_rss_mb = rss;
    run.data.curve = *ColumnSeries(*table, "test_accuracy", "metrics.csv");
    return run;
  }

  std::string Table() {
    TableContext context;
    context.command = "bazel run //tools/sweep -- --sweep=x.sweep.textproto";
    context.base_spec = "base.textproto";
    context.seeds = {1, 2, 3};
    return TableMarkdown(spec_, context, runs_);
  }

  fedkit::sweep::SweepSpec spec_;
  std::vector<RunRecord> runs_;
};

TEST_F(TableTest, MeanSdPerVariantWithNWhereSeedsAreMissing) {
  const std::string table = Table();
  EXPECT_THAT(table,
              HasSubstr("# Test sweep\n\nA note.\n\n"
                        "Reproduce: `bazel run //tools/sweep -- --sweep=x.sweep.textproto`"));
  EXPECT_THAT(table, HasSubstr("| variant | final | last 10 mean | rounds to 85% | wall time | "
                               "peak RSS |\n"));
  // final: mean 0.83, sd sqrt((0.03^2 + 0.01^2 + 0.02^2) / 2) = 0.02646; last 10:
  // mean 0.79556, sd 0.01388; rounds: seeds 1 and 3 reached, at 3 and 2.
  EXPECT_THAT(table, HasSubstr("| Base (baseline) | 83.00 ± 2.65 | 79.56 ± 1.39 | "
                               "2.5 ± 0.7 (2/3 reached) | 12.0 s | 310 MB |\n"));
  // final: 0.865 ± 0.02121; last 10: 0.83667 ± 0.01886; both seeds reached.
  EXPECT_THAT(table, HasSubstr("| New | 86.50 ± 2.12 (n=2) | 83.67 ± 1.89 (n=2) | "
                               "2.5 ± 0.7 (2/2 reached) | 21.0 s | 400 MB |\n"));
}

TEST_F(TableTest, PairedDifferencesOverTheSeedsBothFinished) {
  // Seeds 1 and 2: final +0.02, +0.03; last 10 +0.05, +0.04333; rounds to 85%
  // only seed 1 (base seed 2 never reached it): 2 - 3 = -1.
  EXPECT_THAT(Table(), HasSubstr("| New | 2 | +2.50 [+2.00, +3.00] | +4.67 [+4.33, +5.00] | "
                                 "-1.0 (n=1) |\n"));
  EXPECT_THAT(Table(), Not(HasSubstr("| Base (baseline) | 3 |")));
}

TEST_F(TableTest, GroupsCompareToTheirOwnBaselines) {
  auto* other = spec_.add_variants();
  other->set_name("other");
  other->set_label("Other");
  other->set_baseline("other");  // a reference: no row of its own
  auto* other_new = spec_.add_variants();
  other_new->set_name("other_new");
  other_new->set_label("Other new");
  other_new->set_baseline("other");
  runs_.push_back(Finished("other", 1, {0.5, 0.6, 0.7}, 10, 300));
  runs_.push_back(Finished("other_new", 1, {0.6, 0.7, 0.75}, 10, 300));
  const std::string table = Table();
  EXPECT_THAT(table, HasSubstr("## Paired differences\n"));
  EXPECT_THAT(table, HasSubstr("| variant | vs | seeds | final | last 10 mean | rounds to 85% |"));
  EXPECT_THAT(table, HasSubstr("| New | Base | 2 | +2.50 [+2.00, +3.00] | +4.67 [+4.33, +5.00] | "
                               "-1.0 (n=1) |\n"));
  // One seed: 0.75 - 0.7 and 0.68333 - 0.6; neither reached 85%.
  EXPECT_THAT(table, HasSubstr("| Other new | Other | 1 | +5.00 | +8.33 | n/a |\n"));
  EXPECT_THAT(table, HasSubstr("| Other (baseline) | 70.00 (n=1) |"));
  EXPECT_THAT(table, Not(HasSubstr("| Other | Other |")));
}

TEST_F(TableTest, NoDifferencesWhenEveryVariantIsItsOwnReference) {
  spec_.mutable_variants(1)->set_baseline("new");
  const std::string table = Table();
  EXPECT_THAT(table, HasSubstr("| Base | 83.00 ± 2.65 |"));
  EXPECT_THAT(table, HasSubstr("| New | 86.50 ± 2.12 (n=2) |"));
  EXPECT_THAT(table, Not(HasSubstr("(baseline)")));
  EXPECT_THAT(table, Not(HasSubstr("Paired differences")));
  // The runs are still listed.
  EXPECT_THAT(table, HasSubstr("- `new` seed 3: failed"));
}

TEST_F(TableTest, ScaledMetricsShowScaledValues) {
  spec_.clear_metrics();
  Metric* loss = spec_.add_metrics();
  loss->set_kind(Metric::FINAL);
  loss->set_column("test_loss");
  loss->set_scale(1000);
  FillDefaults(*loss);
  runs_ = {Finished("base", 1, {0.70, 0.84, 0.86}, 10, 300),
           Finished("base", 2, {0.72, 0.80, 0.82}, 12, 310),
           Finished("new", 1, {0.80, 0.87, 0.88}, 20, 400)};
  const std::string table = Table();
  // Loss 1 - accuracy, times 1000: base 140 and 180, new 120. The mean's 4
  // significant digits set the decimals, which its sd shares.
  EXPECT_THAT(table, HasSubstr("| Base (baseline) | 160.0 ± 28.3 (n=2) |"));
  EXPECT_THAT(table, HasSubstr("| New | 120.0 (n=1) |"));
  EXPECT_THAT(table, HasSubstr("| New | 1 | -20.00 |"));
  EXPECT_THAT(table, Not(HasSubstr("Accuracies in %")));
  // runs.csv keeps the column's units.
  EXPECT_THAT(RunsCsv(spec_, runs_), HasSubstr("base,1,0.14,"));
}

TEST_F(TableTest, ReferencesGetAColumnRightAfterTheirMetric) {
  spec_.set_reference_label("paper");
  auto* reference = spec_.mutable_variants(1)->add_references();
  reference->set_metric("last 10 mean");
  reference->set_value(86.3);
  reference = spec_.mutable_variants(0)->add_references();
  reference->set_metric("rounds to 85%");
  reference->set_value(4);
  const std::string table = Table();
  EXPECT_THAT(table, HasSubstr(" Rounds to a target: mean over the seeds that reached it. "
                               "paper (…): the sweep file's numbers, not these runs'. Wall time:"));
  // No column for "final", which has no reference; an empty cell where a variant
  // has none; each value with its metric's decimals (percent 2, rounds 1).
  EXPECT_THAT(table, HasSubstr("| variant | final | last 10 mean | paper (last 10 mean) | "
                               "rounds to 85% | paper (rounds to 85%) | wall time | peak RSS |\n"
                               "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n"
                               "| Base (baseline) | 83.00 ± 2.65 | 79.56 ± 1.39 |  | "
                               "2.5 ± 0.7 (2/3 reached) | 4.0 | 12.0 s | 310 MB |\n"
                               "| New | 86.50 ± 2.12 (n=2) | 83.67 ± 1.89 (n=2) | 86.30 | "
                               "2.5 ± 0.7 (2/2 reached) |  | 21.0 s | 400 MB |\n"));
  // The differences compare runs: no reference there, nor in runs.csv.
  EXPECT_THAT(table, HasSubstr("| variant | seeds | final | last 10 mean | rounds to 85% |\n"));
  EXPECT_THAT(RunsCsv(spec_, runs_),
              HasSubstr("variant,seed,final_test_accuracy,last10_mean_test_accuracy,"
                        "rounds_to_0.85_test_accuracy,wall_seconds,peak_rss_mb,stale\n"
                        "base,1,0.86,0.8,3,10,300,false\n"));
}

TEST_F(TableTest, ReferencesOfScaledMetricsHaveFourSignificantDigits) {
  spec_.clear_metrics();
  Metric* loss = spec_.add_metrics();
  loss->set_kind(Metric::FINAL);
  loss->set_column("test_loss");
  loss->set_scale(1000);
  FillDefaults(*loss);
  spec_.set_reference_label("reference");
  // Already in the table's units (times 1000): not scaled again.
  auto* reference = spec_.mutable_variants(0)->add_references();
  reference->set_metric("final test_loss");
  reference->set_value(152.34);
  reference = spec_.mutable_variants(1)->add_references();
  reference->set_metric("final test_loss");
  reference->set_value(7.5);
  runs_ = {Finished("base", 1, {0.70, 0.84, 0.86}, 10, 300),
           Finished("base", 2, {0.72, 0.80, 0.82}, 12, 310),
           Finished("new", 1, {0.80, 0.87, 0.88}, 20, 400)};
  const std::string table = Table();
  EXPECT_THAT(table, HasSubstr("| variant | final test_loss | reference (final test_loss) | "
                               "wall time | peak RSS |\n"));
  EXPECT_THAT(table, HasSubstr("| Base (baseline) | 160.0 ± 28.3 (n=2) | 152.3 | 11.0 s |"));
  EXPECT_THAT(table, HasSubstr("| New | 120.0 (n=1) | 7.500 | 20.0 s |"));
}

TEST_F(TableTest, ListsFailedRuns) {
  EXPECT_THAT(Table(), HasSubstr("5 of 6 runs finished, 1 failed."));
  EXPECT_THAT(Table(), HasSubstr("- `new` seed 3: failed, see [new_seed3.log](new_seed3.log)\n"));
  EXPECT_THAT(Table(), Not(HasSubstr("Stale runs")));
}

TEST_F(TableTest, MarksStaleRuns) {
  runs_[1].stale = "spec.textproto differs: modified: server.rounds: 3 -> 4";
  const std::string table = Table();
  EXPECT_THAT(table, HasSubstr("| Base † (baseline) |"));
  EXPECT_THAT(table, HasSubstr("## Stale runs"));
  EXPECT_THAT(table, HasSubstr("- `base` seed 2: spec.textproto differs: modified: "
                               "server.rounds: 3 -> 4\n"));
}

TEST_F(TableTest, RunsCsvHasOneRowPerFinishedRun) {
  runs_[4].stale = "differs";
  EXPECT_EQ(RunsCsv(spec_, runs_),
            "variant,seed,final_test_accuracy,last10_mean_test_accuracy,"
            "rounds_to_0.85_test_accuracy,wall_seconds,peak_rss_mb,stale\n"
            "base,1,0.86,0.8,3,10,300,false\n"
            "base,2,0.82,0.78,,12,310,false\n"
            "base,3,0.81,0.8066666667,2,14,305,false\n"
            "new,1,0.88,0.85,2,20,400,false\n"
            "new,2,0.85,0.8233333333,3,22,400,true\n");
}

TEST_F(TableTest, CurvesJsonWritesNonFiniteDiagnosticsAsNull) {
  // A run without noise spends an infinite epsilon: JSON has no infinity.
  spec_.add_diagnostics("epsilon");
  runs_[0].data.diagnostics["epsilon"] = {
      {1, 1.5}, {2, std::numeric_limits<double>::infinity()}, {3, std::nan("")}};
  const std::string json = CurvesJson(spec_, runs_);
  EXPECT_THAT(json, HasSubstr("\"mean\": [1.5, null, null]"));
  EXPECT_THAT(json, Not(HasSubstr("inf")));
}

TEST_F(TableTest, CurvesJsonHasEachVariantsBand) {
  const std::string json = CurvesJson(spec_, runs_);
  EXPECT_THAT(json, HasSubstr("\"percent\": true"));
  EXPECT_THAT(json, HasSubstr("\"x_column\": \"round\",\n \"x_label\": \"round\",\n "
                              "\"x_integer\": true"));
  EXPECT_THAT(json, HasSubstr("{\"label\": \"New\", \"runs\": 2, \"rounds\": [1, 2, 3], "
                              "\"x\": [1, 2, 3], "
                              "\"mean\": [0.79, 0.855, 0.865], \"min\": [0.78, 0.84, 0.85], "
                              "\"max\": [0.8, 0.87, 0.88]}"));
}

// The same sweep's runs with a virtual clock and client counts: the metrics say
// what virtual time and how many client updates each run took to reach 85 %.
class ReachedAtTest : public ::testing::Test {
 protected:
  ReachedAtTest() {
    auto* base = spec_.add_variants();
    base->set_name("base");
    base->set_label("Base");
    auto* variant = spec_.add_variants();
    variant->set_name("new");
    variant->set_label("New");
    spec_.set_baseline("base");
    spec_.set_title("Clock sweep");
    spec_.set_curve_column("test_accuracy");
    for (const char* column : {"virtual_seconds", "clients"}) {
      Metric* metric = spec_.add_metrics();
      metric->set_kind(Metric::ROUNDS_TO);
      metric->set_target(0.85);
      metric->set_reached_at(column);
      FillDefaults(*metric);
    }
    // 4 clients a row. Reached on  virtual s  updates
    // base 1  row 3               37.5       12
    // base 2  row 3               33         12
    // base 3  row 2               24.5       8
    // new 1   row 2               11.25      8
    // new 2   row 3               19.75      12
    runs_ = {Finished("base", 1, {0.70, 0.84, 0.86}, {10, 25, 37.5}),
             Finished("base", 2, {0.72, 0.80, 0.86}, {9, 20, 33}),
             Finished("base", 3, {0.75, 0.86, 0.81}, {12, 24.5, 40}),
             Finished("new", 1, {0.80, 0.87, 0.88}, {5, 11.25, 17}),
             Finished("new", 2, {0.78, 0.84, 0.85}, {6, 13, 19.75})};
  }

  RunRecord Finished(const std::string& variant, uint64_t seed, const std::vector<double>& accuracy,
                     const std::vector<double>& virtual_seconds) {
    std::string csv = "round,test_accuracy,clients,virtual_seconds\n";
    for (size_t i = 0; i < accuracy.size(); ++i) {
      absl::StrAppend(&csv, i + 1, ",", accuracy[i], ",4,", virtual_seconds[i], "\n");
    }
    absl::StatusOr<CsvTable> table = ParseCsv(csv, "metrics.csv");
    EXPECT_TRUE(table.ok());
    RunRecord run;
    run.variant = variant;
    run.seed = seed;
    run.status = RunStatus::kFinished;
    const Series accuracy_series = *ColumnSeries(*table, "test_accuracy", "metrics.csv");
    for (const Metric& metric : spec_.metrics()) {
      const Series at = *ProgressSeries(*table, metric.reached_at(), "metrics.csv");
      run.data.metrics.push_back(ComputeMetric(metric, accuracy_series, &at));
    }
    run.data.curve = accuracy_series;
    run.data.curve_x = *ProgressSeries(*table, "virtual_seconds", "metrics.csv");
    return run;
  }

  std::string Table() {
    TableContext context;
    context.command = "bazel run //tools/sweep -- --sweep=x.sweep.textproto";
    context.base_spec = "base.textproto";
    context.seeds = {1, 2, 3};
    return TableMarkdown(spec_, context, runs_);
  }

  fedkit::sweep::SweepSpec spec_;
  std::vector<RunRecord> runs_;
};

TEST_F(ReachedAtTest, ResultsHaveFourSignificantDigits) {
  const std::string table = Table();
  EXPECT_THAT(table, HasSubstr("| variant | virtual s to 85% | updates to 85% | wall time |"));
  // Base: mean (37.5 + 33 + 24.5) / 3 = 31.667, sd 6.602; updates 10.667 ± 2.309.
  EXPECT_THAT(table, HasSubstr("| Base (baseline) | 31.67 ± 6.60 (3/3 reached) | "
                               "10.67 ± 2.31 (3/3 reached) |"));
  // New: (11.25 + 19.75) / 2 = 15.5, sd 6.010; updates 10 ± 2.828.
  EXPECT_THAT(table,
              HasSubstr("| New | 15.50 ± 6.01 (2/2 reached) | 10.00 ± 2.83 (2/2 reached) |"));
  EXPECT_THAT(table, HasSubstr(" Rounds (or a column's value at that round) to a target: mean "
                               "over the seeds that reached it."));
}

TEST_F(ReachedAtTest, PairedDifferencesAsForOtherNumbers) {
  // Seed 1: 11.25 - 37.5 = -26.25, seed 2: 19.75 - 33 = -13.25; updates 8 - 12
  // and 12 - 12. The range keeps the mean's decimals (rounds' would have none).
  EXPECT_THAT(Table(),
              HasSubstr("| New | 2 | -19.75 [-26.25, -13.25] | -2.000 [-4.000, +0.000] |"));
}

TEST_F(ReachedAtTest, RunsCsvNamesTheColumn) {
  EXPECT_THAT(RunsCsv(spec_, runs_),
              HasSubstr("variant,seed,rounds_to_0.85_test_accuracy_at_virtual_seconds,"
                        "rounds_to_0.85_test_accuracy_at_clients,wall_seconds,peak_rss_mb,stale\n"
                        "base,1,37.5,12,,,false\n"));
}

TEST_F(ReachedAtTest, CurvesAgainstTheMeanOfTheXColumn) {
  spec_.set_curve_x_column("virtual_seconds");
  SweepCurves curves = ComputeCurves(spec_, runs_);
  EXPECT_EQ(curves.x_column, "virtual_seconds");
  ASSERT_EQ(curves.variants.size(), 2u);
  // New: seeds at {5, 11.25, 17} and {6, 13, 19.75} virtual seconds.
  EXPECT_EQ(curves.variants[1].x, (std::vector<double>{5.5, 12.125, 18.375}));
  EXPECT_EQ(curves.variants[1].band.rounds, (std::vector<int>{1, 2, 3}));
  EXPECT_NEAR(curves.variants[1].band.mean[2], 0.865, 1e-12);
  EXPECT_THAT(CurvesJson(spec_, runs_),
              HasSubstr("\"x_column\": \"virtual_seconds\",\n \"x_label\": \"virtual "
                        "seconds\",\n \"x_integer\": false"));
  EXPECT_THAT(CurvesJson(spec_, runs_), HasSubstr("\"x\": [5.5, 12.125, 18.375]"));

  // A round some run has no x value at is left out; a run without the column
  // (an older one) has no curve.
  runs_[4].data.curve_x.erase(runs_[4].data.curve_x.begin() + 1);
  runs_[3].data.curve_x.clear();
  curves = ComputeCurves(spec_, runs_);
  EXPECT_EQ(curves.variants[1].runs, 1);
  EXPECT_EQ(curves.variants[1].x, (std::vector<double>{6, 19.75}));
  EXPECT_EQ(curves.variants[1].band.rounds, (std::vector<int>{1, 3}));
  EXPECT_EQ(curves.variants[1].band.mean, (std::vector<double>{0.78, 0.85}));
  // Against the round, every run counts, whatever its x column.
  spec_.clear_curve_x_column();
  EXPECT_EQ(ComputeCurves(spec_, runs_).variants[1].runs, 2);
}

}  // namespace
}  // namespace sweep
