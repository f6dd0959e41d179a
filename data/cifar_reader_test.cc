#include "data/cifar_reader.h"

#include <string>

#include <ATen/ATen.h>

#include "data/test_fixtures.h"
#include "gtest/gtest.h"

namespace data {
namespace {

using ::data::fixtures::CifarRecord;
using ::data::fixtures::TestDir;
using ::data::fixtures::Truncate;
using ::data::fixtures::WriteFile;

const CifarFormat kCifar10{"CIFAR-10", {10}, 0};
const CifarFormat kCifar100Fine{"CIFAR-100", {20, 100}, 1};
const CifarFormat kCifar100Coarse{"CIFAR-100", {20, 100}, 0};

TEST(CifarReaderTest, ConcatenatesFilesAndKeepsChannelMajorPixels) {
  const std::string dir = TestDir("concat");
  WriteFile(dir + "/a.bin", CifarRecord("\x03", 10) + CifarRecord("\x09", 20));
  WriteFile(dir + "/b.bin", CifarRecord(std::string(1, '\0'), 30));
  auto records = ReadCifarRecords({dir + "/a.bin", dir + "/b.bin"}, kCifar10);
  ASSERT_TRUE(records.ok()) << records.status();
  ASSERT_EQ(records->size(), 3);
  EXPECT_EQ(records->labels, (std::vector<uint8_t>{3, 9, 0}));

  fl::Examples examples = CifarToExamples(*records, 0, kCifar10Stats, /*normalize=*/false);
  EXPECT_EQ(examples.x.sizes(), (std::vector<int64_t>{3, 3, 32, 32}));
  EXPECT_EQ(examples.y[1].item<int64_t>(), 9);
  EXPECT_FLOAT_EQ(examples.x[1][0][0][0].item<float>(), 1.0f);
  EXPECT_FLOAT_EQ(examples.x[1][0][0][1].item<float>(), 20 / 255.0f);
  EXPECT_FLOAT_EQ(examples.x[2][2][31][31].item<float>(), 32 / 255.0f);

  fl::Examples limited = CifarToExamples(*records, 2, kCifar10Stats, /*normalize=*/true);
  EXPECT_EQ(limited.size(), 2);
  EXPECT_NEAR(limited.x[0][1][4][4].item<float>(), (11 / 255.0 - 0.4822) / 0.2435, 1e-5);
}

TEST(CifarReaderTest, TwoLabelBytesPickFineOrCoarse) {
  const std::string dir = TestDir("two_labels");
  WriteFile(dir + "/train.bin", CifarRecord("\x13\x63", 1) + CifarRecord("\x02\x2a", 2));
  auto fine = ReadCifarRecords({dir + "/train.bin"}, kCifar100Fine);
  auto coarse = ReadCifarRecords({dir + "/train.bin"}, kCifar100Coarse);
  ASSERT_TRUE(fine.ok() && coarse.ok());
  EXPECT_EQ(fine->labels, (std::vector<uint8_t>{99, 42}));
  EXPECT_EQ(coarse->labels, (std::vector<uint8_t>{19, 2}));
  // Each image starts after both label bytes.
  EXPECT_EQ(fine->images[1], 1);
  EXPECT_EQ(fine->images[kCifarImageBytes + 1], 2);
}

TEST(CifarReaderTest, MissingFileIsNotFound) {
  auto records = ReadCifarRecords({TestDir("missing") + "/data_batch_1.bin"}, kCifar10);
  EXPECT_EQ(records.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(std::string(records.status().message()),
            TestDir("missing") + "/data_batch_1.bin: no such file");
}

TEST(CifarReaderTest, TruncatedOrWrongFormatFileNamesTheRecordSize) {
  const std::string dir = TestDir("truncated");
  WriteFile(dir + "/test_batch.bin", CifarRecord("\x01", 0) + CifarRecord("\x02", 0));
  Truncate(dir + "/test_batch.bin", 7);
  auto records = ReadCifarRecords({dir + "/test_batch.bin"}, kCifar10);
  EXPECT_EQ(records.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(records.status().message()),
            dir +
                "/test_batch.bin: 6139 bytes is not a whole number of 3073-byte CIFAR-10 "
                "records (truncated, or not a CIFAR-10 binary file)");
  // A CIFAR-10 file read as CIFAR-100: 3073-byte records are not 3074-byte ones.
  WriteFile(dir + "/train.bin", CifarRecord("\x01", 0) + CifarRecord("\x02", 0));
  EXPECT_EQ(std::string(ReadCifarRecords({dir + "/train.bin"}, kCifar100Fine).status().message()),
            dir +
                "/train.bin: 6146 bytes is not a whole number of 3074-byte CIFAR-100 records "
                "(truncated, or not a CIFAR-100 binary file)");
  WriteFile(dir + "/empty.bin", "");
  EXPECT_EQ(std::string(ReadCifarRecords({dir + "/empty.bin"}, kCifar10).status().message()),
            dir +
                "/empty.bin: 0 bytes is not a whole number of 3073-byte CIFAR-10 records "
                "(truncated, or not a CIFAR-10 binary file)");
}

TEST(CifarReaderTest, LabelOutOfRangeIsAnError) {
  const std::string dir = TestDir("labels");
  WriteFile(dir + "/train.bin",
            CifarRecord("\x13\x63", 0) + CifarRecord(std::string("\x14\x00", 2), 0));
  EXPECT_EQ(std::string(ReadCifarRecords({dir + "/train.bin"}, kCifar100Fine).status().message()),
            dir +
                "/train.bin: record 1: label byte 0 is 20, out of [0, 19] (not a CIFAR-100 "
                "binary file?)");
}

}  // namespace
}  // namespace data
