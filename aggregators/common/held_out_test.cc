#include "aggregators/common/held_out.h"

#include <ATen/ATen.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace aggregators {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(RemoveHeldOutTest, RemovesTheHeldSetAndKeepsTheOrderOfTheRest) {
  const std::vector<int64_t> share = {9, 4, 7, 1, 3};
  std::vector<int64_t> train = share;
  ASSERT_TRUE(RemoveHeldOut(at::tensor({7, 9}, at::kLong), share, train).ok());
  EXPECT_THAT(train, ElementsAre(4, 1, 3));
}

// Two hooks holding out overlapping sets, in either order: training keeps what
// neither holds out.
TEST(RemoveHeldOutTest, SetsFromTheSameShareComposeInEitherOrder) {
  const std::vector<int64_t> share = {0, 1, 2, 3, 4, 5};
  const at::Tensor a = at::tensor({1, 2}, at::kLong);
  const at::Tensor b = at::tensor({2, 5}, at::kLong);
  std::vector<int64_t> ab = share;
  ASSERT_TRUE(RemoveHeldOut(a, share, ab).ok());
  ASSERT_TRUE(RemoveHeldOut(b, share, ab).ok());
  std::vector<int64_t> ba = share;
  ASSERT_TRUE(RemoveHeldOut(b, share, ba).ok());
  ASSERT_TRUE(RemoveHeldOut(a, share, ba).ok());
  EXPECT_THAT(ab, ElementsAre(0, 3, 4));
  EXPECT_EQ(ab, ba);
}

TEST(RemoveHeldOutTest, HeldIndicesOutsideTheClientsDataAreAnError) {
  const std::vector<int64_t> share = {0, 1, 2};
  std::vector<int64_t> train = share;
  const absl::Status status = RemoveHeldOut(at::tensor({1, 50}, at::kLong), share, train);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("client state holds 2 held-out examples, 1 of them in this client's data"));
}

}  // namespace
}  // namespace aggregators
