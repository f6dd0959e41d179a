#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <string>

#include "data/partitioners/unbalanced/unbalanced_options.pb.h"
#include "fl/partitioner.h"
#include "fl/registry.h"
#include "gtest/gtest.h"

namespace data {
namespace {

using Shares = std::vector<std::vector<int64_t>>;

absl::StatusOr<std::unique_ptr<fl::Partitioner>> Create(
    const fedkit::data::UnbalancedOptions& options) {
  google::protobuf::Any any;
  any.PackFrom(options);
  return fl::Registry<fl::Partitioner>::Global().Create("unbalanced", any);
}

std::unique_ptr<fl::Partitioner> LogNormal(double sigma, int min_size = 1) {
  fedkit::data::UnbalancedOptions options;
  options.set_log_normal_sigma(sigma);
  options.set_min_size(min_size);
  return *Create(options);
}

std::unique_ptr<fl::Partitioner> PowerLaw(double exponent, int min_size = 1) {
  fedkit::data::UnbalancedOptions options;
  options.set_power_law_exponent(exponent);
  options.set_min_size(min_size);
  return *Create(options);
}

std::vector<int64_t> Labels(int n, int classes) {
  std::vector<int64_t> labels(n);
  for (int i = 0; i < n; ++i) labels[i] = i % classes;
  return labels;
}

// Every example held exactly once; every client holds at least min_size.
void ExpectCompleteDisjoint(const Shares& shares, int64_t n, int64_t min_size) {
  std::set<int64_t> seen;
  size_t total = 0;
  for (const auto& share : shares) {
    EXPECT_GE(share.size(), min_size);
    seen.insert(share.begin(), share.end());
    total += share.size();
  }
  EXPECT_EQ(total, n);
  EXPECT_EQ(seen.size(), n);
  EXPECT_EQ(*seen.begin(), 0);
  EXPECT_EQ(*seen.rbegin(), n - 1);
}

std::vector<double> LogSizes(const Shares& shares) {
  std::vector<double> out;
  for (const auto& share : shares) out.push_back(std::log(static_cast<double>(share.size())));
  return out;
}

TEST(UnbalancedTest, LogNormalSizesHaveTheRequestedSpread) {
  // 1000 clients sharing 400000 examples: sizes are ~400 w_k / mean(w), so the
  // standard deviation of log(size) estimates sigma (sd of the estimate ~0.02).
  const auto labels = Labels(400000, 10);
  std::mt19937_64 rng(1);
  auto shares = LogNormal(1.0)->Partition({labels, 10}, 1000, rng);
  ASSERT_TRUE(shares.ok()) << shares.status();
  ExpectCompleteDisjoint(*shares, 400000, 1);
  const std::vector<double> logs = LogSizes(*shares);
  double mean = 0, var = 0;
  for (double v : logs) mean += v / logs.size();
  for (double v : logs) var += (v - mean) * (v - mean) / (logs.size() - 1);
  EXPECT_NEAR(std::sqrt(var), 1.0, 0.08);
}

TEST(UnbalancedTest, PowerLawSizesFollowTheExponent) {
  // Pareto(exponent 3) weights: log(w) ~ Exponential(rate 2), mean 0.5. The smallest
  // of 1000 weights is ~1.0005, so log(size / smallest size) estimates log(w).
  const auto labels = Labels(300000, 10);
  std::mt19937_64 rng(2);
  auto shares = PowerLaw(3.0)->Partition({labels, 10}, 1000, rng);
  ASSERT_TRUE(shares.ok()) << shares.status();
  ExpectCompleteDisjoint(*shares, 300000, 1);
  const std::vector<double> logs = LogSizes(*shares);
  const double smallest = *std::min_element(logs.begin(), logs.end());
  double mean = 0;
  for (double v : logs) mean += (v - smallest) / logs.size();
  EXPECT_NEAR(mean, 0.5, 0.06);
}

TEST(UnbalancedTest, MinSizeIsHonouredAndTheRestIsShared) {
  // sigma 3 over 50 clients: most weights are tiny next to the largest, so most
  // clients end at exactly min_size.
  const auto labels = Labels(5003, 10);
  std::mt19937_64 rng(3);
  auto shares = LogNormal(3.0, 40)->Partition({labels, 10}, 50, rng);
  ASSERT_TRUE(shares.ok()) << shares.status();
  ExpectCompleteDisjoint(*shares, 5003, 40);
  const auto largest = std::max_element(shares->begin(), shares->end(),
                                        [](auto& a, auto& b) { return a.size() < b.size(); });
  EXPECT_GT(largest->size(), 1000);
}

TEST(UnbalancedTest, TinySigmaGivesNearlyEqualSizes) {
  const auto labels = Labels(1000, 10);
  std::mt19937_64 rng(4);
  auto shares = LogNormal(1e-9)->Partition({labels, 10}, 7, rng);
  ASSERT_TRUE(shares.ok());
  ExpectCompleteDisjoint(*shares, 1000, 1);
  for (const auto& share : *shares) {
    EXPECT_GE(share.size(), 142);
    EXPECT_LE(share.size(), 143);
  }
}

TEST(UnbalancedTest, LabelsAreIid) {
  // The largest client of a sigma = 1 split over 20 clients holds thousands of
  // examples; its label mix is the whole set's (10% each) up to sampling noise.
  const auto labels = Labels(50000, 10);
  std::mt19937_64 rng(5);
  auto shares = *LogNormal(1.0)->Partition({labels, 10}, 20, rng);
  const auto& largest = *std::max_element(shares.begin(), shares.end(),
                                          [](auto& a, auto& b) { return a.size() < b.size(); });
  ASSERT_GT(largest.size(), 5000);
  std::vector<double> counts(10, 0);
  for (int64_t i : largest) ++counts[labels[i]];
  for (double c : counts) EXPECT_NEAR(c / largest.size(), 0.1, 0.015);
}

TEST(UnbalancedTest, SameSeedSamePartitionOtherSeedOther) {
  const auto labels = Labels(2000, 10);
  for (int scheme = 0; scheme < 2; ++scheme) {
    auto p = scheme == 0 ? LogNormal(1.0) : PowerLaw(2.0);
    std::mt19937_64 a(6), b(6), c(7);
    const auto first = *p->Partition({labels, 10}, 20, a);
    EXPECT_EQ(first, *p->Partition({labels, 10}, 20, b));
    EXPECT_NE(first, *p->Partition({labels, 10}, 20, c));
  }
}

TEST(UnbalancedTest, ImpossibleMinSizeIsAnError) {
  const auto labels = Labels(100, 10);
  std::mt19937_64 rng(1);
  auto shares = LogNormal(1.0, 20)->Partition({labels, 10}, 10, rng);
  EXPECT_EQ(shares.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(shares.status().message()),
            "10 clients with at least 20 examples each need 200, the training set has 100");
}

TEST(UnbalancedTest, BadOptionsAreReportedTogether) {
  fedkit::data::UnbalancedOptions none;
  none.set_min_size(0);
  EXPECT_EQ(Create(none).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(Create(none).status().message()),
            "options: set one of log_normal_sigma or power_law_exponent\n"
            "options.min_size: must be >= 1, got 0");
  fedkit::data::UnbalancedOptions sigma;
  sigma.set_log_normal_sigma(-1);
  EXPECT_EQ(std::string(Create(sigma).status().message()),
            "options.log_normal_sigma: must be > 0 and finite, got -1");
  fedkit::data::UnbalancedOptions exponent;
  exponent.set_power_law_exponent(1);
  EXPECT_EQ(std::string(Create(exponent).status().message()),
            "options.power_law_exponent: must be > 1 and finite, got 1");
}

}  // namespace
}  // namespace data
