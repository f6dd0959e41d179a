#include <map>
#include <random>
#include <set>
#include <string>

#include "data/partitioners/shards/shards_options.pb.h"
#include "fl/partitioner.h"
#include "fl/registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace data {
namespace {

using Shares = std::vector<std::vector<int64_t>>;

absl::StatusOr<std::unique_ptr<fl::Partitioner>> Create(
    const fedkit::data::ShardsOptions& options) {
  google::protobuf::Any any;
  any.PackFrom(options);
  return fl::Registry<fl::Partitioner>::Global().Create("shards", any);
}

std::unique_ptr<fl::Partitioner> ClassesPerClient(int m) {
  fedkit::data::ShardsOptions options;
  options.set_classes_per_client(m);
  return *Create(options);
}

std::unique_ptr<fl::Partitioner> ShardsPerClient(int s) {
  fedkit::data::ShardsOptions options;
  options.set_shards_per_client(s);
  return *Create(options);
}

std::vector<int64_t> Labels(int n, int classes) {
  std::vector<int64_t> labels(n);
  for (int i = 0; i < n; ++i) labels[i] = i % classes;
  return labels;
}

std::set<int64_t> ClassesOf(const std::vector<int64_t>& share, const std::vector<int64_t>& labels) {
  std::set<int64_t> classes;
  for (int64_t i : share) classes.insert(labels[i]);
  return classes;
}

// Every index in range and held by at most one client; returns how many are held.
size_t ExpectDisjoint(const Shares& shares, int64_t n) {
  std::set<int64_t> seen;
  size_t total = 0;
  for (const auto& share : shares) {
    for (int64_t i : share) {
      EXPECT_GE(i, 0);
      EXPECT_LT(i, n);
    }
    seen.insert(share.begin(), share.end());
    total += share.size();
  }
  EXPECT_EQ(seen.size(), total) << "an index was given twice";
  return total;
}

TEST(ShardsTest, EveryClientHoldsExactlyMClasses) {
  const auto labels = Labels(6000, 10);
  for (int m : {1, 2, 5, 10}) {
    std::mt19937_64 rng(1);
    auto shares = ClassesPerClient(m)->Partition({labels, 10}, 30, rng);
    ASSERT_TRUE(shares.ok()) << shares.status();
    ASSERT_EQ(shares->size(), 30);
    ExpectDisjoint(*shares, 6000);
    for (size_t k = 0; k < shares->size(); ++k) {
      const std::set<int64_t> classes = ClassesOf((*shares)[k], labels);
      EXPECT_EQ(classes.size(), m) << "client " << k;
      // Client k's first class is k mod 10, so every class is used.
      EXPECT_TRUE(classes.count(k % 10)) << "client " << k;
    }
  }
}

TEST(ShardsTest, AClassIsSplitEquallyOverItsHolders) {
  // m = 10 of 10 classes: all 20 clients hold every class, 600 / 20 = 30 each.
  const auto labels = Labels(6000, 10);
  std::mt19937_64 rng(2);
  auto shares = ClassesPerClient(10)->Partition({labels, 10}, 20, rng);
  ASSERT_TRUE(shares.ok());
  EXPECT_EQ(ExpectDisjoint(*shares, 6000), 6000);
  for (const auto& share : *shares) EXPECT_EQ(share.size(), 300);
}

TEST(ShardsTest, OnlyPresentClassesCount) {
  // Classes 0-3 present of 6 declared: m = 4 works, m = 5 cannot.
  const auto labels = Labels(400, 4);
  std::mt19937_64 rng(3);
  auto shares = ClassesPerClient(4)->Partition({labels, 6}, 5, rng);
  ASSERT_TRUE(shares.ok()) << shares.status();
  for (const auto& share : *shares) EXPECT_EQ(ClassesOf(share, labels).size(), 4);
  auto too_many = ClassesPerClient(5)->Partition({labels, 6}, 5, rng);
  EXPECT_EQ(too_many.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(too_many.status().message()),
            "options.classes_per_client: 5 but the training set has only 4 classes");
}

TEST(ShardsTest, TooFewExamplesOfAClassIsAnError) {
  // 3 examples of each class, 10 clients holding class 0: some would get none.
  const auto labels = Labels(6, 2);
  std::mt19937_64 rng(4);
  auto shares = ClassesPerClient(1)->Partition({labels, 2}, 10, rng);
  EXPECT_EQ(shares.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(shares.status().message()),
              ::testing::StartsWith("class 0 has 3 examples but 5 clients hold it"));
}

TEST(ShardsTest, SortedShardsGiveEachClientTwoShardsOfOneClassEach) {
  // FedAvg's scheme at small scale: 1000 examples, 10 classes of 100, 50 clients x
  // 2 shards = 100 shards of 10. Shards never straddle a class here, so every
  // client holds 20 examples of 1 or 2 classes, 10 of each.
  const auto labels = Labels(1000, 10);
  std::mt19937_64 rng(5);
  auto shares = ShardsPerClient(2)->Partition({labels, 10}, 50, rng);
  ASSERT_TRUE(shares.ok()) << shares.status();
  EXPECT_EQ(ExpectDisjoint(*shares, 1000), 1000);
  int two_class_clients = 0;
  for (const auto& share : *shares) {
    ASSERT_EQ(share.size(), 20);
    std::map<int64_t, int> counts;
    for (int64_t i : share) ++counts[labels[i]];
    for (const auto& [label, count] : counts) EXPECT_EQ(count % 10, 0);
    EXPECT_LE(counts.size(), 2);
    two_class_clients += counts.size() == 2;
  }
  // A client's two shards are of the same class with probability 9/99.
  EXPECT_GT(two_class_clients, 35);
}

TEST(ShardsTest, SortedShardsUseEveryExampleWhenSizesDoNotDivide) {
  const auto labels = Labels(1003, 10);
  std::mt19937_64 rng(6);
  auto shares = ShardsPerClient(3)->Partition({labels, 10}, 7, rng);
  ASSERT_TRUE(shares.ok());
  EXPECT_EQ(ExpectDisjoint(*shares, 1003), 1003);
  // 21 shards of 47 or 48.
  for (const auto& share : *shares) {
    EXPECT_GE(share.size(), 3 * 47);
    EXPECT_LE(share.size(), 3 * 48);
  }
  auto too_many = ShardsPerClient(3)->Partition({labels, 10}, 400, rng);
  EXPECT_EQ(too_many.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(too_many.status().message()),
            "400 clients x 3 shards need at least 1200 training examples, got 1003");
}

TEST(ShardsTest, SameSeedSamePartitionOtherSeedOther) {
  const auto labels = Labels(2000, 10);
  for (auto* make : {&ClassesPerClient, &ShardsPerClient}) {
    auto p = make(2);
    std::mt19937_64 a(7), b(7), c(8);
    const auto first = *p->Partition({labels, 10}, 20, a);
    EXPECT_EQ(first, *p->Partition({labels, 10}, 20, b));
    EXPECT_NE(first, *p->Partition({labels, 10}, 20, c));
  }
}

TEST(ShardsTest, BadOptionsAreRejectedWithTheirPaths) {
  fedkit::data::ShardsOptions none;
  EXPECT_EQ(std::string(Create(none).status().message()),
            "options: set one of classes_per_client or shards_per_client");
  fedkit::data::ShardsOptions zero_classes;
  zero_classes.set_classes_per_client(0);
  EXPECT_EQ(Create(zero_classes).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(Create(zero_classes).status().message()),
            "options.classes_per_client: must be >= 1, got 0");
  fedkit::data::ShardsOptions negative_shards;
  negative_shards.set_shards_per_client(-2);
  EXPECT_EQ(std::string(Create(negative_shards).status().message()),
            "options.shards_per_client: must be >= 1, got -2");
}

TEST(ShardsTest, OutOfRangeLabelIsAnError) {
  std::mt19937_64 rng(1);
  auto shares = ClassesPerClient(1)->Partition({std::vector<int64_t>{0, 3}, 2}, 1, rng);
  EXPECT_EQ(std::string(shares.status().message()), "labels[1]: must be in [0, 2), got 3");
}

}  // namespace
}  // namespace data
