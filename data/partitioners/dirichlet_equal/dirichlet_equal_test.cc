#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <string>

#include "data/partitioners/dirichlet_equal/dirichlet_equal_options.pb.h"
#include "fl/partitioner.h"
#include "fl/registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace data {
namespace {

absl::StatusOr<std::unique_ptr<fl::Partitioner>> DirichletEqual(double alpha) {
  fedkit::data::DirichletEqualOptions options;
  options.set_alpha(alpha);
  google::protobuf::Any any;
  any.PackFrom(options);
  return fl::Registry<fl::Partitioner>::Global().Create("dirichlet_equal", any);
}

std::vector<int64_t> Labels(int n, int classes) {
  std::vector<int64_t> labels(n);
  for (int i = 0; i < n; ++i) labels[i] = i % classes;
  return labels;
}

// Every client holds exactly floor(n / num_clients) distinct in-range indices, and
// no index is held twice.
void ExpectEqualDisjointShares(const std::vector<std::vector<int64_t>>& shares, int64_t n,
                               int num_clients) {
  ASSERT_EQ(shares.size(), num_clients);
  std::set<int64_t> seen;
  for (const auto& share : shares) {
    EXPECT_EQ(share.size(), n / num_clients);
    for (int64_t i : share) {
      EXPECT_GE(i, 0);
      EXPECT_LT(i, n);
    }
    seen.insert(share.begin(), share.end());
  }
  EXPECT_EQ(seen.size(), n / num_clients * num_clients);
}

// Mean over clients of the total-variation distance between the client's label mix
// and the whole set's: 0 for a perfectly IID split, close to 1 - 1/K when every
// client holds one class.
double MeanDistanceFromGlobalMix(const std::vector<std::vector<int64_t>>& shares,
                                 const std::vector<int64_t>& labels, int classes) {
  std::vector<double> global(classes, 0.0);
  for (int64_t y : labels) global[y] += 1.0 / labels.size();
  double total = 0;
  for (const auto& share : shares) {
    std::vector<double> mix(classes, 0.0);
    for (int64_t i : share) mix[labels[i]] += 1.0 / share.size();
    double tv = 0;
    for (int c = 0; c < classes; ++c) tv += 0.5 * std::abs(mix[c] - global[c]);
    total += tv;
  }
  return total / shares.size();
}

TEST(DirichletEqualTest, EveryClientGetsExactlyFloorNOverClients) {
  // 1003 = 7 * 143 + 2: two examples stay unused.
  const auto labels = Labels(1003, 10);
  std::mt19937_64 rng(1);
  auto shares = (*DirichletEqual(0.5))->Partition({labels, 10}, 7, rng);
  ASSERT_TRUE(shares.ok()) << shares.status();
  ExpectEqualDisjointShares(*shares, 1003, 7);
}

TEST(DirichletEqualTest, DivisibleSetIsUsedCompletely) {
  const auto labels = Labels(1000, 10);
  std::mt19937_64 rng(2);
  auto shares = (*DirichletEqual(0.3))->Partition({labels, 10}, 10, rng);
  ASSERT_TRUE(shares.ok()) << shares.status();
  ExpectEqualDisjointShares(*shares, 1000, 10);
}

TEST(DirichletEqualTest, FashionMnistSizedSetOverOneHundredClients) {
  const auto labels = Labels(60000, 10);
  std::mt19937_64 rng(3);
  auto shares = (*DirichletEqual(0.3))->Partition({labels, 10}, 100, rng);
  ASSERT_TRUE(shares.ok()) << shares.status();
  ExpectEqualDisjointShares(*shares, 60000, 100);
}

TEST(DirichletEqualTest, SmallAlphaSkewsLargeAlphaDoesNot) {
  const auto labels = Labels(10000, 10);
  std::mt19937_64 rng_small(4), rng_large(4);
  auto skewed = (*DirichletEqual(0.1))->Partition({labels, 10}, 20, rng_small);
  auto mixed = (*DirichletEqual(100))->Partition({labels, 10}, 20, rng_large);
  ASSERT_TRUE(skewed.ok() && mixed.ok());
  const double skewed_distance = MeanDistanceFromGlobalMix(*skewed, labels, 10);
  const double mixed_distance = MeanDistanceFromGlobalMix(*mixed, labels, 10);
  // Dir(0.1) puts most of a client's mass on 1-3 classes: distance ~0.6 (0.9 if
  // one class each; exhausted classes pull it down). Dir(100) with 500 examples a
  // client: multinomial noise of ~7 per class of 50 plus the prior's ~5, distance
  // ~0.06. Over seeds 0-199 the extremes were 0.55 and 0.076.
  EXPECT_GT(skewed_distance, 0.5);
  EXPECT_LT(mixed_distance, 0.12);
}

TEST(DirichletEqualTest, SameSeedSamePartitionOtherSeedOther) {
  const auto labels = Labels(2000, 10);
  std::mt19937_64 a(5), b(5), c(6);
  auto p = *DirichletEqual(0.3);
  const auto first = *p->Partition({labels, 10}, 10, a);
  EXPECT_EQ(first, *p->Partition({labels, 10}, 10, b));
  EXPECT_NE(first, *p->Partition({labels, 10}, 10, c));
}

TEST(DirichletEqualTest, ExhaustedClassesDoNotBreakEqualSizes) {
  // 95% class 0, a handful of the others, classes 10 and 11 absent: clients whose
  // prior favours a rare class exhaust it at once and must fall back on the rest.
  std::vector<int64_t> labels(1900, 0);
  for (int c = 1; c < 10; ++c) labels.insert(labels.end(), 11, c);
  const auto n = static_cast<int64_t>(labels.size());  // 1999
  for (double alpha : {0.01, 0.5, 100.0}) {
    std::mt19937_64 rng(7);
    auto shares = (*DirichletEqual(alpha))->Partition({labels, 12}, 9, rng);
    ASSERT_TRUE(shares.ok()) << shares.status();
    ExpectEqualDisjointShares(*shares, n, 9);
  }
}

TEST(DirichletEqualTest, TinyAlphaStillDealsEveryShare) {
  // alpha = 1e-6 makes (nearly) every gamma draw underflow to 0: each client's prior
  // becomes a point mass, so a client is one class until that class runs out.
  const auto labels = Labels(6000, 10);
  std::mt19937_64 rng(8);
  auto shares = (*DirichletEqual(1e-6))->Partition({labels, 10}, 30, rng);
  ASSERT_TRUE(shares.ok()) << shares.status();
  ExpectEqualDisjointShares(*shares, 6000, 30);
  // Over-demanded classes run out and their clients fill up from the rest, so this
  // is no 0.9; a prior lost to underflow (uniform fallback) would give ~0.1.
  EXPECT_GT(MeanDistanceFromGlobalMix(*shares, labels, 10), 0.4);
}

TEST(DirichletEqualTest, BadAlphaIsRejectedWithItsPath) {
  for (const auto& [alpha, message] :
       std::vector<std::pair<double, std::string>>{
           {-1, "options.alpha: must be > 0, got -1"},
           {std::nan(""), "options.alpha: must be > 0, got nan"},
           {std::numeric_limits<double>::infinity(), "options.alpha: must be finite, got inf"}}) {
    auto p = DirichletEqual(alpha);
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(std::string(p.status().message()), message);
  }
}

TEST(DirichletEqualTest, UnsetAlphaIsRejected) {
  google::protobuf::Any any;
  any.PackFrom(fedkit::data::DirichletEqualOptions());
  auto p = fl::Registry<fl::Partitioner>::Global().Create("dirichlet_equal", any);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  // proto3: an unset alpha reads 0, so "required" needs no separate check.
  EXPECT_EQ(std::string(p.status().message()), "options.alpha: must be > 0, got 0");
}

TEST(DirichletEqualTest, ImpossibleRequestsAreErrors) {
  auto p = *DirichletEqual(0.5);
  std::mt19937_64 rng(1);
  const std::vector<int64_t> three(3, 0);
  auto too_many = p->Partition({three, 1}, 4, rng);
  EXPECT_EQ(too_many.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(too_many.status().message()), "4 clients but only 3 training examples");

  auto none = p->Partition({three, 1}, 0, rng);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(none.status().message()), "num_clients: must be >= 1, got 0");

  auto bad_label = p->Partition({std::vector<int64_t>{0, 2, 1}, 2}, 1, rng);
  EXPECT_EQ(bad_label.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(bad_label.status().message()), "labels[1]: must be in [0, 2), got 2");
}

}  // namespace
}  // namespace data
