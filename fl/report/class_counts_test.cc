#include "fl/report/class_counts.h"

#include <string>

#include "gtest/gtest.h"

namespace fl::report {
namespace {

// Labels 0,1,2,0,1,2,0; client 0 holds {0, 1, 3}, client 1 {2, 6}, client 2 {4, 5}.
const std::vector<int64_t> kLabels = {0, 1, 2, 0, 1, 2, 0};
const std::vector<std::vector<int64_t>> kShares = {{0, 1, 3}, {2, 6}, {4, 5}};

TEST(ClassCountsTest, CountsByClientAndClass) {
  EXPECT_EQ(CountByClass(kShares, kLabels, 4),
            (std::vector<std::vector<int64_t>>{{2, 1, 0, 0}, {1, 0, 1, 0}, {0, 1, 1, 0}}));
}

TEST(ClassCountsTest, CsvHasOneRowPerClient) {
  EXPECT_EQ(CountsCsv(CountByClass(kShares, kLabels, 3)),
            "client,0,1,2\n"
            "0,2,1,0\n"
            "1,1,0,1\n"
            "2,0,1,1\n");
}

TEST(ClassCountsTest, ReadsBackWhatItWrites) {
  const auto counts = CountByClass(kShares, kLabels, 3);
  absl::StatusOr<ClassCounts> parsed = ParseClassCounts(CountsCsv(counts), "class_counts.csv");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->classes, (std::vector<std::string>{"0", "1", "2"}));
  EXPECT_EQ(parsed->counts, counts);
}

TEST(ClassCountsTest, ErrorsNameTheFileAndTheCell) {
  EXPECT_EQ(ParseClassCounts("id,0\n0,1\n", "c.csv").status().message(),
            "c.csv: the first column is \"id\", not \"client\"");
  EXPECT_EQ(ParseClassCounts("client,0,1\n0,1,2\n1,3,-1\n", "c.csv").status().message(),
            "c.csv: row 2, class 1: \"-1\" is not a count");
  EXPECT_EQ(ParseClassCounts("client,0\n0,1,2\n", "c.csv").status().message(),
            "c.csv:2: 3 cells, the header has 2");
}

}  // namespace
}  // namespace fl::report
