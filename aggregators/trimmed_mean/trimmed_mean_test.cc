#include <memory>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "aggregators/trimmed_mean/trimmed_mean_options.pb.h"
#include "fl/aggregator.h"
#include "fl/registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace aggregators {
namespace {

using ::fedkit::aggregators::TrimmedMeanOptions;

absl::StatusOr<std::unique_ptr<fl::Aggregator>> Create(const TrimmedMeanOptions& options) {
  google::protobuf::Any any;
  any.PackFrom(options);
  return fl::Registry<fl::Aggregator>::Global().Create("trimmed_mean", any);
}

std::unique_ptr<fl::Aggregator> TrimmedMean(std::optional<double> beta) {
  TrimmedMeanOptions options;
  if (beta.has_value()) options.set_beta(*beta);
  auto created = Create(options);
  EXPECT_TRUE(created.ok()) << created.status();
  return created.ok() ? *std::move(created) : nullptr;
}

fl::ModelState State(std::vector<float> w, float running, int64_t count) {
  return fl::ModelState({{"w", at::tensor(w), false},
                         {"bn.running_mean", at::tensor({running}), true},
                         {"bn.num_batches_tracked", at::tensor({count}, at::kLong), true}});
}

// One round from global w = (10, 20), running_mean 1, count 5 over five clients
// with very different data sizes (ignored). Per coordinate, sorted:
//   w[0]           {1, 2, 3, 7, 100}     trim 0: 22.6  trim 1: 4  trim 2: 3
//   w[1]           {-50, 5, 9, 10, 11}   trim 0: -3    trim 1: 8  trim 2: 9
//   running_mean   {0, 1, 2, 6, 94}      trim 0: 20.6  trim 1: 3  trim 2: 2
//   counts         {1, 2, 2, 4, 9}       trim 0: 3.6   trim 1: 8/3  trim 2: 2
// so trimming 0, 1 or 2 values per end gives three different answers in every
// entry. No client is extreme in every coordinate, so dropping whole clients
// would give other answers.
fl::ModelState FiveClientRound(fl::Aggregator& aggregator) {
  const std::vector<std::tuple<std::vector<float>, float, int64_t, int64_t>> clients = {
      {{1, 11}, 6, 2, 1},
      {{2, -50}, 94, 4, 500},
      {{100, 9}, 0, 1, 3},
      {{3, 5}, 2, 9, 40},
      {{7, 10}, 1, 2, 7}};
  fl::ServerContext context;
  const fl::ModelState global = State({10, 20}, 1, 5);
  EXPECT_TRUE(aggregator.Configure(global, context).ok());
  for (const auto& [w, running, count, n] : clients) {
    fl::ClientUpdate update;
    update.delta = State(w, running, count);
    update.num_examples = n;
    EXPECT_TRUE(aggregator.Accumulate(std::move(update), context).ok());
  }
  auto next = aggregator.Finalize(global, context);
  EXPECT_TRUE(next.ok()) << next.status();
  return next.ok() ? *std::move(next) : fl::ModelState();
}

// The counter stays an integer, rounded once after the trimmed mean is added.
void ExpectCount(const fl::ModelState& next, int64_t expected) {
  EXPECT_EQ(next.tensor(2).scalar_type(), at::kLong);
  EXPECT_EQ(next.tensor(2).item<int64_t>(), expected);
}

TEST(TrimmedMeanTest, DropsTheLargestAndSmallestOfEachCoordinate) {
  // beta = 0.2, K = 5: floor(1) = 1 value dropped at each end:
  //   w = (10 + 4, 20 + 8);  running_mean 1 + 3;  counts round(5 + 8/3) = round(7.67) = 8.
  const fl::ModelState next = FiveClientRound(*TrimmedMean(0.2));
  EXPECT_TRUE(next.tensor(0).allclose(at::tensor({14.0f, 28.0f}))) << next.tensor(0);
  EXPECT_TRUE(next.tensor(1).allclose(at::tensor({4.0f}))) << next.tensor(1);
  ExpectCount(next, 8);
}

TEST(TrimmedMeanTest, TwoFromEachEndLeavesTheMedian) {
  // beta = 0.4, K = 5: floor(2) = 2 dropped at each end, the middle value remains:
  //   w = (10 + 3, 20 + 9);  running_mean 1 + 2;  counts 5 + 2 = 7.
  const fl::ModelState next = FiveClientRound(*TrimmedMean(0.4));
  EXPECT_TRUE(next.tensor(0).allclose(at::tensor({13.0f, 29.0f}))) << next.tensor(0);
  EXPECT_TRUE(next.tensor(1).allclose(at::tensor({3.0f}))) << next.tensor(1);
  ExpectCount(next, 7);
}

TEST(TrimmedMeanTest, DefaultBetaTrimsNothingFromFiveClients) {
  // beta = 0.1, K = 5: floor(0.5) = 0, the plain unweighted mean:
  //   w = (10 + 22.6, 20 - 3);  running_mean 1 + 20.6;  counts round(5 + 3.6) = 9.
  const fl::ModelState next = FiveClientRound(*TrimmedMean(std::nullopt));
  EXPECT_TRUE(next.tensor(0).allclose(at::tensor({32.6f, 17.0f}))) << next.tensor(0);
  EXPECT_TRUE(next.tensor(1).allclose(at::tensor({21.6f}))) << next.tensor(1);
  ExpectCount(next, 9);
}

TEST(TrimmedMeanTest, ServerLrScalesParametersOnly) {
  // beta = 0.2, eta = 0.5: w = (10 + 0.5 * 4, 20 + 0.5 * 8); the buffers unscaled:
  // running_mean 1 + 3, counts round(5 + 8/3) = 8 (scaled, they would be 2.5 and 6).
  TrimmedMeanOptions options;
  options.set_beta(0.2);
  options.set_server_lr(0.5);
  auto created = Create(options);
  ASSERT_TRUE(created.ok()) << created.status();
  const fl::ModelState next = FiveClientRound(**created);
  EXPECT_TRUE(next.tensor(0).allclose(at::tensor({12.0f, 24.0f}))) << next.tensor(0);
  EXPECT_TRUE(next.tensor(1).allclose(at::tensor({4.0f}))) << next.tensor(1);
  ExpectCount(next, 8);
}

TEST(TrimmedMeanTest, RejectsBetaOutsideItsRangeAndAMisshapenUpdate) {
  for (double beta : {0.5, -0.1, 0.7}) {
    TrimmedMeanOptions options;
    options.set_beta(beta);
    EXPECT_EQ(Create(options).status().message(),
              absl::StrCat("options.beta: must be in [0, 0.5), got ", beta));
  }
  auto trimmed_mean = TrimmedMean(std::nullopt);
  fl::ServerContext context;
  fl::ClientUpdate good, bad;
  good.delta = State({1, 2}, 0, 0);
  bad.delta = State({1}, 0, 0);
  ASSERT_TRUE(trimmed_mean->Accumulate(std::move(good), context).ok());
  EXPECT_EQ(trimmed_mean->Accumulate(std::move(bad), context).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace aggregators
