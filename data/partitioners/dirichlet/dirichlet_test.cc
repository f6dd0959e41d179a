#include <cmath>
#include <optional>
#include <random>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "data/partitioners/dirichlet/dirichlet_options.pb.h"
#include "fl/partitioner.h"
#include "fl/registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace data {
namespace {

absl::StatusOr<std::unique_ptr<fl::Partitioner>> Dirichlet(double alpha, int min_size = 10) {
  fedkit::data::DirichletOptions options;
  options.set_alpha(alpha);
  options.set_min_size(min_size);
  google::protobuf::Any any;
  any.PackFrom(options);
  return fl::Registry<fl::Partitioner>::Global().Create("dirichlet", any);
}

std::vector<int64_t> Labels(int n, int classes) {
  std::vector<int64_t> labels(n);
  for (int i = 0; i < n; ++i) labels[i] = i % classes;
  return labels;
}

// Mean over clients of the number of classes holding >= 5% of the client's data.
double MeanDominantClasses(const std::vector<std::vector<int64_t>>& shares,
                           const std::vector<int64_t>& labels, int classes) {
  double total = 0;
  for (const auto& share : shares) {
    std::vector<int> counts(classes, 0);
    for (int64_t i : share) ++counts[labels[i]];
    for (int c : counts) total += c >= 0.05 * share.size() ? 1 : 0;
  }
  return total / shares.size();
}

TEST(DirichletTest, PartitionIsDisjointCompleteAndRespectsMinSize) {
  const auto labels = Labels(6000, 10);
  std::mt19937_64 rng(1);
  auto shares = (*Dirichlet(0.5, 20))->Partition({labels, 10}, 30, rng);
  ASSERT_TRUE(shares.ok()) << shares.status();
  ASSERT_EQ(shares->size(), 30);
  std::set<int64_t> seen;
  size_t total = 0;
  for (const auto& share : *shares) {
    EXPECT_GE(share.size(), 20);
    seen.insert(share.begin(), share.end());
    total += share.size();
  }
  EXPECT_EQ(total, 6000);
  EXPECT_EQ(seen.size(), 6000);
}

TEST(DirichletTest, SmallAlphaSkewsLargeAlphaDoesNot) {
  const auto labels = Labels(10000, 10);
  std::mt19937_64 rng_small(2), rng_large(2);
  auto skewed = (*Dirichlet(0.1))->Partition({labels, 10}, 20, rng_small);
  auto mixed = (*Dirichlet(100))->Partition({labels, 10}, 20, rng_large);
  ASSERT_TRUE(skewed.ok() && mixed.ok());
  // Dir(0.1) puts most of each client's mass on 1-3 classes; Dir(100) on all 10.
  EXPECT_LT(MeanDominantClasses(*skewed, labels, 10), 4.0);
  EXPECT_GT(MeanDominantClasses(*mixed, labels, 10), 9.5);
}

TEST(DirichletTest, SameSeedSamePartition) {
  const auto labels = Labels(2000, 10);
  std::mt19937_64 a(5), b(5), c(6);
  auto p = *Dirichlet(0.3);
  const auto first = *p->Partition({labels, 10}, 10, a);
  EXPECT_EQ(first, *p->Partition({labels, 10}, 10, b));
  EXPECT_NE(first, *p->Partition({labels, 10}, 10, c));
}

TEST(DirichletTest, BadOptionsAreReportedTogether) {
  auto p = Dirichlet(-1, 0);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(p.status().message(),
            "options.alpha: must be > 0, got -1\noptions.min_size: must be >= 1, got 0");
}

TEST(DirichletTest, MaxAttemptsCapsTheRedraws) {
  // 10 clients of 200 examples with at least 15 each (20 on average) at alpha 0.5:
  // a single draw seldom gives every client 15.
  const auto labels = Labels(200, 10);
  auto partition = [&labels](std::optional<int> max_attempts) {
    fedkit::data::DirichletOptions options;
    options.set_alpha(0.5);
    options.set_min_size(15);
    if (max_attempts.has_value()) options.set_max_attempts(*max_attempts);
    google::protobuf::Any any;
    any.PackFrom(options);
    auto partitioner = fl::Registry<fl::Partitioner>::Global().Create("dirichlet", any);
    EXPECT_TRUE(partitioner.ok()) << partitioner.status();
    std::mt19937_64 rng(3);
    return (*partitioner)->Partition({labels, 10}, 10, rng);
  };
  const auto by_default = partition(std::nullopt);  // 1000 attempts
  ASSERT_TRUE(by_default.ok()) << by_default.status();
  // Attempts draw one after another from the same stream, so every cap below the
  // attempts this seed needs fails naming the cap, and that many give the default's
  // partition.
  int needed = 1;
  for (auto shares = partition(needed); !shares.ok(); shares = partition(++needed)) {
    EXPECT_EQ(shares.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(std::string(shares.status().message()),
              absl::StrCat("no draw in ", needed, " attempts gave every client >= 15 examples; "
                           "raise alpha, lower min_size or use fewer clients"));
    ASSERT_LT(needed, 1000);
  }
  EXPECT_GT(needed, 1) << "a first draw that succeeds tests no cap";
  EXPECT_EQ(*partition(needed), *by_default);

  fedkit::data::DirichletOptions zero;
  zero.set_alpha(0.5);
  zero.set_max_attempts(0);
  google::protobuf::Any any;
  any.PackFrom(zero);
  EXPECT_EQ(
      std::string(fl::Registry<fl::Partitioner>::Global().Create("dirichlet", any).status().message()),
      "options.max_attempts: must be >= 1, got 0");
}

TEST(DirichletTest, ImpossibleMinSizeIsAnError) {
  const auto labels = Labels(100, 10);
  std::mt19937_64 rng(1);
  auto shares = (*Dirichlet(0.5, 20))->Partition({labels, 10}, 10, rng);
  EXPECT_EQ(shares.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(shares.status().message(), ::testing::HasSubstr("need 200"));
}

}  // namespace
}  // namespace data
