#include <cmath>
#include <map>
#include <random>
#include <string>

#include <ATen/ATen.h>

#include "data/synthetic_leaf/synthetic_leaf_options.pb.h"
#include "fl/dataset.h"
#include "fl/partitioner.h"
#include "fl/registry.h"
#include "gtest/gtest.h"

namespace data {
namespace {

absl::StatusOr<std::unique_ptr<fl::Dataset>> Create(
    const fedkit::data::SyntheticLeafOptions& options) {
  google::protobuf::Any any;
  any.PackFrom(options);
  return fl::Registry<fl::Dataset>::Global().Create("synthetic_leaf", any);
}

fl::DatasetSplits Load(double alpha, double beta, bool iid = false, uint64_t seed = 1) {
  fedkit::data::SyntheticLeafOptions options;
  options.set_alpha(alpha);
  options.set_beta(beta);
  options.set_iid(iid);
  options.set_seed(seed);
  auto dataset = Create(options);
  EXPECT_TRUE(dataset.ok()) << dataset.status();
  EXPECT_TRUE((*dataset)->CheckAvailable().ok());
  auto splits = (*dataset)->Load();
  EXPECT_TRUE(splits.ok()) << splits.status();
  return *std::move(splits);
}

std::vector<int64_t> ToVector(const at::Tensor& t) {
  return {t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel()};
}

// Mean over devices of the total-variation distance between a device's label mix
// and the whole training set's.
double MeanDistanceFromGlobalMix(const fl::DatasetSplits& splits) {
  const auto y = ToVector(splits.train.y);
  const auto owners = ToVector(splits.train_owners);
  std::map<int64_t, std::vector<double>> per_device;
  std::vector<double> global(10, 0.0);
  for (size_t i = 0; i < y.size(); ++i) {
    auto& counts = per_device[owners[i]];
    counts.resize(10, 0.0);
    ++counts[y[i]];
    global[y[i]] += 1.0 / y.size();
  }
  double total = 0;
  for (auto& [device, counts] : per_device) {
    double n = 0, tv = 0;
    for (double c : counts) n += c;
    for (int c = 0; c < 10; ++c) tv += 0.5 * std::abs(counts[c] / n - global[c]);
    total += tv;
  }
  return total / per_device.size();
}

TEST(SyntheticLeafTest, ShapesOwnersAndTheNinetyTenSplit) {
  const fl::DatasetSplits splits = Load(1, 1);
  ASSERT_EQ(splits.train.x.dim(), 2);
  EXPECT_EQ(splits.train.x.size(1), 60);
  EXPECT_EQ(splits.train.x.scalar_type(), at::kFloat);
  EXPECT_EQ(splits.test.x.size(1), 60);
  ASSERT_TRUE(splits.train_owners.defined());
  ASSERT_EQ(splits.train_owners.numel(), splits.train.size());
  EXPECT_GE(splits.train.y.min().item<int64_t>(), 0);
  EXPECT_LT(splits.train.y.max().item<int64_t>(), 10);

  // 30 devices, owner ids 0..29 in order; each device has n_k >= 50 examples of
  // which floor(0.9 n_k) train: so train count t and the device size n satisfy
  // t == floor(0.9 n) for some n >= 50, i.e. the test share is ceil(t / 9) - ish.
  const auto owners = ToVector(splits.train_owners);
  EXPECT_TRUE(std::is_sorted(owners.begin(), owners.end()));
  std::map<int64_t, int64_t> train_count;
  for (int64_t o : owners) ++train_count[o];
  ASSERT_EQ(train_count.size(), 30);
  EXPECT_EQ(train_count.begin()->first, 0);
  EXPECT_EQ(train_count.rbegin()->first, 29);
  int64_t total_train = 0;
  for (const auto& [device, t] : train_count) {
    EXPECT_GE(t, 45) << "device " << device;  // floor(0.9 * 50)
    total_train += t;
  }
  // Each device keeps floor(0.9 n_k), so the test split is 10% give or take one
  // example a device.
  const int64_t total = total_train + splits.test.size();
  EXPECT_NEAR(static_cast<double>(splits.test.size()), 0.1 * total, 30.0);
}

TEST(SyntheticLeafTest, InputsFollowTheDiagonalCovariance) {
  // iid with beta = 0: every device draws x ~ N(0, diag(j^-1.2)); feature 1 has
  // variance 1, feature 60 has 60^-1.2 = 0.0074.
  const fl::DatasetSplits splits = Load(0, 0, /*iid=*/true);
  const at::Tensor x = at::cat({splits.train.x, splits.test.x}).to(at::kDouble);
  ASSERT_GT(x.size(0), 1500);
  const at::Tensor var = x.var(0);
  EXPECT_NEAR(var[0].item<double>(), 1.0, 0.15);
  EXPECT_NEAR(var[59].item<double>() / std::pow(60.0, -1.2), 1.0, 0.15);
  EXPECT_NEAR(x.mean(0)[0].item<double>(), 0.0, 0.1);
}

TEST(SyntheticLeafTest, AlphaBetaMakeDevicesDiffer) {
  // One shared model and input law: every device's label mix is the global one up
  // to sampling noise. synthetic(1, 1): devices see very different label mixes.
  const double iid = MeanDistanceFromGlobalMix(Load(0, 0, /*iid=*/true));
  const double skewed = MeanDistanceFromGlobalMix(Load(1, 1));
  EXPECT_LT(iid, 0.15);
  EXPECT_GT(skewed, 0.4);
}

TEST(SyntheticLeafTest, SameSeedSameDataOtherSeedOther) {
  const fl::DatasetSplits a = Load(0.5, 0.5, false, 7);
  const fl::DatasetSplits b = Load(0.5, 0.5, false, 7);
  const fl::DatasetSplits c = Load(0.5, 0.5, false, 8);
  EXPECT_TRUE(a.train.x.equal(b.train.x));
  EXPECT_TRUE(a.test.y.equal(b.test.y));
  EXPECT_TRUE(a.train_owners.equal(b.train_owners));
  EXPECT_FALSE(a.train.x.sizes() == c.train.x.sizes() && a.train.x.equal(c.train.x));
}

TEST(SyntheticLeafTest, NaturalPartitionGivesOneClientPerDevice) {
  const fl::DatasetSplits splits = Load(1, 1);
  const auto labels = ToVector(splits.train.y);
  const auto owners = ToVector(splits.train_owners);
  auto natural = fl::Registry<fl::Partitioner>::Global().Create("natural", google::protobuf::Any());
  ASSERT_TRUE(natural.ok());
  std::mt19937_64 rng(1);
  auto shares = (*natural)->Partition({labels, 10, owners}, 30, rng);
  ASSERT_TRUE(shares.ok()) << shares.status();
  ASSERT_EQ(shares->size(), 30);
  for (size_t k = 0; k < shares->size(); ++k) {
    for (int64_t i : (*shares)[k]) ASSERT_EQ(owners[i], static_cast<int64_t>(k));
  }
}

TEST(SyntheticLeafTest, BadOptionsAreReportedTogether) {
  fedkit::data::SyntheticLeafOptions options;
  options.set_alpha(-1);
  options.set_beta(std::nan(""));
  options.set_num_clients(0);
  options.set_test_fraction(1);
  auto dataset = Create(options);
  EXPECT_EQ(dataset.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(dataset.status().message()),
            "options.alpha: must be >= 0 and finite, got -1\n"
            "options.beta: must be >= 0 and finite, got nan\n"
            "options.num_clients: must be >= 1, got 0\n"
            "options.test_fraction: must be in [0, 1), got 1");
}

}  // namespace
}  // namespace data
