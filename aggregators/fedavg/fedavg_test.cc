#include <ATen/ATen.h>

#include "aggregators/fedavg/fedavg_options.pb.h"
#include "fl/aggregator.h"
#include "fl/registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace aggregators {
namespace {

std::unique_ptr<fl::Aggregator> FedAvg(double server_lr) {
  fedkit::aggregators::FedAvgOptions options;
  options.set_server_lr(server_lr);
  google::protobuf::Any any;
  any.PackFrom(options);
  return *fl::Registry<fl::Aggregator>::Global().Create("fedavg", any);
}

fl::ModelState State(std::vector<float> w, std::vector<float> running, int64_t count) {
  return fl::ModelState({{"w", at::tensor(w), false},
                         {"bn.running_mean", at::tensor(running), true},
                         {"bn.num_batches_tracked", at::tensor({count}, at::kLong), true}});
}

fl::ClientUpdate Update(fl::ModelState delta, int64_t n) {
  fl::ClientUpdate update;
  update.delta = std::move(delta);
  update.num_examples = n;
  return update;
}

TEST(FedAvgTest, SizeWeightedMeanWithServerLrAgainstHandComputation) {
  // Global w = (1, 2); client A (n = 1) delta (4, 0); client B (n = 3) delta (0, -4).
  // Weighted mean delta = (1/4)(4, 0) + (3/4)(0, -4) = (1, -3);
  // with eta = 0.5: w = (1 + 0.5, 2 - 1.5) = (1.5, 0.5).
  // Buffers take the plain weighted mean of client values, unscaled by eta:
  // running_mean global 10, client values 10 + 8 and 10 + 0 -> 10 + 8/4 = 12;
  // num_batches_tracked global 5, clients +4 and +8 -> 5 + (4 + 24)/4 = 12.
  auto fedavg = FedAvg(0.5);
  fl::ServerContext context;
  fl::ModelState global = State({1, 2}, {10}, 5);
  ASSERT_TRUE(fedavg->Accumulate(Update(State({4, 0}, {8}, 4), 1), context).ok());
  ASSERT_TRUE(fedavg->Accumulate(Update(State({0, -4}, {0}, 8), 3), context).ok());
  auto next = fedavg->Finalize(global, context);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_TRUE(next->tensor(0).allclose(at::tensor({1.5f, 0.5f})));
  EXPECT_TRUE(next->tensor(1).allclose(at::tensor({12.0f})));
  EXPECT_EQ(next->tensor(2).item<int64_t>(), 12);
  // The global model passed in is left untouched.
  EXPECT_TRUE(global.tensor(0).equal(at::tensor({1.0f, 2.0f})));
}

TEST(FedAvgTest, EachRoundStartsFromEmptySums) {
  auto fedavg = FedAvg(1.0);
  fl::ServerContext context;
  fl::ModelState global = State({0, 0}, {0}, 0);
  ASSERT_TRUE(fedavg->Accumulate(Update(State({2, 2}, {0}, 0), 5), context).ok());
  ASSERT_TRUE(fedavg->Finalize(global, context).ok());
  ASSERT_TRUE(fedavg->Accumulate(Update(State({-1, 3}, {0}, 0), 2), context).ok());
  auto next = fedavg->Finalize(global, context);
  EXPECT_TRUE(next->tensor(0).allclose(at::tensor({-1.0f, 3.0f})));
}

TEST(FedAvgTest, FinalizeWithoutUpdatesIsAnError) {
  fl::ServerContext context;
  auto next = FedAvg(1.0)->Finalize(State({0, 0}, {0}, 0), context);
  EXPECT_EQ(next.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(next.status().message(), "no update accumulated this round");
}

TEST(FedAvgTest, MismatchedUpdateIsRejected) {
  auto fedavg = FedAvg(1.0);
  fl::ServerContext context;
  ASSERT_TRUE(fedavg->Accumulate(Update(State({1, 1}, {0}, 0), 1), context).ok());
  EXPECT_FALSE(fedavg->Accumulate(Update(State({1, 1, 1}, {0}, 0), 1), context).ok());
}

TEST(FedAvgTest, RejectsNonPositiveServerLr) {
  fedkit::aggregators::FedAvgOptions options;
  options.set_server_lr(-0.5);
  google::protobuf::Any any;
  any.PackFrom(options);
  auto fedavg = fl::Registry<fl::Aggregator>::Global().Create("fedavg", any);
  EXPECT_EQ(fedavg.status().message(), "options.server_lr: must be > 0, got -0.5");
}

}  // namespace
}  // namespace aggregators
