#include "fl/tensorboard/record_writer.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fl::tensorboard {
namespace {

// RFC 3720, appendix B.4, and the common check value of "123456789".
TEST(Crc32cTest, MatchesPublishedVectors) {
  EXPECT_EQ(Crc32c(std::string(32, '\0')), 0x8a9136aau);
  EXPECT_EQ(Crc32c(std::string(32, '\xff')), 0x62a8ab43u);
  std::string ascending, descending;
  for (int i = 0; i < 32; ++i) {
    ascending += static_cast<char>(i);
    descending += static_cast<char>(31 - i);
  }
  EXPECT_EQ(Crc32c(ascending), 0x46dd794eu);
  EXPECT_EQ(Crc32c(descending), 0x113fdb5cu);
  EXPECT_EQ(Crc32c("123456789"), 0xe3069283u);
}

// Rotated right by 15 and offset by 0xa282ead8, worked by hand from the values above.
TEST(Crc32cTest, MaskIsTensorFlows) {
  EXPECT_EQ(MaskedCrc32c(std::string(32, '\0')), 0x0fd7fffau);
  EXPECT_EQ(MaskedCrc32c("123456789"), 0xc78ab0e5u);
}

uint64_t ReadLittleEndian(const std::string& bytes, size_t at, int width) {
  uint64_t value = 0;
  for (int i = width - 1; i >= 0; --i) {
    value = (value << 8) | static_cast<unsigned char>(bytes[at + i]);
  }
  return value;
}

TEST(FrameRecordTest, LengthThenPayloadEachWithItsMaskedCrc) {
  const std::string payload = "123456789";
  const std::string record = FrameRecord(payload);
  ASSERT_EQ(record.size(), 8 + 4 + payload.size() + 4);
  EXPECT_EQ(ReadLittleEndian(record, 0, 8), payload.size());
  EXPECT_EQ(ReadLittleEndian(record, 8, 4), MaskedCrc32c(record.substr(0, 8)));
  EXPECT_EQ(record.substr(12, payload.size()), payload);
  EXPECT_EQ(ReadLittleEndian(record, 12 + payload.size(), 4), 0xc78ab0e5u);
}

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

TEST(RecordWriterTest, AppendsFramedRecordsAndTruncatesOnCreate) {
  const std::string path = TempPath("records");
  {
    std::ofstream stale(path);
    stale << "left from an earlier run";
  }
  absl::StatusOr<RecordWriter> writer = RecordWriter::Create(path);
  ASSERT_TRUE(writer.ok()) << writer.status();
  ASSERT_TRUE(writer->Write("first").ok());
  ASSERT_TRUE(writer->Write("").ok());
  // Flushed per record: readable before the writer goes.
  EXPECT_EQ(ReadAll(path), FrameRecord("first") + FrameRecord(""));
}

TEST(RecordWriterTest, UnwritableFolderIsAnErrorNamingThePath) {
  absl::StatusOr<RecordWriter> writer = RecordWriter::Create("/nonexistent/dir/events");
  ASSERT_FALSE(writer.ok());
  EXPECT_THAT(writer.status().message(), testing::HasSubstr("/nonexistent/dir/events"));
}

}  // namespace
}  // namespace fl::tensorboard
