#include <algorithm>
#include <numeric>
#include <set>
#include <vector>

#include <ATen/ATen.h>

#include "aggregators/holdout/holdout_options.pb.h"
#include "fl/client_hook.h"
#include "fl/registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace aggregators {
namespace {

std::unique_ptr<fl::ClientHook> Hook(double fraction) {
  fedkit::aggregators::HoldoutOptions options;
  options.set_fraction(fraction);
  google::protobuf::Any any;
  any.PackFrom(options);
  auto hook = fl::Registry<fl::ClientHook>::Global().Create("holdout", any);
  EXPECT_TRUE(hook.ok()) << hook.status();
  return *std::move(hook);
}

// One round of the hook on a client holding examples [0, n): what it trains on.
std::vector<int64_t> Train(fl::ClientHook& hook, fl::TensorMap& state, uint64_t seed, int n = 20) {
  std::vector<int64_t> indices(n);
  std::iota(indices.begin(), indices.end(), 0);
  const std::vector<int64_t> share = indices;
  fl::HookContext context;
  context.state = &state;
  context.seed = seed;
  context.client_indices = &share;
  context.train_indices = &indices;
  absl::Status status = hook.BeforeTraining(context);
  EXPECT_TRUE(status.ok()) << status;
  return indices;
}

std::set<int64_t> HeldOut(const std::vector<int64_t>& trained, int n = 20) {
  std::set<int64_t> held;
  for (int64_t i = 0; i < n; ++i) {
    if (std::find(trained.begin(), trained.end(), i) == trained.end()) held.insert(i);
  }
  return held;
}

TEST(HoldoutTest, HoldsOutTheSameFloorOfFractionEveryRound) {
  auto hook = Hook(0.3);
  fl::TensorMap state;
  const std::vector<int64_t> first = Train(*hook, state, /*seed=*/11);
  EXPECT_EQ(first.size(), 14u);  // 20 - floor(0.3 * 20)
  EXPECT_TRUE(std::is_sorted(first.begin(), first.end()));  // the rest keeps its order
  // Later rounds draw with other seeds; the held-out set is the stored one.
  const std::vector<int64_t> second = Train(*hook, state, /*seed=*/12);
  EXPECT_EQ(second, first);
  EXPECT_EQ(HeldOut(first).size(), 6u);
}

TEST(HoldoutTest, DiffersAcrossClients) {
  auto hook = Hook(0.3);
  fl::TensorMap client_a, client_b;
  EXPECT_NE(HeldOut(Train(*hook, client_a, 1)), HeldOut(Train(*hook, client_b, 2)));
}

TEST(HoldoutTest, FloorsTheCount) {
  auto hook = Hook(0.3);
  fl::TensorMap state;
  EXPECT_EQ(Train(*hook, state, 3, /*n=*/3).size(), 3u);  // floor(0.9) = 0 held out
  fl::TensorMap other;
  EXPECT_EQ(Train(*Hook(0.0), other, 3).size(), 20u);
}

TEST(HoldoutTest, DefaultFractionIsFedLawsThirtyPercent) {
  auto hook = fl::Registry<fl::ClientHook>::Global().Create("holdout", google::protobuf::Any());
  ASSERT_TRUE(hook.ok());
  fl::TensorMap state;
  EXPECT_EQ(Train(**hook, state, 5).size(), 14u);
}

TEST(HoldoutTest, RejectsAFractionOutsideZeroOne) {
  for (double fraction : {-0.1, 1.0}) {
    fedkit::aggregators::HoldoutOptions options;
    options.set_fraction(fraction);
    google::protobuf::Any any;
    any.PackFrom(options);
    auto hook = fl::Registry<fl::ClientHook>::Global().Create("holdout", any);
    EXPECT_EQ(hook.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(hook.status().message()),
                ::testing::HasSubstr("options.fraction: must be in [0, 1)"));
  }
}

TEST(HoldoutTest, StateThatDoesNotFitTheShareIsAnError) {
  auto hook = Hook(0.3);
  fl::TensorMap state;
  state["held_out"] = at::tensor({1, 50}, at::kLong);  // 50 is not this client's
  std::vector<int64_t> indices(20);
  std::iota(indices.begin(), indices.end(), 0);
  const std::vector<int64_t> share = indices;
  fl::HookContext context;
  context.state = &state;
  context.client_indices = &share;
  context.train_indices = &indices;
  EXPECT_EQ(hook->BeforeTraining(context).code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace aggregators
