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

TEST(BatchOrderFileTest, AppendedOrdersReadBackOneEpochPerLine) {
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/recorded";
  ASSERT_TRUE(AppendBatchOrder(dir, 4, "proxy", {2, 0, 1}).ok());
  ASSERT_TRUE(AppendBatchOrder(dir, 4, "proxy", {1, 2, 0}).ok());
  auto orders = ReadBatchOrders(dir, 4, "proxy", {0, 1, 2});
  ASSERT_TRUE(orders.ok()) << orders.status();
  EXPECT_THAT(*orders, ElementsAre(ElementsAre(2, 0, 1), ElementsAre(1, 2, 0)));
}

TEST(BatchOrderFileTest, AnUnwritableFolderIsAnErrorNamingIt) {
  const std::string file = Write("11", "0\n") + "/3/11.txt";  // a file where a folder should be
  absl::Status status = AppendBatchOrder(file, 1, "0", {0});
  EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(status.message(), HasSubstr(file + "/1"));
}

TEST(BatchOrderFileTest, ARecordFolderMustBeNewOrEmpty) {
  const std::string tmp = std::getenv("TEST_TMPDIR");
  EXPECT_TRUE(CheckBatchOrderRecordFolder("").ok());
  EXPECT_TRUE(CheckBatchOrderRecordFolder(tmp + "/not_yet").ok());
  std::filesystem::create_directories(tmp + "/empty");
  EXPECT_TRUE(CheckBatchOrderRecordFolder(tmp + "/empty").ok());
  const std::string used = Write("12", "0\n");
  absl::Status status = CheckBatchOrderRecordFolder(used);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), AllOf(HasSubstr(used), HasSubstr("new or empty")));
}

}  // namespace
}  // namespace fl
