#include "fl/process_stats.h"

#include <vector>

#include "gtest/gtest.h"

namespace fl {
namespace {

TEST(PeakRssBytesTest, GrowsWhenMemoryIsTouched) {
  const int64_t before = PeakRssBytes();
  EXPECT_GT(before, 0);
  std::vector<char> block(256 << 20, 1);  // 256 MiB, every page written
  const int64_t after = PeakRssBytes();
  EXPECT_GE(after, before + (200 << 20)) << static_cast<int>(block[12345]);
}

}  // namespace
}  // namespace fl
