#include "tools/sweep/sweep_spec.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sweep {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

fs::path Runfile(const std::string& path) {
  return fs::path(std::getenv("TEST_SRCDIR")) / "fedkit" / path;
}

// Writes a sweep file over the tiny test spec and loads it.
absl::StatusOr<Sweep> Load(const std::string& text, const SweepFlags& flags = {}) {
  const fs::path path = fs::path(std::getenv("TEST_TMPDIR")) / "test.sweep.textproto";
  std::ofstream(path) << "base_spec: \"" << Runfile("tools/sweep/testdata/tiny.textproto").string()
                      << "\"\n"
                      << text;
  return LoadSweep(path.string(), flags);
}

constexpr char kFedAvgAndFedExp[] = R"(
variants { name: "fedavg" }
variants {
  name: "fedexp"
  set: "aggregator { name: \"fedexp\" }"
}
seeds: [1, 2]
metrics { kind: FINAL }
baseline: "fedavg"
)";

TEST(SweepSpecTest, TheExampleLoadsWithItsDefaults) {
  const fs::path file = Runfile("tools/sweep/testdata/example.sweep.textproto");
  absl::StatusOr<Sweep> sweep = LoadSweep(file.string(), {});
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  EXPECT_EQ(sweep->base_spec_path, (file.parent_path() / "tiny.textproto").string());
  EXPECT_EQ(sweep->out, (file.parent_path() / "results" / "example").string());
  EXPECT_EQ(sweep->jobs, 2);
  EXPECT_EQ(sweep->threads_per_job, 1);
  EXPECT_EQ(sweep->spec.variants(0).label(), "FedAvg");
  EXPECT_EQ(sweep->spec.metrics(3).label(), "rounds to 50%");
  EXPECT_EQ(sweep->spec.curve_column(), "test_accuracy");
  EXPECT_EQ(RunOverride(*sweep, sweep->spec.variants(1), 7),
            "seed: 7 server { rounds: 3 } output { checkpoint_every: 1 } "
            "aggregator { name: \"fedexp\" options { "
            "[type.googleapis.com/fedkit.aggregators.FedExpOptions] { epsilon: 0.1 } } } "
            "simulation { workers: 1 threads_per_worker: 1 }");
  absl::StatusOr<fedkit::ExperimentSpec> spec = RunSpec(*sweep, sweep->spec.variants(1), 7);
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->seed(), 7u);
  EXPECT_EQ(spec->server().rounds(), 3);
  EXPECT_EQ(spec->server().clients_per_round(), 4);
  EXPECT_EQ(spec->aggregator().name(), "fedexp");
}

TEST(SweepSpecTest, OneJobLeavesTheThreadsToTheRunner) {
  absl::StatusOr<Sweep> sweep = Load(kFedAvgAndFedExp, {"/tmp/elsewhere", 1});
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  EXPECT_EQ(sweep->jobs, 1);
  EXPECT_EQ(sweep->threads_per_job, std::nullopt);
  EXPECT_EQ(sweep->out, "/tmp/elsewhere");
  EXPECT_EQ(sweep->spec.title(), "test");
  EXPECT_EQ(RunOverride(*sweep, sweep->spec.variants(0), 2), "seed: 2");
}

TEST(SweepSpecTest, ParseErrorsNameTheFileLineAndColumn) {
  absl::StatusOr<Sweep> sweep = Load("variantz { name: \"a\" }\n");
  ASSERT_FALSE(sweep.ok());
  EXPECT_THAT(std::string(sweep.status().message()),
              HasSubstr("test.sweep.textproto:2:10: Message type \"fedkit.sweep.SweepSpec\" has "
                        "no field named \"variantz\""));
}

TEST(SweepSpecTest, ReportsEveryProblemOfTheFileAtOnce) {
  absl::StatusOr<Sweep> sweep = Load(R"(
variants { name: "a" }
variants { name: "a" }
variants { name: "b c" baseline: "zz" }
baseline: "fedavg"
metrics { kind: ROUNDS_TO scale: 2 }
metrics { kind: LAST_K_MEAN k: 0 }
metrics { kind: FINAL k: 3 }
jobs: 0
)");
  ASSERT_FALSE(sweep.ok());
  const std::string message(sweep.status().message());
  EXPECT_THAT(message, HasSubstr("variants[1].name: \"a\" is also variants[0]'s name"));
  EXPECT_THAT(message, HasSubstr("variants[2].name: \"b c\": required, of letters, digits"));
  EXPECT_THAT(message, HasSubstr("baseline: \"fedavg\" is not a variant; variants: a, a, b c"));
  EXPECT_THAT(message, HasSubstr("seeds: at least one is required"));
  EXPECT_THAT(message, HasSubstr("variants[2].baseline: \"zz\" is not a variant"));
  EXPECT_THAT(message, HasSubstr("metrics[0].target: ROUNDS_TO needs the value to reach"));
  EXPECT_THAT(message, HasSubstr("metrics[0].scale: ROUNDS_TO counts rounds and takes no scale"));
  EXPECT_THAT(message, HasSubstr("metrics[1].k: must be >= 1, got 0"));
  EXPECT_THAT(message, HasSubstr("metrics[2].k: only LAST_K_MEAN takes k"));
  EXPECT_THAT(message, HasSubstr("jobs: must be >= 1, got 0"));
}

TEST(SweepSpecTest, BadOverridesNameTheVariantAndTheField) {
  absl::StatusOr<Sweep> sweep = Load(R"(
variants { name: "fedavg" }
variants { name: "typo" set: "server { roundz: 3 }" }
variants { name: "negative_lr" set: "client { optimizer { lr: -1 } }" }
variants {
  name: "bad_options"
  set: "aggregator { name: \"fedexp\" options { "
       "[type.googleapis.com/fedkit.aggregators.FedExpOptions] { epsilon: -1 } } }"
}
variants { name: "reseeded" set: "seed: 3" }
seeds: [1]
metrics { kind: FINAL }
baseline: "fedavg"
)");
  ASSERT_FALSE(sweep.ok());
  const std::string message(sweep.status().message());
  EXPECT_THAT(message, HasSubstr("variant \"typo\": variants[1].set:1:16: Message type "
                                 "\"fedkit.ServerSpec\" has no field named \"roundz\""));
  EXPECT_THAT(message,
              HasSubstr("variant \"negative_lr\": client.optimizer.lr: must be > 0, got -1"));
  EXPECT_THAT(
      message,
      HasSubstr(
          "variant \"bad_options\": aggregator (fedexp): options.epsilon: must be >= 0, got -1"));
  EXPECT_THAT(message, HasSubstr("variant \"reseeded\": variants[4].set: sets seed"));
  EXPECT_THAT(message, Not(HasSubstr("variant \"fedavg\"")));
}

TEST(SweepSpecTest, OneShotMetricsTakeFinalAndOneOfTheirFields) {
  absl::StatusOr<Sweep> sweep = Load(R"(
set: "server { rounds: 1 one_shot: true }"
variants { name: "fedavg" }
seeds: [1]
metrics { kind: FINAL one_shot_clients: MEAN }
metrics { kind: FINAL one_shot_clients: MIN }
metrics { kind: FINAL one_shot_row: "fedavg" }
metrics { kind: FINAL one_shot_row: "fedavg" column: "aggregation_seconds" }
baseline: "fedavg"
)");
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  EXPECT_EQ(sweep->spec.metrics(1).label(), "clients min");
  EXPECT_EQ(sweep->spec.metrics(3).label(), "fedavg aggregation_seconds");

  sweep = Load(R"(
set: "server { rounds: 1 one_shot: true }"
variants { name: "fedavg" }
seeds: [1]
metrics { kind: BEST one_shot_row: "fedavg" }
metrics { kind: FINAL one_shot_row: "split average" one_shot_clients: MAX }
metrics { kind: FINAL one_shot_row: "FedAvg" }
baseline: "fedavg"
)");
  ASSERT_FALSE(sweep.ok());
  const std::string message(sweep.status().message());
  EXPECT_THAT(message,
              HasSubstr("metrics[0].kind: one_shot_row and one_shot_clients take FINAL (a one-shot "
                        "run has one value), got BEST"));
  EXPECT_THAT(message, HasSubstr("metrics[1].one_shot_clients: a metric reads one aggregate row "
                                 "(one_shot_row) or the client rows, not both"));
  // Two labels that differ only in case would share a runs.csv column.
  EXPECT_THAT(message,
              HasSubstr("metrics[2]: the same as metrics[0] (one_shot_fedavg_test_accuracy)"));
}

TEST(SweepSpecTest, OneShotMetricsNeedOneShotRuns) {
  absl::StatusOr<Sweep> sweep = Load(R"(
variants { name: "fedavg" }
variants { name: "one_shot" set: "server { rounds: 1 one_shot: true }" }
seeds: [1]
metrics { kind: FINAL }
metrics { kind: FINAL one_shot_row: "fedavg" }
baseline: "fedavg"
)");
  ASSERT_FALSE(sweep.ok());
  const std::string message(sweep.status().message());
  EXPECT_THAT(message, HasSubstr("variant \"fedavg\": metrics[1]: reads one_shot.csv, which only "
                                 "a one-shot run (server { one_shot: true }) writes"));
  EXPECT_THAT(message, Not(HasSubstr("variant \"one_shot\"")));
}

TEST(SweepSpecTest, ReferencesDefaultToTheFirstMetric) {
  absl::StatusOr<Sweep> sweep = Load(R"(
variants { name: "fedavg" references { value: 81.5 } }
variants {
  name: "fedexp"
  references { metric: "rounds to 85%" value: 120 }
  references { metric: "last 10 mean" value: 80.25 }
}
seeds: [1]
metrics { kind: LAST_K_MEAN k: 10 }
metrics { kind: ROUNDS_TO target: 0.85 }
baseline: "fedavg"
)");
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  EXPECT_EQ(sweep->spec.variants(0).references(0).metric(), "last 10 mean");
  EXPECT_EQ(sweep->spec.variants(1).references(0).metric(), "rounds to 85%");
  EXPECT_EQ(sweep->spec.reference_label(), "reference");

  sweep = Load(absl::StrCat(kFedAvgAndFedExp, "reference_label: \"paper\"\n"));
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  EXPECT_EQ(sweep->spec.reference_label(), "paper");
}

TEST(SweepSpecTest, BadReferencesNameTheFieldAndTheLabels) {
  absl::StatusOr<Sweep> sweep = Load(R"(
variants {
  name: "fedavg"
  references { metric: "last 5 mean" value: 80 }
  references { value: 80 }
  references { metric: "final" value: 81 }
}
variants {
  name: "fedexp"
  references { metric: "final" value: inf }
  references { metric: "gamma, last" value: nan }
  references { metric: "final" }
  references { metric: "twice" value: 1 }
}
seeds: [1]
metrics { kind: FINAL }
metrics { kind: FINAL column: "test_loss" label: "twice" }
metrics { kind: BEST column: "test_loss" label: "twice" }
metrics { kind: FINAL column: "gamma" label: "gamma, last" }
baseline: "fedavg"
)");
  ASSERT_FALSE(sweep.ok());
  // Nothing else is wrong with the file: these are all its errors.
  EXPECT_EQ(std::string(sweep.status().message()),
            "variants[0].references[0].metric: \"last 5 mean\" is not a metric's label; labels: "
            "\"final\", \"twice\", \"gamma, last\"\n"
            // An empty metric is the first, "final".
            "variants[0].references[2].metric: \"final\" is also references[1]'s metric\n"
            "variants[1].references[0].value: must be a finite number, got inf\n"
            "variants[1].references[1].value: must be a finite number, got nan\n"
            "variants[1].references[2].value: required: the number to show, in the table's "
            "units\n"
            "variants[1].references[2].metric: \"final\" is also references[0]'s metric\n"
            "variants[1].references[3].metric: \"twice\" labels metrics[1] and metrics[2]; give "
            "them different labels");
}

TEST(SweepSpecTest, ReachedAtAndCurveXColumnTakeProgressColumns) {
  absl::StatusOr<Sweep> sweep = Load(absl::StrCat(kFedAvgAndFedExp, R"(
metrics { kind: ROUNDS_TO target: 0.8 reached_at: "virtual_seconds" }
metrics { kind: ROUNDS_TO target: 0.8 reached_at: "clients" }
metrics { kind: ROUNDS_TO target: 0.8 reached_at: "bytes_up" scale: 1e-6 label: "MB up to 80%" }
curve_x_column: "virtual_seconds"
)"));
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  EXPECT_EQ(sweep->spec.metrics(1).label(), "virtual s to 80%");
  EXPECT_EQ(sweep->spec.metrics(2).label(), "updates to 80%");
  EXPECT_EQ(sweep->spec.curve_x_column(), "virtual_seconds");
  sweep = Load(kFedAvgAndFedExp);
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  EXPECT_EQ(sweep->spec.curve_x_column(), "round");
}

TEST(SweepSpecTest, BadReachedAtAndCurveXColumnNameTheField) {
  absl::StatusOr<Sweep> sweep = Load(R"(
variants { name: "fedavg" }
seeds: [1]
metrics { kind: FINAL reached_at: "clients" }
metrics { kind: ROUNDS_TO target: 0.8 reached_at: "round" }
metrics { kind: ROUNDS_TO target: 0.8 reached_at: "test_loss" }
metrics { kind: ROUNDS_TO target: 0.8 scale: 2 }
baseline: "fedavg"
curve_x_column: "wall_seconds"
)");
  ASSERT_FALSE(sweep.ok());
  // Nothing else is wrong with the file: these are all its errors.
  EXPECT_EQ(std::string(sweep.status().message()),
            "metrics[0].reached_at: only ROUNDS_TO takes reached_at\n"
            "metrics[1].reached_at: \"round\" is not a metrics.csv column it can read; one of "
            "virtual_seconds, seconds, bytes_up, bytes_down, clients, rejected, incomplete, "
            "dropped\n"
            "metrics[2].reached_at: \"test_loss\" is not a metrics.csv column it can read; one of "
            "virtual_seconds, seconds, bytes_up, bytes_down, clients, rejected, incomplete, "
            "dropped\n"
            "metrics[3].scale: ROUNDS_TO counts rounds and takes no scale (unless it has "
            "reached_at)\n"
            "curve_x_column: \"wall_seconds\" is not round or a metrics.csv column it can draw "
            "against: virtual_seconds, seconds, bytes_up, bytes_down, clients, rejected, "
            "incomplete, dropped");
}

TEST(SweepSpecTest, AMissingBaseSpecIsNamed) {
  const fs::path path = fs::path(std::getenv("TEST_TMPDIR")) / "missing_base.sweep.textproto";
  std::ofstream(path) << "base_spec: \"nowhere.textproto\"\n" << kFedAvgAndFedExp;
  absl::StatusOr<Sweep> sweep = LoadSweep(path.string(), {});
  ASSERT_FALSE(sweep.ok());
  EXPECT_THAT(std::string(sweep.status().message()),
              HasSubstr("base_spec: cannot read spec file " +
                        (path.parent_path() / "nowhere.textproto").string()));
}

}  // namespace
}  // namespace sweep
