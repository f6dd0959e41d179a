#include "fl/metrics_sink.h"

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"

#include "fl/spec.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fl {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kHeader[] =
    "round,test_accuracy,test_loss,train_loss,clients,rejected,incomplete,dropped,bytes_up,"
    "bytes_down,seconds,virtual_seconds";

// A fresh directory path (not created) under the test's temporary directory.
std::string OutputDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/metrics_sink_test/" + name;
  std::filesystem::remove_all(dir);
  return dir;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

fedkit::ExperimentSpec TestSpec() {
  fedkit::ExperimentSpec spec;
  spec.set_name("sink_test_experiment");
  spec.set_seed(5);
  spec.mutable_server()->set_rounds(12);
  return spec;
}

std::unique_ptr<MetricsSink> OpenOrDie(const std::string& dir) {
  absl::StatusOr<std::unique_ptr<MetricsSink>> sink = MetricsSink::Open(dir, TestSpec());
  EXPECT_TRUE(sink.ok()) << sink.status();
  return sink.ok() ? std::move(*sink) : nullptr;
}

// The events' contents are TensorBoard's to judge (tools/tensorboard_test.sh); here:
// written unless turned off, and started afresh when a run resumes into the folder.
TEST(MetricsSinkTest, TensorBoardEventsUnlessTurnedOffAndAfreshOnReopen) {
  const std::string dir = OutputDir("events");
  const std::string events = dir + "/" + tensorboard::EventWriter::kFileName;
  MetricsRow row;
  row.round = 1;
  {
    std::unique_ptr<MetricsSink> sink = OpenOrDie(dir);
    ASSERT_TRUE(sink->AddRow(row).ok());
    ASSERT_TRUE(sink->AddDiagnostics(1, {{"eta_g", 1.5}}).ok());
  }
  const std::string first = ReadFile(events);
  EXPECT_THAT(first, HasSubstr("metrics/test_accuracy"));
  EXPECT_THAT(first, HasSubstr("diagnostics/eta_g"));
  EXPECT_THAT(first, HasSubstr("sink_test_experiment"));  // the spec as text
  {
    std::unique_ptr<MetricsSink> sink = OpenOrDie(dir);
    EXPECT_THAT(ReadFile(events), Not(HasSubstr("diagnostics/eta_g")));
  }

  const std::string off = OutputDir("events_off");
  fedkit::ExperimentSpec spec = TestSpec();
  spec.mutable_output()->set_tensorboard(false);
  absl::StatusOr<std::unique_ptr<MetricsSink>> sink = MetricsSink::Open(off, spec);
  ASSERT_TRUE(sink.ok()) << sink.status();
  ASSERT_TRUE((*sink)->AddRow(row).ok());
  EXPECT_TRUE(std::filesystem::exists(off + "/metrics.csv"));
  EXPECT_FALSE(std::filesystem::exists(off + "/" + tensorboard::EventWriter::kFileName));
}

TEST(MetricsSinkTest, DiagnosticsCsvHasEveryRoundAndSkipsEmptyOnes) {
  const std::string dir = std::string(getenv("TEST_TMPDIR")) + "/diagnostics";
  auto sink = MetricsSink::Open(dir, fedkit::ExperimentSpec());
  ASSERT_TRUE(sink.ok());
  ASSERT_TRUE((*sink)->AddDiagnostics(1, {{"eta_g", 1.5}}).ok());
  ASSERT_TRUE((*sink)->AddDiagnostics(2, {}).ok());
  ASSERT_TRUE((*sink)->AddDiagnostics(3, {{"eta_g", 2}, {"alpha", 0.25}}).ok());
  std::ifstream in(dir + "/diagnostics.csv");
  std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(text, "round,alpha,eta_g\n1,,1.5\n3,0.25,2\n");
}

// Regression: the CSVs were rewritten whole after every row (quadratic in rounds,
// and a new file each time). Rows with known columns are appended to the same file,
// and each is on disk as soon as AddRow returns.
TEST(MetricsSinkTest, RowsAreAppendedAndOnDiskAtOnce) {
  const std::string dir = OutputDir("append");
  std::unique_ptr<MetricsSink> sink = OpenOrDie(dir);
  MetricsRow row;
  row.diagnostics = {{"eta_g", 1.0}};
  row.round = 1;
  ASSERT_TRUE(sink->AddRow(row).ok());
  const auto inode = [&](const std::string& file) {
    struct stat st;
    EXPECT_EQ(stat((dir + "/" + file).c_str(), &st), 0) << file;
    return st.st_ino;
  };
  const auto first = inode("metrics.csv");
  for (int round = 2; round <= 4; ++round) {
    row.round = round;
    ASSERT_TRUE(sink->AddRow(row).ok());
    EXPECT_EQ(inode("metrics.csv"), first) << "round " << round;
    EXPECT_THAT(ReadFile(dir + "/metrics.csv"), HasSubstr(absl::StrCat("\n", round, ",0,")));
  }
  // A new diagnostic widens the header once, keeping the earlier rows.
  row.round = 5;
  row.diagnostics["zeta"] = 2.0;
  ASSERT_TRUE(sink->AddRow(row).ok());
  const std::string csv = ReadFile(dir + "/metrics.csv");
  EXPECT_THAT(csv, HasSubstr(absl::StrCat(kHeader, ",eta_g,zeta\n1,")));
  EXPECT_THAT(csv, HasSubstr(",1,\n5,"));
  EXPECT_THAT(csv, HasSubstr(",1,2\n"));
}

TEST(MetricsSinkTest, OpenCreatesNestedDirAndWritesSpec) {
  const std::string dir = OutputDir("open") + "/a/b/c";
  ASSERT_FALSE(std::filesystem::exists(dir));
  absl::StatusOr<std::unique_ptr<MetricsSink>> sink = MetricsSink::Open(dir, TestSpec());
  ASSERT_TRUE(sink.ok()) << sink.status();
  EXPECT_TRUE(std::filesystem::is_directory(dir));
  const std::string spec_text = ReadFile(dir + "/spec.textproto");
  EXPECT_THAT(spec_text, HasSubstr("name: \"sink_test_experiment\""));
  EXPECT_THAT(spec_text, HasSubstr("seed: 5"));
  EXPECT_THAT(spec_text, HasSubstr("rounds: 12"));
  // Nothing else is written until there is a row.
  EXPECT_FALSE(std::filesystem::exists(dir + "/metrics.csv"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/summary.json"));
  EXPECT_TRUE((*sink)->rows().empty());
}

TEST(MetricsSinkTest, OpenFailsWhenDirIsAFile) {
  const std::string base = OutputDir("file_in_the_way");
  std::filesystem::create_directories(base);
  { std::ofstream(base + "/file") << "x"; }
  absl::StatusOr<std::unique_ptr<MetricsSink>> sink =
      MetricsSink::Open(base + "/file/sub", TestSpec());
  EXPECT_FALSE(sink.ok());
}

TEST(MetricsSinkTest, OneRowWithoutDiagnostics) {
  const std::string dir = OutputDir("one_row");
  std::unique_ptr<MetricsSink> sink = OpenOrDie(dir);
  ASSERT_NE(sink, nullptr);
  MetricsRow row;
  row.round = 3;
  row.test_accuracy = 0.8125;
  row.test_loss = 1.0 / 3.0;  // %.6g -> 0.333333
  row.train_loss = 123456789.0;  // %.6g -> 1.23457e+08
  row.clients = 10;
  row.rejected = 2;
  row.incomplete = 4;
  row.dropped = 1;
  row.bytes_up = 123456789012;  // integers are printed whole
  row.bytes_down = 42;
  row.seconds = 2.0 / 3.0;  // %.3f -> 0.667
  row.virtual_seconds = 12345.6789;  // %.3f -> 12345.679
  ASSERT_TRUE(sink->AddRow(row).ok());
  EXPECT_EQ(ReadFile(dir + "/metrics.csv"),
            std::string(kHeader) + "\n" +
                "3,0.8125,0.333333,1.23457e+08,10,2,4,1,123456789012,42,0.667,12345.679\n");
  EXPECT_EQ(sink->rows().size(), 1);
}

TEST(MetricsSinkTest, DiagnosticColumnsAreSortedAndBackfilled) {
  const std::string dir = OutputDir("diagnostics");
  std::unique_ptr<MetricsSink> sink = OpenOrDie(dir);
  ASSERT_NE(sink, nullptr);

  MetricsRow first;
  first.round = 1;
  first.test_accuracy = 0.5;
  first.test_loss = 1.25;
  first.train_loss = 2.0;
  first.clients = 10;
  first.rejected = 0;
  first.bytes_up = 1000;
  first.bytes_down = 2000;
  first.seconds = 1.5;
  first.diagnostics = {{"zeta", 0.125}};
  ASSERT_TRUE(sink->AddRow(first).ok());
  EXPECT_EQ(ReadFile(dir + "/metrics.csv"),
            std::string(kHeader) + ",zeta\n" + "1,0.5,1.25,2,10,0,0,0,1000,2000,1.500,0.000,0.125\n");

  MetricsRow second;
  second.round = 2;
  second.test_accuracy = 0.75;
  second.test_loss = 0.5;
  second.train_loss = 1.0;
  second.clients = 9;
  second.rejected = 1;
  second.bytes_up = 3000;
  second.bytes_down = 4000;
  second.seconds = 3.25;
  second.diagnostics = {{"zeta", 0.25}, {"alpha", 2.0}, {"mid", -1e-7}};
  ASSERT_TRUE(sink->AddRow(second).ok());
  EXPECT_EQ(ReadFile(dir + "/metrics.csv"),
            std::string(kHeader) + ",alpha,mid,zeta\n" +
                "1,0.5,1.25,2,10,0,0,0,1000,2000,1.500,0.000,,,0.125\n" +
                "2,0.75,0.5,1,9,1,0,0,3000,4000,3.250,0.000,2,-1e-07,0.25\n");

  // A row without any diagnostics leaves all their cells empty.
  MetricsRow third;
  third.round = 3;
  third.seconds = 4.0;
  ASSERT_TRUE(sink->AddRow(third).ok());
  EXPECT_EQ(ReadFile(dir + "/metrics.csv"),
            std::string(kHeader) + ",alpha,mid,zeta\n" +
                "1,0.5,1.25,2,10,0,0,0,1000,2000,1.500,0.000,,,0.125\n" +
                "2,0.75,0.5,1,9,1,0,0,3000,4000,3.250,0.000,2,-1e-07,0.25\n" +
                "3,0,0,0,0,0,0,0,0,0,4.000,0.000,,,\n");
  EXPECT_EQ(sink->rows().size(), 3);
}

TEST(MetricsSinkTest, SummaryOverTwelveRows) {
  const std::string dir = OutputDir("summary");
  std::unique_ptr<MetricsSink> sink = OpenOrDie(dir);
  ASSERT_NE(sink, nullptr);
  // The best accuracy (0.9, round 2) is outside the last 10 rows; a later 0.9
  // ties with it and does not replace it.
  const double accuracies[12] = {0.1, 0.9, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.9, 0.5, 0.6, 0.7};
  for (int i = 0; i < 12; ++i) {
    MetricsRow row;
    row.round = i + 1;
    row.test_accuracy = accuracies[i];
    row.test_loss = 0.25 * (i + 1);
    row.bytes_up = 100 * (i + 1);
    row.bytes_down = 1000 * (i + 1);
    row.seconds = i + 1;
    row.virtual_seconds = 10.5 * (i + 1);
    ASSERT_TRUE(sink->AddRow(row).ok());
  }
  ASSERT_TRUE(sink->WriteSummary(/*wall_seconds=*/12.3456, /*rounds=*/12).ok());
  const std::string json = ReadFile(dir + "/summary.json");
  // Last 10 rows (rounds 3..12): 0.2+0.3+0.4+0.5+0.6+0.7+0.9+0.5+0.6+0.7 = 5.4 -> 0.54.
  // (All 12 rows would give 6.4 / 12 = 0.533333; the first 10 would give 0.51.)
  EXPECT_THAT(json, HasSubstr("\"mean_test_accuracy_last_10\": 0.54,"));
  EXPECT_THAT(json, HasSubstr("\"final_test_accuracy\": 0.7,"));
  EXPECT_THAT(json, HasSubstr("\"final_test_loss\": 3,"));
  EXPECT_THAT(json, HasSubstr("\"best_test_accuracy\": 0.9,"));
  EXPECT_THAT(json, HasSubstr("\"best_round\": 2,"));
  EXPECT_THAT(json, HasSubstr("\"rounds\": 12,"));
  EXPECT_THAT(json, HasSubstr("\"bytes_up\": 1200,"));
  EXPECT_THAT(json, HasSubstr("\"bytes_down\": 12000,"));
  EXPECT_THAT(json, HasSubstr("\"wall_seconds\": 12.346"));
  EXPECT_THAT(json, HasSubstr("\"virtual_seconds\": 126.000,"));
  EXPECT_THAT(json, Not(HasSubstr("\"best_round\": 9")));
}

TEST(MetricsSinkTest, SummaryWithFewerThanTenRowsAveragesThemAll) {
  const std::string dir = OutputDir("short_summary");
  std::unique_ptr<MetricsSink> sink = OpenOrDie(dir);
  ASSERT_NE(sink, nullptr);
  const double accuracies[3] = {0.25, 0.75, 0.5};
  for (int i = 0; i < 3; ++i) {
    MetricsRow row;
    row.round = 5 * (i + 1);
    row.test_accuracy = accuracies[i];
    ASSERT_TRUE(sink->AddRow(row).ok());
  }
  ASSERT_TRUE(sink->WriteSummary(/*wall_seconds=*/1.0, /*rounds=*/15).ok());
  const std::string json = ReadFile(dir + "/summary.json");
  EXPECT_THAT(json, HasSubstr("\"mean_test_accuracy_last_10\": 0.5,"));
  EXPECT_THAT(json, HasSubstr("\"best_round\": 10,"));
  EXPECT_THAT(json, HasSubstr("\"final_test_accuracy\": 0.5,"));
  EXPECT_THAT(json, HasSubstr("\"rounds\": 15,"));
}

TEST(MetricsSinkTest, SummaryWithoutRowsIsFailedPrecondition) {
  const std::string dir = OutputDir("empty_summary");
  std::unique_ptr<MetricsSink> sink = OpenOrDie(dir);
  ASSERT_NE(sink, nullptr);
  absl::Status status = sink->WriteSummary(1.0, 0);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(std::filesystem::exists(dir + "/summary.json"));
}

}  // namespace
}  // namespace fl
