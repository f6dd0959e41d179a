#include "tools/partition_stats.h"

#include <string>

#include "fl/report/class_counts.h"
#include "gtest/gtest.h"

namespace tools {
namespace {

using ::fl::report::CountByClass;

// Labels 0,1,2,0,1,2,0; client 0 holds {0, 1, 3}, client 1 {2, 6}, client 2 {4, 5}.
const std::vector<int64_t> kLabels = {0, 1, 2, 0, 1, 2, 0};
const std::vector<std::vector<int64_t>> kShares = {{0, 1, 3}, {2, 6}, {4, 5}};

TEST(PartitionStatsTest, SummaryHasMinMedianMaxAndATable) {
  EXPECT_EQ(SummaryText(CountByClass(kShares, kLabels, 3)),
            "3 clients, 7 examples\n"
            "client sizes: min 2  median 2  max 3  mean 2.3\n"
            "classes per client: min 2  median 2  max 2\n"
            "\n"
            "client     size classes  |      0      1      2\n"
            "     0        3       2  |      2      1      0\n"
            "     1        2       2  |      1      0      1\n"
            "     2        2       2  |      0      1      1\n");
}

TEST(PartitionStatsTest, EvenMedianIsTheMeanOfTheMiddleTwo) {
  const std::vector<std::vector<int64_t>> counts = {{1}, {2}, {5}, {10}};
  const std::string text = SummaryText(counts, /*max_class_columns=*/0);
  EXPECT_EQ(text.substr(0, text.find("\n\n")),
            "4 clients, 18 examples\n"
            "client sizes: min 1  median 3.5  max 10  mean 4.5\n"
            "classes per client: min 1  median 1  max 1");
  // Too many classes for columns: the table keeps size and classes only.
  EXPECT_NE(text.find("client     size classes\n     0        1       1\n"), std::string::npos);
}

}  // namespace
}  // namespace tools
