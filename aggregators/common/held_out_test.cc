#include "aggregators/common/held_out.h"

#include <ATen/ATen.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace aggregators {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(RemoveHeldOutTest, RemovesTheHeldSetAndKeepsTheOrderOfTheRest) {
  std::vector<int64_t> indices = {9, 4, 7, 1, 3};
  ASSERT_TRUE(RemoveHeldOut(at::tensor({7, 9}, at::kLong), indices).ok());
  EXPECT_THAT(indices, ElementsAre(4, 1, 3));
}

TEST(RemoveHeldOutTest, HeldIndicesOutsideTheClientsDataAreAnError) {
  std::vector<int64_t> indices = {0, 1, 2};
  const absl::Status status = RemoveHeldOut(at::tensor({1, 50}, at::kLong), indices);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("client state holds 2 held-out examples, 1 of them"));
}

}  // namespace
}  // namespace aggregators
