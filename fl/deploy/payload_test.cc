#include "fl/deploy/payload.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fl::deploy {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(PayloadTest, ChunksCoverThePayloadInOrder) {
  EXPECT_THAT(Chunks("abcdefg", 3), ElementsAre("abc", "def", "g"));
  EXPECT_THAT(Chunks("abcdef", 3), ElementsAre("abc", "def"));
  EXPECT_TRUE(Chunks("", 3).empty());
}

TEST(PayloadTest, AssemblesWhatWasDeclared) {
  absl::StatusOr<PayloadAssembler> assembler = PayloadAssembler::Start(7, 100, "update");
  ASSERT_TRUE(assembler.ok()) << assembler.status();
  for (absl::string_view chunk : Chunks("abcdefg", 3)) {
    EXPECT_FALSE(assembler->complete());
    ASSERT_TRUE(assembler->Add(chunk).ok());
  }
  ASSERT_TRUE(assembler->complete());
  EXPECT_EQ(std::move(*assembler).Take(), "abcdefg");
  absl::StatusOr<PayloadAssembler> empty = PayloadAssembler::Start(0, 100, "update");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->complete());
}

TEST(PayloadTest, RefusesOversizeBeforeAllocatingAndOverruns) {
  absl::StatusOr<PayloadAssembler> huge =
      PayloadAssembler::Start(int64_t{1} << 40, 1000, "update of client 3");
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(huge.status().message(),
              HasSubstr("update of client 3: declared size 1099511627776 bytes exceeds the "
                        "limit of 1000"));
  EXPECT_EQ(PayloadAssembler::Start(-1, 1000, "x").status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::StatusOr<PayloadAssembler> assembler = PayloadAssembler::Start(4, 1000, "task");
  ASSERT_TRUE(assembler.ok());
  ASSERT_TRUE(assembler->Add("abc").ok());
  const absl::Status overrun = assembler->Add("de");
  EXPECT_THAT(overrun.message(),
              HasSubstr("task: a chunk of 2 bytes runs past the declared 4 (3 received)"));
}

TEST(PayloadTest, LimitsFromFlagsRefuseAMessageLimitBelow64KiB) {
  absl::StatusOr<PayloadLimits> limits = PayloadLimitsFromFlags(2, 64);
  ASSERT_TRUE(limits.ok()) << limits.status();
  EXPECT_EQ(limits->max_payload_bytes, int64_t{2} << 20);
  EXPECT_EQ(limits->max_message_bytes, kMinMessageBytes);
  EXPECT_EQ(PayloadLimitsFromFlags(2, 63).status().message(),
            "--max_message_kb: must be >= 64, got 63");
}

TEST(PayloadTest, ChunksFitThePeersMessageLimit) {
  const PayloadLimits own;  // 1 MiB chunks
  EXPECT_EQ(ChunkBytesFor(own, 0), own.chunk_bytes);  // gRPC's default 4 MiB holds them
  EXPECT_EQ(ChunkBytesFor(own, int64_t{8} << 20), own.chunk_bytes);
  EXPECT_EQ(ChunkBytesFor(own, kMinMessageBytes), kMinMessageBytes - 1024);
}

}  // namespace
}  // namespace fl::deploy
