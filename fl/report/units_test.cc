#include "fl/report/units.h"

#include "gtest/gtest.h"

namespace fl::report {
namespace {

TEST(UnitsTest, Seconds) {
  EXPECT_EQ(FormatSeconds(0.038), "0.038 s");
  EXPECT_EQ(FormatSeconds(12.34), "12.3 s");
  EXPECT_EQ(FormatSeconds(187), "3m 07s");
  EXPECT_EQ(FormatSeconds(7530), "2h 05m");
}

TEST(UnitsTest, Bytes) {
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(6429809232), "6.43 GB");
  EXPECT_EQ(FormatBytes(318024000), "318 MB");
  EXPECT_EQ(FormatBytes(611136), "611 kB");
  EXPECT_EQ(FormatBytes(999800), "1 MB");
  EXPECT_STREQ(ByteUnitFor(999).name, "B");
  EXPECT_STREQ(ByteUnitFor(1000).name, "kB");
  EXPECT_EQ(ByteUnitFor(2.5e12).size, 1e12);
}

}  // namespace
}  // namespace fl::report
