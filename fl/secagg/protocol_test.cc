#include "fl/secagg/protocol.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "fl/secagg/crypto.h"
#include "fl/secagg/prg.h"
#include "fl/secagg/shamir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fl::secagg {
namespace {

using ::testing::HasSubstr;

// Client k's vector: words near the top of the ring, so sums wrap around 2^32.
std::map<int64_t, std::vector<uint32_t>> Inputs(int clients, size_t size) {
  std::map<int64_t, std::vector<uint32_t>> inputs;
  for (int k = 0; k < clients; ++k) {
    std::vector<uint32_t> x(size);
    for (size_t i = 0; i < size; ++i) x[i] = 0xfffffff0u - static_cast<uint32_t>(7 * k + i);
    inputs[10 + 3 * k] = x;
  }
  return inputs;
}

std::vector<uint32_t> PlainSum(const std::map<int64_t, std::vector<uint32_t>>& inputs,
                               const std::set<int64_t>& left_out = {}) {
  std::vector<uint32_t> sum(inputs.begin()->second.size(), 0);
  for (const auto& [id, x] : inputs) {
    if (left_out.count(id)) continue;
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += x[i];
  }
  return sum;
}

TEST(SecAggTest, TheMasksCancelExactly) {
  const auto inputs = Inputs(6, 50);
  auto sum = RunSecAggRound(inputs, {/*threshold=*/4, /*neighbours=*/0}, /*seed=*/1);
  ASSERT_TRUE(sum.ok()) << sum.status();
  EXPECT_EQ(*sum, PlainSum(inputs));
}

TEST(SecAggTest, AMaskedInputRevealsNothingOfItsOwn) {
  // One client's y differs from its x in nearly every word (the chance a 32-bit
  // mask word is 0 is 2^-32).
  const auto inputs = Inputs(4, 1000);
  SecAggServer server({3, 0}, 2);
  std::map<int64_t, std::unique_ptr<SecAggClient>> clients;
  std::map<int64_t, PublicKeys> keys;
  for (const auto& [id, x] : inputs) {
    clients[id] = std::make_unique<SecAggClient>(id, SeedFrom(2, id));
    keys[id] = clients[id]->AdvertiseKeys();
  }
  ASSERT_TRUE(server.CollectKeys(keys).ok());
  for (auto& [id, client] : clients) {
    auto messages = client->ShareKeys(server.keys(), server.Neighbours(id), 3);
    ASSERT_TRUE(messages.ok()) << messages.status();
    ASSERT_TRUE(server.CollectShares(id, *std::move(messages)).ok());
  }
  const int64_t first = inputs.begin()->first;
  auto y = clients[first]->MaskedInput(inputs.at(first), server.Inbox(first));
  ASSERT_TRUE(y.ok()) << y.status();
  int same = 0;
  for (size_t i = 0; i < y->size(); ++i) same += (*y)[i] == inputs.at(first)[i];
  EXPECT_EQ(same, 0);
}

// What the server holds after a round in which `dropped` stopped after sharing:
// each survivor's masked input with every mask the server can rebuild taken off
// (its self-mask, and its pairwise masks with the dropped clients, whose mask
// keys are revealed), and the survivors' sum.
struct ServerView {
  std::map<int64_t, std::vector<uint32_t>> stripped;
  std::vector<uint32_t> sum;
};

ServerView Eavesdrop(const std::map<int64_t, std::vector<uint32_t>>& inputs, int threshold,
                     const std::set<int64_t>& dropped) {
  ServerView view;
  SecAggServer server({threshold, 0}, 3);
  std::map<int64_t, std::unique_ptr<SecAggClient>> clients;
  std::map<int64_t, PublicKeys> keys;
  for (const auto& [id, x] : inputs) {
    clients[id] = std::make_unique<SecAggClient>(id, SeedFrom(3, id));
    keys[id] = clients[id]->AdvertiseKeys();
  }
  EXPECT_TRUE(server.CollectKeys(keys).ok());
  for (auto& [id, client] : clients) {
    auto messages = client->ShareKeys(server.keys(), server.Neighbours(id), threshold);
    EXPECT_TRUE(messages.ok()) << messages.status();
    EXPECT_TRUE(server.CollectShares(id, *std::move(messages)).ok());
  }
  for (auto& [id, client] : clients) {
    if (dropped.count(id)) continue;
    auto y = client->MaskedInput(inputs.at(id), server.Inbox(id));
    EXPECT_TRUE(y.ok()) << y.status();
    view.stripped[id] = *y;
    EXPECT_TRUE(server.CollectMaskedInput(id, *std::move(y)).ok());
  }
  std::map<int64_t, std::vector<ShamirShare>> revealed;
  for (auto& [id, client] : clients) {
    if (dropped.count(id)) continue;
    auto shares = client->Unmask(server.Survivors());
    EXPECT_TRUE(shares.ok()) << shares.status();
    for (const auto& [owner, share] : *shares) revealed[owner].push_back(share);
    EXPECT_TRUE(server.CollectUnmaskShares(id, *std::move(shares)).ok());
  }
  auto secret = [&](int64_t owner) {
    auto bytes = ShamirReconstruct(revealed.at(owner), threshold, sizeof(Seed));
    EXPECT_TRUE(bytes.ok()) << bytes.status();
    Seed seed{};
    std::copy(bytes->begin(), bytes->end(), seed.begin());
    return seed;
  };
  auto subtract = [](const Seed& seed, int sign, std::vector<uint32_t>& y) {
    const std::vector<uint32_t> mask = Prg(seed).Words(y.size());
    for (size_t i = 0; i < y.size(); ++i) y[i] -= sign * mask[i];
  };
  for (auto& [u, y] : view.stripped) {
    subtract(secret(u), +1, y);
    for (int64_t v : dropped) {
      auto pairwise = AgreedKey(secret(v), keys.at(u).masking, kPairwiseMaskInfo);
      EXPECT_TRUE(pairwise.ok());
      subtract(*pairwise, u < v ? +1 : -1, y);
    }
  }
  auto sum = server.Sum();
  EXPECT_TRUE(sum.ok()) << sum.status();
  if (sum.ok()) view.sum = *sum;
  return view;
}

TEST(SecAggTest, TheServerLearnsNoSingleInputEvenWithEveryMaskItCanRebuild) {
  // The server rebuilds every survivor's self-mask (and a dropped client's mask
  // key); only the pairwise masks between survivors stand between it and each
  // input. Without them, each stripped vector would be that client's input.
  const auto inputs = Inputs(5, 1000);
  const int64_t dropped_id = std::next(inputs.begin(), 2)->first;
  for (const std::set<int64_t>& dropped : {std::set<int64_t>{}, std::set<int64_t>{dropped_id}}) {
    const ServerView view = Eavesdrop(inputs, /*threshold=*/3, dropped);
    ASSERT_EQ(view.stripped.size(), inputs.size() - dropped.size());
    // The stripping is exact: together the stripped vectors are the true sum.
    std::vector<uint32_t> total(1000, 0);
    for (const auto& [u, y] : view.stripped) {
      for (size_t i = 0; i < y.size(); ++i) total[i] += y[i];
    }
    EXPECT_EQ(total, PlainSum(inputs, dropped)) << dropped.size() << " dropped";
    EXPECT_EQ(view.sum, PlainSum(inputs, dropped));
    for (const auto& [u, y] : view.stripped) {
      int same = 0;
      for (size_t i = 0; i < y.size(); ++i) same += y[i] == inputs.at(u)[i];
      EXPECT_EQ(same, 0) << "client " << u << ", " << dropped.size() << " dropped";
    }
  }
}

TEST(SecAggTest, ADroppedClientsMasksAreRecovered) {
  const auto inputs = Inputs(7, 40);
  const std::set<int64_t> dropped = {13, 22};  // shared their keys, sent no input
  auto sum = RunSecAggRound(inputs, {4, 0}, 3, dropped);
  ASSERT_TRUE(sum.ok()) << sum.status();
  EXPECT_EQ(*sum, PlainSum(inputs, dropped));
}

TEST(SecAggTest, AClientLostAfterSendingItsInputStillCounts) {
  const auto inputs = Inputs(6, 20);
  auto sum = RunSecAggRound(inputs, {4, 0}, 4, /*drop_after_sharing=*/{13},
                            /*drop_after_masking=*/{16});
  ASSERT_TRUE(sum.ok()) << sum.status();
  EXPECT_EQ(*sum, PlainSum(inputs, {13}));
}

TEST(SecAggTest, TooFewSurvivorsAbortTheRound) {
  const auto inputs = Inputs(5, 10);
  auto sum = RunSecAggRound(inputs, {4, 0}, 5, {10, 13});  // 3 survivors of 5, threshold 4
  EXPECT_EQ(sum.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(sum.status().message(), HasSubstr("aborted"));
}

TEST(SecAggTest, TooFewRevealedSharesAbortTheRound) {
  // 5 survivors send input, but 2 of them are lost before revealing shares: 3
  // shares of each secret, threshold 4.
  const auto inputs = Inputs(5, 10);
  auto sum = RunSecAggRound(inputs, {4, 0}, 6, {}, {10, 13});
  EXPECT_EQ(sum.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(sum.status().message(), HasSubstr("shares"));
}

TEST(SecAggTest, SecAggPlusNeighbourhoodsSumExactlyWithDropouts) {
  const auto inputs = Inputs(20, 30);
  const std::set<int64_t> dropped = {13, 40, 55};
  auto sum = RunSecAggRound(inputs, {/*threshold=*/3, /*neighbours=*/4}, 7, dropped);
  ASSERT_TRUE(sum.ok()) << sum.status();
  EXPECT_EQ(*sum, PlainSum(inputs, dropped));
}

TEST(SecAggTest, AThresholdAboveTheNeighbourhoodIsRefused) {
  const auto inputs = Inputs(20, 5);
  auto sum = RunSecAggRound(inputs, {/*threshold=*/6, /*neighbours=*/4}, 8);
  EXPECT_EQ(sum.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(sum.status().message(), HasSubstr("neighbourhood"));
}

TEST(SecAggTest, AClientNeverRevealsBothSecretsOfOneOwner) {
  // A server that first calls client 13 dropped and then a survivor would learn
  // both its mask key and its self-mask seed, and so its input: refused.
  const auto inputs = Inputs(4, 5);
  SecAggServer server({3, 0}, 9);
  std::map<int64_t, std::unique_ptr<SecAggClient>> clients;
  std::map<int64_t, PublicKeys> keys;
  for (const auto& [id, x] : inputs) {
    clients[id] = std::make_unique<SecAggClient>(id, SeedFrom(9, id));
    keys[id] = clients[id]->AdvertiseKeys();
  }
  ASSERT_TRUE(server.CollectKeys(keys).ok());
  for (auto& [id, client] : clients) {
    auto messages = client->ShareKeys(server.keys(), server.Neighbours(id), 3);
    ASSERT_TRUE(server.CollectShares(id, *std::move(messages)).ok());
  }
  SecAggClient& honest = *clients[10];
  ASSERT_TRUE(honest.MaskedInput(inputs.at(10), server.Inbox(10)).ok());
  ASSERT_TRUE(honest.Unmask({10, 16, 19}).ok());  // 13 called dropped
  EXPECT_EQ(honest.Unmask({10, 13, 16, 19}).status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace fl::secagg
