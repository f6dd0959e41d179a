// The shared conformance suite: every registered aggregator, created through the
// registry from its default options, on one tiny fixture. Linking a new aggregator
// into :all_aggregators enrols it; there are no per-name exclusions. Properties a
// method does not claim (AggregatorProperties) are skipped by its own declaration.

#include <ATen/ATen.h>
#include <torch/utils.h>

#include "fl/aggregator.h"
#include "fl/model.h"
#include "fl/registry.h"
#include "fl/spec.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace aggregators {
namespace {

// A linear model with a float and an integer buffer, like a BatchNorm layer's.
class TinyModel : public fl::Model {
 public:
  TinyModel() {
    weight_ = register_parameter("weight", at::randn({3, 4}));
    bias_ = register_parameter("bias", at::randn({3}));
    running_ = register_buffer("running_mean", at::randn({3}));
    count_ = register_buffer("num_batches_tracked", at::tensor({7}, at::kLong));
  }
  at::Tensor Forward(const at::Tensor& x) override {
    return at::linear(x.flatten(1), weight_, bias_);
  }

 private:
  at::Tensor weight_, bias_, running_, count_;
};

class ConformanceTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    torch::manual_seed(11);
    global_ = fl::ModelState::FromModule(TinyModel());
    proxy_ = {at::randn({12, 4}), at::arange(12, at::kLong).remainder(3)};
    context_.new_model = [] { return absl::StatusOr<std::unique_ptr<fl::Model>>(std::make_unique<TinyModel>()); };
    context_.proxy = &proxy_;
    context_.round = 1;
    context_.round_seed = 5;
  }

  std::unique_ptr<fl::Aggregator> Create() {
    auto aggregator = fl::Registry<fl::Aggregator>::Global().Create(GetParam(), google::protobuf::Any());
    EXPECT_TRUE(aggregator.ok()) << aggregator.status();
    return aggregator.ok() ? *std::move(aggregator) : nullptr;
  }

  fl::ClientUpdate RandomUpdate(int64_t id, int64_t n) {
    fl::ModelState delta = global_.ZerosLike();
    for (size_t i = 0; i < delta.size(); ++i) {
      at::Tensor& t = delta.mutable_tensor(i);
      t = at::isFloatingType(t.scalar_type()) ? at::randn_like(t).mul_(0.1)
                                              : at::full_like(t, id % 3);
    }
    fl::ClientUpdate update;
    update.client_id = id;
    update.delta = std::move(delta);
    update.num_examples = n;
    update.local_steps = 5;
    return update;
  }

  // One full round: Configure, Accumulate each update (copies), Finalize.
  fl::ModelState Round(fl::Aggregator& aggregator, const fl::ModelState& global,
                       const std::vector<fl::ClientUpdate>& updates) {
    auto plan = aggregator.Configure(global, context_);
    EXPECT_TRUE(plan.ok()) << plan.status();
    for (const fl::ClientUpdate& u : updates) {
      fl::ClientUpdate copy = u;
      copy.delta = u.delta.Clone();
      absl::Status status = aggregator.Accumulate(std::move(copy), context_);
      EXPECT_TRUE(status.ok()) << status;
    }
    auto next = aggregator.Finalize(global, context_);
    EXPECT_TRUE(next.ok()) << next.status();
    return next.ok() ? *std::move(next) : global.Clone();
  }

  static void ExpectClose(const fl::ModelState& a, const fl::ModelState& b, double tol) {
    ASSERT_TRUE(a.CheckSameLayout(b).ok()) << a.CheckSameLayout(b);
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_TRUE(a.tensor(i).to(at::kDouble).allclose(b.tensor(i).to(at::kDouble), tol, tol))
          << a.entries()[i].name;
    }
  }

  fl::ModelState global_;
  fl::Examples proxy_;
  fl::ServerContext context_;
};

TEST_P(ConformanceTest, CreatesFromDefaultOptions) { EXPECT_NE(Create(), nullptr); }

TEST_P(ConformanceTest, RejectsWrongOptionsType) {
  google::protobuf::Any wrong;
  wrong.PackFrom(fedkit::ProxySpec());
  auto aggregator = fl::Registry<fl::Aggregator>::Global().Create(GetParam(), wrong);
  EXPECT_EQ(aggregator.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(aggregator.status().message(), ::testing::HasSubstr("got fedkit.ProxySpec"));
}

TEST_P(ConformanceTest, OneClientInThatClientsUpdateOut) {
  auto aggregator = Create();
  if (!aggregator->properties().single_client_identity) GTEST_SKIP() << "not claimed";
  fl::ClientUpdate update = RandomUpdate(1, 10);
  fl::ModelState expected = global_.Clone();
  expected.Axpy(1.0, update.delta);
  ExpectClose(Round(*aggregator, global_, {update}), expected, 1e-6);
}

TEST_P(ConformanceTest, ClientOrderDoesNotMatter) {
  auto aggregator = Create();
  if (!aggregator->properties().order_invariant) GTEST_SKIP() << "not claimed";
  std::vector<fl::ClientUpdate> updates = {RandomUpdate(1, 10), RandomUpdate(2, 30),
                                           RandomUpdate(3, 5)};
  fl::ModelState forward = Round(*aggregator, global_, updates);
  std::reverse(updates.begin(), updates.end());
  ExpectClose(Round(*Create(), global_, updates), forward, 1e-5);
}

TEST_P(ConformanceTest, DeterministicForFixedInputs) {
  std::vector<fl::ClientUpdate> updates = {RandomUpdate(1, 10), RandomUpdate(2, 30)};
  fl::ModelState a = Round(*Create(), global_, updates);
  fl::ModelState b = Round(*Create(), global_, updates);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(a.tensor(i).equal(b.tensor(i)));
}

TEST_P(ConformanceTest, MovesTheModelAndStaysFinite) {
  fl::ModelState next = Round(*Create(), global_, {RandomUpdate(1, 10), RandomUpdate(2, 20)});
  EXPECT_TRUE(next.AllFinite());
  EXPECT_GT(fl::ModelState::Difference(next, global_).SquaredNorm(), 0.0);
}

TEST_P(ConformanceTest, StateSurvivesSaveAndRestore) {
  auto original = Create();
  fl::ModelState after_one = Round(*original, global_, {RandomUpdate(1, 10), RandomUpdate(2, 20)});
  auto restored = Create();
  ASSERT_TRUE(restored->RestoreState(original->SaveState()).ok());
  std::vector<fl::ClientUpdate> second = {RandomUpdate(3, 15), RandomUpdate(4, 25)};
  context_.round = 2;
  ExpectClose(Round(*restored, after_one, second), Round(*original, after_one, second), 1e-6);
}

INSTANTIATE_TEST_SUITE_P(AllAggregators, ConformanceTest,
                         ::testing::ValuesIn(fl::Registry<fl::Aggregator>::Global().Names()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace aggregators
