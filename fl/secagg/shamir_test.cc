#include "fl/secagg/shamir.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace fl::secagg {
namespace {

std::vector<uint8_t> Secret(size_t size) {
  std::vector<uint8_t> secret(size);
  for (size_t i = 0; i < size; ++i) secret[i] = static_cast<uint8_t>(37 * i + 11);
  return secret;
}

TEST(ShamirTest, AnyThresholdSharesRebuildTheSecret) {
  Prg prg(SeedFrom(1, 2));
  for (size_t size : {1u, 7u, 8u, 32u}) {
    const std::vector<uint8_t> secret = Secret(size);
    const std::vector<ShamirShare> shares = ShamirSplit(secret, 3, 6, prg);
    ASSERT_EQ(shares.size(), 6u);
    for (const std::vector<int>& pick : std::vector<std::vector<int>>{{0, 1, 2}, {5, 3, 1}, {2, 4, 5, 0}}) {
      std::vector<ShamirShare> chosen;
      for (int i : pick) chosen.push_back(shares[i]);
      auto rebuilt = ShamirReconstruct(chosen, 3, size);
      ASSERT_TRUE(rebuilt.ok()) << rebuilt.status();
      EXPECT_EQ(*rebuilt, secret) << "size " << size;
    }
  }
}

TEST(ShamirTest, FewerThanThresholdSharesDoNotDetermineTheSecret) {
  // Two shares of a threshold-3 sharing: interpolating them as if the threshold
  // were 2 does not give the secret, and asking for 3 from 2 is refused.
  Prg prg(SeedFrom(3, 4));
  const std::vector<uint8_t> secret = Secret(32);
  const std::vector<ShamirShare> shares = ShamirSplit(secret, 3, 5, prg);
  std::vector<ShamirShare> two = {shares[0], shares[1]};
  EXPECT_EQ(ShamirReconstruct(two, 3, 32).status().code(), absl::StatusCode::kInvalidArgument);
  auto wrong = ShamirReconstruct(two, 2, 32);
  EXPECT_TRUE(!wrong.ok() || *wrong != secret);
}

TEST(ShamirTest, RefusesRepeatedPointsAndMisshapenShares) {
  Prg prg(SeedFrom(5, 6));
  const std::vector<ShamirShare> shares = ShamirSplit(Secret(32), 2, 3, prg);
  std::vector<ShamirShare> repeated = {shares[0], shares[0]};
  EXPECT_FALSE(ShamirReconstruct(repeated, 2, 32).ok());
  std::vector<ShamirShare> short_share = {shares[0], shares[1]};
  short_share[1].y.pop_back();
  EXPECT_FALSE(ShamirReconstruct(short_share, 2, 32).ok());
  std::vector<ShamirShare> outside = {shares[0], shares[1]};
  outside[1].y[0] = kShamirPrime;
  EXPECT_FALSE(ShamirReconstruct(outside, 2, 32).ok());
}

TEST(ShamirTest, SharesOfOneSecretDoNotMixWithAnothers) {
  Prg prg(SeedFrom(7, 8));
  const std::vector<ShamirShare> a = ShamirSplit(Secret(32), 2, 3, prg);
  std::vector<uint8_t> other = Secret(32);
  other[0] ^= 0xff;
  const std::vector<ShamirShare> b = ShamirSplit(other, 2, 3, prg);
  std::vector<ShamirShare> mixed = {a[0], b[1]};
  auto rebuilt = ShamirReconstruct(mixed, 2, 32);
  EXPECT_TRUE(!rebuilt.ok() || (*rebuilt != Secret(32) && *rebuilt != other));
}

}  // namespace
}  // namespace fl::secagg
