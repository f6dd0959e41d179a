#include "fl/batch_order_file.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fl {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string Write(const std::string& name, const std::string& contents) {
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/orders";
  std::filesystem::create_directories(dir + "/3");
  std::ofstream(dir + "/3/" + name + ".txt") << contents;
  return dir;
}

TEST(BatchOrderFileTest, ReadsOneOrderPerEpoch) {
  const std::string dir = Write("7", "12 10 11\n11 12 10\n");
  auto orders = ReadBatchOrders(dir, 3, "7", {10, 11, 12});
  ASSERT_TRUE(orders.ok()) << orders.status();
  EXPECT_THAT(*orders, ElementsAre(ElementsAre(12, 10, 11), ElementsAre(11, 12, 10)));
}

TEST(BatchOrderFileTest, RefusesWhatIsNotAPermutationNamingFileAndLine) {
  const std::string dir = Write("8", "12 10 11\n12 10 10\n");
  auto orders = ReadBatchOrders(dir, 3, "8", {10, 11, 12});
  EXPECT_EQ(orders.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(orders.status().message(), AllOf(HasSubstr("3/8.txt"), HasSubstr("line 2")));
  const std::string short_dir = Write("9", "12 10\n");
  EXPECT_THAT(ReadBatchOrders(short_dir, 3, "9", {10, 11, 12}).status().message(),
              HasSubstr("not a permutation"));
  const std::string word_dir = Write("10", "12 x 11\n");
  EXPECT_THAT(ReadBatchOrders(word_dir, 3, "10", {10, 11, 12}).status().message(),
              HasSubstr("\"x\" is not an integer"));
}

TEST(BatchOrderFileTest, AMissingFileIsNotFound) {
  EXPECT_EQ(ReadBatchOrders("/nonexistent", 1, "0", {1}).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace fl
