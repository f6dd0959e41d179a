#include <random>
#include <set>

#include "fl/partitioner.h"
#include "fl/registry.h"
#include "gtest/gtest.h"

namespace data {
namespace {

std::unique_ptr<fl::Partitioner> Iid() {
  return *fl::Registry<fl::Partitioner>::Global().Create("iid", google::protobuf::Any());
}

TEST(IidTest, EqualSharesCoveringEveryExampleOnce) {
  std::vector<int64_t> labels(1003);
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = i % 10;
  std::mt19937_64 rng(1);
  auto shares = Iid()->Partition({labels, 10}, 10, rng);
  ASSERT_TRUE(shares.ok()) << shares.status();
  std::set<int64_t> seen;
  for (const auto& share : *shares) {
    EXPECT_GE(share.size(), 100);
    EXPECT_LE(share.size(), 101);
    seen.insert(share.begin(), share.end());
  }
  EXPECT_EQ(seen.size(), 1003);
  EXPECT_EQ(*seen.begin(), 0);
  EXPECT_EQ(*seen.rbegin(), 1002);
}

TEST(IidTest, LabelMixFollowsTheWholeSet) {
  // 10 classes, 10000 examples, 5 clients of 2000: each class ~200 per client
  // (binomial sd ~13.4); 6 sd is far outside any fixed-seed fluke.
  std::vector<int64_t> labels(10000);
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = i % 10;
  std::mt19937_64 rng(3);
  auto shares = Iid()->Partition({labels, 10}, 5, rng);
  for (const auto& share : *shares) {
    std::vector<int> counts(10, 0);
    for (int64_t i : share) ++counts[labels[i]];
    for (int c : counts) EXPECT_NEAR(c, 200, 80);
  }
}

TEST(IidTest, SameSeedSameSplit) {
  std::vector<int64_t> labels(500, 0);
  std::mt19937_64 a(9), b(9);
  EXPECT_EQ(*Iid()->Partition({labels, 1}, 7, a), *Iid()->Partition({labels, 1}, 7, b));
}

TEST(IidTest, MoreClientsThanExamplesIsAnError) {
  std::vector<int64_t> labels(3, 0);
  std::mt19937_64 rng(1);
  auto shares = Iid()->Partition({labels, 1}, 4, rng);
  EXPECT_EQ(shares.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(shares.status().message(), "4 clients but only 3 training examples");
}

}  // namespace
}  // namespace data
