#include "fl/report/result_files.h"

#include <cmath>
#include <string>

#include "gtest/gtest.h"

namespace fl::report {
namespace {

// As the runner writes it (CRLF line ends aside): a diagnostic that appeared at
// round 2 is empty in round 1's row, and NaN in round 4's.
constexpr char kMetricsCsv[] =
    "round,test_accuracy,seconds,eta_g\r\n"
    "1,0.70,0.5,\r\n"
    "2,0.84,1.0,1.5\r\n"
    "3,0.82,1.5,2\r\n"
    "4,0.86,2.0,nan\r\n";

CsvTable Table(absl::string_view csv) {
  absl::StatusOr<CsvTable> table = ParseCsv(csv, "metrics.csv");
  EXPECT_TRUE(table.ok()) << table.status();
  return table.value_or(CsvTable{});
}

TEST(ResultFilesTest, ReadsColumnsByNameAndSkipsEmptyAndNanCells) {
  const CsvTable table = Table(kMetricsCsv);
  absl::StatusOr<Series> accuracy = ColumnSeries(table, "test_accuracy", "metrics.csv");
  ASSERT_TRUE(accuracy.ok()) << accuracy.status();
  ASSERT_EQ(accuracy->size(), 4u);
  EXPECT_EQ((*accuracy)[3].round, 4);
  EXPECT_DOUBLE_EQ((*accuracy)[3].value, 0.86);
  absl::StatusOr<Series> eta = ColumnSeries(table, "eta_g", "metrics.csv");
  ASSERT_TRUE(eta.ok()) << eta.status();
  ASSERT_EQ(eta->size(), 2u);
  EXPECT_EQ((*eta)[0].round, 2);
  EXPECT_DOUBLE_EQ((*eta)[1].value, 2.0);
}

TEST(ResultFilesTest, ColumnValuesKeepEveryRowWithNanForEmptyCells) {
  absl::StatusOr<std::vector<double>> eta = ColumnValues(Table(kMetricsCsv), "eta_g", "m.csv");
  ASSERT_TRUE(eta.ok()) << eta.status();
  ASSERT_EQ(eta->size(), 4u);
  EXPECT_TRUE(std::isnan((*eta)[0]));
  EXPECT_EQ((*eta)[1], 1.5);
  EXPECT_TRUE(std::isnan((*eta)[3]));
  EXPECT_TRUE(HasColumn(Table(kMetricsCsv), "seconds"));
  EXPECT_FALSE(HasColumn(Table(kMetricsCsv), "gamma"));
}

TEST(ResultFilesTest, ErrorsNameTheFileAndTheProblem) {
  absl::StatusOr<CsvTable> ragged = ParseCsv("round,test_accuracy\n1,0.5\n2,0.6,7\n", "m.csv");
  ASSERT_FALSE(ragged.ok());
  EXPECT_EQ(ragged.status().message(), "m.csv:3: 3 cells, the header has 2");
  EXPECT_EQ(ParseCsv("\n", "m.csv").status().message(), "m.csv: empty");
  absl::StatusOr<CsvTable> table = ParseCsv(kMetricsCsv, "m.csv");
  ASSERT_TRUE(table.ok());
  EXPECT_EQ(ColumnSeries(*table, "gamma", "m.csv").status().message(),
            "m.csv: no column \"gamma\"");
  const CsvTable words = Table("round,test_accuracy\n1,0.5\n2,high\n");
  EXPECT_EQ(ColumnValues(words, "test_accuracy", "m.csv").status().message(),
            "m.csv: row 2: test_accuracy \"high\" is not a number");
  const CsvTable halves = Table("round,test_accuracy\n1.5,0.5\n");
  EXPECT_EQ(ColumnSeries(halves, "test_accuracy", "m.csv").status().message(),
            "m.csv: row 1: round 1.5 is not a whole number");
}

TEST(ResultFilesTest, SummaryNumbers) {
  constexpr char kSummary[] =
      "{\n  \"rounds\": 200,\n  \"wall_seconds\": 114.369,\n  \"peak_rss_mb\": 399.0,\n"
      "  \"threads\": {\"cores\": 2}\n}\n";
  EXPECT_EQ(SummaryNumber(kSummary, "wall_seconds"), 114.369);
  EXPECT_EQ(SummaryNumber(kSummary, "peak_rss_mb"), 399.0);
  EXPECT_EQ(SummaryNumber(kSummary, "best_round"), std::nullopt);
  EXPECT_EQ(SummaryNumber(kSummary, "threads"), std::nullopt);
}

}  // namespace
}  // namespace fl::report
