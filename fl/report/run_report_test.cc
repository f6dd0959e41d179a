#include "fl/report/run_report.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fl::report {
namespace {

namespace fs = std::filesystem;

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kSpec[] =
    "name: \"tiny<run>\"\n"
    "seed: 1\n"
    "dataset {\n  name: \"fashion_mnist\"\n}\n"
    "output {\n  dir: \"/tmp/a&b\"\n}\n";

// Three evaluated rounds; a diagnostic from round 2 on, and rejections for one
// reason from round 3 on (fl/metrics_sink.h's layout).
constexpr char kMetrics[] =
    "round,test_accuracy,test_loss,train_loss,clients,rejected,incomplete,dropped,bytes_up,"
    "bytes_down,seconds,eta_g,rejected_norm\n"
    "1,0.50,1.5,1.7,4,0,0,0,1000,2000,1.0,,0\n"
    "2,0.60,1.2,1.3,4,0,1,0,2000,4000,2.5,1.2,0\n"
    "3,0.65,1.1,1.0,3,1,0,0,3000,6000,4.0,1.4,1\n";

// Every round, one of them NaN.
constexpr char kDiagnostics[] =
    "round,eta_g,gamma\n"
    "1,1.1,0.5\n"
    "2,1.2,nan\n"
    "3,1.4,0.7\n";

constexpr char kSummary[] =
    "{\n  \"rounds\": 3,\n  \"final_test_accuracy\": 0.65,\n  \"final_test_loss\": 1.1,\n"
    "  \"best_test_accuracy\": 0.65,\n  \"best_round\": 3,\n"
    "  \"mean_test_accuracy_last_10\": 0.5833,\n  \"bytes_up\": 3000,\n"
    "  \"bytes_down\": 6000,\n  \"local_steps\": 33,\n  \"wall_seconds\": 5.25,\n"
    "  \"peak_rss_mb\": 321.0,\n  \"threads\": {\"cores\": 2}\n}\n";

constexpr char kClassCounts[] = "client,0,1,2\n0,5,0,1\n1,0,4,0\n2,2,2,2\n";

class RunReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(std::getenv("TEST_TMPDIR")) /
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    Write("spec.textproto", kSpec);
    Write("metrics.csv", kMetrics);
    Write("diagnostics.csv", kDiagnostics);
    Write("summary.json", kSummary);
    Write("class_counts.csv", kClassCounts);
  }

  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
  }

  std::string Render() {
    absl::StatusOr<std::string> html = RunReportHtml(dir_.string());
    EXPECT_TRUE(html.ok()) << html.status();
    return html.value_or("");
  }

  // The section with id `id`, from its tag to its end.
  static std::string SectionOf(const std::string& html, const std::string& id) {
    const size_t begin = html.find("<section id=\"" + id + "\">");
    if (begin == std::string::npos) return "";
    return html.substr(begin, html.find("</section>", begin) - begin);
  }

  // How many points the series `name` draws; -1 when there is no such series.
  static int Points(const std::string& html, const std::string& name) {
    std::smatch match;
    const std::regex re("<path class=\"series\" data-series=\"" + name +
                        "\" data-points=\"([0-9]+)\"");
    return std::regex_search(html, match, re) ? std::stoi(match[1].str()) : -1;
  }

  fs::path dir_;
};

TEST_F(RunReportTest, HasEverySection) {
  const std::string html = Render();
  for (const char* id :
       {"numbers", "curves", "diagnostics", "communication", "timing", "memory", "partition",
        "spec"}) {
    EXPECT_THAT(SectionOf(html, id), HasSubstr("<h2>")) << id;
    EXPECT_THAT(html, HasSubstr(std::string("href=\"#") + id + "\"")) << id;
  }
  EXPECT_THAT(html, HasSubstr("<figure id=\"accuracy\">"));
  EXPECT_THAT(html, HasSubstr("<figure id=\"loss\">"));
  EXPECT_THAT(html, HasSubstr("<h1>tiny&lt;run&gt;</h1>"));
  EXPECT_THAT(html, Not(HasSubstr("<script")));
}

TEST_F(RunReportTest, ShowsTheSpecEscaped) {
  EXPECT_THAT(SectionOf(Render(), "spec"),
              HasSubstr("<pre>name: &quot;tiny&lt;run&gt;&quot;\nseed: 1\n"));
  EXPECT_THAT(SectionOf(Render(), "spec"), HasSubstr("dir: &quot;/tmp/a&amp;b&quot;"));
}

TEST_F(RunReportTest, OneSeriesPerCurveWithEveryEvaluatedRound) {
  const std::string html = Render();
  EXPECT_EQ(Points(SectionOf(html, "curves"), "test accuracy"), 3);
  EXPECT_EQ(Points(SectionOf(html, "curves"), "test loss"), 3);
  EXPECT_EQ(Points(SectionOf(html, "curves"), "train loss"), 3);
  EXPECT_EQ(Points(SectionOf(html, "communication"), "up"), 3);
  EXPECT_EQ(Points(SectionOf(html, "communication"), "down"), 3);
  EXPECT_EQ(Points(SectionOf(html, "communication"), "accepted"), 3);
  EXPECT_EQ(Points(SectionOf(html, "communication"), "rejected: norm"), 3);
  EXPECT_EQ(Points(SectionOf(html, "timing"), "seconds per round"), 3);
}

TEST_F(RunReportTest, OneChartPerDiagnosticFromDiagnosticsCsv) {
  const std::string diagnostics = SectionOf(Render(), "diagnostics");
  EXPECT_EQ(Points(diagnostics, "eta_g"), 3);
  // gamma's NaN round breaks its line: the two others are dots.
  EXPECT_EQ(Points(diagnostics, "gamma"), 2);
  EXPECT_THAT(diagnostics, HasSubstr("every round (diagnostics.csv)"));
}

TEST_F(RunReportTest, WithoutDiagnosticsCsvTheDiagnosticsComeFromMetricsCsv) {
  fs::remove(dir_ / "diagnostics.csv");
  const std::string diagnostics = SectionOf(Render(), "diagnostics");
  // eta_g is empty in round 1; the rejection counter is not a diagnostic.
  EXPECT_EQ(Points(diagnostics, "eta_g"), 2);
  EXPECT_EQ(Points(diagnostics, "rejected_norm"), -1);
  EXPECT_EQ(Points(diagnostics, "seconds"), -1);
  EXPECT_THAT(diagnostics, HasSubstr("this run has no diagnostics.csv"));
}

TEST_F(RunReportTest, PerClientAccuracyIsDrawnWithTestAccuracyNotAsADiagnostic) {
  Write("metrics.csv",
        "round,test_accuracy,test_loss,train_loss,clients,rejected,incomplete,dropped,bytes_up,"
        "bytes_down,seconds,client_acc_mean,client_acc_p10,client_acc_sd,client_acc_worst\n"
        "1,0.50,1.5,1.7,4,0,0,0,1000,2000,1.0,0.52,0.30,0.1,0.25\n"
        "2,0.60,1.2,1.3,4,0,0,0,2000,4000,2.5,0.61,0.40,0.1,0.35\n");
  fs::remove(dir_ / "diagnostics.csv");
  const std::string html = Render();
  const std::string curves = SectionOf(html, "curves");
  EXPECT_EQ(Points(curves, "test accuracy"), 2);
  EXPECT_EQ(Points(curves, "client mean"), 2);
  EXPECT_EQ(Points(curves, "client 10th percentile"), 2);
  EXPECT_EQ(Points(curves, "worst client"), 2);
  const std::string diagnostics = SectionOf(html, "diagnostics");
  EXPECT_EQ(Points(diagnostics, "client_acc_mean"), -1);
  EXPECT_THAT(diagnostics, HasSubstr("The aggregator reported no diagnostics."));
}

TEST_F(RunReportTest, AnAggregatorWithoutDiagnosticsSaysSo) {
  fs::remove(dir_ / "diagnostics.csv");
  Write("metrics.csv",
        "round,test_accuracy,test_loss,train_loss,clients,rejected,incomplete,dropped,bytes_up,"
        "bytes_down,seconds\n1,0.5,1.5,1.7,4,0,0,0,1000,2000,1.0\n");
  EXPECT_THAT(SectionOf(Render(), "diagnostics"),
              HasSubstr("The aggregator reported no diagnostics."));
}

// The runner's columns with its virtual clock (cumulative virtual_seconds).
constexpr char kClockMetrics[] =
    "round,test_accuracy,test_loss,train_loss,clients,rejected,incomplete,dropped,bytes_up,"
    "bytes_down,seconds,virtual_seconds\n"
    "1,0.50,1.5,1.7,4,0,0,0,1000,2000,1.0,12.5\n"
    "2,0.60,1.2,1.3,4,0,1,0,2000,4000,2.5,30\n"
    "3,0.65,1.1,1.0,3,1,0,0,3000,6000,4.0,95.25\n";

// The figure with id `id`, from its tag to its end.
std::string FigureOf(const std::string& html, const std::string& id) {
  const size_t begin = html.find("<figure id=\"" + id + "\">");
  if (begin == std::string::npos) return "";
  return html.substr(begin, html.find("</figure>", begin) - begin);
}

TEST_F(RunReportTest, AccuracyAgainstVirtualTimeWhenTheClockMoved) {
  Write("metrics.csv", kClockMetrics);
  const std::string html = Render();
  const std::string chart = FigureOf(html, "accuracy_virtual");
  EXPECT_THAT(chart, HasSubstr(">Test accuracy against virtual time</text>"));
  EXPECT_THAT(chart, HasSubstr(">virtual seconds</text>"));
  EXPECT_EQ(Points(chart, "test accuracy"), 3);
  // Beside the per-round chart, which is still there, against the round.
  EXPECT_THAT(FigureOf(html, "accuracy"), HasSubstr(">round</text>"));
  EXPECT_LT(html.find("<figure id=\"accuracy\">"), html.find("<figure id=\"accuracy_virtual\">"));
  EXPECT_LT(html.find("<figure id=\"accuracy_virtual\">"), html.find("<figure id=\"loss\">"));
  // The last row's virtual_seconds: 95.25 s.
  EXPECT_THAT(SectionOf(html, "timing"),
              HasSubstr(">virtual time (metrics.csv)</div><div class=\"value\">1m 35s<"));
}

TEST_F(RunReportTest, NoVirtualTimeWithoutAClockOrWhenItStayedAtZero) {
  // kMetrics predates the clock: no virtual_seconds column.
  std::string html = Render();
  EXPECT_EQ(FigureOf(html, "accuracy_virtual"), "");
  EXPECT_THAT(html, Not(HasSubstr("virtual time")));
  // A clock that stayed at zero.
  Write("metrics.csv",
        "round,test_accuracy,test_loss,seconds,virtual_seconds\n"
        "1,0.5,1.5,1.0,0\n2,0.6,1.2,2.0,0\n");
  html = Render();
  EXPECT_EQ(FigureOf(html, "accuracy_virtual"), "");
  EXPECT_THAT(html, Not(HasSubstr("virtual time")));
}

TEST_F(RunReportTest, KeyNumbersComeFromSummaryJson) {
  const std::string numbers = SectionOf(Render(), "numbers");
  EXPECT_THAT(numbers, HasSubstr(">final test accuracy</div><div class=\"value\">65.00 %<"));
  EXPECT_THAT(numbers, HasSubstr(">65.00 % (round 3)<"));
  EXPECT_THAT(numbers, HasSubstr(">mean of the last 10 evaluations</div><div "
                                 "class=\"value\">58.33 %<"));
  EXPECT_THAT(numbers, HasSubstr(">wall time</div><div class=\"value\">5.2 s<"));
  EXPECT_THAT(numbers, HasSubstr(">bytes up</div><div class=\"value\">3 kB<"));
  EXPECT_THAT(numbers, HasSubstr("&quot;threads&quot;: {&quot;cores&quot;: 2}"));
  EXPECT_THAT(SectionOf(Render(), "memory"), HasSubstr(">321 MB<"));
}

TEST_F(RunReportTest, WithoutSummaryJsonThePageSaysTheRunHasNotFinished) {
  fs::remove(dir_ / "summary.json");
  const std::string html = Render();
  EXPECT_THAT(SectionOf(html, "numbers"), HasSubstr("No summary.json"));
  EXPECT_THAT(SectionOf(html, "memory"), HasSubstr("No peak memory"));
  EXPECT_EQ(Points(html, "test accuracy"), 3);
}

TEST_F(RunReportTest, ThePartitionIsAHeatmap) {
  const std::string partition = SectionOf(Render(), "partition");
  EXPECT_THAT(partition, HasSubstr("data-rows=\"3\" data-columns=\"3\""));
  fs::remove(dir_ / "class_counts.csv");
  EXPECT_THAT(SectionOf(Render(), "partition"), HasSubstr("No partition file"));
  Write("class_counts.csv", "client,0\n0,x\n");
  EXPECT_THAT(SectionOf(Render(), "partition"), HasSubstr("class_counts.csv: row 1, class 0"));
}

TEST_F(RunReportTest, MissingOrBadRequiredFilesAreErrorsNamingTheFile) {
  fs::remove(dir_ / "metrics.csv");
  absl::StatusOr<std::string> html = RunReportHtml(dir_.string());
  EXPECT_EQ(html.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(html.status().message(), HasSubstr((dir_ / "metrics.csv").string()));

  Write("metrics.csv", "round,test_accuracy,test_loss\n1,0.5\n");
  html = RunReportHtml(dir_.string());
  EXPECT_EQ(html.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(html.status().message(), HasSubstr("metrics.csv:2: 2 cells, the header has 3"));

  Write("metrics.csv", "round,test_accuracy,test_loss\n1,0.5,lots\n");
  EXPECT_THAT(RunReportHtml(dir_.string()).status().message(),
              HasSubstr("metrics.csv: row 1: test_loss \"lots\" is not a number"));

  Write("metrics.csv", "round,test_accuracy\n1,0.5\n");
  EXPECT_THAT(RunReportHtml(dir_.string()).status().message(),
              HasSubstr("metrics.csv: no column \"test_loss\""));

  Write("metrics.csv", kMetrics);
  fs::remove(dir_ / "spec.textproto");
  html = RunReportHtml(dir_.string());
  EXPECT_EQ(html.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(html.status().message(), HasSubstr((dir_ / "spec.textproto").string()));
}

TEST_F(RunReportTest, WritesReportHtmlIntoTheFolder) {
  ASSERT_TRUE(WriteRunReport(dir_.string()).ok());
  std::ifstream in(dir_ / "report.html");
  const std::string written((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(written, Render());
  EXPECT_FALSE(fs::exists(dir_ / "report.html.tmp"));
}

}  // namespace
}  // namespace fl::report
